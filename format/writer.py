"""Writes .psr files: the fixed header, then self-delimiting chunks, then index and trailer.

Records are encoded elsewhere (natively); this module frames, compresses and appends them.
Every chunk is written whole and flushed, so a writer killed at any instant leaves a file
whose completed chunks can all be recovered.
"""

from __future__ import annotations

import errno
import os
import zlib
from typing import Any, BinaryIO

import msgpack
import zstandard

from . import _constants as C
from ._layout import ChunkHeader, Header, pack_trailer
from .errors import FormatError, OutputExistsError, PsrecError

__all__ = ["PsrWriter", "open_output"]


def open_output(path: str | os.PathLike[str], force: bool = False) -> BinaryIO:
    """Opens path for writing; refuses to overwrite it unless force, with errors that help."""
    p = os.fspath(path)
    try:
        return open(p, "wb" if force else "xb")
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
        if exc.errno in (errno.EROFS, errno.ENOSPC):
            raise PsrecError(f"cannot create {p}: {exc.strerror}") from None
        raise


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
        self._file = open_output(self.path, force)
        self._zstd = zstandard.ZstdCompressor(level=level, write_content_size=True)
        self._index: list[list[int]] = []
        self._closed = False
        self.bytes_written = 0
        self.samples = 0
        self.passes = 0
        self.header = Header(
            C.FORMAT_MAJOR, C.FORMAT_MINOR, created_wall_ns, created_mono_ns, tick_ns
        )
        self._write(self.header.pack())
        self.write_chunk(C.CHUNK_METADATA, msgpack.packb(metadata, use_bin_type=True))

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
            index = {"chunks": self._index}
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
        """Closes the file without index or trailer, as a killed writer would leave it."""
        if not self._closed:
            self._closed = True
            self._file.close()

    def __enter__(self) -> PsrWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
