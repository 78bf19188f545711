"""Figure N: native frames. psrec record --native (perf events: the target is never stopped)
beside py-spy record --native (which stops the target for every sample), on a target that
spends its time in C (workloads/native_work.py), with psrec's Python-only recording of the same
target beside them: the highest rate and its CPU cost, how many stacks reach the thread's root,
the target's slowdown, and bytes per thread-sample.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from typing import Any

from . import _windows
from ._figures import (
    Ctx,
    Recorded,
    _remove_outputs,
    _vals,
    record_attach,
    start_workload,
)
from ._report import Row, Summary, summarize
from ._tools import MAX_RATE_HZ

# The outermost frames of a thread whose native stack was unwound to its end: the program's
# entry (_start, __libc_start_main, main) and a thread's (clone3, clone, start_thread).
NATIVE_ROOTS = frozenset({"_start", "clone3", "clone", "start_thread", "__libc_start_main",
                          "main"})
ROOTS_TEXT = "_start, __libc_start_main, main, clone3, clone, start_thread"
# (label, tool, native): psrec and py-spy with native frames, psrec with Python frames only.
CONFIGS = (("psrec-native", "psrec", True), ("psrec", "psrec", False),
           ("py-spy-native", "py-spy", True))
SLOW_RATES = (100, 1000)
# unit_work.py's two kinds of unit, and how the rows name them.
SLOW_KINDS = {"python": "Python units (fixed_work.py's work)", "c": "C units (sha256, 2 threads)"}
PYSPY_NOTE = ("py-spy --native stops the target for every sample: it refuses --nonblocking "
              "with --native")
# A py-spy frame of Python code: "name (file.py:line)"; a native one: "name (libfoo.so)" or,
# with line tables, "name (file.c:line)"; unnamed: "0x7f… (libfoo.so)".
_PY_FRAME = re.compile(r"\.pyw?(:\d+)?$")
_ADDRESS = re.compile(r"^0x[0-9a-f]+$")


def fig_native(ctx: Ctx) -> None:
    tools = [t for t in ("psrec", "py-spy") if t in ctx.tools()]
    configs = [c for c in CONFIGS if c[1] in tools]
    raw: dict[str, Any] = {}
    _rate_and_roots(ctx, configs, raw)
    _slowdown(ctx, configs, raw)
    _size(ctx, configs, raw)
    ctx.raw["native"] = raw


# -- the highest rate, its cost, and the stacks that reach the root -------------------------


class _Symbols:
    """Names for the code addresses py-spy leaves unnamed (it reads no detached debug files),
    from what psrec recorded of the same process: each native frame's function, binary and pc
    (a frame's line is its pc's offset in the function), and the binaries' load addresses."""

    def __init__(self) -> None:
        self.pcs: dict[tuple[str, int], str] = {}
        self.bias: dict[str, int] = {}

    def read_maps(self, pid: int) -> None:
        try:
            with open(f"/proc/{pid}/maps") as f:
                lines = f.read().splitlines()
        except OSError:
            return
        for line in lines:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[2] == "00000000" and parts[5].startswith("/"):
                name = os.path.basename(parts[5])
                start = int(parts[0].split("-")[0], 16)
                self.bias[name] = min(start, self.bias.get(name, start))

    def add(self, binary: str, address: int, offset: int, name: str) -> None:
        self.pcs[(os.path.basename(binary), address + offset)] = name

    def name(self, frame: str) -> str:
        """py-spy's "0x7f… (libc.so.6)" as "clone3 (libc.so.6)" where psrec saw that pc."""
        func, binary = _split_frame(frame)
        if not _ADDRESS.match(func) or binary not in self.bias:
            return frame
        named = self.pcs.get((binary, int(func, 16) - self.bias[binary]))
        return f"{named} ({binary})" if named else frame


