"""The figures of the benchmark: each runs the tools, keeps every raw run, and adds table rows.
Over 400 lines and kept whole: the figures share one way of running, timing and reporting.

Figure numbers follow the benchmark issue: 1 rate and cost, 2 rate fidelity, 3 slowdown,
4 output size, 5 attribution, 6 analyzer throughput, 7 recorder memory; F are the format's own
figures (size per thread-sample, decode speed, writer throughput). Figure N (native frames) is
in _native.py and figure 3 (slowdown) in _windows.py, run with the helpers here
(record_attach, start_workload).
"""

from __future__ import annotations

import functools
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import _proc
from ._proc import BenchTimeout, Proc
from ._report import Row, Summary, summarize
from ._tools import (
    MAX_RATE_HZ,
    TOOLS,
    Toolchain,
    ToolResult,
    collapsed_samples,
    read_output,
    record_argv,
    tachyon_replay,
)

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = os.path.join(HERE, "workloads")
RUNNER = os.path.join(HERE, "_runner.py")

EXT = {"psr": "psr", "raw": "txt", "speedscope": "json", "text": "austin.txt", "mojo": "mojo",
       "collapsed": "collapsed.txt", "binary": "bin"}
DEFAULT_FMT = {"psrec": "psr", "py-spy": "raw", "austin": "text", "tachyon": "collapsed"}


@dataclass
class Ctx:
    tc: Toolchain
    workdir: str
    quick: bool
    log: Callable[[str], None]
    rows: list[Row] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    # The target interpreter's id ("3.14") when the run covers several: it tags every row.
    label: str = ""
    _n: int = 0

    def path(self, stem: str, ext: str) -> str:
        self._n += 1
        return os.path.join(self.workdir, f"{self._n:04d}-{stem}.{ext}")

    def tools(self) -> list[str]:
        return [t for t in TOOLS if t not in self.unavailable and
                (t != "tachyon" or self.tc.tachyon_version)]

    def add(self, row: Row) -> None:
        if self.label:
            row.measure = f"{row.measure} [python {self.label}]"
        self.rows.append(row.finish())


# -- running things -------------------------------------------------------------------------


def start_workload(ctx: Ctx, name: str, *args: str) -> Proc:
    import subprocess

    argv = [ctx.tc.target_python, os.path.join(WORKLOADS, f"{name}.py"), *args]
    p = _proc.start(argv, f"workload {name}", stdout=subprocess.PIPE)
    p.read_line_until("ready", timeout=60)
    return p


