"""The Profile model: one pass over a recording, filtered by a view, aggregated once.

Every reporter and exporter consumes a Profile. Aggregated views read ``cells`` (samples summed
by slice, thread and stack node, so memory grows with distinct stacks, not samples); ordered
views (speedscope) read ``timelines`` (each thread's samples in time order, consecutive samples
with the same stack merged into runs).

Over 400 lines for a reason: the Profile is the one model every output reads. Its parts (the
one pass that loads it, the values of the view, stacks as report keys, the words that name
threads and the view) are short and use each other; what a view asks for and how its words are
read is in view.py, the walks over stacks in walks.py.
"""

from __future__ import annotations

import math
import os
from array import array
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Union

from psrec.format import Recording, ThreadInfo, open_recording
from psrec.format import constants as C
from psrec.format.reader import Definitions

from . import engine
from .engine import Runs
from .view import (
    MAX_SLICES,
    MODE_HELP,
    MODES,
    STATES,
    WEIGHTS,
    SelectionError,
    View,
    ViewUsageError,
    gil_wait_unknown,
    match_processes,
    match_threads,
    parse_duration,
    parse_time,
    processes,
    short_command,
    to_ticks,
)
from .walks import Walks, walks_of

__all__ = [
    "MODES",
    "NO_STACK",
    "WEIGHTS",
    "Cell",
    "CellColumns",
    "FrameKey",
    "Profile",
    "Runs",
    "SelectionError",
    "View",
    "ViewUsageError",
    "parse_duration",
    "parse_time",
]


class FrameKey(NamedTuple):
    """What a report groups by: a function (line = its first line) or a line of a function."""

    filename: str
    line: int
    name: str


NO_STACK = FrameKey("<psrec>", 0, "[no Python stack]")
TRUNCATED_KEY = FrameKey("<psrec>", 0, "[truncated stack]")


class Cell(NamedTuple):
    slice: int
    thread: int
    node: int
    samples: int
    weight: int  # ticks
    cpu: int  # CPU ticks
    gil: int  # samples holding the GIL
    on_cpu: int  # samples on a CPU


# A column of integers: an array, or a read-only view of the native engine's own memory.
Column = Union["array[int]", memoryview]


@dataclass
class CellColumns:
    """The cells as columns, for native aggregation over many cells (one per slice). From the
    native engine they are views of its memory, not copies."""

    slice: Column
    thread: Column
    node: Column
    samples: Column
    weight: Column
    cpu: Column
    gil: Column
    on_cpu: Column

    # Slices are 64-bit: a recording's timestamps span up to 2^63 ticks.
    TYPES = ("Q", "I", "I", "Q", "Q", "Q", "Q", "Q")

    @classmethod
    def from_native(cls, parts: tuple[memoryview, ...]) -> CellColumns:
        return cls(*parts)

    @classmethod
    def from_cells(cls, cells: list[tuple[int, ...]]) -> CellColumns:
        columns = list(zip(*cells)) or [()] * len(cls.TYPES)
        return cls(*(array(t, values) for t, values in zip(cls.TYPES, columns)))

    def columns(self) -> tuple[Column, ...]:
        return (self.slice, self.thread, self.node, self.samples, self.weight, self.cpu,
                self.gil, self.on_cpu)

    def __len__(self) -> int:
        return len(self.node)

    def cells(self) -> list[Cell]:
        return list(map(Cell._make, zip(*self.columns())))


