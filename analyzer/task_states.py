"""The task snapshots of a recording (format 1.4, spec 4.3) replayed: the stretches of time each
asyncio task spent in one state (running, suspended at an await, ready), with what it awaited
and the tasks it waited on. The logical stacks (logical.py) read who awaits whom from them, the
task model (tasks.py) where each task waited.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psrec.format import constants as FC

__all__ = ["Stretch", "replay_task_states"]


# A task's state as a snapshot gave it: state, what it waits on, its coroutines, the tasks it
# waits on.
_State = tuple[int, int, int, tuple[int, ...]]
# One stretch of a task in one state: (task, state, waits, node, awaits, start, end, seen):
# from the snapshot that gave the state (start) to the one that changed it (end); seen is the
# last snapshot that saw it in that state (the change came between seen and end).
Stretch = tuple[int, int, int, int, tuple[int, ...], int, int, int]


def replay_task_states(events: list[tuple[int, int, int, int, int]]) -> Iterator[Stretch]:
    """The task snapshots of a recording's events (TASK_SNAPSHOT, TASK_STATE, TASK_AWAITS:
    spec 4.3), as the stretches of time each task spent in one state: a state holds from the
    snapshot that gave it until the next that changed it, a full snapshot ends the tasks of its
    process it does not name, and every state ends at its process's last snapshot."""
    now: dict[int, dict[int, tuple[_State, int]]] = {}  # pid -> task -> (state, since)
    last: dict[int, int] = {}  # pid -> its last snapshot's time
    # [pid, ts, full, since, [(task, state, waits, node, [awaits])]]
    snap: list[Any] | None = None

    def apply(snap: list[Any]) -> Iterator[Stretch]:
        pid, ts, full, since, changes = snap
        seen = ts - since if 0 < since <= ts else ts
        tasks = now.setdefault(pid, {})
        for task, state, waits, node, awaits in changes:
            new: _State = (state, waits, node, tuple(awaits))
            old = tasks.get(task)
            if old is not None and old[0] == new:
                continue  # restated as it was (a chunk's full snapshot)
            if old is not None:
                yield (task, *old[0], old[1], ts, max(old[1], seen))
            if state == FC.TASK_ENDED:
                tasks.pop(task, None)
            else:
                tasks[task] = (new, ts)
        if full:
            named = {c[0] for c in changes}
            for task in [t for t in tasks if t not in named]:
                state_, start = tasks.pop(task)
                yield (task, *state_, start, ts, max(start, seen))

    for rtype, ts, a, b, c in events:
        if rtype == FC.REC_TASK_STATE and snap is not None:
            snap[4].append((a, b & 3, b >> 2, c, []))
        elif rtype == FC.REC_TASK_AWAITS and snap is not None and snap[4]:
            snap[4][-1][4].append(b)
        elif rtype == FC.REC_TASK_SNAPSHOT:
            if snap is not None:
                yield from apply(snap)
            snap = [a, ts, b, c, []]
            last[a] = max(ts, last.get(a, ts))
    if snap is not None:
        yield from apply(snap)
    for pid, tasks in now.items():
        end = last.get(pid, 0)
        for task, (state_, start) in tasks.items():
            yield (task, *state_, start, max(end, start), max(end, start))
