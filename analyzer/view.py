"""What a user asks to look at (a View: mode, threads, processes, time window, weights), and
how its words are read against a recording: durations and times, thread and process names."""

from __future__ import annotations

import datetime as _dt
import math
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from psrec.format import MergedRecording, PsrecError, ThreadInfo
from psrec.format import constants as C
from psrec.format.merged import Readable
from psrec.format.reader import Definitions, ProcessInfo

from .modes import GIL_WAIT, GROUPINGS, MODE_TABLE, MODES, WALL, WEIGHTS, Mode

if TYPE_CHECKING:
    from .engine import Engine

__all__ = [
    "MAX_SLICES",
    "MODES",
    "MODE_HELP",
    "gil_wait_unknown",
    "WEIGHTS",
    "STATES",
    "SelectionError",
    "View",
    "ViewUsageError",
    "match_processes",
    "match_threads",
    "parse_duration",
    "parse_time",
    "processes",
    "short_command",
    "to_ticks",
]

# The view modes are declared in modes.py (MODES: name -> Mode); what each view holds, by name.
MODE_HELP = {m.name: m.help for m in MODE_TABLE}
# Why a recording cannot answer --mode gil-wait (None: it can): see gil_wait_unknown().
GIL_WAIT_SINCE: tuple[int, int] = GIL_WAIT.since or (0, 0)
# Status filters a Profile can sum the same samples under at once (Profile.load's `also`):
# name -> (mask, value, CPU view, by stack). The modes, summed by stack; each (GIL held, on a
# CPU) pair alone, for labels (pprof; samples whose GIL or CPU state is unknown are in none);
# and, for pictures of what each thread was doing over time, summed by thread only: all
# samples, holding the GIL, on a CPU without it (in code that released it), and off the CPU
# waiting for it (known where the target says so: 3.15+ with a GIL). The rest of a thread's
# time is off the CPU (idle, or waiting unbeknown) or unknown.
_GIL = C.STATUS_GIL_HELD | C.STATUS_GIL_UNKNOWN
_CPU = C.STATUS_ON_CPU | C.STATUS_CPU_UNKNOWN
STATES: dict[str, tuple[int, int, bool, bool]] = {
    **{m.name: (m.status_mask, m.status_value, m.weighs_cpu, True) for m in MODE_TABLE},
    "gil+cpu": (_GIL | _CPU, C.STATUS_GIL_HELD | C.STATUS_ON_CPU, False, True),
    "gil+off": (_GIL | _CPU, C.STATUS_GIL_HELD, False, True),
    "nogil+cpu": (_GIL | _CPU, C.STATUS_ON_CPU, False, True),
    "nogil+off": (_GIL | _CPU, 0, False, True),
    # waiting to take the GIL (a part of nogil+cpu and nogil+off), for labels
    "wait+cpu": (_GIL | _CPU | C.STATUS_GIL_REQUESTED | C.STATUS_GIL_REQUESTED_KNOWN,
                 C.STATUS_ON_CPU | C.STATUS_GIL_REQUESTED | C.STATUS_GIL_REQUESTED_KNOWN,
                 False, True),
    "wait+off": (_GIL | _CPU | C.STATUS_GIL_REQUESTED | C.STATUS_GIL_REQUESTED_KNOWN,
                 C.STATUS_GIL_REQUESTED | C.STATUS_GIL_REQUESTED_KNOWN, False, True),
    "state-wall": (0, 0, False, False),
    "state-gil": (_GIL, C.STATUS_GIL_HELD, False, False),
    "state-cpu": (_CPU | _GIL, C.STATUS_ON_CPU, False, False),
    "state-wait": (_CPU | C.STATUS_GIL_HELD | C.STATUS_GIL_REQUESTED
                   | C.STATUS_GIL_REQUESTED_KNOWN,
                   C.STATUS_GIL_REQUESTED | C.STATUS_GIL_REQUESTED_KNOWN, False, False),
}
# The most time slices a sliced view makes (a row each).
MAX_SLICES = 100_000


class SelectionError(PsrecError):
    """The view selects nothing, or names something the recording does not have."""