@dataclass
class Profile:
    path: str
    metadata: dict[str, Any]
    tick_ns: int
    interval_ticks: int
    created_wall_ns: int
    defs: Definitions
    view: View
    parents: Column  # the stack trie: a node's parent and innermost frame, by node
    frames: Column
    columns: CellColumns
    threads: dict[int, ThreadInfo]  # every thread of the recording, by ref
    selected_threads: list[int] | None  # refs the view selects; None: all
    from_ts: int | None
    to_ts: int | None
    selected: int  # samples in the view
    first_ts: int
    last_ts: int
    extent: tuple[int, int]  # first and last sample timestamps of the whole recording
    cpu_weighted: bool  # cpu mode on a recording that has CPU times
    slice_ticks: int = 0
    timelines: dict[int, Runs] | None = None
    events: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    sample_errors: int = 0
    warnings: list[str] = field(default_factory=list)
    _stacks: dict[int, tuple[int, ...]] = field(default_factory=dict, repr=False)
    _keys: dict[int, FrameKey] = field(default_factory=dict, repr=False)
    _node_keys: dict[int, tuple[FrameKey, ...]] = field(default_factory=dict, repr=False)
    _cells: list[Cell] | None = field(default=None, repr=False)
    native: bool = True  # the native engine does the work (where it is built)
    # The same samples summed under other status filters (STATES, by name): what a page that
    # switches between views, or draws each thread's states, needs from one decode.
    also: dict[str, CellColumns] = field(default_factory=dict)
    also_slices: dict[str, int] = field(default_factory=dict)  # their slice ticks
    # More timelines of the same samples, by name, each under its own status filter and run
    # options (Profile.load's `more_timelines`): what an export that draws states over time
    # needs from the same decode.
    more_timelines: dict[str, dict[int, Runs]] = field(default_factory=dict)
    _walks: Walks | None = field(default=None, repr=False)
    _several_processes: bool | None = field(default=None, repr=False)

    # -- building ------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        path: str,
        view: View | None = None,
        *,
        slice_ticks: int = 0,
        slice_seconds: float = 0.0,
        timelines: bool | str = False,
        native: bool | None = None,
        warn: Any = None,
        also: tuple[str, ...] = (),
        slice_count: int = 0,
        more_timelines: dict[str, dict[str, Any]] | None = None,
    ) -> Profile:
        """Reads the recording once and aggregates the samples the view selects.

        slice_seconds (or slice_ticks) > 0 keeps the cells per time slice, and slice_count > 0
        cuts the selected span into about that many slices (from the index's times, or a
        guess where it has none: the read starts over where it was far off, see GUESS_ROOM);
        timelines=True also keeps every selected thread's samples in time order (for
        speedscope), and timelines="split" ends a thread's run wherever the view left a sample
        of it out (for intervals); `also` sums the same samples under other status filters
        too (names of STATES, into ``Profile.also``; those of GIL waits are empty where the
        recording cannot know them); `more_timelines` keeps more timelines of the view's
        window and threads, by name, each with its own query fields (status_mask,
        status_value, cpu_view, split_at_gaps, split_mask), into ``Profile.more_timelines``.
        No view: every sample, weighted by time.
        """
        view = view or View()
        if view.mode not in MODES:
            raise SelectionError(f"unknown mode {view.mode!r}", help="use wall, cpu, gil or idle")
        with open_recording(path) as rec:
            if slice_count > 0 and slice_ticks <= 0 and slice_seconds <= 0:
                slice_ticks = _slice_for(rec, view, slice_count, native)
                try:
                    return cls._load(rec, view, slice_ticks, 0, timelines, native, warn,
                                     also, more_timelines or {}, guess=slice_count)
                except _WrongGuess as wrong:
                    slice_ticks = _ticks_for(wrong.lo, wrong.hi, slice_count)
            return cls._load(rec, view, slice_ticks, slice_seconds, timelines, native, warn,
                             also, more_timelines or {})

    @classmethod
    def _load(
        cls,
        rec: Recording,
        view: View,
        slice_ticks: int,
        slice_seconds: float,
        want_timelines: bool | str,
        native: bool | None,
        warn: Any,
        also: tuple[str, ...] = (),
        more_timelines: dict[str, dict[str, Any]] | None = None,
        guess: int = 0,
    ) -> Profile:
        """guess > 0: slice_ticks are meant for about that many slices, and the read stops
        with _WrongGuess where the samples span GUESS_ROOM times more or fewer."""
        tick_ns = rec.tick_ns
        defs = rec.definitions()
        if slice_seconds > 0:
            slice_ticks = max(1, round(slice_seconds * 1e9 / tick_ns))
        from_ts = to_ts = None
        if view.start is not None:
            from_ts = to_ticks(view.start, rec, "--from")
        if view.end is not None:
            to_ts = to_ticks(view.end, rec, "--to")
        if from_ts is not None and to_ts is not None and to_ts <= from_ts:
            raise ViewUsageError(
                f"--to ({view.end}) is not after --from ({view.start})",
                help="give a window whose end comes after its start",
            )
        if view.mode == "gil-wait":
            unknown = gil_wait_unknown(rec.metadata)
            if unknown is not None:
                raise SelectionError(f"{rec.path}: {unknown}",
                                     help="--mode gil shows which threads held the GIL")
        refs = match_threads(view.threads, rec, defs, native) if view.threads else None
        if view.pids or view.processes:
            in_process = match_processes(view, rec, defs)
            refs = in_process if refs is None else [r for r in refs if r in set(in_process)]

        mask, value = MODES[view.mode]
        stream = rec.stream(from_ts, to_ts, native=native)
        query: dict[str, Any] = {"status_mask": mask, "status_value": value, "threads": refs,
                                 "cpu_view": view.mode == "cpu"}
        if from_ts is not None:
            query["from_ts"] = from_ts
        if to_ts is not None:
            query["to_ts"] = to_ts
        acc = engine.accumulator(stream.native, slice_origin=0, slice_ticks=slice_ticks,
                                 **query)
        timeline = None
        if want_timelines:
            timeline = engine.timeline(stream.native, {**query, "split_at_gaps": (
                want_timelines == "split")})
        # the view's window and threads, under each named timeline's own filter
        named = {name: engine.timeline(stream.native, {
            "threads": refs, **{k: v for k, v in query.items() if k.endswith("_ts")},
            "status_mask": 0, "status_value": 0, **fields})
            for name, fields in (more_timelines or {}).items()}
        others = {}
        also_slices = {}
        # A recording that cannot know GIL waits has none: the filters that select waiting
        # samples are not summed (each costs a pass over every sample).
        no_waits = gil_wait_unknown(rec.metadata) is not None
        for name in also:
            mask, value, cpu_view, by_node = STATES[name]
            also_slices[name] = slice_ticks
            if no_waits and value & C.STATUS_GIL_REQUESTED_KNOWN:
                continue
            others[name] = engine.accumulator(
                stream.native, slice_origin=0, slice_ticks=slice_ticks, by_node=by_node,
                **{**query, "status_mask": mask, "status_value": value, "cpu_view": cpu_view})
        total = 0
        seen = (-1, -1)  # the span of the chunks read so far
        sums = [acc, *([timeline] if timeline is not None else []), *named.values(),
                *others.values()]
        with _Adder(sums, stream.native and engine.native() is not None) as add:
            for batch in stream:
                if guess and stream.summaries[-1]["first_ts"] >= 0:
                    a, b = stream.summaries[-1]["first_ts"], stream.summaries[-1]["last_ts"]
                    seen = (a if seen[0] < 0 else min(seen[0], a), max(seen[1], b))
                    lo, hi = _within(seen, from_ts, to_ts)
                    if (hi - lo) // slice_ticks > GUESS_ROOM * guess:
                        for _ in stream:  # the rest, decoded only: the samples' whole span
                            pass
                        raise _WrongGuess(*_within(_decoded_extent(stream), from_ts, to_ts))
                total += len(batch)
                add(batch)

        if guess and seen[0] >= 0:
            lo, hi = _within(seen, from_ts, to_ts)
            if (hi >= lo and ((hi - lo) // slice_ticks + 1) * GUESS_ROOM < guess
                    and _ticks_for(lo, hi, guess) < slice_ticks):
                raise _WrongGuess(lo, hi)
        extent = _extent(rec, stream)
        columns = _columns(acc)
        prof = cls(
            path=rec.path,
            metadata=rec.metadata,
            tick_ns=tick_ns,
            interval_ticks=rec.interval_ticks,
            created_wall_ns=rec.header.created_wall_ns,
            defs=defs,
            view=view,
            parents=stream.decoder.trie_parents(),
            frames=stream.decoder.trie_frames(),
            columns=columns,
            threads=dict(defs.threads),
            selected_threads=refs,
            from_ts=from_ts,
            to_ts=to_ts,
            selected=acc.selected,
            first_ts=acc.first_ts,
            last_ts=acc.last_ts,
            extent=extent,
            cpu_weighted=view.mode == "cpu" and any(columns.cpu),
            slice_ticks=slice_ticks,
            timelines=timeline.result() if timeline is not None else None,
            events=list(stream.events),
            sample_errors=stream.errors,
            warnings=list(rec.warnings),
            native=bool(stream.native),
            also={name: _columns(others[name]) if name in others else CellColumns.from_cells([])
                  for name in also},
            also_slices=also_slices,
            more_timelines={name: t.result() for name, t in named.items()},
        )
        prof.defs.apply_renames(prof.events + stream.outside_renames)
        if warn is not None:
            for w in prof.warnings:
                warn(w)
        if prof.selected == 0:
            raise SelectionError(prof._nothing_selected(total), help=prof._nothing_help(total))
        if slice_ticks > 0:
            prof._check_slices(getattr(acc, "slice_overflow", False))
        return prof

    def _check_slices(self, overflow: bool) -> None:
        """The time-sliced views write a row for every slice from the earliest sample's to the
        latest's: their number is bounded by the samples' extent, and refused beyond
        MAX_SLICES (two samples years apart in a file of a few hundred bytes made 8M rows).
        overflow: the accumulator found samples more than 2^31 slices apart."""
        col = self.columns.slice
        if not col:
            return
        first, last = min(col), max(col)
        n = last - first + 1
        if n <= MAX_SLICES and not overflow:
            return
        span = self.seconds((last - first) * self.slice_ticks)
        least = _round_up(span / (MAX_SLICES - 1))
        rows = f"more than {2**31:,}" if overflow else f"{n:,}"
        raise ViewUsageError(
            f"--slices: slices of {self.seconds(self.slice_ticks):g} s would make {rows} rows "
            f"over the {span:,.3f} s the samples span, more than {MAX_SLICES:,}",
            help=f"give slices of at least {least:g} s, or a window with --from and --to",
        )

    def _window_text(self) -> str:
        a = "start" if self.from_ts is None else f"{self.seconds(self.from_ts):.3f} s"
        b = "end" if self.to_ts is None else f"{self.seconds(self.to_ts):.3f} s"
        return f"{a} .. {b}"

    def _nothing_selected(self, total: int) -> str:
        if total == 0 and self.from_ts is None and self.to_ts is None:
            return f"{self.path}: the recording holds no samples"
        first, last = self.extent
        if first >= 0 and (
            (self.from_ts is not None and self.from_ts > last)
            or (self.to_ts is not None and self.to_ts <= first)
        ):
            return (
                f"the window {self._window_text()} is outside the recording, whose samples run "
                f"from {self.seconds(first):.3f} s to {self.seconds(last):.3f} s"
            )
        parts = [f"mode {self.view.mode}"]
        if self.view.threads:
            parts.append("thread " + ", ".join(self.view.threads))
        if self.view.pids:
            parts.append("pid " + ", ".join(map(str, self.view.pids)))
        if self.view.processes:
            parts.append("process " + ", ".join(self.view.processes))
        if self.from_ts is not None or self.to_ts is not None:
            parts.append(f"window {self._window_text()}")
        return f"no samples match the selection ({'; '.join(parts)}) in {self.path}"

    def _nothing_help(self, total: int) -> str | None:
        if total == 0 and self.from_ts is None and self.to_ts is None:
            return "record for longer, or check that the target ran Python code"
        if self.view.mode != "wall":
            return "try --mode wall, or widen the window or the thread selection"
        return "widen the window or the thread selection (psrec info shows what the file holds)"

    @property
    def cells(self) -> list[Cell]:
        """Samples summed by slice, thread and stack node (made on first use)."""
        if self._cells is None:
            self._cells = self.columns.cells()
        return self._cells

    # -- values --------------------------------------------------------------------------
    def value(self, count: int, weight: int, cpu: int) -> int:
        """Estimated time, in ticks, of samples with these sums, under the view's weights."""
        if self.view.weights == "count":
            return count * self.interval_ticks
        if self.cpu_weighted:
            return cpu
        return weight

    def cell_value(self, c: Cell) -> int:
        return self.value(c.samples, c.weight, c.cpu)

    def seconds(self, ticks: float) -> float:
        return ticks * self.tick_ns / 1e9

    @property
    def total_value(self) -> int:
        col, mult = self.value_column()
        return sum(col) * mult

    def value_column(self) -> tuple[Column, int]:
        """The cell column that holds the view's values, and the factor it is multiplied by."""
        if self.view.weights == "count":
            return self.columns.samples, self.interval_ticks
        if self.cpu_weighted:
            return self.columns.cpu, 1
        return self.columns.weight, 1

    def thread_sums(self) -> dict[int, tuple[int, int]]:
        """Per thread ref: its selected samples and their estimated time in ticks."""
        col, mult = self.value_column()
        out: dict[int, list[int]] = {}
        for ref, n, v in zip(self.columns.thread, self.columns.samples, col):
            s = out.get(ref)
            if s is None:
                s = out[ref] = [0, 0]
            s[0] += n
            s[1] += v
        return {ref: (n, v * mult) for ref, (n, v) in out.items()}

    @property
    def unit_label(self) -> str:
        return "samples" if self.view.weights == "count" else "time"

    # -- stacks and names ----------------------------------------------------------------
    def stack(self, node: int) -> tuple[int, ...]:
        """Frame ids of a trie node's stack, root first."""
        s = self._stacks.get(node)
        if s is None:
            frames: list[int] = []
            n = node
            parents, fr = self.parents, self.frames
            while n:
                cached = self._stacks.get(n)
                if cached is not None:
                    frames.extend(reversed(cached))
                    break
                frames.append(fr[n])
                n = parents[n]
            s = tuple(reversed(frames))
            self._stacks[node] = s
        return s

    def key(self, frame_id: int) -> FrameKey:
        """The report key of a frame, by function or by line as the view asks."""
        k = self._keys.get(frame_id)
        if k is None:
            if frame_id == C.TRUNCATED_FRAME:
                k = TRUNCATED_KEY
            else:
                f = self.defs.frame(frame_id)
                fn = f.function
                line = f.line if self.view.by == "line" else fn.first_line
                k = FrameKey(fn.filename, line, fn.name)
            self._keys[frame_id] = k
        return k

    def leaf(self, node: int) -> FrameKey:
        """The report key of a stack's innermost frame (NO_STACK for the empty stack)."""
        return self.key(self.frames[node]) if node else NO_STACK

    def keys(self, node: int) -> tuple[FrameKey, ...]:
        """Report keys of a stack, root first; the empty stack is NO_STACK."""
        cache = self._node_keys
        ks = cache.get(node)
        if ks is not None:
            return ks
        if node == 0:
            ks = cache[0] = (NO_STACK,)
            return ks
        # A stack is its parent's plus one frame: walk up to the nearest known stack only.
        # Only the stack asked for is kept: keeping every prefix on the way cost memory in
        # the square of the depth (270 MB for one stack 8192 frames deep).
        chain = []
        n = node
        parents, frames = self.parents, self.frames
        while n and n not in cache:
            chain.append(self.key(frames[n]))
            n = parents[n]
        base: tuple[FrameKey, ...] = cache[n] if n else ()
        chain.reverse()
        ks = cache[node] = base + tuple(chain)
        return ks

    @property
    def walks(self) -> Walks:
        """The engine's walks over this profile's stacks by report key (totals, edges, slice
        sums, speedscope text): native unless the profile was loaded without it."""
        if self._walks is None:
            self._walks = walks_of(self, self.native)
        return self._walks

    def thread_label(self, ref: int) -> str:
        """'name (tid N)'; with more than one process (or program) in the recording, the
        thread's process and its command too."""
        t = self.threads.get(ref)
        if t is None:
            return f"thread ref {ref}"
        tid = t.os_tid or t.python_tid
        label = f"{t.name or 'thread'} (tid {tid}"
        if self._several_processes is None:  # once: a page labels thousands of threads
            self._several_processes = (len(processes(self.defs, self.metadata)) > 1
                                       or len({x.pid for x in self.threads.values()}) > 1)
        if self._several_processes:
            p = self.defs.process_of(t)
            label += f", pid {t.pid}"
            if p is not None and p.command:
                label += f": {short_command(p.command)}"
        return label + ")"

    def thread_refs(self) -> list[int]:
        """Threads with selected samples, in order of first appearance."""
        seen: dict[int, int] = {}
        for ref in dict.fromkeys(self.columns.thread):
            seen[ref] = self.threads[ref].start_ts if ref in self.threads else 0
        return sorted(seen, key=lambda r: (seen[r], r))

    @property
    def free_threaded(self) -> bool:
        """A free-threaded target: no GIL, and the GIL bit records 'attached' instead."""
        return bool((self.metadata.get("python_build") or {}).get("free_threaded"))

    def describe(self) -> str:
        """One line saying what the view holds, for report headers."""
        dur = self.seconds(self.last_ts - self.first_ts) if self.last_ts >= self.first_ts else 0
        nthreads = len(set(self.columns.thread))
        what = MODE_HELP[self.view.mode]
        if self.view.mode == "gil" and self.free_threaded:
            what = ("the GIL does not apply: a free-threaded target; samples attached to the "
                    "interpreter")
        s = (
            f"{self.path}: {self.selected:,} samples over {dur:.3f} s in {nthreads} "
            f"thread{'s' if nthreads != 1 else ''}; mode {self.view.mode} "
            f"({what}), weights {self.view.weights}"
        )
        if self.from_ts is not None or self.to_ts is not None:
            s += f", window {self._window_text()}"
        if self.view.mode == "cpu" and self.view.weights == "time" and not self.cpu_weighted:
            s += " (no CPU times recorded: on-CPU samples weighted by wall time)"
        return s


class _Adder:
    """Adds each batch to every accumulator and timeline of a read, in order: at once, on
    threads of their own, where the native engine sums (it lets go of the GIL, and each
    pass over a batch of millions of samples takes a CPU), else one after another."""

    def __init__(self, sums: list[Any], parallel: bool) -> None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
            os.cpu_count() or 1)
        self._sums = sums
        workers = min(len(sums), cpus)
        self._pool = ThreadPoolExecutor(workers) if parallel and workers > 1 else None

    def __call__(self, batch: Any) -> None:
        if self._pool is None:
            for s in self._sums:
                s.add(batch)
            return
        for done in [self._pool.submit(s.add, batch) for s in self._sums]:
            done.result()

    def __enter__(self) -> _Adder:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown()


