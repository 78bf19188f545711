"""Reads .psr files: header checks, chunk scan with recovery, definitions and sample decoding.

Memory is bounded by the largest chunk, not by the file: chunks are read one at a time.
A file without a valid trailer (a recorder that was killed) is scanned chunk by chunk; a
damaged chunk is skipped with a warning and the scan resynchronises on the next valid chunk.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import msgpack
import zstandard

from . import _constants as C
from ._layout import Header, unpack_chunk_header, unpack_header, unpack_trailer
from .errors import CorruptRecordingError, FormatError, NotARecordingError, UnsupportedVersionError
from .reference import RefBatch, RefBudgetError, RefDecodeError, RefDecoder
from .reference import decode_defs as ref_decode_defs
from .reference import thread_renames as ref_thread_renames

try:
    from . import _format as _native

    _HAVE_NATIVE = True
except ImportError:  # the native codec could not be built or loaded here
    _HAVE_NATIVE = False

__all__ = [
    "ChunkInfo",
    "Function",
    "Frame",
    "ThreadInfo",
    "Definitions",
    "Recording",
    "SampleStream",
    "Budgets",
    "BUDGET_ENV",
    "open_recording",
    "native_available",
]


def native_available() -> bool:
    return _HAVE_NATIVE


@dataclass(frozen=True)
class ChunkInfo:
    offset: int
    type: int
    flags: int
    length: int
    raw_length: int
    crc: int
    first_ts: int = 0
    last_ts: int = 0
    passes: int = 0
    samples: int = 0

    @property
    def type_name(self) -> str:
        return C.CHUNK_NAMES.get(self.type, f"TYPE{self.type}")

    @property
    def end(self) -> int:
        return self.offset + C.CHUNK_HEADER_SIZE + self.length


@dataclass(frozen=True)
class Function:
    id: int
    filename: str
    name: str
    first_line: int


@dataclass(frozen=True)
class Frame:
    id: int
    function: Function
    line: int


@dataclass
class ProcessInfo:
    """One program a process ran while it was recorded: a process that exec'd has one for
    each Python program it ran, in time order."""

    pid: int
    parent_pid: int
    command: str
    start_ts: int

    @property
    def label(self) -> str:
        return f"pid {self.pid}" + (f" ({self.command})" if self.command else "")


@dataclass
class ThreadInfo:
    ref: int
    pid: int
    python_tid: int
    os_tid: int
    name: str
    start_ts: int
    end_ts: int | None = None
    names: list[tuple[int, str]] = field(default_factory=list)  # renames: (ts, new name)

    @property
    def label(self) -> str:
        return self.name or f"thread (tid {self.os_tid or self.python_tid})"


_UNKNOWN_FUNCTION = Function(0, "<unknown>", "<unknown>", 0)
TRUNCATED = Frame(0, Function(0, "<psrec>", "[truncated stack]", 0), 0)


@dataclass
class Definitions:
    strings: dict[int, str] = field(default_factory=dict)
    functions: dict[int, Function] = field(default_factory=dict)
    frames: dict[int, Frame] = field(default_factory=lambda: {0: TRUNCATED})
    threads: dict[int, ThreadInfo] = field(default_factory=dict)
    processes: list[ProcessInfo] = field(default_factory=list)  # in start order
    unknown_records: int = 0
    _processes_seen: set[tuple[int, int, int, int]] = field(default_factory=set, repr=False)

    def add(self, decoded: tuple[list[Any], list[Any], list[Any], list[Any], list[Any], int]
            ) -> None:
        strings, functions, frames, threads, processes, unknown = decoded
        s = self.strings
        for sid, value in strings:
            s[sid] = value
        for fid, filename, name, first_line in functions:
            self.functions[fid] = Function(
                fid, s.get(filename, "<unknown>"), s.get(name, "<unknown>"), first_line
            )
        for frid, fid, line in frames:
            self.frames[frid] = Frame(frid, self.functions.get(fid, _UNKNOWN_FUNCTION), line)
        for ref, pid, ptid, otid, name, start in threads:
            self.threads[ref] = ThreadInfo(ref, pid, ptid, otid, s.get(name, ""), start)
        for pid, ppid, command, start in processes:
            key = (pid, ppid, command, start)
            if key in self._processes_seen:  # the same definition again: a chunk written twice
                continue
            self._processes_seen.add(key)
            self.processes.append(ProcessInfo(pid, ppid, s.get(command, ""), start))
        self.unknown_records += unknown

    def process_of(self, thread: ThreadInfo) -> ProcessInfo | None:
        """The program the thread ran in: the last one its process started before it."""
        found = None
        for p in self.processes:
            if p.pid == thread.pid and p.start_ts <= thread.start_ts:
                found = p
        return found

    def apply_renames(self, events: list[tuple[int, int, int, int, int]]) -> None:
        """Gives each thread the names THREAD_RENAME events gave it, in time order; its name
        becomes the last one. Applying the same events again changes nothing."""
        renames: dict[int, list[tuple[int, str]]] = {}
        for etype, ts, ref, name_id, _ in events:
            if etype == C.REC_THREAD_RENAME and ref in self.threads:
                renames.setdefault(ref, []).append((ts, self.strings.get(name_id, "")))
        for ref, names in renames.items():
            names.sort(key=lambda n: n[0])
            self.threads[ref].names = names
            self.threads[ref].name = names[-1][1]

    def frame(self, frame_id: int) -> Frame:
        f = self.frames.get(frame_id)
        if f is None:
            f = Frame(frame_id, Function(0, "<unknown>", f"<frame {frame_id}>", 0), 0)
        return f


BUDGET_ENV = "PSREC_BUDGET"
WARNINGS_SHOWN = 20  # warnings a file gives one by one; the others are counted
_UNLIMITED = (1 << 64) - 1


@dataclass(frozen=True)
class Budgets:
    """What reading a whole file may cost, from its size (spec section 9.3): uncompressed
    bytes of DATA chunks, stack-trie nodes and thread refs. PSREC_BUDGET scales them for a
    file the user trusts: a factor (10: ten times each) or `unlimited`."""

    data_raw: int
    nodes: int
    threads: int
    factor: float | None  # PSREC_BUDGET's factor; None: unlimited

    @classmethod
    def of(cls, size: int) -> Budgets:
        factor = _budget_factor(os.environ.get(BUDGET_ENV))
        b = cls(0, 0, 0, factor)
        return cls(b.scaled(C.DATA_RAW_BASE + C.DATA_RAW_PER_BYTE * size),
                   b.scaled(C.TRIE_BASE + C.TRIE_PER_BYTE * size),
                   b.scaled(C.THREADS_BASE + size // C.THREAD_BYTES), factor)

    def scaled(self, n: int) -> int:
        """A budget of n, as PSREC_BUDGET scales it."""
        return _UNLIMITED if self.factor is None else min(_UNLIMITED, int(n * self.factor))


def _budget_factor(value: str | None) -> float | None:
    """PSREC_BUDGET as a factor of the budgets (1 when unset), or None for no budget."""
    if value is None or not value.strip():
        return 1.0
    if value.strip().lower() == "unlimited":
        return None
    try:
        factor = float(value)
    except ValueError:
        factor = 0.0
    if not 1 <= factor < float("inf"):
        raise FormatError(f"{BUDGET_ENV}={value!r} is not a budget factor",
                          help=f"give a number of 1 or more ({BUDGET_ENV}=10 reads ten times "
                               "past each budget) or 'unlimited'")
    return factor


class Recording:
    """An open .psr file. Use open_recording(); close() or use as a context manager."""

    def __init__(self, path: str, fh: BinaryIO, header: Header, size: int) -> None:
        self.path = path
        self._fh = fh
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

    # -- opening -------------------------------------------------------------------------
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

    @property
    def max_chunks(self) -> int:
        """The most chunks a file of this size can hold: each takes at least its header."""
        return max(0, self.file_size - C.HEADER_SIZE - C.TRAILER_SIZE) // C.CHUNK_HEADER_SIZE

    def _load_from_trailer(self) -> tuple[bool, str | None]:
        """Takes the chunk list from the index. Returns whether it did, and what is wrong with
        the index when the trailer is valid but the index is not."""
        if self.file_size < C.HEADER_SIZE + C.TRAILER_SIZE:
            return False, None
        trailer = unpack_trailer(self._read_at(self.file_size - C.TRAILER_SIZE, C.TRAILER_SIZE))
        if trailer is None:
            return False, None
        index_offset, _ = trailer
        info = self._chunk_at(index_offset)
        if info is None or info.type != C.CHUNK_INDEX:
            return False, f"the trailer points to byte {index_offset}, where no INDEX chunk is"
        where = _where(info)
        try:
            index = msgpack.unpackb(self._payload(info), raw=False, **_msgpack_limits(
                info.raw_length, max_array_len=max(6, self.max_chunks)))
            entries = index["chunks"]
            if len(entries) > self.max_chunks:
                return False, (f"{where} lists {len(entries):,} chunks, more than a file of "
                               f"{self.file_size:,} bytes can hold ({self.max_chunks:,})")
            renamed = index.get("renames")  # since format 1.2
            if renamed is not None and (type(renamed) is not list or len(renamed) > len(entries)
                                        or not all(type(v) is int for v in renamed)):
                return False, f"{where} holds a `renames` that is not a list of chunk offsets"
            chunks = []
            end = C.HEADER_SIZE
            for entry in entries:
                off, ctype, first, last, passes, samples = entry
                if not all(type(v) is int for v in entry):
                    return False, f"{where} holds an entry that is not 6 integers"
                # Chunks follow one another: an entry that points back, or into the chunk
                # before it, is not a chunk of this file (or lists one twice).
                if off < end:
                    return False, f"{where} lists a chunk at byte {off} out of order"
                head = self._chunk_at(off)
                if head is None or head.type != ctype:
                    return False, f"{where} lists a chunk at byte {off}, where none is"
                chunks.append(
                    ChunkInfo(head.offset, head.type, head.flags, head.length, head.raw_length,
                              head.crc, first, last, passes, samples)
                )
                end = head.end
            if renamed is not None:
                data_at = {c.offset for c in chunks if c.type == C.CHUNK_DATA}
                if not data_at.issuperset(renamed):
                    return False, f"{where} names a renaming chunk that is no DATA chunk it lists"
                self.renamed = set(renamed)
        except CorruptRecordingError as exc:
            return False, str(exc).split(": ", 1)[-1]
        except (ValueError, TypeError, KeyError, AttributeError, msgpack.UnpackException) as exc:
            return False, f"{where} is not a valid index ({type(exc).__name__}: {exc})"[:300]
        self.chunks = chunks
        return True, None

    def _read_at(self, offset: int, size: int) -> bytes:
        """size bytes from offset, fewer only at the end of the file. The file is unbuffered
        (see open_recording), so a read can return less than asked (the system gives at most
        2 GiB per read): ask again for the rest."""
        self._fh.seek(offset)
        parts = []
        while size > 0:
            part = self._fh.read(size)
            if not part:
                break
            parts.append(part)
            size -= len(part)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _chunk_at(self, offset: int) -> ChunkInfo | None:
        if offset < C.HEADER_SIZE or offset + C.CHUNK_HEADER_SIZE > self.file_size:
            return None
        head = unpack_chunk_header(self._read_at(offset, C.CHUNK_HEADER_SIZE))
        if head is None or offset + C.CHUNK_HEADER_SIZE + head.length > self.file_size:
            return None
        return ChunkInfo(offset, head.type, head.flags, head.length, head.raw_length, head.crc)

    def _resync(self, start: int) -> int | None:
        """The offset of the next valid chunk header at or after start, if any."""
        sync = struct.pack("<I", C.CHUNK_SYNC)
        pos = start
        block = 1 << 20
        while pos < self.file_size:
            buf = self._read_at(pos, block + 3)
            i = buf.find(sync)
            while i >= 0:
                if self._chunk_at(pos + i) is not None:
                    return pos + i
                i = buf.find(sync, i + 1)
            pos += block
        return None

    def _scan(self) -> None:
        pos = C.HEADER_SIZE
        chunks: list[ChunkInfo] = []
        while pos < self.file_size:
            info = self._chunk_at(pos)
            if info is None:
                nxt = self._resync(pos + 1)
                if pos + C.CHUNK_HEADER_SIZE > self.file_size or nxt is None:
                    if self._looks_truncated(pos):
                        self._warn(
                            f"truncated at byte {self.file_size} inside a chunk starting at "
                            f"byte {pos}; every complete chunk before it was recovered"
                        )
                    else:
                        self._warn(f"{self.file_size - pos} unreadable bytes at byte {pos} skipped")
                    break
                self._warn(f"damaged bytes {pos}..{nxt} skipped; reading resumed at the next chunk")
                self.corrupt_chunks += 1
                pos = nxt
                continue
            chunks.append(info)
            pos = info.end
            if info.type == C.CHUNK_INDEX and self.file_size - pos == C.TRAILER_SIZE:
                break
        self.chunks = chunks

    def _looks_truncated(self, pos: int) -> bool:
        raw = self._read_at(pos, C.CHUNK_HEADER_SIZE)
        return len(raw) < C.CHUNK_HEADER_SIZE or raw[:4] == struct.pack("<I", C.CHUNK_SYNC)

    def _open(self) -> None:
        self.clean, index_problem = self._load_from_trailer()
        if not self.clean:
            self._scan()
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
                    value = msgpack.unpackb(self._payload(info), raw=False,
                                            **_msgpack_limits(info.raw_length))
                except CorruptRecordingError as exc:
                    self._warn(str(exc).split(": ", 1)[-1] + "; skipped")
                    continue
                except (ValueError, msgpack.UnpackException):
                    self._warn(f"chunk at byte {info.offset} holds invalid msgpack; skipped")
                    continue
                if not isinstance(value, dict):
                    self._warn(f"{_where(info)} holds {_kind(value)}, not a map; skipped")
                    continue
                if info.type == C.CHUNK_METADATA:
                    if metadata_at is not None:  # the recording is described once (spec 2)
                        self._warn(f"{_where(info)} repeats the METADATA chunk at byte "
                                   f"{metadata_at}; ignored")
                        continue
                    metadata_at = info.offset
                    self.metadata = self._typed(info, value, _METADATA_TYPES)
                else:
                    self.stats = self._typed(info, value, _STATS_TYPES)

    def _typed(self, info: ChunkInfo, value: dict[Any, Any],
               types: dict[str, tuple[Any, str]]) -> dict[str, Any]:
        """The map without the keys whose values have another type than spec section 2
        gives them (an int where the command line belongs made `psrec info` fail), each
        named in a warning. Keys it does not list are kept as they are."""
        out: dict[str, Any] = {}
        for key, v in value.items():
            if not isinstance(key, str):
                self._warn(f"{_where(info)} holds a key that is not a string ({key!r:.40}); "
                           "ignored")
                continue
            check = types.get(key)
            if check is not None and not check[0](v):
                self._warn(f"{_where(info)}: {key!r} is {_kind(v)}, not {check[1]}; ignored")
                continue
            out[key] = v
        return out

    # -- payloads ------------------------------------------------------------------------
    def _raw_limit(self, info: ChunkInfo) -> int:
        """The most uncompressed bytes a chunk of this type may hold in this file."""
        if info.type in (C.CHUNK_METADATA, C.CHUNK_STATS):
            return C.MAX_MAP_RAW
        if info.type == C.CHUNK_INDEX:
            return 64 + C.INDEX_ENTRY_MAX * self.max_chunks
        return C.MAX_RAW

    def _payload(self, info: ChunkInfo) -> bytes:
        """The chunk's uncompressed payload. Raises CorruptRecordingError if it is damaged, or
        holds more than a chunk of its type may (spec section 9)."""
        where = f"{self.path}: {_where(info)}"
        if info.raw_length > self._raw_limit(info):
            if info.type == C.CHUNK_INDEX:
                most = (f"more than an index of the {self.max_chunks:,} chunks a file of "
                        f"{self.file_size:,} bytes can hold takes ({self._raw_limit(info):,})")
            else:
                most = f"more than the {self._raw_limit(info):,} a {info.type_name} chunk may hold"
            raise CorruptRecordingError(
                f"{where} is {info.raw_length:,} bytes uncompressed, {most}")
        payload = self._read_at(info.offset + C.CHUNK_HEADER_SIZE, info.length)
        if len(payload) != info.length or zlib.crc32(payload) != info.crc:
            raise CorruptRecordingError(f"{where} is damaged (checksum mismatch)")
        if info.flags & C.CHUNK_FLAG_ZSTD:
            payload = _inflate(payload, info.raw_length, where)
        if len(payload) != info.raw_length:
            raise CorruptRecordingError(
                f"{where} holds {len(payload):,} bytes where its header says "
                f"{info.raw_length:,}"
            )
        return payload

    def payload(self, info: ChunkInfo) -> bytes | None:
        """One chunk's payload, or None (with a warning) when it is damaged."""
        try:
            return self._payload(info)
        except CorruptRecordingError as exc:
            self._skipped(info, str(exc).split(": ", 1)[-1] + "; skipped")
            return None

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
        if self._defs is None:
            defs = Definitions()
            records = self.max_records
            most = raw = C.DEFS_RAW_BASE + C.DEFS_RAW_PER_BYTE * self.file_size
            for info in self.chunks:
                if info.type != C.CHUNK_DEFS:
                    continue
                if info.raw_length > raw:
                    self.corrupt_chunks += 1
                    self._warn(f"{_where(info)} would take the definitions past the "
                               f"{most:,} bytes a file of {self.file_size:,} bytes may hold; "
                               "skipped")
                    continue
                payload = self.payload(info)
                if payload is None:
                    continue
                try:
                    decoded = _decode_defs(payload, records)
                except (RefDecodeError, _DecodeError) as exc:
                    self.corrupt_chunks += 1
                    self._warn(f"{_where(info)} is malformed ({exc}); skipped")
                    continue
                raw -= info.raw_length
                records -= sum(len(part) for part in decoded[:5])
                defs.add(decoded)
            self._defs = defs
        return self._defs

    def data_chunks(self, from_ts: int | None = None, to_ts: int | None = None) -> list[ChunkInfo]:
        """Data chunks that may hold samples in [from_ts, to_ts) (all when the index is absent)."""
        out = []
        for c in self.chunks:
            if c.type != C.CHUNK_DATA:
                continue
            if self.clean and c.passes:
                if from_ts is not None and c.last_ts < from_ts:
                    continue
                if to_ts is not None and c.first_ts >= to_ts:
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
        use_native = _HAVE_NATIVE if native is None else native
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
            payload = self._payload(info)
            scan = _native.thread_renames if native else ref_thread_renames
            renames = scan(payload, max(0, self.max_records - self._renames_held))
            found = (_chunk_seq(payload), renames)
            self._renames_held += len(renames)
        except (CorruptRecordingError, _DecodeError, RefDecodeError):
            pass
        self._renames[key] = found
        return found

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_DecodeError: type[Exception] = _native.DecodeError if _HAVE_NATIVE else RefDecodeError
_BudgetError: type[Exception] = _native.BudgetError if _HAVE_NATIVE else RefBudgetError


