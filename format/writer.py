"""Writes .psr files: the fixed header, then self-delimiting chunks, then index and trailer.

Records are encoded elsewhere (natively); this module frames, compresses and appends them.
Every chunk is written whole and flushed, so a writer killed at any instant leaves a file
whose completed chunks can all be recovered.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import secrets
import stat
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable

import msgpack
import zstandard

from . import _constants as C
from ._codec import chunk_seq
from ._layout import ChunkHeader, Header, pack_trailer
from .errors import FormatError, OutputExistsError, PsrecError
from .reference import thread_renames as _ref_thread_renames

try:
    from ._format import thread_renames as _thread_renames
except ImportError:  # the native codec could not be built or loaded here
    _thread_renames = _ref_thread_renames

__all__ = ["PsrWriter", "Retention", "snapshot", "open_output", "open_stream", "is_stream",
           "Output", "check_link", "check_stream", "write_failed"]


# -- Where outputs go -------------------------------------------------------------------
# A name the user gives (-o) is a file, or a stream written in place: '-', one of psrec's own
# descriptors (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N), or a FIFO or character
# device that the user or root owns, reached only through links the user or root made. A
# block device, a socket, and a FIFO or device reached through another user's link or owned
# by another user are refused: in a shared folder anyone may plant them at a name psrec is
# about to write. A name psrec makes itself (a window's file, a SIGUSR1 snapshot, a temporary
# copy) is always created new (O_CREAT | O_EXCL | O_NOFOLLOW): never a stream, never written
# through a link, refused when anything holds it.

# How often a FIFO with no reader yet is tried again, in seconds.
_FIFO_POLL_S = 0.05
_TEMP_NAME = re.compile(r"\.[A-Za-z0-9_]+\.(keep|part)$")


def is_stream(path: str | os.PathLike[str]) -> bool:
    """'-' (standard output), a name of one of psrec's descriptors (/dev/stdout, /dev/fd/N,
    directly or through links), or a path that names neither a regular file nor a folder: a
    device, a pipe, a terminal, a socket. Such an output is written in place, if at all
    (check_stream says whether): nothing is replaced or removed, so no --force."""
    p = os.fspath(path)
    if p == "-" or _names_a_descriptor(p):
        return True
    try:
        mode = os.stat(p).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _descriptor(p: str) -> int | None:
    """The descriptor of psrec's own that p names (/dev/stdout, /dev/stderr, /dev/fd/N,
    /proc/self/fd/N, /proc/PID/fd/N of psrec itself), or None."""
    a = os.path.abspath(p)
    if a == "/dev/stdout":
        return 1
    if a == "/dev/stderr":
        return 2
    parts = a.split("/")
    if len(parts) == 4 and parts[1:3] == ["dev", "fd"] and parts[3].isdigit():
        return int(parts[3])
    if (len(parts) == 5 and parts[1] == "proc" and parts[3] == "fd" and parts[4].isdigit()
            and parts[2] in ("self", "thread-self", str(os.getpid()))):
        return int(parts[4])
    return None


def _follow(p: str) -> tuple[str, list[tuple[str, os.stat_result]]]:
    """The symbolic links at the end of p, followed: the last name (one that is no link, or
    that names a descriptor), and each link on the way with its own status (its owner)."""
    links: list[tuple[str, os.stat_result]] = []
    for _ in range(40):  # the kernel's own limit
        if _descriptor(p) is not None:
            break
        try:
            st = os.lstat(p)
        except OSError:
            break
        if not stat.S_ISLNK(st.st_mode):
            break
        links.append((p, st))
        p = os.path.join(os.path.dirname(p), os.readlink(p))
    return p, links


def _names_a_descriptor(p: str) -> bool:
    """/dev/stdout, /dev/fd/N, /proc/self/fd/N, or a link to one: an open file of the
    process, whatever it is (a redirected standard output may be a regular file)."""
    return _descriptor(_follow(p)[0]) is not None


def _user(uid: int) -> str:
    try:
        import pwd

        return f"user {pwd.getpwuid(uid).pw_name}"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISREG, "a file"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "a special file"


_STREAM_HELP = ("give a file name with -o; a FIFO or device is written to only if you or root "
                "own it and every link to it")


def check_stream(path: str) -> os.stat_result | None:
    """Refuses, in one line, a stream output psrec does not write to (the rule above); else
    returns the status of the FIFO or device it names (None: '-' or a descriptor of psrec's,
    written as they are)."""
    if path == "-":
        return None
    last, links = _follow(path)
    trusted = (os.geteuid(), 0)
    for name, st in links:
        if st.st_uid not in trusted:
            link = ("is a symbolic link" if name == path
                    else f"leads through the symbolic link {name}, which was")
            raise PsrecError(
                f"{path} {link} made by {_user(st.st_uid)}: psrec follows no other user's "
                "link to a FIFO, a device or a descriptor", help=_STREAM_HELP)
    if _descriptor(last) is not None:
        return None
    try:
        st = os.stat(path)
    except OSError as exc:
        raise _cannot_create(path, exc) from None
    what = _kind(st.st_mode) + (f" ({os.path.realpath(path)})" if links else "")
    if stat.S_ISBLK(st.st_mode):
        raise PsrecError(f"{path} is {what}: psrec writes no output onto a disk",
                         help=_STREAM_HELP)
    if not (stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode)):
        raise PsrecError(f"{path} is {what}: psrec writes to files, FIFOs and character "
                         "devices only", help=_STREAM_HELP)
    if st.st_uid not in trusted:
        raise PsrecError(f"{path} is {what} of {_user(st.st_uid)}: psrec writes into no other "
                         "user's FIFO or device", help=_STREAM_HELP)
    return st


def check_link(path: str) -> None:
    """Refuses an output named by a symbolic link (dangling or not) that is not a stream: the
    file would be created or replaced wherever the link points, which a link planted in a
    shared folder chooses. With force the link itself is replaced (see Output, open_output)
    and what it points to is left alone. A link to a stream is judged by check_stream."""
    if os.path.islink(path) and not is_stream(path):
        raise PsrecError(
            f"{path} is a symbolic link",
            help="pass --force to replace the link itself (what it points to is left alone), "
                 "or choose another path with -o",
        )


def open_stream(path: str, *, binary_to_terminal: bool = True,
                stopped: Callable[[], str | None] | None = None,
                waiting: Callable[[str], None] | None = None) -> BinaryIO:
    """Opens a stream output for writing, once check_stream allows it: '-' and psrec's own
    descriptors are duplicated (written at their offset, as psrec's output would be), a FIFO
    or device is opened for writing only. A FIFO no process reads yet is waited for, trying
    again every 50 ms: `waiting` is told once (with what to say); `stopped`, asked at each
    try, gives the reason to give up (a signal that ends psrec), which is raised in one line.
    Without `stopped`, Ctrl-C's KeyboardInterrupt ends the wait. binary_to_terminal: False
    refuses a terminal (asked of the descriptor opened for writing, never by reading it)."""
    checked = check_stream(path)
    n = 1 if path == "-" else _descriptor(_follow(path)[0])
    if checked is None:
        assert n is not None
        if n == 1:
            sys.stdout.flush()
        try:
            access = fcntl.fcntl(n, fcntl.F_GETFL) & os.O_ACCMODE
        except OSError:
            raise PsrecError(f"cannot write {_named(path)}: psrec has no descriptor {n} open",
                             help="give a file name with -o") from None
        if access == os.O_RDONLY:
            raise PsrecError(f"cannot write {_named(path)}: descriptor {n} is open for "
                             "reading only", help="give a file name with -o")
        fd = os.dup(n)
    else:
        fd = _open_waiting(path, checked, stopped, waiting)
    if not binary_to_terminal and os.isatty(fd):
        os.close(fd)
        raise PsrecError(f"{_named(path)} is a terminal and the output is binary",
                         help="give a file name with -o, or redirect stdout")
    return os.fdopen(fd, "wb")


def _named(path: str) -> str:
    return "standard output" if path == "-" else path


def _open_waiting(path: str, checked: os.stat_result,
                  stopped: Callable[[], str | None] | None,
                  waiting: Callable[[str], None] | None) -> int:
    """A FIFO or device, opened for writing (O_NONBLOCK: opening a FIFO with no reader fails
    at once rather than blocking where no signal could end it, and a device waits for no
    carrier), then set back to blocking writes. What was opened must be what was checked."""
    flags = os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC
    told = False
    while True:
        try:
            fd = os.open(path, flags)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO or not stat.S_ISFIFO(checked.st_mode):
                raise _cannot_create(path, exc) from None
        why = stopped() if stopped is not None else None
        if why is not None:
            raise PsrecError(f"no process opened the FIFO {path} for reading before psrec was "
                             f"{why}: nothing was written to it")
        if not told:
            told = True
            message = (f"waiting for a process to open the FIFO {path} for reading "
                       "(Ctrl-C stops)")
            if waiting is not None:
                waiting(message)
            else:
                print(f"psrec: {message}", file=sys.stderr, flush=True)
        time.sleep(_FIFO_POLL_S)
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != (checked.st_dev, checked.st_ino):
        os.close(fd)
        raise PsrecError(f"{path} changed while psrec opened it", help=_STREAM_HELP)
    os.set_blocking(fd, True)
    return fd


def _cannot_create(p: str, exc: OSError) -> PsrecError:
    """The one-line error for an output that cannot be created or opened."""
    if isinstance(exc, FileNotFoundError):
        return PsrecError(
            f"cannot create {p}: folder {os.path.dirname(p) or '.'} does not exist",
            help="create the folder first or choose another path with -o")
    if isinstance(exc, PermissionError):
        return PsrecError(f"cannot create {p}: permission denied",
                          help="choose a folder you can write to with -o")
    if isinstance(exc, IsADirectoryError):
        return PsrecError(f"{p} is a directory", help="give a file name with -o")
    why = exc.strerror or str(exc)
    return PsrecError(f"cannot create {p}: {why[:1].lower() + why[1:]}",
                      help=("free some space, or write to another disk with -o"
                            if exc.errno in (errno.ENOSPC, errno.EDQUOT) else None))


def _temp_file(path: str, suffix: str, mode: int = 0o600) -> tuple[int, str]:
    """A new file beside path, named .NAME.XXXXXXXX.SUFFIX and created for writing with
    O_EXCL and O_NOFOLLOW: never a file, link or FIFO that was there. Returns its descriptor
    and its name."""
    folder, base = os.path.split(os.path.abspath(path))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        temp = os.path.join(folder, f".{base}.{secrets.token_hex(4)}{suffix}")
        try:
            return os.open(temp, flags, mode), temp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name beside it", path)


def _taken(p: str, generated: bool) -> PsrecError:
    """The error for a name something holds already."""
    if not generated:
        return OutputExistsError(p)
    try:
        what = _kind(os.lstat(p).st_mode)
    except OSError:
        what = "a file"
    return PsrecError(f"cannot create {p}: {what} is there")


def _create(p: str, replace: bool, generated: bool = False) -> BinaryIO:
    """A new file at p, opened for writing: created with O_EXCL and O_NOFOLLOW, so that
    nothing planted at p (a link, a FIFO, a hard link to another file) is ever written to.
    replace: whatever holds p is replaced, by renaming a new file over it (a link is
    replaced itself; a name psrec made is replaced only where a file or a link holds it)."""
    try:
        if not replace:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            return os.fdopen(os.open(p, flags, 0o666), "wb")
        if generated:
            try:
                held = os.lstat(p).st_mode
            except FileNotFoundError:
                held = stat.S_IFREG
            if not (stat.S_ISREG(held) or stat.S_ISLNK(held)):
                raise _taken(p, generated)
        fd, temp = _temp_file(p, ".part", 0o666)
        try:
            os.rename(temp, p)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(temp)
            except OSError:
                pass
            raise
        return os.fdopen(fd, "wb")
    except FileExistsError:
        raise _taken(p, generated) from None
    except OSError as exc:
        raise _cannot_create(p, exc) from None


class Output:
    """Where an output goes, so that a failed write destroys nothing: a regular file is
    written beside its final name and takes it only once complete (an existing file is
    replaced only with force; so is a link, itself, never what it points to); a stream
    ('-', a device, a pipe: see check_stream) is written in place. Only what psrec created is
    ever removed. generated: the name is psrec's own (a SIGUSR1 snapshot): never a stream,
    never replaced, refused if anything holds it."""

    def __init__(self, path: str | os.PathLike[str], force: bool = False,
                 binary_to_terminal: bool = True, *, generated: bool = False) -> None:
        self.path = os.fspath(path)
        self._temp: str | None = None
        self._force = force and not generated
        if not generated and (self.path == "-" or is_stream(self.path)):
            self.file: BinaryIO = open_stream(self.path, binary_to_terminal=binary_to_terminal)
            return
        if os.path.isdir(self.path) and not os.path.islink(self.path):
            raise PsrecError(f"{self.path} is a directory", help="give a file name with -o")
        if not self._force:
            if not generated:
                check_link(self.path)
            if os.path.lexists(self.path):
                raise _taken(self.path, generated)
        # The link itself is the final name: renaming over it replaces the link.
        final = os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(self.path))),
                             os.path.basename(self.path))
        folder = os.path.dirname(final) or "."
        if not os.path.isdir(folder):
            raise PsrecError(
                f"cannot create {self.path}: folder {folder} does not exist",
                help="create the folder first or choose another path with -o",
            )
        try:
            fd, self._temp = _temp_file(final, ".part")
        except OSError as exc:
            raise _cannot_create(self.path, exc) from None
        self._final = final
        self._generated = generated
        self.file = os.fdopen(fd, "wb")

    @property
    def in_place(self) -> bool:
        return self._temp is None

    def commit(self) -> None:
        """The output is complete: it takes its name (without force, only if the name is
        still free: a hard link made with no replacing, so that nothing that came to hold
        the name meanwhile is replaced)."""
        if self._temp is not None:
            self.file.flush()
            os.fchmod(self.file.fileno(), 0o666 & ~_umask())
        self.file.close()
        if self._temp is None:
            return
        temp, self._temp = self._temp, None
        try:
            if self._force:
                os.replace(temp, self._final)
                return
            try:
                os.link(temp, self._final, follow_symlinks=False)
            except FileExistsError:
                raise _taken(self.path, self._generated) from None
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
                    raise
                # A file system without hard links: the name is taken as it was checked.
                if os.path.lexists(self._final):
                    raise _taken(self.path, self._generated) from None
                os.rename(temp, self._final)
                return
            os.unlink(temp)
        except BaseException:
            try:
                os.unlink(temp)
            except OSError:
                pass
            raise

    def discard(self) -> None:
        """The output failed: what psrec created is removed, nothing else."""
        try:
            self.file.close()
        except OSError:
            pass
        if self._temp is not None:
            try:
                os.unlink(self._temp)
            except OSError:
                pass
            self._temp = None


def write_failed(path: str, exc: BaseException) -> PsrecError | None:
    """The one-line error for an output that could not be written (a full disk, a quota, an
    I/O error), or None for any other failure, which keeps its own report. Errors psrec
    already words (they may be OSErrors too) are left as they are."""
    if not isinstance(exc, OSError) or isinstance(exc, PsrecError) or not exc.strerror:
        return None
    why = exc.strerror[:1].lower() + exc.strerror[1:]
    help = ("free some space, or write to another disk with -o"
            if exc.errno in (errno.ENOSPC, errno.EDQUOT) else None)
    return PsrecError(f"cannot write {path}: {why}", help=help)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def open_output(path: str | os.PathLike[str], force: bool = False, *,
                generated: bool = False, binary_to_terminal: bool = True,
                stopped: Callable[[], str | None] | None = None,
                waiting: Callable[[str], None] | None = None) -> BinaryIO:
    """Opens path for writing where it will stay (a recording, written chunk by chunk); refuses
    to overwrite it unless force, with errors that help. A stream is opened in place as
    open_stream does (`stopped`, `waiting`, binary_to_terminal are its); a file is created
    new (see _create), never through a link: with force a link or file there is replaced by
    the new file. generated: the name is psrec's own (a window's file): never a stream, and
    refused if anything but a file or a link (with force) holds it."""
    p = os.fspath(path)
    if not generated and (p == "-" or is_stream(p)):
        return open_stream(p, binary_to_terminal=binary_to_terminal, stopped=stopped,
                           waiting=waiting)
    if not force and not generated:
        check_link(p)
    return _create(p, force, generated)


def _holds_renames(raw: bytes) -> bool:
    """Whether a DATA payload holds a THREAD_RENAME record (or cannot be read to tell): the
    index lists those chunks, so that a window reads the others' renames not at all."""
    try:
        return bool(_thread_renames(raw, 1))
    except Exception:  # noqa: BLE001 - a second rename, or records that do not read
        return True


