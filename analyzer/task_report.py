"""`psrec report --tasks`: the asyncio tasks by the time threads ran them and the time they
waited, where they waited, and the tasks grouped by coroutine (the task model: tasks.py)."""

from __future__ import annotations

from typing import IO, Any

from psrec.format import TaskInfo
from psrec.format import constants as FC
from psrec.format.text import printable

from .common import LIMIT, format_seconds
from .profile import Profile
from .registry import Option, Reporter, register
from .tasks import TaskSums, TaskWaits, await_chain, coroutine_label, task_sums, task_waits

__all__ = ["TasksReporter"]


@register
class TasksReporter(Reporter):
    name = "tasks"
    description = ("asyncio tasks by the time threads ran them, then grouped by the coroutine "
                   "they were created with")
    flag = Option(("--tasks",), help="asyncio tasks by the time threads ran them (recordings of "
                                     "asyncio programs), then grouped by their coroutine.")
    reads = (LIMIT,)

    def write(self, profile: Profile, out: IO[Any]) -> str | None:
        limit = int(self.options.get("limit", 25))
        tasks = profile.defs.tasks
        w = out.write
        w(f"psrec report --tasks: {profile.describe()}\n")
        if not tasks:
            options = profile.metadata.get("options") or {}
            why = ("it was recorded with --no-tasks" if options.get("tasks") is False else
                   "no thread ran an asyncio task while it was recorded")
            w(f"No asyncio tasks: {why}.\n")
            return None
        sums = task_sums(profile)
        waits = task_waits(profile)
        run = {tid: profile.value(s.samples, s.weight, s.cpu) for tid, s in sums.items()}
        total = sum(run.values()) or 1
        w("Time a thread ran each task, the longest first (estimated from the samples; % of "
          "the time threads ran tasks or their event loops' own work, <no task>, last)")
        if any(e[0] == FC.REC_TASK_SNAPSHOT for e in profile.events):
            w(", and the wall time it waited (from the task snapshots): suspended at an await, "
              "or ready to run and waiting for its event loop")
        else:
            w(". The recording has no task snapshots, so no waiting time")
        w(".\n\n")
        w(f"{'samples':>9} {'%':>7} {'running':>10} {'suspended':>10} {'ready':>10}  task\n")
        none = TaskWaits()

        def order(tid: int) -> tuple[bool, int, int, int]:
            """The tasks by the time threads ran them, then by the time they waited; the
            loops' own time (<no task>, no task) after them."""
            t = waits.get(tid, none)
            return (tid == 0, -run.get(tid, 0), -(t.suspended + t.ready), tid)

        rows = sorted(set(sums) | set(waits), key=order)
        shown = rows if limit <= 0 else rows[:limit]
        for tid in shown:
            s = sums.get(tid) or TaskSums()
            t = waits.get(tid, none)
            v = run.get(tid, 0)
            w(f"{s.samples:>9,} {100 * v / total:>6.2f}% {format_seconds(profile.seconds(v)):>10} "
              f"{_secs(profile, t.suspended):>10} {_secs(profile, t.ready):>10}  "
              f"{self._label(tasks, tid)}\n")
        if len(rows) > len(shown):
            w(f"... {len(rows) - len(shown):,} more (use -l 0 to show all)\n")
        if waits:
            self._sites(profile, waits, limit, out)
        # All the tasks of one coroutine together (every handle_request task).
        by_coro: dict[str, list[int]] = {}
        for tid in set(sums) | set(waits):
            if tid and tid in tasks:
                key = coroutine_label(tasks[tid])
                acc = by_coro.setdefault(key, [0, 0, 0, 0])
                s = sums.get(tid) or TaskSums()
                acc[0] += s.samples
                acc[1] += run.get(tid, 0)
                acc[2] += waits[tid].suspended if tid in waits else 0
                acc[3] += 1
        w(f"\nBy coroutine:\n{'samples':>9} {'%':>7} {'running':>10} {'suspended':>10} "
          f"{'tasks':>7}  coroutine\n")
        for key, (n, v, susp, count) in sorted(by_coro.items(),
                                               key=lambda kv: (-kv[1][1], -kv[1][2], kv[0])):
            w(f"{n:>9,} {100 * v / total:>6.2f}% {format_seconds(profile.seconds(v)):>10} "
              f"{_secs(profile, susp):>10} {count:>7,}  {printable(key)}\n")
        return None

    @staticmethod
    def _label(tasks: dict[int, TaskInfo], tid: int) -> str:
        if tid == 0:
            return "<no task>"
        t = tasks.get(tid)
        return f"{printable(t.label)} [{coroutine_label(t)}]" if t else f"<task {tid}, not defined>"

    @staticmethod
    def _sites(profile: Profile, waits: dict[int, TaskWaits], limit: int, out: IO[Any]) -> None:
        """Where the tasks waited: each await, as the coroutines down to it, with the time
        tasks spent there and how many tasks waited there."""
        sites: dict[tuple[int, int], list[Any]] = {}  # (state, node) -> [ticks, tasks]
        for tid, t in waits.items():
            for (state, node, _), ticks in t.sites.items():
                site = sites.setdefault((state, node), [0, set()])
                site[0] += ticks
                site[1].add(tid)
        rows = sorted(sites.items(), key=lambda kv: -kv[1][0])
        shown = rows if limit <= 0 else rows[:limit]
        w = out.write
        w(f"\nWhere the tasks waited (wall time, summed over tasks; each await as the "
          f"coroutines down to it):\n{'waiting':>10} {'tasks':>7}  at\n")
        for (state, node), (ticks, tids) in shown:
            what = "" if state == FC.TASK_SUSPENDED else "  (ready, waiting for its loop)"
            w(f"{_secs(profile, ticks):>10} {len(tids):>7,}  {await_chain(profile, node)}"
              f"{what}\n")
        if len(rows) > len(shown):
            w(f"... {len(rows) - len(shown):,} more (use -l 0 to show all)\n")


def _secs(profile: Profile, ticks: int) -> str:
    return format_seconds(profile.seconds(ticks)) if ticks else "-"