def _over_budget(exc: Exception) -> tuple[str, int]:
    """The budget a decoder's BudgetError names ("stack-trie nodes 1048576"): what, value."""
    what, value = str(exc).rsplit(" ", 1)
    return what, int(value)


def _decode_defs(payload: bytes, max_records: int) -> Any:
    if _HAVE_NATIVE:
        return _native.decode_defs(payload, max_records)
    return ref_decode_defs(payload, max_records)


def _where(info: ChunkInfo) -> str:
    return f"{info.type_name} chunk at byte {info.offset}"


def _kind(v: object) -> str:
    return "nil" if v is None else f"{'an' if type(v).__name__[0] in 'aeiou' else 'a'} " \
        f"{type(v).__name__}"


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# The types spec section 2 gives the keys of METADATA and STATS: (check, what it says).
_STR = (lambda v: isinstance(v, str), "a string")
_INT = (_is_int, "an integer")
_MAP = (lambda v: isinstance(v, dict), "a map")
_METADATA_TYPES: dict[str, tuple[Any, str]] = {
    "psrec_version": _STR,
    "pid": _INT,
    "command": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
                "a list of strings"),
    "python_version": _STR,
    "python_build": _MAP,
    "hostname": _STR,
    "interval_ns": _INT,
    "rate_hz": (lambda v: _is_int(v) or isinstance(v, float), "a number"),
    "options": _MAP,
}
_STATS_TYPES: dict[str, tuple[Any, str]] = {
    **{k: _INT for k in ("passes", "samples", "sample_errors", "missed_deadlines",
                         "duration_ns", "exit_code", "truncated_stacks")},
    "stopped_by": _STR,
}