class ViewUsageError(SelectionError):
    """A view option that cannot be understood (exit status 2, like other usage errors)."""

    exit_code = 2


@dataclass(frozen=True)
class View:
    """What the user asked to look at; resolved against a recording by Profile.load."""

    mode: str = WALL.name  # a name of modes.MODES
    threads: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()  # --task: only samples running these asyncio tasks
    pids: tuple[int, ...] = ()  # --pid: only these processes
    processes: tuple[str, ...] = ()  # --process: processes whose command line holds this
    # Several recordings read as one: only those of these hosts (--host), or these recordings
    # (--recording: a file's name or path, with or without .psr)
    hosts: tuple[str, ...] = ()
    recordings: tuple[str, ...] = ()
    start: str | None = None  # --from: seconds from the start, or a wall-clock time
    end: str | None = None  # --to
    weights: str = WEIGHTS[0]
    by: str = GROUPINGS[0]  # or "line"
    # A native recording's frames (psrec.format.mixed_stacks.NATIVE_VIEWS): "mixed", "all"
    # (--native-all) or "python" (--python-only).
    native: str = "mixed"
    # asyncio tasks' logical stacks (analyzer/logical.py): a task's stack continues into the
    # task that awaits it, instead of the event loop's
    logical: bool = False

    @property
    def mode_record(self) -> Mode:
        """The view's mode (modes.MODES)."""
        return MODES[self.mode]


_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9,
          "m": 60.0, "min": 60.0, "h": 3600.0}
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zµ]*)\s*$")


def parse_duration(text: str) -> float:
    """'1s', '250ms', '0.5', '2m' -> seconds. Raises ValueError."""
    m = _DURATION.match(text)
    if not m or m.group(2) not in _UNITS:
        raise ValueError(f"{text!r} is not a duration (examples: 1s, 250ms, 0.5, 2m)")
    seconds = float(m.group(1)) * _UNITS[m.group(2)]
    if not math.isfinite(seconds):
        raise _OutOfRange(f"{text!r} is out of range")
    return seconds


class _OutOfRange(ValueError):
    """A duration too large for a float (1e400): no other reading of it is tried."""


def parse_time(text: str, created_wall_ns: int) -> float:
    """A --from/--to value -> seconds from the start of the recording. Raises ValueError.

    Accepts seconds from the start ('12.5', '12.5s', '1m'), a local wall-clock time of day on
    the recording's date ('14:02:10', '14:02:10.250') or a full date and time
    ('2024-05-01 14:02:10', ISO 8601, with or without a UTC offset; local time without one).
    """
    t = text.strip()
    try:
        return parse_duration(t)
    except _OutOfRange:
        raise
    except ValueError:
        pass
    start = _dt.datetime.fromtimestamp(created_wall_ns / 1e9).astimezone()
    when: _dt.datetime | None = None
    if re.fullmatch(r"\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?", t):
        parts = t.split(":")
        sec = float(parts[2]) if len(parts) > 2 else 0.0
        when = start.replace(hour=int(parts[0]), minute=int(parts[1]), second=int(sec),
                             microsecond=round((sec - int(sec)) * 1e6))
    else:
        try:
            when = _dt.datetime.fromisoformat(t)
        except ValueError:
            raise ValueError(
                f"{text!r} is neither seconds from the start (12.5, 12.5s, 1m) nor a wall-clock "
                "time (14:02:10, 14:02:10.250, 2024-05-01T14:02:10)"
            ) from None
        if when.tzinfo is None:
            when = when.astimezone()  # local time
    return (when.timestamp() * 1e9 - created_wall_ns) / 1e9


def to_ticks(text: str, rec: Readable, option: str) -> int:
    try:
        seconds = parse_time(text, rec.header.created_wall_ns)
    except ValueError as exc:
        raise ViewUsageError(f"{option}: {exc}", help="see psrec report --help") from None
    ticks = seconds * 1e9 / float(rec.tick_ns)
    # Timestamps are 64-bit counts of ticks: a time beyond them is no time of the recording.
    if not math.isfinite(ticks) or abs(ticks) >= 2.0**63:
        limit = (2**63 - 1) * rec.tick_ns / 1e9
        raise ViewUsageError(f"{option}: {text!r} is out of range (timestamps in this "
                             f"recording reach {limit:.3g} s)")
    return round(ticks)


