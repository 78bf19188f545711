"""Logical stacks of asyncio tasks (the view's ``logical``, ``--logical``): a sample of a thread
running a task gets the task's stack as asyncio sees it, continuing into the task that awaits
it, instead of the event loop's.

A task T that task A awaits (A's TASK_AWAITS edge to T, spec 4.3) at the sample's time has
the stack ``[A] A's coroutines down to its await, [T] T's running frames``, where ``[A]`` is a
frame that names the task (file ``<task>``, function the task's name) and T's running frames
are the sample's frames from T's coroutine on (the event loop's frames below it left out);
A's own awaiter comes before it in the same way, up to a task nothing awaits. A sample of a
thread that runs no task (its loop polls, or runs callbacks) keeps its stack.

The awaits are those of the last task snapshot at or before the sample; a task that no
snapshot had seen awaited by then takes the awaits of the first snapshot after it (a child
that runs before its parent's snapshot shows the parent's gather). Samples are rewritten as
they are read, before the engine sums them: every output of the view (tables, flame graphs,
timelines, labels) shows the same logical stacks. The stacks are new nodes of the trie, after
those of the recording, and the task frames new frames of the definitions.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from typing import TYPE_CHECKING, Any

from psrec.format import constants as FC
from psrec.format.reader import Definitions

from .model import batch_columns
from .task_states import replay_task_states

if TYPE_CHECKING:
    from psrec.format.merged import Readable

    from .engine import Engine

__all__ = ["AWAIT_FILE", "TASK_FILE", "LogicalStacks"]

# The file of the frames that name a task in a logical stack, and of those that say what a
# waiting task waits on.
TASK_FILE = "<task>"
AWAIT_FILE = "<await>"
# The most tasks a logical stack goes through (a longer chain of awaits is cut there; a cycle,
# which asyncio does not make, ends at the first task seen twice).
MAX_TASK_DEPTH = 256
# The logical stacks may hold this fraction of the reader's budget of stack nodes, in frames:
# every distinct stack made counts its depth (what writing it out costs), and every node.
LOGICAL_SHARE = 4


class LogicalStacks:
    """The logical stacks of one read of a recording (its window's chunks), made from the
    whole trie and every task snapshot of those chunks: ``read`` takes them from a first read
    of the same chunks, for a read that then ``rewrite``s each batch it sums; ``of_profile``
    from a profile read already. The trie (``parents``, ``frames``) holds the logical nodes
    after the recording's."""

    @classmethod
    def read(cls, rec: Readable, defs: Definitions, engine: Engine,
             from_ts: int | None,
             to_ts: int | None) -> LogicalStacks:
        stream = engine.stream(rec, from_ts, to_ts)
        for _ in stream:
            pass
        return cls(rec, defs, stream.decoder.trie_parents(), stream.decoder.trie_frames(),
                   stream.events)

    @classmethod
    def of_profile(cls, profile: Any) -> LogicalStacks:
        """For a profile read without them (the Profile's trie and events)."""
        with profile.open() as rec:
            return cls(rec, profile.defs, profile.parents, profile.frames, profile.events)

    def __init__(self, rec: Readable, defs: Definitions, parents: Any,
                 frames: Any,
                 events: list[tuple[int, int, int, int, int]]) -> None:
        self._rec = rec  # for its budgets, and to warn
        self._defs = defs
        self.parents = array("I", parents)
        self.frames = array("I", frames)
        # The logical stacks are made in Python (a node is about 100 bytes) and each distinct
        # one is written out whole by a report: the frames of the distinct stacks made, and
        # the nodes, at most a quarter of the reader's budget of stack nodes (spec 9.3), as
        # PSREC_BUDGET scales it.
        self.budget = rec.budgets.nodes // LOGICAL_SHARE
        self._spent = 0
        # Where the budget stopped the logical stacks: samples from this time on keep their
        # recorded stacks, in every read (the earlier ones' stacks are all known by then).
        self._stop_ts: int | None = None
        self._snaps = sorted({ts for rtype, ts, *_ in events if rtype == FC.REC_TASK_SNAPSHOT})
        # who awaits each task: (start, end, awaiting task, its coroutines' node), by start.
        # An awaiter seen running has no coroutines of its own in the snapshot (its frames are
        # its samples'): a task it made, waiting already (a reading is spread over passes),
        # takes the coroutines it suspends in at its next stretch, where that one follows at
        # once.
        stretches = sorted(replay_task_states(events), key=lambda s: (s[0], s[5]))
        by_task: dict[int, list[tuple[int, int, int, int]]] = {}
        for k, (task, state, _waits, node, awaits, start, end, _seen) in enumerate(stretches):
            if state == FC.TASK_RUNNING and k + 1 < len(stretches):
                nxt = stretches[k + 1]
                if nxt[0] == task and nxt[5] == end and nxt[1] != FC.TASK_RUNNING:
                    node = nxt[3]
            for t in awaits:
                if t != task:
                    by_task.setdefault(t, []).append((start, end, task, node))
        self._awaited: dict[int, tuple[list[int], list[tuple[int, int, int, int]]]] = {}
        for t, edges in by_task.items():
            edges.sort()
            self._awaited[t] = ([e[0] for e in edges], edges)
        self._children: dict[tuple[int, int], int] = {}
        self._task_frame: dict[int, int] = {}  # task -> the frame that names it
        self._frame_task: dict[int, int] = {}  # and back
        self._await_frames: dict[str, int] = {}  # what a task waits on -> its frame
        self._next_frame = max(defs.frames, default=0) + 1
        self._next_function = max(defs.functions, default=0) + 1
        # (task, snapshot period) -> its prefix's node, depth and tasks
        self._prefix: dict[tuple[int, int], tuple[int, int, int]] = {}
        self._logical: dict[tuple[int, int], int] = {}  # (prefix node, sample node) -> node
        self._at: dict[tuple[int, int, str], int] = {}  # (prefix node, chain, label) -> node
        # (node, the task's coroutine's function id) -> the task's frames of that stack
        self._running: dict[tuple[int, int], tuple[int, ...]] = {}

    # -- the samples ---------------------------------------------------------------------
    def rewrite(self, batch: Any) -> None:
        """Gives each sample of a thread running a task its logical stack (the batch's node
        column replaced)."""
        ts_col, node_col, task_col = batch_columns(batch, "ts", "node", "task")
        if not any(task_col):
            return
        snaps, prefix, logical = self._snaps, self._prefix, self._logical
        stop = self._stop_ts
        out = array("I", node_col)
        try:
            for i, task in enumerate(task_col):
                if not task:
                    continue
                ts = ts_col[i]
                if stop is not None and ts >= stop:
                    break
                period = bisect_right(snaps, ts)
                p = prefix.get((task, period))
                if p is None:
                    p = self._prefix_node(task, ts, period)
                node = node_col[i]
                n = logical.get((p[0], node))
                if n is None:
                    frames = self._running_frames(node, task)
                    self._spend(min(FC.MAX_DEPTH, p[1] + len(frames)))
                    n = logical[(p[0], node)] = self._stack(p, frames)
                out[i] = n
        except _OverBudget:
            # Samples can share a time (a pass): those of this one keep their stacks too.
            self._stop_ts = stop = ts_col[i]
            for j in range(i - 1, -1, -1):
                if ts_col[j] < stop:
                    break
                out[j] = node_col[j]
            self._rec._warn(
                "--logical: the tasks' stacks would take the file past its budget of "
                f"{self.budget:,} frames of logical stacks (a quarter of its stack nodes', "
                "spec section 9.3): from there on, samples keep their recorded stacks. For "
                "a file you trust, PSREC_BUDGET=10 raises the budgets tenfold", always=True)
        if hasattr(batch, "set_node"):  # the native batch
            batch.set_node(out)
        else:
            batch.node = out

    def at_await(self, task: int, ts: int, chain: int, label: str) -> int | None:
        """The node of a task waiting at ts: its stack as a sample would have it then (the
        tasks awaiting it, its frame), its coroutines down to the await (chain, a recorded
        node), and a frame that names what it waits on (label: `awaits Future`). None past
        the budget of frames."""
        period = bisect_right(self._snaps, ts)
        try:
            p = self._prefix.get((task, period))
            if p is None:
                p = self._prefix_node(task, ts, period)
            key = (p[0], chain, label)
            n = self._at.get(key)
            if n is None:
                frames = (*self._path(chain), self._await_frame(label))
                self._spend(min(FC.MAX_DEPTH, p[1] + len(frames)))
                n = self._at[key] = self._stack(p, frames)
            return n
        except _OverBudget:
            return None

    def path(self, node: int) -> tuple[int, ...]:
        """A node's frames, root first (a recorded node's, or a logical one's)."""
        return self._path(node)

    # -- the stacks ----------------------------------------------------------------------
    def _prefix_node(self, task: int, ts: int, period: int,
                     seen: frozenset[int] = frozenset()) -> tuple[int, int, int]:
        """The node, depth and task count of the tasks that await `task` at ts, root first,
        each with its coroutines, ending at the frame that names `task`; at most MAX_DEPTH
        frames and MAX_TASK_DEPTH tasks, the outermost cut (a truncated stack). The awaiting
        task's own is its prefix in the same snapshot period (kept: a chain of tasks each
        awaiting the next costs a few nodes a task); seen: the tasks below on the chain (a
        cycle, which asyncio does not make, ends at the first task seen twice)."""
        key = (task, period)
        hit = self._prefix.get(key)
        if hit is not None:
            return hit
        own = self._frame_of_task(task)
        by = self._awaiter(task, ts, period)
        seen = seen | {task}
        if by is None or by[0] in seen:
            found = (self._child(0, own), 1, 1)
        else:
            above = self._prefix_node(by[0], ts, period, seen)
            if above[2] >= MAX_TASK_DEPTH:  # a chain of tasks too long: cut above this one
                found = (self._child(self._child(0, FC.TRUNCATED_FRAME), own), 2, 1)
            else:
                frames = (*self._path(by[1]), own)
                found = (self._stack(above, frames),
                         min(FC.MAX_DEPTH, above[1] + len(frames)), above[2] + 1)
        self._prefix[key] = found
        return found

    def _stack(self, prefix: tuple[int, int, int], frames: tuple[int, ...]) -> int:
        """The node of a task's frames under its prefix (node, depth, tasks): at most
        MAX_DEPTH frames, the outermost cut."""
        node, depth, _ = prefix
        if depth + len(frames) <= FC.MAX_DEPTH:
            return self._intern(node, frames)
        whole = self._path(node) + frames
        return self._intern(0, (FC.TRUNCATED_FRAME, *whole[len(whole) - FC.MAX_DEPTH + 1:]))

    def _awaiter(self, task: int, ts: int, period: int) -> tuple[int, int] | None:
        """The task awaiting `task` at ts and its coroutines' node: the await edge that holds
        at ts, else one the first snapshot after ts saw."""
        found = self._awaited.get(task)
        if found is None:
            return None
        starts, edges = found
        i = bisect_right(starts, ts) - 1
        j = i
        while j >= 0 and j > i - 8:  # edges that began earlier and hold still
            if edges[j][1] > ts:
                return edges[j][2], edges[j][3]
            j -= 1
        nxt = self._snaps[period] if period < len(self._snaps) else None
        if i + 1 < len(edges) and nxt is not None and edges[i + 1][0] <= nxt:
            return edges[i + 1][2], edges[i + 1][3]
        return None

    def _running_frames(self, node: int, task: int) -> tuple[int, ...]:
        """The frames of a sample's stack that are the task's: from its coroutine's frame on
        (the whole stack where its coroutine is not found in it)."""
        t = self._defs.tasks.get(task)
        coro = t.coroutine if t is not None else None
        key = (node, coro.id if coro is not None else -1)  # the same for its coroutine's tasks
        frames = self._running.get(key)
        if frames is None:
            path = self._path(node)
            start = 0
            if coro is not None:
                for i, fid in enumerate(path):
                    f = self._defs.frames.get(fid)
                    if f is not None and (f.function.id == coro.id or (
                            f.function.name == coro.name
                            and f.function.filename == coro.filename
                            and f.function.first_line == coro.first_line)):
                        start = i
                        break
            frames = self._running[key] = path[start:]
        return frames

    def _path(self, node: int) -> tuple[int, ...]:
        """A recorded node's frames, root first."""
        out: list[int] = []
        parents, frames = self.parents, self.frames
        n = node
        while n and len(out) <= len(parents):
            out.append(frames[n])
            n = parents[n]
        out.reverse()
        return tuple(out)

    def _spend(self, frames: int) -> None:
        self._spent += frames
        if self._spent > self.budget:
            raise _OverBudget()

    def _intern(self, parent: int, frames: tuple[int, ...]) -> int:
        for fid in frames:
            parent = self._child(parent, fid)
        return parent

    def _child(self, parent: int, frame: int) -> int:
        key = (parent, frame)
        n = self._children.get(key)
        if n is None:
            self._spend(1)
            n = self._children[key] = len(self.parents)
            self.parents.append(parent)
            self.frames.append(frame)
        return n

    def _await_frame(self, label: str) -> int:
        """The frame that says what a waiting task waits on (file <await>; a new definition
        for each label)."""
        fid = self._await_frames.get(label)
        if fid is None:
            fid = self._await_frames[label] = self._new_frame(AWAIT_FILE, label)
        return fid

    def _new_frame(self, filename: str, name: str) -> int:
        from psrec.format import Frame, Function

        fn = Function(self._next_function, filename, name, 0)
        self._defs.functions[fn.id] = fn
        self._next_function += 1
        fid = self._next_frame
        self._next_frame += 1
        self._defs.frames[fid] = Frame(fid, fn, 0)
        return fid

    def _frame_of_task(self, task: int) -> int:
        """The frame that names a task in a logical stack (one per task; a new definition)."""
        fid = self._task_frame.get(task)
        if fid is None:
            t = self._defs.tasks.get(task)
            fid = self._task_frame[task] = self._new_frame(
                TASK_FILE, t.label if t is not None else f"task {task}")
            self._frame_task[fid] = task
        return fid

    def task_of(self, stack: tuple[int, ...]) -> int:
        """The task whose frames a logical stack (frame ids, root first) ends in: the one its
        innermost task frame names (0: none, a stack of no task)."""
        for fid in reversed(stack):
            task = self._frame_task.get(fid)
            if task is not None:
                return task
        return 0


class _OverBudget(Exception):
    """Making a logical stack would pass the reader's budget of stack nodes."""
