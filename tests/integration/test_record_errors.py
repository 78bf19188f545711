"""Bad input: one line that says what went wrong, help that says what to do, an exit status."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from rec_live import (
    PYTHONS,
    TARGETS,
    UNSUPPORTED,
    WITHOUT_PTRACE,
    dead_pid,
    psrec,
    psrec_async,
    stop,
    target,
    target_of_nobody,
    wait_recording,
)

pytestmark = [pytest.mark.live, pytest.mark.timeout(120)]
ANY_PYTHON = PYTHONS[0][1] if PYTHONS else None
needs_python = pytest.mark.skipif(ANY_PYTHON is None, reason="no supported CPython found")


def assert_one_error(r: subprocess.CompletedProcess[str], *words: str) -> None:
    assert r.returncode == 1, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert lines[0].startswith("psrec: error: "), r.stderr
    assert len(lines) == 2 and lines[1].startswith("psrec: "), r.stderr  # the error and its help
    assert "Traceback" not in r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


def test_no_such_process(tmp_path: Path) -> None:
    out = tmp_path / "x.psr"
    assert_one_error(psrec("record", "-o", str(out), str(dead_pid())), "no process with pid")
    assert not out.exists()
    assert_one_error(psrec("dump", str(dead_pid())), "no process with pid")


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is not installed")
def test_root_without_cap_sys_ptrace_is_told_so(tmp_path: Path) -> None:
    """Root without CAP_SYS_PTRACE (a container's default) on another user's Python: the
    executable's link could not be read, and the target was called no Python process."""
    out = tmp_path / "x.psr"
    with target_of_nobody("rec_finite.py", "30") as t:
        r = subprocess.run([*WITHOUT_PTRACE, sys.executable, "-m", "psrec", "record", "-d", "1",
                            "-o", str(out), str(t.pid)], capture_output=True, text=True,
                           timeout=60)
    assert_one_error(r, f"permission denied reading the memory of process {t.pid}",
                     f"process {t.pid} runs as nobody and psrec as root without CAP_SYS_PTRACE",
                     "--cap-add SYS_PTRACE")
    assert not out.exists()


def test_not_a_python_process(tmp_path: Path) -> None:
    p = subprocess.Popen(["sleep", "30"])
    try:
        r = psrec("record", "-o", str(tmp_path / "x.psr"), str(p.pid))
    finally:
        stop(p)
    assert_one_error(r, "is not a Python process")


def test_unsupported_version_is_named(tmp_path: Path) -> None:
    if not UNSUPPORTED:
        pytest.skip("no unsupported CPython (e.g. 3.7) installed to attach to")
    minor, python = sorted(UNSUPPORTED.items())[-1]
    p = subprocess.Popen([python, "-c", "import time; print('ready', flush=True); time.sleep(30)"],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        r = psrec("record", "-o", str(tmp_path / "x.psr"), str(p.pid))
    finally:
        stop(p)
    assert_one_error(r, f"Python {minor}", "does not support")


@needs_python
def test_permission_denied_explains_ptrace() -> None:
    """An unprivileged reader (a forked child that drops to nobody) may not read root's target."""
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to another user for the check")
    import psrec.recorder._recorder as native
    from psrec.recorder.errors import RecorderPermissionError

    with target(ANY_PYTHON, "rec_finite.py", "30") as t:
        r, w = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child
            os.close(r)
            code = 3
            try:
                os.setgid(65534)
                os.setuid(65534)
                native.inspect(t.pid)
            except RecorderPermissionError as exc:
                os.write(w, f"{exc.message}\n{exc.help}".encode())
                code = 0
            except BaseException as exc:  # noqa: BLE001
                os.write(w, repr(exc).encode())
            os._exit(code)
        os.close(w)
        text = os.read(r, 4096).decode()
        os.close(r)
        _, status = os.waitpid(child, 0)
    assert os.WEXITSTATUS(status) == 0, text
    assert "permission denied" in text and "CAP_SYS_PTRACE" in text and "sudo" in text, text
    # The owner is named (the reader is not root), the Yama sysctl only where it exists.
    assert f"process {t.pid} runs as root and psrec as nobody" in text, text
    assert ("ptrace_scope" in text) == os.path.exists("/proc/sys/kernel/yama/ptrace_scope"), text


@needs_python
def test_output_exists_without_force(tmp_path: Path) -> None:
    out = tmp_path / "x.psr"
    out.write_bytes(b"keep me")
    with target(ANY_PYTHON, "rec_finite.py", "30") as t:
        r = psrec("record", "-o", str(out), str(t.pid))
    assert_one_error(r, "already exists", "--force")
    assert out.read_bytes() == b"keep me"


@needs_python
def test_output_folder_missing_or_not_writable(tmp_path: Path) -> None:
    with target(ANY_PYTHON, "rec_finite.py", "30") as t:
        r = psrec("record", "-o", str(tmp_path / "no" / "x.psr"), str(t.pid))
        assert_one_error(r, "does not exist")
        r = psrec("record", "-o", "/proc/x.psr", str(t.pid))
        assert_one_error(r, "not writable")


def test_command_not_found(tmp_path: Path) -> None:
    r = psrec("record", "-o", str(tmp_path / "x.psr"), "--", "psrec-no-such-command", "x")
    assert_one_error(r, "command not found: psrec-no-such-command")
    assert not (tmp_path / "x.psr").exists()


@needs_python
def test_target_dying_mid_recording_keeps_what_was_recorded(tmp_path: Path) -> None:
    out = tmp_path / "x.psr"
    with target(ANY_PYTHON, "rec_finite.py", "1.0") as t:
        r = psrec("record", "-q", "-o", str(out), "-d", "30", str(t.pid))
    assert r.returncode == 0, r.stderr
    from psrec.format import open_recording

    with open_recording(out) as rec:
        assert rec.clean and rec.stats["samples"] > 100
        assert rec.stats["stopped_by"] == "exit"


@needs_python
def test_sigterm_closes_the_file_cleanly(tmp_path: Path) -> None:
    out = tmp_path / "x.psr"
    with target(ANY_PYTHON, "rec_finite.py", "30") as t:
        p = psrec_async("record", "-q", "-o", str(out), str(t.pid))
        try:
            wait_recording(out, p)
            p.terminate()
            p.wait(20)
        finally:
            stop(p)  # type: ignore[arg-type]
    from psrec.format import open_recording

    with open_recording(out) as rec:
        assert rec.clean and rec.stats["stopped_by"] == "terminate"


@needs_python
def test_killed_recorder_leaves_a_readable_file(tmp_path: Path) -> None:
    import signal
    import time

    out = tmp_path / "x.psr"
    with target(ANY_PYTHON, "rec_finite.py", "30") as t:
        p = subprocess.Popen([sys.executable, "-m", "psrec", "record", "-q", "-o", str(out),
                              str(t.pid)], cwd=str(TARGETS))
        try:
            time.sleep(2.5)  # not readiness: the recording must span more than one chunk (1 s)
            p.send_signal(signal.SIGKILL)
            p.wait(10)
        finally:
            stop(p)  # type: ignore[arg-type]
    from rec_live import load

    samples = load(out)
    assert len(samples) > 500
    assert any(s.leaf == "finite_work" for s in samples)


@needs_python
@pytest.mark.parametrize("sig,stopped_by", [(signal.SIGTERM, "terminate"),
                                            (signal.SIGINT, "interrupt")],
                         ids=["SIGTERM", "SIGINT"])
def test_a_signal_as_soon_as_the_file_exists_closes_it_cleanly(
        tmp_path: Path, sig: int, stopped_by: str) -> None:
    """SIGTERM and Ctrl-C are handled from before the output is created, not only once sampling
    runs, and never half way through opening the file: a signal while the header is written
    still gives a closed file."""
    import time

    from psrec.format import open_recording

    failures = []
    with target(ANY_PYTHON, "rec_finite.py", "30") as t:
        for i in range(8):
            out = tmp_path / f"x{i}.psr"
            p = subprocess.Popen([sys.executable, "-m", "psrec", "record", "-q", "-o", str(out),
                                  str(t.pid)], stderr=subprocess.PIPE, text=True,
                                 cwd=str(TARGETS))
            try:
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and not out.exists():
                    time.sleep(0.0005)
                p.send_signal(sig)
                _, err = p.communicate(timeout=20)
            finally:
                stop(p)  # type: ignore[arg-type]
            with open_recording(out) as rec:
                if not (rec.clean and rec.stats["stopped_by"] == stopped_by):
                    failures.append(f"run {i}: clean={rec.clean} {rec.stats} {err[-300:]}")
            if p.returncode not in (0, 130):
                failures.append(f"run {i}: exit status {p.returncode}: {err[-300:]}")
    assert not failures, "\n".join(failures)
