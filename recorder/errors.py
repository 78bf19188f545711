"""The recorder's errors: each says what went wrong in one line and what to do in ``help``."""

from __future__ import annotations

import os
import pwd
import re

from psrec.format.errors import PsrecError

from .supported import supported

__all__ = [
    "RecorderError",
    "RecorderUsageError",
    "NoSuchProcessError",
    "ZombieProcessError",
    "RecorderPermissionError",
    "NotPythonError",
    "UnsupportedPythonError",
    "TargetReadError",
    "CommandNotFoundError",
    "NativeRecorderMissingError",
    "ptrace_help",
]

_YAMA_SCOPE = "/proc/sys/kernel/yama/ptrace_scope"


class RecorderError(PsrecError):
    """A failure to attach to or record a process."""

    default_help: str | None = None

    def __init__(self, message: str, help: str | None = None) -> None:
        super().__init__(message, help if help is not None else self.default_help)


class RecorderUsageError(RecorderError, ValueError):
    """psrec record or dump was given something it cannot take (a rate, a pid, a program
    without ``--``): wrong usage, exit status 2."""

    exit_code = 2


class NoSuchProcessError(RecorderError, ProcessLookupError):
    default_help = "check the pid (ps aux | grep python); the process may have exited"


class ZombieProcessError(NoSuchProcessError):
    default_help = ("a process that has exited has no memory left to read: give the pid of a "
                    "running Python process (ps aux | grep python)")


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _owner(pid: int) -> str | None:
    """The user process PID runs as, when it is not the user psrec runs as (None otherwise, or
    when it cannot be told)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            uids = next((line.split()[1:4] for line in f if line.startswith("Uid:")), None)
    except OSError:
        return None
    if not uids:
        return None
    # Reading a process's memory needs our real uid to be its real, effective and saved uid
    # (ptrace_may_access, PTRACE_MODE_REALCREDS): name the one that differs, effective first.
    real, effective, saved = (int(u) for u in uids)
    me = os.getuid()
    other = next((u for u in (effective, real, saved) if u != me), None)
    return None if other is None else _user(other)


def _yama_scope() -> int | None:
    """kernel.yama.ptrace_scope, or None where Yama is not in the kernel."""
    try:
        with open(_YAMA_SCOPE) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _ptrace_help(pid: int | None, owner: str | None, user: str, yama_scope: int | None) -> str:
    """The ptrace hint from its inputs: the user the target runs as (None when it is the user
    psrec runs as, or unknown), psrec's user, and kernel.yama.ptrace_scope (None without
    Yama)."""
    if yama_scope == 3:
        return ("kernel.yama.ptrace_scope is 3: no process may read another's memory, root "
                "included, until the machine restarts with a lower setting")
    cap = "grant it CAP_SYS_PTRACE (in Docker: --cap-add SYS_PTRACE)"
    if user == "root":  # root refused: CAP_SYS_PTRACE was taken away (a container, setpriv)
        who = f"process {pid} runs as {owner}" if owner is not None else f"process {pid}"
        return (f"{who} and psrec as root without CAP_SYS_PTRACE (as in a container by "
                f"default): {cap}" + (f", or run psrec as {owner}" if owner else ""))
    if owner is not None and owner != user:
        lead = f"process {pid} runs as {owner} and psrec as {user}: "
        same_user = f"run psrec as {owner}"
    else:
        lead = "reading another process's memory needs ptrace access: "
        same_user = "run psrec as the same user as the target"
    if yama_scope == 2:
        return (lead + "kernel.yama.ptrace_scope is 2, which leaves it to root: run psrec with "
                f"sudo, or {cap}")
    if yama_scope == 1:  # 1 lets a process read its descendants only
        same_user += (" with kernel.yama.ptrace_scope at 0 (it is 1: sudo sysctl "
                      "kernel.yama.ptrace_scope=0)")
    return lead + f"{same_user}, or run it with sudo, or {cap}"


def ptrace_help(pid: int | None = None) -> str:
    """What to do when reading process PID's memory is refused, said for this machine (the
    Yama sysctl where the kernel has it) and this target (its user when it is another)."""
    owner = _owner(pid) if pid is not None else None
    return _ptrace_help(pid, owner, _user(os.getuid()), _yama_scope())


class RecorderPermissionError(RecorderError, PermissionError):
    def __init__(self, message: str, help: str | None = None, pid: int | None = None) -> None:
        if pid is None:  # raised by the native recorder, whose messages name the process
            m = re.search(r"\bprocess (\d+)", message)
            pid = int(m.group(1)) if m else None
        self.pid = pid
        super().__init__(message, help if help is not None else ptrace_help(pid))


def _versions() -> tuple[str, str]:
    """The supported range and the first free-threaded version, as the built recorder names
    them (psrec.recorder.supported)."""
    s = supported()
    if s is None:  # no native recorder: no version can be recorded here
        return "", "the versions that have them"
    return f" {s.range}", f"3.{s.free_threaded_from_minor}"


class NotPythonError(RecorderError):
    def __init__(self, message: str, help: str | None = None) -> None:
        versions, _ = _versions()
        super().__init__(message, help if help is not None else (
            f"give the pid of a CPython{versions} process, free-threaded builds included "
            "(ps aux | grep python)"))


class UnsupportedPythonError(RecorderError):
    def __init__(self, message: str, help: str | None = None) -> None:
        versions, free_threaded = _versions()
        super().__init__(message, help if help is not None else (
            f"psrec records CPython{versions} (free-threaded builds from {free_threaded}) and "
            "tries a later version from its _Py_DebugOffsets: run the program with a "
            "supported version"))


class TargetReadError(RecorderError):
    default_help = "the process may be exiting or not yet initialised; try again"


class CommandNotFoundError(RecorderError, FileNotFoundError):
    default_help = "check the command after -- (is it installed and on PATH?)"


class NativeRecorderMissingError(RecorderError):
    default_help = (
        "this psrec installation has no native recorder (psrec.recorder._recorder); reinstall "
        "psrec from a wheel for this platform or build it with pip install ."
    )