@dataclass(frozen=True)
class Retention:
    """What a flight recording keeps on disk (spec section 7.1): the samples of the last
    `seconds` and/or at most `max_bytes` in all. The oldest DATA chunks are dropped, whole,
    by writing the file anew beside its name (its header, METADATA, every DEFS chunk, the
    DATA chunks kept) and renaming it over the old one: whoever opens the name at any moment
    finds a whole recording, never one being cut."""

    seconds: float | None = None
    max_bytes: int | None = None

    # Past `seconds`, a file is written anew once its oldest chunk is this share of `seconds`
    # older than the bound: each rewrite copies the file, so its cost is spread over that time.
    SLACK = 1 / 20
    # A file over `max_bytes` is cut to this share of it, for the same reason.
    CUT_TO = 0.9


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _record(rtype: int, *fields: int) -> bytes:
    """A record of varint fields (spec section 3)."""
    body = b"".join(_varint(f) for f in fields)
    return bytes([rtype]) + _varint(len(body)) + body


def _remove_stale_copies(path: str) -> None:
    """The copies a recorder killed at the wrong moment left beside path: .NAME.XXXX.keep (a
    flight recording being written anew) and .NAME.XXXX.part (a file being created over an
    old one with --force). A new recording under that name makes them worthless. Only
    files and links are removed (unlinked: nothing they point to), and only names of that
    form, which no reader takes for a recording (they do not end in .psr)."""
    folder, base = os.path.split(os.path.abspath(path))
    prefix = f".{base}"
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if not (name.startswith(prefix) and _TEMP_NAME.fullmatch(name[len(prefix):])):
            continue
        full = os.path.join(folder, name)
        try:
            if stat.S_ISDIR(os.lstat(full).st_mode):
                continue
            os.unlink(full)
        except OSError:
            pass


