"""psrec.recorder: attach to a running CPython (the versions psrec.recorder.supported names,
free-threaded builds included, a later version from its _Py_DebugOffsets) and record it into a
.psr file.

The native part (``psrec.recorder._recorder``) is imported lazily, so that reading recordings
works where it is absent. So is everything else here: `psrec dump PID` imports the native
module, which imports this package first, and needs none of the recording machinery (the
format package, threads, subprocesses) that the names below come from.
"""

from __future__ import annotations

# typing imports `re`: `psrec dump PID` would pay for it (annotations only; mypy takes any
# name TYPE_CHECKING for typing's).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

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

# Where the names of __all__ are defined: each is imported on first use (PEP 562).
_API = {"RecordOptions", "RecordResult", "record", "dump_process", "parse_rate"}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module("._api" if name in _API else ".errors", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
