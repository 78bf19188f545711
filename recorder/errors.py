"""The recorder's errors: each says what went wrong in one line and what to do in ``help``."""

from __future__ import annotations

from psrec.format.errors import PsrecError

__all__ = [
    "RecorderError",
    "NoSuchProcessError",
    "RecorderPermissionError",
    "NotPythonError",
    "UnsupportedPythonError",
    "TargetReadError",
    "CommandNotFoundError",
    "NativeRecorderMissingError",
]

_PTRACE_HELP = (
    "reading another process's memory needs ptrace access: run psrec as the same user as the "
    "target with /proc/sys/kernel/yama/ptrace_scope at 0 (sudo sysctl kernel.yama.ptrace_scope=0), "
    "or run it with sudo, or grant CAP_SYS_PTRACE (in Docker: --cap-add SYS_PTRACE)"
)


class RecorderError(PsrecError):
    """A failure to attach to or record a process."""

    default_help: str | None = None

    def __init__(self, message: str, help: str | None = None) -> None:
        super().__init__(message, help if help is not None else self.default_help)


class NoSuchProcessError(RecorderError, ProcessLookupError):
    default_help = "check the pid (ps aux | grep python); the process may have exited"


class RecorderPermissionError(RecorderError, PermissionError):
    default_help = _PTRACE_HELP


class NotPythonError(RecorderError):
    default_help = "give the pid of a CPython 3.8-3.13 interpreter (ps aux | grep python)"


class UnsupportedPythonError(RecorderError):
    default_help = ("psrec records CPython 3.8 to 3.13 (GIL builds); "
                    "run the program with one of them")


class TargetReadError(RecorderError):
    default_help = "the process may be exiting or not yet initialised; try again"


class CommandNotFoundError(RecorderError, FileNotFoundError):
    default_help = "check the command after -- (is it installed and on PATH?)"


class NativeRecorderMissingError(RecorderError):
    default_help = (
        "this psrec installation has no native recorder (psrec.recorder._recorder); reinstall "
        "psrec from a wheel for this platform or build it with pip install ."
    )
