"""Byte layouts of the fixed parts of a .psr file: header, chunk header, trailer."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from . import _constants as C

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
