"""The analyzer's engine: samples summed by (time slice, thread, stack), per-thread timelines,
and the walks over stacks by report key that the reporters and exporters use.

The native engine (analyzer/native/, bound as psrec.analyzer._engine) does the work; the
Python classes here follow the same rules where it cannot be loaded, and are what the native
one is tested against. Both read the sample batches that psrec.format's SampleStream decodes.
A Profile picks one of each when it loads (``Profile.walks``): the reporters never ask which.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from psrec.format import constants as C

if TYPE_CHECKING:
    from .profile import FrameKey, Profile

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

    def __len__(self) -> int:
        return len(self.node)


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
    ) -> None:
        self.from_ts, self.to_ts = from_ts, to_ts
        self.threads = None if threads is None else set(threads)
        self.mask, self.value = status_mask, status_value
        self.origin, self.slice_ticks = slice_origin, slice_ticks
        self.cpu_view = cpu_view
        self._cells: dict[tuple[int, int, int], list[int]] = {}
        self._on_cpu: dict[int, list[int]] = {}  # thread -> the cell of its previous sample
        self.selected = 0
        self.first_ts = -1
        self.last_ts = -1

    def add(self, b: Any) -> None:
        for i in range(len(b.ts)):
            ts = b.ts[i]
            th = b.thread[i]
            previous = self._on_cpu.pop(th, None)
            if ts < self.from_ts or ts >= self.to_ts:
                continue
            if self.threads is not None and th not in self.threads:
                continue
            st = b.status[i]
            counted = st & self.mask == self.value
            if not counted:
                # The CPU view (spec section 5): CPU time of a sample off the CPU goes to the
                # thread's previous sample if that one was kept on a CPU, else to its own
                # stack, not counted as a sample.
                if (not self.cpu_view or not b.cpu[i] or st & C.STATUS_CPU_UNKNOWN):
                    continue
                if previous is not None:
                    previous[2] += b.cpu[i]
                    continue
            # As the native one: 64-bit slices, and a time before the origin in slice 0.
            sl = max(0, ts - self.origin) // self.slice_ticks if self.slice_ticks > 0 else 0
            cell = self._cells.setdefault((sl, th, b.node[i]), [0, 0, 0, 0, 0])
            cell[2] += b.cpu[i]
            if not counted:
                continue
            if st & C.STATUS_ON_CPU:
                self._on_cpu[th] = cell
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
        self.on_cpu: set[int] = set()  # threads whose previous sample was kept on a CPU
        # ref -> node, count, weight, cpu, first_ts columns
        self.runs: dict[int, tuple[array[int], array[int], array[int], array[int],
                                   array[int]]] = {}

    def add(self, b: Any) -> None:
        ts, th, nodes = b.ts, b.thread, b.node
        status, weight, cpu = b.status, b.weight, b.cpu
        for i in range(len(b)):
            t = ts[i]
            ref = th[i]
            previous_on_cpu = ref in self.on_cpu
            self.on_cpu.discard(ref)
            if t < self.from_ts or t >= self.to_ts:
                continue
            if self.threads is not None and ref not in self.threads:
                continue
            counted = status[i] & self.mask == self.value
            if not counted:
                # The CPU view: as PyAccumulator does (spec/psr-format.md, section 5).
                if not self.cpu_view or not cpu[i] or status[i] & C.STATUS_CPU_UNKNOWN:
                    continue
                if previous_on_cpu:
                    self.runs[ref][3][-1] += cpu[i]
                    continue
            elif status[i] & C.STATUS_ON_CPU:
                self.on_cpu.add(ref)
            n, w = (1, weight[i]) if counted else (0, 0)
            r = self.runs.get(ref)
            if r is None:
                r = self.runs[ref] = (array("I"), array("I"), array("Q"), array("Q"),
                                      array("q"))
            r_node, r_count, r_weight, r_cpu, r_first = r
            node = nodes[i]
            if r_node and r_node[-1] == node:
                r_count[-1] += n
                r_weight[-1] += w
                r_cpu[-1] += cpu[i]
            else:
                r_node.append(node)
                r_count.append(n)
                r_weight.append(w)
                r_cpu.append(cpu[i])
                r_first.append(t)

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


# -- walks over stacks by report key ---------------------------------------------------------


class Totals:
    """Per report key: own and total (cumulative) sample counts and estimated ticks."""

    __slots__ = ("own", "own_count", "total", "total_count")

    def __init__(self) -> None:
        self.own_count = self.own = self.total_count = self.total = 0


# (caller key, callee key, samples with the callee innermost, their value, value of the
# samples the edge is on, counted once per stack)
Edge = tuple["FrameKey", "FrameKey", int, int, int]
# slice -> thread -> [samples, GIL-held, on-CPU]; slice -> leaf key -> own value
SliceSums = tuple[dict[int, dict[int, list[int]]], dict[int, dict["FrameKey", int]]]


def walks(profile: Profile, use_native: bool) -> Walks:
    """The walks over the profile's stacks, native where the engine is built and asked for."""
    if use_native and _engine is not None:
        return NativeWalks(profile)
    return PyWalks(profile)


