"""Aggregated reporters: the terminal table, pstats, collapsed stacks and the time-sliced report."""

from __future__ import annotations

import marshal
from collections import defaultdict
from typing import IO, Any

from psrec.format.text import printable

from .common import LIMIT, WAITS, check_waits, format_seconds, location, raise_no_waits
from .modes import GIL_WAIT, MODES
from .profile import FrameKey, Profile
from .registry import Length, Option, Reporter, register
from .tasks import await_stacks
from .view import ViewUsageError, gil_wait_unknown
from .walks import SliceSums, Totals

__all__ = [
    "CollapsedReporter",
    "PstatsReporter",
    "SlicesReporter",
    "TableReporter",
    "Totals",
    "collapsed_frame",
    "format_seconds",
    "function_totals",
]

SORT_KEYS = ("own", "total", "own-samples", "total-samples", "name", "file")


def function_totals(profile: Profile, thread: int | None = None) -> dict[FrameKey, Totals]:
    """Own and cumulative sums per function (or line), of one thread or of all; recursion is
    counted once per stack."""
    return profile.walks.totals(thread)


def _sorted(totals: dict[FrameKey, Totals], sort: str) -> list[tuple[FrameKey, Totals]]:
    items = list(totals.items())
    if sort == "name":
        items.sort(key=lambda kv: (kv[0].name, kv[0].filename, kv[0].line))
    elif sort == "file":
        items.sort(key=lambda kv: (kv[0].filename, kv[0].line, kv[0].name))
    else:
        attr = {"own": "own", "total": "total", "own-samples": "own_count",
                "total-samples": "total_count"}[sort]
        items.sort(key=lambda kv: (-getattr(kv[1], attr), -kv[1].total, kv[0]))
    return items


# Options of `psrec report` these outputs read (and common.LIMIT).
SORT = Option(("--sort",), choices=("own", "total", "own-samples", "total-samples", "name",
                                    "file"), default="own", help="Table order.")
MIN_SHARE = Option(("--min-share",), percent=True,
                   help="Table: leave out the functions whose own and total shares are both "
                        "under PCT % (noise); the shares stay those of every sample, and a line "
                        "says how many were left out.")
PER_THREAD = Option(("--per-thread",),
                    help="Table: one table per thread. Collapsed: a thread root frame on every "
                         "stack. pstats: a root function per thread, under one <all threads> "
                         "root.")


@register
class TableReporter(Reporter):
    name = "table"
    description = "functions (or lines) by own and cumulative samples and estimated time"
    reads = (SORT, LIMIT, MIN_SHARE, PER_THREAD)

    def write(self, profile: Profile, out: IO[Any]) -> str | None:
        sort = self.options.get("sort", "own")
        limit = int(self.options.get("limit", 25))
        least = float(self.options.get("min_share") or 0.0) / 100
        per_thread = bool(self.options.get("per_thread", False))
        w = out.write
        w(f"psrec report: {profile.describe()}\n")
        w("Sample columns count stacks seen, not calls. Estimated times are the time the samples "
          "stand for" + (" (samples x interval)" if profile.view.weights == "count" else "")
          + "; own = on top of the stack, total = anywhere on it.\n")
        sums = profile.thread_sums()
        groups: list[tuple[int | None, int, int]]
        if per_thread:
            groups = [(r, *sums.get(r, (0, 0))) for r in profile.thread_refs()]
        else:
            groups = [(None, sum(n for n, _ in sums.values()),
                       sum(v for _, v in sums.values()))]
        locations: dict[FrameKey, str] = {}  # each function's text, made once
        for ref, samples, total_value in groups:
            total_value = total_value or 1
            if ref is not None:
                label = printable(profile.thread_label(ref))  # "thread (tid N)" when unnamed
                label = label if label.startswith("thread (") else f"thread {label}"
                w(f"\n== {label}: {samples:,} samples, "
                  f"{format_seconds(profile.seconds(total_value))} estimated\n")
            rows = _sorted(function_totals(profile, ref), sort)
            kept = [(k, t) for k, t in rows
                    if t.own >= least * total_value or t.total >= least * total_value]
            hidden = len(rows) - len(kept)
            rows = kept
            shown = rows if limit <= 0 else rows[:limit]
            # A table in one write: a report of 100,000 threads has as many tables.
            lines = [TABLE_HEAD]
            for k, t in shown:
                where = locations.get(k)
                if where is None:
                    where = locations[k] = location(k)
                lines.append(
                    f"{t.own_count:>9,} {t.total_count:>9,} {100 * t.own / total_value:>6.2f}% "
                    f"{format_seconds(profile.seconds(t.own)):>10} "
                    f"{100 * t.total / total_value:>6.2f}% "
                    f"{format_seconds(profile.seconds(t.total)):>10}  {where}\n")
            if len(rows) > len(shown):
                lines.append(f"... {len(rows) - len(shown)} more (use -l 0 to show all)\n")
            if hidden:
                lines.append(f"... {hidden} under {100 * least:g} % of the time left out "
                             "(--min-share)\n")
            w("".join(lines))
        return None


