"""asyncio tasks in a recording (format 1.4): which task each thread ran at each sample, summed
per task and per coroutine under the view, and `psrec report --tasks`, their table.

A sample's task is the TASK its thread was running (spec 3.1 and 4, PASS_TASKS); a sample of
a thread that runs an event loop but no task at that moment (the loop polls, or runs
callbacks) has none. Running time is what the samples of a task stand for under the view's
mode and weights, as the function table's times are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import IO, Any

from psrec.format import TaskInfo, open_recording
from psrec.format.text import printable

from .model import batch_columns
from .profile import Profile
from .registry import Option, Reporter, register
from .reporters import format_seconds

__all__ = ["TaskSums", "task_sums", "TasksReporter"]


@dataclass
class TaskSums:
    """The samples of one task (or of the loops' own time, task 0) in the view."""

    samples: int = 0
    weight: int = 0  # ticks the samples stand for
    cpu: int = 0  # CPU ticks recorded with them
    threads: set[int] = field(default_factory=set)
    first_ts: int = -1
    last_ts: int = -1


def task_sums(profile: Profile) -> dict[int, TaskSums]:
    """Per TASK id, the samples the view selects of threads running that task; under 0, the
    samples of threads that ran some task in the recording but none at that moment (their
    event loops' own time). Threads that never ran a task are left out. One more read of the
    recording."""
    sel = profile.selection
    mask, want = sel.status_mask, sel.status_value
    out: dict[int, TaskSums] = {}
    loops: dict[int, TaskSums] = {}  # per thread: its samples outside tasks
    with open_recording(profile.path) as rec:
        stream = profile.engine.stream(rec, sel.from_ts, sel.to_ts)
        for batch in stream:
            cols = batch_columns(batch, "ts", "thread", "status", "cpu", "weight", "task")
            for ts, ref, status, cpu, weight, task in zip(*cols):
                if status & mask != want or not sel.selects(ts, ref, task):
                    continue
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
