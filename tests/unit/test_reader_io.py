"""How much of a recording the reader reads: opening a cleanly closed file reads its header,
trailer and index (not every chunk's header), a full report reads each byte about once, and
a window reads the chunks it needs and little more.

The bytes are counted where they leave the operating system: the reader's file is opened on
a counting raw file, under whatever buffering the reader asks for, so a 4 KiB read-ahead of
a buffered file counts as the 4 KiB it costs.
"""

from __future__ import annotations

import io
import os
import random
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from analyzer_synth import F_A, F_B, MAIN, Synth
from click.testing import CliRunner
from psrec.cli import main
from psrec.format import _constants as C
from psrec.format import open_recording
from psrec.format import reader as reader_module

PASSES = 30_000  # 30 s at 1 kHz
CHUNK_PASSES = 100  # 300 data chunks
THREADS = 16


class _CountingFile(io.FileIO):
    """A raw file that adds every byte it returns to a shared total."""

    def __init__(self, path: str, total: list[int]) -> None:
        super().__init__(path, "r")
        self._total = total

    def readinto(self, b: Any) -> int | None:
        n = super().readinto(b)
        self._total[0] += n or 0
        return n

    def read(self, size: int = -1) -> bytes:
        data = super().read(size)  # FileIO.read does not go through readinto
        self._total[0] += len(data or b"")
        return data

    def readall(self) -> bytes:
        data = super().readall()
        self._total[0] += len(data)
        return data


@pytest.fixture
def bytes_read(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """A one-item list holding the bytes read so far from every file psrec.format opens."""
    total = [0]

    def counting_open(path: Any, mode: str = "r", buffering: int = -1, *a: Any, **k: Any) -> Any:
        assert mode == "rb" and not a and not k, "the reader opens recordings as binary"
        raw = _CountingFile(os.fspath(path), total)
        return raw if buffering == 0 else io.BufferedReader(raw)

    monkeypatch.setattr(reader_module, "open", counting_open, raising=False)
    yield total


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("io") / "many.psr")
    s = Synth(path, chunk_passes=CHUNK_PASSES)
    workers = [f"worker-{n}" for n in range(THREADS)]
    for n, name in enumerate(workers):
        s.thread(name, 100 + n)
    rnd = random.Random(21)  # CPU times that do not compress away: chunks of a few KB
    ts = 0
    for i in range(PASSES):
        ts += s.interval_ticks
        if i == 30:  # a name given in the first chunk: every window must show it
            s.rename("worker-1", ts, "parser")
        s.sample_pass(ts, {
            name: (((MAIN, F_A) if rnd.random() < 0.5 else (MAIN, F_B)), 0x03,
                   rnd.randrange(1, 1000))
            for name in workers
        })
    return s.close()


def _report(path: str, *args: str) -> str:
    result = CliRunner().invoke(main, ["report", path, *args])
    assert result.exit_code == 0, result.output
    return result.output


def _sizes(path: str) -> dict[str, int]:
    """Bytes the file holds per chunk type (headers included), and its chunk count."""
    out = {"chunks": 0}
    with open_recording(path) as rec:
        for c in rec.chunks:
            out[c.type_name] = out.get(c.type_name, 0) + c.end - c.offset
            out["chunks"] += 1
        # the index is not one of the chunks it lists: it fills the file up to the trailer
        out["INDEX"] = rec.file_size - C.TRAILER_SIZE - max(c.end for c in rec.chunks)
    return out


def test_opening_a_closed_file_reads_its_index_not_its_chunks(
        recording: str, bytes_read: list[int]) -> None:
    sizes = _sizes(recording)
    bytes_read[0] = 0
    with open_recording(recording) as rec:
        assert rec.clean and not rec.warnings
    # the header, the trailer, the index, the maps opening decodes, and each chunk's header
    most = (C.HEADER_SIZE + C.TRAILER_SIZE + sizes["INDEX"] + sizes["METADATA"]
            + sizes["STATS"] + C.CHUNK_HEADER_SIZE * sizes["chunks"])
    assert bytes_read[0] <= most, (bytes_read[0], most, sizes)


