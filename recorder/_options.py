"""What a recording is asked for (RecordOptions, the rate parsed from the command line) and
what it gives back (RecordResult)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .errors import RecorderUsageError

__all__ = ["MAX_RATE_HZ", "RecordOptions", "RecordResult", "parse_duration", "parse_rate",
           "parse_size", "window_name"]

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


@dataclass(frozen=True)
class RecordResult:
    output: str
    pid: int
    exit_code: int | None  # the launched program's exit status (None when attached)
    stats: dict[str, Any] = field(default_factory=dict)
    bytes_written: int = 0
    stopped_by: str = ""  # "exit", "duration", "interrupt", "terminate", "exec", ...
    files: list[str] = field(default_factory=list)  # every file written (--window: several)

