"""`psrec report --html`: one self-contained page (no network at view time) with each thread's
states over the recording (holding the GIL, on a CPU without it, waiting for it, idle), a
brush to pick a time window, and a flame graph and function table of the window and threads
picked, in any of the four modes.

The page carries aggregates, not samples: the samples summed by (time slice, thread, stack)
under each mode and state, so its size grows with distinct stacks and slices, never with the
number of samples. The script in assets/report.js sums the cells of the selection.
"""

from __future__ import annotations

import json
import math
from array import array
from pathlib import Path
from typing import IO, Any

from psrec import __version__
from psrec.format import constants as FC
from psrec.format.reader import open_recording

from . import engine
from .profile import NO_STACK, CellColumns, Profile
from .registry import Reporter, register
from .view import MODE_HELP, MODES, STATE_SLICES, gil_wait_unknown
from .walks import TrieOrder

__all__ = ["HtmlReporter", "page_data"]

ASSETS = Path(__file__).resolve().parent / "assets"
# Slices across the selected span: the brush's resolution and the timeline's columns (the
# flame graph's cells are STATE_SLICES times coarser, or more where there are many).
SLICES = 400
# The most (slice, thread, stack) cells a page carries: beyond it, slices are merged in twos
# until it fits (a coarser brush, the same totals).
MAX_CELLS = 300_000
STATE_NAMES = ("state-wall", "state-gil", "state-cpu", "state-wait")


def _values(p: Profile, mode: str, cols: CellColumns) -> Any:
    """The column holding a mode's value per cell (samples under count weights, which are
    multiplied by the interval once summed)."""
    if p.view.weights == "count":
        return cols.samples
    if mode == "cpu" and any(cols.cpu):
        return cols.cpu
    return cols.weight