class PsrWriter:
    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        metadata: dict[str, Any],
        created_wall_ns: int,
        created_mono_ns: int,
        tick_ns: int = 1000,
        force: bool = False,
        level: int = 3,
        retention: Retention | None = None,
        new_epoch: Callable[[], None] | None = None,
        generated: bool = False,
        stopped: Callable[[], str | None] | None = None,
        waiting: Callable[[str], None] | None = None,
    ) -> None:
        """new_epoch: asks the encoder to begin a new epoch of definitions (spec 7.4), so that
        the file may drop those of older ones; without it, every DEFS chunk is kept.
        generated: path is a name psrec made (a window's file), created new and never a
        stream (see open_output). stopped, waiting: for a FIFO with no reader yet, what ends
        the wait and who is told of it (see open_stream)."""
        self.path = os.fspath(path)
        # Written where it will stay, chunk by chunk, so that a writer killed at any point
        # leaves a readable file at its name; '-' and other streams in place (check_stream).
        self._in_place = not generated and (self.path == "-" or is_stream(self.path))
        if self._in_place and retention is not None:
            raise PsrecError(f"{self.path} is a stream: a flight recording drops its oldest "
                             "chunks, which a stream cannot take back",
                             help="give a file name with -o")
        self._file = open_output(self.path, force, generated=generated, binary_to_terminal=False,
                                 stopped=stopped, waiting=waiting)
        self._zstd = zstandard.ZstdCompressor(level=level, write_content_size=True)
        self.retention = retention
        if not self._in_place:
            _remove_stale_copies(self.path)
        self._closed = False
        self.metadata = metadata
        self.header = Header(
            C.FORMAT_MAJOR, C.FORMAT_MINOR, created_wall_ns, created_mono_ns, tick_ns
        )
        self._start()
        self._names: dict[int, tuple[int, int]] = {}  # thread ref -> last rename (ts, name)
        self._exits: dict[int, int] = {}  # of those threads, the ones that exited: ref -> ts
        self._new_epoch = new_epoch
        self._epoch = 0  # the newest epoch a chunk was written in
        self._asked = -1  # the epoch in which a new one was last asked for
        self._last_seq = 0  # the highest DATA sequence number written
        self.dropped_chunks = 0  # DATA chunks dropped by the retention (all files)
        self.dropped_samples = 0
        # Rewrites that could not be made (a full disk): the file went on past its bound.
        self.rewrite_failures = 0
        self.rewrite_error: str | None = None  # why the last rewrite failed (None: it worked)
        try:
            self._write(self._prefix())
            self._file.flush()
        except OSError:
            # Not even the header and metadata could be written (a disk full from the start):
            # the empty or torn file psrec just created holds nothing, and is removed.
            self.abandon()
            if not self._in_place:
                try:
                    os.unlink(self.path)
                except OSError:
                    pass
            raise

    def _start(self) -> None:
        """The counts of a file just begun."""
        # One entry per chunk written: [offset, type, first_ts, last_ts, passes, samples]
        self._index: list[list[int]] = []
        self._sizes: list[int] = []  # each chunk's bytes, header included
        self._epochs: list[int] = []  # each chunk's epoch of definitions (-1: of none)
        self._renamed: list[int] = []  # offsets of the DATA chunks that rename a thread
        self.bytes_written = 0
        self.samples = 0
        self.passes = 0

    def _prefix(self) -> bytes:
        """The file header and the METADATA chunk: how every file of the recording begins."""
        meta = self._pack(C.CHUNK_METADATA, msgpack.packb(self.metadata, use_bin_type=True))
        self._index.append([C.HEADER_SIZE, C.CHUNK_METADATA, 0, 0, 0, 0])
        self._sizes.append(len(meta))
        self._epochs.append(-1)
        return self.header.pack() + meta

    def _write(self, data: bytes) -> None:
        self._file.write(data)
        self.bytes_written += len(data)

    def _pack(self, ctype: int, raw: bytes) -> bytes:
        """One chunk: its header and its zstandard payload."""
        payload = self._zstd.compress(raw)
        return ChunkHeader(ctype, C.CHUNK_FLAG_ZSTD, len(payload), len(raw),
                           zlib.crc32(payload)).pack() + payload

    def _append(self, chunk: bytes, entry: list[int], renames: bool, flush: bool,
                epoch: int = -1) -> int:
        offset = self.bytes_written
        self._write(chunk)
        if flush:
            self._file.flush()
        self._index.append([offset, *entry])
        self._sizes.append(len(chunk))
        self._epochs.append(epoch)
        if renames:
            self._renamed.append(offset)
        return offset

    def write_chunk(
        self,
        ctype: int,
        raw: bytes,
        *,
        first_ts: int = 0,
        last_ts: int = 0,
        passes: int = 0,
        samples: int = 0,
        flush: bool = True,
    ) -> int:
        """Appends one chunk; returns its offset."""
        if self._closed:
            raise FormatError(f"{self.path}: write after close")
        return self._append(self._pack(ctype, raw), [ctype, first_ts, last_ts, passes, samples],
                            ctype == C.CHUNK_DATA and self._note_renames(raw), flush)

    def _note_renames(self, raw: bytes) -> bool:
        """Whether a DATA payload renames a thread (for the index), noting each thread's last
        name: a file begun anew (a flight recording, a window) carries them, whatever chunk
        held them. Also notes the chunk's sequence number."""
        seq = chunk_seq(raw)
        if seq is not None:
            self._last_seq = max(self._last_seq, seq)
        try:
            events = _thread_renames(raw, exits=True)
        except Exception:  # noqa: BLE001 - records that do not read: listed, as _holds_renames
            return True
        renamed = False
        for rtype, ts, ref, name, _ in events:
            if rtype == C.REC_THREAD_RENAME:
                self._names[ref] = (ts, name)
                self._exits.pop(ref, None)
                renamed = True
            elif ref in self._names:
                self._exits[ref] = ts
        return renamed

    def write_sealed(
        self, defs: bytes, data: bytes, first_ts: int, last_ts: int, passes: int, samples: int,
        epoch: int = 0,
    ) -> None:
        """Appends a sealed chunk pair from the native encoder: definitions, then data, of
        definitions' epoch `epoch`. With a retention, the oldest DATA chunks are dropped first
        where the pair would pass it."""
        if self._closed:
            raise FormatError(f"{self.path}: write after close")
        defs_chunk = self._pack(C.CHUNK_DEFS, defs) if defs else b""
        data_chunk = self._pack(C.CHUNK_DATA, data) if data else b""
        self._epoch = max(self._epoch, epoch)
        if self.retention is not None and data:
            self._make_room(len(defs_chunk) + len(data_chunk), last_ts, epoch)
        if defs:
            self._append(defs_chunk, [C.CHUNK_DEFS, 0, 0, 0, 0], False, flush=not data,
                         epoch=epoch)
        if data:
            self._append(data_chunk, [C.CHUNK_DATA, first_ts, last_ts, passes, samples],
                         self._note_renames(data), flush=True, epoch=epoch)
            self.samples += samples
            self.passes += passes

    # -- flight recording and windows ----------------------------------------------------
    def _make_room(self, incoming: int, newest_ts: int, epoch: int) -> None:
        """Drops the oldest DATA chunks the retention no longer keeps, once enough of them
        are due (Retention.SLACK, CUT_TO), before `incoming` bytes ending at `newest_ts` (of
        epoch `epoch`), and the DEFS chunks of the epochs no DATA chunk kept is of."""
        r = self.retention
        assert r is not None
        data = [i for i, e in enumerate(self._index) if e[1] == C.CHUNK_DATA]
        drop = 0
        if r.seconds is not None and data:
            ticks = r.seconds * 1e9 / self.header.tick_ns
            horizon = newest_ts - ticks
            # A chunk of no passes (the names carried at the front of a file begun anew) goes
            # with the chunks after it: the next file carries its names again.
            index = self._index
            while drop < len(data) and (not index[data[drop]][4]
                                        or index[data[drop]][3] < horizon):
                drop += 1
            oldest = next((index[i][3] for i in data if index[i][4]), newest_ts)
            if not any(index[i][4] for i in data[:drop]) or \
                    oldest >= horizon - ticks * r.SLACK:
                drop = 0  # not due yet
        if r.max_bytes is not None and self.bytes_written + incoming > r.max_bytes:
            need = self.bytes_written + incoming - int(r.max_bytes * r.CUT_TO)
            freed = sum(self._sizes[i] for i in data[:drop])
            while drop < len(data) and freed < need:
                freed += self._sizes[data[drop]]
                drop += 1
        if not drop:
            return
        gone = set(data[:drop])
        since = self._since(data[drop:], epoch)
        kept = self._read([i for i, e in enumerate(self._index)
                           if (e[1] == C.CHUNK_DEFS and self._epochs[i] >= since)
                           or (e[1] == C.CHUNK_DATA and i not in gone)])
        first_kept = next((self._index[i][2] for i in data[drop:] if self._index[i][4]), None)
        last_dropped = self._read([data[drop - 1]])[0][1]
        seq = chunk_seq(zstandard.ZstdDecompressor().decompress(
            last_dropped[C.CHUNK_HEADER_SIZE:])) or 0
        dropped = (sum(1 for i in gone if self._index[i][4]),
                   sum(self._index[i][5] for i in gone))
        # What the rewrite replaces, to go on as before when it cannot be made.
        state = (self._file, self._index, self._sizes, self._epochs, self._renamed,
                 self.bytes_written, self.samples, self.passes, dict(self._names),
                 dict(self._exits))
        folder = os.path.dirname(os.path.abspath(self.path))
        temp = None
        try:
            fd, temp = tempfile.mkstemp(prefix=f".{os.path.basename(self.path)}.",
                                        suffix=".keep", dir=folder)
            self._begin(os.fdopen(fd, "wb"), kept, seq, first_kept)
            os.chmod(temp, 0o666 & ~_umask())
            os.replace(temp, self.path)
        except BaseException as exc:
            if self._file is not state[0]:
                try:
                    self._file.close()
                except OSError:
                    pass
            if temp is not None:
                try:
                    os.unlink(temp)
                except OSError:
                    pass
            (self._file, self._index, self._sizes, self._epochs, self._renamed,
             self.bytes_written, self.samples, self.passes, self._names,
             self._exits) = state
            if not isinstance(exc, OSError):
                raise
            # (A full disk, a folder made unwritable: the file stays whole as it was, past
            # its bound until a rewrite can be made; the recording goes on.)
            self.rewrite_failures += 1
            self.rewrite_error = exc.strerror or str(exc)
            return
        state[0].close()
        self.rewrite_error = None  # (rewrite_failures counts every one that failed)
        # (A chunk of carried names is no chunk of samples: the next file carries it again.)
        self.dropped_chunks += dropped[0]
        self.dropped_samples += dropped[1]
        self._ask_epoch(since)

    def _since(self, kept_data: list[int], incoming: int) -> int:
        """The oldest epoch of definitions the DATA chunks kept (positions in the index) and
        the chunk coming (of epoch `incoming`) use: older DEFS chunks may go (spec 7.4)."""
        if self._new_epoch is None:
            return -1  # an encoder without epochs: every definition is needed
        return min([self._epochs[i] for i in kept_data if self._index[i][4]] + [incoming])

    def _ask_epoch(self, since: int) -> None:
        """Once every chunk kept is of the newest epoch, asks for the next one: the file then
        holds the definitions of at most two epochs (and no DEFS chunk is written twice)."""
        if self._new_epoch is not None and since >= self._epoch and self._asked < self._epoch:
            self._asked = self._epoch
            self._new_epoch()

    def _read(self, chosen: list[int]) -> list[tuple[list[int], bytes, bool, int]]:
        """The chunks `chosen` (positions in the index) as the current file holds them."""
        self._file.flush()
        src = os.open(f"/proc/self/fd/{self._file.fileno()}", os.O_RDONLY | os.O_CLOEXEC)
        try:
            return [(self._index[i][1:], os.pread(src, self._sizes[i], self._index[i][0]),
                     self._index[i][0] in self._renamed, self._epochs[i]) for i in chosen]
        finally:
            os.close(src)

    def _begin(self, file: BinaryIO, chunks: list[tuple[list[int], bytes, bool, int]],
               seq: int, since_ts: int | None) -> None:
        """Goes on in `file`: the header, METADATA, the DEFS of `chunks`, the names carried,
        then the DATA of `chunks` (spec section 7), copied as they are. since_ts: the first
        time the file holds samples of (None: none before what comes)."""
        self._file = file
        self._start()
        self._write(self._prefix())
        for entry, chunk, renames, epoch in chunks:
            if entry[0] == C.CHUNK_DEFS:
                self._append(chunk, entry, renames, flush=False, epoch=epoch)
        self._carry_names(seq, since_ts)
        for entry, chunk, renames, epoch in chunks:
            if entry[0] != C.CHUNK_DEFS:
                self._append(chunk, entry, renames, flush=False, epoch=epoch)
                self.samples += entry[4]
                self.passes += entry[3]
        self._file.flush()

    def _carry_names(self, seq: int, since_ts: int | None) -> None:
        """Writes, after the definitions, a DATA chunk of no passes that gives each thread
        renamed so far its last name (its THREAD_RENAMEs at their times), under the sequence
        number `seq` of a chunk the new file does not hold (spec section 7.1). A thread that
        exited before since_ts (before what comes, when None) is no longer named."""
        for ref, ts in list(self._exits.items()):
            if since_ts is None or ts < since_ts:
                del self._exits[ref], self._names[ref]
        if not self._names:
            return
        body = bytearray()
        first = min(ts for ts, _ in self._names.values())
        body += _record(C.REC_BEGIN, seq, first, 0)
        for ref, (ts, name) in sorted(self._names.items(), key=lambda kv: kv[1][0]):
            body += _record(C.REC_THREAD_RENAME, ref, ts, name)
        last = max(ts for ts, _ in self._names.values())
        self._append(self._pack(C.CHUNK_DATA, bytes(body)), [C.CHUNK_DATA, first, last, 0, 0],
                     True, flush=False)

    def rotate(self, path: str, stats: dict[str, Any] | None = None, force: bool = False,
               metadata: dict[str, Any] | None = None, epoch: int = 0) -> None:
        """Goes on in a new file at `path`, a name psrec made (a window's: created new, see
        open_output), which begins with the header, METADATA (`metadata`, if given) and the
        definitions of epoch `epoch` on (that of the next chunk; all definitions so far when
        the encoder has no epochs: spec 7.4), so that each file reads alone (spec section
        7.2); then closes the current file (with `stats`, its index and trailer).

        The new file is begun before the current one is closed: when it cannot be created or
        begun (its folder not writable, its name taken, the disk full), PsrecError is raised,
        nothing of it is left, and the current file goes on as it was, open."""
        if self._closed:
            raise FormatError(f"{self.path}: write after close")
        new = _create(path, force, generated=True)
        since = self._since([], epoch)
        current = self._state()
        try:
            defs = self._read([i for i, e in enumerate(self._index)
                               if e[1] == C.CHUNK_DEFS and self._epochs[i] >= since])
            self.path = path
            if metadata is not None:
                self.metadata = metadata
            self._begin(new, defs, self._last_seq, None)
        except BaseException as exc:
            self._restore(current)
            try:
                new.close()
            except OSError:
                pass
            try:
                os.unlink(path)
            except OSError:
                pass
            if isinstance(exc, OSError):
                failed = write_failed(path, exc)
                if failed is not None:
                    raise failed from None
            raise
        begun = self._state()
        self._restore(current)
        try:
            self._finish(stats)
        finally:
            self._restore(begun)
        _remove_stale_copies(path)
        self._ask_epoch(since)

    # What a file being written is, apart from the recording's own state (rotate swaps it).
    _FILE_STATE = ("_file", "path", "metadata", "_index", "_sizes", "_epochs", "_renamed",
                   "bytes_written", "samples", "passes")

    def _state(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._FILE_STATE}

    def _restore(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)

    def _finish(self, stats: dict[str, Any] | None) -> None:
        """Writes STATS, the index and the trailer, and closes the file."""
        try:
            if stats is not None:
                self.write_chunk(C.CHUNK_STATS, msgpack.packb(stats, use_bin_type=True))
            index = {"chunks": self._index, "renames": self._renamed}
            index_offset = self.write_chunk(
                C.CHUNK_INDEX, msgpack.packb(index, use_bin_type=True), flush=False
            )
            data_chunks = sum(1 for e in self._index if e[1] == C.CHUNK_DATA)
            self._write(pack_trailer(index_offset, data_chunks))
            self._file.flush()
        finally:
            self._file.close()

    def close(self, stats: dict[str, Any] | None = None) -> None:
        """Writes final statistics, the index and the trailer. Safe to call twice."""
        if self._closed:
            return
        try:
            self._finish(stats)
        finally:
            self._closed = True

    def abandon(self) -> None:
        """Closes the file without index or trailer, as a killed writer would leave it. What
        cannot be written any more (a full disk) is dropped: every chunk written whole stays."""
        if not self._closed:
            self._closed = True
            try:
                self._file.close()
            except OSError:
                pass

    def __enter__(self) -> PsrWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def snapshot(source: str | os.PathLike[str], output: str | os.PathLike[str],
             force: bool = False, only: slice | None = None,
             running: bool | None = None, generated: bool = False) -> tuple[int, int]:
    """Writes a closed copy of a recording, running or not (spec section 7.3): its header, and
    every chunk it holds whole at this moment (its METADATA, DEFS and DATA chunks, in file
    order; a DATA chunk only if it decodes), then an index and the trailer. The source is
    read through one open file, so a flight recording renamed over meanwhile is copied as it
    was. only: these of the DATA chunks that decode (by their order), for a part of the
    recording that reads alone. running: whether a recorder still writes the source (None:
    not known); the copy's METADATA says what it is a snapshot of, when it was taken and,
    of a running recording, how much of it up to then it leaves out (`part`). Returns the
    DATA chunks and thread-samples copied."""
    import time

    from .reader import open_recording

    taken_wall_ns, taken_mono_ns = time.time_ns(), time.monotonic_ns()
    with open_recording(source) as rec:
        summary: dict[int, tuple[int, int, int, int]] = {}
        stream = rec.stream()
        for batch in stream:
            assert stream.current is not None
            s = stream.summaries[-1]
            summary[stream.current.offset] = (s["first_ts"], s["last_ts"], s["passes"], len(batch))
        if only is not None:
            summary = {off: summary[off] for off in list(summary)[only]}
        last_ts = max((v[1] for v in summary.values() if v[2]), default=None)
        part = _snapshot_part(rec, os.fspath(source), taken_wall_ns, taken_mono_ns, last_ts,
                              running, only is not None)
        out = Output(output, force, generated=generated)
        try:
            out.file.write(rec.header.pack())
            at = C.HEADER_SIZE
            index: list[list[int]] = []
            renamed: list[int] = []
            for info in rec.chunks:
                if info.type in (C.CHUNK_STATS, C.CHUNK_INDEX):
                    continue  # the source's own end, if it has one: the copy gets its own
                if info.type == C.CHUNK_DATA and info.offset not in summary:
                    continue  # damaged, or a repeat of an earlier chunk
                chunk = rec.raw_chunk(info)
                if info.type == C.CHUNK_METADATA:
                    chunk = _pack_map(C.CHUNK_METADATA, {**rec.metadata, "part": part})
                entry = [at, info.type, 0, 0, 0, 0]
                if info.type == C.CHUNK_DATA:
                    entry[2:] = summary[info.offset]
                    payload = rec.payload(info)
                    if payload is not None and _holds_renames(payload):
                        renamed.append(at)
                out.file.write(chunk)
                index.append(entry)
                at += len(chunk)
            data = [e for e in index if e[1] == C.CHUNK_DATA]
            out.file.write(_pack_map(C.CHUNK_INDEX, {"chunks": index, "renames": renamed}))
            out.file.write(pack_trailer(at, len(data)))
            out.commit()
        except BaseException:
            out.discard()
            raise
        return len(data), sum(e[5] for e in data)