def gil_wait_unknown(metadata: dict[str, Any]) -> str | None:
    """Why this recording cannot say which threads waited for the GIL, or None when it can:
    the target must keep each thread's GIL request where psrec reads it (CPython 3.15 and
    later, with a GIL). One sentence, for the outputs to say once instead of showing zeros."""
    if (metadata.get("python_build") or {}).get("free_threaded"):
        return "the target is free-threaded: there is no GIL to wait for"
    version = metadata.get("python_version")
    parts = re.match(r"(\d+)\.(\d+)", version) if isinstance(version, str) else None
    # The recorder says whether it could read GIL_REQUESTED (from the target's layout); a
    # recording without that word is judged by its Python's version.
    said = (metadata.get("options") or {}).get("gil_requested")
    if said is True:
        return None
    if parts is None:
        return "the recording does not say which Python it ran, so GIL waits are not known"
    if (int(parts.group(1)), int(parts.group(2))) < GIL_WAIT_SINCE:
        return (f"Python {version} does not say which threads wait for the GIL (CPython "
                f"{GIL_WAIT_SINCE[0]}.{GIL_WAIT_SINCE[1]} and later do): the "
                f"{GIL_WAIT.name} view is empty, not zero")
    if said is False:
        return (f"the recorder could not read which threads of Python {version} waited for the "
                f"GIL: the {GIL_WAIT.name} view is empty, not zero")
    return None


def _thread_matches(t: ThreadInfo, spec: str, number: int | None) -> bool:
    if number is not None and number in (t.os_tid, t.python_tid):
        return True
    return t.name == spec or any(n == spec for _, n in t.names)


def match_threads(
    specs: tuple[str, ...], rec: Readable, defs: Definitions, engine: Engine
) -> list[int]:
    """Threads by OS or Python thread id, or by any name they had. A name a thread got only
    later (THREAD_RENAME, e.g. threading's name read after the thread started) is in the data
    chunks: the engine reads their renames to find it, without decoding their samples."""
    refs: list[int] = []
    renamed = False
    for spec in specs:
        s, number = _spec(spec)
        found = [t.ref for t in defs.threads.values() if _thread_matches(t, s, number)]
        if not found and not renamed:
            defs.apply_renames(engine.thread_renames(rec))
            renamed = True
            found = [t.ref for t in defs.threads.values() if _thread_matches(t, s, number)]
        if not found:
            names = sorted({f"{t.name or '?'} (tid {t.os_tid or t.python_tid})"
                            for t in defs.threads.values()})
            shown = ", ".join(names[:10]) + (" ..." if len(names) > 10 else "")
            raise SelectionError(
                f"no thread named or numbered {spec!r} in {rec.path}",
                help=f"threads in this recording: {shown or 'none'}",
            )
        refs.extend(r for r in found if r not in refs)
    return refs


def _spec(spec: str) -> tuple[str, int | None]:
    """A word that names a thread or a task, stripped, and the number it also is (decimal or
    0x...), if it is one."""
    s = spec.strip()
    try:
        return s, int(s, 0)
    except ValueError:
        return s, None


def match_tasks(specs: tuple[str, ...], rec: Readable, defs: Definitions) -> list[int]:
    """asyncio tasks (TASK ids) by name, by the name of their coroutine's function (qualified
    or not: every task made from it), by id, or by address (asyncio's own task id, 0x...)."""
    ids: list[int] = []
    for spec in specs:
        s, number = _spec(spec)
        found = []
        for t in defs.tasks.values():
            coro = t.coroutine.name if t.coroutine else None
            if (s == t.name or (coro is not None and s in (coro, coro.rpartition(".")[2]))
                    or number in (t.id, t.address)):
                found.append(t.id)
        if not found:
            names = sorted({t.label for t in defs.tasks.values()})
            shown = ", ".join(names[:10]) + (" ..." if len(names) > 10 else "")
            raise SelectionError(
                f"no asyncio task named, made from a coroutine named, or numbered {spec!r} in "
                f"{rec.path}",
                help=(f"tasks in this recording: {shown} (psrec report --tasks lists them)"
                      if names else "this recording has no asyncio tasks"))
        ids.extend(i for i in found if i not in ids)
    return ids