TABLE_HEAD = (f"\n{'own':>9} {'total':>9} {'own':>7} {'est. own':>10} {'total':>7} "
              f"{'est. total':>10}\n"
              f"{'samples':>9} {'samples':>9} {'%':>7} {'time':>10} {'%':>7} {'time':>10}  "
              "file:line(function)\n")


@register
class PstatsReporter(Reporter):
    """A marshal file in pstats' layout: sample counts where call counts would be."""

    name = "pstats"
    description = "pstats file for pstats.Stats, snakeviz and gprof2dot"
    flag = Option(("--pstats",), help="Write a pstats file (default RECORDING.pstats) for "
                                      "pstats, snakeviz, gprof2dot.")
    reads = (PER_THREAD,)
    suffix = ".pstats"
    binary = True

    @staticmethod
    def build(profile: Profile, per_thread: bool = False
              ) -> dict[tuple[str, int, str], tuple[Any, ...]]:
        """pstats' dict: per function, (calls, calls, own s, cumulative s, callers), where a
        caller's entry sums the samples with the function innermost under that caller (calls,
        own) and those with the call anywhere on the stack (cumulative). "calls" are samples
        with the function innermost, so they add up to the samples of the view.

        per_thread: a root function per thread (see _thread_roots) calls each of its stacks'
        outermost frames, and one `<all threads>` root calls those, so that a viewer that
        starts from the largest root (snakeviz, gprof2dot) shows every thread."""
        sec = profile.tick_ns / 1e9
        walks = profile.walks
        callers: dict[FrameKey, dict[tuple[str, int, str], tuple[Any, ...]]] = defaultdict(dict)
        for caller, callee, n, own, cum in walks.edges():
            callers[callee][_pstats_key(caller)] = (n, n, own * sec, cum * sec)
        stats: dict[tuple[str, int, str], tuple[Any, ...]] = {
            _pstats_key(k): (t.own_count, t.own_count, t.own * sec, t.total * sec,
                             callers.get(k, {}))
            for k, t in walks.totals().items()}
        if per_thread:
            stats = _thread_roots(profile, stats)
        return stats

    def write(self, profile: Profile, out: IO[Any]) -> str | None:
        per_thread = bool(self.options.get("per_thread", False))
        stats = self.build(profile, per_thread)
        marshal.dump(stats, out)
        functions = len(stats) - (len(profile.thread_refs()) + 1 if per_thread else 0)
        roots = f", a root per thread under {ALL_THREADS[2]}" if per_thread else ""
        return f"{functions:,} functions, {profile.selected:,} samples{roots}"


ALL_THREADS = ("<thread>", 0, "<all threads>")


def _thread_roots(profile: Profile, stats: dict[tuple[str, int, str], tuple[Any, ...]]
                  ) -> dict[tuple[str, int, str], tuple[Any, ...]]:
    """pstats' dict with a function per thread, ("<thread>", 0, "thread LABEL"), as the
    caller of its stacks' outermost frames, and ALL_THREADS as the caller of those. They are
    never innermost, so their calls and own time are 0 and the file's totals (calls, own
    time) stay the report's; their cumulative time is their thread's (all threads'). They come
    first, so that a viewer that sorts by cumulative time and takes the first of equals (an
    outermost `<module>` of every thread ties with ALL_THREADS) starts from ALL_THREADS."""
    sec = profile.tick_ns / 1e9
    # thread -> outermost key -> [samples with it alone on the stack, their value, value]
    roots: dict[int, dict[FrameKey, list[int]]] = defaultdict(dict)
    for c in profile.cells:
        keys = profile.names.keys(c.node)
        value = profile.cell_value(c)
        sums = roots[c.thread].setdefault(keys[0], [0, 0, 0])
        sums[2] += value
        if len(keys) == 1:
            sums[0] += c.samples
            sums[1] += value
    threads: dict[tuple[str, int, str], tuple[Any, ...]] = {}
    for ref in profile.thread_refs():
        key = ("<thread>", 0, f"thread {profile.thread_label(ref)}")
        total = sum(s[2] for s in roots[ref].values()) * sec
        for outer, (n, own, cum) in roots[ref].items():
            stats[_pstats_key(outer)][4][key] = (n, n, own * sec, cum * sec)
        threads[key] = (0, 0, 0.0, total, {ALL_THREADS: (0, 0, 0.0, total)})
    everything = sum(t[3] for t in threads.values())
    return {ALL_THREADS: (0, 0, 0.0, everything, {}), **threads, **stats}