class PyWalks:
    """Walks over stacks by report key in Python: the native walks' rules.

    The node columns (nodes, counts, values) give each stack node's samples and value once.
    """

    def __init__(self, profile: Profile) -> None:
        self._p = profile

    def totals(self, nodes: Iterable[int], counts: Iterable[int], values: Iterable[int]
               ) -> dict[FrameKey, Totals]:
        """Own and total sums per key; a key that is several times on one stack (recursion)
        counts once for it."""
        out: dict[FrameKey, Totals] = defaultdict(Totals)
        for node, count, value in zip(nodes, counts, values):
            keys = self._p.keys(node)
            leaf = out[keys[-1]]
            leaf.own_count += count
            leaf.own += value
            for k in set(keys):
                t = out[k]
                t.total_count += count
                t.total += value
        return {k: t for k, t in out.items() if t.total_count or t.total}

    def edges(self, nodes: Iterable[int], counts: Iterable[int], values: Iterable[int]
              ) -> list[Edge]:
        sums: dict[tuple[FrameKey, FrameKey], list[int]] = {}
        for node, count, value in zip(nodes, counts, values):
            keys = self._p.keys(node)
            if len(keys) < 2:
                continue
            for edge in set(zip(keys, keys[1:])):
                sums.setdefault(edge, [0, 0, 0])[2] += value
            e = sums[(keys[-2], keys[-1])]
            e[0] += count
            e[1] += value
        return [(a, b, n, own, cum) for (a, b), (n, own, cum) in sums.items()]

    def slice_sums(self) -> SliceSums:
        p = self._p
        per: dict[int, dict[int, list[int]]] = defaultdict(dict)
        own: dict[int, dict[FrameKey, int]] = defaultdict(lambda: defaultdict(int))
        for cell in p.cells:
            a = per[cell.slice].setdefault(cell.thread, [0, 0, 0])
            a[0] += cell.samples
            a[1] += cell.gil
            a[2] += cell.on_cpu
            own[cell.slice][p.leaf(cell.node)] += p.cell_value(cell)
        return per, own

    def speedscope_text(self) -> PySpeedscopeText:
        return PySpeedscopeText(self._p)


