"""What a recording is asked for (RecordOptions, the rate parsed from the command line) and
what it gives back (RecordResult)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .errors import RecorderUsageError

__all__ = ["MAX_RATE_HZ", "RecordOptions", "RecordResult", "parse_rate"]

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(k)?\s*(hz)?\s*$", re.IGNORECASE)
MAX_RATE_HZ = 1_000_000.0  # "max": passes back to back, no sleeping (the sampler's floor)
DEFAULT_TASK_RATE_HZ = 1000.0  # task snapshots a second at most, unless asked otherwise


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

