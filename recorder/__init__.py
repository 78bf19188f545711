"""psrec.recorder: attach to a running CPython (3.8 to 3.15, free-threaded 3.14 included, a later
version from its _Py_DebugOffsets) and record it into a .psr file.

The native part (``psrec.recorder._recorder``) is imported lazily, so that reading recordings
works where it is absent.
"""

from __future__ import annotations

from ._api import RecordOptions, RecordResult, dump_process, parse_rate, record
from .errors import (
    CommandNotFoundError,
    NativeRecorderMissingError,
    NoSuchProcessError,
    NotPythonError,
    RecorderError,
    RecorderPermissionError,
    RecorderUsageError,
    TargetReadError,
    UnsupportedPythonError,
    ZombieProcessError,
    ptrace_help,
)

__all__ = [
    "RecordOptions",
    "RecordResult",
    "record",
    "dump_process",
    "parse_rate",
    "RecorderError",
    "NoSuchProcessError",
    "RecorderPermissionError",
    "RecorderUsageError",
    "ZombieProcessError",
    "NotPythonError",
    "UnsupportedPythonError",
    "TargetReadError",
    "CommandNotFoundError",
    "NativeRecorderMissingError",
    "ptrace_help",
]
