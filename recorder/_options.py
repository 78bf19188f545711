"""What a recording is asked for (RecordOptions), what it gives back (RecordResult), and
`psrec record`'s options, declared once (RECORD_OPTIONS): each one's command-line form and
help, how its text is read, the RecordOptions field it sets, and what of it goes to the
native sampler and to the file's metadata."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import RecorderUsageError

__all__ = ["MAX_RATE_HZ", "RECORD_OPTIONS", "RecordOption", "RecordOptions", "RecordResult",
           "parse_duration", "parse_rate", "parse_size", "parse_task_rate", "record_options",
           "window_name"]

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(k)?\s*(hz)?\s*$", re.IGNORECASE)
MAX_RATE_HZ = 1_000_000.0  # "max": passes back to back, no sleeping (the sampler's floor)
DEFAULT_TASK_RATE_HZ = 1000.0  # task snapshots a second at most, unless asked otherwise
# The rate of a flight recording (--keep, --max-size) unless -r says otherwise: always on, its
# cost to the target stays within the noise (tests/perf figure K).
ALWAYS_ON_RATE_HZ = 100.0

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_DURATION_UNITS = {None: 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0,
                   "d": 86400.0}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|k|kb|kib|m|mb|mib|g|gb|gib)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {None: 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20,
               "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}


def parse_duration(option: str, text: str, least: float = 1.0) -> float:
    """'90', '20s', '10m', '1h', '500ms' -> seconds, at least `least` (wrong usage otherwise)."""
    m = _DURATION.match(text)
    seconds = float(m.group(1)) * _DURATION_UNITS[(m.group(2) or "").lower() or None] if m else 0
    if not m or seconds < least:
        raise RecorderUsageError(
            f"{option} {text!r} is not a duration of {least:g} s or more",
            help=f"give seconds, minutes or hours: {option} 90, {option} 10m, {option} 1h")
    return seconds


def parse_size(option: str, text: str, least: int = 1 << 16) -> int:
    """'200M', '1G', '500k', '1048576' -> bytes (units of 1024), at least `least`."""
    m = _SIZE.match(text)
    size = int(float(m.group(1)) * _SIZE_UNITS[(m.group(2) or "").lower() or None]) if m else 0
    if not m or size < least:
        raise RecorderUsageError(
            f"{option} {text!r} is not a size of {least >> 10} KiB or more",
            help=f"give bytes with a unit: {option} 200M, {option} 1G")
    return size


def window_name(pattern: str, n: int, wall_ns: int) -> str:
    """The name of window n (from 0) of --window: -o's pattern with {n} (the window's number)
    and {time} (when it began, UTC, 20261128T023000Z) filled in."""
    import time

    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(wall_ns / 1e9))
    return pattern.replace("{n}", str(n)).replace("{time}", stamp)


def parse_rate(text: str | float | int) -> float:
    """'1000', '10k', '10khz', '250hz', '1.5k' -> samples per second; 'max' -> as fast as
    possible. A rate it cannot take is wrong usage (RecorderUsageError, exit status 2)."""
    if isinstance(text, str) and text.strip().lower() == "max":
        return MAX_RATE_HZ
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        m = _RATE.match(text)
        if not m:
            raise RecorderUsageError(
                f"invalid rate {text!r}",
                help="give samples per second (1000, 10k or 10khz), or -r max to sample as fast "
                     "as possible",
            )
        value = float(m.group(1)) * (1000 if m.group(2) else 1)
    if not (0 < value <= 100_000) and value != MAX_RATE_HZ:
        raise RecorderUsageError(
            f"rate {value:g} Hz is out of range",
            help="choose a rate between 1 Hz and 100 kHz, or -r max to sample as fast as possible",
        )
    return value


def parse_seconds(text: str) -> float:
    """-d's value: a number of seconds above 0. nan (which passes every range check, comparing
    false with everything) and inf are no duration."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (0 < seconds < math.inf):
        raise RecorderUsageError(f"--duration: {text!r} is not a number of seconds above 0")
    return seconds


def parse_task_rate(text: str) -> float:
    """--task-rate: task snapshots a second, as -r reads a rate (not `max`)."""
    try:
        value = parse_rate(text)
    except RecorderUsageError:
        value = MAX_RATE_HZ
    if value == MAX_RATE_HZ:
        raise RecorderUsageError(f"--task-rate {text!r} is not a rate",
                                 help="give task snapshots a second, from 1 to 100k, for "
                                      "example --task-rate 1k")
    return value


