"""Programs psrec starts end with it, however psrec ends (even SIGKILL).

The program psrec launches gets SIGTERM when psrec dies (PR_SET_PDEATHSIG), but that setting
is not inherited: a shell's or a launcher's own children would run on under init. So every
process the program starts is marked by an environment variable naming the recording, and a
small guard process, forked from psrec before the program starts, waits on a pipe from psrec.
If psrec dies without saying it is done, the pipe's end tells the guard, which sends SIGTERM to
every process still marked. (A process that clears its environment is not found.)
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

__all__ = ["GUARD_ENV", "Guard", "end_with_parent", "end_marked"]

# The variable that marks the processes a recording launched: PSREC_RECORDING=<pid>-<random>.
GUARD_ENV = "PSREC_RECORDING"


def end_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A preexec_fn for a program psrec starts: it gets sig when psrec dies, instead of running
    on under init unseen."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getpid()
    pr_set_pdeathsig = 1

    def in_child() -> None:
        libc.prctl(pr_set_pdeathsig, sig, 0, 0, 0)
        if os.getppid() != parent:  # psrec died before the line above
            os.kill(os.getpid(), sig)

    return in_child


def _marked(mark: bytes) -> list[int]:
    """Pids of the processes whose environment holds mark (a whole NAME=value entry)."""
    me = os.getpid()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read()
        except OSError:  # gone, or not ours to read
            continue
        if env.startswith(mark + b"\0") or b"\0" + mark + b"\0" in env or env == mark:
            out.append(int(name))
    return out


def end_marked(token: str, sig: int = signal.SIGTERM, settle: float = 1.0) -> int:
    """Sends sig to every process marked with token, again for those started meanwhile, until
    a look finds no new one (or settle seconds pass). Returns how many it signalled."""
    mark = f"{GUARD_ENV}={token}".encode()
    done: set[int] = set()
    deadline = time.monotonic() + settle
    while True:
        new = [p for p in _marked(mark) if p not in done]
        for pid in new:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
            done.add(pid)
        if not new or time.monotonic() > deadline:
            return len(done)
        time.sleep(0.02)


class Guard:
    """The guard of one launched program (see the module's docstring): mark the program's
    environment with env(), then call release() once psrec is done with it."""

    def __init__(self) -> None:
        self.token = f"{os.getpid()}-{os.urandom(6).hex()}"
        read_end, self._write_end = os.pipe()  # not inherited by the program (O_CLOEXEC)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the guard process
            try:
                os.close(self._write_end)
                _guard(read_end, self.token)
            finally:
                os._exit(0)
        os.close(read_end)
        self.pid = pid

    def env(self) -> dict[str, str]:
        return {**os.environ, GUARD_ENV: self.token}

    def release(self) -> None:
        """psrec is done with the program: the guard ends without signalling anything."""
        if self._write_end < 0:
            return
        try:
            os.write(self._write_end, b"done")
        except OSError:
            pass
        os.close(self._write_end)
        self._write_end = -1
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def _guard(read_end: int, token: str) -> None:  # pragma: no cover - the guard process
    # Nothing of psrec's is held open (the output file, the terminal): only the pipe.
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT, signal.SIGTSTP):
        signal.signal(sig, signal.SIG_IGN)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.closerange(3, read_end)
    os.closerange(read_end + 1, 65536)
    while True:
        try:
            said = os.read(read_end, 16)
            break
        except InterruptedError:
            continue
    if not said:  # psrec ended without a word: it died
        end_marked(token)
