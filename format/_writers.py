"""Who is writing a recording now: the processes that hold its file open for writing, found
through /proc (a file's content cannot say whether its recorder still runs: one killed
leaves the same bytes). A psrec recorder seals the chunk it is filling when sent SIGUSR2
(spec section 7.3), which `psrec snapshot` uses to take the samples up to the moment it
copies."""

from __future__ import annotations

import os
import signal
import time

__all__ = ["writers_of", "ask_to_seal"]


def writers_of(path: str) -> list[int]:
    """The pids of the processes that have `path`'s file (the inode its name holds now) open
    for writing; [] when none, or where /proc cannot tell."""
    try:
        st = os.stat(path)
    except OSError:
        return []
    me = os.getpid()
    found = []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    for pid in pids:
        if pid == me:
            continue
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:  # gone, or not ours to look at
            continue
        for fd in fds:
            try:
                target = os.stat(f"{fd_dir}/{fd}")
            except OSError:
                continue
            if (target.st_dev, target.st_ino) != (st.st_dev, st.st_ino):
                continue
            if _open_for_writing(pid, fd):
                found.append(pid)
                break
    return found


def _open_for_writing(pid: int, fd: str) -> bool:
    try:
        with open(f"/proc/{pid}/fdinfo/{fd}") as f:
            for line in f:
                if line.startswith("flags:"):
                    return int(line.split()[1], 8) & (os.O_WRONLY | os.O_RDWR) != 0
    except (OSError, ValueError, IndexError):
        pass
    return False


def _catches(pid: int, signum: int) -> bool:
    """Whether the process has a handler for signum (SigCgt in /proc/PID/status): a signal
    it does not catch could end it."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def _chunks_mark(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def ask_to_seal(path: str, pids: list[int], timeout_s: float = 2.0) -> bool:
    """Asks the recorders among `pids` (those that catch SIGUSR2) to seal the chunk they are
    filling, and waits until the file has grown or been written anew (a flight recording's
    rewrite), up to timeout_s. False when none could be asked, or nothing came in time."""
    before = _chunks_mark(path)
    asked = False
    for pid in pids:
        if _catches(pid, signal.SIGUSR2):
            try:
                os.kill(pid, signal.SIGUSR2)
                asked = True
            except OSError:
                pass
    if not asked or before is None:
        return False
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(0.01)
        now = _chunks_mark(path)
        if now is not None and (now[0] != before[0] or now[1] > before[1]):
            time.sleep(0.01)  # a DEFS and DATA pair is two writes
            return True
    return False