def _pack_map(ctype: int, value: dict[str, Any]) -> bytes:
    """A chunk of one msgpack map (METADATA, INDEX), compressed."""
    raw = msgpack.packb(value, use_bin_type=True)
    payload = zstandard.ZstdCompressor(level=3, write_content_size=True).compress(raw)
    return ChunkHeader(ctype, C.CHUNK_FLAG_ZSTD, len(payload), len(raw),
                       zlib.crc32(payload)).pack() + payload


def _snapshot_part(rec: Any, source: str, taken_wall_ns: int, taken_mono_ns: int,
                   last_ts: int | None, running: bool | None, cut: bool) -> dict[str, Any]:
    """METADATA `part` of a snapshot (spec sections 2 and 7.3). Of a recording still being
    written on this host, `left_out_s` is the time from its last pass copied to the moment
    of the copy (both CLOCK_MONOTONIC: the header's creation time and this one's clock)."""
    import socket

    part: dict[str, Any] = {"kind": "part" if cut else "snapshot",
                            "of": os.path.abspath(source), "taken_wall_ns": taken_wall_ns,
                            "running": running}
    if isinstance(rec.metadata.get("part"), dict):
        part["of_part"] = rec.metadata["part"]
    if last_ts is not None:
        part["last_s"] = last_ts * rec.tick_ns / 1e9
    if running and last_ts is not None and rec.metadata.get("hostname") == socket.gethostname():
        last_mono = rec.header.created_mono_ns + last_ts * rec.tick_ns
        if last_mono <= taken_mono_ns:
            part["left_out_s"] = (taken_mono_ns - last_mono) / 1e9
    return part
