"""Figure U: how soon a command answers. Each command is run as a user runs it (the psrec
script), round after round in rotating order beside `python -c pass` (the interpreter's own
start-up, the floor every Python tool stands on) and py-spy's `--version` and `--help` (a
native binary: the floor of any tool). psrec's own part of a run is its wall time minus that
round's `python -c pass`: medians over the rounds, as issue targets give them.

The recording the analyzer commands read is 3 s of workloads/basic.py at 1 kHz.
"""

from __future__ import annotations

import os
from typing import Any

from ._figures import (
    Ctx,
    DumpRun,
    _psrec_command,
    _time_dump,
    record_attach,
    start_workload,
)
from ._report import Row, summarize

# (label, arguments after `psrec`, psrec's own part's target in ms: over python -c pass)
COMMANDS: list[tuple[str, list[str], float]] = [
    ("--version", ["--version"], 30.0),
    ("--help", ["--help"], 30.0),
    ("record --help", ["record", "--help"], 30.0),
    ("report --help", ["report", "--help"], 30.0),
    ("info FILE", ["info", "{psr}"], 100.0),
    ("report FILE", ["report", "{psr}"], 100.0),
    ("report --collapsed FILE", ["report", "--collapsed", "{psr}", "-o", "{out}", "--force"],
     100.0),
]


def fig_startup(ctx: Ctx) -> None:
    rounds = 5 if ctx.quick else 15
    cmd, how = _psrec_command(ctx)
    # As fig_dump: bytecode written once (to the scratch folder), as an installed psrec has.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = os.path.join(ctx.workdir, "pycache")
    target = start_workload(ctx, "basic")
    try:
        rec = record_attach(ctx, "psrec", target.pid, rate_hz=1000, window_s=3.0)
    finally:
        target.stop()
    if rec.error or not rec.out:
        ctx.log(f"[U] no recording to read: {rec.error}")
        return
    psr, out = rec.out, ctx.path("startup", "collapsed")
    ctx.log(f"[U] start-up of each command, {rounds} rounds, psrec run as {how}")
    configs: list[tuple[str, list[str]]] = [("python -c pass", [ctx.tc.python, "-c", "pass"])]
    for label, args, _ in COMMANDS:
        configs.append((f"psrec {label}", [*cmd, *(a.format(psr=psr, out=out) for a in args)]))
    if ctx.tc.py_spy:
        configs += [("py-spy --version", [ctx.tc.py_spy, "--version"]),
                    ("py-spy --help", [ctx.tc.py_spy, "--help"])]
    runs: dict[str, list[DumpRun]] = {label: [] for label, _ in configs}
    for label, argv in configs:  # a warm-up each: page cache, bytecode
        _time_dump(ctx, argv, f"{label} (warm-up)", env, prints=False)
    for i in range(rounds):
        k = i % len(configs)
        for label, argv in configs[k:] + configs[:k]:
            runs[label].append(_time_dump(ctx, argv, label, env, prints=False))
    for path in (psr, out):
        if os.path.exists(path):
            os.remove(path)
    ctx.raw["startup"] = {label: [r.__dict__ for r in rs] for label, rs in runs.items()}
    base = runs["python -c pass"]

    def own(label: str) -> Any:
        """Milliseconds of wall time over python -c pass, round by round (runs that failed
        left out)."""
        return summarize([1000.0 * (r.wall_s - b.wall_s)
                          for r, b in zip(runs.get(label, []), base) if r.error is None])

    def wall(label: str) -> Any:
        return summarize([1000.0 * r.wall_s for r in runs.get(label, []) if r.error is None])

    ctx.add(Row("U", "for scale: python -c pass, wall time", "ms", "none",
                {"psrec": wall("python -c pass")}))
    for label, _, target_ms in COMMANDS:
        failed = [r.error for r in runs[f"psrec {label}"] if r.error]
        peers = {}
        if label in ("--version", "--help") and ctx.tc.py_spy:
            peers["py-spy"] = wall(f"py-spy {label}")
        ctx.add(Row("U", f"psrec {label}: wall time", "ms", "lower",
                    {"psrec": wall(f"psrec {label}"), **peers},
                    note=f"failed {len(failed)}: {failed[0]}" if failed else ""))
        ctx.add(Row("U", f"psrec {label}: wall time over python -c pass (psrec's own part)",
                    "ms", "none", {"psrec": own(f"psrec {label}")}, f"≤ {target_ms:g} ms",
                    lambda p, b, t=target_ms: p.median <= t))
