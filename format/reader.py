"""Reads .psr files: open_recording() checks the header and gives a Recording, which holds the
file's chunk list, metadata, definitions and warnings, and streams its samples.

The pieces a Recording is made of live beside it, each under its own reason: the data classes
(_model.py), the chunk list and payloads, with the scan that recovers an unclosed file
(_scan.py), the checks on msgpack maps (_checks.py), the budgets (_budgets.py), the codec
choice (_codec.py) and SampleStream (_stream.py). Their public names are all importable from
here, as before the split.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, BinaryIO

import msgpack

from . import _constants as C
from ._budgets import BUDGET_ENV, Budgets
from ._checks import METADATA_TYPES, STATS_TYPES, kind, msgpack_limits, typed
from ._codec import (
    HAVE_NATIVE,
    BudgetError,
    DecodeError,
    chunk_seq,
    decode_defs,
    native_available,
    over_budget,
)
from ._layout import Header, unpack_header
from ._model import TRUNCATED as TRUNCATED  # the frame that ends a truncated stack
from ._model import (
    ChunkInfo,
    Definitions,
    Frame,
    Function,
    ProcessInfo,
    TaskInfo,
    ThreadInfo,
    where,
)
from ._scan import ChunkFile
from ._stream import SampleStream
from .errors import CorruptRecordingError, FormatError, NotARecordingError, UnsupportedVersionError
from .reference import RefDecodeError
from .reference import thread_renames as ref_thread_renames

if HAVE_NATIVE:
    from . import _format as native_codec

__all__ = [
    "ChunkInfo",
    "Function",
    "Frame",
    "ProcessInfo",
    "TaskInfo",
    "ThreadInfo",
    "Definitions",
    "Recording",
    "SampleStream",
    "Budgets",
    "BUDGET_ENV",
    "open_recording",
    "native_available",
]

# The names format/describe.py reads files with, besides those above.
_BudgetError = BudgetError
_DecodeError = DecodeError
_chunk_seq = chunk_seq
_decode_defs = decode_defs
_msgpack_limits = msgpack_limits
_over_budget = over_budget

WARNINGS_SHOWN = 20  # warnings a file gives one by one; the others are counted


class Recording:
    """An open .psr file. Use open_recording(); close() or use as a context manager."""

    def __init__(self, path: str, fh: BinaryIO, header: Header, size: int) -> None:
        self.path = path
        self._file = ChunkFile(path, fh, size)
        self.header = header
        self.file_size = size
        self.metadata: dict[str, Any] = {}
        self.stats: dict[str, Any] | None = None
        self.chunks: list[ChunkInfo] = []
        self.clean = False  # closed with index and trailer
        self.warnings: list[str] = []
        self._unshown = 0  # warnings past WARNINGS_SHOWN, counted in the last one
        self._given: set[str] = set()  # every warning given
        self._skipped_at: set[int] = set()  # offsets of the chunks counted in corrupt_chunks
        self.corrupt_chunks = 0
        # Offsets of the DATA chunks that hold a THREAD_RENAME, when the index says (format
        # 1.2): the others need not be read for renames. None: any chunk may hold one.
        self.renamed: set[int] | None = None
        self._defs: Definitions | None = None
        # (chunk offset, native) -> what _chunk_renames found there
        self._renames: dict[tuple[int, bool],
                            tuple[int | None, list[tuple[int, int, int, int, int]]] | None] = {}
        self._renames_held = 0
        self._renames_raw = 0  # uncompressed bytes read for renames (within budgets.data_raw)
        self.budgets = Budgets.of(size)
        # Set when a stream stopped at a budget: the warning that says where and why.
        self.budget_stop: str | None = None
        # DATA chunk offset -> (first_ts, last_ts, passes), once a stream decoded it: what a
        # recording without an index (still being written) knows of its chunks' times.
        self.spans: dict[int, tuple[int, int, int]] = {}
        self._defs_seen = 0  # chunks looked at for definitions
        self._defs_raw = self._defs_records = 0  # what the definitions took of the budgets

    # -- warnings ------------------------------------------------------------------------
    def _skipped(self, info: ChunkInfo, msg: str) -> None:
        """A chunk that cannot be read: counted and said once however often it is read."""
        if info.offset not in self._skipped_at:
            self._skipped_at.add(info.offset)
            self.corrupt_chunks += 1
            self._warn(msg)

    def _warn(self, msg: str, always: bool = False) -> None:
        """Adds a warning, once. Past WARNINGS_SHOWN of them, the others are counted in one
        last line (100,000 damaged chunks said so in 100,000 lines); `always` is for the one
        that says reading stopped."""
        if msg in self._given:
            return
        self._given.add(msg)
        if self._unshown:
            self.warnings.pop()  # the count, put back below
        if len(self.warnings) < WARNINGS_SHOWN or always:
            self.warnings.append(f"{self.path}: {msg}")
        else:
            self._unshown += 1
        if self._unshown:
            self.warnings.append(
                f"{self.path}: {self._unshown:,} more warning{'s' if self._unshown > 1 else ''} "
                "like these not shown (`psrec dump` shows every chunk and what is wrong with it)")

    # -- opening -------------------------------------------------------------------------
    @property
    def max_chunks(self) -> int:
        """The most chunks a file of this size can hold: each takes at least its header."""
        return self._file.max_chunks

    def _open(self) -> None:
        chunks, self.renamed, index_problem = self._file.read_index()
        self.clean = chunks is not None
        if chunks is not None:
            self.chunks = chunks
        else:
            self.chunks, damaged = self._file.scan(self._warn)
            self.corrupt_chunks += damaged
            found = sum(1 for c in self.chunks if c.type == C.CHUNK_DATA)
            if index_problem is not None:
                self._warn(f"its index is damaged: {index_problem}; the file was scanned "
                           f"instead ({found} data chunk{'' if found == 1 else 's'} found)")
            else:
                self._warn(
                    "was not closed cleanly (the recorder was killed or the file was cut "
                    f"short); recovered {found} data chunks"
                )
        metadata_at: int | None = None
        for info in self.chunks:
            if info.type in (C.CHUNK_METADATA, C.CHUNK_STATS):
                try:
                    value = msgpack.unpackb(self._file.payload(info), raw=False,
                                            **msgpack_limits(info.raw_length))
                except CorruptRecordingError as exc:
                    self._warn(str(exc).split(": ", 1)[-1] + "; skipped")
                    continue
                except (ValueError, msgpack.UnpackException):
                    self._warn(f"chunk at byte {info.offset} holds invalid msgpack; skipped")
                    continue
                if not isinstance(value, dict):
                    self._warn(f"{where(info)} holds {kind(value)}, not a map; skipped")
                    continue
                if info.type == C.CHUNK_METADATA:
                    if metadata_at is not None:  # the recording is described once (spec 2)
                        self._warn(f"{where(info)} repeats the METADATA chunk at byte "
                                   f"{metadata_at}; ignored")
                        continue
                    metadata_at = info.offset
                    self.metadata = typed(where(info), value, METADATA_TYPES, self._warn)
                else:
                    self.stats = typed(where(info), value, STATS_TYPES, self._warn)

    # -- payloads ------------------------------------------------------------------------
    def payload(self, info: ChunkInfo) -> bytes | None:
        """One chunk's payload, or None (with a warning) when it is damaged."""
        try:
            return self._file.payload(info)
        except CorruptRecordingError as exc:
            self._skipped(info, str(exc).split(": ", 1)[-1] + "; skipped")
            return None

    def raw_chunk(self, info: ChunkInfo) -> bytes:
        """One chunk as the file stores it, header and payload (for copying it elsewhere)."""
        return self._file.read_at(info.offset, C.CHUNK_HEADER_SIZE + info.length)

    def payloads(self, ctype: int) -> Iterator[tuple[ChunkInfo, bytes]]:
        """Payloads of the chunks of one type; damaged ones are skipped with a warning."""
        for info in self.chunks:
            if info.type == ctype:
                payload = self.payload(info)
                if payload is not None:
                    yield info, payload

    # -- content -------------------------------------------------------------------------
    @property
    def tick_ns(self) -> int:
        return self.header.tick_ns

    @property
    def interval_ticks(self) -> int:
        interval_ns = self.metadata.get("interval_ns")
        if not isinstance(interval_ns, int) or not 0 < interval_ns < 1 << 40:
            interval_ns = 1_000_000  # absent or implausible: assume 1 kHz
        return max(1, min(interval_ns // self.tick_ns, 1 << 31))

    @property
    def max_records(self) -> int:
        """The most definitions the file may hold, and the most events (spec section 9)."""
        return C.RECORDS_BASE + C.RECORDS_PER_BYTE * self.file_size

    def definitions(self) -> Definitions:
        """The recording's definitions (decoded once; a recording refreshed since adds those
        of its new DEFS chunks)."""
        if self._defs is None:
            self._defs = Definitions()
        defs = self._defs
        most = C.DEFS_RAW_BASE + C.DEFS_RAW_PER_BYTE * self.file_size
        for info in self.chunks[self._defs_seen:]:
            if info.type != C.CHUNK_DEFS:
                continue
            if info.raw_length > most - self._defs_raw:
                self.corrupt_chunks += 1
                self._warn(f"{where(info)} would take the definitions past the "
                           f"{most:,} bytes a file of {self.file_size:,} bytes may hold; "
                           "skipped")
                continue
            payload = self.payload(info)
            if payload is None:
                continue
            try:
                decoded = decode_defs(payload, self.max_records - self._defs_records)
            except (RefDecodeError, DecodeError) as exc:
                self.corrupt_chunks += 1
                self._warn(f"{where(info)} is malformed ({exc}); skipped")
                continue
            self._defs_raw += info.raw_length
            self._defs_records += sum(len(part) for part in (*decoded[:5], decoded[6]))
            conflicts = defs.conflicts
            defs.add(decoded)
            if defs.conflicts > conflicts and not conflicts:
                self._warn(f"{where(info)} gives an id defined before other content (spec "
                           "3.1 forbids it): the first definition of each such id is kept")
        self._defs_seen = len(self.chunks)
        return defs

    def refresh(self) -> bool:
        """For a recording still being written (no trailer): takes in the chunks completed
        since it was opened or last refreshed, and their definitions, so that reading what is
        new costs what is new. False when the file at its path is another one now (a flight
        recording written anew, or the file removed): open it again."""
        try:
            now = os.stat(self.path)
        except OSError:
            return False
        held = os.fstat(self._file.fileno())
        if (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
            return False
        if self.clean or held.st_size <= self.file_size:
            return True
        self.file_size = self._file.file_size = held.st_size
        self.budgets = Budgets.of(held.st_size)
        start = self.chunks[-1].end if self.chunks else C.HEADER_SIZE
        new, damaged = self._file.scan(lambda msg: None, start)
        self.corrupt_chunks += damaged
        self.chunks += new
        if self._defs is not None:
            self.definitions()
        return True

    def data_chunks(self, from_ts: int | None = None, to_ts: int | None = None) -> list[ChunkInfo]:
        """Data chunks that may hold samples in [from_ts, to_ts) (all when the index is absent)."""
        out = []
        for c in self.chunks:
            if c.type != C.CHUNK_DATA:
                continue
            first, last, passes = ((c.first_ts, c.last_ts, c.passes) if self.clean
                                   else self.spans.get(c.offset, (0, 0, 0)))
            if passes:
                if from_ts is not None and last < from_ts:
                    continue
                if to_ts is not None and first >= to_ts:
                    continue
            out.append(c)
        return out

    def stream(
        self, from_ts: int | None = None, to_ts: int | None = None, native: bool | None = None
    ) -> SampleStream:
        return SampleStream(self, from_ts, to_ts, native)

    def thread_renames(self, native: bool | None = None) -> list[tuple[int, int, int, int, int]]:
        """The THREAD_RENAME events of every data chunk, found without decoding the samples (a
        PASS record is skipped by its length). A chunk that cannot be read is left out without
        a word: reading its samples says why."""
        use_native = HAVE_NATIVE if native is None else native
        out: list[tuple[int, int, int, int, int]] = []
        seqs: set[int] = set()
        for info in self.data_chunks():
            if self.renamed is not None and info.offset not in self.renamed:
                continue
            found = self._chunk_renames(info, use_native)
            if found is None:
                continue
            seq, renames = found
            if seq is not None:
                if seq in seqs:  # a chunk written twice: counted once, as SampleStream does
                    continue
                seqs.add(seq)
            if len(renames) > self.max_records - len(out):
                continue
            out.extend(renames)
        return out

    def _chunk_renames(self, info: ChunkInfo, native: bool
                       ) -> tuple[int | None, list[tuple[int, int, int, int, int]]] | None:
        """A data chunk's sequence number and THREAD_RENAME events, or None when it cannot be
        read. Kept for the file's life: a windowed stream reads the renames of the chunks
        outside its window, and `--thread NAME` the renames of every chunk before it, so
        without it a chunk outside the window was read and decompressed twice. What is kept
        stays within the file's budget of events (spec section 9.2, rule 5)."""
        key = (info.offset, native)
        if key in self._renames:
            return self._renames[key]
        found: tuple[int | None, list[tuple[int, int, int, int, int]]] | None = None
        if self._renames_raw + info.raw_length > self.budgets.data_raw:
            return None  # past the budget (spec section 9.3): the stream says where it stopped
        self._renames_raw += info.raw_length
        try:
            payload = self._file.payload(info)
            scan = native_codec.thread_renames if native else ref_thread_renames
            renames = scan(payload, max(0, self.max_records - self._renames_held))
            found = (chunk_seq(payload), renames)
            self._renames_held += len(renames)
        except (CorruptRecordingError, DecodeError, RefDecodeError):
            pass
        self._renames[key] = found
        return found

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_recording(path: str | os.PathLike[str]) -> Recording:
    """Opens and checks a .psr file; raises a FormatError subclass that names the file."""
    p = os.fspath(path)
    try:
        # Unbuffered: every read asks the system for the bytes it needs and no more. A
        # buffered file reads 4 KiB or more for each 24-byte chunk header the index is checked
        # against, so opening a recording read most of it; payloads are one read each anyway.
        fh = open(p, "rb", buffering=0)
    except FileNotFoundError:
        raise FormatError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise FormatError(f"{p}: is a directory, not a recording") from None
    except PermissionError:
        raise FormatError(f"{p}: permission denied") from None
    try:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            raise NotARecordingError(f"{p}: empty file (0 bytes), not a recording")
        raw = fh.read(C.HEADER_SIZE)
        header, problem = unpack_header(raw)
        if header is None:
            assert problem is not None
            cls: type[FormatError] = (
                UnsupportedVersionError if "format" in problem else NotARecordingError
            )
            if "truncated" in problem or "corrupt" in problem:
                cls = CorruptRecordingError
            raise cls(f"{p}: {problem}")
        rec = Recording(p, fh, header, size)
        rec._open()
        return rec
    except BaseException:
        fh.close()
        raise