def _split_frame(frame: str) -> tuple[str, str]:
    """py-spy's "name (where)" as (name, where)."""
    name, sep, where = frame.rpartition(" (")
    return (name, where.rstrip(")")) if sep else (frame, "")


def _psr_roots(path: str, symbols: _Symbols) -> Counter[str]:
    """Thread-samples by their stack's outermost frame: "name" for a native frame, "name
    (Python)" for a Python one, "(no stack)"."""
    import psrec

    run = psrec.load(path, native_frames="all")
    roots: Counter[str] = Counter()
    for node, n in Counter(run.samples.stack).items():
        frames = run.stack(node)
        for fr in frames:
            if fr.function.native:
                symbols.add(fr.function.filename, fr.function.address, fr.line,
                            fr.function.name)
        if not frames:
            roots["(no stack)"] += n
        else:
            fn = frames[0].function
            roots[fn.name if fn.native else f"{fn.name} (Python)"] += n
    return roots


def _pyspy_roots(path: str) -> Counter[str]:
    """Thread-samples of py-spy's raw output by their stack's outermost frame, as py-spy wrote
    it ("name (where)")."""
    roots: Counter[str] = Counter()
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if count.isdigit():
                roots[stack.split(";", 1)[0]] += int(count)
    return roots


def _reaches(tool: str, root: str) -> bool:
    if tool == "psrec":
        return root in NATIVE_ROOTS
    name, where = _split_frame(root)
    return name in NATIVE_ROOTS and not _PY_FRAME.search(where)


def _root_share(tool: str, roots: Counter[str]) -> float | None:
    total = sum(roots.values())
    return 100.0 * sum(n for r, n in roots.items() if _reaches(tool, r)) / total if total else None


def _shares_text(roots: Counter[str], top: int = 4) -> str:
    total = sum(roots.values()) or 1
    return ", ".join(f"{r} {100.0 * n / total:.0f} %" for r, n in roots.most_common(top))



def _record_rounds(ctx: Ctx, configs: list[tuple[str, str, bool]], reps: int, window: float,
                   options: Any) -> tuple[dict[str, list[Recorded]],
                                          dict[str, list[Counter[str]]], _Symbols]:
    """reps rounds of every configuration attached to one native_work.py, window seconds
    each (options(tool) gives record_attach's rate and format), with the roots of each
    native recording's stacks and the names psrec's recordings give the target's code."""
    target = start_workload(ctx, "native_work")
    runs: dict[str, list[Recorded]] = {label: [] for label, _, _ in configs}
    roots: dict[str, list[Counter[str]]] = {label: [] for label, _, _ in configs}
    symbols = _Symbols()
    symbols.read_maps(target.pid)
    try:
        for _ in range(reps):
            for label, tool, native in configs:
                r = record_attach(ctx, tool, target.pid, window_s=window, native=native,
                                  **options(tool))
                runs[label].append(r)
                if native and r.result is not None and r.error is None:
                    try:
                        roots[label].append(_psr_roots(r.out, symbols) if tool == "psrec"
                                            else _pyspy_roots(r.out))
                    except Exception as exc:  # noqa: BLE001 - noted; the other runs go on
                        r.error = f"reading its stacks: {type(exc).__name__}: {exc}"
                        ctx.log(f"  {label}: {r.error}")
                _remove_outputs(ctx)
    finally:
        target.stop()
    return runs, roots, symbols