def _pstats_key(k: FrameKey) -> tuple[str, int, str]:
    return (k.filename, k.line, k.name)


def collapsed_name(text: str) -> str:
    """A name as a collapsed stack can hold it: never the `;` separator, and control, bidi and
    line-break characters escaped (a line break would end the stack and forge another)."""
    shown: str = printable(text.replace(";", ":"))
    return shown


def collapsed_frame(k: FrameKey) -> str:
    """`name (file:line)`: never ends in a number, never holds the `;` separator."""
    return collapsed_name(f"{k.name} ({k.filename}:{k.line})")


@register
class CollapsedReporter(Reporter):
    name = "collapsed"
    description = "collapsed stacks for flamegraph.pl and inferno"
    flag = Option(("--collapsed",), help="Write collapsed stacks (default RECORDING.collapsed; "
                                         "-o - for stdout) for flamegraph.pl and inferno.")
    reads = (PER_THREAD, WAITS)
    default_weights = "count"
    suffix = ".collapsed"

    def write(self, profile: Profile, out: IO[Any]) -> str | None:
        if self.options.get("waits"):
            return _write_waits(profile, out, bool(self.options.get("per_thread")))
        per_thread = bool(self.options.get("per_thread", False))
        counts: dict[str, int] = defaultdict(int)
        names: dict[FrameKey, str] = {}
        lines: dict[tuple[int, int], str] = {}
        as_count = profile.view.weights == "count"
        for c in profile.cells:
            tkey = (c.thread if per_thread else 0, c.node)
            text = lines.get(tkey)
            if text is None:
                parts = []
                if per_thread:
                    parts.append("thread " + collapsed_name(profile.thread_label(c.thread)))
                for k in profile.names.keys(c.node):
                    n = names.get(k)
                    if n is None:
                        n = names[k] = collapsed_frame(k)
                    parts.append(n)
                text = lines[tkey] = ";".join(parts)
            if as_count:
                counts[text] += c.samples
            else:
                counts[text] += profile.cell_value(c)
        if not as_count:  # integer microseconds
            scale = profile.tick_ns / 1000
            counts = defaultdict(int, {k: round(v * scale) for k, v in counts.items()})
        for text, total in sorted(counts.items()):
            if total > 0:
                out.write(f"{text} {total}\n")
        unit = "samples" if as_count else "microseconds"
        return f"{len(counts):,} stacks, {sum(counts.values()):,} {unit}"


def _write_waits(profile: Profile, out: IO[Any], per_thread: bool) -> str:
    """`--collapsed --waits`: the tasks' waiting time by logical stack (tasks.await_stacks),
    in integer microseconds."""
    if per_thread:
        raise ViewUsageError("--waits: the time tasks waited is no thread's time",
                             help="leave out --per-thread (each task's stack starts at the "
                                  "task nothing awaits)")
    check_waits(profile)
    logical, ticks, cut = await_stacks(profile)
    if not ticks:
        raise_no_waits(profile)
    scale = profile.tick_ns / 1000
    lines: dict[str, int] = defaultdict(int)
    names: dict[FrameKey, str] = {}
    for node, n in ticks.items():
        parts = []
        for fid in logical.path(node):
            if profile.names.hidden(fid):
                continue
            k = profile.names.key(fid)
            text = names.get(k)
            if text is None:
                text = names[k] = collapsed_frame(k)
            parts.append(text)
        lines[";".join(parts)] += n
    total = 0
    for text, n in sorted(lines.items()):
        us = round(n * scale)
        if us > 0:
            out.write(f"{text} {us}\n")
            total += us
    cut_note = " (cut at the budget of frames of logical stacks)" if cut else ""
    return f"{len(lines):,} stacks, {total:,} microseconds of waiting{cut_note}"


STRIP_LEGEND = ("# holding the GIL   = on CPU without the GIL   - partly on CPU   "
                ". idle (off CPU)   blank: no samples")


def strip_char(count: int, gil: int, on_cpu: int) -> str:
    if count == 0:
        return " "
    if gil * 2 >= count:
        return "#"
    if on_cpu * 2 >= count:
        return "="
    if on_cpu * 10 >= count:
        return "-"
    return "."


def slice_sums(profile: Profile) -> SliceSums:
    """slice -> thread -> [samples, GIL-held, on-CPU]; slice -> leaf key -> own value."""
    return profile.walks.slice_sums()


