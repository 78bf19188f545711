"""A .psr file's chunks: where they are, and their payloads.

Memory is bounded by the largest chunk, not by the file: chunks are read one at a time. The
chunk list comes from the index the trailer points to; a file without a valid trailer (a
recorder that was killed) or with a damaged index is scanned chunk by chunk instead, a damaged
stretch skipped with a warning and the scan resynchronised on the next valid chunk. A payload
is checked against its chunk header before it is used: its checksum, and its size before and
after decompressing (spec section 9).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import BinaryIO

import msgpack
import zstandard

from . import _constants as C
from ._checks import msgpack_limits
from ._layout import unpack_chunk_header, unpack_trailer
from ._model import ChunkInfo, where
from .errors import CorruptRecordingError

__all__ = ["ChunkFile"]


class ChunkFile:
    """An open .psr file's bytes, read at an offset: chunk headers, the chunk list (from the
    index, or a scan) and checked payloads."""

    def __init__(self, path: str, fh: BinaryIO, size: int) -> None:
        self.path = path
        self._fh = fh
        self.file_size = size

    @property
    def max_chunks(self) -> int:
        """The most chunks a file of this size can hold: each takes at least its header."""
        return max(0, self.file_size - C.HEADER_SIZE - C.TRAILER_SIZE) // C.CHUNK_HEADER_SIZE

    def close(self) -> None:
        self._fh.close()

    def fileno(self) -> int:
        return self._fh.fileno()

    # -- the chunk list ------------------------------------------------------------------
    def read_index(self) -> tuple[list[ChunkInfo] | None, set[int] | None, str | None]:
        """The chunk list from the index, and the offsets of the DATA chunks it says hold a
        THREAD_RENAME (format 1.2; None before). The list is None when the index cannot be
        used, with what is wrong with it when the trailer is valid but the index is not."""
        if self.file_size < C.HEADER_SIZE + C.TRAILER_SIZE:
            return None, None, None
        trailer = unpack_trailer(self.read_at(self.file_size - C.TRAILER_SIZE, C.TRAILER_SIZE))
        if trailer is None:
            return None, None, None
        index_offset, _ = trailer
        info = self.chunk_at(index_offset)
        if info is None or info.type != C.CHUNK_INDEX:
            return None, None, (f"the trailer points to byte {index_offset}, where no INDEX "
                                "chunk is")
        at = where(info)
        try:
            index = msgpack.unpackb(self.payload(info), raw=False, **msgpack_limits(
                info.raw_length, max_array_len=max(6, self.max_chunks)))
            entries = index["chunks"]
            if len(entries) > self.max_chunks:
                return None, None, (f"{at} lists {len(entries):,} chunks, more than a file of "
                                    f"{self.file_size:,} bytes can hold ({self.max_chunks:,})")
            renamed = index.get("renames")  # since format 1.2
            if renamed is not None and (type(renamed) is not list or len(renamed) > len(entries)
                                        or not all(type(v) is int for v in renamed)):
                return None, None, f"{at} holds a `renames` that is not a list of chunk offsets"
            chunks = []
            end = C.HEADER_SIZE
            for entry in entries:
                off, ctype, first, last, passes, samples = entry
                if not all(type(v) is int for v in entry):
                    return None, None, f"{at} holds an entry that is not 6 integers"
                # Chunks follow one another: an entry that points back, or into the chunk
                # before it, is not a chunk of this file (or lists one twice).
                if off < end:
                    return None, None, f"{at} lists a chunk at byte {off} out of order"
                head = self.chunk_at(off)
                if head is None or head.type != ctype:
                    return None, None, f"{at} lists a chunk at byte {off}, where none is"
                chunks.append(
                    ChunkInfo(head.offset, head.type, head.flags, head.length, head.raw_length,
                              head.crc, first, last, passes, samples)
                )
                end = head.end
            if renamed is not None:
                data_at = {c.offset for c in chunks if c.type == C.CHUNK_DATA}
                if not data_at.issuperset(renamed):
                    return None, None, (f"{at} names a renaming chunk that is no DATA chunk it "
                                        "lists")
                renamed = set(renamed)
        except CorruptRecordingError as exc:
            return None, None, str(exc).split(": ", 1)[-1]
        except (ValueError, TypeError, KeyError, AttributeError, msgpack.UnpackException) as exc:
            return None, None, f"{at} is not a valid index ({type(exc).__name__}: {exc})"[:300]
        return chunks, renamed, None

    def scan(self, warn: Callable[[str], None],
             start: int = C.HEADER_SIZE) -> tuple[list[ChunkInfo], int]:
        """Every chunk found from the header (or `start`) on, and the damaged stretches
        skipped (each said in a warning)."""
        pos = start
        chunks: list[ChunkInfo] = []
        damaged = 0
        while pos < self.file_size:
            info = self.chunk_at(pos)
            if info is None:
                nxt = self._resync(pos + 1)
                if pos + C.CHUNK_HEADER_SIZE > self.file_size or nxt is None:
                    if self._looks_truncated(pos):
                        warn(
                            f"truncated at byte {self.file_size} inside a chunk starting at "
                            f"byte {pos}; every complete chunk before it was recovered"
                        )
                    else:
                        warn(f"{self.file_size - pos} unreadable bytes at byte {pos} skipped")
                    break
                warn(f"damaged bytes {pos}..{nxt} skipped; reading resumed at the next chunk")
                damaged += 1
                pos = nxt
                continue
            chunks.append(info)
            pos = info.end
            if info.type == C.CHUNK_INDEX and self.file_size - pos == C.TRAILER_SIZE:
                break
        return chunks, damaged

    def read_at(self, offset: int, size: int) -> bytes:
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

    def chunk_at(self, offset: int) -> ChunkInfo | None:
        if offset < C.HEADER_SIZE or offset + C.CHUNK_HEADER_SIZE > self.file_size:
            return None
        head = unpack_chunk_header(self.read_at(offset, C.CHUNK_HEADER_SIZE))
        if head is None or offset + C.CHUNK_HEADER_SIZE + head.length > self.file_size:
            return None
        return ChunkInfo(offset, head.type, head.flags, head.length, head.raw_length, head.crc)

    def _resync(self, start: int) -> int | None:
        """The offset of the next valid chunk header at or after start, if any."""
        sync = struct.pack("<I", C.CHUNK_SYNC)
        pos = start
        block = 1 << 20
        while pos < self.file_size:
            buf = self.read_at(pos, block + 3)
            i = buf.find(sync)
            while i >= 0:
                if self.chunk_at(pos + i) is not None:
                    return pos + i
                i = buf.find(sync, i + 1)
            pos += block
        return None

    def _looks_truncated(self, pos: int) -> bool:
        raw = self.read_at(pos, C.CHUNK_HEADER_SIZE)
        return len(raw) < C.CHUNK_HEADER_SIZE or raw[:4] == struct.pack("<I", C.CHUNK_SYNC)

    # -- payloads ------------------------------------------------------------------------
    def _raw_limit(self, info: ChunkInfo) -> int:
        """The most uncompressed bytes a chunk of this type may hold in this file."""
        if info.type in (C.CHUNK_METADATA, C.CHUNK_STATS):
            return C.MAX_MAP_RAW
        if info.type == C.CHUNK_INDEX:
            return 64 + C.INDEX_ENTRY_MAX * self.max_chunks
        return C.MAX_RAW

    def payload(self, info: ChunkInfo) -> bytes:
        """The chunk's uncompressed payload. Raises CorruptRecordingError if it is damaged, or
        holds more than a chunk of its type may (spec section 9)."""
        at = f"{self.path}: {where(info)}"
        if info.raw_length > self._raw_limit(info):
            if info.type == C.CHUNK_INDEX:
                most = (f"more than an index of the {self.max_chunks:,} chunks a file of "
                        f"{self.file_size:,} bytes can hold takes ({self._raw_limit(info):,})")
            else:
                most = f"more than the {self._raw_limit(info):,} a {info.type_name} chunk may hold"
            raise CorruptRecordingError(
                f"{at} is {info.raw_length:,} bytes uncompressed, {most}")
        payload = self.read_at(info.offset + C.CHUNK_HEADER_SIZE, info.length)
        if len(payload) != info.length or zlib.crc32(payload) != info.crc:
            raise CorruptRecordingError(f"{at} is damaged (checksum mismatch)")
        if info.flags & C.CHUNK_FLAG_ZSTD:
            payload = _inflate(payload, info.raw_length, at)
        if len(payload) != info.raw_length:
            raise CorruptRecordingError(
                f"{at} holds {len(payload):,} bytes where its header says "
                f"{info.raw_length:,}"
            )
        return payload


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
