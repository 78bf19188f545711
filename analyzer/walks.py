"""The walks over a profile's stacks by report key (a function, or a line of one) that the
reporters and exporters use: own and total sums, pstats' caller edges, the sliced report's sums
and speedscope's per-thread text.

Two implementations satisfy one protocol (Walks, and SpeedscopeText for the text): the native
engine's (psrec.analyzer._engine: StackKeys and its walks), over the decoder's trie and the
accumulator's columns in place, and Python twins that follow the same rules where it is not
built, and are what it is tested against. The profile's engine makes one of them
(``Engine.walks``, engine.py): the reporters never ask which. What they read of a profile is
model.Stacks; this module imports no other of the analyzer's but model.py.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any, Protocol, runtime_checkable

from .model import NO_STACK, FrameKey, Runs, Stacks

# The key StackKeys gives a frame the view leaves out (analyzer/native/stack_keys.hpp).
SKIP_KEY = 0xFFFFFFFF
# NativeWalks.totals of one thread: the native walk makes tables of the trie's nodes and of
# the keys for each walk, and its sums are read back key by key in Python (KEY_COST times a
# node's cost); a thread whose rows, NATIVE_ROWS times, cost less is walked in Python.
NATIVE_ROWS = 64
KEY_COST = 32

__all__ = ["Edge", "NativeWalks", "PyWalks", "SliceSums", "SpeedscopeText", "ThreadRows",
           "Totals", "TrieOrder", "Walks", "key_totals"]


class TrieOrder:
    """The trie nodes an output uses, numbered again from 0 with every node after its parent
    (what tables of stacks by parent want): ``add(node)`` gives a node's number, taking its
    ancestors first; ``nodes[i]`` is number i's trie node, ``parent[i]`` its parent's number
    (-1 for a stack's outermost frame, and for the empty stack, node 0)."""

    def __init__(self, parents: Any) -> None:
        self._parents = parents
        self.index: dict[int, int] = {}
        self.nodes: list[int] = []
        self.parent: list[int] = []

    def add(self, node: int) -> int:
        i = self.index.get(node)
        if i is not None:
            return i
        chain = []
        n = node
        while n not in self.index:
            chain.append(n)
            if n == 0:
                break
            n = self._parents[n]
        for n in reversed(chain):
            up = self._parents[n] if n else 0
            self.index[n] = len(self.nodes)
            self.nodes.append(n)
            self.parent.append(self.index[up] if up else -1)
        return self.index[node]


class ThreadRows:
    """The rows of a column of threads (the cells'), by thread, found in one pass when first
    asked for: a per-thread read of 100,000 threads that went over every cell for each
    thread took time in the square of the threads."""

    def __init__(self, threads: Any) -> None:
        self._rows: dict[int, array[int]] = {}
        for i, ref in enumerate(threads):
            rows = self._rows.get(ref)
            if rows is None:
                rows = self._rows[ref] = array("Q")
            rows.append(i)

    def rows(self, ref: int) -> array[int]:
        """The rows of a thread, in order (none for a thread without any)."""
        return self._rows.get(ref, _NO_ROWS)


_NO_ROWS: array[int] = array("Q")


def key_totals(p: Stacks, rows: Iterable[tuple[int, int, int]]) -> dict[FrameKey, Totals]:
    """Own and total sums per key of rows (node, samples, value), in Python: PyWalks.totals,
    and NativeWalks.totals for a thread of few rows."""
    out: dict[FrameKey, Totals] = defaultdict(Totals)
    for node, count, value in rows:
        keys = p.names.keys(node)
        leaf = out[keys[-1]]
        leaf.own_count += count
        leaf.own += value
        for k in set(keys):
            t = out[k]
            t.total_count += count
            t.total += value
    return {k: t for k, t in out.items() if t.total_count or t.total}


class Totals:
    """Per report key: own and total (cumulative) sample counts and estimated ticks."""

    __slots__ = ("own", "own_count", "total", "total_count")

    def __init__(self) -> None:
        self.own_count = self.own = self.total_count = self.total = 0

    def __repr__(self) -> str:
        return (f"Totals(own_count={self.own_count}, own={self.own}, "
                f"total_count={self.total_count}, total={self.total})")


# (caller key, callee key, samples with the callee innermost, their value, value of the
# samples the edge is on, counted once per stack)
Edge = tuple[FrameKey, FrameKey, int, int, int]
# slice -> thread -> [samples, GIL-held, on-CPU]; slice -> leaf key -> own value
SliceSums = tuple[dict[int, dict[int, list[int]]], dict[int, dict[FrameKey, int]]]


@runtime_checkable
class SpeedscopeText(Protocol):
    """One thread's speedscope samples and weights as text, in pieces of bounded size;
    frames are numbered by first use across the threads set so far."""

    def set_thread(self, runs: Runs, value: str, count_mult: int, scale: int) -> None:
        """value: 'count' (count x count_mult), 'cpu' or 'weight'; every value x scale."""

    @property
    def kept(self) -> int:
        """Runs that stand for some time (the others are left out)."""

    @property
    def total(self) -> int: ...

    @property
    def samples(self) -> int: ...

    @property
    def start(self) -> int: ...

    def samples_chunk(self, max_bytes: int) -> str: ...

    def weights_chunk(self, max_bytes: int) -> str: ...

    def frame_keys(self) -> list[FrameKey]:
        """The keys of the frame table, in frame-index order."""


@runtime_checkable
class Walks(Protocol):
    """The walks over a profile's stacks by report key (PyWalks, NativeWalks)."""

    def totals(self, thread: int | None = None) -> dict[FrameKey, Totals]:
        """Own and total sums per key, of one thread (a ref) or all; a key that is several
        times on one stack (recursion) counts once for it."""

    def edges(self, thread: int | None = None) -> list[Edge]:
        """Caller -> callee edges, with the sums of Edge."""

    def slice_sums(self) -> SliceSums: ...

    def speedscope_text(self) -> SpeedscopeText: ...


class PyWalks:
    """Walks over stacks by report key in Python: the native walks' rules, over the profile's
    cells (thread: only that thread's)."""

    def __init__(self, profile: Stacks) -> None:
        self._p = profile
        self._by_thread: ThreadRows | None = None

    def _rows(self, thread: int | None) -> Iterator[tuple[int, int, int]]:
        p = self._p
        cells = p.cells
        if thread is None:
            for c in cells:
                yield c.node, c.samples, p.cell_value(c)
            return
        if self._by_thread is None:
            self._by_thread = ThreadRows(p.columns.thread)
        for i in self._by_thread.rows(thread):
            c = cells[i]
            yield c.node, c.samples, p.cell_value(c)

    def totals(self, thread: int | None = None) -> dict[FrameKey, Totals]:
        """Own and total sums per key; a key that is several times on one stack (recursion)
        counts once for it."""
        return key_totals(self._p, self._rows(thread))

    def edges(self, thread: int | None = None) -> list[Edge]:
        sums: dict[tuple[FrameKey, FrameKey], list[int]] = {}
        for node, count, value in self._rows(thread):
            keys = self._p.names.keys(node)
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
            own[cell.slice][p.names.leaf(cell.node)] += p.cell_value(cell)
        return per, own

    def speedscope_text(self) -> PySpeedscopeText:
        return PySpeedscopeText(self._p)


class NativeWalks:
    """Walks over stacks by report key in the native engine: the trie's frames are mapped to
    key ids once (StackKeys), and every walk runs over those."""

    def __init__(self, profile: Stacks, engine: Any) -> None:
        """engine: the native engine module (psrec.analyzer._engine)."""
        self._p = profile
        self._engine = engine
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
            if profile.names.hidden(fid):  # left out by the view: StackKeys skips it
                frame_key[fid if order is None else order[fid]] = SKIP_KEY
                continue
            k = profile.names.key(fid)
            i = index.get(k)
            if i is None:
                i = index[k] = len(key_list)
                key_list.append(k)
            frame_key[fid if order is None else order[fid]] = i
        self._sk = engine.StackKeys(profile.parents, node_frames, frame_key, 0)
        self._keys = key_list
        self._by_thread: ThreadRows | None = None

    def _thread_rows(self, thread: int) -> array[int]:
        if self._by_thread is None:
            self._by_thread = ThreadRows(self._p.columns.thread)
        return self._by_thread.rows(thread)

    def _rows(self, thread: int | None) -> tuple[Any, ...]:
        """key_totals' and key_edges' arguments after the keys: the cells' node, sample and
        value columns as they are (native buffers), or a thread's rows of them."""
        c = self._p.columns
        value, mult = self._p.value_column()
        if thread is None:
            return c.node, c.samples, value, mult
        rows = self._thread_rows(thread)
        return (array("I", map(c.node.__getitem__, rows)),
                array("Q", map(c.samples.__getitem__, rows)),
                array("Q", map(value.__getitem__, rows)), mult)

    def totals(self, thread: int | None = None) -> dict[FrameKey, Totals]:
        if thread is not None:
            # A native walk costs time in the trie's nodes and the keys whatever the rows
            # (its tables are made for each walk): a thread of few rows is walked here, so
            # that a per-thread report of many small threads costs time in their rows.
            rows = self._thread_rows(thread)
            if len(rows) * NATIVE_ROWS < len(self._p.parents) + KEY_COST * len(self._keys):
                c = self._p.columns
                value, mult = self._p.value_column()
                return key_totals(self._p, ((c.node[i], c.samples[i], value[i] * mult)
                                            for i in rows))
        cols = [array("Q", b) for b in self._engine.key_totals(self._sk, *self._rows(thread))]
        out: dict[FrameKey, Totals] = {}
        for i, (own_count, own, total_count, total) in enumerate(zip(*cols)):
            if total_count or total:
                t = out[self._keys[i]] = Totals()
                t.own_count, t.own, t.total_count, t.total = own_count, own, total_count, total
        return out

    def edges(self, thread: int | None = None) -> list[Edge]:
        e = self._engine.key_edges(self._sk, *self._rows(thread))
        caller, callee = array("I", e[0]), array("I", e[1])
        count, own, cum = (array("Q", b) for b in e[2:])
        keys = self._keys
        return [(keys[a], keys[b], n, o, c)
                for a, b, n, o, c in zip(caller, callee, count, own, cum)]

    def slice_sums(self) -> SliceSums:
        p = self._p
        c = p.columns
        value, mult = p.value_column()
        parts = self._engine.slice_sums(self._sk, c.slice, c.thread, c.node, c.samples, c.gil,
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
        return NativeSpeedscopeText(self._engine.SpeedscopeText(self._sk), self._keys)



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

    def __init__(self, profile: Stacks) -> None:
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
            for k in self._p.names.keys(node):
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



def _merge(runs: Runs, canon: dict[int, int]) -> Runs:
    """Runs with consecutive runs of the same canonical node (and state) merged into one."""
    node, count, weight, cpu, first_ts, state = (array("I"), array("I"), array("Q"),
                                                 array("Q"), array("q"), array("B"))
    prev: tuple[int, int] | int = -1
    states = runs.state if runs.state is not None else bytes(len(runs.node))
    for i, n in enumerate(runs.node):
        c = canon[n], states[i]
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
        state.append(c[1])
        prev = c
    return Runs(node, count, weight, cpu, first_ts, state)
