"""psrec's Python API, for notebooks and scripts: a recording read under a view.

    import psrec

    run = psrec.load("run.psr", mode="cpu", start="2s", end="5s")
    run.threads                    # the recording's threads by ref (names, ids, process)
    run.tasks                      # its asyncio tasks by id (name, coroutine), if any
    run.waits()                    # where each task waited: suspended, ready, by await
    run.totals()                   # own and total per function, as `psrec report` shows them
    s = run.samples                # one row per thread-sample in the window and threads
    run.stack(s.stack[0])          # that sample's frames, root first
    run.to_pandas()                # the samples as a pandas DataFrame (pandas installed)
    run.functions()                # the report's function table, one row per function
    run.to_pandas("functions")     # that table as a DataFrame

The view's window, threads and processes select the samples; its mode (wall, cpu, gil, idle,
gil-wait),
weights and grouping apply to ``totals()`` and to ``profile``, as they do to the reports. The
samples carry each thread-sample's own GIL and CPU state: select on those as you need.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from psrec.format import Frame, PsrecError, TaskInfo, ThreadInfo
from psrec.format import constants as C
from psrec.format.merged import Source

from .model import NO_STACK, FrameKey, batch_columns
from .modes import GIL_WAIT, WALL
from .profile import Profile
from .tasks import TaskWaits, task_waits
from .view import View, gil_wait_unknown
from .walks import Totals

__all__ = ["FunctionRow", "Run", "Samples", "load"]


@dataclass
class Samples:
    """Columns of equal length, one row per thread-sample, in time order per chunk.

    time: seconds from the start of the recording; thread: the thread's ref (``Run.threads``);
    stack: the stack's id (``Run.stack``; 0: no Python stack); leaf: the innermost function
    of that stack, as the report names it ("name (file:line)"); gil and on_cpu: 1 held / on a
    CPU, 0 not, -1 not known; gil_wait: 1 waiting to take the GIL, 0 not, -1 not known (every
    sample of a recording that cannot know it: ``Run.gil_wait_unknown`` says why); cpu_ns:
    CPU time the thread used since its previous sample (where recorded); weight_ns: the wall
    time the sample stands for; task: the asyncio task the thread was running (``Run.tasks``;
    0: none).
    """

    time: array[float]
    thread: array[int]
    stack: array[int]
    gil: array[int]
    on_cpu: array[int]
    cpu_ns: array[int]
    weight_ns: array[int]
    gil_wait: array[int] = field(default_factory=lambda: array("b"))
    leaf: list[str] = field(default_factory=list)
    task: array[int] = field(default_factory=lambda: array("I"))

    def __len__(self) -> int:
        return len(self.time)

    def __repr__(self) -> str:
        # The columns can hold millions of rows: their names and length, not their values.
        names = ", ".join(f.name for f in fields(self))
        return f"<Samples: {len(self):,} rows of {names}>"


@dataclass(frozen=True)
class FunctionRow:
    """One function (or line) of the report's table: own = on top of the stack, total =
    anywhere on it (recursion counted once per stack); *_samples count samples, *_s are the
    estimated seconds the samples stand for under the view's weights."""

    name: str
    filename: str
    line: int
    own_samples: int
    total_samples: int
    own_s: float
    total_s: float


def _state(status: int, bit: int, unknown: int) -> int:
    return -1 if status & unknown else int(bool(status & bit))


_WAIT_MASK, _WAIT_VALUE = GIL_WAIT.status_mask, GIL_WAIT.status_value


def _waiting(status: int) -> int:
    """1 waiting to take the GIL (as --mode gil-wait selects), 0 not, -1 not known: the target
    did not say (before CPython 3.15, free-threaded), or the GIL state was not read."""
    if status & _WAIT_MASK == _WAIT_VALUE:
        return 1
    if not status & C.STATUS_GIL_REQUESTED_KNOWN or status & C.STATUS_GIL_UNKNOWN:
        return -1
    return 0


