"""Figure T: asyncio tasks. async_work.py's tasks on one event loop measure their own running
time (two heavy, one light, one asleep). psrec records which task the loop's thread runs at
each sample; CPython 3.15's own sampler (Tachyon, 3.15 targets only) is its peer with
--async-aware --async-mode all, which gives each sample every task's stack; py-spy, which knows
no tasks, gives the cost of a plain sample beside them. Per rate (1 and 10 kHz): CPU per
sample while sampling, the rate achieved, the heavy tasks' share of the samples against the
share of the run they measured (points), their share of the run spent waiting (psrec's task
snapshots, Tachyon's samples of them suspended) against the rest of the run, and psrec's own
cost of recording tasks (with tasks less --no-tasks).
"""

from __future__ import annotations

import json
from typing import Any

from ._figures import Ctx, Recorded, _remove_outputs, _vals, record_attach, start_workload
from ._report import Row, summarize
from ._tools import _collapsed_lines

RATES = (1000, 10000)
HEAVY = ("heavy-0", "heavy-1")


def _per_sample(r: Recorded, samples: int) -> float | None:
    return None if r.steady_util is None else 1e6 * r.steady_util * r.duration_s / max(1, samples)


Shares = tuple[dict[str, float], dict[str, float]]  # each task's running and waiting shares


def _psrec_shares(path: str) -> Shares:
    """Each task's share of the loop thread's time from its first task sample to its last in
    which it ran (its samples), and in which it waited (the task snapshots: suspended at an
    await, or ready)."""
    import psrec
    from psrec.analyzer.tasks import task_sums

    run = psrec.load(path)
    s = run.samples
    in_task = [i for i in range(len(s)) if s.task[i]]
    if not in_task:
        return {}, {}
    loop = s.thread[in_task[0]]
    span = sum(s.weight_ns[i] for i in range(in_task[0], in_task[-1] + 1)
               if s.thread[i] == loop)
    tasks, tick = run.tasks, run.profile.tick_ns
    ran = {tasks[tid].name: v.weight * tick / span
           for tid, v in task_sums(run.profile).items() if tid and tid in tasks}
    waited = {tasks[tid].name: (w.suspended + w.ready) * tick / span
              for tid, w in run.waits().items() if tid in tasks}
    return ran, waited


def _tachyon_shares(path: str, passes: int) -> Shares:
    """Each task's share of Tachyon's samples in which it ran, and in which it waited: in
    --async-mode all a sample gives every task's stack, a suspended one ending in asyncio's
    own code (its await)."""
    running: dict[str, int] = {}
    waiting: dict[str, int] = {}
    for stack, n in _collapsed_lines(path):
        parts = stack.split(";")
        for i, part in enumerate(parts):
            if not part.startswith("<task>:"):
                continue
            name = part.split(":")[1]
            rest = parts[i + 1:]
            if not rest or any(p.startswith("<task>:") for p in rest):
                continue
            into = waiting if rest[-1].startswith(("tasks.py:", "base_events.py:")) else running
            into[name] = into.get(name, 0) + n
    return ({name: n / max(1, passes) for name, n in running.items()},
            {name: n / max(1, passes) for name, n in waiting.items()})