class NativeWalks:
    """Walks over stacks by report key in the native engine: the trie's frames are mapped to
    key ids once (StackKeys), and every walk runs over those."""

    def __init__(self, profile: Profile) -> None:
        from .profile import NO_STACK

        self._p = profile
        key_list = [NO_STACK]
        index = {NO_STACK: 0}
        node_frames = profile.frames
        ids = set(node_frames)
        # Frame ids are dense in a sound file: a table by id. An id far past them (a frame no
        # record defines) would make that table huge (16 GiB for id 2^32 - 1): the trie's
        # frames are then renumbered by their order among the ids.
        top = max(ids, default=0)
        if top > len(profile.defs.frames) + len(ids):
            order: dict[int, int] | None = {fid: i for i, fid in enumerate(ids)}
            assert order is not None
            node_frames = array("I", map(order.__getitem__, node_frames))
            size = len(ids)
        else:
            order = None
            size = top + 1
        frame_key = array("I", bytes(4 * size))
        for fid in ids:
            k = profile.key(fid)
            i = index.get(k)
            if i is None:
                i = index[k] = len(key_list)
                key_list.append(k)
            frame_key[fid if order is None else order[fid]] = i
        self._sk = _engine.StackKeys(profile.parents, node_frames, frame_key, 0)
        self._keys = key_list

    def totals(self, nodes: array[int], counts: array[int], values: array[int]
               ) -> dict[FrameKey, Totals]:
        cols = [array("Q", b) for b in _engine.key_totals(self._sk, nodes, counts, values)]
        out: dict[FrameKey, Totals] = {}
        for i, (own_count, own, total_count, total) in enumerate(zip(*cols)):
            if total_count or total:
                t = out[self._keys[i]] = Totals()
                t.own_count, t.own, t.total_count, t.total = own_count, own, total_count, total
        return out

    def edges(self, nodes: array[int], counts: array[int], values: array[int]) -> list[Edge]:
        e = _engine.key_edges(self._sk, nodes, counts, values)
        caller, callee = array("I", e[0]), array("I", e[1])
        count, own, cum = (array("Q", b) for b in e[2:])
        keys = self._keys
        return [(keys[a], keys[b], n, o, c)
                for a, b, n, o, c in zip(caller, callee, count, own, cum)]

    def slice_sums(self) -> SliceSums:
        p = self._p
        c = p.columns
        value, mult = p.value_column()
        parts = _engine.slice_sums(self._sk, c.slice, c.thread, c.node, c.samples, c.gil,
                                   c.on_cpu, value, mult)
        t_slice, key_slice = (array("Q", parts[i]) for i in (0, 5))  # slices are 64-bit
        t_ref, key = (array("I", parts[i]) for i in (1, 6))
        count, gil, on_cpu, val = (array("Q", parts[i]) for i in (2, 3, 4, 7))
        per: dict[int, dict[int, list[int]]] = defaultdict(dict)
        own: dict[int, dict[FrameKey, int]] = defaultdict(lambda: defaultdict(int))
        for sl, ref, n, g, o in zip(t_slice, t_ref, count, gil, on_cpu):
            per[sl][ref] = [n, g, o]
        for sl, k, v in zip(key_slice, key, val):
            own[sl][self._keys[k]] += v
        return per, own

    def speedscope_text(self) -> NativeSpeedscopeText:
        return NativeSpeedscopeText(_engine.SpeedscopeText(self._sk), self._keys)


Walks = Union[PyWalks, NativeWalks]


class NativeSpeedscopeText:
    """One thread's speedscope samples and weights as text, made natively in pieces of
    bounded size; frames are numbered by first use across the threads set so far."""

    def __init__(self, text: Any, keys: list[FrameKey]) -> None:
        self._t = text
        self._keys = keys

    def set_thread(self, runs: Runs, value: str, count_mult: int, scale: int) -> None:
        """value: 'count' (count x count_mult), 'cpu' or 'weight'; every value x scale."""
        self._t.set_thread(runs.node, runs.count, runs.weight, runs.cpu, runs.first_ts, value,
                           count_mult, scale)

    @property
    def kept(self) -> int:
        """Runs that stand for some time (the others are left out)."""
        return int(self._t.kept)

    @property
    def total(self) -> int:
        return int(self._t.total)

    @property
    def samples(self) -> int:
        return int(self._t.samples)

    @property
    def start(self) -> int:
        return int(self._t.start)

    def samples_chunk(self, max_bytes: int) -> str:
        return str(self._t.samples_chunk(max_bytes))

    def weights_chunk(self, max_bytes: int) -> str:
        return str(self._t.weights_chunk(max_bytes))

    def frame_keys(self) -> list[FrameKey]:
        """The keys of the frame table, in frame-index order."""
        return [self._keys[k] for k in self._t.keys_in_order()]


