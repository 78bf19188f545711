"""Helpers for the recorder's live tests: interpreters, targets, psrec runs, recordings."""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

TARGETS = Path(__file__).resolve().parent.parent / "targets"
SUPPORTED = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13")


def _pyenv_pythons() -> dict[str, str]:
    found: dict[str, str] = {}
    if not shutil.which("pyenv"):
        return found
    out = subprocess.run(["pyenv", "versions", "--bare"], capture_output=True, text=True).stdout
    for version in out.split():
        minor = ".".join(version.split(".")[:2])
        if not version[0].isdigit() or minor in found:
            continue
        prefix = subprocess.run(["pyenv", "prefix", version], capture_output=True, text=True)
        exe = Path(prefix.stdout.strip()) / "bin" / f"python{minor}"
        if prefix.returncode == 0 and exe.exists():
            found[minor] = str(exe)
    return found


def discover() -> tuple[list[tuple[str, str]], dict[str, str]]:
    """Supported interpreters as (id, path), and unsupported ones by minor version."""
    pyenv = _pyenv_pythons()
    supported = [(f"python={m}", pyenv[m]) for m in SUPPORTED if m in pyenv]
    if os.path.exists("/usr/bin/python3"):
        supported.append(("python=system", "/usr/bin/python3"))
    unsupported = {m: p for m, p in pyenv.items() if m not in SUPPORTED}
    wanted = os.environ.get("PSREC_TEST_PYTHONS")
    if wanted:
        keys = {w.strip() for w in wanted.split(",") if w.strip()}
        supported = [(i, p) for i, p in supported if i.split("=", 1)[1] in keys]
    return supported, unsupported


PYTHONS, UNSUPPORTED = discover()


def missing_note() -> str:
    have = {i.split("=", 1)[1] for i, _ in PYTHONS}
    missing = [m for m in SUPPORTED if m not in have]
    return f" (not found or not selected: {', '.join(missing)})" if missing else ""


def python_params() -> list[object]:
    if not PYTHONS:
        return [pytest.param(None, marks=pytest.mark.skip(
            reason="no CPython 3.8-3.13 found (pyenv or /usr/bin/python3), or PSREC_TEST_PYTHONS "
                   "selected none"))]
    return [pytest.param(path, id=ident) for ident, path in PYTHONS]


def minor_of(python: str) -> tuple[int, int]:
    out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"],
                         capture_output=True, text=True, timeout=30).stdout.split()
    return int(out[0]), int(out[1])


@dataclass
class Target:
    proc: subprocess.Popen[str]

    @property
    def pid(self) -> int:
        return self.proc.pid


def _wait_line(proc: subprocess.Popen[str], want: str, timeout: float) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    fd = proc.stdout.fileno()
    buf = b""
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not r:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            raise AssertionError(f"target exited before printing {want!r} (status {proc.wait()})")
        buf += chunk
        if want.encode() + b"\n" in buf:
            return
    raise AssertionError(f"target did not print {want!r} within {timeout} s; got {buf[-200:]!r}")


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextmanager
def target(python: str, script: str, *args: str, ready: str = "ready",
           timeout: float = 30.0, stdin: bool = False) -> Iterator[Target]:
    """Starts tests/targets/SCRIPT and waits until it prints `ready` from its innermost frame.
    With stdin, the target's standard input is a pipe the test writes cues to."""
    proc = subprocess.Popen(
        [python, str(TARGETS / script), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, cwd=str(TARGETS), text=True,
    )
    try:
        _wait_line(proc, ready, timeout)
        yield Target(proc)
    finally:
        stop(proc)


def psrec(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "psrec", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=str(TARGETS))


def psrec_async(*args: str) -> subprocess.Popen[str]:
    """psrec running in the background (stderr piped, for the test to show on failure)."""
    return subprocess.Popen([sys.executable, "-m", "psrec", *args], stderr=subprocess.PIPE,
                            text=True, cwd=str(TARGETS))


def wait_recording(path: Path, proc: subprocess.Popen[str], timeout: float = 20.0) -> None:
    """Waits until a background `psrec record` has written its file's header and metadata."""
    deadline = time.monotonic() + timeout
    while not path.exists() or path.stat().st_size < 200:
        assert proc.poll() is None, f"psrec record exited ({proc.returncode})"
        assert time.monotonic() < deadline, f"{path} not written within {timeout} s"
        time.sleep(0.02)


def record(path: Path, pid: int, *extra: str, duration: float = 1.5) -> None:
    r = psrec("record", "-q", "-o", str(path), "-d", str(duration), *extra, str(pid))
    assert r.returncode == 0, f"psrec record failed ({r.returncode}): {r.stderr}"


@dataclass(frozen=True)
class Sample:
    ts: int
    pid: int
    thread: str
    os_tid: int
    stack: tuple[tuple[str, str, int], ...]  # root first: (file, function, line)
    status: int
    cpu: int

    @property
    def functions(self) -> tuple[str, ...]:
        return tuple(f for _, f, _ in self.stack)

    @property
    def leaf(self) -> str:
        return self.stack[-1][1] if self.stack else ""


def load(path: Path) -> list[Sample]:
    from psrec.format import open_recording

    rows = []
    with open_recording(path) as rec:
        defs = rec.definitions()
        stream = rec.stream(native=False)
        for batch in stream:
            parents, frames = stream.decoder.parents, stream.decoder.frames
            for i in range(len(batch)):
                node = batch.node[i]
                stack = []
                while node:
                    f = defs.frame(frames[node])
                    stack.append((f.function.filename, f.function.name, f.line))
                    node = parents[node]
                stack.reverse()
                rows.append((batch.ts[i], batch.thread[i], tuple(stack), batch.status[i],
                             batch.cpu[i]))
        # Each sample carries its thread's last name (names read after a thread started
        # arrive as renames).
        defs.apply_renames(stream.events)
    t = defs.threads
    return [Sample(ts, t[ref].pid, t[ref].name, t[ref].os_tid, stack, status, cpu)
            for ts, ref, stack, status, cpu in rows]


def collapsed(samples: list[Sample], limit: int = 15) -> str:
    """The most common stacks, collapsed, for failure messages."""
    c = Counter(f"{s.thread}: " + ";".join(f"{f}:{ln}" for _, f, ln in s.stack) for s in samples)
    return "\n".join(f"{n:6d} {k}" for k, n in c.most_common(limit))


def line_of(script: str, marker: str) -> int:
    """The line of a target script that carries the comment '# LINE <marker>'."""
    for n, text in enumerate((TARGETS / script).read_text().splitlines(), 1):
        if f"# LINE {marker}" in text:
            return n
    raise AssertionError(f"no '# LINE {marker}' in {script}")
