"""asyncio tasks in a recording (format 1.4): which task each thread ran at each sample, summed
per task and per coroutine under the view; where each task waited, from the recording's task
snapshots; and how a task and the await it waits at are named. The outputs read these:
`psrec report --tasks` (task_report.py), the HTML page's tasks (page.py), and every output's
`--waits` (await_stacks). The task snapshots themselves are replayed in task_states.py.

A sample's task is the TASK its thread was running (spec 3.1 and 4, PASS_TASKS); a sample of
a thread that runs an event loop but no task at that moment (the loop polls, or runs
callbacks) has none. Running time is what the samples of a task stand for under the view's
mode and weights, as the function table's times are. Waiting time (suspended at an await, or
ready and waiting for its loop) is the time the task snapshots kept it in that state (spec
4.3), within the view's window: it is wall time, whatever the view's mode.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field

from psrec.format import TaskInfo
from psrec.format import constants as FC
from psrec.format.text import printable

from .logical import LogicalStacks
from .model import batch_columns
from .profile import Profile
from .task_states import Stretch, replay_task_states

__all__ = ["AWAIT_CHAIN_FRAMES", "TaskSums", "TaskWaits", "WaitSpan", "await_chain",
           "await_stacks", "coroutine_label", "replay_task_states", "selected_samples",
           "task_sums", "task_waits", "wait_spans"]


@dataclass
class TaskSums:
    """The samples of one task (or of the loops' own time, task 0) in the view."""

    samples: int = 0
    weight: int = 0  # ticks the samples stand for
    cpu: int = 0  # CPU ticks recorded with them
    threads: set[int] = field(default_factory=set)
    first_ts: int = -1
    last_ts: int = -1


def selected_samples(profile: Profile) -> Iterator[tuple[int, int, int, int, int]]:
    """(ts, thread ref, task, weight, cpu) of each sample the view selects: one more read of
    the recording."""
    sel = profile.selection
    mask, want = sel.status_mask, sel.status_value
    with profile.open() as rec:
        for batch in profile.engine.stream(rec, sel.from_ts, sel.to_ts):
            cols = batch_columns(batch, "ts", "thread", "status", "cpu", "weight", "task")
            for ts, ref, status, cpu, weight, task in zip(*cols):
                if status & mask == want and sel.selects(ts, ref, task):
                    yield ts, ref, task, weight, cpu


def task_sums(profile: Profile) -> dict[int, TaskSums]:
    """Per TASK id, the samples the view selects of threads running that task; under 0, the
    samples of threads that ran some task in the recording but none at that moment (their
    event loops' own time). Threads that never ran a task are left out. One more read of the
    recording."""
    out: dict[int, TaskSums] = {}
    loops: dict[int, TaskSums] = {}  # per thread: its samples outside tasks
    for ts, ref, task, weight, cpu in selected_samples(profile):
        s = out.get(task) if task else loops.get(ref)
        if s is None:
            s = out[task] = TaskSums() if task else loops.setdefault(ref, TaskSums())
        s.samples += 1
        s.weight += weight
        s.cpu += cpu
        s.threads.add(ref)
        if s.first_ts < 0:
            s.first_ts = ts
        s.last_ts = ts
    ran = {ref for tid, s in out.items() if tid for ref in s.threads}
    idle = TaskSums()
    for ref, s in loops.items():
        if ref not in ran:
            continue
        idle.samples += s.samples
        idle.weight += s.weight
        idle.cpu += s.cpu
        idle.threads.add(ref)
    out.pop(0, None)
    if idle.samples:
        out[0] = idle
    return out


class TaskWaits:
    """Where one task waited in the view's window (spec 4.3's task snapshots), in ticks."""

    __slots__ = ("suspended", "ready", "sites", "awaited", "spans")

    def __init__(self, spans: bool = False) -> None:
        self.suspended = 0  # awaiting a future or another task
        self.ready = 0  # able to run, waiting for its event loop
        # (state, node, waits) -> ticks: node is its coroutines in the stack trie, outermost
        # first, the innermost at the await it waited at (or where it would resume); waits,
        # the name (a string id) of the type of what it awaited (0 when ready)
        self.sites: dict[tuple[int, int, int], int] = {}
        self.awaited: frozenset[int] = frozenset()  # the tasks it waited on
        # when asked for: each charge as (from, to, ticks, site), the time it was charged for
        # spread over [from, to) (the HTML page sums them by slice)
        self.spans: list[tuple[int, int, int, tuple[int, int, int]]] | None = (
            [] if spans else None)

    def waits_on(self) -> dict[int, int]:
        """Suspended ticks by the type of what it awaited (a string id)."""
        out: dict[int, int] = {}
        for (state, _, waits), ticks in self.sites.items():
            if state == FC.TASK_SUSPENDED:
                out[waits] = out.get(waits, 0) + ticks
        return out


def task_waits(profile: Profile, spans: bool = False) -> dict[int, TaskWaits]:
    """Per TASK id, where the task waited within the view's window (its tasks only, with
    --task; those of the view's processes; tasks the recording defines): nothing for a
    recording without task snapshots.

    A task's waiting time between two snapshots is that stretch's wall time less the time its
    samples say a thread ran it then. Where the two snapshots saw it wait at the same place,
    all of it was there; where they saw it at two places, the time before its first running
    sample is the first's, the time after its last the second's, and the rest (all of it, if
    it did not run) is shared between them; where one saw it running, the time is the other's.
    So a task's waits and its running time add up to its life, however few snapshots there
    were: the snapshots say where the waiting was. spans: also keep when each wait was
    (TaskWaits.spans)."""
    sel = profile.selection
    lo = sel.from_ts if sel.from_ts is not None else -(1 << 63)
    hi = sel.to_ts if sel.to_ts is not None else 1 << 63
    tasks = profile.defs.tasks
    pids = ({profile.threads[r].pid for r in sel.threads if r in profile.threads}
            if sel.threads is not None else None)
    picked = set(sel.tasks) if sel.tasks is not None else None
    by_task: dict[int, list[Stretch]] = {}
    for st in replay_task_states(profile.events):
        task = st[0]
        t = tasks.get(task)
        if t is None or st[6] <= st[5]:
            continue  # a state of a task the file does not define is left out
        if (picked is not None and task not in picked) or (pids is not None
                                                            and t.pid not in pids):
            continue
        by_task.setdefault(task, []).append(st)
    if not by_task:
        return {}
    ran = _running_ticks(profile, set(by_task))
    out: dict[int, TaskWaits] = {}
    for task, stretches in by_task.items():
        times, cum = ran.get(task, _NEVER_RAN)
        if len(stretches) == 1 and not times and stretches[0][1] in _WAITING:
            # One stretch, never running (most tasks of a server): all of it waiting there.
            st = stretches[0]
            w = TaskWaits(spans)
            a, b = max(st[5], lo), min(st[6], hi)
            _charge(w, st, b - a, a, b)
        else:
            stretches.sort(key=lambda st: st[5])
            w = _place_waits(stretches, times, cum, lo, hi, spans)
        if w.sites:
            out[task] = w
    return out


_NEVER_RAN: tuple[list[int], list[int]] = ([], [0])


_WAITING = (FC.TASK_SUSPENDED, FC.TASK_READY)


def _charge(w: TaskWaits, st: Stretch, ticks: float, a: float, b: float) -> None:
    """ticks of waiting within [a, b), where the stretch st's snapshots saw the task."""
    if ticks <= 0:
        return
    state, waits, node, awaits = st[1:5]
    n = round(ticks)
    key = (state, node, waits)
    if w.spans is not None and n > 0:
        w.spans.append((int(a), max(int(a) + 1, int(b)), n, key))
    if state == FC.TASK_SUSPENDED:
        w.suspended += n
    else:
        w.ready += n
    w.sites[key] = w.sites.get(key, 0) + n
    if awaits and not w.awaited.issuperset(awaits):
        w.awaited = w.awaited.union(awaits)


def _place_waits(stretches: list[Stretch], times: list[int], cum: list[int], lo: int,
                 hi: int, spans: bool) -> TaskWaits:
    """One task's waits within [lo, hi) (task_waits): its stretches in time order, and the
    times of its samples with the running sum of their weights."""
    w = TaskWaits(spans)

    def runs(a: int, b: int) -> tuple[int, int, int]:
        """Its samples in [a, b): where they begin and end among times, and their ticks."""
        i0, i1 = bisect_left(times, a), bisect_left(times, b)
        return i0, i1, cum[i1] - cum[i0]

    last_wait: Stretch | None = None
    for i, st in enumerate(stretches):
        here = st if st[1] in _WAITING else None
        nxt = stretches[i + 1] if i + 1 < len(stretches) else None
        there = nxt if nxt is not None and nxt[1] in _WAITING and nxt[5] == st[6] else None
        if here is not None:
            last_wait = here
        # Seen in this state from start to seen: its waiting then was here (or, seen running,
        # where it waited next or last).
        a, b = max(st[5], lo), min(st[7], hi)
        target = here or there or last_wait
        if b > a and target is not None:
            _charge(w, target, (b - a) - runs(a, b)[2], a, b)
        # Between seen and end it moved on, to where the next snapshot saw it.
        a, b = max(st[7], lo), min(st[6], hi)
        if b <= a:
            continue
        i0, i1, ran_ticks = runs(a, b)
        free = (b - a) - ran_ticks
        if free <= 0:
            continue
        if here is None or there is None:
            if target is not None:
                _charge(w, target, free, a, b)
        elif here[1:4] == there[1:4]:
            _charge(w, here, free, a, b)
        elif i1 == i0:  # it did not run long enough to be sampled: it moved half way
            _charge(w, here, free / 2, a, b)
            _charge(w, there, free / 2, a, b)
        else:
            # A sample stands for the pass before it: a run began, on average, half a pass
            # before its first sample, and ended half a pass after its last.
            first = times[i0] - (cum[i0 + 1] - cum[i0]) / 2
            ended = times[i1 - 1] + (cum[i1] - cum[i1 - 1]) / 2
            before = max(0, first - a)
            after = max(0, b - ended)
            middle = max(0, free - before - after)
            _charge(w, here, before + middle / 2, a, ended)
            _charge(w, there, after + middle / 2, first, b)
    return w


def _running_ticks(profile: Profile, wanted: set[int]) -> dict[int, tuple[list[int], list[int]]]:
    """Per task of wanted, the times of the samples of threads running it (whatever their
    status) and the running sum of their weights before each: one more read of the
    recording."""
    times: dict[int, list[int]] = {}
    weights: dict[int, list[int]] = {}
    sel = profile.selection
    with profile.open() as rec:
        for batch in profile.engine.stream(rec, sel.from_ts, sel.to_ts):
            for ts, task, weight in zip(*batch_columns(batch, "ts", "task", "weight")):
                if task in wanted:
                    times.setdefault(task, []).append(ts)
                    weights.setdefault(task, []).append(weight)
    out = {}
    for task, ts in times.items():
        cum = [0]
        for wt in weights[task]:
            cum.append(cum[-1] + wt)
        out[task] = (ts, cum)
    return out


# One wait of one task (task_waits' spans): (task, from, to, ticks, (state, coroutines'
# node, what it awaited)).
WaitSpan = tuple[int, int, int, int, tuple[int, int, int]]


def wait_spans(profile: Profile) -> list[WaitSpan]:
    """Every task's waits in the view, by task (task_waits, with when each wait was): one
    more read of the recording, which await_stacks can be spared by passing them."""
    return [(task, a, b, n, key) for task, w in sorted(task_waits(profile, spans=True).items())
            for a, b, n, key in w.spans or ()]


def await_stacks(profile: Profile, lo: int | None = None, hi: int | None = None,
                 times: list[tuple[int, int, int]] | None = None,
                 spans: list[WaitSpan] | None = None
                 ) -> tuple[LogicalStacks, dict[int, int], bool]:
    """The tasks' waiting time (task_waits) by logical stack: each task's stack as --logical
    gives it when it waited (the tasks awaiting it, its own frame), its coroutines down to the
    await, and a frame that says what it waited on (`awaits Future`, or `ready` for a task
    waiting for its loop); within [lo, hi) where given (a wait's time spread evenly over the
    time it was charged for). Returns the LogicalStacks whose trie holds the nodes, the ticks
    by node, and whether the budget of logical nodes cut them short; times, if given, gets
    each wait as (from, node, ticks). spans: wait_spans(profile), when known already."""
    logical = profile.logical or LogicalStacks.of_profile(profile)
    strings = profile.defs.strings
    sums: dict[int, float] = {}
    cut = False
    for task, a, b, n, (state, chain, waits) in wait_spans(profile) if spans is None else spans:
        part: float = n
        if lo is not None or hi is not None:
            a0, b0 = max(a, lo if lo is not None else a), min(b, hi if hi is not None else b)
            if b0 <= a0:
                continue
            part, a = n * (b0 - a0) / (b - a), a0
        label = (f"awaits {strings.get(waits) or 'a future'}"
                 if state == FC.TASK_SUSPENDED else "ready")
        node = logical.at_await(task, a, chain, label)
        if node is None:
            cut = True
            break
        sums[node] = sums.get(node, 0) + part
        if times is not None:
            times.append((a, node, round(part)))
    out = {node: round(t) for node, t in sums.items() if round(t) > 0}
    if cut:
        said = (f"{profile.path}: --waits: the tasks' waits would take the file past its budget "
                f"of {logical.budget:,} frames of logical stacks (a quarter of its stack nodes', "
                "spec section 9.3): the rest of them are left out. For a file you trust, "
                "PSREC_BUDGET=10 raises the budgets tenfold")
        if said not in profile.warnings:
            profile.warnings.append(said)
    return logical, out, cut


def coroutine_label(t: TaskInfo) -> str:
    f = t.coroutine
    return f"{f.name} ({f.filename}:{f.first_line})" if f else "<coroutine not known>"


# The coroutines an await site shows, innermost last (the outer ones as "...").
AWAIT_CHAIN_FRAMES = 3


def await_chain(profile: Profile, node: int) -> str:
    """A task's coroutines down to the await it waits at: 'handle (app.py:40) > sleep
    (tasks.py:665)'."""
    frames = profile.defs.frames
    stack = profile.names.stack(node)
    parts = []
    for fid in stack[-AWAIT_CHAIN_FRAMES:]:
        f = frames.get(fid)
        if f is None:
            parts.append(f"<frame {fid}>")
            continue
        base = f.function.filename.rpartition("/")[2]
        parts.append(f"{f.function.name} ({base}:{f.line})")
    head = "... > " if len(stack) > AWAIT_CHAIN_FRAMES else ""
    return printable(head + " > ".join(parts)) if parts else "<not started>"


