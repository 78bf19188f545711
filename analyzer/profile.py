"""The Profile model: one pass over a recording, filtered by a view, aggregated once.

Every reporter and exporter consumes a Profile. Aggregated views read ``cells`` (samples summed
by slice, thread and stack node, so memory grows with distinct stacks, not samples); ordered
views (speedscope) read ``timelines`` (each thread's samples in time order, consecutive samples
with the same stack merged into runs).
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from array import array
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from psrec.format import PsrecError, Recording, ThreadInfo, open_recording
from psrec.format import constants as C
from psrec.format.reader import Definitions, ProcessInfo

from . import engine
from .engine import Runs

__all__ = [
    "MODES",
    "NO_STACK",
    "WEIGHTS",
    "Cell",
    "CellColumns",
    "FrameKey",
    "Profile",
    "Runs",
    "SelectionError",
    "View",
    "ViewUsageError",
    "parse_duration",
    "parse_time",
]

# mode -> (status mask, status value): a sample is kept when status & mask == value.
# Samples whose CPU or GIL state could not be read are left out of the views that need it.
MODES: dict[str, tuple[int, int]] = {
    "wall": (0, 0),
    "cpu": (C.STATUS_ON_CPU | C.STATUS_CPU_UNKNOWN, C.STATUS_ON_CPU),
    "gil": (C.STATUS_GIL_HELD | C.STATUS_GIL_UNKNOWN, C.STATUS_GIL_HELD),
    "idle": (C.STATUS_ON_CPU | C.STATUS_CPU_UNKNOWN, 0),
}
MODE_HELP = {
    "wall": "every sample",
    "cpu": "samples on a CPU and the CPU time used between samples, weighted by CPU time",
    "gil": "samples holding the GIL",
    "idle": "samples off CPU",
}
WEIGHTS = ("time", "count")
# The most time slices a sliced view makes (a row each).
MAX_SLICES = 100_000


class SelectionError(PsrecError):
    """The view selects nothing, or names something the recording does not have."""


class ViewUsageError(SelectionError):
    """A view option that cannot be understood (exit status 2, like other usage errors)."""

    exit_code = 2


class FrameKey(NamedTuple):
    """What a report groups by: a function (line = its first line) or a line of a function."""

    filename: str
    line: int
    name: str


NO_STACK = FrameKey("<psrec>", 0, "[no Python stack]")
TRUNCATED_KEY = FrameKey("<psrec>", 0, "[truncated stack]")


class Cell(NamedTuple):
    slice: int
    thread: int
    node: int
    samples: int
    weight: int  # ticks
    cpu: int  # CPU ticks
    gil: int  # samples holding the GIL
    on_cpu: int  # samples on a CPU


@dataclass
class CellColumns:
    """The cells as columns, for native aggregation over many cells (one per slice)."""

    slice: array[int]
    thread: array[int]
    node: array[int]
    samples: array[int]
    weight: array[int]
    cpu: array[int]
    gil: array[int]
    on_cpu: array[int]

    @classmethod
    def empty(cls) -> CellColumns:
        # Slices are 64-bit: a recording's timestamps span up to 2^63 ticks.
        return cls(array("Q"), array("I"), array("I"), array("Q"), array("Q"), array("Q"),
                   array("Q"), array("Q"))

    @classmethod
    def from_native(cls, parts: tuple[bytes, ...]) -> CellColumns:
        out = cls.empty()
        for col, data in zip(out.columns(), parts):
            col.frombytes(data)
        return out

    @classmethod
    def from_cells(cls, cells: list[tuple[int, ...]]) -> CellColumns:
        out = cls.empty()
        for col, values in zip(out.columns(), zip(*cells)):
            col.extend(values)
        return out

    def columns(self) -> tuple[array[int], ...]:
        return (self.slice, self.thread, self.node, self.samples, self.weight, self.cpu,
                self.gil, self.on_cpu)

    def __len__(self) -> int:
        return len(self.node)

    def cells(self) -> list[Cell]:
        return list(map(Cell._make, zip(*self.columns())))


@dataclass(frozen=True)
class View:
    """What the user asked to look at; resolved against a recording by Profile.load."""

    mode: str = "wall"
    threads: tuple[str, ...] = ()
    pids: tuple[int, ...] = ()  # --pid: only these processes
    processes: tuple[str, ...] = ()  # --process: processes whose command line holds this
    start: str | None = None  # --from: seconds from the start, or a wall-clock time
    end: str | None = None  # --to
    weights: str = "time"
    by: str = "function"  # or "line"


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


@dataclass
class Profile:
    path: str
    metadata: dict[str, Any]
    tick_ns: int
    interval_ticks: int
    created_wall_ns: int
    defs: Definitions
    view: View
    parents: array[int]
    frames: array[int]
    columns: CellColumns
    threads: dict[int, ThreadInfo]  # every thread of the recording, by ref
    selected_threads: list[int] | None  # refs the view selects; None: all
    from_ts: int | None
    to_ts: int | None
    selected: int  # samples in the view
    first_ts: int
    last_ts: int
    extent: tuple[int, int]  # first and last sample timestamps of the whole recording
    cpu_weighted: bool  # cpu mode on a recording that has CPU times
    slice_ticks: int = 0
    timelines: dict[int, Runs] | None = None
    events: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    sample_errors: int = 0
    warnings: list[str] = field(default_factory=list)
    _stacks: dict[int, tuple[int, ...]] = field(default_factory=dict, repr=False)
    _keys: dict[int, FrameKey] = field(default_factory=dict, repr=False)
    _node_keys: dict[int, tuple[FrameKey, ...]] = field(default_factory=dict, repr=False)
    _cells: list[Cell] | None = field(default=None, repr=False)
    native: bool = True  # the native engine does the work (where it is built)
    _walks: engine.Walks | None = field(default=None, repr=False)

    # -- building ------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        path: str,
        view: View = View(),
        *,
        slice_ticks: int = 0,
        slice_seconds: float = 0.0,
        timelines: bool = False,
        native: bool | None = None,
        warn: Any = None,
    ) -> Profile:
        """Reads the recording once and aggregates the samples the view selects.

        slice_seconds (or slice_ticks) > 0 keeps the cells per time slice; timelines=True also
        keeps every selected thread's samples in time order (for speedscope).
        """
        if view.mode not in MODES:
            raise SelectionError(f"unknown mode {view.mode!r}", help="use wall, cpu, gil or idle")
        with open_recording(path) as rec:
            return cls._load(rec, view, slice_ticks, slice_seconds, timelines, native, warn)

    @classmethod
    def _load(
        cls,
        rec: Recording,
        view: View,
        slice_ticks: int,
        slice_seconds: float,
        want_timelines: bool,
        native: bool | None,
        warn: Any,
    ) -> Profile:
        tick_ns = rec.tick_ns
        defs = rec.definitions()
        if slice_seconds > 0:
            slice_ticks = max(1, round(slice_seconds * 1e9 / tick_ns))
        from_ts = to_ts = None
        if view.start is not None:
            from_ts = _to_ticks(view.start, rec, "--from")
        if view.end is not None:
            to_ts = _to_ticks(view.end, rec, "--to")
        if from_ts is not None and to_ts is not None and to_ts <= from_ts:
            raise ViewUsageError(
                f"--to ({view.end}) is not after --from ({view.start})",
                help="give a window whose end comes after its start",
            )
        refs = _match_threads(view.threads, rec, defs, native) if view.threads else None
        if view.pids or view.processes:
            in_process = _match_processes(view, rec, defs)
            refs = in_process if refs is None else [r for r in refs if r in set(in_process)]

        mask, value = MODES[view.mode]
        stream = rec.stream(from_ts, to_ts, native=native)
        query: dict[str, Any] = {"status_mask": mask, "status_value": value, "threads": refs,
                                 "cpu_view": view.mode == "cpu"}
        if from_ts is not None:
            query["from_ts"] = from_ts
        if to_ts is not None:
            query["to_ts"] = to_ts
        acc = engine.accumulator(stream.native, slice_origin=0, slice_ticks=slice_ticks,
                                 **query)
        timeline = engine.timeline(stream.native, query) if want_timelines else None
        total = 0
        for batch in stream:
            total += len(batch)
            acc.add(batch)
            if timeline is not None:
                timeline.add(batch)

        extent = _extent(rec, stream)
        if hasattr(acc, "columns"):
            columns = CellColumns.from_native(acc.columns())
        else:
            columns = CellColumns.from_cells(acc.cells())
        prof = cls(
            path=rec.path,
            metadata=rec.metadata,
            tick_ns=tick_ns,
            interval_ticks=rec.interval_ticks,
            created_wall_ns=rec.header.created_wall_ns,
            defs=defs,
            view=view,
            parents=array("I", stream.decoder.trie_parents()),
            frames=array("I", stream.decoder.trie_frames()),
            columns=columns,
            threads=dict(defs.threads),
            selected_threads=refs,
            from_ts=from_ts,
            to_ts=to_ts,
            selected=acc.selected,
            first_ts=acc.first_ts,
            last_ts=acc.last_ts,
            extent=extent,
            cpu_weighted=view.mode == "cpu" and any(columns.cpu),
            slice_ticks=slice_ticks,
            timelines=timeline.result() if timeline is not None else None,
            events=list(stream.events),
            sample_errors=stream.errors,
            warnings=list(rec.warnings),
            native=bool(stream.native),
        )
        prof.defs.apply_renames(prof.events)
        if warn is not None:
            for w in prof.warnings:
                warn(w)
        if prof.selected == 0:
            raise SelectionError(prof._nothing_selected(total), help=prof._nothing_help(total))
        if slice_ticks > 0:
            prof._check_slices(getattr(acc, "slice_overflow", False))
        return prof

    def _check_slices(self, overflow: bool) -> None:
        """The time-sliced views write a row for every slice from the earliest sample's to the
        latest's: their number is bounded by the samples' extent, and refused beyond
        MAX_SLICES (two samples years apart in a file of a few hundred bytes made 8M rows).
        overflow: the accumulator found samples more than 2^31 slices apart."""
        col = self.columns.slice
        if not col:
            return
        first, last = min(col), max(col)
        n = last - first + 1
        if n <= MAX_SLICES and not overflow:
            return
        span = self.seconds((last - first) * self.slice_ticks)
        least = _round_up(span / (MAX_SLICES - 1))
        rows = f"more than {2**31:,}" if overflow else f"{n:,}"
        raise ViewUsageError(
            f"--slices: slices of {self.seconds(self.slice_ticks):g} s would make {rows} rows "
            f"over the {span:,.3f} s the samples span, more than {MAX_SLICES:,}",
            help=f"give slices of at least {least:g} s, or a window with --from and --to",
        )

    def _window_text(self) -> str:
        a = "start" if self.from_ts is None else f"{self.seconds(self.from_ts):.3f} s"
        b = "end" if self.to_ts is None else f"{self.seconds(self.to_ts):.3f} s"
        return f"{a} .. {b}"

    def _nothing_selected(self, total: int) -> str:
        if total == 0 and self.from_ts is None and self.to_ts is None:
            return f"{self.path}: the recording holds no samples"
        first, last = self.extent
        if first >= 0 and (
            (self.from_ts is not None and self.from_ts > last)
            or (self.to_ts is not None and self.to_ts <= first)
        ):
            return (
                f"the window {self._window_text()} is outside the recording, whose samples run "
                f"from {self.seconds(first):.3f} s to {self.seconds(last):.3f} s"
            )
        parts = [f"mode {self.view.mode}"]
        if self.view.threads:
            parts.append("thread " + ", ".join(self.view.threads))
        if self.view.pids:
            parts.append("pid " + ", ".join(map(str, self.view.pids)))
        if self.view.processes:
            parts.append("process " + ", ".join(self.view.processes))
        if self.from_ts is not None or self.to_ts is not None:
            parts.append(f"window {self._window_text()}")
        return f"no samples match the selection ({'; '.join(parts)}) in {self.path}"

    def _nothing_help(self, total: int) -> str | None:
        if total == 0 and self.from_ts is None and self.to_ts is None:
            return "record for longer, or check that the target ran Python code"
        if self.view.mode != "wall":
            return "try --mode wall, or widen the window or the thread selection"
        return "widen the window or the thread selection (psrec info shows what the file holds)"

    @property
    def cells(self) -> list[Cell]:
        """Samples summed by slice, thread and stack node (made on first use)."""
        if self._cells is None:
            self._cells = self.columns.cells()
        return self._cells

    # -- values --------------------------------------------------------------------------
    def value(self, count: int, weight: int, cpu: int) -> int:
        """Estimated time, in ticks, of samples with these sums, under the view's weights."""
        if self.view.weights == "count":
            return count * self.interval_ticks
        if self.cpu_weighted:
            return cpu
        return weight

    def cell_value(self, c: Cell) -> int:
        return self.value(c.samples, c.weight, c.cpu)

    def seconds(self, ticks: float) -> float:
        return ticks * self.tick_ns / 1e9

    @property
    def total_value(self) -> int:
        col, mult = self.value_column()
        return sum(col) * mult

    def value_column(self) -> tuple[array[int], int]:
        """The cell column that holds the view's values, and the factor it is multiplied by."""
        if self.view.weights == "count":
            return self.columns.samples, self.interval_ticks
        if self.cpu_weighted:
            return self.columns.cpu, 1
        return self.columns.weight, 1

    @property
    def unit_label(self) -> str:
        return "samples" if self.view.weights == "count" else "time"

    # -- stacks and names ----------------------------------------------------------------
    def stack(self, node: int) -> tuple[int, ...]:
        """Frame ids of a trie node's stack, root first."""
        s = self._stacks.get(node)
        if s is None:
            frames: list[int] = []
            n = node
            parents, fr = self.parents, self.frames
            while n:
                cached = self._stacks.get(n)
                if cached is not None:
                    frames.extend(reversed(cached))
                    break
                frames.append(fr[n])
                n = parents[n]
            s = tuple(reversed(frames))
            self._stacks[node] = s
        return s

    def key(self, frame_id: int) -> FrameKey:
        """The report key of a frame, by function or by line as the view asks."""
        k = self._keys.get(frame_id)
        if k is None:
            if frame_id == C.TRUNCATED_FRAME:
                k = TRUNCATED_KEY
            else:
                f = self.defs.frame(frame_id)
                fn = f.function
                line = f.line if self.view.by == "line" else fn.first_line
                k = FrameKey(fn.filename, line, fn.name)
            self._keys[frame_id] = k
        return k

    def leaf(self, node: int) -> FrameKey:
        """The report key of a stack's innermost frame (NO_STACK for the empty stack)."""
        return self.key(self.frames[node]) if node else NO_STACK

    def keys(self, node: int) -> tuple[FrameKey, ...]:
        """Report keys of a stack, root first; the empty stack is NO_STACK."""
        cache = self._node_keys
        ks = cache.get(node)
        if ks is not None:
            return ks
        if node == 0:
            ks = cache[0] = (NO_STACK,)
            return ks
        # A stack is its parent's plus one frame: walk up to the nearest known stack only.
        # Only the stack asked for is kept: keeping every prefix on the way cost memory in
        # the square of the depth (270 MB for one stack 8192 frames deep).
        chain = []
        n = node
        parents, frames = self.parents, self.frames
        while n and n not in cache:
            chain.append(self.key(frames[n]))
            n = parents[n]
        base: tuple[FrameKey, ...] = cache[n] if n else ()
        chain.reverse()
        ks = cache[node] = base + tuple(chain)
        return ks

    @property
    def walks(self) -> engine.Walks:
        """The engine's walks over this profile's stacks by report key (totals, edges, slice
        sums, speedscope text): native unless the profile was loaded without it."""
        if self._walks is None:
            self._walks = engine.walks(self, self.native)
        return self._walks

    def thread_label(self, ref: int) -> str:
        """'name (tid N)'; with more than one process (or program) in the recording, the
        thread's process and its command too."""
        t = self.threads.get(ref)
        if t is None:
            return f"thread ref {ref}"
        tid = t.os_tid or t.python_tid
        label = f"{t.name or 'thread'} (tid {tid}"
        procs = processes(self.defs, self.metadata)
        if len(procs) > 1 or len({x.pid for x in self.threads.values()}) > 1:
            p = self.defs.process_of(t)
            label += f", pid {t.pid}"
            if p is not None and p.command:
                label += f": {_short_command(p.command)}"
        return label + ")"

    def thread_refs(self) -> list[int]:
        """Threads with selected samples, in order of first appearance."""
        seen: dict[int, int] = {}
        for ref in dict.fromkeys(self.columns.thread):
            seen[ref] = self.threads[ref].start_ts if ref in self.threads else 0
        return sorted(seen, key=lambda r: (seen[r], r))

    @property
    def free_threaded(self) -> bool:
        """A free-threaded target: no GIL, and the GIL bit records 'attached' instead."""
        return bool((self.metadata.get("python_build") or {}).get("free_threaded"))

    def describe(self) -> str:
        """One line saying what the view holds, for report headers."""
        dur = self.seconds(self.last_ts - self.first_ts) if self.last_ts >= self.first_ts else 0
        nthreads = len(set(self.columns.thread))
        what = MODE_HELP[self.view.mode]
        if self.view.mode == "gil" and self.free_threaded:
            what = ("the GIL does not apply: a free-threaded target; samples attached to the "
                    "interpreter")
        s = (
            f"{self.path}: {self.selected:,} samples over {dur:.3f} s in {nthreads} "
            f"thread{'s' if nthreads != 1 else ''}; mode {self.view.mode} "
            f"({what}), weights {self.view.weights}"
        )
        if self.from_ts is not None or self.to_ts is not None:
            s += f", window {self._window_text()}"
        if self.view.mode == "cpu" and self.view.weights == "time" and not self.cpu_weighted:
            s += " (no CPU times recorded: on-CPU samples weighted by wall time)"
        return s


