"""Figure M: a recording of many threads, read by every output that draws threads.

A synthetic recording (the native encoder, cached beside the others) of THREADS threads alive
at once, each sampled in SAMPLES passes, on one of a few stacks each time, a third of its
samples busy: what a server that keeps a thread per connection leaves. `psrec report
--per-thread`, `report --html`, `export --speedscope`, `--firefox` and `--pprof` read it at
10,000, 50,000 and 100,000 threads, each in a process of its own: wall time (start-up
included) and peak RSS (VmHWM, polled every 20 ms), each also per 1,000 threads, so that
linearity shows; and the time that the last 50,000 threads add per 1,000 beside what the
first 50,000 cost per 1,000 (1 where linear, 2.5 where the work grows with the square of
the threads). Target: 100,000 threads under 20 s and 1 GiB on 2 cores, for every output.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from typing import Any

from ._figures import Ctx
from ._report import Row, summarize
from ._synth import _timed_runs

GIL, ON_CPU = 0x01, 0x02
GENERATOR_VERSION = 1
THREADS = (10_000, 50_000, 100_000)
SAMPLES = 4  # passes each thread is sampled in
TARGET_S, TARGET_MIB = 20.0, 1024.0

COMMANDS = (
    ("report --per-thread", "report",
     lambda py, f, o: [py, "-m", "psrec", "report", "--per-thread", f, "-o", o]),
    ("report --html", "html", lambda py, f, o: [py, "-m", "psrec", "report", "--html", f, "-o", o]),
    ("export --speedscope", "export",
     lambda py, f, o: [py, "-m", "psrec", "export", "--speedscope", f, "-o", o]),
    ("export --firefox", "firefox",
     lambda py, f, o: [py, "-m", "psrec", "export", "--firefox", f, "-o", o]),
    ("export --pprof", "pprof",
     lambda py, f, o: [py, "-m", "psrec", "export", "--pprof", f, "-o", o]),
)


def write_many_threads(path: str, threads: int, samples: int = SAMPLES,
                       seed: int = 1) -> dict[str, Any]:
    """A recording of `threads` threads alive at once, each sampled in `samples` passes 1 ms
    apart (a chunk each), on one of 50 stacks 4 to 13 frames deep each time (60 functions in
    10 files), a third of its samples on a CPU holding the GIL."""
    from psrec.format import PsrWriter
    from psrec.format import _format as F

    rng = random.Random(seed)
    enc = F.Encoder()
    files = [enc.intern_string(f"/srv/app/handlers_{i}.py") for i in range(10)]
    frames = [enc.intern_frame(enc.intern_function(files[i % 10],
                                                   enc.intern_string(f"handle_{i}"), 10 * i), 5)
              for i in range(60)]
    stacks = [[frames[0]] + [rng.choice(frames) for _ in range(rng.randint(3, 12))]
              for _ in range(50)]
    interval = 1000  # ticks of 1 µs
    w = PsrWriter(path, metadata={"interval_ns": interval * 1000, "rate_hz": 1000, "pid": 4242,
                                  "command": ["python", "server.py"],
                                  "python_version": "3.11.7", "synthetic": True},
                  created_wall_ns=time.time_ns(), created_mono_ns=time.monotonic_ns(),
                  force=True)
    ts = 1000
    refs = [enc.add_thread(4242, 0x10000 + i, 10_000 + i, f"conn-{i}", ts)
            for i in range(threads)]
    for _ in range(samples):
        enc.begin_pass(ts)
        for ref in refs:
            busy = rng.random() < 1 / 3
            enc.sample(ref, rng.choice(stacks), GIL | ON_CPU if busy else 0,
                       interval if busy else 0)
        enc.end_pass()
        w.write_sealed(*enc.seal())
        ts += interval
    for ref in refs:
        enc.thread_exit(ref, ts)
    w.write_sealed(*enc.seal())
    stats = dict(enc.stats)
    w.close({"samples": stats["samples"], "passes": stats["passes"], "sample_errors": 0})
    return stats


def _cached(ctx: Ctx, cache: str, threads: int) -> str:
    os.makedirs(cache, exist_ok=True)
    path = os.path.join(cache, f"threads-v{GENERATOR_VERSION}-{threads}.psr")
    if not os.path.exists(path):
        ctx.log(f"  writing a synthetic recording of {threads:,} threads: {path}")
        write_many_threads(path + ".tmp", threads)
        os.replace(path + ".tmp", path)
    return path


def fig_threads(ctx: Ctx, cache: str) -> None:
    reps = 1 if ctx.quick else 3
    ctx.log(f"[M] many threads: {', '.join(f'{n:,}' for n in THREADS)} threads, "
            f"{SAMPLES} samples each, every output ({reps} runs each)")
    files = {n: _cached(ctx, cache, n) for n in THREADS}
    have = ctx.tc.psrec_analyzer
    raw: dict[str, Any] = {}
    for name, needs, make in COMMANDS:
        if not have.get(needs):
            ctx.add(Row("M", f"psrec {name}, {THREADS[-1]:,} threads", "s", "none", {},
                        f"< {TARGET_S:g} s", None, note="not available yet"))
            continue
        runs = {}
        for n, path in files.items():
            times, rss = _timed_runs(ctx, name, make, path, n, reps)
            runs[n] = (times, rss)
            raw[f"{name} {n}"] = {"wall_s": times, "maxrss_mib": rss}
        for n, (times, _) in runs.items():
            big = n == THREADS[-1]
            per = summarize([1e3 * t / (n / 1000) for t in times])
            ctx.add(Row("M", f"psrec {name}, {n:,} threads", "s", "none",
                        {"psrec": summarize(times)}, f"< {TARGET_S:g} s" if big else "",
                        (lambda p, b: p.median < TARGET_S) if big else None,
                        note=f"{per.median:.1f} ms per 1,000 threads" if per else "failed"))
        for n, (_, rss) in runs.items():
            big = n == THREADS[-1]
            per = summarize([r / (n / 1000) for r in rss])
            ctx.add(Row("M", f"psrec {name}, {n:,} threads: peak RSS", "MiB", "none",
                        {"psrec": summarize(rss)}, f"< {TARGET_MIB:g} MiB" if big else "",
                        (lambda p, b: p.median < TARGET_MIB) if big else None,
                        note=f"{per.median:.2f} MiB per 1,000 threads" if per else "failed"))
        if all(runs[n][0] for n in THREADS):
            # of the medians: the time each 1,000 threads adds past the middle size, over
            # what each 1,000 adds up to it
            a, b, c = (statistics.median(runs[n][0]) for n in THREADS)
            first = (b - a) / ((THREADS[1] - THREADS[0]) / 1000)
            last = (c - b) / ((THREADS[2] - THREADS[1]) / 1000)
            ctx.add(Row("M", f"psrec {name}: time per 1,000 threads added, "
                        f"{THREADS[1] // 1000}k-{THREADS[2] // 1000}k ÷ "
                        f"{THREADS[0] // 1000}k-{THREADS[1] // 1000}k", "×", "none",
                        {"psrec": summarize([last / first])} if first > 0 else {},
                        "≤ 1.5 (linear: 1, square: 2.5)", lambda p, b: p.median <= 1.5))
    ctx.raw["threads"] = raw