def samples_per_slice(profile: Profile, name: str) -> dict[int, int]:
    """Samples per slice of the profile under one of its ``also`` status filters (which may
    be summed in finer slices: each is counted in the slice that holds it)."""
    cols = profile.also[name]
    ticks = profile.also_slices.get(name, profile.slice_ticks) or profile.slice_ticks
    out: dict[int, int] = defaultdict(int)
    for sl, n in zip(cols.slice, cols.samples):
        out[sl * ticks // profile.slice_ticks] += n
    return out


@register
class SlicesReporter(Reporter):
    name = "slices"
    description = "time-sliced report with a per-thread activity strip"
    flag = Option(("--slices",), keyword="slice_seconds", metavar="DURATION",
                  length=Length(("1s", "250ms"), "a single slice", what="the length of a slice"),
                  help="Time-sliced report, one row per slice (e.g. 1s, 250ms), with a "
                       "per-thread activity strip.")

    def slice_seconds(self) -> float:
        return float(self.options["slice_seconds"])

    def also(self, profile_mode: str) -> tuple[str, ...]:
        # The GIL-wait column: samples waiting for the GIL, as a share of all the slice's
        # samples (every state: the mode may leave the waiting ones out).
        every = MODES[profile_mode].every_sample
        return (GIL_WAIT.name,) + (() if every else ("state-wall",))

    def write(self, profile: Profile, out: IO[Any]) -> str | None:
        top_n = int(self.options.get("top", 3))
        width = int(self.options.get("width", 100))
        w = out.write
        slice_s = profile.seconds(profile.slice_ticks)
        per, own_by_slice = slice_sums(profile)
        first = min(per)
        last = max(per)
        thread_refs = profile.thread_refs()
        # Where the recording cannot know who waits for the GIL, it says so once instead of
        # a column of zeros.
        no_wait = gil_wait_unknown(profile.metadata)
        waiting: dict[int, int] = {}
        everything: dict[int, int] = {}
        if no_wait is None and GIL_WAIT.name in profile.also:
            waiting = samples_per_slice(profile, GIL_WAIT.name)
            if "state-wall" in profile.also:
                everything = samples_per_slice(profile, "state-wall")
            else:
                everything = {sl: sum(a[0] for a in th.values()) for sl, th in per.items()}
        w(f"psrec report --slices: {profile.describe()}\n")
        w(f"One row per {format_seconds(slice_s)} slice; times from the start of the recording. "
          "Active threads: threads on a CPU or holding the GIL in some sample of the slice.")
        if no_wait is None:
            w(" GIL-wait: share of all the slice's samples (any state) waiting to take the "
              "GIL.\n\n")
            wait_head = f" {'GIL-wait':>8}"
        else:
            w(f"\nNo GIL-wait column: {no_wait}.\n\n")
            wait_head = ""
        w(f"{'slice (s)':>17} {'samples':>9} {'on-CPU':>7} {'GIL':>7}{wait_head} {'active':>7}  "
          f"top functions (share of the slice's {profile.unit_label})\n")
        for s in range(first, last + 1):
            start = s * slice_s
            th = per.get(s, {})
            count = sum(a[0] for a in th.values())
            label = f"{start:8.3f}-{start + slice_s:<8.3f}"
            if count == 0:
                w(f"{label} {0:>9}\n")
                continue
            gil = sum(a[1] for a in th.values())
            on = sum(a[2] for a in th.values())
            active = sum(1 for a in th.values() if a[1] or a[2])
            own = own_by_slice.get(s, {})
            tot = sum(own.values()) or 1
            tops = sorted(own.items(), key=lambda kv: (-kv[1], kv[0]))[:top_n]
            top = ", ".join(f"{printable(k.name)} {100 * v / tot:.0f}%" for k, v in tops)
            wait = ""
            if no_wait is None:
                wait = f" {100 * waiting.get(s, 0) / (everything.get(s) or 1):>7.1f}%"
            w(f"{label} {count:>9,} {100 * on / count:>6.1f}% {100 * gil / count:>6.1f}%{wait} "
              f"{active:>3}/{len(th):<3}  {top}\n")
        # Activity strip: one column per slice, or per group of slices when there are many.
        nslices = last - first + 1
        group = max(1, -(-nslices // width))
        cols = -(-nslices // group)
        w(f"\nActivity, one column per {format_seconds(slice_s * group)} from "
          f"{first * slice_s:.3f} s:  {STRIP_LEGEND}\n")
        labels = {r: printable(profile.thread_label(r)) for r in thread_refs}
        lw = min(40, max(len(x) for x in labels.values()))
        for r in thread_refs:
            chars = []
            for col in range(cols):
                cnt = gil = on = 0
                for s in range(first + col * group, min(first + (col + 1) * group, last + 1)):
                    sums = per.get(s, {}).get(r)
                    if sums:
                        cnt += sums[0]
                        gil += sums[1]
                        on += sums[2]
                chars.append(strip_char(cnt, gil, on))
            w(f"{labels[r][:lw]:<{lw}} |{''.join(chars)}|\n")
        return None