def _to_ticks(text: str, rec: Recording, option: str) -> int:
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


def _round_up(x: float) -> float:
    """x rounded up to 1, 2 or 5 times a power of ten."""
    if x <= 0:
        return 0.0
    p = 10.0 ** math.floor(math.log10(x))
    return next(m * p for m in (1, 2, 5, 10) if m * p >= x * (1 - 1e-12))


def _thread_matches(t: ThreadInfo, spec: str, number: int | None) -> bool:
    if number is not None and number in (t.os_tid, t.python_tid):
        return True
    return t.name == spec or any(n == spec for _, n in t.names)


def _match_threads(
    specs: tuple[str, ...], rec: Recording, defs: Definitions, native: bool | None
) -> list[int]:
    """Threads by OS or Python thread id, or by any name they had. A name a thread got only
    later (THREAD_RENAME, e.g. threading's name read after the thread started) is in the data
    chunks: they are read once more to find it."""
    refs: list[int] = []
    renamed = False
    for spec in specs:
        s = spec.strip()
        number: int | None = None
        try:
            number = int(s, 0)
        except ValueError:
            pass
        found = [t.ref for t in defs.threads.values() if _thread_matches(t, s, number)]
        if not found and not renamed:
            scan = rec.stream(native=native)
            for _ in scan:
                pass
            defs.apply_renames(scan.events)
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


def _short_command(command: str, width: int = 48) -> str:
    """The command line with the program's folder left out, cut to width."""
    program, _, args = command.partition(" ")
    short = program.rsplit("/", 1)[-1] + (" " + args if args else "")
    return short if len(short) <= width else short[: width - 3] + "..."


def _match_processes(view: View, rec: Recording, defs: Definitions) -> list[int]:
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


def _processes_help(procs: list[ProcessInfo]) -> str:
    shown = "; ".join(f"pid {p.pid}: {_short_command(p.command) or '?'}" for p in procs[:8])
    return f"processes in this recording: {shown or 'none'}" + (" ..." if len(procs) > 8 else "")


def _extent(rec: Recording, stream: Any) -> tuple[int, int]:
    firsts: list[int] = []
    lasts: list[int] = []
    if rec.clean:
        for c in rec.data_chunks():
            if c.passes:
                firsts.append(c.first_ts)
                lasts.append(c.last_ts)
    else:
        for s in stream.summaries:
            if s["first_ts"] >= 0:
                firsts.append(s["first_ts"])
                lasts.append(s["last_ts"])
    if not firsts:
        return (-1, -1)
    return (min(firsts), max(lasts))