def _rate_and_roots(ctx: Ctx, configs: list[tuple[str, str, bool]],
                    raw: dict[str, Any]) -> None:
    window = 2.0 if ctx.quick else 3.0
    reps = 1 if ctx.quick else 3
    ctx.log(f"[N] highest rate on native_work.py ({reps} x {window:g} s per configuration: "
            f"{', '.join(c[0] for c in configs)})")
    runs, roots, symbols = _record_rounds(ctx, configs, reps, window,
                                          lambda tool: dict(rate_hz=MAX_RATE_HZ[tool]))
    raw["rate"] = {label: [r.as_dict() for r in rs] for label, rs in runs.items()}
    raw["roots_at_max_rate"] = {label: [dict(c) for c in cs] for label, cs in roots.items()}

    def by_tool(f: Any, native: bool = True) -> dict[str, Summary | None]:
        return {tool: _vals(runs[label], f) for label, tool, nat in configs if nat == native}

    def rate(r: Recorded) -> float | None:
        return r.result.thread_samples / r.duration_s if r.result else None

    def cost(r: Recorded) -> float | None:
        if r.steady_util is None or not r.result:
            return None
        return 1e6 * r.steady_util * r.duration_s / max(1, r.result.thread_samples)

    def cost_all(r: Recorded) -> float | None:
        return 1e6 * r.cpu_s / max(1, r.result.thread_samples) if r.result else None

    native_rate = by_tool(rate)
    python_rate = by_tool(rate, native=False).get("psrec")
    with_native = native_rate.get("psrec")
    ratio = ""
    if with_native and python_rate:
        ratio = (f"with --native psrec keeps {100 * with_native.median / python_rate.median:.0f}"
                 " % of its Python-only rate")
    ctx.add(Row("N", "highest rate with native frames, native_work.py", "thread-samples/s",
                "higher", native_rate,
                note=f"psrec -r {ctx.tc.psrec_max_rate} --native, the target never stopped; "
                     f"py-spy -r 1000000 --native: {PYSPY_NOTE}"))
    ctx.add(Row("N", "highest rate, Python frames only (psrec without --native), same target",
                "thread-samples/s", "none", {"psrec": python_rate}, note=ratio))
    ctx.add(Row("N", "CPU per thread-sample while sampling, with native frames", "µs", "lower",
                by_tool(cost), note="the recorder's own CPU; the kernel's copy of each stack "
                "is the target's time (the slowdown rows)"))
    ctx.add(Row("N", "CPU per thread-sample while sampling, Python frames only (psrec)", "µs",
                "none", {"psrec": by_tool(cost, native=False).get("psrec")}))
    ctx.add(Row("N", "CPU per thread-sample, whole run incl. start-up, with native frames", "µs",
                "lower", by_tool(cost_all)))
    ctx.add(Row("N", "failed samples, with native frames", "%", "lower",
                by_tool(lambda r: 100.0 * r.result.error_share if r.result else None)))
    _root_rows(ctx, configs, roots, symbols, "at the highest rate")


def _root_rows(ctx: Ctx, configs: list[tuple[str, str, bool]],
               roots: dict[str, list[Counter[str]]], symbols: _Symbols, when: str) -> None:
    share = {tool: summarize([_root_share(tool, c) for c in roots.get(label, [])])
             for label, tool, native in configs if native}
    notes = []
    py = [c for label, tool, _ in configs if tool == "py-spy" for c in roots.get(label, [])]
    named: dict[str, Summary | None] = {}
    if py:
        both: Counter[str] = Counter()
        for c in py:
            both.update(c)
        renamed: Counter[str] = Counter()
        for r, n in both.items():
            renamed[symbols.name(r)] += n
        notes.append(f"py-spy's roots: {_shares_text(both)}")
        if renamed != both:
            notes.append(f"its addresses named from psrec's symbols: {_shares_text(renamed)}")
        named = {"py-spy": summarize([
            _root_share("py-spy", Counter({symbols.name(r): n for r, n in c.items()}))
            for c in py])}
    ps = [c for label, tool, _ in configs if tool == "psrec" for c in roots.get(label, [])]
    if ps:
        both = Counter()
        for c in ps:
            both.update(c)
        notes.insert(0, f"psrec's roots: {_shares_text(both)}")
    ctx.add(Row("N", f"thread-samples whose native stack reaches the thread's root "
                f"({ROOTS_TEXT}), {when}", "%", "higher", share, "≥ 99 % and ≥ py-spy's",
                lambda p, b: p.median >= 99.0 and (b is None or p.median >= b.median),
                note="; ".join(notes)))
    if named:
        ctx.add(Row("N", f"the same, py-spy's unnamed addresses named from psrec's symbols of "
                    f"the same process, {when}", "%", "higher",
                    {"psrec": share.get("psrec"), **named}))


