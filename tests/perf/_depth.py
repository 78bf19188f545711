"""Figure S: deep stacks, per target interpreter. psrec attached to deep.py (one thread, its
stack DEPTH frames deep, asleep) at a depth sweep around the 1,000-frame mark and up to the
8,192-frame cap: the rate achieved at -r 1000, the highest rate (-r max), the CPU per
thread-sample there, and failed samples. A cliff shows as a drop between neighbouring depths.
"""

from __future__ import annotations

from typing import Any

from ._figures import Ctx, Recorded, _remove_outputs, _vals, record_attach, start_workload
from ._report import Row

DEPTHS = (100, 999, 1000, 1001, 3000, 8000)
DEPTHS_QUICK = (999, 1001, 3000)
FIXED_HZ = 1000
# The depth the goals name: 1 kHz achieved at -r 1000 on every version.
GOAL_DEPTH = 3000


def _rate(runs: list[Recorded]) -> Any:
    return _vals(runs, lambda r: r.result.thread_samples / r.duration_s)


def fig_depth(ctx: Ctx) -> None:
    depths = DEPTHS_QUICK if ctx.quick else DEPTHS
    window = 1.5 if ctx.quick else 2.5
    reps = 1 if ctx.quick else 3
    ctx.log(f"[S] deep.py at depths {', '.join(map(str, depths))}: psrec -r {FIXED_HZ} and "
            f"-r max, {reps} x {window:g} s each")
    raw: dict[str, Any] = {}
    for depth in depths:
        target = start_workload(ctx, "deep", str(depth))
        runs: dict[int, list[Recorded]] = {FIXED_HZ: [], 0: []}
        try:
            for _ in range(reps):
                for rate in runs:
                    runs[rate].append(record_attach(ctx, "psrec", target.pid, rate_hz=rate,
                                                    window_s=window))
                    _remove_outputs(ctx)
        finally:
            target.stop()
        raw[str(depth)] = {str(rate): [r.as_dict() for r in rs] for rate, rs in runs.items()}
        goal = depth == GOAL_DEPTH
        ctx.add(Row("S", f"deep.py {depth} frames: rate at -r {FIXED_HZ}", "samples/s",
                    "higher", {"psrec": _rate(runs[FIXED_HZ])},
                    "≥ 1 kHz achieved (≥ 950/s)" if goal else "",
                    (lambda p, b: p.median >= 950) if goal else None))
        ctx.add(Row("S", f"deep.py {depth} frames: highest rate (-r max)", "samples/s",
                    "higher", {"psrec": _rate(runs[0])}))
        ctx.add(Row("S", f"deep.py {depth} frames: CPU per sample at -r max", "µs", "lower",
                    {"psrec": _vals(runs[0], lambda r: None if r.steady_util is None else
                                    1e6 * r.steady_util * r.duration_s /
                                    max(1, r.result.thread_samples))}))
        ctx.add(Row("S", f"deep.py {depth} frames: failed samples at -r max", "%", "lower",
                    {"psrec": _vals(runs[0], lambda r: 100.0 * r.result.error_share)},
                    "< 0.5 %", lambda p, b: p.median < 0.5))
    ctx.raw["depth"] = raw
