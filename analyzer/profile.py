"""The Profile model: a recording's samples under a view, read in one pass and summed once;
what every reporter and exporter reads.

Aggregated views read ``cells`` (samples summed by slice, thread and stack node, so memory
grows with distinct stacks, not samples); ordered views (speedscope) read ``timelines`` (each
thread's samples in time order, consecutive samples with the same stack merged into runs).
The engine that summed them (``engine``, engine.py) answers the rest (``walks``, group sums).

Here: the model's data and its queries (values under the view, stacks as report keys, the
words that name threads and the view). Reading the file is in loading.py, what a user is told
when a view selects nothing in messages.py, what a view asks for in view.py, the shared types
in model.py (re-exported here).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from psrec.format import ThreadInfo
from psrec.format.merged import Readable, Source, open_recordings, source_of
from psrec.format.mixed_stacks import marked_note
from psrec.format.reader import Definitions

from . import loading, messages
from .engine import Engine, engine_for
from .logical import LogicalStacks
from .model import (
    NO_STACK,
    TRUNCATED_KEY,
    Cell,
    CellColumns,
    Column,
    FrameKey,
    Runs,
    Selection,
)
from .stack_names import StackNames
from .view import (
    MODES,
    WEIGHTS,
    SelectionError,
    View,
    ViewUsageError,
    parse_duration,
    parse_time,
    processes,
    short_command,
)
from .walks import Walks

__all__ = [
    "MODES",
    "NO_STACK",
    "TRUNCATED_KEY",
    "WEIGHTS",
    "Cell",
    "CellColumns",
    "FrameKey",
    "Profile",
    "Runs",
    "Selection",
    "SelectionError",
    "View",
    "ViewUsageError",
    "parse_duration",
    "parse_time",
]


@dataclass
class Profile:
    path: str
    metadata: dict[str, Any]
    tick_ns: int
    interval_ticks: int
    created_wall_ns: int
    defs: Definitions
    view: View
    # The samples the view selects, as resolved against the recording (window in ticks,
    # thread refs, the mode's status filter): every read of them selects by it.
    selection: Selection
    parents: Column  # the stack trie: a node's parent and innermost frame, by node
    frames: Column
    columns: CellColumns
    threads: dict[int, ThreadInfo]  # every thread of the recording, by ref
    selected: int  # samples in the view
    first_ts: int
    last_ts: int
    extent: tuple[int, int]  # first and last sample timestamps of the whole recording
    cpu_weighted: bool  # cpu mode on a recording that has CPU times
    # The engine that summed the samples, and answers for them (engine.py): made once, by
    # Profile.load's `native`.
    engine: Engine = field(default_factory=engine_for, repr=False)
    slice_ticks: int = 0
    timelines: Mapping[int, Runs] | None = None
    events: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    sample_errors: int = 0
    warnings: list[str] = field(default_factory=list)
    _cells: list[Cell] | None = field(default=None, repr=False)
    # The same samples summed under other status filters (STATES, by name): what a page that
    # switches between views, or draws each thread's states, needs from one decode.
    also: dict[str, CellColumns] = field(default_factory=dict)
    also_slices: dict[str, int] = field(default_factory=dict)  # their slice ticks
    # More timelines of the same samples, by name, each under its own status filter and run
    # options (Profile.load's `more_timelines`): what an export that draws states over time
    # needs from the same decode.
    more_timelines: dict[str, Mapping[int, Runs]] = field(default_factory=dict)
    _walks: Walks | None = field(default=None, repr=False)
    # The view's logical stacks (View.logical): what rewrote the samples' stacks as they were
    # read, for any later read of the same samples to do the same (LogicalStacks.rewrite).
    logical: LogicalStacks | None = field(default=None, repr=False)
    _several_processes: bool | None = field(default=None, repr=False)
    # Several recordings read as one (psrec.format.merged): each one's Source, in the order
    # their ids were given (empty for one recording); and what was read (a file, a folder, or
    # files), to read again.
    sources: list[Source] = field(default_factory=list)
    inputs: str | list[str] = ""
    # How the stacks are named under the view (stack_names.py): made from the trie above.
    names: StackNames = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.names = StackNames(self.defs, self.parents, self.frames, self.view.by,
                                self.view.native)

    # -- building ------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        path: str | list[str] | Readable,
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
        since_ts: int | None = None,
    ) -> Profile:
        """Reads the recording once and aggregates the samples the view selects.

        slice_seconds (or slice_ticks) > 0 keeps the cells per time slice, and slice_count > 0
        cuts the selected span into about that many slices (from the index's times, or a
        guess where it has none: the read starts over where it was far off, see
        loading.GUESS_ROOM); timelines=True also keeps every selected thread's samples in time
        order (for speedscope), and timelines="split" ends a thread's run wherever the view
        left a sample of it out (for intervals); `also` sums the same samples under other
        status filters too (names of STATES, into ``Profile.also``; those of GIL waits are
        empty where the recording cannot know them); `more_timelines` keeps more timelines of
        the view's window and threads, by name, each with its own query fields (status_mask,
        status_value, cpu_view, split_at_gaps, split_mask), into ``Profile.more_timelines``.
        native: the engine (True: the native one, False: the one in Python, None: the native
        one where it is built), picked here once. No view: every sample, weighted by time.
        path may be several recordings (a list, or a folder): they are read as one
        (psrec.format.merged), each thread keeping its recording (``source_of``). It may be a
        Recording already open (it is left open); since_ts (ticks) leaves out
        what comes before it, and for a recording without an index (still being written,
        Recording.refresh) the chunks known to end before it are not read at all.
        """
        view = view or View()
        got = loading.read(path, view, engine_for(native), slice_ticks=slice_ticks,
                           slice_seconds=slice_seconds, timelines=timelines, also=also,
                           slice_count=slice_count, more_timelines=more_timelines,
                           since_ts=since_ts)
        prof = cls(**got.fields)
        if warn is not None:
            for w in prof.warnings:
                warn(w)
        if prof.selected == 0:
            sel = prof.selection
            raise SelectionError(
                messages.nothing_selected(prof.path, view, sel, prof.extent, got.total,
                                          prof.seconds),
                help=messages.nothing_help(view, sel, got.total))
        if prof.slice_ticks > 0:
            messages.check_slices(prof.columns.slice, prof.slice_ticks, prof.seconds,
                                  got.slice_overflow)
        return prof

    def open(self) -> Readable:
        """The recording (or recordings) read, open again: for an output that reads the
        samples once more."""
        return open_recordings(self.inputs or self.path)

    @property
    def output_base(self) -> str:
        """What a default output is named after: the recording (run.psr: run.html), the
        folder of recordings read (runs/: runs.html), or the first of several files read with
        how many more (a.psr b.psr c.psr: a+2.html)."""
        given = self.inputs or self.path
        if isinstance(given, str):
            return given.rstrip("/") or given
        return f"{given[0].removesuffix('.psr')}+{len(given) - 1}"

    def reads(self, path: str) -> bool:
        """Whether path is a recording this profile read (an output must not be written over
        it)."""
        given = self.inputs or self.path
        read = [f for s in self.sources for f in s.paths] or \
            ([given] if isinstance(given, str) else list(given))
        return os.path.abspath(path) in {os.path.abspath(str(f)) for f in read}

    def source_of(self, ref: int) -> Source | None:
        """The recording a thread came from, where several were read as one."""
        return source_of(self.sources, ref)

    # -- the selection -------------------------------------------------------------------
    @property
    def from_ts(self) -> int | None:
        """The window's start in ticks (inclusive; None: the recording's start)."""
        return self.selection.from_ts

    @property
    def to_ts(self) -> int | None:
        """The window's end in ticks (exclusive; None: the recording's end)."""
        return self.selection.to_ts

    @property
    def selected_threads(self) -> list[int] | None:
        """Refs of the threads the view selects; None: all."""
        t = self.selection.threads
        return None if t is None else list(t)

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
        """Frame ids of a trie node's stack, root first (StackNames.stack)."""
        return self.names.stack(node)

    def keys(self, node: int) -> tuple[FrameKey, ...]:
        """Report keys of a stack, root first (StackNames.keys)."""
        return self.names.keys(node)

    @property
    def walks(self) -> Walks:
        """The engine's walks over this profile's stacks by report key (totals, edges, slice
        sums, speedscope text), made once by the profile's engine."""
        if self._walks is None:
            self._walks = self.engine.walks(self)
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
        src = self.source_of(ref) if len(self.sources) > 1 else None
        if src is not None:
            label += f"; {src.host + ' ' if src.host else ''}{src.name}"
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

    def marked_samples(self) -> int:
        """The view's samples whose stack holds the marker of native frames not captured
        (StackNames.marked)."""
        return self.names.marked(zip(self.columns.node, self.columns.samples))

    def describe(self) -> str:
        """One line saying what the view holds, for report headers."""
        dur = self.seconds(self.last_ts - self.first_ts) if self.last_ts >= self.first_ts else 0
        nthreads = len(set(self.columns.thread))
        mode = self.view.mode_record
        what = mode.help
        if mode.free_threaded_help is not None and self.free_threaded:
            what = mode.free_threaded_help
        several = ""
        if len(self.sources) > 1:
            several = f" ({len(self.sources)} recordings)"
        elif self.sources:
            several = f" ({len(self.sources[0].paths)} files of one recording)"
        s = (
            f"{self.path}{several}: {self.selected:,} samples over {dur:.3f} s in {nthreads} "
            f"thread{'s' if nthreads != 1 else ''}; mode {self.view.mode} "
            f"({what}), weights {self.view.weights}"
        )
        if self.from_ts is not None or self.to_ts is not None:
            s += f", window {messages.window_text(self.selection, self.seconds)}"
        if mode.weighs_cpu and self.view.weights == "time" and not self.cpu_weighted:
            s += " (no CPU times recorded: on-CPU samples weighted by wall time)"
        if self.metadata.get("options", {}).get("native"):
            note = marked_note(self.marked_samples(), self.selected)
            if note:
                s += f"; {note}"
        return s