@dataclass
class Recorded:
    tool: str
    fmt: str
    rate_hz: int
    window_s: float
    cpu_s: float  # the whole run: start-up, sampling, writing the output
    steady_util: float | None  # CPU seconds per second while sampling (30 % .. 100 % of it)
    maxrss_kb: int
    hwm_kb: int
    rss_series: list[tuple[float, int]]
    result: ToolResult | None
    error: str | None = None
    out: str = ""  # the output's path (removed by _remove_outputs)

    @property
    def duration_s(self) -> float:
        r = self.result
        return r.duration_s if r is not None and r.duration_s else self.window_s

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["result"] = self.result.as_dict() if self.result else None
        d["rss_series"] = self.rss_series[:: max(1, len(self.rss_series) // 60)]
        return d


def record_attach(
    ctx: Ctx,
    tool: str,
    pid: int,
    *,
    rate_hz: int,
    window_s: float,
    fmt: str | None = None,
    poll_memory: float = 0.0,
    attribution: bool = False,
    native: bool = False,
    blocking: bool = False,
    extra: tuple[str, ...] = (),
) -> Recorded:
    """Records pid for window_s seconds (ended with SIGINT) and reads what the tool wrote;
    extra: more of the tool's own options."""
    fmt = fmt or DEFAULT_FMT[tool]
    out = ctx.path(f"{tool}-{rate_hz}", EXT[fmt])
    errpath = out + ".stderr"
    argv = record_argv(ctx.tc, tool, out=out, fmt=fmt, rate_hz=rate_hz, pid=pid, native=native,
                       blocking=blocking, extra=extra)
    with open(errpath, "wb") as errf:
        # (Tachyon prints its counts on its standard output.)
        p = _proc.start(argv, f"{tool} -> {pid}", stderr=errf,
                        **({"stdout": errf} if tool == "tachyon" else {}))
    error = None
    steady: list[tuple[float, float]] = []  # (time, CPU) after start-up and at the end
    try:
        end = p.started + window_s
        mark = p.started + 0.3 * window_s
        next_mem = 0.0
        while time.monotonic() < end:
            if not p.running():
                break
            now = time.monotonic()
            if poll_memory and now >= next_mem:
                p.poll_memory()
                next_mem = now + poll_memory
            if not steady and now >= mark:
                cpu = _proc.tree_cpu_s(p.pid)
                if cpu is not None:
                    steady.append((time.monotonic(), cpu))
            time.sleep(min(0.02, max(0.0, end - now)))
        cpu = _proc.tree_cpu_s(p.pid)
        if steady and cpu is not None:
            steady.append((time.monotonic(), cpu))
        window = time.monotonic() - p.started
        ended_early = p.exited is not None
        if ended_early and p.exited is not None and p.exited.returncode != 0:
            error = f"{tool} exited early with status {p.exited.returncode}"
        ex = p.stop(grace=60.0)
    finally:
        if p.exited is None:
            p.kill()
    with open(errpath, "rb") as f:
        stderr = f.read()
    result = None
    try:
        result = read_output(tool, fmt, out, stderr, target_pid=pid, attribution=attribution)
    except Exception as exc:  # noqa: BLE001 - kept in the results, reported as a failed run
        error = (error + "; " if error else "") + f"{type(exc).__name__}: {exc}"
    if error:
        ctx.log(f"  {tool}: {error} :: {_tail(stderr)}")
    elif ended_early:
        ctx.log(f"  {tool} ended by itself after {window:.1f} s of a {window_s:.0f} s window")
        if result is not None:
            result.extra["ended_early_after_s"] = round(window, 2)
    util = None
    if len(steady) == 2 and steady[1][0] > steady[0][0]:
        util = (steady[1][1] - steady[0][1]) / (steady[1][0] - steady[0][0])
    return Recorded(tool, fmt, rate_hz, window, ex.cpu_s, util, ex.maxrss_kb, p.hwm_kb,
                    p.rss_series, result, error, out)


def _tail(b: bytes) -> str:
    from ._tools import _tail as t

    return t(b, 300)


def _tail_text(b: bytes) -> str:
    """Output as text, without colour codes."""
    from ._tools import _tail as t

    return t(b, 4000)


def _remove(path: str) -> None:
    for p in (path, path + ".stderr"):
        try:
            os.remove(p)
        except FileNotFoundError:
            pass


def _ok(runs: list[Recorded]) -> list[Recorded]:
    return [r for r in runs if r.result is not None and r.error is None]


def _vals(runs: list[Recorded], f: Callable[[Recorded], float | None]) -> Summary | None:
    return summarize([f(r) for r in _ok(runs)])


# -- figure 1: highest rate and cost per sample -----------------------------------------------


def fig_rate(ctx: Ctx) -> None:
    window = 2.0 if ctx.quick else 3.0
    reps = 1 if ctx.quick else 3
    raw: dict[str, Any] = {}
    for wl in ("basic", "deep", "threads"):
        ctx.log(f"[1] highest rate on {wl}.py ({reps} x {window:g} s per tool)")
        target = start_workload(ctx, wl)
        runs: dict[str, list[Recorded]] = {t: [] for t in ctx.tools()}
        try:
            for _ in range(reps):
                for tool in ctx.tools():
                    r = record_attach(ctx, tool, target.pid, rate_hz=MAX_RATE_HZ[tool],
                                      window_s=window)
                    runs[tool].append(r)
                    _remove_outputs(ctx)
        finally:
            target.stop()
        raw[wl] = {t: [r.as_dict() for r in rs] for t, rs in runs.items()}
        rate = {t: _vals(rs, lambda r: r.result.thread_samples / r.duration_s)
                for t, rs in runs.items()}
        # Steady-state cost: CPU per second while sampling (start-up excluded), divided by the
        # achieved rate. The whole-run cost (start-up and output included) is a second row.
        cost = {t: _vals(rs, lambda r: None if r.steady_util is None else
                         1e6 * r.steady_util * r.duration_s / max(1, r.result.thread_samples))
                for t, rs in runs.items()}
        cost_all = {t: _vals(rs, lambda r: 1e6 * r.cpu_s / max(1, r.result.thread_samples))
                    for t, rs in runs.items()}
        err = {t: _vals(rs, lambda r: 100.0 * r.result.error_share) for t, rs in runs.items()}
        unit = "thread-samples/s" if wl == "threads" else "samples/s"
        cost_target = 50.0 if wl == "deep" else 3.0
        ctx.add(Row("1", f"highest rate, {wl}.py", unit, "higher", rate,
                    "≥ 2× best peer", lambda p, b: b is not None and p.median >= 2 * b.median,
                    note=f"psrec -r {ctx.tc.psrec_max_rate}; py-spy -r 1000000; Austin -i 1"
                    if wl == "basic" else ""))
        ctx.add(Row("1", f"CPU per thread-sample while sampling, {wl}.py", "µs", "lower", cost,
                    f"≤ {cost_target:g} µs", lambda p, b, c=cost_target: p.median <= c))
        ctx.add(Row("1", f"CPU per thread-sample, whole run incl. start-up, {wl}.py", "µs",
                    "lower", cost_all))
        tgt = "< 0.5 %" if wl == "threads" else ""
        ctx.add(Row("1", f"failed/torn samples, {wl}.py", "%", "lower", err, tgt,
                    (lambda p, b: p.median < 0.5) if tgt else None))
        if wl == "threads":
            passes = {t: _vals(rs, lambda r: r.result.passes / r.duration_s)
                      for t, rs in runs.items()}
            ctx.add(Row("1", "passes over all threads, threads.py", "passes/s", "higher",
                        passes))
    ctx.raw["rate"] = raw


def _remove_outputs(ctx: Ctx) -> None:
    """Recording outputs of the rate and fidelity figures are large and not needed after."""
    for name in os.listdir(ctx.workdir):
        if name.split(".")[-1] in ("psr", "txt", "json", "mojo") and not name.startswith("synth"):
            os.remove(os.path.join(ctx.workdir, name))


# -- figure 2: rate fidelity -----------------------------------------------------------------

RATES = (100, 1000, 10000)


def fig_fidelity(ctx: Ctx) -> None:
    window = 2.0 if ctx.quick else 2.5
    reps = 1 if ctx.quick else 3
    ctx.log(f"[2] rate fidelity on basic.py at {RATES} Hz ({reps} x {window:g} s)")
    target = start_workload(ctx, "basic")
    runs: dict[tuple[str, int], list[Recorded]] = {}
    wakes: dict[int, list[float | None]] = {}
    try:
        for _ in range(reps):
            for rate in RATES:
                for tool in ctx.tools():
                    r = record_attach(ctx, tool, target.pid, rate_hz=rate, window_s=window)
                    runs.setdefault((tool, rate), []).append(r)
                    _remove_outputs(ctx)
                if rate >= 1000:
                    wakes.setdefault(rate, []).append(_bare_wakeup(ctx, rate, window))
    finally:
        target.stop()
    ctx.raw["fidelity"] = {f"{t}@{rate}": [r.as_dict() for r in rs]
                           for (t, rate), rs in runs.items()}
    for rate in RATES:
        vals = {}
        for tool in ctx.tools():
            rs = runs.get((tool, rate), [])
            vals[tool] = _vals(rs, lambda r, q=rate: 100.0 * _achieved(r) / q)
        tgt = "within 1 %" if rate >= 1000 else ""
        ctx.add(Row("2", f"achieved ÷ requested at {rate} Hz, basic.py", "%", "closer0", vals,
                    tgt, (lambda p, b: abs(p.median - 100.0) <= 1.0) if tgt else None))
        # "closest to 100 %" is the best peer: shift the values for the comparison.
        row = ctx.rows[-1]
        row.better = "none"
        peers = {k: v for k, v in vals.items() if k != "psrec" and v is not None}
        if peers:
            row.best_peer = min(peers, key=lambda k: abs(peers[k].median - 100.0))
            ps = vals.get("psrec")
            if ps is not None:
                row.ratio = ps.median / peers[row.best_peer].median
        if rate >= 1000:
            _sampler_rows(ctx, rate, runs.get(("psrec", rate), []), wakes.get(rate, []))


# A thread that only sleeps to absolute deadlines at a rate, as the sampler does between its
# passes, and prints its own CPU time per wake-up: what waking up costs on this machine.
_WAKEUP = """
import sys, time
rate, seconds = float(sys.argv[1]), float(sys.argv[2])
interval = 1.0 / rate
n = int(seconds * rate)
deadline = time.monotonic()
cpu0 = time.thread_time_ns()
for _ in range(n):
    deadline += interval
    delay = deadline - time.monotonic()
    if delay > 0:
        time.sleep(delay)
print((time.thread_time_ns() - cpu0) / n / 1000.0)
"""


def _bare_wakeup(ctx: Ctx, rate: int, seconds: float) -> float | None:
    """µs of CPU per wake-up of a thread doing nothing else at `rate` (None if it failed)."""
    out = os.path.join(ctx.workdir, "wakeup.txt")
    with open(out, "wb") as f:
        p = _proc.start([ctx.tc.python, "-c", _WAKEUP, str(rate), str(seconds)], "wake-up",
                        stdout=f)
        try:
            ex = p.wait(seconds + 30.0)
        except BenchTimeout:
            p.stop()
            return None
    try:
        with open(out) as f:
            return float(f.read().strip()) if ex.returncode == 0 else None
    except (OSError, ValueError):
        return None


def _sampler_rows(ctx: Ctx, rate: int, runs: list[Recorded],
                  wakes: list[float | None]) -> None:
    """psrec's sampling thread at a fixed rate: its CPU per pass, and the part of it spent
    inside passes (reading the target); the rest is waking up and writing. Beside them, the
    CPU a thread that does nothing but wake up at the same rate spends per wake-up (Python's
    own loop included, a few tenths of a µs): the floor of that rest on this machine."""
    def per_pass(key: str) -> Callable[[Recorded], float | None]:
        def f(r: Recorded) -> float | None:
            res = r.result
            ns = res.extra.get(key) if res else None
            return ns / 1000.0 / res.passes if ns and res and res.passes else None
        return f

    ctx.add(Row("2", f"psrec's sampling thread at {rate} Hz, basic.py: CPU per pass", "µs",
                "none", {"psrec": _vals(runs, per_pass("sampler_cpu_ns"))}))
    ctx.add(Row("2", f"psrec's sampling thread at {rate} Hz, basic.py: time inside passes "
                "(reading the target)", "µs", "none",
                {"psrec": _vals(runs, per_pass("sampling_ns_total"))}))
    ctx.add(Row("2", f"a bare wake-up at {rate} Hz on this machine (a thread that only sleeps "
                "to its deadlines): CPU per wake-up", "µs", "none",
                {"psrec": summarize(wakes)}))


def _achieved(r: Recorded) -> float:
    """Passes per second while sampling: psrec from the file's own pass timestamps, Austin from
    its own sampling duration, py-spy from the benchmark's clock (start to SIGINT)."""
    assert r.result is not None
    if r.tool == "psrec" and r.result.extra.get("achieved_rate_hz"):
        return float(r.result.extra["achieved_rate_hz"])
    return r.result.passes / r.duration_s


# -- figure 5: attribution on fixed_work.py (figure 3, the slowdown, is in _windows.py) ------


@dataclass
class FixedRun:
    config: str
    round: int
    target: dict[str, float] | None
    rec: dict[str, Any] | None
    result: ToolResult | None
    error: str | None


def _fixed_configs(ctx: Ctx) -> list[tuple[str, str | None, int]]:
    """(label, tool, rate); the first is the unprofiled baseline."""
    cfgs: list[tuple[str, str | None, int]] = [("baseline", None, 0)]
    for rate in RATES:
        for tool in ctx.tools():
            cfgs.append((f"{tool}@{rate}", tool, rate))
    return cfgs


FIXED_ARGS = ("30", "3")
BASE_EVERY = 3
FIXED_ARGS_QUICK = ("27", "2")


def interleave(baseline: Any, profiled: list[Any], rounds: int) -> list[tuple[int, Any]]:
    """(round, configuration) in the order to run them: an unprofiled run opens each round and
    follows every BASE_EVERY profiled runs, so that each profiled run is compared with the
    unprofiled runs just before and after it; every other round runs the profiled ones in
    reverse order."""
    seq: list[tuple[int, Any]] = []
    for rnd in range(rounds):
        order = profiled if rnd % 2 == 0 else list(reversed(profiled))
        seq.append((rnd, baseline))
        for i, cfg in enumerate(order, 1):
            seq.append((rnd, cfg))
            if i % BASE_EVERY == 0 or i == len(order):
                seq.append((rnd, baseline))
    return seq


def run_launched(
    ctx: Ctx,
    rnd: int,
    label: str,
    tool: str | None,
    rate: int,
    script: str,
    args: tuple[str, ...],
    *,
    fmt: str = "",
    attribution: bool = False,
) -> FixedRun:
    """Runs script to its end through _runner.py, unprofiled (tool None) or launched by tool,
    and reads what the target measured of itself (and the tool's output)."""
    import json
    import subprocess

    res_json = ctx.path(f"runner-{label}", "json")
    command = [ctx.tc.target_python, RUNNER, res_json, script, *args]
    fmt = fmt or {"psrec": "psr", "py-spy": "speedscope", "austin": "text",
                  "tachyon": "collapsed"}.get(tool or "", "")
    out = ctx.path(f"fixed-{label}", EXT.get(fmt, "out"))
    if tool is None:
        argv = command
    else:
        argv = record_argv(ctx.tc, tool, out=out, fmt=fmt, rate_hz=rate, command=command)
    errpath = out + ".stderr"
    with open(errpath, "wb") as errf:
        p = _proc.start(argv, label, stderr=errf,
                        stdout=errf if tool == "tachyon" else subprocess.DEVNULL)
    error = None
    target = rec = None
    result = None
    try:
        ex = p.wait(timeout=300)
        rec = {"cpu_s": ex.cpu_s, "wall_s": ex.wall_s, "returncode": ex.returncode}
        with open(res_json) as f:
            target = json.load(f)
        if tool is not None:
            with open(errpath, "rb") as f:
                stderr = f.read()
            result = read_output(tool, fmt, out, stderr, target_pid=None,
                                 attribution=attribution)
    except (BenchTimeout, OSError, ValueError, RuntimeError, KeyError) as exc:
        error = f"{type(exc).__name__}: {exc}"
        with open(errpath, "rb") as f:
            error += f" :: exit status {p.popen.returncode}, stderr: {_tail(f.read())}"
        ctx.log(f"  {label}: {error}")
    finally:
        if p.exited is None:
            p.kill()
    _remove(out)
    _remove(res_json)
    return FixedRun(label, rnd, target, rec, result, error)


def fig_attribution(ctx: Ctx) -> None:
    rounds = 1 if ctx.quick else 5
    args = FIXED_ARGS_QUICK if ctx.quick else FIXED_ARGS
    cfgs = _fixed_configs(ctx)
    ctx.log(f"[5] fixed_work.py {' '.join(args)}: {len(cfgs) - 1} profiled configurations "
            f"x {rounds} rounds, interleaved with unprofiled runs")
    script = os.path.join(WORKLOADS, "fixed_work.py")
    seq = interleave(cfgs[0], cfgs[1:], rounds)
    ctx.log(f"  {len(seq)} runs, an unprofiled one after every {BASE_EVERY} profiled")
    runs = [run_launched(ctx, rnd, label, tool, rate, script, args, attribution=True)
            for rnd, (label, tool, rate) in seq]
    ctx.raw["fixed_work"] = {"args": list(args), "runs": [
        {**r.__dict__, "result": r.result.as_dict() if r.result else None} for r in runs]}
    base = {r.round: r.target for r in runs if r.config == "baseline" and r.target}
    for rate in RATES:
        for weighted in (True, False):
            vals: dict[str, Summary | None] = {}
            se_vals: dict[str, Summary | None] = {}
            within: list[bool] = []
            for t in ctx.tools():
                errs, ses = [], []
                for r in runs:
                    if r.config != f"{t}@{rate}" or not r.result or not r.target:
                        continue
                    res = r.result
                    n, w = res.main_n, res.main_w
                    if n == 0 or (weighted and w <= 0):
                        continue
                    share = res.fib_w / w if weighted else res.fib_n / n
                    truth = r.target["fib_share"]
                    se = math.sqrt(max(share * (1 - share), 1e-12) / n)
                    errs.append(100.0 * (share - truth))
                    ses.append(100.0 * se)
                    if t == "psrec":
                        within.append(abs(share - truth) <= 2 * se)
                vals[t] = summarize(errs)
                se_vals[t] = summarize(ses)
            how = "time-weighted" if weighted else "by sample count"
            chk: Callable[[Summary, Summary | None], bool] | None = None
            if rate >= 1000 and weighted:
                tgt = "every run within ±1 pp"
                chk = _all_within_1pp
            elif weighted:
                tgt = "every run within 2 SE"
                chk = functools.partial(_all_true, tuple(within))
            else:
                tgt = ""
            ctx.add(Row("5", f"fibonacci share error at {rate} Hz, {how}", "pp", "closer0",
                        vals, tgt, chk))
            if weighted:
                ctx.add(Row("5", f"standard error sqrt(p(1-p)/n) at {rate} Hz", "pp",
                            "none", se_vals))
    truth = summarize([b["fib_share"] * 100 for b in base.values()])
    ctx.add(Row("5", "fibonacci share the program measures (unprofiled)", "%", "none",
                {"psrec": truth}))
    for rate in RATES:
        vals = {}
        for t in ctx.tools():
            v = []
            for r in runs:
                if r.config == f"{t}@{rate}" and r.result and r.target and r.result.passes:
                    v.append(100.0 * r.result.main_n / (rate * r.target["elapsed"]))
            vals[t] = summarize(v)
        ctx.add(Row("2", f"samples in main() ÷ rate × elapsed at {rate} Hz, fixed_work.py",
                    "%", "none", vals))


def _all_within_1pp(p: Summary, b: Summary | None) -> bool:
    return max(abs(p.lo), abs(p.hi)) <= 1.0


def _all_true(flags: tuple[bool, ...], p: Summary, b: Summary | None) -> bool:
    return bool(flags) and all(flags)


# -- figure 4: output size -------------------------------------------------------------------

SIZE_FORMATS = (("psrec", "psr"), ("py-spy", "speedscope"), ("py-spy", "raw"),
                ("austin", "text"), ("austin", "mojo"), ("tachyon", "binary"))
# Recordings read again by their own tool after the size runs (_replay_rows).
REPLAYED = (("psrec", "psr"), ("tachyon", "binary"))


def fig_size(ctx: Ctx) -> None:
    window = 2.0 if ctx.quick else 2.5
    reps = 1 if ctx.quick else 2
    for wl in ("basic", "threads"):
        ctx.log(f"[4] output size on {wl}.py at 1 kHz ({reps} x {window:g} s per format)")
        target = start_workload(ctx, wl)
        runs: dict[tuple[str, str], list[Recorded]] = {}
        try:
            for _ in range(reps):
                for tool, fmt in SIZE_FORMATS:
                    if tool not in ctx.tools():
                        continue
                    r = record_attach(ctx, tool, target.pid, rate_hz=1000, window_s=window,
                                      fmt=fmt)
                    runs.setdefault((tool, fmt), []).append(r)
                    if (tool, fmt) not in REPLAYED:
                        _remove(r.out)
        finally:
            target.stop()
        ctx.raw.setdefault("size", {})[wl] = {
            f"{t}/{f}": [r.as_dict() for r in rs] for (t, f), rs in runs.items()}

        # (Tachyon's binary recording is counted by its replay: first.)
        _replay_rows(ctx, wl, runs)

        def bps(r: Recorded) -> float | None:
            res = r.result
            return res.out_bytes / res.thread_samples if res and res.thread_samples else None

        for fmt_pair in (("speedscope", "text"), ("raw", "mojo")):
            vals = {"psrec": _vals(runs.get(("psrec", "psr"), []), bps),
                    "py-spy": _vals(runs.get(("py-spy", fmt_pair[0]), []), bps),
                    "austin": _vals(runs.get(("austin", fmt_pair[1]), []), bps)}
            if fmt_pair[0] == "raw" and runs.get(("tachyon", "binary")):
                vals["tachyon"] = _vals(runs[("tachyon", "binary")], bps)
            tachyon = ", Tachyon binary" if "tachyon" in vals else ""
            ctx.add(Row("4", f"bytes per thread-sample, {wl}.py: .psr vs py-spy {fmt_pair[0]}, "
                        f"Austin {fmt_pair[1]}{tachyon}", "B", "lower", vals,
                        note="py-spy raw is aggregated: shrinks with longer runs"
                        if fmt_pair[0] == "raw" else ""))


def _replay_rows(ctx: Ctx, wl: str, runs: dict[tuple[str, str], list[Recorded]]) -> None:
    """psrec's and Tachyon's recordings (kept by fig_size) turned into collapsed stacks by each
    tool's own reader: thread-samples per second of wall time. Tachyon's binary recording is
    counted by that replay."""
    import subprocess

    speeds: dict[str, list[float]] = {"psrec": [], "tachyon": []}
    for (tool, fmt), rs in runs.items():
        if (tool, fmt) not in REPLAYED:
            continue
        for r in _ok(rs):
            out = r.out + ".collapsed"
            argv = ([ctx.tc.python, "-m", "psrec", "report", "--collapsed", "-o", out, r.out]
                    if tool == "psrec" else tachyon_replay(ctx.tc.target_python, r.out, out))
            t0 = time.perf_counter()
            done = subprocess.run(argv, capture_output=True, timeout=300)
            wall = time.perf_counter() - t0
            if done.returncode != 0 or not os.path.exists(out):
                ctx.log(f"  {tool} replay failed: {_tail(done.stderr)}")
                continue
            assert r.result is not None
            if tool == "tachyon":
                r.result.thread_samples = collapsed_samples(out)
            speeds[tool].append(r.result.thread_samples / wall)
            _remove(out)
    for rs in runs.values():
        for r in rs:
            _remove(r.out)
    if speeds["tachyon"]:
        ctx.add(Row("4", f"replay of that recording into collapsed stacks, {wl}.py (a few "
                    "seconds of samples: start-up is most of it)", "thread-samples/s", "higher",
                    {t: summarize(v) for t, v in speeds.items()}))


# -- figure 7: recorder memory ----------------------------------------------------------------


def fig_memory(ctx: Ctx) -> None:
    window = 10.0 if ctx.quick else 60.0
    ctx.log(f"[7] recorder memory: threads.py at 10 kHz for {window:.0f} s per tool")
    target = start_workload(ctx, "threads")
    runs: dict[str, Recorded] = {}
    try:
        for tool in ctx.tools():
            runs[tool] = record_attach(ctx, tool, target.pid, rate_hz=10000, window_s=window,
                                       poll_memory=0.5)
            _remove_outputs(ctx)
    finally:
        target.stop()
    ctx.raw["memory"] = {t: r.as_dict() for t, r in runs.items()}

    def peak(r: Recorded) -> float:
        # VmHWM polled from /proc until the exit; wait4's ru_maxrss would include the high-water
        # mark of the benchmark's own process, which forked the recorder.
        return r.hwm_kb / 1024.0

    def growth(r: Recorded) -> float | None:
        s = [(t, v) for t, v in r.rss_series if v]
        if len(s) < 4:
            return None
        t_end = s[-1][0]
        early = [v for t, v in s if t >= t_end * 0.25]
        return 100.0 * (s[-1][1] / early[0] - 1.0) if early and early[0] else None

    ok = {t: r for t, r in runs.items() if r.error is None}
    early = [f"{t} stopped by itself after {r.result.extra['ended_early_after_s']:.0f} s"
             for t, r in ok.items() if r.result and "ended_early_after_s" in r.result.extra]
    ctx.add(Row("7", f"peak RSS (VmHWM), threads.py, 10 kHz, {window:.0f} s", "MiB", "lower",
                {t: summarize([peak(r)]) for t, r in ok.items()}, note="; ".join(early)))
    ctx.add(Row("7", "RSS growth from 25 % of the recording to its end", "%", "lower",
                {t: summarize([growth(r)]) for t, r in ok.items()}, "flat (≤ 10 %)",
                lambda p, b: p.median <= 10.0))
    ctx.add(Row("7", "achieved thread-samples/s in that recording", "thread-samples/s",
                "higher", {t: summarize([r.result.thread_samples / r.duration_s])
                           for t, r in ok.items() if r.result}))
    ctx.add(Row("7", "failed/torn samples in that recording", "%", "lower",
                {t: summarize([100 * r.result.error_share]) for t, r in ok.items()
                 if r.result}, "< 0.5 %", lambda p, b: p.median < 0.5))


# -- figure D: one dump of every thread's stack ------------------------------------------------

DUMP_WORKLOADS = ("basic", "threads")
_COMPLAINTS = ("error", "cannot", "not a python", "fail", "unsupported")


def _psrec_command(ctx: Ctx) -> tuple[list[str], str]:
    """psrec as a user runs it, and how: the `psrec` script installed beside this Python, else
    `python -m psrec` (also when the script is one an older install wrote, for an entry point
    other than psrec.__main__:main)."""
    script = os.path.join(os.path.dirname(ctx.tc.python), "psrec")
    try:
        with open(script) as f:
            current = "psrec.__main__" in f.read(4096)
    except OSError:
        return [ctx.tc.python, "-m", "psrec"], "python -m psrec"
    if current and os.access(script, os.X_OK):
        return [script], "the psrec script"
    return [ctx.tc.python, "-m", "psrec"], ("python -m psrec: the psrec script predates "
                                            "psrec.__main__:main, reinstall psrec")


# The forms of a dump measured: the text, --json, and --native (native frames interleaved).
DUMP_FORMS = {"text": [], "json": ["--json"], "native": ["--native"]}


def _dump_argv(ctx: Ctx, tool: str, pid: int, form: str) -> list[str] | None:
    if tool == "psrec":
        return [*_psrec_command(ctx)[0], "dump", str(pid), *DUMP_FORMS[form]]
    if tool == "py-spy" and ctx.tc.py_spy:
        return [ctx.tc.py_spy, "dump", "--pid", str(pid), *DUMP_FORMS[form]]
    if tool == "austin" and ctx.tc.austin and form == "text":  # austin -w: text, Python only
        return [ctx.tc.austin, "-w", str(pid)]
    return None


@dataclass
class DumpRun:
    wall_s: float  # from before the fork to the reap
    cpu_s: float  # user + system (wait4)
    status: int
    out_bytes: int
    error: str | None = None


def _time_dump(ctx: Ctx, argv: list[str], label: str, env: dict[str, str],
               prints: bool = True) -> DumpRun:
    out = ctx.path("dump", "txt")
    with open(out, "wb") as fo, open(out + ".stderr", "wb") as fe:
        t0 = time.perf_counter()
        p = _proc.start(argv, label, stdout=fo, stderr=fe, env=env)
        ex = p.wait_exit(timeout=60.0)
        wall = time.perf_counter() - t0
    size = os.path.getsize(out)
    with open(out + ".stderr", "rb") as f:
        err = f.read()
    _remove(out)
    error = None
    if ex.returncode != 0 or (prints and size == 0):
        # The line that says what went wrong (py-spy follows it with a backtrace, Austin puts
        # a banner before it).
        lines = [ln.strip() for ln in _tail_text(err).splitlines() if ln.strip()]
        why = next((ln for ln in lines if any(w in ln.lower() for w in _COMPLAINTS)),
                   lines[-1] if lines else "no output")
        error = f"exit status {ex.returncode}: {why[:120]}"
    return DumpRun(wall, ex.cpu_s, ex.returncode, size, error)


def fig_dump(ctx: Ctx) -> None:
    """`psrec dump PID` (and --json, --native) against `py-spy dump` and `austin -w`: the wall
    time of one dump, run after run against the same live target, the tools interleaved in
    rotating order."""
    rounds = 5 if ctx.quick else 20
    cmd, how = _psrec_command(ctx)
    # An installed psrec starts from bytecode it wrote on its first run; with
    # PYTHONDONTWRITEBYTECODE (set in some development shells) it would compile every module
    # at every start instead. The bytecode goes to the scratch folder, not into the sources.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = os.path.join(ctx.workdir, "pycache")
    raw: dict[str, Any] = {"psrec_command": cmd, "rounds": rounds}
    for wl in DUMP_WORKLOADS:
        ctx.log(f"[D] dump of every thread's stack, {wl}.py, {rounds} rounds")
        target = start_workload(ctx, wl)
        configs: list[tuple[str, str, list[str]]] = [
            ("python", "start-up", [ctx.tc.python, "-c", "pass"])]
        for form in DUMP_FORMS:
            for tool in ctx.tools():
                argv = _dump_argv(ctx, tool, target.pid, form)
                if argv is not None:
                    configs.append((tool, form, argv))
        runs: dict[tuple[str, str], list[DumpRun]] = {(t, f): [] for t, f, _ in configs}
        try:
            # A warm-up run each (page cache, bytecode). A tool that fails it is not run again
            # (its failure is noted); one that takes over a second (Austin on a version it does
            # not know) is run in the first 3 rounds only.
            slow: set[tuple[str, str]] = set()
            for tool, form, argv in list(configs):
                w = _time_dump(ctx, argv, f"{tool} {form} (warm-up)", env, tool != "python")
                if w.error:
                    runs[(tool, form)].append(w)
                    configs.remove((tool, form, argv))
                elif w.wall_s > 1.0:
                    slow.add((tool, form))
            for i in range(rounds):
                k = i % len(configs)
                for tool, form, argv in configs[k:] + configs[:k]:
                    if (tool, form) in slow and i >= 3:
                        continue
                    runs[(tool, form)].append(
                        _time_dump(ctx, argv, f"{tool} {form}", env, tool != "python"))
        finally:
            target.stop()
        raw[wl] = {f"{t}/{f}": [r.__dict__ for r in rs] for (t, f), rs in runs.items()}

        def summary(tool: str, form: str, what: str,
                    runs: dict[tuple[str, str], list[DumpRun]] = runs) -> Summary | None:
            """Milliseconds of wall or CPU time over the runs that succeeded."""
            ok = [r for r in runs.get((tool, form), []) if r.error is None]
            return summarize([1000.0 * getattr(r, what) for r in ok])

        def failures(form: str, runs: dict[tuple[str, str], list[DumpRun]] = runs) -> str:
            """Which tools failed how often, each with the line that says why."""
            out = []
            for (tool, f), rs in runs.items():
                bad = [r for r in rs if f == form and r.error]
                if bad:
                    out.append(f"{tool} failed {len(bad)} of {len(rs)}: {bad[0].error}")
            return "; ".join(out)

        for form, flags in DUMP_FORMS.items():
            vals = {t: summary(t, form, "wall_s") for t in ctx.tools() if (t, form) in runs}
            notes = [f"psrec run as {how}" if form == "text" else "", failures(form)]
            ctx.add(Row("D", f"dump PID{''.join(' ' + f for f in flags)}, {wl}.py: wall "
                        "time per dump", "ms", "lower", vals,
                        note="; ".join(n for n in notes if n)))
        ctx.add(Row("D", f"dump PID, {wl}.py: CPU time per dump (user + system)", "ms",
                    "lower", {t: summary(t, "text", "cpu_s") for t in ctx.tools()
                              if (t, "text") in runs}))
        ctx.add(Row("D", f"for scale: Python's start-up (python -c pass), CPU time, beside the "
                    f"{wl}.py runs", "ms", "none",
                    {"psrec": summary("python", "start-up", "cpu_s")}))
        # What psrec adds to the start-up of its Python, round by round, in CPU time (on a
        # busy machine the wall time of runs this short is mostly waiting for a CPU).
        own = [1000.0 * (p.cpu_s - s.cpu_s)
               for p, s in zip(runs.get(("psrec", "text"), []), runs[("python", "start-up")])
               if p.error is None]
        ctx.add(Row("D", f"psrec's own part: CPU time of dump PID minus Python's start-up in the "
                    f"same round, {wl}.py", "ms", "none", {"psrec": summarize(own)}, "≤ 10 ms",
                    lambda p, b: p.median <= 10.0))
    ctx.raw["dump"] = raw