def page_data(p: Profile) -> dict[str, Any]:
    """What the page draws, as JSON-ready data: threads, per-slice states, the stack trie of
    the stacks seen, and cells (slice, thread, stack) with a value per mode."""
    modes = list(MODES)
    columns = {m: (p.columns if m == p.view.mode else p.also[m]) for m in modes}
    # Per (fine slice, thread): wall, gil, on a CPU without the GIL, waiting for it (time
    # weights), and the samples: the states are summed by thread alone, in slices finer than
    # the modes' (STATE_SLICES to one).
    wall = p.also["state-wall"]
    state_sources = [(c.slice, c.thread, c.node, c.weight) for c in (
        wall, p.also["state-gil"], p.also["state-cpu"], p.also["state-wait"])]
    state_sources.append((wall.slice, wall.thread, wall.node, wall.samples))
    st_slice, st_thread, _, st_values = engine.group_sums(p.native, state_sources, 1, False)
    slice_ticks = max(1, p.also_slices["state-wall"])
    ratio = max(1, p.slice_ticks // slice_ticks)  # fine slices in a mode's slice
    sources = [(c.slice, c.thread, c.node, _values(p, m, c)) for m, c in columns.items()]
    # Every cell of a mode is a cell of the wall mode: merging slices in twos at least halves
    # the cells while they are distinct, so start from the first factor that may fit.
    mode_cells = len(columns["wall"].node)
    mode_slices = len(set(columns["wall"].slice))
    factor = 1
    while mode_cells > MAX_CELLS * factor and mode_slices > 20 * factor:
        factor *= 2
    while True:
        c_slice, c_thread, c_node, c_values = engine.group_sums(p.native, sources, factor)
        if len(c_node) <= MAX_CELLS or mode_slices <= 20 * factor:
            break
        factor *= 2
    if p.view.weights == "count":
        c_values = array("Q", (v * p.interval_ticks for v in c_values))
    first = min(st_slice, default=0)
    last = max(st_slice, default=0)
    nslices = last - first + 1  # the timeline's, with any slice that has no samples

    # The trie of the stacks seen, numbered again with parents before children.
    order = TrieOrder(p.parents)
    width = len(modes)
    factor *= ratio  # now fine slices to a cell's slice
    base = first // factor
    out_cells: dict[str, list[int]] = {
        "s": [sl - base for sl in c_slice],
        "t": c_thread.tolist(),
        "n": [order.add(node) for node in c_node],
        **{m: c_values[i::width].tolist() for i, m in enumerate(modes)},
    }
    # Per thread, its states over the slices it has samples in: [first slice, wall, gil,
    # cpu, wait], each list from that slice on (a short-lived thread costs a few slices).
    spans: dict[int, list[int]] = {}
    for sl, th in zip(st_slice, st_thread):
        lo_hi = spans.get(th)
        spans[th] = [sl, sl] if lo_hi is None else [min(lo_hi[0], sl), max(lo_hi[1], sl)]
    out_states: dict[str, list[Any]] = {}
    for th, (lo, hi) in spans.items():
        out_states[str(th)] = [lo - first] + [[0] * (hi - lo + 1) for _ in range(4)]
    samples: dict[int, int] = {}
    for i, (sl, th) in enumerate(zip(st_slice, st_thread)):
        per = out_states[str(th)]
        at = sl - first - per[0]
        for j in range(4):
            per[j + 1][at] += st_values[i * 5 + j]
        samples[th] = samples.get(th, 0) + st_values[i * 5 + 4]
    threads = [{"ref": ref, "label": p.thread_label(ref), "samples": samples.get(ref, 0)}
               for ref in p.thread_refs()]
    keys: dict[Any, int] = {}
    key_of = [keys.setdefault(p.key(p.frames[n]) if n else NO_STACK, len(keys))
              for n in order.nodes]
    md = p.metadata
    wait_unknown = gil_wait_unknown(md)
    if wait_unknown is not None:
        # A recording that cannot know GIL waits has none to draw: its status bits say
        # nothing (the legend and the gil-wait mode say why instead).
        for per in out_states.values():
            per[4] = [0] * len(per[4])
    return {
        "psrec": __version__,
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
        "slices": nslices,
        # A timeline slice a (from 0) is in cell slice (a + cell_offset) // cell_factor.
        "cell_factor": factor,
        "cell_offset": first % factor,
        "mode": p.view.mode,
        "weights": p.view.weights,
        "interval_ticks": p.interval_ticks,
        "by": p.view.by,
        "samples": p.selected,
        "threads": threads,
        "states": out_states,
        "keys": [[k.name, k.filename, k.line] for k in keys],
        "parent": order.parent,
        "key": key_of,
        "cells": out_cells,
        "modes": modes,
        "mode_help": {m: MODE_HELP[m] for m in modes},
    }


def _health(p: Profile) -> dict[str, Any]:
    """How well the sampler kept up, for the page's header: the rate asked for, the rate
    achieved (sampling passes over the recording's span, from the file's chunk index, the
    same count `psrec info` gives), the passes that missed their deadline and the samples
    that could not be read, in the window the page shows."""
    lo, hi = p.extent
    passes = None
    try:
        with open_recording(p.path) as rec:
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
    return {"requested_hz": rate if isinstance(rate, (int, float)) else None,
            "achieved_hz": achieved, "missed_deadlines": missed,
            "sample_errors": p.sample_errors}


_SCRIPT_SAFE = {ord(c): f"\\u{ord(c):04x}" for c in "<>&\u2028\u2029"}


def render(data: dict[str, Any], template: str = "report.html",
           script: str = "report.js") -> str:
    """A page: an HTML template with the shared style and scripts, its own script and its data
    inline (no network at view time)."""
    page = (ASSETS / template).read_text(encoding="utf-8")
    # Names come from the profiled program: "</script" would end the element early and
    # "<!--<script" would make the parser swallow the rest of the page. With <, > and & written
    # as JSON escapes no name can change how the page parses, and each parses back the same.
    # (U+2028 and U+2029 too, which some JavaScript parsers take for line ends.)
    blob = json.dumps(data, separators=(",", ":")).translate(_SCRIPT_SAFE)
    title = data["title"].replace("&", "&amp;").replace("<", "&lt;")
    code = "\n".join((ASSETS / name).read_text(encoding="utf-8") for name in ("common.js", script))
    # The data goes in last, so that nothing in it is taken for a placeholder.
    return (page.replace("<!--TITLE-->", title)
            .replace("/*STYLE*/", (ASSETS / "report.css").read_text(encoding="utf-8"))
            .replace("/*SCRIPT*/", code)
            .replace("/*DATA*/", blob))


@register
class HtmlReporter(Reporter):
    name = "html"
    description = ("an HTML page with everything inline: each thread's GIL and CPU states "
                   "over time, and a flame graph and function table of any window")
    suffix = ".html"
    slice_count = SLICES // STATE_SLICES

    def also(self, profile_mode: str) -> tuple[str, ...]:
        return tuple(m for m in MODES if m != profile_mode) + STATE_NAMES

    def write(self, profile: Profile, out: IO[Any]) -> str | None:
        data = page_data(profile)
        page = render(data)
        out.write(page)
        return (f"{len(data['threads'])} threads, {len(data['parent']):,} stack nodes, "
                f"{len(data['cells']['n']):,} cells, {math.ceil(len(page) / 1024):,} KiB")
