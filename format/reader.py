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
from .reference import RefAccumulator, RefBatch, RefDecodeError, RefDecoder
from .reference import decode_defs as ref_decode_defs

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
        return self.name or f"thread {self.os_tid or self.python_tid}"


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
        self.corrupt_chunks = 0
        self._defs: Definitions | None = None

    # -- opening -------------------------------------------------------------------------
    def _warn(self, msg: str) -> None:
        self.warnings.append(f"{self.path}: {msg}")

    def _load_from_trailer(self) -> bool:
        if self.file_size < C.HEADER_SIZE + C.TRAILER_SIZE:
            return False
        self._fh.seek(self.file_size - C.TRAILER_SIZE)
        trailer = unpack_trailer(self._fh.read(C.TRAILER_SIZE))
        if trailer is None:
            return False
        index_offset, _ = trailer
        info = self._chunk_at(index_offset)
        if info is None or info.type != C.CHUNK_INDEX:
            return False
        try:
            index = msgpack.unpackb(self._payload(info), raw=False)
            chunks = []
            for off, ctype, first, last, passes, samples in index["chunks"]:
                head = self._chunk_at(off)
                if head is None or head.type != ctype:
                    return False
                chunks.append(
                    ChunkInfo(head.offset, head.type, head.flags, head.length, head.raw_length,
                              head.crc, first, last, passes, samples)
                )
        except (CorruptRecordingError, ValueError, TypeError, KeyError, msgpack.UnpackException):
            return False
        self.chunks = chunks
        return True

    def _chunk_at(self, offset: int) -> ChunkInfo | None:
        if offset < C.HEADER_SIZE or offset + C.CHUNK_HEADER_SIZE > self.file_size:
            return None
        self._fh.seek(offset)
        head = unpack_chunk_header(self._fh.read(C.CHUNK_HEADER_SIZE))
        if head is None or offset + C.CHUNK_HEADER_SIZE + head.length > self.file_size:
            return None
        return ChunkInfo(offset, head.type, head.flags, head.length, head.raw_length, head.crc)

    def _resync(self, start: int) -> int | None:
        """The offset of the next valid chunk header at or after start, if any."""
        sync = struct.pack("<I", C.CHUNK_SYNC)
        pos = start
        block = 1 << 20
        while pos < self.file_size:
            self._fh.seek(pos)
            buf = self._fh.read(block + 3)
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
        self._fh.seek(pos)
        raw = self._fh.read(C.CHUNK_HEADER_SIZE)
        return len(raw) < C.CHUNK_HEADER_SIZE or raw[:4] == struct.pack("<I", C.CHUNK_SYNC)

    def _open(self) -> None:
        self.clean = self._load_from_trailer()
        if not self.clean:
            self._scan()
            self._warn(
                "was not closed cleanly (the recorder was killed or the file was cut short); "
                f"recovered {sum(1 for c in self.chunks if c.type == C.CHUNK_DATA)} data chunks"
            )
        for info in self.chunks:
            if info.type in (C.CHUNK_METADATA, C.CHUNK_STATS):
                try:
                    value = msgpack.unpackb(self._payload(info), raw=False)
                except CorruptRecordingError as exc:
                    self._warn(str(exc))
                    continue
                except (ValueError, msgpack.UnpackException):
                    self._warn(f"chunk at byte {info.offset} holds invalid msgpack; skipped")
                    continue
                if not isinstance(value, dict):
                    continue
                if info.type == C.CHUNK_METADATA:
                    self.metadata = value
                else:
                    self.stats = value

    # -- payloads ------------------------------------------------------------------------
    def _payload(self, info: ChunkInfo) -> bytes:
        """The chunk's uncompressed payload. Raises CorruptRecordingError if it is damaged."""
        self._fh.seek(info.offset + C.CHUNK_HEADER_SIZE)
        payload = self._fh.read(info.length)
        if len(payload) != info.length or zlib.crc32(payload) != info.crc:
            raise CorruptRecordingError(
                f"{self.path}: chunk at byte {info.offset} is damaged (checksum mismatch)"
            )
        if info.flags & C.CHUNK_FLAG_ZSTD:
            try:
                payload = zstandard.ZstdDecompressor().decompress(
                    payload, max_output_size=info.raw_length
                )
            except zstandard.ZstdError as exc:
                raise CorruptRecordingError(
                    f"{self.path}: chunk at byte {info.offset} does not decompress ({exc})"
                ) from None
        if len(payload) != info.raw_length:
            raise CorruptRecordingError(
                f"{self.path}: chunk at byte {info.offset} has the wrong length"
            )
        return payload

    def payload(self, info: ChunkInfo) -> bytes | None:
        """One chunk's payload, or None (with a warning) when it is damaged."""
        try:
            return self._payload(info)
        except CorruptRecordingError as exc:
            self.corrupt_chunks += 1
            self._warn(str(exc).split(": ", 1)[-1] + "; skipped")
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

    def definitions(self) -> Definitions:
        if self._defs is None:
            defs = Definitions()
            for info, payload in self.payloads(C.CHUNK_DEFS):
                try:
                    defs.add(_decode_defs(payload))
                except (RefDecodeError, _DecodeError) as exc:
                    self.corrupt_chunks += 1
                    self._warn(f"definitions chunk at byte {info.offset} is malformed ({exc})")
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

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_DecodeError: type[Exception] = _native.DecodeError if _HAVE_NATIVE else RefDecodeError


def _decode_defs(payload: bytes) -> Any:
    if _HAVE_NATIVE:
        return _native.decode_defs(payload)
    return ref_decode_defs(payload)


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
        self.summaries: list[dict[str, int]] = []
        self.errors = 0

    def accumulator(self, **query: Any) -> Any:
        if self.native:
            return _native.Accumulator(**query)
        return RefAccumulator(**query)

    def __iter__(self) -> Iterator[Any]:
        for info in self.rec.data_chunks(self.from_ts, self.to_ts):
            payload = self.rec.payload(info)
            if payload is None:
                continue
            self.batch.clear()
            try:
                events, summary = self.decoder.decode_data(payload, self.batch)
            except (_DecodeError, RefDecodeError) as exc:
                self.rec.corrupt_chunks += 1
                self.rec._warn(f"data chunk at byte {info.offset} is malformed ({exc}); skipped")
                self.batch.clear()
                continue
            self.events.extend(events)
            self.summaries.append(summary)
            self.errors += summary["errors"]
            yield self.batch


def open_recording(path: str | os.PathLike[str]) -> Recording:
    """Opens and checks a .psr file; raises a FormatError subclass that names the file."""
    p = os.fspath(path)
    try:
        fh = open(p, "rb")
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
