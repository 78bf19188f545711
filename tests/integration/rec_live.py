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
# From pyenv: 3.8-3.13; from tests/interpreters/provision: Debian sid's 3.14 and 3.15 (run in a
# sid root, as in a container) and a free-threaded 3.14 built from Debian's source package.
SUPPORTED = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14", "3.15", "3.14t")
PROVISIONED = Path(os.environ.get("PSREC_INTERPRETERS", "/var/cache/psrec-interpreters"))
# The root each provisioned interpreter runs in (its files, headers included, are there).
ROOTS: dict[str, Path] = {}


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


def _provisioned() -> tuple[dict[str, str], dict[str, str]]:
    """Interpreters tests/interpreters/provision made, by version, and why others are missing."""
    found: dict[str, str] = {}
    listing = PROVISIONED / "interpreters.tsv"
    if listing.exists():
        for line in listing.read_text().splitlines():
            parts = line.split("\t")
            if len(parts) == 3 and os.access(parts[1], os.X_OK):
                found[parts[0]] = parts[1]
                ROOTS[parts[1]] = Path(parts[2])
    failed = PROVISIONED / "failed"
    why = {f.name: f.read_text().strip() for f in failed.iterdir()} if failed.is_dir() else {}
    return found, why


def _system_python() -> tuple[str, str] | None:
    """Debian's /usr/bin/python3, a statically linked executable, as python=3.X-debian-static."""
    exe = Path("/usr/bin/python3")
    if not exe.exists():
        return None
    out = subprocess.run([str(exe), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                         capture_output=True, text=True, timeout=30)
    return (f"python={out.stdout.strip()}-debian-static", str(exe)) if out.returncode == 0 else None


def discover() -> tuple[list[tuple[str, str]], dict[str, str], dict[str, str]]:
    """Supported interpreters as (id, path), unsupported ones by minor version, and why
    supported versions are missing."""
    pyenv = _pyenv_pythons()
    provisioned, failed = _provisioned()
    have = {**pyenv, **provisioned}
    supported = [(f"python={m}", have[m]) for m in SUPPORTED if m in have]
    system = _system_python()
    if system:
        supported.append(system)
    unsupported = {m: p for m, p in pyenv.items() if m not in SUPPORTED}
    missing = {m: failed.get(m, "not installed (pyenv, or run tests/interpreters/provision)")
               for m in SUPPORTED if m not in have}
    wanted = os.environ.get("PSREC_TEST_PYTHONS")
    if wanted:
        keys = {w.strip() for w in wanted.split(",") if w.strip()}
        supported = [(i, p) for i, p in supported if i.split("=", 1)[1] in keys]
        missing = {m: why for m, why in missing.items() if m in keys}
    return supported, unsupported, missing


PYTHONS, UNSUPPORTED, MISSING = discover()


def missing_note() -> str:
    return "".join(f"; python={m}: {why}" for m, why in MISSING.items())


def python_params() -> list[object]:
    """Every supported interpreter found, and, skipped with the reason, every one missing."""
    params: list[object] = [pytest.param(path, id=ident) for ident, path in PYTHONS]
    params += [pytest.param(None, id=f"python={m}", marks=pytest.mark.skip(reason=why))
               for m, why in MISSING.items()]
    if not params:
        params = [pytest.param(None, marks=pytest.mark.skip(
            reason="PSREC_TEST_PYTHONS selected no interpreter"))]
    return params


def is_free_threaded(python: str) -> bool:
    out = subprocess.run([python, "-c", "import sysconfig; "
                          "print(bool(sysconfig.get_config_var('Py_GIL_DISABLED')))"],
                         capture_output=True, text=True, timeout=30).stdout
    return out.strip() == "True"


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