def _columns(acc: Any) -> CellColumns:
    if hasattr(acc, "columns"):
        return CellColumns.from_native(acc.columns())
    return CellColumns.from_cells(acc.cells())


# Auto slices come from the index's times where it has them, else from the first chunk with
# samples (its span, times the data chunks): the read starts over with slices of the
# samples' whole span where they span GUESS_ROOM times more or fewer slices than asked.
GUESS_ROOM = 4


class _WrongGuess(Exception):
    """The samples span far more or fewer slices than were asked."""

    def __init__(self, lo: int, hi: int) -> None:
        super().__init__(lo, hi)
        self.lo, self.hi = lo, hi


def _slice_for(rec: Recording, view: View, count: int, native: bool | None) -> int:
    """Slice ticks that cut the view's span of the recording into about `count` slices: the
    span from the index where it says when its chunks' samples fall, else guessed from the
    first chunk with samples. (An index without times made slices of one tick: a cell per
    sample.)"""
    lo, hi = _index_extent(rec)
    if lo < 0:
        stream = rec.stream(native=native)
        for _ in stream:
            first = stream.summaries[-1]
            if first["first_ts"] >= 0:
                lo = first["first_ts"]
                hi = lo + (first["last_ts"] - lo + rec.interval_ticks) * len(rec.data_chunks())
                break
    if view.start is not None:
        lo = max(lo, to_ticks(view.start, rec, "--from"))
    if view.end is not None:
        hi = min(hi, to_ticks(view.end, rec, "--to"))
    return _ticks_for(lo, hi, count)