# -- the target's slowdown ---------------------------------------------------------------------


def _slowdown(ctx: Ctx, configs: list[tuple[str, str, bool]], raw: dict[str, Any]) -> None:
    rounds = 2 if ctx.quick else 4
    window = 1.5 if ctx.quick else 2.5
    profiled = [(f"{label}@{rate}", tool, rate, {"native": native})
                for rate in SLOW_RATES for label, tool, native in configs]
    ctx.log(f"[N] slowdown: unit_work.py python and c, {len(profiled)} profiled windows x "
            f"{rounds} rounds each, {window:g} s, an unprofiled window between any two")
    runs = {kind: _windows.measure(ctx, kind, profiled, rounds, window) for kind in SLOW_KINDS}
    raw["slowdown"] = {kind: run.as_dict() for kind, run in runs.items()}
    for kind, run in runs.items():
        what = SLOW_KINDS[kind]
        base = [w for w in run.windows if w.config == "baseline"]
        units = summarize([w.units for w in base])
        ctx.add(Row("N", f"unprofiled unit, {what}: wall (its median in each window)", "ms",
                    "none", {"psrec": summarize([w.wall_ms for w in base])},
                    note=f"{units.median:.0f} units per window" if units else ""))
        for key, unit in (("wall_ms", "wall"), ("cpu_ms", "thread CPU")):
            ctx.add(Row("N", f"noise floor, {what}: unprofiled windows vs their unprofiled "
                        f"neighbours, {unit}", "%", "none", {"psrec": run.noise_floor(key)}))
        by_tool = {tool: label for label, tool, native in configs if native}
        for rate in SLOW_RATES:
            fails = "; ".join(f for f in (_windows.failed(run, f"{label}@{rate}")
                                          for label, _, _ in configs) if f)
            ctx.add(Row("N", f"slowdown at {rate} Hz, wall, {what}, with native frames", "%",
                        "lower", {t: run.slowdown(f"{label}@{rate}") for t, label in
                                  by_tool.items()},
                        "≤ 3 % (median) and below py-spy --native",
                        lambda p, b: p.median <= 3.0 and (b is None or p.median < b.median),
                        note="; ".join(n for n in (PYSPY_NOTE if rate == SLOW_RATES[0] and
                                                   kind == "python" else "", fails) if n)))
            ctx.add(Row("N", f"slowdown at {rate} Hz, thread CPU, {what}, with native frames",
                        "%", "none", {t: run.slowdown(f"{label}@{rate}", "cpu_ms")
                                       for t, label in by_tool.items()}))
            if "psrec" in by_tool:
                ctx.add(Row("N", f"slowdown at {rate} Hz, wall, {what}, Python frames only "
                            "(psrec without --native)", "%", "none",
                            {"psrec": run.slowdown(f"psrec@{rate}")}))
                _pairing_rows(ctx, [w.recorded for w in run.windows
                                    if w.config == f"psrec-native@{rate}"],
                              f"at {rate} Hz, {what}")
                for label, how in (("psrec-native", "with native frames"),
                                   ("psrec", "Python frames only")):
                    ctx.add(Row("N", f"recorder CPU per thread-sample at {rate} Hz, {what}, "
                                f"{how}", "µs", "none",
                                {"psrec": _cpu_per_sample(run, f"{label}@{rate}")},
                                note="the sampling thread's CPU, its wake-ups included"))