def fig_tasks(ctx: Ctx) -> None:
    window = 2.0 if ctx.quick else 4.0
    reps = 1 if ctx.quick else 3
    truth_path = ctx.path("async-truth", "json")
    tools = [t for t in ("psrec", "tachyon", "py-spy") if t in ctx.tools()]
    ctx.log(f"[T] asyncio tasks on async_work.py: {', '.join(tools)} and psrec --no-tasks at "
            f"{', '.join(map(str, RATES))} Hz, {reps} x {window:g} s each")
    target = start_workload(ctx, "async_work", truth_path)
    runs: dict[tuple[str, int], list[Recorded]] = {}
    shares: dict[tuple[str, int], list[float]] = {}
    waits: dict[tuple[str, int], list[float]] = {}
    try:
        for _ in range(reps):
            for rate in RATES:
                for tool in [*tools, "psrec --no-tasks"]:
                    name = tool.split()[0]
                    extra: tuple[str, ...] = ()
                    if tool == "psrec --no-tasks":
                        extra = ("--no-tasks",)
                    elif tool == "tachyon":
                        extra = ("--async-aware", "--async-mode", "all")
                    r = record_attach(ctx, name, target.pid, rate_hz=rate, window_s=window,
                                      extra=extra)
                    runs.setdefault((tool, rate), []).append(r)
                    if r.result is not None and r.error is None:
                        got: Shares = ({}, {})
                        if tool == "psrec":
                            got = _psrec_shares(r.out)
                        elif tool == "tachyon":
                            got = _tachyon_shares(r.out, r.result.passes)
                        for into, part in zip((shares, waits), got):
                            if part:
                                into.setdefault((tool, rate), []).append(
                                    sum(part.get(h, 0.0) for h in HEAVY) / len(HEAVY))
                    _remove_outputs(ctx)
    finally:
        target.stop()
    with open(truth_path) as f:
        truth = json.load(f)
    truth_share = sum(truth["running"].get(h, 0.0) for h in HEAVY) / len(HEAVY) / truth["elapsed"]
    raw: dict[str, Any] = {"truth": truth, "heavy_share": truth_share,
                           "shares": {f"{t}@{r}": v for (t, r), v in shares.items()},
                           "waits": {f"{t}@{r}": v for (t, r), v in waits.items()}}
    for rate in RATES:
        def samples(tool: str, r: Recorded) -> int:
            # Tachyon's --async-mode all writes every task's stack per sample: its passes
            # are its samples of the loop's thread.
            return r.result.passes if tool == "tachyon" else r.result.thread_samples

        cost = {t: _vals(runs.get((t, rate), []), lambda r, t=t: _per_sample(r, samples(t, r)))
                for t in tools}
        achieved = {t: _vals(runs.get((t, rate), []),
                             lambda r, t=t: samples(t, r) / r.duration_s) for t in tools}
        ctx.add(Row("T", f"async_work.py at {rate} Hz: CPU per sample while sampling", "µs",
                    "lower", cost, note="psrec with tasks; Tachyon --async-aware "
                                        "--async-mode all; py-spy knows no tasks"
                    if rate == RATES[0] else ""))
        ctx.add(Row("T", f"async_work.py at {rate} Hz: samples per second", "samples/s",
                    "higher", achieved))
        error = {t: summarize([100.0 * (v - truth_share) for v in shares.get((t, rate), [])])
                 for t in ("psrec", "tachyon") if t in tools}
        ctx.add(Row("T", f"async_work.py at {rate} Hz: heavy tasks' share, error", "points",
                    "closer0", error, "within 2 points",
                    lambda p, b: abs(p.median) <= 2.0,
                    note=f"the program measured {100 * truth_share:.1f} % each"))
        # The heavy tasks live the whole run: the rest of it they waited (a sleep, or ready
        # while the others ran).
        error = {t: summarize([100.0 * (v - (1 - truth_share)) for v in waits.get((t, rate), [])])
                 for t in ("psrec", "tachyon") if t in tools}
        ctx.add(Row("T", f"async_work.py at {rate} Hz: heavy tasks' waiting share, error",
                    "points", "closer0", error, "within 2 points",
                    lambda p, b: abs(p.median) <= 2.0,
                    note=f"the program ran them {100 * truth_share:.1f} % each: the rest "
                         "waiting (psrec: task snapshots; Tachyon: samples of the task "
                         "suspended)"))
        with_tasks = runs.get(("psrec", rate), [])
        without = runs.get(("psrec --no-tasks", rate), [])
        a = _vals(with_tasks, lambda r: _per_sample(r, r.result.thread_samples))
        b = _vals(without, lambda r: _per_sample(r, r.result.thread_samples))
        delta = summarize([a.median - b.median]) if a and b else None
        ctx.add(Row("T", f"async_work.py at {rate} Hz: psrec's cost of recording tasks",
                    "µs per sample", "none", {"psrec": delta},
                    note="CPU per sample with tasks less with --no-tasks (medians)"))
    ctx.raw["tasks"] = {**raw, "runs": {f"{t}@{r}": [x.as_dict() for x in rs]
                                         for (t, r), rs in runs.items()}}