class PySpeedscopeText:
    """NativeSpeedscopeText's rules in Python."""

    def __init__(self, profile: Profile) -> None:
        self._p = profile
        self._frame_of: dict[FrameKey, int] = {}
        self._frame_keys: list[FrameKey] = []
        self._text: dict[int, str] = {}
        self._stacks: list[str] = []
        self._weights: list[str] = []
        self._pos = [0, 0]
        self.kept = self.total = self.samples = self.start = 0

    def _node_text(self, node: int) -> str:
        s = self._text.get(node)
        if s is None:
            idx = []
            for k in self._p.keys(node):
                i = self._frame_of.get(k)
                if i is None:
                    i = self._frame_of[k] = len(self._frame_keys)
                    self._frame_keys.append(k)
                idx.append(i)
            s = self._text[node] = "[" + ",".join(map(str, idx)) + "]"
        return s

    def set_thread(self, runs: Runs, value: str, count_mult: int, scale: int) -> None:
        canon_of: dict[str, int] = {}
        canon = {n: canon_of.setdefault(self._node_text(n), n) for n in dict.fromkeys(runs.node)}
        if len(canon_of) != len(canon):
            # Some stacks render alike (lines of one function, grouped by function): merge
            # consecutive runs of those.
            runs = _merge(runs, canon)
        if value == "count":
            values = [c * count_mult * scale for c in runs.count]
        else:
            values = [v * scale for v in (runs.cpu if value == "cpu" else runs.weight)]
        self._stacks = [self._text[n] for n, v in zip(runs.node, values) if v > 0]
        kept = [v for v in values if v > 0]
        self._weights = list(map(str, kept))
        self.kept = len(kept)
        self.total = sum(kept)
        self.samples = sum(runs.count)
        self.start = max(0, (runs.first_ts[0] - runs.weight[0]) * scale) if len(runs) else 0
        self._pos = [0, 0]

    def _chunk(self, which: int, items: list[str], max_bytes: int) -> str:
        at = self._pos[which]
        out: list[str] = []
        size = 0
        while at < len(items) and size < max_bytes:
            out.append(items[at])
            size += len(items[at]) + 1
            at += 1
        text = ("," if self._pos[which] and out else "") + ",".join(out)
        self._pos[which] = at
        return text

    def samples_chunk(self, max_bytes: int) -> str:
        return self._chunk(0, self._stacks, max_bytes)

    def weights_chunk(self, max_bytes: int) -> str:
        return self._chunk(1, self._weights, max_bytes)

    def frame_keys(self) -> list[FrameKey]:
        return list(self._frame_keys)


SpeedscopeText = Union[PySpeedscopeText, NativeSpeedscopeText]


def _merge(runs: Runs, canon: dict[int, int]) -> Runs:
    """Runs with consecutive runs of the same canonical node merged into one."""
    node, count, weight, cpu, first_ts = (array("I"), array("I"), array("Q"), array("Q"),
                                          array("q"))
    prev = -1
    for i, n in enumerate(runs.node):
        c = canon[n]
        if c == prev:
            count[-1] += runs.count[i]
            weight[-1] += runs.weight[i]
            cpu[-1] += runs.cpu[i]
            continue
        node.append(n)
        count.append(runs.count[i])
        weight.append(runs.weight[i])
        cpu.append(runs.cpu[i])
        first_ts.append(runs.first_ts[i])
        prev = c
    return Runs(node, count, weight, cpu, first_ts)