@dataclass(frozen=True)
class RecordOptions:
    output: str
    pid: int | None = None
    command: tuple[str, ...] = ()
    rate_hz: float = 1000.0
    duration: float | None = None
    subprocesses: bool = False
    blocking: bool = False
    force: bool = False
    quiet: bool = False
    realtime: bool = False  # SCHED_FIFO for the sampling thread where permitted
    cpu_source: str = "auto"  # "auto": context switches where permitted, else /proc; "procfs"
    attach_timeout: float = 10.0
    native: bool = False  # native frames interleaved with the Python ones (spec section 10)
    frame_cache: bool = True  # 3.15+: CPython's frame cache for profilers (one pointer written)
    tasks: bool = True  # the asyncio task each thread runs, once asyncio is imported
    # How often every task's state is read at most (None: the sampling rate, at most 1 kHz).
    task_rate_hz: float | None = None
    # A flight recording: only the last keep_s seconds and/or max_bytes stay in the file.
    keep_s: float | None = None
    max_bytes: int | None = None
    # Windows: a new file every window_s seconds, output being a pattern (window_name).
    window_s: float | None = None

    @property
    def task_rate(self) -> float:
        """The most task snapshots a second (spec 4.3's METADATA options.task_rate_hz)."""
        if self.task_rate_hz is not None:
            return self.task_rate_hz
        return min(self.rate_hz, DEFAULT_TASK_RATE_HZ)

    def sampler_config(self) -> dict[str, Any]:
        """The native Sampler's keywords that the options set."""
        return dict(self._entries("sampler"))

    def metadata(self) -> dict[str, Any]:
        """The options the file's METADATA records (its `options` map, spec section 2)."""
        return dict(self._entries("metadata"))

    def _entries(self, kind: str) -> list[tuple[str, Any]]:
        out = []
        for o in RECORD_OPTIONS:
            make = getattr(o, kind)
            if make is True:
                out.append((o.field, getattr(self, o.field)))
            elif make:
                out.append(make(self))
        return out


@dataclass(frozen=True)
class RecordResult:
    output: str
    pid: int
    exit_code: int | None  # the launched program's exit status (None when attached)
    stats: dict[str, Any] = field(default_factory=dict)
    bytes_written: int = 0
    stopped_by: str = ""  # "exit", "duration", "interrupt", "terminate", "exec", ...
    files: list[str] = field(default_factory=list)  # every file written (--window: several)



@dataclass(frozen=True)
class RecordOption:
    """One option of `psrec record`. `field` is the RecordOptions field it sets (or, for the
    command's own -v, none of them), from the text given by `parse`; `sampler` and `metadata`
    give, from the options, the native Sampler's keyword and the METADATA entry it makes
    (True: the field's name and value as they are)."""

    decls: tuple[str, ...]  # its names on the command line
    field: str
    help: str
    flag: bool = False  # a flag (--x), or a pair (--x/--no-x) with default
    default: Any = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    show_default: bool = False
    path: bool = False  # a file's path: required
    parse: Callable[[str], Any] | None = None  # its text, read (RecorderUsageError if wrong)
    sampler: bool | Callable[[RecordOptions], tuple[str, Any]] = False
    metadata: bool | Callable[[RecordOptions], tuple[str, Any]] = False


