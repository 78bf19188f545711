"""Writes .psr files: the fixed header, then self-delimiting chunks, then index and trailer.

Records are encoded elsewhere (natively); this module frames, compresses and appends them.
Every chunk is written whole and flushed, so a writer killed at any instant leaves a file
whose completed chunks can all be recovered.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
import zlib
from typing import Any, BinaryIO

import msgpack
import zstandard

from . import _constants as C
from ._layout import ChunkHeader, Header, pack_trailer
from .errors import FormatError, OutputExistsError, PsrecError
from .reference import thread_renames as _ref_thread_renames

try:
    from ._format import thread_renames as _thread_renames
except ImportError:  # the native codec could not be built or loaded here
    _thread_renames = _ref_thread_renames

__all__ = ["PsrWriter", "open_output", "is_stream", "Output", "check_link", "write_failed"]


def is_stream(path: str | os.PathLike[str]) -> bool:
    """'-' (standard output), or a path that names no regular file: a device (/dev/null), a
    pipe or a terminal, directly or through links (/dev/stdout). Output there is written in
    place: nothing is replaced or removed, and nothing is lost by writing, so no --force."""
    p = os.fspath(path)
    if p == "-" or _names_a_descriptor(p):
        return True
    try:
        return not stat.S_ISREG(os.stat(p).st_mode) and not stat.S_ISDIR(os.stat(p).st_mode)
    except OSError:
        return False


def _names_a_descriptor(p: str) -> bool:
    """/dev/stdout, /dev/fd/N, /proc/self/fd/N, or a link to one: an open file of the
    process, whatever it is (a redirected standard output may be a regular file)."""
    for _ in range(8):
        parts = os.path.abspath(p).split("/")
        if parts[1:2] == ["proc"] and len(parts) == 5 and parts[3] == "fd":
            return True
        if parts[1:3] == ["dev", "fd"] or p in ("/dev/stdout", "/dev/stderr"):
            return True
        if not os.path.islink(p):
            return False
        p = os.path.join(os.path.dirname(p), os.readlink(p))
    return False


def check_link(path: str) -> None:
    """Refuses an output named by a symbolic link (dangling or not) that is not a stream: the
    file would be created or replaced wherever the link points, which a link planted in a
    shared folder chooses. With force the link itself is replaced (see Output, open_output)
    and what it points to is left alone. Links to a stream (/dev/null, /dev/stdout) are fine:
    they are written in place and replace nothing."""
    if os.path.islink(path) and not is_stream(path):
        raise PsrecError(
            f"{path} is a symbolic link",
            help="pass --force to replace the link itself (what it points to is left alone), "
                 "or choose another path with -o",
        )


class Output:
    """Where an output goes, so that a failed write destroys nothing: a regular file is
    written beside its final name and renamed over it only once complete (an existing file
    is replaced only with force; so is a link, itself, never what it points to); a stream
    ('-', a device, a pipe) is written in place. Only what psrec created is ever removed."""

    def __init__(self, path: str | os.PathLike[str], force: bool = False,
                 binary_to_terminal: bool = True) -> None:
        self.path = os.fspath(path)
        self._temp: str | None = None
        if self.path == "-":
            if not binary_to_terminal and sys.stdout.isatty():
                raise PsrecError("the output is binary and stdout is a terminal",
                                 help="give a file name with -o, or redirect stdout")
            sys.stdout.flush()
            self.file: BinaryIO = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
            return
        if is_stream(self.path):
            if not binary_to_terminal and os.path.exists(self.path):
                with open(self.path, "rb") as probe:
                    if probe.isatty():
                        raise PsrecError(f"{self.path} is a terminal and the output is binary",
                                         help="give a file name with -o")
            self.file = open_output(self.path, force=True)
            return
        if not force:
            check_link(self.path)
            if os.path.lexists(self.path):
                raise OutputExistsError(self.path)
        # The link itself is the final name: renaming over it replaces the link.
        final = os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(self.path))),
                             os.path.basename(self.path))
        # The checks and messages of open_output, on the final name, without creating it.
        folder = os.path.dirname(final) or "."
        if os.path.isdir(final) and not os.path.islink(final):
            raise PsrecError(f"{self.path} is a directory", help="give a file name with -o")
        if not os.path.isdir(folder):
            raise PsrecError(
                f"cannot create {self.path}: folder {folder} does not exist",
                help="create the folder first or choose another path with -o",
            )
        try:
            fd, self._temp = tempfile.mkstemp(
                prefix=f".{os.path.basename(final)}.", suffix=".part", dir=folder)
        except PermissionError:
            raise PsrecError(
                f"cannot create {self.path}: permission denied",
                help="choose a folder you can write to with -o",
            ) from None
        except OSError as exc:
            raise PsrecError(f"cannot create {self.path}: {exc.strerror}") from None
        self._final = final
        self.file = os.fdopen(fd, "wb")

    @property
    def in_place(self) -> bool:
        return self._temp is None

    def commit(self) -> None:
        """The output is complete: it takes its name."""
        self.file.close()
        if self._temp is not None:
            os.chmod(self._temp, 0o666 & ~_umask())
            os.replace(self._temp, self._final)
            self._temp = None

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


def open_output(path: str | os.PathLike[str], force: bool = False) -> BinaryIO:
    """Opens path for writing; refuses to overwrite it unless force, with errors that help.
    A symbolic link is never written through, unless it names a stream (see check_link):
    with force the link itself is replaced by a new file."""
    p = os.fspath(path)
    try:
        if is_stream(p):
            return open(p, "wb")
        if not force:
            check_link(p)
        elif os.path.islink(p):
            os.unlink(p)
        # O_NOFOLLOW: a link put there after the checks above makes the open fail
        # instead of creating a file wherever it points.
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(p, flags | (os.O_TRUNC if force else os.O_EXCL), 0o666)
        return os.fdopen(fd, "wb")
    except FileExistsError:
        raise OutputExistsError(p) from None
    except IsADirectoryError:
        raise PsrecError(f"{p} is a directory", help="give a file name with -o") from None
    except FileNotFoundError:
        raise PsrecError(
            f"cannot create {p}: folder {os.path.dirname(p) or '.'} does not exist",
            help="create the folder first or choose another path with -o",
        ) from None
    except PermissionError:
        raise PsrecError(
            f"cannot create {p}: permission denied",
            help="choose a folder you can write to with -o",
        ) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            check_link(p)
        if exc.errno in (errno.EROFS, errno.ENOSPC):
            raise PsrecError(f"cannot create {p}: {exc.strerror}") from None
        raise


def _holds_renames(raw: bytes) -> bool:
    """Whether a DATA payload holds a THREAD_RENAME record (or cannot be read to tell): the
    index lists those chunks, so that a window reads the others' renames not at all."""
    try:
        return bool(_thread_renames(raw, 1))
    except Exception:  # noqa: BLE001 - a second rename, or records that do not read
        return True


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
    ) -> None:
        self.path = os.fspath(path)
        # Written where it will stay, chunk by chunk, so that a writer killed at any point
        # leaves a readable file at its name; '-' and other streams in place (see Output).
        if self.path == "-" or is_stream(self.path):
            self._file = Output(self.path, binary_to_terminal=False).file
        else:
            self._file = open_output(self.path, force)
        self._zstd = zstandard.ZstdCompressor(level=level, write_content_size=True)
        self._index: list[list[int]] = []
        self._renamed: list[int] = []  # offsets of the DATA chunks that rename a thread
        self._closed = False
        self.bytes_written = 0
        self.samples = 0
        self.passes = 0
        self.header = Header(
            C.FORMAT_MAJOR, C.FORMAT_MINOR, created_wall_ns, created_mono_ns, tick_ns
        )
        try:
            self._write(self.header.pack())
            self.write_chunk(C.CHUNK_METADATA, msgpack.packb(metadata, use_bin_type=True))
        except OSError:
            # Not even the header and metadata could be written (a disk full from the start):
            # the empty or torn file psrec just created holds nothing, and is removed.
            self.abandon()
            if not is_stream(self.path):
                try:
                    os.unlink(self.path)
                except OSError:
                    pass
            raise

    def _write(self, data: bytes) -> None:
        self._file.write(data)
        self.bytes_written += len(data)

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
        payload = self._zstd.compress(raw)
        head = ChunkHeader(ctype, C.CHUNK_FLAG_ZSTD, len(payload), len(raw), zlib.crc32(payload))
        offset = self.bytes_written
        self._write(head.pack() + payload)
        if flush:
            self._file.flush()
        self._index.append([offset, ctype, first_ts, last_ts, passes, samples])
        if ctype == C.CHUNK_DATA and _holds_renames(raw):
            self._renamed.append(offset)
        return offset

    def write_sealed(
        self, defs: bytes, data: bytes, first_ts: int, last_ts: int, passes: int, samples: int
    ) -> None:
        """Appends a sealed chunk pair from the native encoder: definitions, then data."""
        if defs:
            self.write_chunk(C.CHUNK_DEFS, defs, flush=not data)
        if data:
            self.write_chunk(
                C.CHUNK_DATA,
                data,
                first_ts=first_ts,
                last_ts=last_ts,
                passes=passes,
                samples=samples,
            )
            self.samples += samples
            self.passes += passes

    def close(self, stats: dict[str, Any] | None = None) -> None:
        """Writes final statistics, the index and the trailer. Safe to call twice."""
        if self._closed:
            return
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
            self._closed = True
            self._file.close()

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
