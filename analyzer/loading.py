"""Loading a Profile: the view's words resolved against the recording into a Selection (the
window in ticks, the threads by ref, the mode's status filter), and one pass over the
recording's samples that sums them into cells (and timelines) with the profile's engine.

``read`` gives the Profile's fields; Profile.load (profile.py) makes the Profile of them and
says what went wrong where nothing was selected (messages.py). This module imports neither.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any

from psrec.format import MergedRecording, Recording, open_recordings
from psrec.format import constants as C
from psrec.format.merged import Readable
from psrec.format.mixed_stacks import NATIVE_VIEWS
from psrec.format.reader import Definitions

from .engine import Accumulator, Engine, timeline_of
from .logical import LogicalStacks
from .model import CellColumns, Selection
from .view import (
    MODES,
    STATES,
    SelectionError,
    View,
    ViewUsageError,
    gil_wait_unknown,
    match_processes,
    match_sources,
    match_tasks,
    match_threads,
    to_ticks,
)

__all__ = ["GUESS_ROOM", "Loaded", "read", "resolve", "round_up"]


def resolve(view: View, rec: Readable, defs: Definitions, engine: Engine) -> Selection:
    """The samples the view selects in this recording: its --from and --to as ticks, its
    threads and processes as thread refs, its mode (one of MODES: ``read`` checks) as a
    status filter. Raises SelectionError (ViewUsageError) for words the recording cannot
    answer."""
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
    mode = view.mode_record
    if mode.since is not None:  # gil-wait: known where the target says so
        unknown = gil_wait_unknown(rec.metadata)
        if unknown is not None:
            raise SelectionError(f"{rec.path}: {unknown}",
                                 help="--mode gil shows which threads held the GIL")
    if view.logical and not defs.tasks:
        raise SelectionError(
            f"--logical: {rec.path} has no asyncio tasks (its program ran none, or it was "
            "recorded with --no-tasks)", help="leave out --logical: its stacks are as recorded")
    refs = match_threads(view.threads, rec, defs, engine) if view.threads else None
    if view.pids or view.processes:
        in_process = match_processes(view, rec, defs)
        refs = in_process if refs is None else [r for r in refs if r in set(in_process)]
    if view.hosts or view.recordings:
        in_source = set(match_sources(view, rec, defs))
        refs = list(in_source) if refs is None else [r for r in refs if r in in_source]
    tasks = tuple(match_tasks(view.tasks, rec, defs)) if view.tasks else None
    return Selection(from_ts, to_ts, None if refs is None else tuple(refs), mode.status_mask,
                     mode.status_value, mode.weighs_cpu, tasks)


@dataclass
class Loaded:
    """What one pass over a recording found: the Profile's fields, the samples it read
    (selected or not), and whether the accumulator found samples more than 2^31 slices
    apart."""

    fields: dict[str, Any]
    total: int
    slice_overflow: bool


def read(
    path: str | list[str] | Readable,
    view: View,
    engine: Engine,
    *,
    slice_ticks: int = 0,
    slice_seconds: float = 0.0,
    timelines: bool | str = False,
    also: tuple[str, ...] = (),
    slice_count: int = 0,
    more_timelines: dict[str, dict[str, Any]] | None = None,
    since_ts: int | None = None,
) -> Loaded:
    """Reads the recording once and sums the samples the view selects (Profile.load's
    arguments, which say what each asks for). A Recording already open is read as it is and
    left open (one refreshed as it grows: only its chunks from since_ts on are decoded)."""
    if view.mode not in MODES:  # before the file is opened
        *others, last = MODES
        raise SelectionError(f"unknown mode {view.mode!r}",
                             help=f"use {', '.join(others)} or {last}")
    if view.native not in NATIVE_VIEWS:
        raise SelectionError(f"unknown native frames view {view.native!r}",
                             help=f"use {', '.join(NATIVE_VIEWS)}")
    opened = (nullcontext(path) if isinstance(path, (Recording, MergedRecording))
              else open_recordings(path))
    with opened as rec:
        defs = rec.definitions()
        selection = resolve(view, rec, defs, engine)
        if since_ts is not None and (selection.from_ts or 0) < since_ts:
            selection = replace(selection, from_ts=since_ts)
        if slice_seconds > 0:
            slice_ticks = max(1, round(slice_seconds * 1e9 / rec.tick_ns))
        logical = (LogicalStacks.read(rec, defs, engine, selection.from_ts, selection.to_ts)
                   if view.logical else None)
        args = (rec, defs, view, selection, engine, timelines, also, more_timelines or {},
                logical)
        if slice_count > 0 and slice_ticks <= 0:
            slice_ticks = _slice_for(rec, selection, slice_count, engine)
            try:
                return _read(*args, slice_ticks, guess=slice_count)
            except _WrongGuess as wrong:
                slice_ticks = _ticks_for(wrong.lo, wrong.hi, slice_count)
        return _read(*args, slice_ticks)


def _read(
    rec: Readable,
    defs: Definitions,
    view: View,
    selection: Selection,
    engine: Engine,
    want_timelines: bool | str,
    also: tuple[str, ...],
    more_timelines: dict[str, dict[str, Any]],
    logical: LogicalStacks | None,
    slice_ticks: int,
    guess: int = 0,
) -> Loaded:
    """guess > 0: slice_ticks are meant for about that many slices, and the read stops
    with _WrongGuess where the samples span GUESS_ROOM times more or fewer."""
    from_ts, to_ts = selection.from_ts, selection.to_ts
    stream = engine.stream(rec, from_ts, to_ts)
    acc = engine.accumulator(selection, slice_ticks=slice_ticks)
    timeline = None
    if want_timelines:
        timeline = engine.timeline(selection, split_at_gaps=want_timelines == "split")
    # the view's window and threads, under each named timeline's own filter
    named = {name: timeline_of(engine, selection, fields)
             for name, fields in more_timelines.items()}
    others: dict[str, Accumulator] = {}
    also_slices = {}
    # A recording that cannot know GIL waits has none: the filters that select waiting
    # samples are not summed (each costs a pass over every sample).
    no_waits = gil_wait_unknown(rec.metadata) is not None
    for name in also:
        mask, value, cpu_view, by_node = STATES[name]
        also_slices[name] = slice_ticks
        if no_waits and value & C.STATUS_GIL_REQUESTED_KNOWN:
            continue
        others[name] = engine.accumulator(selection.under(mask, value, cpu_view),
                                          slice_ticks=slice_ticks, by_node=by_node)
    total = 0
    seen = (-1, -1)  # the span of the chunks read so far
    sums = [acc, *([timeline] if timeline is not None else []), *named.values(),
            *others.values()]
    with _Adder(sums, engine.parallel) as add:
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
            if logical is not None:
                logical.rewrite(batch)
            add(batch)

    if guess and seen[0] >= 0:
        lo, hi = _within(seen, from_ts, to_ts)
        if (hi >= lo and ((hi - lo) // slice_ticks + 1) * GUESS_ROOM < guess
                and _ticks_for(lo, hi, guess) < slice_ticks):
            raise _WrongGuess(lo, hi)
    columns = CellColumns(*acc.columns())
    events = list(stream.events)
    defs.apply_renames(events + stream.outside_renames)
    fields = dict(
        path=rec.path,
        sources=rec.sources if isinstance(rec, MergedRecording) else [],
        inputs=rec.given if isinstance(rec, MergedRecording) else rec.path,
        metadata=rec.metadata,
        tick_ns=rec.tick_ns,
        interval_ticks=rec.interval_ticks,
        created_wall_ns=rec.header.created_wall_ns,
        defs=defs,
        view=view,
        selection=selection,
        parents=stream.decoder.trie_parents() if logical is None else logical.parents,
        frames=stream.decoder.trie_frames() if logical is None else logical.frames,
        columns=columns,
        threads=dict(defs.threads),
        selected=acc.selected,
        first_ts=acc.first_ts,
        last_ts=acc.last_ts,
        extent=_extent(rec, stream),
        cpu_weighted=view.mode_record.weighs_cpu and any(columns.cpu),
        slice_ticks=slice_ticks,
        timelines=timeline.result() if timeline is not None else None,
        events=events,
        sample_errors=stream.errors,
        warnings=list(rec.warnings),
        engine=engine,
        also={name: CellColumns(*others[name].columns()) if name in others
              else CellColumns.from_cells([]) for name in also},
        also_slices=also_slices,
        more_timelines={name: t.result() for name, t in named.items()},
        logical=logical,
    )
    return Loaded(fields, total, acc.slice_overflow)


class _Adder:
    """Adds each batch to every accumulator and timeline of a read, in order: at once, on
    threads of their own, where the engine's sums let go of the GIL (each pass over a batch of
    millions of samples takes a CPU), else one after another."""

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


# Auto slices come from the index's times where it has them, else from the first chunk with
# samples (its span, times the data chunks): the read starts over with slices of the
# samples' whole span where they span GUESS_ROOM times more or fewer slices than asked.
GUESS_ROOM = 4


class _WrongGuess(Exception):
    """The samples span far more or fewer slices than were asked."""

    def __init__(self, lo: int, hi: int) -> None:
        super().__init__(lo, hi)
        self.lo, self.hi = lo, hi


def _slice_for(rec: Readable, selection: Selection, count: int, engine: Engine) -> int:
    """Slice ticks that cut the selection's span of the recording into about `count` slices:
    the span from the index where it says when its chunks' samples fall, else guessed from the
    first chunk with samples. (An index without times made slices of one tick: a cell per
    sample.)"""
    lo, hi = _index_extent(rec)
    if lo < 0:
        stream = engine.stream(rec)
        for _ in stream:
            first = stream.summaries[-1]
            if first["first_ts"] >= 0:
                lo = first["first_ts"]
                hi = lo + (first["last_ts"] - lo + rec.interval_ticks) * len(rec.data_chunks())
                break
    if selection.from_ts is not None:
        lo = max(lo, selection.from_ts)
    if selection.to_ts is not None:
        hi = min(hi, selection.to_ts)
    return _ticks_for(lo, hi, count)


def _ticks_for(lo: int, hi: int, count: int) -> int:
    """Slices that cut lo..hi into about `count` (at most; 1, 2 or 5 times a power of ten
    ticks, for round times)."""
    return max(1, int(round_up((hi - lo + 1) / count)))


def _within(span: tuple[int, int], from_ts: int | None, to_ts: int | None) -> tuple[int, int]:
    """A span of sample times cut to a window."""
    lo, hi = span
    return (lo if from_ts is None else max(lo, from_ts),
            hi if to_ts is None else min(hi, to_ts - 1))


def round_up(x: float) -> float:
    """x rounded up to 1, 2 or 5 times a power of ten."""
    if x <= 0:
        return 0.0
    p = 10.0 ** math.floor(math.log10(x))
    return next(m * p for m in (1, 2, 5, 10) if m * p >= x * (1 - 1e-12))


def _index_extent(rec: Readable) -> tuple[int, int]:
    """The first and last sample times of the recording by its index, or (-1, -1) where it
    has none or it gives no chunk's times."""
    spans = [(c.first_ts, c.last_ts) for c in rec.data_chunks() if c.passes] if rec.clean else []
    if not spans:
        return (-1, -1)
    return (min(a for a, _ in spans), max(b for _, b in spans))


def _extent(rec: Readable, stream: Any) -> tuple[int, int]:
    lo, hi = _index_extent(rec)
    if lo >= 0:
        return lo, hi
    # Without an index: the times of every chunk decoded so far (a recording read again as it
    # grows knows those of chunks an earlier read decoded), the stream's among them.
    spans = [(a, b) for a, b, passes in rec.spans.values() if passes and a >= 0]
    if not spans:
        return _decoded_extent(stream)
    return (min(a for a, _ in spans), max(b for _, b in spans))


def _decoded_extent(stream: Any) -> tuple[int, int]:
    """The first and last sample times of the chunks a stream decoded, or (-1, -1)."""
    spans = [(s["first_ts"], s["last_ts"]) for s in stream.summaries if s["first_ts"] >= 0]
    if not spans:
        return (-1, -1)
    return (min(a for a, _ in spans), max(b for _, b in spans))
