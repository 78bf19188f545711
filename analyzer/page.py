"""`psrec report --html`: one self-contained page (no network at view time) with each thread's
states over the recording (holding the GIL, on a CPU without it, waiting for it, idle), a
brush to pick a time window, and a flame graph and function table of the window and threads
picked, in any of the four modes; for an asyncio program, its tasks by the time they ran and
the time they waited in the window and threads picked.

The page carries aggregates, not samples: the samples summed by (time slice, thread, stack)
under each mode, and by (time slice, thread) under each state, so its size grows with
distinct stacks, threads and slices, never with the number of samples; past its bounds on
thread rows, states and cells it merges threads or slices, and says so. The script in
assets/report.js sums the cells of the selection.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from psrec.format import constants as FC
from psrec.format.mixed_stacks import hides, marked_note
from psrec.format.version import psrec_version

from .common import format_seconds, render
from .engine import Engine
from .model import Column, FrameKey
from .modes import GIL, MODES, WALL
from .profile import NO_STACK, CellColumns, Profile
from .registry import Option, Reporter, register
from .tasks import await_chain, coroutine_label, selected_samples, task_waits
from .view import gil_wait_unknown
from .walks import TrieOrder

__all__ = ["HtmlReporter", "page_data"]

# Slices across the selected span: the timeline's columns and the brush's resolution.
SLICES = 400
# Timeline slices in a slice of the flame graph's cells, at least.
CELL_SLICES = 5
# The most (slice, thread, stack) cells a page carries: beyond it, the cells' slices are
# merged in twos until it fits (a coarser window for the flame graph, the same totals).
MAX_CELLS = 300_000
# The most thread rows the timeline draws: beyond it, the threads with the fewest samples
# share the last row (its ref is OTHERS: a thread's ref is below 2^24).
MAX_ROWS = 1_000
OTHERS = (1 << 32) - 1
# The most (row, timeline slice) states the page carries, each row's from its first slice
# with samples to its last: beyond it, timeline slices are merged in twos.
MAX_STATES = 250_000
# Besides the other modes, each thread's time on a CPU without the GIL and waiting for it
# (its time in all and holding the GIL are the wall and gil modes' cells by thread).
STATE_NAMES = ("state-cpu", "state-wait")
_ALL_SLICES = (1 << 64) - 1  # a group_sums factor that puts every slice in one

Groups = tuple[Column, Column, Column, Column]


def _values(p: Profile, mode: str, cols: CellColumns) -> Any:
    """The column holding a mode's value per cell (samples under count weights, which are
    multiplied by the interval once summed)."""
    if p.view.weights == "count":
        return cols.samples
    if MODES[mode].weighs_cpu and any(cols.cpu):
        return cols.cpu
    return cols.weight


def _regroup(engine: Engine, g: Groups, width: int, factor: int) -> Groups:
    """Groups (a row of `width` sums each) summed again by slice // factor."""
    sl, th, node, values = g
    return engine.group_sums([(sl, th, node, values[i::width]) for i in range(width)], factor)


class _Rows:
    """One row per thread with samples in the view, the threads with the fewest samples
    sharing the last one beyond MAX_ROWS."""

    def __init__(self, p: Profile, wall: CellColumns, bounds: list[str]) -> None:
        self.refs = p.thread_refs()
        self.every = len(self.refs)
        self.shared: dict[int, int] = {}
        if self.every > MAX_ROWS:
            _, by_thread, _, counts = p.engine.group_sums(
                [(wall.slice, wall.thread, wall.node, wall.samples)], _ALL_SLICES, False)
            samples = dict(zip(by_thread, counts))
            kept = set(sorted(self.refs, key=lambda r: -samples.get(r, 0))[:MAX_ROWS - 1])
            self.shared = {r: OTHERS for r in self.refs if r not in kept}
            self.refs = [r for r in self.refs if r in kept]
            bounds.append(f"{len(self.shared):,} threads with the fewest samples share the "
                          f"last row (at most {MAX_ROWS:,} rows)")
        self.rows = set(self.refs) | ({OTHERS} if self.shared else set())
        self._remapped: dict[int, Any] = {}

    def of(self, c: CellColumns) -> Any:
        """The thread column of cells with each thread's row ref."""
        if not self.shared:
            return c.thread
        if id(c) not in self._remapped:
            self._remapped[id(c)] = array("I", map(self.shared.get, c.thread, c.thread))
        return self._remapped[id(c)]


