"""The Python engine's sums: the native Accumulator's and Timeline's rules (analyzer/native/,
spec section 5) in Python, where the native engine cannot be loaded, and what it is tested
against. engine.py's PyEngine makes them; nothing else should.
"""

from __future__ import annotations

from array import array
from typing import Any

from psrec.format import constants as C

from .model import CELL_SUMS, CellColumns, Column, Runs, Selection

NONE, OWN, PREVIOUS = 0, 1, 2  # where a sample's CPU time goes (native: AccumulatorQuery::Cpu)


def known_on_cpu(status: int) -> bool:
    """Known to be on a CPU (native: AccumulatorQuery::onCpu)."""
    return bool(status & (C.STATUS_ON_CPU | C.STATUS_CPU_UNKNOWN) == C.STATUS_ON_CPU)


def fate(sel: Selection, ts: int, th: int, status: int, cpu: int,
         previous_on_cpu: bool, task: int = 0) -> tuple[bool, bool, int]:
    """(selected, counted, where its CPU time goes) of a sample under a selection: the native
    AccumulatorQuery::fate's rule (spec section 5). CPU time used between two samples goes to
    the earlier when this one is off a CPU and that one was on a CPU, else to this one; a view
    keeps it where it keeps that sample, and the CPU view also keeps that of a sample it does
    not count on its stack."""
    if not sel.selects(ts, th, task):
        return False, False, NONE
    counted = sel.counts(status)
    off_cpu = not status & (C.STATUS_ON_CPU | C.STATUS_CPU_UNKNOWN)
    if cpu and off_cpu and previous_on_cpu:
        return True, counted, PREVIOUS
    if counted:
        return True, True, OWN
    if sel.cpu_view and cpu:
        return True, False, OWN
    return True, False, NONE


# Where each sum is in a cell's list of sums (model.CELL_SUMS).
_SAMPLES, _WEIGHT, _CPU, _GIL, _ON_CPU = (
    [c.name for c in CELL_SUMS].index(name)
    for name in ("samples", "weight", "cpu", "gil", "on_cpu"))


class PyAccumulator:
    """Sums samples by (slice, thread, node) after a window, thread and status filter: the
    native Accumulator's rules in Python."""

    slice_overflow = False  # Python's slices are unbounded: MAX_SLICES bounds their rows

    def __init__(self, selection: Selection, slice_origin: int = 0, slice_ticks: int = 0,
                 by_node: bool = True) -> None:
        self.sel = selection
        self.by_node = by_node
        self.origin, self.slice_ticks = slice_origin, slice_ticks
        self._cells: dict[tuple[int, int, int], list[int]] = {}
        # thread -> (its previous selected sample was on a CPU, that sample's cell if counted)
        self._last: dict[int, tuple[bool, list[int] | None]] = {}
        self.selected = 0
        self.first_ts = -1
        self.last_ts = -1

    def add(self, b: Any) -> None:
        sel = self.sel
        for i in range(len(b.ts)):
            ts = b.ts[i]
            th = b.thread[i]
            st = b.status[i]
            cpu = b.cpu[i]
            on_cpu, previous = self._last.pop(th, (False, None))
            selected, counted, goes = fate(sel, ts, th, st, cpu, on_cpu, b.task[i])
            if not selected:
                continue
            if goes == PREVIOUS and previous is not None:
                previous[_CPU] += cpu
            now_on = known_on_cpu(st)
            if not counted and goes != OWN:
                self._last[th] = (now_on, None)
                continue
            # As the native one: 64-bit slices, and a time before the origin in slice 0.
            sl = max(0, ts - self.origin) // self.slice_ticks if self.slice_ticks > 0 else 0
            cell = self._cells.setdefault((sl, th, b.node[i] if self.by_node else 0),
                                          [0] * len(CELL_SUMS))
            self._last[th] = (now_on, cell if counted else None)
            if goes == OWN:
                cell[_CPU] += cpu
            if not counted:
                continue
            cell[_SAMPLES] += 1
            cell[_WEIGHT] += b.weight[i]
            cell[_GIL] += 1 if st & C.STATUS_GIL_HELD else 0
            cell[_ON_CPU] += 1 if st & C.STATUS_ON_CPU else 0
            self.selected += 1
            if self.first_ts < 0:
                self.first_ts = ts
            self.last_ts = ts

    def cells(self) -> list[tuple[int, ...]]:
        return [(*k, *v) for k, v in self._cells.items()]

    def columns(self) -> tuple[Column, ...]:
        """The cells as columns (slice, thread, node, samples, weight, cpu, gil, on_cpu), as
        the native Accumulator gives them."""
        return CellColumns.from_cells(self.cells()).columns()


class PyTimeline:
    """Per-thread timelines in Python: the native Timeline's rules."""

    def __init__(self, selection: Selection, split_at_gaps: bool = False,
                 split_mask: int = 0) -> None:
        self.sel = selection
        self.split_at_gaps = split_at_gaps
        self.split_mask = split_mask
        self.gap: set[int] = set()  # threads with a sample left out since their last run began
        self.on_cpu: set[int] = set()  # threads whose previous selected sample was on a CPU
        self.kept: set[int] = set()  # threads whose previous selected sample is in their last run
        # ref -> node, count, weight, cpu, first_ts, state columns
        self.runs: dict[int, tuple[array[int], array[int], array[int], array[int],
                                   array[int], array[int]]] = {}

    def add(self, b: Any) -> None:
        ts, th, nodes = b.ts, b.thread, b.node
        status, weight, cpus = b.status, b.weight, b.cpu
        sel = self.sel
        for i in range(len(b)):
            t = ts[i]
            ref = th[i]
            st = status[i]
            previous_on_cpu = ref in self.on_cpu
            previous_kept = ref in self.kept
            self.on_cpu.discard(ref)
            self.kept.discard(ref)
            selected, counted, goes = fate(sel, t, ref, st, cpus[i], previous_on_cpu,
                                           b.task[i])
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
