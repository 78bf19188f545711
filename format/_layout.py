"""Byte layouts of a .psr file: the fixed parts (header, chunk header, trailer) and the field
order of every record (RECORD_FIELDS)."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import NamedTuple

from . import _constants as C

__all__ = ["ChunkHeader", "Column", "Field", "Header", "RECORD_FIELDS", "SAMPLE_COLUMNS",
           "pack_trailer",
           "unpack_chunk_header", "unpack_header", "unpack_trailer"]


class Field(NamedTuple):
    """One field of a record, in the words of spec/psr-format.md (sections 3.1 and 4)."""

    name: str
    type: str  # the spec's type: varint, zigzag, string id, function id
    form: str  # what it decodes to: u32 (a definition's id), u64, i64 (a data record's
    # values, as both decoders keep them), zigzag (a signed varint)
    label: str = ""  # psrec dump's word for it, when not the name
    show: str = "{}"  # how psrec dump shows its value
    # Written only in some records of its type (after every field that is always there): a
    # record that ends before it has the value 0.
    optional: bool = False


_V = "varint"
# Every record's fields, in file order: the one Python statement of the record layouts, read by
# the reference decoder and psrec dump; tests/unit/test_spec_sync.py checks it against the
# spec's tables, and the field order against format/native/encoder.cpp and decoder.cpp. A
# STRING's fields are followed by its utf-8 bytes, a PASS's by its entries (section 4.1).
RECORD_FIELDS: dict[int, tuple[Field, ...]] = {
    C.REC_STRING: (Field("id", _V, "u32"), Field("length", _V, "u64")),
    C.REC_FUNCTION: (Field("id", _V, "u32"), Field("filename", "string id", "u32", "file"),
                     Field("name", "string id", "u32"), Field("first_line", _V, "u32"),
                     # format 1.3: native functions only
                     Field("kind", _V, "u32", optional=True),
                     Field("build_id", "string id", "u32", optional=True),
                     Field("address", _V, "u64", optional=True, show="{:#x}")),
    C.REC_FRAME: (Field("id", _V, "u32"), Field("function", "function id", "u32"),
                  Field("line", "zigzag", "zigzag")),
    C.REC_THREAD: (Field("ref", _V, "u32"), Field("pid", _V, "u64"),
                   Field("python_tid", _V, "u64", show="{:#x}"), Field("os_tid", _V, "u64"),
                   Field("name", "string id", "u32"), Field("start_ts", _V, "u64", "start")),
    C.REC_PROCESS: (Field("pid", _V, "u64"), Field("parent_pid", _V, "u64"),
                    Field("command", "string id", "u32"), Field("start_ts", _V, "u64", "start")),
    # format 1.4: asyncio tasks
    C.REC_TASK: (Field("id", _V, "u32"), Field("pid", _V, "u64"),
                 Field("address", _V, "u64", show="{:#x}"), Field("name", "string id", "u32"),
                 Field("coroutine", "function id", "u32"), Field("start_ts", _V, "u64", "start")),
    C.REC_BEGIN: (Field("seq", _V, "u64"), Field("base_ts", _V, "i64"),
                  Field("prev_pass", _V, "i64")),
    C.REC_PASS: (Field("delta", _V, "i64"),),
    C.REC_THREAD_START: (Field("ref", _V, "i64"), Field("ts", _V, "u64")),
    C.REC_THREAD_EXIT: (Field("ref", _V, "i64"), Field("ts", _V, "u64")),
    C.REC_THREAD_RENAME: (Field("ref", _V, "i64"), Field("ts", _V, "u64"),
                          Field("name", "string id", "i64")),
    C.REC_PROCESS_START: (Field("ts", _V, "u64"), Field("pid", _V, "i64"),
                          Field("parent_pid", _V, "i64", "parent"),
                          Field("command", "string id", "i64")),
    C.REC_PROCESS_EXIT: (Field("ts", _V, "u64"), Field("pid", _V, "i64"),
                         Field("exit_code", "zigzag", "zigzag", "code")),
    C.REC_PASS_ERRORS: (Field("ts", _V, "u64"), Field("errors", _V, "i64"),
                        Field("missed_deadlines", _V, "i64", "missed")),
    C.REC_MARKER: (Field("ts", _V, "u64"), Field("label", "string id", "i64")),
    C.REC_PASS_TASKS: (),  # then (ref, task) pairs to its end (section 4)
    C.REC_TASK_SNAPSHOT: (Field("ts", _V, "u64"), Field("pid", _V, "i64"),
                          Field("full", _V, "i64"), Field("since", _V, "i64")),
    # then `depth` frame ids (section 4.3)
    C.REC_TASK_STATE: (Field("task", _V, "i64"), Field("state", _V, "i64"),
                       Field("waits", "string id", "i64"), Field("depth", _V, "i64")),
    C.REC_TASK_AWAITS: (Field("task", _V, "i64"), Field("awaited", _V, "i64")),
}


class Column(NamedTuple):
    """One column of decoded samples (spec/psr-format.md section 8.1)."""

    name: str
    typecode: str  # of the array that holds it (the native SampleBatch gives its raw bytes)


# The columns a decoded chunk gives for each thread-sample, in order: the Python twin of
# format/native/sample_columns.hpp, read by the reference decoder's RefBatch;
# tests/unit/test_spec_sync.py checks the two against the spec's table.
SAMPLE_COLUMNS: tuple[Column, ...] = (
    Column("ts", "q"), Column("thread", "I"), Column("node", "I"), Column("status", "B"),
    Column("cpu", "I"), Column("weight", "I"), Column("task", "I"),
)

_HEADER = struct.Struct("<8sHHIqqII20s")  # without its trailing crc32
_CHUNK = struct.Struct("<IBBHIII")  # without its trailing header crc32
_TRAILER = struct.Struct("<QI")  # then crc32, then the 8-byte trailer magic


@dataclass(frozen=True)
class Header:
    major: int
    minor: int
    created_wall_ns: int
    created_mono_ns: int
    tick_ns: int
    flags: int = 0

    def pack(self) -> bytes:
        body = _HEADER.pack(
            C.MAGIC,
            self.major,
            self.minor,
            C.HEADER_SIZE,
            self.created_wall_ns,
            self.created_mono_ns,
            self.tick_ns,
            self.flags,
            b"\0" * 20,
        )
        return body + struct.pack("<I", zlib.crc32(body))


def unpack_header(raw: bytes) -> tuple[Header | None, str | None]:
    """Returns the header, or None and what is wrong with it."""
    if len(raw) < len(C.MAGIC) or raw[: len(C.MAGIC)] != C.MAGIC:
        return None, "not a psrec recording (no .psr magic number)"
    if len(raw) < 12:
        return None, "truncated inside its file header"
    major, minor = struct.unpack_from("<HH", raw, 8)
    if major != C.FORMAT_MAJOR:
        return None, (
            f"recorded in .psr format {major}.{minor}; this psrec reads format "
            f"{C.FORMAT_MAJOR}.x"
        )
    if len(raw) < C.HEADER_SIZE:
        return None, "truncated inside its file header"
    (crc,) = struct.unpack_from("<I", raw, C.HEADER_SIZE - 4)
    if zlib.crc32(raw[: C.HEADER_SIZE - 4]) != crc:
        return None, "its file header is corrupt (checksum mismatch)"
    _, major, minor, size, wall, mono, tick, flags, _ = _HEADER.unpack_from(raw, 0)
    if size != C.HEADER_SIZE or tick == 0:
        return None, "its file header is corrupt"
    return Header(major, minor, wall, mono, tick, flags), None


@dataclass(frozen=True)
class ChunkHeader:
    type: int
    flags: int
    length: int
    raw_length: int
    crc: int

    def pack(self) -> bytes:
        body = _CHUNK.pack(
            C.CHUNK_SYNC, self.type, self.flags, 0, self.length, self.raw_length, self.crc
        )
        return body + struct.pack("<I", zlib.crc32(body))


def unpack_chunk_header(raw: bytes) -> ChunkHeader | None:
    """The chunk header at the start of raw, or None if raw does not hold a valid one."""
    if len(raw) < C.CHUNK_HEADER_SIZE:
        return None
    sync, ctype, flags, _, length, raw_length, crc = _CHUNK.unpack_from(raw, 0)
    (hcrc,) = struct.unpack_from("<I", raw, C.CHUNK_HEADER_SIZE - 4)
    if sync != C.CHUNK_SYNC or zlib.crc32(raw[: C.CHUNK_HEADER_SIZE - 4]) != hcrc:
        return None
    if length > C.MAX_PAYLOAD or raw_length > C.MAX_RAW:
        return None
    return ChunkHeader(ctype, flags, length, raw_length, crc)


def pack_trailer(index_offset: int, chunk_count: int) -> bytes:
    body = _TRAILER.pack(index_offset, chunk_count)
    return body + struct.pack("<I", zlib.crc32(body)) + C.TRAILER_MAGIC


def unpack_trailer(raw: bytes) -> tuple[int, int] | None:
    if len(raw) != C.TRAILER_SIZE or raw[-8:] != C.TRAILER_MAGIC:
        return None
    (crc,) = struct.unpack_from("<I", raw, 12)
    if zlib.crc32(raw[:12]) != crc:
        return None
    index_offset, count = _TRAILER.unpack_from(raw, 0)
    return index_offset, count