def processes(defs: Definitions, metadata: dict[str, Any]) -> list[ProcessInfo]:
    """The programs the recording's processes ran, in start order. A file from before format
    1.1 has no PROCESS definitions: its target is named from the metadata, other processes
    by their threads' pids."""
    if defs.processes:
        return list(defs.processes)
    found: dict[int, ProcessInfo] = {}
    root = metadata.get("pid")
    if isinstance(root, int):
        found[root] = ProcessInfo(root, 0, " ".join(metadata.get("command") or []), 0)
    for t in sorted(defs.threads.values(), key=lambda t: t.start_ts):
        found.setdefault(t.pid, ProcessInfo(t.pid, 0, "", t.start_ts))
    return list(found.values())


def short_command(command: str, width: int = 48) -> str:
    """The command line with the program's folder left out, cut to width."""
    program, _, args = command.partition(" ")
    short = program.rsplit("/", 1)[-1] + (" " + args if args else "")
    return short if len(short) <= width else short[: width - 3] + "..."


def match_processes(view: View, rec: Readable, defs: Definitions) -> list[int]:
    """Threads of the processes --pid names (every program each ran), and of the programs
    whose command line holds a --process text (a process that exec'd ran several)."""
    procs = processes(defs, rec.metadata)
    for pid in view.pids:
        if not any(p.pid == pid for p in procs):
            raise SelectionError(f"no process with pid {pid} in {rec.path}",
                                 help=_processes_help(procs))
    for text in view.processes:
        if not any(text in p.command for p in procs):
            raise SelectionError(f"no process whose command holds {text!r} in {rec.path}",
                                 help=_processes_help(procs))

    def program(t: ThreadInfo) -> str:
        p = defs.process_of(t)
        if p is None:  # before format 1.1: by pid
            p = next((q for q in procs if q.pid == t.pid), None)
        return p.command if p is not None else ""

    return [t.ref for t in defs.threads.values()
            if t.pid in view.pids or any(text in program(t) for text in view.processes)]


def match_sources(view: View, rec: Readable,
                  defs: Definitions) -> list[int]:
    """Threads of the recordings --host and --recording name (a recording read alone is one
    of them: its host, its file)."""
    if isinstance(rec, MergedRecording):
        found = [(s.host, s.paths or (s.path,), range(s.thread_offset, s.threads_end))
                 for s in rec.sources]
    else:
        found = [(str(rec.metadata.get("hostname") or ""), (rec.path,), range(0, 2**32))]

    def named(paths: tuple[str, ...], text: str) -> bool:
        return any(text in (p, os.path.basename(p), os.path.basename(p).removesuffix(".psr"))
                   for p in paths)

    def listed() -> str:
        shown = "; ".join(f"{host or '?'}: {', '.join(os.path.basename(p) for p in paths)}"
                          for host, paths, _ in found[:8])
        return f"hosts and recordings: {shown}" + (" ..." if len(found) > 8 else "")

    for host in view.hosts:
        if not any(h == host for h, _, _ in found):
            raise SelectionError(f"no recording from host {host!r} in {rec.path}",
                                 help=listed())
    for text in view.recordings:
        if not any(named(paths, text) for _, paths, _ in found):
            raise SelectionError(f"no recording named {text!r} in {rec.path}", help=listed())
    chosen = [refs for host, paths, refs in found
              if (not view.hosts or host in view.hosts)
              and (not view.recordings or any(named(paths, t) for t in view.recordings))]
    return [t.ref for t in defs.threads.values() if any(t.ref in r for r in chosen)]


def _processes_help(procs: list[ProcessInfo]) -> str:
    shown = "; ".join(f"pid {p.pid}: {short_command(p.command) or '?'}" for p in procs[:8])
    return f"processes in this recording: {shown or 'none'}" + (" ..." if len(procs) > 8 else "")
