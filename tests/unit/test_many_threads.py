"""A recording of many short-lived threads (a server that starts a thread per request) is read
by every output in time and memory linear in its threads: the per-thread table, the HTML page,
speedscope, the Firefox Profiler and pprof. Each output reads recordings of a few thousand
threads and of 4 times as many: a linear read takes about 4 times as long and as much memory
on the larger one, a read whose work grows with the square of the threads 16 times.

The bounds leave room for a busy machine. Time is CPU time (which a loaded host's run queue
does not add to), the least of 3 runs, the runs of the two sizes interleaved so that a busy
spell falls on both, with the garbage collector as in a process of its own; the ratio asked
for (below 6) is halfway between linear and square (about 4 here). Memory is what tracemalloc
counts at its peak, which no other process moves, on smaller recordings (tracing every
allocation makes a read 10 times slower); beside the ratio, what each thread adds to the peak
has a bound. The benchmark's figure "many threads" (tests/perf/_threads.py) measures the same
outputs at 10,000 to 100,000 threads, in processes of their own.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from analyzer_synth import BUSY, Synth
from click.testing import CliRunner
from psrec.cli import main

SMALL, LARGE = 5_000, 20_000  # threads, for time
MEM_SMALL, MEM_LARGE = 2_000, 8_000  # threads, for memory
RATIO = 6.0  # linear: about 4; square: about 16
RUNS = 3
# Generous bounds on the larger read: CPU seconds (the benchmark's target is 100,000 threads
# in 20 s), and the Python memory each thread adds at the peak (the target, 1 GiB of RSS at
# 100,000 threads, is 10.7 KB a thread, of which Python's own allocations are a part).
SECONDS = 15.0
BYTES_PER_THREAD = 4096

OUTPUTS: dict[str, Callable[[str, Path], list[str]]] = {
    "report --per-thread": lambda f, o: ["report", "--per-thread", f, "-o", str(o)],
    "report --html": lambda f, o: ["report", "--html", f, "-o", str(o)],
    "export --speedscope": lambda f, o: ["export", "--speedscope", f, "-o", str(o)],
    "export --firefox": lambda f, o: ["export", "--firefox", f, "-o", str(o)],
    "export --pprof": lambda f, o: ["export", "--pprof", f, "-o", str(o)],
}

STACKS = [
    (("server.py", "serve", 10), ("server.py", "handle", 42), ("app.py", f"view_{i}", 100 + i))
    for i in range(8)
] + [(("server.py", "serve", 10), ("threading.py", "wait", 320))]


def many_threads(path: Path, threads: int, per_thread: int = 8, alive: int = 800) -> str:
    """threads threads, each sampled in per_thread passes of 1 ms and then ended, about
    `alive` of them at a time: each on another of a few stacks at each sample, a third of its
    samples busy."""
    s = Synth(str(path), chunk_passes=250)
    live: list[tuple[str, int, int]] = []  # name, number, samples left
    started = 0
    ts = 1000
    while started < threads or live:
        for _ in range(min(alive // per_thread, threads - started)):
            name = f"worker-{started}"
            s.thread(name, 10_000 + started, ts)
            live.append((name, started, per_thread))
            started += 1
        entries = {}
        for name, number, left in live:
            busy = (number + left) % 3 == 0
            entries[name] = (STACKS[(number + left) % len(STACKS)], BUSY if busy else 0,
                             900 if busy else 0)
        s.sample_pass(ts, entries)
        ts += 1000
        for name, _, left in live:
            if left == 1:
                s.thread_exit(name, ts)
        live = [(name, number, left - 1) for name, number, left in live if left > 1]
    return s.close()


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[int, str]:
    folder = tmp_path_factory.mktemp("many-threads")
    return {n: many_threads(folder / f"threads-{n}.psr", n)
            for n in (SMALL, LARGE, MEM_SMALL, MEM_LARGE)}


def _run(args: list[str], out: Path) -> None:
    if out.exists():
        out.unlink()
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output


@contextmanager
def _own_collector() -> Iterator[None]:
    """The garbage collector as in a process of its own, for one read: the test process's
    objects (pytest's, the other tests') frozen out of its passes, and its counts started
    from nothing, so that its full passes come when the read's own objects call for them,
    whatever ran before."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _cpu_seconds(args: list[str], out: Path) -> float:
    with _own_collector():
        t0 = time.process_time()
        _run(args, out)
        return time.process_time() - t0


def _peak_bytes(args: list[str], out: Path) -> int:
    with _own_collector():
        tracemalloc.start()
        try:
            _run(args, out)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


@pytest.mark.parametrize("output", list(OUTPUTS))
def test_time_linear_in_threads(output: str, recordings: dict[int, str],
                                tmp_path: Path) -> None:
    out = tmp_path / "out"
    best = {SMALL: float("inf"), LARGE: float("inf")}
    for _ in range(RUNS):
        for n in best:
            best[n] = min(best[n], _cpu_seconds(OUTPUTS[output](recordings[n], out), out))
    ratio = best[LARGE] / best[SMALL]
    said = (f"{output}: {best[SMALL]:.3f} s of CPU at {SMALL:,} threads, {best[LARGE]:.3f} s "
            f"at {LARGE:,} ({ratio:.1f}x for 4x the threads)")
    assert ratio < RATIO, said
    assert best[LARGE] < SECONDS, said


@pytest.mark.parametrize("output", list(OUTPUTS))
def test_memory_linear_in_threads(output: str, recordings: dict[int, str],
                                  tmp_path: Path) -> None:
    out = tmp_path / "out"
    _run(OUTPUTS[output](recordings[MEM_SMALL], out), out)  # its modules imported
    peak = {n: _peak_bytes(OUTPUTS[output](recordings[n], out), out)
            for n in (MEM_SMALL, MEM_LARGE)}
    ratio = peak[MEM_LARGE] / peak[MEM_SMALL]
    each = (peak[MEM_LARGE] - peak[MEM_SMALL]) / (MEM_LARGE - MEM_SMALL)
    said = (f"{output}: Python memory at its peak {peak[MEM_SMALL] / 2**20:.1f} MiB at "
            f"{MEM_SMALL:,} threads, {peak[MEM_LARGE] / 2**20:.1f} MiB at {MEM_LARGE:,} "
            f"({ratio:.1f}x for 4x the threads, {each:,.0f} bytes a thread more)")
    assert ratio < RATIO, said
    assert each < BYTES_PER_THREAD, said