def _ticks_for(lo: int, hi: int, count: int) -> int:
    """Slices that cut lo..hi into about `count` (at most; 1, 2 or 5 times a power of ten
    ticks, for round times)."""
    return max(1, int(_round_up((hi - lo + 1) / count)))


def _within(span: tuple[int, int], from_ts: int | None, to_ts: int | None) -> tuple[int, int]:
    """A span of sample times cut to a window."""
    lo, hi = span
    return (lo if from_ts is None else max(lo, from_ts),
            hi if to_ts is None else min(hi, to_ts - 1))


def _round_up(x: float) -> float:
    """x rounded up to 1, 2 or 5 times a power of ten."""
    if x <= 0:
        return 0.0
    p = 10.0 ** math.floor(math.log10(x))
    return next(m * p for m in (1, 2, 5, 10) if m * p >= x * (1 - 1e-12))


def _index_extent(rec: Recording) -> tuple[int, int]:
    """The first and last sample times of the recording by its index, or (-1, -1) where it
    has none or it gives no chunk's times."""
    spans = [(c.first_ts, c.last_ts) for c in rec.data_chunks() if c.passes] if rec.clean else []
    if not spans:
        return (-1, -1)
    return (min(a for a, _ in spans), max(b for _, b in spans))


def _extent(rec: Recording, stream: Any) -> tuple[int, int]:
    lo, hi = _index_extent(rec)
    return (lo, hi) if lo >= 0 else _decoded_extent(stream)


def _decoded_extent(stream: Any) -> tuple[int, int]:
    """The first and last sample times of the chunks a stream decoded, or (-1, -1)."""
    spans = [(s["first_ts"], s["last_ts"]) for s in stream.summaries if s["first_ts"] >= 0]
    if not spans:
        return (-1, -1)
    return (min(a for a, _ in spans), max(b for _, b in spans))
