"""asyncio tasks in a recording (format 1.4): which task each thread ran at each sample, summed
per task and per coroutine under the view, and `psrec report --tasks`, their table.

A sample's task is the TASK its thread was running (spec 3.1 and 4, PASS_TASKS); a sample of
a thread that runs an event loop but no task at that moment (the loop polls, or runs
callbacks) has none. Running time is what the samples of a task stand for under the view's
mode and weights, as the function table's times are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from psrec.format import TaskInfo, open_recording
from psrec.format.text import printable

from .model import batch_columns
from .profile import Profile
from .registry import Option, Reporter, register
from .reporters import format_seconds

__all__ = ["TaskSums", "task_sums", "page_tasks", "TasksReporter"]


@dataclass
class TaskSums:
    """The samples of one task (or of the loops' own time, task 0) in the view."""

    samples: int = 0
    weight: int = 0  # ticks the samples stand for
    cpu: int = 0  # CPU ticks recorded with them
    threads: set[int] = field(default_factory=set)
    first_ts: int = -1
    last_ts: int = -1


def _selected(profile: Profile) -> Iterator[tuple[int, int, int, int, int]]:
    """(ts, thread ref, task, weight, cpu) of each sample the view selects: one more read of
    the recording."""
    sel = profile.selection
    mask, want = sel.status_mask, sel.status_value
    with open_recording(profile.path) as rec:
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
    for ts, ref, task, weight, cpu in _selected(profile):
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


# The most tasks the HTML page lists one by one: beyond it, the tasks that ran least share
# one row.
MAX_TASK_ROWS = 10_000


def page_tasks(profile: Profile, cell_of: Callable[[int], int],
               row_of: Callable[[int], int]) -> dict[str, Any] | None:
    """The HTML page's tasks (None for a recording without any): each task's label and
    coroutine, and per (cell slice, thread row, task) of the view's samples of threads that
    ran a task, their count, wall time (ticks, as the page's cells) and CPU ticks; task 0 is
    the loops' own time. cell_of gives a timestamp's cell slice, row_of a thread's row."""
    tasks = profile.defs.tasks
    if not tasks:
        return None
    by_count = profile.view.weights == "count"
    cells: dict[tuple[int, int, int], list[int]] = {}
    ran: set[int] = set()
    per_task: dict[int, int] = {}
    for ts, ref, task, weight, cpu in _selected(profile):
        if task:
            ran.add(ref)
            per_task[task] = per_task.get(task, 0) + 1
        c = cells.setdefault((cell_of(ts), ref, task), [0, 0, 0])
        c[0] += 1
        c[1] += profile.interval_ticks if by_count else weight
        c[2] += cpu
    listed = sorted(per_task, key=lambda t: -per_task[t])[:MAX_TASK_ROWS]
    index = {tid: i + 1 for i, tid in enumerate(listed)}  # 0: no task
    coroutines: dict[str, int] = {"": 0}
    rows: list[list[Any]] = [["<no task>", 0, 0]]
    for tid in listed:
        t = tasks.get(tid)
        where = _coroutine(t) if t and t.coroutine else ""
        rows.append([t.label if t else f"<task {tid}, not defined>",
                     coroutines.setdefault(where, len(coroutines)), tid])
    others = len(per_task) - len(listed)
    if others:
        rows.append([f"{others:,} other tasks", 0, -1])
    merged: dict[tuple[int, int, int], list[int]] = {}
    for (sl, ref, task), c in cells.items():
        if ref not in ran:
            continue  # a thread that never ran a task: no event loop's
        k = index.get(task, len(rows) - 1) if task else 0
        m = merged.setdefault((sl, row_of(ref), k), [0, 0, 0])
        for i in range(3):
            m[i] += c[i]
    keys = sorted(merged)
    return {
        # [label, coroutine (an index in coroutines), TASK id (0: none, -1: the others)]
        "rows": rows,
        # Coroutines as "function (file:first line)"; "" where not known.
        "coroutines": list(coroutines),
        "cells": {"s": [k[0] for k in keys], "t": [k[1] for k in keys],
                  "k": [k[2] for k in keys], "n": [merged[k][0] for k in keys],
                  "wall": [merged[k][1] for k in keys], "cpu": [merged[k][2] for k in keys]},
    }


def _coroutine(t: TaskInfo) -> str:
    f = t.coroutine
    return f"{f.name} ({f.filename}:{f.first_line})" if f else "<coroutine not known>"


@register
class TasksReporter(Reporter):
    name = "tasks"
    description = ("asyncio tasks by the time threads ran them, then grouped by the coroutine "
                   "they were created with")
    flag = Option(("--tasks",), help="asyncio tasks by the time threads ran them (recordings of "
                                     "asyncio programs), then grouped by their coroutine.")
    reads = (Option(("-l", "--limit"), "Rows to show (0: all).", minimum=0, default=25),)

    def write(self, profile: Profile, out: IO[Any]) -> str | None:
        limit = int(self.options.get("limit", 25))
        sums = task_sums(profile)
        tasks = profile.defs.tasks
        w = out.write
        w(f"psrec report --tasks: {profile.describe()}\n")
        if not tasks:
            options = profile.metadata.get("options") or {}
            why = ("it was recorded with --no-tasks" if options.get("tasks") is False else
                   "no thread ran an asyncio task while it was recorded")
            w(f"No asyncio tasks: {why}.\n")
            return None
        total = sum(profile.value(s.samples, s.weight, s.cpu) for s in sums.values()) or 1
        w("Time a thread ran each task (estimated from the samples); the event loops' own time "
          "(polling, callbacks) is <no task>.\n\n")
        w(f"{'samples':>9} {'%':>7} {'est. time':>10}  task\n")
        rows = sorted(sums.items(), key=lambda kv: -profile.value(kv[1].samples, kv[1].weight,
                                                                  kv[1].cpu))
        shown = rows if limit <= 0 else rows[:limit]
        for tid, s in shown:
            v = profile.value(s.samples, s.weight, s.cpu)
            if tid == 0:
                label = "<no task>"
            else:
                t = tasks.get(tid)
                label = (f"{printable(t.label)} [{_coroutine(t)}]" if t
                         else f"<task {tid}, not defined>")
            w(f"{s.samples:>9,} {100 * v / total:>6.2f}% "
              f"{format_seconds(profile.seconds(v)):>10}  {label}\n")
        if len(rows) > len(shown):
            w(f"... {len(rows) - len(shown)} more (use -l 0 to show all)\n")
        # All the tasks of one coroutine together (every handle_request task).
        by_coro: dict[str, list[int]] = {}
        for tid, s in sums.items():
            if tid and tid in tasks:
                key = _coroutine(tasks[tid])
                acc = by_coro.setdefault(key, [0, 0, 0])
                acc[0] += s.samples
                acc[1] += profile.value(s.samples, s.weight, s.cpu)
                acc[2] += 1
        w(f"\nBy coroutine:\n{'samples':>9} {'%':>7} {'est. time':>10} {'tasks':>7}  "
          "coroutine\n")
        for key, (n, v, count) in sorted(by_coro.items(), key=lambda kv: -kv[1][1]):
            w(f"{n:>9,} {100 * v / total:>6.2f}% {format_seconds(profile.seconds(v)):>10} "
              f"{count:>7,}  {printable(key)}\n")
        return None
