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

__all__ = ["PsrWriter", "Retention", "snapshot", "open_output", "is_stream", "Output",
           "check_link", "write_failed"]


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
        if os.path.isdir(self.path) and not os.path.islink(self.path):
            raise PsrecError(f"{self.path} is a directory", help="give a file name with -o")
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
    """The copies a flight recorder killed while it wrote its file anew left beside it
    (.NAME.XXXX.keep): a new recording under that name makes them worthless."""
    folder = os.path.dirname(os.path.abspath(path))
    prefix, suffix = f".{os.path.basename(path)}.", ".keep"
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name.startswith(prefix) and name.endswith(suffix):
            try:
                os.unlink(os.path.join(folder, name))
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
    ) -> None:
        """new_epoch: asks the encoder to begin a new epoch of definitions (spec 7.4), so that
        the file may drop those of older ones; without it, every DEFS chunk is kept."""
        self.path = os.fspath(path)
        # Written where it will stay, chunk by chunk, so that a writer killed at any point
        # leaves a readable file at its name; '-' and other streams in place (see Output).
        if self.path == "-" or is_stream(self.path):
            if retention is not None:
                raise PsrecError(f"{self.path} is a stream: a flight recording drops its oldest "
                                 "chunks, which a stream cannot take back",
                                 help="give a file name with -o")
            self._file = Output(self.path, binary_to_terminal=False).file
        else:
            self._file = open_output(self.path, force)
        self._zstd = zstandard.ZstdCompressor(level=level, write_content_size=True)
        self.retention = retention
        if retention is not None:
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
        try:
            self._write(self._prefix())
            self._file.flush()
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
        # (A chunk of carried names is no chunk of samples: the next file carries it again.)
        self.dropped_chunks += sum(1 for i in gone if self._index[i][4])
        self.dropped_samples += sum(self._index[i][5] for i in gone)
        since = self._since(data[drop:], epoch)
        kept = self._read([i for i, e in enumerate(self._index)
                           if (e[1] == C.CHUNK_DEFS and self._epochs[i] >= since)
                           or (e[1] == C.CHUNK_DATA and i not in gone)])
        first_kept = next((self._index[i][2] for i in data[drop:] if self._index[i][4]), None)
        folder = os.path.dirname(os.path.abspath(self.path))
        fd, temp = tempfile.mkstemp(prefix=f".{os.path.basename(self.path)}.", suffix=".keep",
                                    dir=folder)
        old = self._file
        last_dropped = self._read([data[drop - 1]])[0][1]
        seq = chunk_seq(zstandard.ZstdDecompressor().decompress(
            last_dropped[C.CHUNK_HEADER_SIZE:])) or 0
        try:
            self._begin(os.fdopen(fd, "wb"), kept, seq, first_kept)
            os.chmod(temp, 0o666 & ~_umask())
            os.replace(temp, self.path)
        except BaseException:
            try:
                os.unlink(temp)
            except OSError:
                pass
            raise
        old.close()
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
        """Closes the current file (with `stats`, its index and trailer) and goes on in a new
        one at `path`, which begins with the header, METADATA (`metadata`, if given) and the
        definitions of epoch `epoch` on (that of the next chunk; all definitions so far when
        the encoder has no epochs: spec 7.4), so that each file reads alone (spec section 7.2)."""
        if self._closed:
            raise FormatError(f"{self.path}: write after close")
        new = open_output(path, force)
        since = self._since([], epoch)
        defs = self._read([i for i, e in enumerate(self._index)
                           if e[1] == C.CHUNK_DEFS and self._epochs[i] >= since])
        try:
            self._finish(stats)
        except BaseException:
            new.close()
            raise
        self.path = path
        if metadata is not None:
            self.metadata = metadata
        self._begin(new, defs, self._last_seq, None)
        self._ask_epoch(since)

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
             force: bool = False, only: slice | None = None) -> tuple[int, int]:
    """Writes a closed copy of a recording, running or not (spec section 7.3): its header, and
    every chunk it holds whole at this moment (its METADATA, DEFS and DATA chunks, in file
    order; a DATA chunk only if it decodes), then an index and the trailer. The source is
    read through one open file, so a flight recording renamed over meanwhile is copied as it
    was. only: these of the DATA chunks that decode (by their order), for a part of the
    recording that reads alone. Returns the DATA chunks and thread-samples copied."""
    from .reader import open_recording

    with open_recording(source) as rec:
        summary: dict[int, tuple[int, int, int, int]] = {}
        stream = rec.stream()
        for batch in stream:
            assert stream.current is not None
            s = stream.summaries[-1]
            summary[stream.current.offset] = (s["first_ts"], s["last_ts"], s["passes"], len(batch))
        if only is not None:
            summary = {off: summary[off] for off in list(summary)[only]}
        out = Output(output, force)
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
            zstd = zstandard.ZstdCompressor(level=3, write_content_size=True)
            raw = msgpack.packb({"chunks": index, "renames": renamed}, use_bin_type=True)
            payload = zstd.compress(raw)
            out.file.write(ChunkHeader(C.CHUNK_INDEX, C.CHUNK_FLAG_ZSTD, len(payload), len(raw),
                                       zlib.crc32(payload)).pack() + payload)
            out.file.write(pack_trailer(at, len(data)))
            out.commit()
        except BaseException:
            out.discard()
            raise
        return len(data), sum(e[5] for e in data)