RECORD_OPTIONS: tuple[RecordOption, ...] = (
    RecordOption(
        ("-o", "--output"), "output",
        "The recording to write (.psr), or - for standard output. A name that is not a file "
        "is written in place only if it is one of psrec's own descriptors (/dev/stdout, "
        "/dev/fd/N) or a FIFO or character device that you or root own, reached through no "
        "link another user made; a block device or a socket never. A FIFO is waited for "
        "until a process reads it.", path=True),
    RecordOption(
        ("-r", "--rate"), "rate_hz",
        "Samples per second: 1000, 10k or 10khz; max: as fast as possible (default: 1000; "
        "100 with --keep or --max-size).", parse=parse_rate),
    RecordOption(
        ("-d", "--duration"), "duration",
        "Seconds to record (default: until the target exits or Ctrl-C).", metavar="SECONDS",
        parse=parse_seconds, metadata=True),
    RecordOption(
        ("--subprocesses",), "subprocesses",
        "Also record child Python processes (e.g. multiprocessing workers).", flag=True,
        sampler=True, metadata=True),
    RecordOption(
        ("--blocking",), "blocking",
        "Pause the target during each sample for exactly consistent stacks.", flag=True,
        sampler=True, metadata=True),
    RecordOption(
        ("--native",), "native",
        "Also record each thread's native (C, C++, Rust) frames, interleaved with its Python "
        "frames, without stopping the target (perf events); they are named from the target's "
        "binaries as they are recorded.", flag=True,
        sampler=True, metadata=True),
    RecordOption(
        ("--realtime",), "realtime",
        "Give the sampling thread real-time priority (SCHED_FIFO, where permitted) to keep to "
        "its deadlines on a busy machine; it preempts the target, so the target slows down "
        "more.", flag=True, sampler=True),
    RecordOption(
        ("--cpu-source",), "cpu_source",
        "Where each thread's CPU state and time come from: auto reads its context switches "
        "from a perf event ring (no system call per sample) where perf_event_open is "
        "permitted, else /proc/PID/task/TID/{schedstat,stat}; procfs always reads the files.",
        default="auto", choices=("auto", "procfs"), show_default=True,
        sampler=lambda o: ("cpu_switches", o.cpu_source != "procfs"),
        metadata=True),
    RecordOption(
        ("--frame-cache/--no-frame-cache",), "frame_cache",
        "Targets on CPython 3.15+: read the outer frames of deep stacks from the frame cache "
        "CPython keeps for profilers, for which psrec writes one pointer into each thread's "
        "state (last_profiled_frame), as CPython's own sampler does. --no-frame-cache reads "
        "every frame and writes nothing.", flag=True, default=True, show_default=True,
        sampler=True),
    RecordOption(
        ("--tasks/--no-tasks",), "tasks",
        "Once the target imports asyncio, record which task each thread runs at each sample "
        "(its name, its coroutine), for the reports' task views. --no-tasks reads nothing of "
        "asyncio.", flag=True, default=True, show_default=True,
        sampler=True, metadata=True),
    RecordOption(
        ("--task-rate",), "task_rate_hz",
        "How often, at most, every asyncio task's state is read (suspended or ready, its "
        "coroutines down to its await, the tasks it waits on), for the time tasks spend "
        "waiting: 100, 1k (default: the sampling rate, at most 1k). Reading thousands of tasks "
        "is slower: psrec then reads them less often, spending at most a tenth of its time on "
        "it.", metavar="RATE", parse=parse_task_rate,
        sampler=lambda o: ("task_interval_ns", int(1e9 / o.task_rate)),
        metadata=lambda o: ("task_rate_hz", o.task_rate if o.tasks else 0)),
    RecordOption(
        ("--keep",), "keep_s",
        "A flight recorder: record until stopped, keeping in the file only the samples of the "
        "last DURATION (90, 20s, 10m, 1h); the oldest are dropped a chunk at a time, and the "
        "file read at any moment is a whole recording. The rate is 100 Hz unless -r says "
        "otherwise.", metavar="DURATION", parse=lambda t: parse_duration("--keep", t)),
    RecordOption(
        ("--max-size",), "max_bytes",
        "A flight recorder whose file never grows past SIZE (200M, 1G); with --keep, both "
        "bounds hold.", metavar="SIZE", parse=lambda t: parse_size("--max-size", t)),
    RecordOption(
        ("--window",), "window_s",
        "Close the file every DURATION and go on in the next: -o is a pattern with {n} (the "
        "window's number, from 0) or {time} (when it began, UTC), e.g. -o 'run-{n}.psr'. Each "
        "file reads alone. Each file is created new: a window whose file cannot be (its name "
        "taken, its folder not writable) goes on in the file before it, said in one line.",
        metavar="DURATION", parse=lambda t: parse_duration("--window", t)),
    RecordOption(("--force",), "force", "Overwrite the output if it exists.", flag=True),
    RecordOption(("-q", "--quiet"), "quiet", "No live status line and no summary.", flag=True),
    RecordOption(("-v", "--verbose"), "", "Show tracebacks on errors.", flag=True),
)


def record_options(given: Mapping[str, Any]) -> RecordOptions:
    """RecordOptions from the options' texts as given (by field; None: not given), each read
    by its option's parse, and checked together (the target, pid or command, is the
    caller's to set)."""
    values: dict[str, Any] = {}
    for o in RECORD_OPTIONS:
        if not o.field:
            continue
        text = given.get(o.field)
        values[o.field] = o.parse(text) if o.parse is not None and text is not None else text
    if values["window_s"] is not None and (values["keep_s"] is not None
                                           or values["max_bytes"] is not None):
        raise RecorderUsageError("--window cannot be given with --keep or --max-size",
                                 help="record windows, or one flight recording, not both")
    output = values["output"]
    if values["window_s"] is not None and "{n}" not in output and "{time}" not in output:
        raise RecorderUsageError(
            f"--window: the output {output!r} names one file",
            help="put {n} (the window's number) or {time} in -o, e.g. -o 'run-{n}.psr'")
    if values["rate_hz"] is None:
        always_on = values["keep_s"] is not None or values["max_bytes"] is not None
        values["rate_hz"] = ALWAYS_ON_RATE_HZ if always_on else 1000.0
    return RecordOptions(**values)