def _pairing_rows(ctx: Ctx, recorded: list[Any], when: str) -> None:
    """How psrec --native read each sample's two halves (spec 10, rule 7): of one instant (the
    kernel's copy of the Python frames in the same perf sample, or the thread stopped for the
    read), or marked; and the time threads were stopped. py-spy --native stops the whole
    target for every sample: all of its samples are of one instant."""
    def share(key: str) -> Summary | None:
        vals = []
        for r in recorded:
            x = r.result.extra if r is not None and r.result else {}
            mixed, marked = x.get("native_mixed"), x.get("native_marked")
            if isinstance(mixed, int) and isinstance(marked, int) and mixed + marked:
                vals.append(100.0 * (x.get(key) or 0) / (mixed + marked))
        return summarize(vals)

    ctx.add(Row("N", f"samples with native frames of their Python frames' instant (not "
                f"marked), {when}", "%", "higher", {"psrec": share("native_mixed")},
                "≥ 99 %", lambda p, b: p.median >= 99.0,
                note="py-spy --native stops the whole target for every sample to read both"))
    ctx.add(Row("N", f"samples whose Python frames the kernel copied in their perf sample, "
                f"{when}", "%", "none", {"psrec": share("native_captured")}))
    ctx.add(Row("N", f"samples read with their thread stopped, {when}", "%", "none",
                {"psrec": share("native_stopped")}))

    def stopped(r: Any) -> float | None:
        x = r.result.extra if r is not None and r.result else {}
        ns = x.get("stopped_ns")
        return 100.0 * ns / 1e9 / r.duration_s if isinstance(ns, int) and r.duration_s else None
    ctx.add(Row("N", f"time the sampled threads were held stopped for a read, {when}", "%",
                "none", {"psrec": summarize([stopped(r) for r in recorded])}))


def _cpu_per_sample(run: _windows.WindowRun, label: str) -> Summary | None:
    """The sampling thread's CPU time (its own clock, as the recording states it) per
    thread-sample: /proc's ticks of 10 ms are too coarse at 100 Hz."""
    vals = []
    for w in run.windows:
        r = w.recorded
        cpu_ns = r.result.extra.get("sampler_cpu_ns") if r is not None and r.result else None
        if w.config == label and r is not None and r.result and cpu_ns:
            vals.append(cpu_ns / 1e3 / max(1, r.result.thread_samples))
    return summarize(vals)


# -- bytes per thread-sample, and the roots at 1 kHz ------------------------------------------


def _size(ctx: Ctx, configs: list[tuple[str, str, bool]], raw: dict[str, Any]) -> None:
    window = 2.0 if ctx.quick else 2.5
    reps = 1 if ctx.quick else 2
    ctx.log(f"[N] output size on native_work.py at 1 kHz ({reps} x {window:g} s per "
            "configuration)")
    runs, roots, symbols = _record_rounds(
        ctx, configs, reps, window,
        lambda tool: dict(rate_hz=1000, fmt="psr" if tool == "psrec" else "raw"))
    raw["size"] = {label: [r.as_dict() for r in rs] for label, rs in runs.items()}
    raw["roots_at_1khz"] = {label: [dict(c) for c in cs] for label, cs in roots.items()}

    def bps(r: Recorded) -> float | None:
        res = r.result
        return res.out_bytes / res.thread_samples if res and res.thread_samples else None

    sizes = {tool: _vals(runs[label], bps) for label, tool, nat in configs if nat}
    python = _vals(runs.get("psrec", []), bps)
    with_native = sizes.get("psrec")
    note = "py-spy raw is aggregated: shrinks with longer runs"
    if with_native and python:
        note = f"{with_native.median / python.median:.1f}× psrec's Python-only .psr; {note}"
    ctx.add(Row("N", "bytes per thread-sample at 1 kHz, native_work.py, with native frames: "
                ".psr vs py-spy raw", "B", "lower", sizes, note=note))
    ctx.add(Row("N", "bytes per thread-sample at 1 kHz, native_work.py, Python frames only "
                "(.psr without --native)", "B", "none", {"psrec": python}))
    _root_rows(ctx, configs, roots, symbols, "at 1 kHz")
