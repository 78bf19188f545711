"""Figure K: psrec as a flight recorder (record --keep, --max-size), always on.

- the target's slowdown in windows of one running target (as figure 3), psrec with --keep at
  100 Hz (its default then) and 1 kHz, beside py-spy and Austin at the same rates;
- one long recording at 1 kHz on threads.py, held at its size bound (--max-size 1M) or its
  time bound (BOUNDS) for PSREC_BENCH_KEEP_S seconds (600 by default, 60 with --quick; the
  figures pasted in docs/performance.md come from 3600): the recorder's RSS sampled every
  5 s, the file's size every second, and what the file covers when it ends;
- a 10 s window read from a recording of one hour and 100 M thread-samples (synthetic, cached
  beside the others): `psrec report --from 1800 --to 1810`, start-up included.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

from . import _proc
from ._figures import Ctx, start_workload
from ._report import Row, summarize
from ._synth import _cached_synthetic
from ._windows import failed, measure

KEEP_RATES = (100, 1000)
# The long run's bounds: threads.py at 1 kHz writes about 15 KB/s, so the file reaches 1 MiB
# in about a minute and stays at its size bound from then on (the time bound, 10 minutes, is
# not reached); PSREC_BENCH_KEEP_BOUNDS=time gives 60 s and 4 MiB instead, where the time
# bound holds the file at about 1 MiB.
BOUNDS = {"size": (600, 1 << 20), "time": (60, 4 << 20)}


def fig_keep(ctx: Ctx, cache: str) -> None:
    """PSREC_BENCH_KEEP_PARTS (slowdown, long, window; all by default) runs some parts: the
    long one can run on its own for an hour while the machine is busy with other work."""
    parts = os.environ.get("PSREC_BENCH_KEEP_PARTS", "slowdown,long,window").split(",")
    if "slowdown" in parts:
        _slowdown(ctx)
    if "long" in parts:
        _long_run(ctx)
    if "window" in parts:
        _window_read(ctx, cache)


def _slowdown(ctx: Ctx) -> None:
    rounds = 2 if ctx.quick else 4
    window = 1.5 if ctx.quick else 2.5
    tools = ctx.tools()
    configs = [(f"{t}@{rate}", t, rate,
                {"extra": ("--keep", "10s")} if t == "psrec" else {})
               for rate in KEEP_RATES for t in tools]
    ctx.log(f"[K] flight recorder slowdown: unit_work.py python, psrec --keep 10s, "
            f"{len(configs)} windows x {rounds} rounds")
    run = measure(ctx, "python", configs, rounds, window)
    ctx.raw["keep_slowdown"] = run.as_dict()
    ctx.add(Row("K", "noise floor: unprofiled windows vs their unprofiled neighbours, wall",
                "%", "none", {"psrec": run.noise_floor("wall_ms")}))
    for rate in KEEP_RATES:
        vals = {t: run.slowdown(f"{t}@{rate}", "wall_ms") for t in tools}
        note = "; ".join(f for f in (failed(run, f"{t}@{rate}") for t in tools) if f)
        ctx.add(Row("K", f"slowdown at {rate} Hz, wall (psrec with --keep 10s)", "%", "lower",
                    vals, "within the noise floor", note=note))


def _long_run(ctx: Ctx) -> None:
    seconds = float(os.environ.get("PSREC_BENCH_KEEP_S", 60 if ctx.quick else 600))
    keep_s, bound = BOUNDS[os.environ.get("PSREC_BENCH_KEEP_BOUNDS", "size")]
    ctx.log(f"[K] flight recorder over {seconds:.0f} s: threads.py, psrec -r 1000 "
            f"--keep {keep_s}s --max-size {bound >> 20}M")
    target = start_workload(ctx, "threads")
    out = ctx.path("keep", "psr")
    argv = [ctx.tc.python, "-m", "psrec", "record", "-q", "-r", "1000", "--keep",
            f"{keep_s}s", "--max-size", str(bound), "-o", out, "--force", str(target.pid)]
    sizes: list[tuple[float, int]] = []
    try:
        p = _proc.start(argv, "psrec --keep")
        try:
            end = p.started + seconds
            next_mem = 0.0
            while time.monotonic() < end and p.running():
                now = time.monotonic()
                if now >= next_mem:
                    p.poll_memory()
                    next_mem = now + 5.0
                try:
                    sizes.append((now - p.started, os.stat(out).st_size))
                except FileNotFoundError:
                    pass
                time.sleep(1.0)
            p.stop(grace=60.0)
        finally:
            if p.exited is None:
                p.kill()
    finally:
        target.stop()
    from psrec.format import open_recording

    with open_recording(out) as rec:
        chunks = [c for c in rec.data_chunks() if c.passes]  # not the carried names
        stats = rec.stats or {}
        covered = ((max(c.last_ts for c in chunks) - min(c.first_ts for c in chunks))
                   * rec.tick_ns / 1e9 if chunks else 0.0)
    rss = [(t, v) for t, v in p.rss_series if v]
    ctx.raw["keep_long"] = {"seconds": seconds, "rss_kb": rss, "sizes": sizes,
                            "stats": {k: v for k, v in stats.items() if isinstance(v, int)},
                            "covered_s": covered}
    growth = None
    if len(rss) >= 4:
        after = [v for t, v in rss if t >= rss[-1][0] * 0.1]
        growth = 100.0 * (rss[-1][1] / after[0] - 1.0) if after and after[0] else None
    full = [s for t, s in sizes if t >= seconds * 0.5]
    hours = f"{seconds / 3600:.2g} h" if seconds >= 3600 else f"{seconds:.0f} s"
    ctx.add(Row("K", f"recorder RSS growth from 10 % of a {hours} --keep recording to its "
                "end", "%", "lower", {"psrec": summarize([growth])}, "flat (≤ 10 %)",
                lambda ps, b: ps.median <= 10.0))
    ctx.add(Row("K", "recorder peak RSS (VmHWM) in it", "MiB", "lower",
                {"psrec": summarize([p.hwm_kb / 1024.0])}))
    ctx.add(Row("K", f"file size ÷ --max-size {bound >> 20}M (--keep {keep_s}s), its second "
                "half: largest and median", "%", "none",
                {"psrec": summarize([100.0 * max(full) / bound,
                                     100.0 * statistics.median(full) / bound]
                                    if full else [])},
                "≤ 100 %, within 10 % of it", note=f"{stats.get('dropped_chunks', 0):,} chunks "
                f"dropped; the file covered the last {covered:.1f} s when it ended"))


def _window_read(ctx: Ctx, cache: str) -> None:
    n = 10_000_000 if ctx.quick else 100_000_000
    path = _cached_synthetic(ctx, cache, n, rate_hz=3472)
    span = n / 8 / 3472
    mid = round(span / 2)
    ctx.log(f"[K] a 10 s window of {n:,} samples ({span:.0f} s): report --from {mid} "
            f"--to {mid + 10}")
    times = []
    for _ in range(3 if ctx.quick else 5):
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "psrec", "report", path, "--from", str(mid),
                            "--to", str(mid + 10)], capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if r.returncode != 0:
            raise RuntimeError(f"psrec report of a window failed: {r.stderr.strip()}")
    size = os.path.getsize(path)
    ctx.add(Row("K", f"psrec report of a 10 s window in a {span / 3600:.2g} h recording of "
                f"{n / 1e6:.0f} M thread-samples ({size / 2**20:.0f} MiB), start-up included",
                "s", "lower", {"psrec": summarize(times)}, "< 1 s",
                lambda ps, b: ps.median < 1.0))
