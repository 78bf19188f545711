"""The analyzer's engine: one object per profile, created once (``engine_for``) as it loads,
that reads the recording's samples and does the analyzer's work on them: samples summed by
(time slice, thread, stack) (``accumulator``), per-thread timelines (``timeline``), cells
summed again (``group_sums``) and the walks over stacks by report key (``walks``, walks.py).

Two implementations satisfy one protocol (Engine): NativeEngine, the native engine
(analyzer/native/, bound as psrec.analyzer._engine) over the native codec's batches, and
PyEngine, which follows the same rules in Python (pyengine.py, walks.py's Python twins) where
it cannot be loaded, and is what the native one is tested against. A Profile gets its engine
when it loads (``Profile.engine``): the reporters, the page and the API ask it, and never
choose an implementation; only ``engine_for`` does.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from psrec.format import native_available

from .model import Column, Runs, Selection, Stacks
from .pyengine import PyAccumulator, PyTimeline
from .walks import NativeWalks, PyWalks, Walks

if TYPE_CHECKING:
    from psrec.format import MergedRecording, Recording, SampleStream
    from psrec.format.merged import MergedStream

__all__ = ["Accumulator", "Engine", "NativeEngine", "NativeRuns", "PyEngine", "Runs",
           "Timeline", "engine_for", "timeline_of"]

_engine: Any
try:
    from . import _engine as _built

    _engine = _built
except ImportError:  # a source tree without the built module
    _engine = None

# Cells summed again: their slice, thread and node columns, and their sums (see group_sums).
Groups = tuple[Column, Column, Column, Column]
# The columns of one source of group_sums: slice, thread, node, value.
Source = tuple[Any, Any, Any, Any]


@runtime_checkable
class Accumulator(Protocol):
    """Sums the samples a selection counts by (slice, thread, node): batch after batch
    (``add``), then ``columns()``: the cells' slice, thread, node, samples, weight, cpu, gil
    and on_cpu columns (model.CellColumns' order)."""

    def add(self, batch: Any) -> None: ...

    def columns(self) -> tuple[Column, ...]: ...

    @property
    def selected(self) -> int:
        """The samples counted."""

    @property
    def first_ts(self) -> int:
        """The first and last counted samples' times (-1: none)."""

    @property
    def last_ts(self) -> int: ...

    @property
    def slice_overflow(self) -> bool:
        """Samples more than 2^31 slices apart were found."""


@runtime_checkable
class Timeline(Protocol):
    """Each thread's selected samples in time order, as runs: batch after batch (``add``),
    then ``result()`` (no add after it)."""

    def add(self, batch: Any) -> None: ...

    def result(self) -> Mapping[int, Runs]: ...


@runtime_checkable
class Engine(Protocol):
    """What the analyzer asks of its engine. Its implementations (NativeEngine, PyEngine)
    give equal answers (tests/unit: test_analyzer_reports, test_outputs_agree)."""

    name: str  # "native" or "python", for messages and tests
    # Its sums let go of the GIL: a read adds each batch to several of them at once.
    parallel: bool

    def stream(self, rec: Recording | MergedRecording, from_ts: int | None = None,
               to_ts: int | None = None) -> SampleStream | MergedStream:
        """The recording's samples (in a window's chunks), decoded as this engine reads
        them."""

    def thread_renames(self, rec: Recording | MergedRecording
                       ) -> list[tuple[int, int, int, int, int]]:
        """The THREAD_RENAME events of the recording's data chunks, found as stream()'s
        decoder finds them."""

    def accumulator(self, selection: Selection, *, slice_origin: int = 0,
                    slice_ticks: int = 0, by_node: bool = True) -> Accumulator:
        """Sums of the samples the selection counts, by (slice, thread, node): slices of
        slice_ticks from slice_origin (0: one slice), node 0 for all without by_node."""

    def timeline(self, selection: Selection, *, split_at_gaps: bool = False,
                 split_mask: int = 0) -> Timeline:
        """Per-thread timelines of the samples the selection counts (and the CPU view's
        others): split_at_gaps ends a run where a sample of its thread was left out,
        split_mask where those status bits change (each run keeps them)."""

    def group_sums(self, sources: list[Source], factor: int = 1,
                   by_node: bool = True) -> Groups:
        """Cells of several sources, each (slice, thread, node, value) columns, summed again
        by (slice // factor, thread, node), or (slice // factor, thread) without by_node (node
        0). Returns the groups' slice, thread and node columns in order of first appearance,
        and their sums, a row of one per source after another."""

    def walks(self, profile: Stacks) -> Walks:
        """The walks over the profile's stacks by report key."""


class NativeEngine:
    """The native engine, over the native codec's batches."""

    name = "native"
    parallel = True

    def __init__(self, module: Any = None) -> None:
        self._m = module if module is not None else _engine
        if self._m is None:
            raise RuntimeError("the native engine (psrec.analyzer._engine) is not built")

    def __repr__(self) -> str:
        return "<NativeEngine>"

    def stream(self, rec: Recording | MergedRecording, from_ts: int | None = None,
               to_ts: int | None = None) -> SampleStream | MergedStream:
        return rec.stream(from_ts, to_ts, native=True)

    def thread_renames(self, rec: Recording | MergedRecording
                       ) -> list[tuple[int, int, int, int, int]]:
        renames: list[tuple[int, int, int, int, int]] = rec.thread_renames(True)
        return renames

    def accumulator(self, selection: Selection, *, slice_origin: int = 0,
                    slice_ticks: int = 0, by_node: bool = True) -> Accumulator:
        acc: Accumulator = self._m.Accumulator(**selection.query(), slice_origin=slice_origin,
                                               slice_ticks=slice_ticks, by_node=by_node)
        return acc

    def timeline(self, selection: Selection, *, split_at_gaps: bool = False,
                 split_mask: int = 0) -> Timeline:
        return NativeTimeline(self._m.Timeline(**selection.query(),
                                               split_at_gaps=split_at_gaps,
                                               split_mask=split_mask))

    def group_sums(self, sources: list[Source], factor: int = 1,
                   by_node: bool = True) -> Groups:
        parts = self._m.group_sums([tuple(_u(c, t) for c, t in zip(src, "QIIQ"))
                                    for src in sources], max(1, factor), by_node)
        # Views of the bytes returned, not copies: the sums are a row of one per source
        # after another, and a copy doubled them at their peak.
        sl, th, node, values = parts
        return (memoryview(sl).cast("Q"), memoryview(th).cast("I"), memoryview(node).cast("I"),
                memoryview(values).cast("Q"))

    def walks(self, profile: Stacks) -> Walks:
        return NativeWalks(profile, self._m)


class PyEngine:
    """The engine in Python. decode: the codec its streams decode with (True: the native one,
    False: the Python one, None: the native one where it is built); the sums are Python's
    either way."""

    name = "python"
    parallel = False

    def __init__(self, decode: bool | None = False) -> None:
        self.decode = decode

    def __repr__(self) -> str:
        return f"<PyEngine decode={self.decode}>"

    def stream(self, rec: Recording | MergedRecording, from_ts: int | None = None,
               to_ts: int | None = None) -> SampleStream | MergedStream:
        return rec.stream(from_ts, to_ts, native=self.decode)

    def thread_renames(self, rec: Recording | MergedRecording
                       ) -> list[tuple[int, int, int, int, int]]:
        renames: list[tuple[int, int, int, int, int]] = rec.thread_renames(self.decode)
        return renames

    def accumulator(self, selection: Selection, *, slice_origin: int = 0,
                    slice_ticks: int = 0, by_node: bool = True) -> Accumulator:
        return PyAccumulator(selection, slice_origin, slice_ticks, by_node)

    def timeline(self, selection: Selection, *, split_at_gaps: bool = False,
                 split_mask: int = 0) -> Timeline:
        return PyTimeline(selection, split_at_gaps, split_mask)

    def group_sums(self, sources: list[Source], factor: int = 1,
                   by_node: bool = True) -> Groups:
        factor = max(1, factor)
        rows: dict[tuple[int, int, int], list[int]] = {}
        for i, (sl, th, node, value) in enumerate(sources):
            for key in zip(sl, th, node if by_node else [0] * len(sl), value):
                k = (key[0] // factor, key[1], key[2])
                row = rows.get(k)
                if row is None:
                    row = rows[k] = [0] * len(sources)
                row[i] += key[3]
        return (array("Q", (k[0] for k in rows)), array("I", (k[1] for k in rows)),
                array("I", (k[2] for k in rows)),
                array("Q", (v for r in rows.values() for v in r)))

    def walks(self, profile: Stacks) -> Walks:
        return PyWalks(profile)


def engine_for(native: bool | None = None) -> Engine:
    """The engine a profile uses, picked once: native True (the native engine; where it is
    not built, the Python one over the native codec, which must be), False (the Python one,
    and the Python codec), None (the native engine where it and the native codec are built,
    else the Python one over the codec there is)."""
    if native is False:
        return PyEngine(decode=False)
    if _engine is not None and (native or native_available()):
        return NativeEngine()
    return PyEngine(decode=native)


def timeline_of(engine: Engine, selection: Selection, fields: Mapping[str, Any]) -> Timeline:
    """A timeline of the selection's window and threads under the status filter that the
    query fields name (status_mask, status_value, cpu_view; none given: every sample), with
    their run options (split_at_gaps, split_mask): what Profile.load's `more_timelines` and an
    export's own timelines ask for."""
    return engine.timeline(
        selection.under(fields.get("status_mask", 0), fields.get("status_value", 0),
                        fields.get("cpu_view", False)),
        split_at_gaps=fields.get("split_at_gaps", False),
        split_mask=fields.get("split_mask", 0))


def _u(column: Any, typecode: str) -> Any:
    """A column the native engine reads in place (an array or a contiguous view), or a copy
    of one given as a list or a view with a step (every n-th value of a row of sums)."""
    if isinstance(column, array) or (isinstance(column, memoryview) and column.c_contiguous):
        return column
    return array(typecode, column)


class NativeTimeline:
    """The native Timeline, whose result() gives Runs of views of its own columns."""

    def __init__(self, timeline: Any) -> None:
        self._t = timeline

    def add(self, b: Any) -> None:
        self._t.add(b)

    def result(self) -> NativeRuns:
        # Views of the native columns: the timeline's memory is not copied. No add() after.
        return NativeRuns(self._t)


class NativeRuns(Mapping[int, Runs]):
    """Each thread's Runs of a native Timeline, by ref in ascending order: views of its
    columns, made when a thread's runs are asked for and let go with them. Held for every
    thread at once, a recording of 100,000 threads kept 600,000 views (3.5 KB a thread), and
    the collector went over them again and again as they were made."""

    def __init__(self, timeline: Any) -> None:
        self._t = timeline
        self._refs: list[int] = timeline.threads()  # ascending

    def __getitem__(self, ref: int) -> Runs:
        i = bisect_left(self._refs, ref)
        if i == len(self._refs) or self._refs[i] != ref:
            raise KeyError(ref)
        return Runs(*self._t.runs_view(ref))

    def __contains__(self, ref: object) -> bool:
        if not isinstance(ref, int):
            return False
        i = bisect_left(self._refs, ref)
        return i < len(self._refs) and self._refs[i] == ref

    def __iter__(self) -> Iterator[int]:
        return iter(self._refs)

    def __len__(self) -> int:
        return len(self._refs)