def _msgpack_limits(raw_length: int, max_array_len: int | None = None) -> dict[str, int]:
    """msgpack's own limits, so that a length in a map or array header cannot make it
    allocate more than the payload could fill."""
    n = raw_length if max_array_len is None else min(raw_length, max_array_len)
    return {"max_str_len": raw_length, "max_bin_len": raw_length, "max_ext_len": raw_length,
            "max_array_len": n, "max_map_len": raw_length // 2}


def _inflate(stored: bytes, raw_length: int, where: str) -> bytes:
    """A chunk's zstandard frame, decompressed to no more than the raw_length bytes its header
    declares. A frame that declares another size is refused before decompressing (python's
    zstandard would allocate what the frame says: 1 TiB for a frame of a few bytes), and one
    that does not say is stopped one byte past raw_length."""
    try:
        params = zstandard.get_frame_parameters(stored)
    except zstandard.ZstdError as exc:
        raise CorruptRecordingError(f"{where} does not decompress ({exc})") from None
    declared = params.content_size
    if declared != zstandard.CONTENTSIZE_UNKNOWN and declared != raw_length:
        raise CorruptRecordingError(
            f"{where} does not match its header: its zstd frame declares {declared:,} bytes "
            f"uncompressed, its header {raw_length:,}"
        )
    # The window the decoder allocates: never more than the payload needs (at least 1 MiB,
    # at most zstd's default limit of 128 MiB).
    window = min(1 << 27, max(1 << 20, 1 << max(0, raw_length - 1).bit_length()))
    if params.window_size > window:
        raise CorruptRecordingError(
            f"{where} does not match its header: its zstd frame asks for a "
            f"{params.window_size:,}-byte window for {raw_length:,} bytes"
        )
    try:
        reader = zstandard.ZstdDecompressor(max_window_size=window).stream_reader(stored)
        with reader:
            out = reader.read(raw_length + 1)
    except zstandard.ZstdError as exc:
        raise CorruptRecordingError(f"{where} does not decompress ({exc})") from None
    if len(out) > raw_length:
        raise CorruptRecordingError(
            f"{where} decompresses to more than the {raw_length:,} bytes its header declares"
        )
    return out


class SampleStream:
    """Decodes a recording's data chunks one at a time into sample batches.

    Iterating yields the same batch object, refilled for each chunk: use it before the next.
    Events of every decoded chunk accumulate in ``events``; the stack trie in the decoder.
    """

    def __init__(
        self, rec: Recording, from_ts: int | None, to_ts: int | None, native: bool | None
    ) -> None:
        self.rec = rec
        self.from_ts, self.to_ts = from_ts, to_ts
        use_native = _HAVE_NATIVE if native is None else native
        if use_native and not _HAVE_NATIVE:
            raise FormatError("the native codec is not available")
        self.native = use_native
        cap = rec.interval_ticks * C.WEIGHT_CAP_INTERVALS
        if use_native:
            self.decoder: Any = _native.Decoder(cap, rec.interval_ticks)
            self.batch: Any = _native.SampleBatch()
        else:
            self.decoder = RefDecoder(cap, rec.interval_ticks)
            self.batch = RefBatch()
        self.events: list[tuple[int, int, int, int, int]] = []
        # THREAD_RENAME events of the data chunks a window skips: a thread's name can arrive
        # in a chunk before the window (threading names a thread after it starts), and every
        # window must show the names the whole recording gives. Found without decoding the
        # skipped chunks' samples.
        self.outside_renames: list[tuple[int, int, int, int, int]] = []
        self.summaries: list[dict[str, int]] = []
        self.errors = 0
        self.duplicates = 0  # data chunks skipped: their sequence number came before
        self._seqs: dict[int, int] = {}  # sequence number -> offset of its chunk

    def __iter__(self) -> Iterator[Any]:
        first_duplicate: tuple[int, int, int] | None = None
        inside = {c.offset for c in self.rec.data_chunks(self.from_ts, self.to_ts)}
        outside_seqs: set[int] = set()
        every = self.rec.data_chunks()
        budgets = self.rec.budgets
        raw = 0  # uncompressed bytes of the DATA chunks read
        renamed = self.rec.renamed
        for n, info in enumerate(every):
            if info.offset not in inside and renamed is not None and info.offset not in renamed:
                continue  # outside the window, and the index says it renames no thread
            # The whole file's budgets (spec section 9.3): reading stops at the chunk that
            # would go past one, before it is decompressed when its header tells.
            raw += info.raw_length
            if raw > budgets.data_raw:
                self._stop(info, n, len(every), "uncompressed bytes of DATA chunks",
                           budgets.data_raw)
                break
            if info.offset not in inside:
                self._renames_outside(info, outside_seqs)
                continue
            payload = self.rec.payload(info)
            if payload is None:
                continue
            # A chunk whose sequence number an earlier chunk had is that chunk written twice
            # (its checksums hold): its samples are counted once.
            seq = _chunk_seq(payload)
            if seq is not None and seq in self._seqs:
                self.duplicates += 1
                if first_duplicate is None:
                    first_duplicate = (info.offset, seq, self._seqs[seq])
                continue
            self.batch.clear()
            try:
                events, summary = self.decoder.decode_data(
                    payload, self.batch, max(0, self.rec.max_records - len(self.events)),
                    budgets.nodes, budgets.threads)
            except _BudgetError as exc:
                self.batch.clear()
                self._stop(info, n, len(every), *_over_budget(exc))
                break
            except (_DecodeError, RefDecodeError) as exc:
                self.rec._skipped(info, f"{_where(info)} is malformed ({exc}); skipped")
                self.batch.clear()
                continue
            if seq is not None:
                self._seqs[seq] = info.offset
            self.events.extend(events)
            self.summaries.append(summary)
            self.errors += summary["errors"]
            yield self.batch
        if first_duplicate is not None:
            off, seq, earlier = first_duplicate
            n = self.duplicates
            msg = (f"{n} DATA chunk{'s' if n > 1 else ''} repeat{'' if n > 1 else 's'} the "
                   f"sequence number of an earlier one (first: the chunk at byte {off}, "
                   f"sequence number {seq}, as the chunk at byte {earlier}); each sequence "
                   "number was counted once")
            self.rec._warn(msg)

    def _stop(self, info: ChunkInfo, n: int, total: int, what: str, budget: int) -> None:
        """Says, once for the file, that reading stopped at a budget, and how to lift it."""
        msg = (f"reading stopped at the {_where(info)}: it would take the file past its budget "
               f"of {budget:,} {what} (a file of {self.rec.file_size:,} bytes, "
               f"spec section 9.3); {n:,} of {total:,} data chunks were read. For a file you "
               f"trust, {BUDGET_ENV}=10 raises the budgets tenfold, {BUDGET_ENV}=unlimited "
               "lifts them")
        self.rec.budget_stop = msg
        self.rec._warn(msg, always=True)

    def _renames_outside(self, info: ChunkInfo, seqs: set[int]) -> None:
        """The renames of a data chunk the window skips, into outside_renames. A chunk that
        cannot be read is left out without a word, as Recording.thread_renames does: it holds
        no sample of the window."""
        found = self.rec._chunk_renames(info, self.native)
        if found is None:
            return
        seq, renames = found
        if seq is not None:
            if seq in seqs:
                return
            seqs.add(seq)
        if len(renames) <= self.rec.max_records - len(self.events) - len(self.outside_renames):
            self.outside_renames.extend(renames)


def _chunk_seq(payload: bytes) -> int | None:
    """The sequence number in a DATA payload's BEGIN record (its first), if it has one."""
    if len(payload) < 3 or payload[0] != C.REC_BEGIN:
        return None
    pos, seq, shift = 2 if payload[1] < 0x80 else None, 0, 0
    if pos is None:  # a BEGIN record is short: its length takes one byte
        return None
    while pos < len(payload) and shift < 64:
        b = payload[pos]
        seq |= (b & 0x7F) << shift
        pos += 1
        if not b & 0x80:
            return seq
        shift += 7
    return None


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
