"""The analyzer's engine: samples summed by (time slice, thread, stack) and per-thread
timelines; the walks over stacks by report key that the reporters use are in walks.py.

The native engine (analyzer/native/, bound as psrec.analyzer._engine) does the work; the
Python classes here follow the same rules where it cannot be loaded, and are what the native
one is tested against. Both read the sample batches that psrec.format's SampleStream decodes.
A Profile picks one of each when it loads (``Profile.walks``): the reporters never ask which.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from psrec.format import constants as C

if TYPE_CHECKING:
    pass

_engine: Any
try:
    from . import _engine as _built

    _engine = _built
except ImportError:  # a source tree without the built module
    _engine = None


def native() -> Any:
    """The native engine module (StackKeys, key_totals, key_edges, slice_sums,
    SpeedscopeText, Accumulator, Timeline), or None where it is not built."""
    return _engine


def accumulator(use_native: bool, **query: Any) -> Any:
    """An accumulator for the query (window, threads, status filter, slices, CPU view)."""
    if use_native and _engine is not None:
        return _engine.Accumulator(**query)
    return PyAccumulator(**query)


def timeline(use_native: bool, query: dict[str, Any]) -> Any:
    """Per-thread timelines of the samples the query selects (slicing fields aside)."""
    if use_native and _engine is not None:
        return NativeTimeline(query)
    return PyTimeline(query)


def group_sums(use_native: bool, sources: list[tuple[Any, Any, Any, Any]], factor: int = 1,
               by_node: bool = True) -> tuple[array[int], array[int], array[int], array[int]]:
    """Cells of several sources, each (slice, thread, node, value) columns, summed again by
    (slice // factor, thread, node), or (slice // factor, thread) without by_node (node 0).
    Returns the groups' slice, thread and node columns in order of first appearance, and
    their sums, a row of one per source after another."""
    if use_native and _engine is not None:
        parts = _engine.group_sums([tuple(_u(c, t) for c, t in zip(src, "QIIQ"))
                                    for src in sources], max(1, factor), by_node)
        out = []
        for typecode, raw in zip("QIIQ", parts):
            a = array(typecode)
            a.frombytes(raw)
            out.append(a)
        return out[0], out[1], out[2], out[3]
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
            array("I", (k[2] for k in rows)), array("Q", (v for r in rows.values() for v in r)))


def _u(column: Any, typecode: str) -> Any:
    """A column the native engine reads in place (an array or a view of the engine's own
    memory), or a copy of one given as a list."""
    return column if isinstance(column, (array, memoryview)) else array(typecode, column)


@dataclass
class Runs:
    """One thread's selected samples in time order, consecutive equal stacks merged.

    Columns are arrays, or read-only memoryviews of the native timeline's own (no copy).
    """

    node: array[int] | memoryview
    count: array[int] | memoryview
    weight: array[int] | memoryview
    cpu: array[int] | memoryview
    first_ts: array[int] | memoryview
    # each run's status bits under the query's split_mask (a run ends where they change);
    # None: not kept (every run in one state)
    state: array[int] | memoryview | None = None

    def __len__(self) -> int:
        return len(self.node)


NONE, OWN, PREVIOUS = 0, 1, 2  # where a sample's CPU time goes (native: AccumulatorQuery::Cpu)


def known_on_cpu(status: int) -> bool:
    """Known to be on a CPU (native: AccumulatorQuery::onCpu)."""
    return bool(status & (C.STATUS_ON_CPU | C.STATUS_CPU_UNKNOWN) == C.STATUS_ON_CPU)


def fate(q: Any, ts: int, th: int, status: int, cpu: int,
         previous_on_cpu: bool) -> tuple[bool, bool, int]:
    """(selected, counted, where its CPU time goes) of a sample under a query with from_ts,
    to_ts, threads, mask, value and cpu_view: the native AccumulatorQuery::fate's rule (spec
    section 5). CPU time used between two samples goes to the earlier when this one is off a
    CPU and that one was on a CPU, else to this one; a view keeps it where it keeps that
    sample, and the CPU view also keeps that of a sample it does not count on its stack."""
    if ts < q.from_ts or ts >= q.to_ts or (q.threads is not None and th not in q.threads):
        return False, False, NONE
    counted = status & q.mask == q.value
    off_cpu = not status & (C.STATUS_ON_CPU | C.STATUS_CPU_UNKNOWN)
    if cpu and off_cpu and previous_on_cpu:
        return True, counted, PREVIOUS
    if counted:
        return True, True, OWN
    if q.cpu_view and cpu:
        return True, False, OWN
    return True, False, NONE


class PyAccumulator:
    """Sums samples by (slice, thread, node) after a window, thread and status filter: the
    native Accumulator's rules in Python."""

    def __init__(
        self,
        from_ts: int = -(1 << 63),
        to_ts: int = (1 << 63) - 1,
        threads: list[int] | None = None,
        status_mask: int = 0,
        status_value: int = 0,
        slice_origin: int = 0,
        slice_ticks: int = 0,
        cpu_view: bool = False,
        by_node: bool = True,
    ) -> None:
        self.by_node = by_node
        self.from_ts, self.to_ts = from_ts, to_ts
        self.threads = None if threads is None else set(threads)
        self.mask, self.value = status_mask, status_value
        self.origin, self.slice_ticks = slice_origin, slice_ticks
        self.cpu_view = cpu_view
        self._cells: dict[tuple[int, int, int], list[int]] = {}
        # thread -> (its previous selected sample was on a CPU, that sample's cell if counted)
        self._last: dict[int, tuple[bool, list[int] | None]] = {}
        self.selected = 0
        self.first_ts = -1
        self.last_ts = -1

    def add(self, b: Any) -> None:
        for i in range(len(b.ts)):
            ts = b.ts[i]
            th = b.thread[i]
            st = b.status[i]
            cpu = b.cpu[i]
            on_cpu, previous = self._last.pop(th, (False, None))
            selected, counted, goes = fate(self, ts, th, st, cpu, on_cpu)
            if not selected:
                continue
            if goes == PREVIOUS and previous is not None:
                previous[2] += cpu
            now_on = known_on_cpu(st)
            if not counted and goes != OWN:
                self._last[th] = (now_on, None)
                continue
            # As the native one: 64-bit slices, and a time before the origin in slice 0.
            sl = max(0, ts - self.origin) // self.slice_ticks if self.slice_ticks > 0 else 0
            cell = self._cells.setdefault((sl, th, b.node[i] if self.by_node else 0),
                                          [0, 0, 0, 0, 0])
            self._last[th] = (now_on, cell if counted else None)
            if goes == OWN:
                cell[2] += cpu
            if not counted:
                continue
            cell[0] += 1
            cell[1] += b.weight[i]
            cell[3] += 1 if st & C.STATUS_GIL_HELD else 0
            cell[4] += 1 if st & C.STATUS_ON_CPU else 0
            self.selected += 1
            if self.first_ts < 0:
                self.first_ts = ts
            self.last_ts = ts

    def cells(self) -> list[tuple[int, ...]]:
        return [(*k, *v) for k, v in self._cells.items()]