class Run:
    """A recording under a view (see ``load``)."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self._samples: Samples | None = None
        self._parents: Any = None
        self._frames: Any = None

    @property
    def path(self) -> str:
        return self.profile.path

    @property
    def recordings(self) -> list[Source]:
        """Several recordings read as one: each one (its path, host, target pid and command,
        and ``paths``, its files); empty for one recording read alone."""
        return list(self.profile.sources)

    def recording_of(self, thread: int) -> Source | None:
        """The recording a thread (a ref) came from, of several read as one (None for one
        read alone)."""
        return self.profile.source_of(thread)

    @property
    def metadata(self) -> dict[str, Any]:
        """What the recorder wrote of the target and the recording (spec, section 2)."""
        return self.profile.metadata

    @property
    def threads(self) -> dict[int, ThreadInfo]:
        """Every thread of the recording, by ref (the samples' ``thread`` column)."""
        return self.profile.threads

    @property
    def tasks(self) -> dict[int, TaskInfo]:
        """The asyncio tasks of the recording, by id (the samples' ``task`` column, ``waits()``):
        name, address (asyncio's own task id), coroutine, process. Empty for a recording of a
        program that made none (or made with --no-tasks)."""
        tasks: dict[int, TaskInfo] = self.profile.defs.tasks
        return tasks

    def waits(self) -> dict[int, TaskWaits]:
        """Where each asyncio task waited within the view's window, by id, from the task
        snapshots (spec section 4.3): ``suspended`` (awaiting) and ``ready`` (waiting for its
        loop) time in ticks (``seconds()``), and ``sites``: the time by (state, stack, type
        name of what it awaited), the stack a node for ``stack()``, down to the await."""
        return task_waits(self.profile)

    def totals(self, thread: int | None = None) -> dict[FrameKey, Totals]:
        """Own and total samples and time (in ticks: ``seconds()``) per function or line, of
        the view, for one thread (a ref) or all: the numbers of ``psrec report``'s table."""
        return self.profile.walks.totals(thread)

    def functions(self, thread: int | None = None) -> list[FunctionRow]:
        """The report's function table (``psrec report``'s rows, every one), for one thread
        (a ref) or all, largest own time first."""
        p = self.profile
        rows = [FunctionRow(k.name, k.filename, k.line, t.own_count, t.total_count,
                            p.seconds(t.own), p.seconds(t.total))
                for k, t in self.totals(thread).items()]
        rows.sort(key=lambda r: (-r.own_s, -r.total_s, r.filename, r.line, r.name))
        return rows

    def seconds(self, ticks: float) -> float:
        """Ticks (``totals()``'s own and total) in seconds."""
        return self.profile.seconds(ticks)

    @property
    def gil_wait_unknown(self) -> str | None:
        """Why the recording cannot say which samples waited for the GIL, or None when it can
        (CPython 3.15 and later, with a GIL)."""
        return gil_wait_unknown(self.metadata)

    def __repr__(self) -> str:
        p = self.profile
        v = p.view
        nthreads = len(set(p.columns.thread))
        window = ""
        if v.start is not None or v.end is not None:
            window = f", window {v.start or 'start'} .. {v.end or 'end'}"
        return (f"<Run {p.path!r}: mode {v.mode}, weights {v.weights}, by {v.by}{window}; "
                f"{p.selected:,} samples in {nthreads} thread{'s' if nthreads != 1 else ''}>")

    @property
    def samples(self) -> Samples:
        """The thread-samples of the view's window, threads and processes: those the profile
        selects (``profile.selection``), in every state (read on first use; one more pass
        over the file)."""
        if self._samples is None:
            self._samples = self._read_samples()
        return self._samples

    def stack(self, stack_id: int) -> list[Frame]:
        """The frames of a sample's stack, root first (empty for 0, no Python stack)."""
        self.samples  # noqa: B018  (the ids are those of the pass that read the samples)
        defs = self.profile.defs
        out = []
        node = stack_id if 0 <= stack_id < len(self._parents) else 0
        while node:
            if not self.profile.names.hidden(self._frames[node]):  # (native frames the view hides)
                out.append(defs.frame(self._frames[node]))
            parent = self._parents[node]
            node = parent if parent < node else 0
        out.reverse()
        return out

    def to_pandas(self, table: str = "samples", thread: int | None = None) -> Any:
        """A pandas DataFrame of the samples (table="samples": one row per thread-sample, each
        thread's name beside its ref and the stack's leaf function beside its id), or of the
        function table (table="functions": ``functions(thread)``).

        The samples' gil_wait column is True, False, or <NA> where a sample's state is not
        known; a recording that cannot know it at all (before CPython 3.15, or
        free-threaded) has no gil_wait column, and the frame's ``attrs["gil_wait_unknown"]``
        says why."""
        if table not in ("samples", "functions"):
            raise PsrecError(f"to_pandas: no table named {table!r}",
                             help="use 'samples' or 'functions'")
        try:
            import pandas as pd
        except ImportError:
            raise PsrecError("to_pandas() needs pandas, which is not installed",
                             help="pip install pandas") from None
        if table == "functions":
            columns = [f.name for f in fields(FunctionRow)]
            return pd.DataFrame([asdict(r) for r in self.functions(thread)], columns=columns)
        s = self.samples
        names = {ref: t.label for ref, t in self.threads.items()}
        task_names = {tid: t.label for tid, t in self.tasks.items()}
        frame = pd.DataFrame({
            "time": s.time, "thread": s.thread,
            "thread_name": [names.get(r, f"thread ref {r}") for r in s.thread],
            "stack": s.stack, "leaf": s.leaf, "gil": s.gil, "on_cpu": s.on_cpu,
            "cpu_ns": s.cpu_ns, "weight_ns": s.weight_ns, "task": s.task,
            "task_name": [task_names.get(t, "") for t in s.task],
        })
        why = self.gil_wait_unknown
        if why is None:
            frame.insert(frame.columns.get_loc("on_cpu") + 1, "gil_wait", pd.array(
                [None if w < 0 else bool(w) for w in s.gil_wait], dtype="boolean"))
        else:
            frame.attrs["gil_wait_unknown"] = why
        return frame

    def _read_samples(self) -> Samples:
        # The profile's own selection (its window and threads, as Profile.load resolved
        # them) and its engine's stream; every state, not only the mode's: the samples
        # carry their own.
        p = self.profile
        selects = p.selection.selects
        tick_ns = p.tick_ns
        can_wait = gil_wait_unknown(p.metadata) is None
        out = Samples(array("d"), array("I"), array("I"), array("b"), array("b"), array("Q"),
                      array("Q"))
        with p.open() as rec:
            stream = p.engine.stream(rec, p.selection.from_ts, p.selection.to_ts)
            for batch in stream:
                if p.logical is not None:
                    p.logical.rewrite(batch)
                cols = batch_columns(batch, "ts", "thread", "node", "status", "cpu", "weight",
                                     "task")
                for ts, ref, node, status, cpu, weight, task in zip(*cols):
                    if not selects(ts, ref, task):
                        continue
                    out.task.append(task)
                    out.time.append(ts * tick_ns / 1e9)
                    out.thread.append(ref)
                    out.stack.append(node)
                    out.gil.append(_state(status, C.STATUS_GIL_HELD, C.STATUS_GIL_UNKNOWN))
                    out.on_cpu.append(_state(status, C.STATUS_ON_CPU, C.STATUS_CPU_UNKNOWN))
                    out.gil_wait.append(_waiting(status) if can_wait else -1)
                    out.cpu_ns.append(cpu * tick_ns)
                    out.weight_ns.append(weight * tick_ns)
            if p.logical is not None:
                self._parents, self._frames = p.logical.parents, p.logical.frames
            else:
                self._parents = array("I", stream.decoder.trie_parents())
                self._frames = array("I", stream.decoder.trie_frames())
        leaves: dict[int, str] = {}
        for node in out.stack:
            text = leaves.get(node)
            if text is None:
                text = leaves[node] = self._leaf(node)
            out.leaf.append(text)
        return out

    def _leaf(self, node: int) -> str:
        """A stack's innermost function (or line), named as the reports name it."""
        k = NO_STACK
        if 0 < node < len(self._frames):
            k = self.profile.names.key(self._frames[node])
        return f"{k.name} ({k.filename}:{k.line})"


def load(path: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], mode: str = WALL.name,
         *, threads: str | int | Iterable[str | int] = (),
         tasks: str | int | Iterable[str | int] = (),
         pids: int | Iterable[int] = (), processes: str | Iterable[str] = (),
         hosts: str | Iterable[str] = (), recordings: str | Iterable[str] = (),
         start: str | float | None = None, end: str | float | None = None,
         weights: str = "time", by: str = "function", native: bool | None = None,
         native_frames: str = "mixed", logical: bool = False) -> Run:
    """Reads a recording under a view, as ``psrec report`` does; returns a Run.

    path: the .psr file; or several, or a folder of them, read as one (their samples on
        one timeline, that of the recording that began first; each thread keeps its
        recording: ``Run.recording_of``). Files of one recording (its --window files)
        give its threads back whole.
    mode: which samples count: "wall" (every sample), "cpu" (on a CPU, weighted by the CPU
        time used where it was recorded), "gil" (holding the GIL), "idle" (off CPU) or
        "gil-wait" (waiting to take the GIL; CPython 3.15 and later).
    threads: one thread or several, each by OS or Python thread id or by any name it had
        ("web_0", 19004, or ("web_0", "web_1")); default: every thread.
    tasks: one asyncio task or several, each by name, by its coroutine's function (every
        task made from it: "handle_request") or by id or address (``Run.tasks``): only
        samples of threads running them; default: every sample.
    pids: one process id or several (the recording's processes); default: all.
    processes: text their command line holds, one or several; default: all.
    hosts, recordings: of several recordings read as one, only those of these hosts, or
        these recordings (a file's name or path, .psr optional); default: all.
    start, end: the window, as seconds from the start of the recording (the earliest, of
        several) (2.5, "500ms") or a
        wall-clock time ("14:02:10", "2024-05-01T14:02:10"); start inclusive, end exclusive.
    weights: "time" (each sample weighs the time it stands for) or "count" (sample counts).
    by: "function" or "line": what ``totals()`` and ``functions()`` group by.
    native: use the native engine (True), the Python one (False), or the native one where it
        is built (None).
    native_frames: a recording made with --native: "mixed" (native frames interleaved with
        the Python ones, the evaluation loop and call machinery left out), "all" or "python"
        (the Python frames only).
    logical: asyncio tasks' logical stacks: a sample of a task has the task's frames under
        the tasks that await it, each named by a frame of file "<task>" (``psrec report
        --logical``).

    Raises PsrecError (with a message that says what to do) for a file or a view it cannot
    read."""
    view = View(mode=mode, threads=tuple(str(t) for t in _several(threads)),
                tasks=tuple(str(t) for t in _several(tasks)),
                pids=tuple(int(p) for p in _several(pids)),
                processes=tuple(str(p) for p in _several(processes)),
                hosts=tuple(str(h) for h in _several(hosts)),
                recordings=tuple(str(r) for r in _several(recordings)),
                start=None if start is None else str(start),
                end=None if end is None else str(end), weights=weights, by=by,
                native=native_frames, logical=logical)
    given: str | list[str] = (os.fspath(path) if isinstance(path, (str, os.PathLike))
                              else [os.fspath(p) for p in path])
    return Run(Profile.load(given, view, native=native))


def _several(value: Any) -> tuple[Any, ...]:
    """One value (a string or a number) as a tuple of it; several as they are: a string is one
    name, not the letters of one."""
    if isinstance(value, (str, bytes, int)):
        return (value,)
    return tuple(value)