def test_a_full_report_reads_each_byte_about_once(recording: str, bytes_read: list[int]) -> None:
    size = os.path.getsize(recording)
    _report(recording)
    assert bytes_read[0] <= 1.1 * size, f"{bytes_read[0]:,} bytes read of {size:,}"



def _window_most(path: str, *renamed: int) -> int:
    """What a window of 5% of the file needs: the header, trailer, index, maps, definitions
    and every chunk's header, its own DATA chunks (a little over 5%), and the chunks the
    index lists as renaming a thread."""
    sizes = _sizes(path)
    with open_recording(path) as rec:
        data = [c for c in rec.chunks if c.type == C.CHUNK_DATA]
        assert rec.renamed == {data[i].offset for i in renamed}, rec.renamed
        extra = sum(data[i].end - data[i].offset for i in renamed)
    return (C.HEADER_SIZE + C.TRAILER_SIZE + sizes["INDEX"] + sizes["METADATA"] + sizes["STATS"]
            + sizes["DEFS"] + C.CHUNK_HEADER_SIZE * sizes["chunks"] + int(0.06 * sizes["DATA"])
            + extra)


def test_a_window_reads_its_chunks_and_those_that_rename_a_thread(
        recording: str, bytes_read: list[int]) -> None:
    """A window decodes the samples of its chunks only, and reads the renames of the chunks
    the index lists as holding one: every other data chunk was read for its renames (1.85
    times the file, then once), now none is."""
    most = _window_most(recording, 0)  # the rename is in the first chunk
    bytes_read[0] = 0
    out = _report(recording, "--from", "15", "--to", "16.5")  # 5% of the 30 s
    assert "24,000 samples over 1.499 s" in out, out
    assert "parser" in _report(recording, "--from", "15", "--to", "16.5", "--per-thread")
    assert bytes_read[0] <= 2 * most, f"{bytes_read[0]:,} bytes read, at most {most:,} needed"


def test_a_thread_named_by_a_rename_in_a_window_reads_the_renaming_chunks_once(
        recording: str, bytes_read: list[int]) -> None:
    """`--thread NAME` reads the renames to find the thread; the window then takes the
    renames from that read instead of reading them again."""
    most = _window_most(recording, 0)
    bytes_read[0] = 0
    out = _report(recording, "--thread", "parser", "--from", "15", "--to", "16.5")
    assert "1,500 samples over 1.499 s in 1 thread" in out, out
    assert bytes_read[0] <= most, f"{bytes_read[0]:,} bytes read, at most {most:,} needed"


def test_a_file_of_format_1_1_is_read_whole_for_renames(
        recording: str, bytes_read: list[int], tmp_path: Any) -> None:
    """An index without `renames` (written before format 1.2) says nothing of where the
    renames are: every data chunk is read for them, once."""
    import msgpack
    import zstandard
    from psrec.format._layout import ChunkHeader, pack_trailer, unpack_trailer

    data = open(recording, "rb").read()
    found = unpack_trailer(data[-C.TRAILER_SIZE:])
    assert found is not None
    index_off, data_chunks = found
    with open_recording(recording) as rec:
        index = next(c for c in _chunks_of(rec) if c.offset == index_off)
        doc = msgpack.unpackb(rec.payload(index))
    del doc["renames"]
    raw = msgpack.packb(doc)
    stored = zstandard.ZstdCompressor(write_content_size=True).compress(raw)
    head = ChunkHeader(C.CHUNK_INDEX, C.CHUNK_FLAG_ZSTD, len(stored), len(raw),
                       zlib.crc32(stored))
    old = tmp_path / "old.psr"
    old.write_bytes(data[:index_off] + head.pack() + stored
                    + pack_trailer(index_off, data_chunks))
    with open_recording(old) as rec:
        assert rec.clean and rec.renamed is None and not rec.warnings
    size = os.path.getsize(old)
    bytes_read[0] = 0
    assert "parser" in _report(str(old), "--from", "15", "--to", "16.5", "--per-thread")
    assert 0.9 * size <= bytes_read[0] <= 1.1 * size, (bytes_read[0], size)


def _chunks_of(rec: Any) -> Iterator[Any]:
    """The chunks of an open file, the INDEX included (the index lists the others)."""
    yield from rec.chunks
    at = rec._file.chunk_at(max(c.end for c in rec.chunks))
    if at is not None:
        yield at