class _Timeline:
    """Per (slice, row): the time (weights) of every sample, of those holding the GIL, on a
    CPU without it and waiting for it, and the samples; the slices merged in twos while the
    rows' states are more than MAX_STATES."""

    def __init__(self, p: Profile, rows: _Rows, columns: dict[str, CellColumns],
                 bounds: list[str]) -> None:
        wall = columns[WALL.name]
        sources = [(c.slice, rows.of(c), c.node, c.weight) for c in (
            wall, columns[GIL.name], p.also["state-cpu"], p.also["state-wait"])]
        sources.append((wall.slice, sources[0][1], wall.node, wall.samples))
        states = p.engine.group_sums(sources, 1, False)
        self.spans: dict[int, tuple[int, int]] = {}  # per row, its first and last slice
        for sl, th in zip(states[0], states[1]):
            if th in rows.rows:
                lo_hi = self.spans.get(th)
                self.spans[th] = (sl, sl) if lo_hi is None else (min(lo_hi[0], sl),
                                                                 max(lo_hi[1], sl))
        first = min(states[0], default=0)
        last = max(states[0], default=0)
        merge = 1
        while (last // merge > first // merge
               and sum(hi // merge - lo // merge + 1 for lo, hi in self.spans.values())
               > MAX_STATES):
            merge *= 2
        ticks = max(1, p.slice_ticks)
        if merge > 1:
            states = _regroup(p.engine, states, 5, merge)
            first, last = first // merge, last // merge
            bounds.append(f"timeline slices of {format_seconds(p.seconds(merge * ticks))}, "
                          f"not {format_seconds(p.seconds(ticks))} (at most {MAX_STATES:,} "
                          "thread states)")
        self.states, self.first, self.merge = states, first, merge
        self.slices = last - first + 1  # the timeline's, with any slice that has no samples

    def per_row(self, rows: _Rows, unknown_waits: bool
                ) -> tuple[dict[str, list[Any]], dict[int, int]]:
        """Per row, its states over the slices it has samples in: [first slice, wall, gil,
        cpu, wait], each list from that slice on (a short-lived thread costs a few slices);
        and its samples. unknown_waits: a recording that cannot know GIL waits has none to
        draw (its status bits say nothing; the legend and the gil-wait mode say why)."""
        out: dict[str, list[Any]] = {}
        for th, (lo, hi) in self.spans.items():
            lo, hi = lo // self.merge, hi // self.merge
            out[str(th)] = [lo - self.first] + [[0] * (hi - lo + 1) for _ in range(4)]
        samples: dict[int, int] = {}
        st_slice, st_thread, _, st_values = self.states
        for i, (sl, th) in enumerate(zip(st_slice, st_thread)):
            if th not in rows.rows:
                continue
            per = out[str(th)]
            at = sl - self.first - per[0]
            for j in range(4):
                per[j + 1][at] += st_values[i * 5 + j]
            samples[th] = samples.get(th, 0) + st_values[i * 5 + 4]
        if unknown_waits:
            for per in out.values():
                per[4] = [0] * len(per[4])
        return out, samples


def _cells(p: Profile, rows: _Rows, columns: dict[str, CellColumns], tl: _Timeline,
           bounds: list[str]) -> tuple[Any, int]:
    """The cells, in slices of `factor` slices of the profile: CELL_SLICES timeline slices,
    or twice, four times... that many until they are at most MAX_CELLS. Merging slices in
    twos at least halves the cells while they are distinct: start from the first factor that
    may fit, and never go below 20 slices. Returns them with the factor."""
    sources = [(c.slice, rows.of(c), c.node, _values(p, m, c)) for m, c in columns.items()]
    span = tl.slices * tl.merge
    factor = CELL_SLICES * tl.merge
    while len(columns[WALL.name]) > MAX_CELLS * factor and span > 20 * factor:
        factor *= 2
    while True:
        cells = p.engine.group_sums(sources, factor)
        if len(cells[2]) <= MAX_CELLS or span <= 20 * factor:
            break
        factor *= 2
    if factor > CELL_SLICES * tl.merge:
        ticks = max(1, p.slice_ticks)
        bounds.append(f"flame graph windows of {format_seconds(p.seconds(factor * ticks))} "
                      f"(at most {MAX_CELLS:,} cells)")
    return cells, factor


def _keys(p: Profile, order: TrieOrder) -> tuple[dict[Any, int], list[int], list[int], Any]:
    """The frame keys of the trie's nodes in order: the keys by number, in which native views
    each is shown (SHOWN_IN), each node's key, and the recording's native view (None
    without native frames; then with the key of the folded start-up frames)."""
    keys: dict[Any, int] = {}
    shown: list[int] = []  # by key: the native views that show it (SHOWN_IN)
    key_of = []
    for n in order.nodes:
        k = p.names.key(p.frames[n]) if n else NO_STACK
        i = keys.setdefault(k, len(keys))
        if i == len(shown):
            shown.append(_shown_in(p, p.frames[n]) if n else SHOWN_ALWAYS)
        key_of.append(i)
    native_view = p.view.native if p.metadata.get("options", {}).get("native") else None
    if native_view is not None:
        keys[STARTUP_KEY] = len(keys)
        shown.append(SHOWN_NATIVE)
    return keys, shown, key_of, native_view


def page_data(p: Profile) -> dict[str, Any]:
    """What the page draws, as JSON-ready data: threads, per-slice states, the stack trie of
    the stacks seen, and cells (slice, thread, stack) with a value per mode.

    Its size is bounded whatever the recording holds (MAX_ROWS thread rows, MAX_STATES
    states, MAX_CELLS cells): where a bound merged rows or slices, `bounds` says so."""
    modes = list(MODES)
    columns = {m: (p.columns if m == p.view.mode else p.also[m]) for m in modes}
    ticks = max(1, p.slice_ticks)
    bounds: list[str] = []
    rows = _Rows(p, columns[WALL.name], bounds)
    tl = _Timeline(p, rows, columns, bounds)
    (c_slice, c_thread, c_node, c_values), factor = _cells(p, rows, columns, tl, bounds)
    if p.view.weights == "count":
        c_values = array("Q", (v * p.interval_ticks for v in c_values))

    # The trie of the stacks seen, numbered again with parents before children.
    order = TrieOrder(p.parents)
    cell_factor = factor // tl.merge  # timeline slices in a cell's slice
    first = tl.first
    base = first // cell_factor
    width = len(modes)
    out_cells: dict[str, list[int]] = {
        "s": [sl - base for sl in c_slice],
        "t": c_thread.tolist(),
        "n": [order.add(node) for node in c_node],
        **{m: c_values[i::width].tolist() for i, m in enumerate(modes)},
    }
    md = p.metadata
    wait_unknown = gil_wait_unknown(md)
    out_states, row_samples = tl.per_row(rows, wait_unknown is not None)
    threads = [{"ref": ref, "label": p.thread_label(ref), "samples": row_samples.get(ref, 0)}
               for ref in rows.refs]
    if rows.shared:
        threads.append({"ref": OTHERS, "label": f"{len(rows.shared):,} other threads",
                        "samples": row_samples.get(OTHERS, 0), "threads": len(rows.shared)})
    keys, shown, key_of, native_view = _keys(p, order)
    slice_ticks = tl.merge * ticks
    # asyncio tasks, in the flame graph's cells (a cell slice is `factor` profile slices).
    tasks = page_tasks(p, ticks * factor, base, lambda ref: rows.shared.get(ref, ref))
    return {
        "psrec": psrec_version(),
        "file": p.path,
        "title": Path(p.path).name,
        "python": md.get("python_version") or "",
        "command": " ".join(md.get("command") or []),
        "pid": md.get("pid"),
        "free_threaded": p.free_threaded,
        # None where the recording can say which threads waited for the GIL, else why not.
        "gil_wait_unknown": wait_unknown,
        "health": _health(p),
        "tick_s": p.tick_ns / 1e9,
        "origin_s": p.seconds(first * slice_ticks - p.extent[0]) if p.extent[0] >= 0 else 0.0,
        "slice_s": p.seconds(slice_ticks),
        "slices": tl.slices,
        # A timeline slice a (from 0) is in cell slice (a + cell_offset) // cell_factor.
        "cell_factor": cell_factor,
        "cell_offset": first % cell_factor,
        "mode": p.view.mode,
        "weights": p.view.weights,
        "interval_ticks": p.interval_ticks,
        "by": p.view.by,
        "samples": p.selected,
        "thread_count": rows.every,
        "threads": threads,
        "states": out_states,
        # [name, file, line, native, shown]: native frames are drawn in colours of their
        # own; shown says in which native views (SHOWN_IN) the frame is drawn.
        "keys": [[k.name, k.filename, k.line, int(k.native), shown[i]]
                 for i, k in enumerate(keys)],
        # A native recording's view of its native frames (NATIVE_VIEWS), which the page's
        # own switch changes; None for a recording without them. In "mixed", the native
        # frames below a stack's first Python frame are drawn as the one key startup_key.
        "native_view": native_view,
        "startup_key": keys[STARTUP_KEY] if native_view is not None else None,
        "parent": order.parent,
        "key": key_of,
        "cells": out_cells,
        "modes": modes,
        "mode_help": {m: MODES[m].help for m in modes},
        # What the bounds on the page's size merged, one phrase each (none: nothing).
        "bounds": bounds,
        # None for a recording of no asyncio task (see tasks.page_tasks).
        "tasks": tasks,
    }


# Which native views (psrec.format.mixed_stacks.NATIVE_VIEWS) draw a key: Python frames in
# every one, native code in "mixed" and "all", the evaluation loop and the call machinery in
# "all" only.
SHOWN_ALWAYS, SHOWN_NATIVE, SHOWN_ALL_ONLY = 0, 1, 2
# The frame that stands, in the "mixed" view, for a stack's native frames below its first
# Python frame (the interpreter's start-up, from _start to the code that runs the program).
STARTUP_KEY = FrameKey("", 0, "[native start-up frames]", True)


def _shown_in(p: Profile, frame_id: int) -> int:
    """The native views that draw a frame (SHOWN_ALWAYS, SHOWN_NATIVE or SHOWN_ALL_ONLY)."""
    if frame_id == FC.TRUNCATED_FRAME:
        return SHOWN_ALWAYS
    fn = p.defs.frame(frame_id).function
    if fn.kind == 0:
        return SHOWN_ALWAYS
    return SHOWN_ALL_ONLY if hides(fn.kind, fn.name, "mixed") else SHOWN_NATIVE


def _health(p: Profile) -> dict[str, Any]:
    """How well the sampler kept up, for the page's header: the rate asked for, the rate
    achieved (sampling passes over the recording's span, from the file's chunk index, the
    same count `psrec info` gives), the passes that missed their deadline and the samples
    that could not be read, in the window the page shows."""
    lo, hi = p.extent
    passes = None
    try:
        with p.open() as rec:
            if rec.clean:
                passes = sum(c.passes for c in rec.data_chunks())
    except (OSError, ValueError):
        pass
    span_s = p.seconds(hi - lo) if hi > lo else 0.0
    achieved = (passes - 1) / span_s if passes and span_s > 0 else None
    start = -1 if p.from_ts is None else p.from_ts
    end = None if p.to_ts is None else p.to_ts
    missed = sum(e[3] for e in p.events if e[0] == FC.REC_PASS_ERRORS
                 and e[1] >= start and (end is None or e[1] < end))
    rate = p.metadata.get("rate_hz")
    # A native recording's samples whose native frames were not of their Python frames'
    # instant (spec 10, rule 7): said above 1 %, with what lowers it.
    marked = ""
    if (p.metadata.get("options") or {}).get("native"):
        marked = marked_note(p.marked_samples(), p.selected)
    return {"requested_hz": rate if isinstance(rate, (int, float)) else None,
            "achieved_hz": achieved, "missed_deadlines": missed,
            "sample_errors": p.sample_errors, "native_marked": marked}


# The most tasks the HTML page lists one by one: beyond it, the tasks that ran least share
# one row.
MAX_TASK_ROWS = 10_000


def page_tasks(profile: Profile, cell_ticks: int, base: int,
               row_of: Callable[[int], int]) -> dict[str, Any] | None:
    """The HTML page's tasks (None for a recording without any): each task's label and
    coroutine, and per (cell slice, thread row, task) of the view's samples of threads that
    ran a task, their count, wall time (ticks, as the page's cells) and CPU ticks, and the
    wall ticks the task waited then (suspended or ready: task_waits' time, spread evenly over
    the time it was charged for, on the row of the thread that ran the task most, or of a
    thread of its process that ran tasks); task 0 is the loops' own time. Cells are
    cell_ticks long, numbered from the one holding tick base * cell_ticks; row_of gives a
    thread's row."""
    tasks = profile.defs.tasks
    if not tasks:
        return None
    by_count = profile.view.weights == "count"
    cells: dict[tuple[int, int, int], list[float]] = {}
    ran: set[int] = set()
    per_task: dict[int, int] = {}
    threads_of: dict[int, dict[int, int]] = {}  # task -> thread -> samples
    for ts, ref, task, weight, cpu in selected_samples(profile):
        if task:
            ran.add(ref)
            per_task[task] = per_task.get(task, 0) + 1
            by = threads_of.setdefault(task, {})
            by[ref] = by.get(ref, 0) + 1
        c = cells.setdefault((max(0, ts) // cell_ticks - base, ref, task), [0, 0, 0, 0])
        c[0] += 1
        c[1] += profile.interval_ticks if by_count else weight
        c[2] += cpu
    loops_of: dict[int, int] = {}  # pid -> a thread of it that ran tasks
    for ref in sorted(ran):
        t = profile.threads.get(ref)
        if t is not None:
            loops_of.setdefault(t.pid, ref)
    waited: dict[int, int] = {}
    sites: dict[tuple[int, int], int] = {}  # (state, coroutines' node) -> its index
    at: dict[tuple[int, int, int], float] = {}  # (cell slice, thread, site) -> ticks
    for task, w in task_waits(profile, spans=True).items():
        ran_on = threads_of.get(task)
        info = tasks.get(task)
        row = (max(ran_on, key=ran_on.__getitem__) if ran_on else
               loops_of.get(info.pid) if info is not None else None)
        if row is None:
            continue  # its loop's thread is not in the view
        for a, b, n, (state, node, _) in w.spans or ():
            waited[task] = waited.get(task, 0) + n
            site = sites.setdefault((state, node), len(sites))
            c0 = max(0, a) // cell_ticks
            while True:
                lo, hi = c0 * cell_ticks, (c0 + 1) * cell_ticks
                part = n * (min(b, hi) - max(a, lo)) / (b - a)
                cells.setdefault((c0 - base, row, task), [0, 0, 0, 0])[3] += part
                key = (c0 - base, row_of(row), site)
                at[key] = at.get(key, 0.0) + part
                if hi >= b:
                    break
                c0 += 1
    ordered = sorted(set(per_task) | set(waited),
                     key=lambda t: (-per_task.get(t, 0), -waited.get(t, 0), t))
    listed = ordered[:MAX_TASK_ROWS]
    index = {tid: i + 1 for i, tid in enumerate(listed)}  # 0: no task
    coroutines: dict[str, int] = {"": 0}
    rows: list[list[Any]] = [["<no task>", 0, 0]]
    for tid in listed:
        defined = tasks.get(tid)
        where = coroutine_label(defined) if defined and defined.coroutine else ""
        rows.append([defined.label if defined else f"<task {tid}, not defined>",
                     coroutines.setdefault(where, len(coroutines)), tid])
    others = len(ordered) - len(listed)
    if others:
        rows.append([f"{others:,} other tasks", 0, -1])
    merged: dict[tuple[int, int, int], list[float]] = {}
    for (sl, ref, task), c in cells.items():
        if ref not in ran:
            continue  # a thread that never ran a task: no event loop's
        k = index.get(task, len(rows) - 1) if task else 0
        m = merged.setdefault((sl, row_of(ref), k), [0, 0, 0, 0])
        for i in range(4):
            m[i] += c[i]
    keys = sorted(merged)
    at_keys = sorted(at)
    return {
        # [label, coroutine (an index in coroutines), TASK id (0: none, -1: the others)]
        "rows": rows,
        # Coroutines as "function (file:first line)"; "" where not known.
        "coroutines": list(coroutines),
        "cells": {"s": [k[0] for k in keys], "t": [k[1] for k in keys],
                  "k": [k[2] for k in keys], "n": [int(merged[k][0]) for k in keys],
                  "wall": [int(merged[k][1]) for k in keys],
                  "cpu": [int(merged[k][2]) for k in keys],
                  "wait": [round(merged[k][3]) for k in keys]},
        # Where the tasks waited: each await (its coroutines down to it, and whether the task
        # was ready rather than suspended), and its wall ticks per (cell slice, thread row).
        "sites": [await_chain(profile, node) + ("" if state == FC.TASK_SUSPENDED else
                                                  "  (ready, waiting for its loop)")
                  for (state, node) in sites],
        "site_cells": {"s": [k[0] for k in at_keys], "t": [k[1] for k in at_keys],
                       "k": [k[2] for k in at_keys], "wait": [round(at[k]) for k in at_keys]},
    }


@register
class HtmlReporter(Reporter):
    name = "html"
    description = ("an HTML page with everything inline: each thread's GIL and CPU states "
                   "over time, and a flame graph and function table of any window")
    flag = Option(("--html",), help="Write one self-contained HTML page (default "
                                    "RECORDING.html): each thread's GIL and CPU states over "
                                    "time, a brush for a window, and a flame graph and function "
                                    "table of it, in every mode.")
    suffix = ".html"
    slice_count = SLICES

    def also(self, profile_mode: str) -> tuple[str, ...]:
        return tuple(m for m in MODES if m != profile_mode) + STATE_NAMES

    def write(self, profile: Profile, out: IO[Any]) -> str | None:
        data = page_data(profile)
        page = render(data)
        out.write(page)
        bounds = "".join(f"; {b}" for b in data["bounds"])
        return (f"{data['thread_count']} threads, {len(data['parent']):,} stack nodes, "
                f"{len(data['cells']['n']):,} cells, {math.ceil(len(page) / 1024):,} KiB"
                f"{bounds}")
