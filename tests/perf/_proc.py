"""Process hygiene for the benchmark: every process started here is tracked, and killed and
reaped with timeouts on every path out (normal end, failure, Ctrl-C, SIGTERM).

Profilers are reaped with wait4() so that their CPU time and peak memory come from the kernel's
resource accounting, not from sampling /proc.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any

__all__ = [
    "BenchTimeout",
    "Exited",
    "Proc",
    "cleanup_all",
    "install_signal_handlers",
    "proc_cpu_s",
    "proc_status_kb",
    "start",
    "tree_cpu_s",
]

_CLK_TCK = os.sysconf("SC_CLK_TCK")


class BenchTimeout(Exception):
    pass


@dataclass
class Exited:
    returncode: int
    cpu_s: float  # user + system CPU of the process and its reaped children
    user_s: float
    sys_s: float
    maxrss_kb: int  # not used for peaks: Linux carries the forking parent's high-water mark
    wall_s: float


@dataclass
class Proc:
    """A started process in a session of its own (so that its whole group can be killed)."""

    argv: list[str]
    popen: subprocess.Popen[bytes]
    started: float
    label: str
    exited: Exited | None = None
    hwm_kb: int = 0  # VmHWM, last value seen while polling
    rss_series: list[tuple[float, int]] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.exited is None and self._reap(os.WNOHANG)

    def _reap(self, flags: int) -> bool:
        """True while the process is still running."""
        if self.exited is not None:
            return False
        try:
            pid, status, ru = os.wait4(self.pid, flags)
        except ChildProcessError:
            self.exited = Exited(-1, 0.0, 0.0, 0.0, 0, time.monotonic() - self.started)
            self._untrack()
            return False
        if pid == 0:
            return True
        self.exited = Exited(
            os.waitstatus_to_exitcode(status),
            ru.ru_utime + ru.ru_stime,
            ru.ru_utime,
            ru.ru_stime,
            ru.ru_maxrss,
            time.monotonic() - self.started,
        )
        self.popen.returncode = self.exited.returncode
        self._untrack()
        return False

    def _untrack(self) -> None:
        if self in _LIVE:
            _LIVE.remove(self)

    def poll_memory(self) -> None:
        st = proc_status_kb(self.pid)
        if st:
            self.hwm_kb = max(self.hwm_kb, st.get("VmHWM", 0))
            self.rss_series.append((time.monotonic() - self.started, st.get("VmRSS", 0)))

    def wait(self, timeout: float, poll_memory_every: float = 0.0) -> Exited:
        """Waits for the exit; on timeout, kills the group and raises BenchTimeout."""
        deadline = time.monotonic() + timeout
        next_mem = time.monotonic()
        while self._reap(os.WNOHANG):
            now = time.monotonic()
            if poll_memory_every and now >= next_mem:
                self.poll_memory()
                next_mem = now + poll_memory_every
            if now > deadline:
                self.kill()
                raise BenchTimeout(f"{self.label} did not finish within {timeout:.0f} s")
            time.sleep(0.01)
        assert self.exited is not None
        return self.exited

    def wait_exit(self, timeout: float) -> Exited:
        """Waits for the exit inside wait4 itself, so that a run of a few milliseconds is not
        rounded up to wait()'s polling interval; past the timeout the group is killed and
        BenchTimeout raised."""
        timer = threading.Timer(timeout, self.signal, (signal.SIGKILL,))
        timer.daemon = True
        timer.start()
        try:
            self._reap(0)
        finally:
            timer.cancel()
        assert self.exited is not None
        if self.exited.wall_s >= timeout and self.exited.returncode == -signal.SIGKILL:
            raise BenchTimeout(f"{self.label} did not finish within {timeout:.0f} s")
        return self.exited

    def signal(self, sig: int) -> None:
        if self.exited is None:
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self, grace: float = 5.0) -> Exited:
        """SIGINT (a profiler then writes its output), then SIGTERM, then SIGKILL."""
        for sig, wait in ((signal.SIGINT, grace), (signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
            if self.exited is not None:
                break
            self.signal(sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if self.rss_series:  # memory is being watched: keep watching while it writes
                    self.poll_memory()
                if not self._reap(os.WNOHANG):
                    break
                time.sleep(0.01)
        if self.exited is None:
            self._reap(0)
        assert self.exited is not None
        return self.exited

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while self._reap(os.WNOHANG) and time.monotonic() < deadline:
            time.sleep(0.01)

    def read_line_until(self, word: str, timeout: float) -> None:
        """Reads the process's stdout until a line equal to word (the workloads print 'ready')."""
        out = self.popen.stdout
        assert out is not None
        deadline = time.monotonic() + timeout
        buf = b""
        fd = out.fileno()
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchTimeout(f"{self.label} did not print {word!r} within {timeout:.0f} s")
            r, _, _ = select.select([fd], [], [], min(left, 0.5))
            if not r:
                if not self.running():
                    raise RuntimeError(f"{self.label} exited before printing {word!r}")
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError(f"{self.label} closed its output before printing {word!r}")
            buf += chunk
            if word.encode() in buf.splitlines():
                return


_LIVE: list[Proc] = []


def start(
    argv: list[str],
    label: str,
    *,
    stdout: int | IO[Any] | None = subprocess.DEVNULL,
    stderr: int | IO[Any] | None = subprocess.DEVNULL,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
) -> Proc:
    popen = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    p = Proc(argv, popen, time.monotonic(), label)
    _LIVE.append(p)
    return p


def cleanup_all() -> None:
    """Kills and reaps every process still running, newest first."""
    for p in list(reversed(_LIVE)):
        with contextlib.suppress(Exception):  # cleanup goes on for the others
            p.stop(grace=1.0)
        if p.popen.stdout is not None:
            p.popen.stdout.close()


def install_signal_handlers() -> None:
    """SIGINT, SIGTERM and SIGHUP become KeyboardInterrupt, so that the same cleanup path runs.

    SIGINT is set explicitly: a shell that starts the benchmark in the background ignores it,
    Python then leaves it ignored, and the children would inherit that and ignore the SIGINT
    that ends each recording."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGHUP, handler)


def proc_cpu_s(pid: int) -> float | None:
    """utime + stime of a process (all its threads) from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def tree_cpu_s(pid: int) -> float | None:
    """CPU time of a process and its living descendants (a recorder may use helpers)."""
    total = proc_cpu_s(pid)
    if total is None:
        return None
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return total
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids = [int(x) for x in f.read().split()]
        except OSError:
            continue
        for kid in kids:
            total += tree_cpu_s(kid) or 0.0
    return total


def proc_status_kb(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Vm"):
                    k, v = line.split(":", 1)
                    parts = v.split()
                    if parts and parts[0].isdigit():
                        out[k] = int(parts[0])
    except OSError:
        pass
    return out
