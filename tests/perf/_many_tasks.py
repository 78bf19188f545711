"""Figure A: asyncio at scale. tests/targets/many_tasks.py parks N tasks on one event loop
(10,000, 50,000 and 150,001 with its ticker; --quick: 10,000 and 50,000) and prints how late
its loop woke. Per N:

- psrec record at 1 kHz for PSREC_BENCH_TASKS_S seconds (30; 15 with --quick), with task
  snapshots (the default) and with --no-tasks: the share of missed deadlines, the rate
  achieved, the recorder's peak RSS (VmHWM), how many snapshots it took and the CPU time of
  one;
- psrec dump --tasks: how long the target's loop was held (its lateness, against 10 ms
  ticks), how long the dump took, and how many tasks it read with the process stopped.

No peer reads another process's asyncio tasks at this scale here: py-spy knows no tasks, and
CPython's own sampler (3.15 targets) reads every task at every sample.
"""

from __future__ import annotations

import os
import subprocess
import time

from . import _proc
from ._figures import Ctx
from ._report import Row, summarize

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET = os.path.join(ROOT, "tests", "targets", "many_tasks.py")


def _start(ctx: Ctx, n: int) -> _proc.Proc:
    p = _proc.start([ctx.tc.target_python, TARGET, str(n)], f"many_tasks.py {n}",
                    stdout=subprocess.PIPE)
    p.read_line_until("ready", timeout=120)
    return p


def _record(ctx: Ctx, pid: int, seconds: float, tasks: bool) -> dict[str, float]:
    from psrec.format import open_recording

    out = ctx.path("tasks", "psr")
    argv = [ctx.tc.python, "-m", "psrec", "record", "-q", "-r", "1000", "-d", str(seconds),
            "-o", out, "--force", *([] if tasks else ["--no-tasks"]), str(pid)]
    p = _proc.start(argv, "psrec record")
    try:
        p.wait(seconds + 120, poll_memory_every=0.5)
    finally:
        if p.exited is None:
            p.kill()
    with open_recording(out) as rec:
        st = rec.stats or {}
    passes, missed = st.get("passes", 0), st.get("missed_deadlines", 0)
    snaps = st.get("task_snapshots", 0)
    os.remove(out)
    return {"missed_pct": 100.0 * missed / max(1, passes + missed),
            "hz": passes / seconds, "hwm_mib": p.hwm_kb / 1024.0, "snapshots": snaps,
            "snapshot_ms": st.get("task_snapshot_ns", 0) / max(1, snaps) / 1e6}


def _dump(ctx: Ctx, target: _proc.Proc) -> dict[str, float]:
    import json

    t0 = time.monotonic()
    r = subprocess.run([ctx.tc.python, "-m", "psrec", "dump", "--tasks", "--json",
                        str(target.pid)], capture_output=True, text=True, timeout=600)
    took = time.monotonic() - t0
    if r.returncode != 0:
        raise RuntimeError(f"psrec dump --tasks failed: {r.stderr.strip()}")
    t = json.loads(r.stdout)["asyncio"]
    return {"seconds": took, "tasks": len(t["tasks"]), "stopped": t["read_stopped"]}


def _lateness(target: _proc.Proc) -> float:
    """The longest the target's loop woke late (it prints each new longest), read once it
    has been stopped."""
    out = target.popen.stdout
    text = out.read() if out is not None else ""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return max((float(x.split()[1]) for x in text.splitlines() if x.startswith("late ")),
               default=0.0)


def fig_many_tasks(ctx: Ctx) -> None:
    seconds = float(os.environ.get("PSREC_BENCH_TASKS_S", 15 if ctx.quick else 30))
    counts = (10_000, 50_000) if ctx.quick else (10_000, 50_000, 150_000)
    for n in counts:
        ctx.log(f"[A] {n:,} asyncio tasks: record at 1 kHz for {seconds:.0f} s, with and "
                "without task snapshots; dump --tasks")
        target = _start(ctx, n)
        try:
            with_tasks = _record(ctx, target.pid, seconds, True)
            without = _record(ctx, target.pid, seconds, False)
            dumped = _dump(ctx, target)
            time.sleep(0.2)
        finally:
            target.stop()
        # (Recording reads the tasks without stopping the target: what held its loop longest
        # is the dump's stop, or the host.)
        held = _lateness(target)
        ctx.raw[f"many_tasks_{n}"] = {"tasks": with_tasks, "no_tasks": without,
                                      "dump": dumped, "late_s": held}
        ctx.add(Row("A", f"{n:,} tasks at 1 kHz: missed deadlines with task snapshots "
                    "(--no-tasks beside it)", "%", "lower",
                    {"psrec": summarize([with_tasks["missed_pct"]]),
                     "psrec --no-tasks": summarize([without["missed_pct"]])},
                    "≤ 10 %", lambda ps, b: ps.median <= 10.0,
                    note=f"{with_tasks['hz']:.0f} Hz achieved; {with_tasks['snapshots']:.0f} "
                    f"snapshots of {with_tasks['snapshot_ms']:.0f} ms of CPU each"))
        ctx.add(Row("A", f"{n:,} tasks at 1 kHz: recorder peak RSS (--no-tasks beside it)",
                    "MiB", "lower",
                    {"psrec": summarize([with_tasks["hwm_mib"]]),
                     "psrec --no-tasks": summarize([without["hwm_mib"]])},
                    "< 64 MiB", lambda ps, b: ps.median < 64.0))
        ctx.add(Row("A", f"{n:,} tasks: psrec dump --tasks, the longest the target's loop "
                    "woke late", "s", "lower", {"psrec": summarize([held])},
                    "≤ 0.1 s stopped", None,
                    note=f"dump took {dumped['seconds']:.1f} s; {dumped['stopped']:,} of "
                    f"{dumped['tasks']:,} tasks read with the process stopped (the rest "
                    "after it was resumed)"))
