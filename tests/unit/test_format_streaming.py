"""The reader streams: reading a recording holds about one chunk in memory, not the file."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import pytest
from format_helpers import new_writer
from psrec.format import _constants as C
from psrec.format import native_available, open_recording

pytestmark = pytest.mark.skipif(
    not native_available(), reason="the native codec (psrec.format._format) is not built"
)

SAMPLES = 2400
SEAL_EVERY = 16


def write_big(path: Path) -> int:
    """A recording whose leaf frame alternates under deep stacks, so that its records are
    large (about 16 KiB a sample) while its compressed chunks stay small. Returns the total
    uncompressed size of its chunks."""
    from psrec.format import _format

    enc = _format.Encoder()
    w = new_writer(path)
    fn = enc.intern_string("deep.py")
    frames = [enc.intern_frame(enc.intern_function(fn, enc.intern_string(f"f{i}"), i), i)
              for i in range(400)]
    deep_a = [frames[i % 400] for i in range(8000)]
    deep_b = [frames[(i * 7) % 400] for i in range(8000)]
    t = enc.add_thread(1, 1, 1, "MainThread", 0)
    for i in range(SAMPLES):
        enc.begin_pass(1000 * (i + 1))
        enc.sample(t, deep_a if i % 2 else deep_b, 1)
        enc.end_pass()
        if i % SEAL_EVERY == SEAL_EVERY - 1:
            w.write_sealed(*enc.seal())
    w.write_sealed(*enc.seal())
    w.close()
    with open_recording(path) as rec:
        return sum(c.raw_length for c in rec.chunks)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    path = tmp_path_factory.mktemp("big") / "big.psr"
    raw_total = write_big(path)
    assert raw_total > 25 << 20
    return path, raw_total


def test_python_side_peak_is_bounded_by_chunk(big: tuple[Path, int]) -> None:
    path, raw_total = big
    with open_recording(path) as rec:
        largest = max(c.raw_length for c in rec.chunks)
        assert len([c for c in rec.chunks if c.type == C.CHUNK_DATA]) >= SAMPLES // SEAL_EVERY
        tracemalloc.start()
        try:
            n = 0
            for batch in rec.stream(native=True):
                n += len(batch)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert n == SAMPLES
    # A few chunk payloads at most (compressed and decompressed), never the whole file.
    assert peak < 4 * largest + (1 << 20), (peak, largest)
    assert peak < raw_total // 10, (peak, raw_total)


def test_process_peak_memory_is_bounded_by_chunk(big: tuple[Path, int]) -> None:
    """The native decoder's allocations are invisible to tracemalloc: measure the process's
    peak resident size instead, in a fresh interpreter."""
    path, raw_total = big
    script = textwrap.dedent(f"""
        import resource
        from psrec.format import open_recording
        rec = open_recording({str(path)!r})
        stream = rec.stream(native=True)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        n = sum(len(b) for b in stream)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(n, (after - before) * 1024)
    """)
    proc = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True,
                          text=True,
                          timeout=120, env=os.environ.copy())
    assert proc.returncode == 0, proc.stderr
    n, grown = map(int, proc.stdout.split())
    assert n == SAMPLES
    assert grown < raw_total // 4, f"peak RSS grew by {grown} bytes reading {raw_total} bytes"


def test_reference_decoder_streams_too(tmp_path: Path) -> None:
    """The same bound for the pure-Python path, on a smaller file (it is slow on deep stacks)."""
    from psrec.format import _format

    path = tmp_path / "ref.psr"
    enc = _format.Encoder()
    w = new_writer(path)
    fn = enc.intern_string("m.py")
    frames = [enc.intern_frame(enc.intern_function(fn, enc.intern_string(f"g{i}"), i), i)
              for i in range(50)]
    t = enc.add_thread(1, 1, 1, "T", 0)
    for i in range(40_000):
        enc.begin_pass(1000 * (i + 1))
        enc.sample(t, frames[: 10 + i % 40], 1, i % 3)
        enc.end_pass()
        if i % 1000 == 999:
            w.write_sealed(*enc.seal())
    w.write_sealed(*enc.seal())
    w.close()
    with open_recording(path) as rec:
        tracemalloc.start()
        try:
            n = 0
            for batch in rec.stream(native=False):
                n += len(batch)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert n == 40_000
    # One chunk's batch (1000 samples) and payload, not 40,000 samples' worth of columns
    # (25 bytes a sample in the batch's arrays).
    assert peak < 40_000 * 25 // 5, peak