class PyTimeline:
    """Per-thread timelines in Python: the native Timeline's rules."""

    def __init__(self, query: dict[str, Any]) -> None:
        self.from_ts = query.get("from_ts", -(1 << 63))
        self.to_ts = query.get("to_ts", (1 << 63) - 1)
        t = query.get("threads")
        self.threads = None if t is None else set(t)
        self.mask, self.value = query["status_mask"], query["status_value"]
        self.cpu_view = query.get("cpu_view", False)
        self.split_at_gaps = query.get("split_at_gaps", False)
        self.split_mask = query.get("split_mask", 0)
        self.gap: set[int] = set()  # threads with a sample left out since their last run began
        self.on_cpu: set[int] = set()  # threads whose previous selected sample was on a CPU
        self.kept: set[int] = set()  # threads whose previous selected sample is in their last run
        # ref -> node, count, weight, cpu, first_ts, state columns
        self.runs: dict[int, tuple[array[int], array[int], array[int], array[int],
                                   array[int], array[int]]] = {}

    def add(self, b: Any) -> None:
        ts, th, nodes = b.ts, b.thread, b.node
        status, weight, cpus = b.status, b.weight, b.cpu
        for i in range(len(b)):
            t = ts[i]
            ref = th[i]
            st = status[i]
            previous_on_cpu = ref in self.on_cpu
            previous_kept = ref in self.kept
            self.on_cpu.discard(ref)
            self.kept.discard(ref)
            selected, counted, goes = fate(self, t, ref, st, cpus[i], previous_on_cpu)
            if selected and known_on_cpu(st):
                self.on_cpu.add(ref)
            if goes == PREVIOUS and previous_kept:
                self.runs[ref][3][-1] += cpus[i]
            if not counted and goes != OWN:
                if self.split_at_gaps:
                    self.gap.add(ref)
                continue
            cpu = cpus[i] if goes == OWN else 0
            n, w = (1, weight[i]) if counted else (0, 0)
            r = self.runs.get(ref)
            if r is None:
                r = self.runs[ref] = (array("I"), array("I"), array("Q"), array("Q"),
                                      array("q"), array("B"))
            r_node, r_count, r_weight, r_cpu, r_first, r_state = r
            node = nodes[i]
            state = st & self.split_mask
            if r_node and r_node[-1] == node and ref not in self.gap and r_state[-1] == state:
                r_count[-1] += n
                r_weight[-1] += w
                r_cpu[-1] += cpu
            else:
                r_node.append(node)
                r_count.append(n)
                r_weight.append(w)
                r_cpu.append(cpu)
                r_first.append(t)
                r_state.append(state)
                self.gap.discard(ref)
            if counted:
                self.kept.add(ref)

    def result(self) -> dict[int, Runs]:
        return {ref: Runs(*cols) for ref, cols in sorted(self.runs.items())}


class NativeTimeline:
    def __init__(self, query: dict[str, Any]) -> None:
        self._t = _engine.Timeline(**query)

    def add(self, b: Any) -> None:
        self._t.add(b)

    def result(self) -> dict[int, Runs]:
        # Views of the native columns: the timeline's memory is not copied. No add() after.
        return {ref: Runs(*self._t.runs_view(ref)) for ref in self._t.threads()}
