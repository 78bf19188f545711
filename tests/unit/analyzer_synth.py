"""Synthetic recordings for the analyzer tests, written with the format's own encoder and writer.

A test describes passes (timestamp, and for each thread its stack of (file, function, line),
its status and its CPU ticks); the helper keeps every sample it wrote, so tests can compute
the expected answers from what went in, independently of the analyzer.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from psrec.format import PsrWriter
from psrec.format import _format as F  # type: ignore[attr-defined]

WALL_NS = 1_700_000_000_000_000_000  # 2023-11-14T22:13:20Z
MONO_NS = 5_000_000_000
GIL = 0x01
ON_CPU = 0x02
BUSY = GIL | ON_CPU

Loc = tuple[str, str, int]  # file, function, line (the function's first line is line // 10 * 10)


@dataclass
class Sample:
    ts: int
    thread: str
    stack: tuple[Loc, ...]
    status: int
    cpu: int
    weight: int = 0  # filled in on close: ticks since the previous pass, capped
    task: str = ""  # the asyncio task the thread ran (Synth.task), if any


@dataclass
class Synth:
    path: str
    interval_ticks: int = 1000  # 1 ms at 1 µs ticks
    chunk_passes: int = 5000
    metadata: dict[str, Any] = field(default_factory=dict)  # over the defaults below
    samples: list[Sample] = field(default_factory=list)
    created_wall_ns: int = WALL_NS

    def __post_init__(self) -> None:
        if os.path.exists(self.path):
            os.remove(self.path)
        self.w = PsrWriter(
            self.path,
            metadata={"interval_ns": self.interval_ticks * 1000,
                      "rate_hz": 1e6 / self.interval_ticks, "pid": 4242,
                      "command": ["python", "synth.py"], "python_version": "3.11.7",
                      **self.metadata},
            created_wall_ns=self.created_wall_ns, created_mono_ns=MONO_NS, tick_ns=1000,
        )
        self.e = F.Encoder()
        self._strings: dict[str, int] = {}
        self._funcs: dict[tuple[str, str], int] = {}
        self._frames: dict[Loc, int] = {}
        self.refs: dict[str, int] = {}
        self.task_ids: dict[str, int] = {}
        self.tids: dict[str, int] = {}
        self._passes = 0
        self._last_ts: int | None = None

    def _s(self, text: str) -> int:
        if text not in self._strings:
            self._strings[text] = self.e.intern_string(text)
        return self._strings[text]

    def function(self, loc: Loc) -> int:
        """The function of a (file, name, line): first line the line's tens."""
        file, name, line = loc
        func = self._funcs.get((file, name))
        if func is None:
            func = self._funcs[(file, name)] = self.e.intern_function(
                self._s(file), self._s(name), line // 10 * 10)
        return func

    def frame(self, loc: Loc) -> int:
        fid = self._frames.get(loc)
        if fid is None:
            fid = self._frames[loc] = self.e.intern_frame(self.function(loc), loc[2])
        return fid

    def thread(self, name: str, tid: int, ts: int = 0) -> None:
        self.refs[name] = self.e.add_thread(4242, 0x7F0000 + tid, tid, name, ts)
        self.tids[name] = tid

    def task(self, name: str, address: int, ts: int = 0, coroutine: Loc | None = None) -> None:
        """An asyncio task (a TASK definition) that samples may run (sample_pass's 4th field),
        made from the coroutine of a function (as frame() names one) or of none known."""
        func = self.function(coroutine) if coroutine else 0
        self.task_ids[name] = self.e.define_task(4242, address, name, func, ts)

    def task_snapshot(self, ts: int, states: dict[str, tuple[Any, ...]]) -> None:
        """A snapshot of every task (spec 4.3): task name -> (state, what it waits on, its
        coroutines root first as frame() names them, the names of the tasks it awaits)."""
        self.e.begin_task_snapshot(4242, ts)
        for name, (state, waits, stack, awaits) in states.items():
            self.e.task_state(self.task_ids[name], state, waits,
                              [self.frame(x) for x in stack],
                              [self.task_ids[a] for a in awaits])
        self.e.end_task_snapshot()

    def sample_pass(self, ts: int, entries: dict[str, tuple[Any, ...]]) -> None:
        """entries: thread name -> (stack root first, status, cpu ticks[, task name])."""
        self.e.begin_pass(ts)
        for name, (stack, status, cpu, *task) in entries.items():
            self.e.sample(self.refs[name], [self.frame(x) for x in stack], status, cpu or None)
            if self.task_ids:
                self.e.sample_task(self.refs[name], self.task_ids[task[0]] if task else 0)
            w = self.interval_ticks if self._last_ts is None else min(
                ts - self._last_ts, 4 * self.interval_ticks)
            self.samples.append(Sample(ts, name, tuple(stack), status, cpu, w,
                                       task[0] if task else ""))
        self.e.end_pass()
        self._last_ts = ts
        self._passes += 1
        if self._passes % self.chunk_passes == 0:
            self.w.write_sealed(*self.e.seal())

    def rename(self, name: str, ts: int, new_name: str) -> None:
        """A THREAD_RENAME of the thread first added as `name` (tests keep using that key)."""
        self.e.thread_rename(self.refs[name], ts, new_name)

    def thread_exit(self, name: str, ts: int) -> None:
        self.e.thread_exit(self.refs[name], ts)

    def close(self, clean: bool = True) -> str:
        self.w.write_sealed(*self.e.seal())
        if clean:
            self.w.close({"samples": len(self.samples)})
        else:
            self.w.abandon()
        return self.path


MAIN = ("app.py", "main", 5)
F_A = ("app.py", "compute", 12)
F_A2 = ("app.py", "compute", 14)
F_B = ("lib.py", "parse2", 33)  # a name ending in a digit
F_SLEEP = ("threading.py", "wait", 320)


def two_thread_recording(path: str, passes: int = 3000, jitter: bool = True) -> Synth:
    """MainThread: busy, 60% in compute (two lines), 40% in parse2; worker: sleeping.

    With jitter, every 7th pass is 3 intervals late and every 50th pass 10 intervals late
    (capped at 4), so time weights differ from counts.
    """
    s = Synth(path)
    s.thread("MainThread", 100)
    s.thread("worker", 101)
    ts = 0
    for i in range(passes):
        step = s.interval_ticks
        if jitter and i % 7 == 3:
            step *= 3
        if jitter and i % 50 == 17:
            step *= 10
        ts += step
        k = i % 10
        if k < 3:
            main = ((MAIN, F_A), BUSY, 900)
        elif k < 6:
            main = ((MAIN, F_A2), BUSY, 950)
        else:
            main = ((MAIN, F_B), BUSY, 1000)
        s.sample_pass(ts, {"MainThread": main, "worker": ((MAIN, F_SLEEP), 0, 0)})
    s.close()
    return s


def expected(samples: list[Sample], pred: Any = lambda s: True, weights: str = "time",
             interval: int = 1000) -> dict[str, int]:
    """Own value per function name among the samples pred keeps."""
    out: dict[str, int] = {}
    for x in samples:
        if pred(x):
            name = x.stack[-1][1] if x.stack else "[no Python stack]"
            out[name] = out.get(name, 0) + (x.weight if weights == "time" else interval)
    return out
