"""The target's slowdown measured in windows of one running process.

One target (workloads/unit_work.py) does the same unit of work over and over and times each
unit. The profilers are attached to it in turn, a window each, with an unprofiled window
between any two: each profiled window is compared with the unprofiled windows just before and
after it, in the same process, seconds apart. A busy shared machine moves whole runs by tens of
percent from one launch to the next; within a process and a few seconds, by about one. The
median unit of a window stands for it, so a unit slowed by a neighbour's burst does not.

A profiled window counts its units from WARMUP_S after the profiler's start (its start-up:
reading the target's maps and symbols) to the moment it is told to stop; an unprofiled one
from SETTLE_S after the previous profiler's exit to the next one's start.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field
from typing import Any

from . import _proc
from ._figures import RATES, WORKLOADS, Ctx, Recorded, _remove_outputs, record_attach
from ._report import Row, Summary, summarize

WARMUP_S = 1.0
SETTLE_S = 0.3


@dataclass
class Window:
    config: str  # "baseline" or the profiled configuration's label
    start: float  # time.monotonic(), the same clock as the target's
    end: float
    wall_ms: float | None = None  # the median unit's wall time in this window
    cpu_ms: float | None = None  # ... and its thread CPU time
    units: int = 0
    recorded: Recorded | None = None


@dataclass
class WindowRun:
    kind: str
    windows: list[Window] = field(default_factory=list)

    def slowdown(self, config: str, key: str = "wall_ms") -> Summary | None:
        """Each window of config against the unprofiled windows beside it, in %."""
        vals = []
        for i, w in enumerate(self.windows):
            if w.config != config or not sampled(w):
                continue
            base = self._around(i, key)
            if base and getattr(w, key):
                vals.append(100.0 * (getattr(w, key) / base - 1.0))
        return summarize(vals)

    def noise_floor(self, key: str = "wall_ms") -> Summary | None:
        """Unprofiled windows against the unprofiled windows before and after them, in %."""
        base = [w for w in self.windows if w.config == "baseline" and getattr(w, key)]
        return summarize([100.0 * (getattr(b, key) / ((getattr(a, key) + getattr(c, key)) / 2)
                                   - 1.0) for a, b, c in zip(base, base[1:], base[2:])])

    def _around(self, i: int, key: str) -> float | None:
        near = [getattr(self.windows[j], key) for j in (i - 1, i + 1)
                if 0 <= j < len(self.windows) and self.windows[j].config == "baseline"]
        near = [v for v in near if v]
        return sum(near) / len(near) if near else None

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "windows": [
            {**{k: v for k, v in w.__dict__.items() if k != "recorded"},
             "recorded": w.recorded.as_dict() if w.recorded else None} for w in self.windows]}


def order(configs: list[Any], rounds: int) -> list[Any]:
    """The profiled windows in turn, every other round in reverse order."""
    seq: list[Any] = []
    for rnd in range(rounds):
        seq.extend(configs if rnd % 2 == 0 else reversed(configs))
    return seq


def measure(ctx: Ctx, kind: str, configs: list[tuple[str, str, int, dict[str, bool]]],
            rounds: int, window_s: float) -> WindowRun:
    """configs: (label, tool, rate, record_attach's options: native, blocking). An unprofiled
    window of window_s opens the run and follows each profiled one (window_s + WARMUP_S
    long)."""
    import subprocess
    import time

    units_path = ctx.path(f"units-{kind}", "txt")
    argv = [ctx.tc.target_python, os.path.join(WORKLOADS, "unit_work.py"), kind, units_path]
    target = _proc.start(argv, f"unit_work {kind}", stdout=subprocess.PIPE)
    run = WindowRun(kind)
    try:
        target.read_line_until("ready", timeout=60)
        mark = time.monotonic()
        for cfg in [None, *order(configs, rounds)]:
            if cfg is not None:
                label, tool, rate, options = cfg
                started = time.monotonic()
                r = record_attach(ctx, tool, target.pid, rate_hz=rate,
                                  window_s=window_s + WARMUP_S, **options)
                _remove_outputs(ctx)
                run.windows.append(Window(label, started + WARMUP_S, started + r.window_s,
                                          recorded=r))
                mark = time.monotonic()
            time.sleep(window_s + SETTLE_S)
            run.windows.append(Window("baseline", mark + SETTLE_S, time.monotonic()))
    finally:
        target.stop()
    _read_units(run, units_path)
    return run


def _read_units(run: WindowRun, path: str) -> None:
    rows = []
    with open(path) as f:
        for line in f:
            _, t, w, c = line.split()
            rows.append((float(t), float(w), float(c)))
    os.remove(path)
    rows.sort()
    for win in run.windows:
        inside = [(w, c) for t, w, c in rows if t >= win.start and t + w <= win.end]
        win.units = len(inside)
        if inside:
            win.wall_ms = 1e3 * statistics.median(w for w, _ in inside)
            win.cpu_ms = 1e3 * statistics.median(c for _, c in inside)


def sampled(w: Window) -> bool:
    """The tool ran without error and recorded samples (a tool that cannot read the target's
    version attaches, then records nothing: its window is no profiled window)."""
    r = w.recorded
    return bool(r is not None and not r.error and r.result and r.result.thread_samples >= 10)


def failed(run: WindowRun, label: str) -> str:
    ws = [w for w in run.windows if w.config == label]
    bad = sum(1 for w in ws if not sampled(w))
    return f"{bad} of {len(ws)} {label} windows failed or recorded nothing" if bad else ""


def fig_slowdown(ctx: Ctx) -> None:
    """Figure 3: each tool attached to one unit_work.py python at each rate (py-spy in its
    blocking mode too), in windows."""
    rounds = 2 if ctx.quick else 4
    window = 1.5 if ctx.quick else 2.5
    tools = ctx.tools()
    configs = [(f"{t}@{rate}", t, rate, {}) for rate in RATES for t in tools]
    if "py-spy" in tools:
        configs += [(f"py-spy-blocking@{rate}", "py-spy", rate, {"blocking": True})
                    for rate in RATES]
    ctx.log(f"[3] slowdown: unit_work.py python, {len(configs)} profiled windows x {rounds} "
            f"rounds, {window:g} s, an unprofiled window between any two")
    run = measure(ctx, "python", configs, rounds, window)
    ctx.raw["slowdown"] = run.as_dict()
    base = [w for w in run.windows if w.config == "baseline"]
    units = summarize([w.units for w in base])
    ctx.add(Row("3", "unprofiled unit (fixed_work.py's work, about 5 ms): wall, its median in "
                "each window", "ms", "none", {"psrec": summarize([w.wall_ms for w in base])},
                note=f"{units.median:.0f} units per window" if units else ""))
    for key, what in (("wall_ms", "wall"), ("cpu_ms", "thread CPU")):
        ctx.add(Row("3", f"noise floor: unprofiled windows vs their unprofiled neighbours, "
                    f"{what}", "%", "none", {"psrec": run.noise_floor(key)}))
    for rate in RATES:
        tgt = {1000: 1.0, 10000: 3.0}.get(rate)
        for key, what in (("wall_ms", "wall"), ("cpu_ms", "thread CPU")):
            vals = {t: run.slowdown(f"{t}@{rate}", key) for t in tools}
            note = "; ".join(f for f in (failed(run, f"{t}@{rate}") for t in tools) if f)
            wall = key == "wall_ms"
            ctx.add(Row("3", f"slowdown at {rate} Hz, {what}", "%", "lower" if wall else "none",
                        vals, f"≤ {tgt:g} % (median)" if tgt and wall else "",
                        (lambda p, b, t=tgt: p.median <= t) if tgt and wall else None,
                        note=note if wall else ""))
        if "py-spy" in tools:
            ctx.add(Row("3", f"slowdown at {rate} Hz, wall, py-spy blocking mode", "%", "none",
                        {"py-spy": run.slowdown(f"py-spy-blocking@{rate}")}))
