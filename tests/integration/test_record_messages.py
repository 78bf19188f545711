"""What psrec says about odd targets and options: usage errors (exit status 2), a program given
without `--`, zombies, the live status line on a narrow terminal, stacks deeper than the cap."""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from psrec.format import constants as C
from rec_live import PYTHONS as FOUND
from rec_live import (
    SUPPORTED_RANGE,
    TARGETS,
    collapsed,
    dead_pid,
    load,
    psrec,
    python_params,
    stop,
    target,
)

pytestmark = [pytest.mark.live, pytest.mark.timeout(180)]
PYTHONS = python_params()
DATA = Path(__file__).resolve().parent.parent / "data"


def assert_usage_error(r: subprocess.CompletedProcess[str], *words: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


# -- usage errors ------------------------------------------------------------------------------

@pytest.mark.parametrize("rate", ["abc", "0", "200k", "-5"])
def test_a_bad_rate_is_a_usage_error_that_names_max(tmp_path: Path, rate: str) -> None:
    r = psrec("record", "-o", str(tmp_path / "x.psr"), "-r", rate, str(dead_pid()))
    assert_usage_error(r, "rate", "max")
    assert not (tmp_path / "x.psr").exists()


@pytest.mark.parametrize("pid", ["0", "99999999999999999999", "4194305"])
def test_a_bad_pid_is_a_usage_error(tmp_path: Path, pid: str) -> None:
    assert_usage_error(psrec("record", "-o", str(tmp_path / "x.psr"), pid), f"invalid pid {pid}")
    assert_usage_error(psrec("dump", pid), f"invalid pid {pid}")


def test_usage_errors_of_the_analyzer_exit_2() -> None:
    r = psrec("report", str(DATA / "two_threads.psr"), "--slices", "abc")
    assert_usage_error(r, "--slices", "'abc' is not a duration")
    r = psrec("report", str(DATA / "two_threads.psr"), "--slices", "0")
    assert_usage_error(r, "--slices")


def test_runtime_failures_keep_status_1(tmp_path: Path) -> None:
    r = psrec("record", "-o", str(tmp_path / "x.psr"), str(dead_pid()))
    assert r.returncode == 1 and "no process with pid" in r.stderr, r.stderr


def test_a_program_without_dashdash_is_not_run_and_the_hint_shows_dashdash(tmp_path: Path) -> None:
    out = tmp_path / "x.psr"
    # Its own options would have reached psrec's parser...
    r = psrec("record", "-o", str(out), "python3", "-c", "print(1)")
    assert_usage_error(r, f"psrec record -o {out} -- python3 -c 'print(1)'")
    assert "No such option" not in r.stderr
    # ... and a program without options must not run either: psrec's own options (-o, -d, -r)
    # would be taken from among the program's.
    marker = tmp_path / "ran"
    r = psrec("record", "-o", str(out), "touch", str(marker))
    assert_usage_error(r, f"psrec record -o {out} -- touch {marker}")
    assert not marker.exists() and not out.exists()


def test_a_pid_and_more_words_do_not_mention_dashdash(tmp_path: Path) -> None:
    r = psrec("record", "-o", str(tmp_path / "x.psr"), "1234", "5")
    assert_usage_error(r, "1234 5")
    assert "--" not in r.stderr and "command not found" not in r.stderr, r.stderr


def test_a_pid_before_dashdash_and_unknown_options(tmp_path: Path) -> None:
    out = str(tmp_path / "x.psr")
    assert_usage_error(psrec("record", "-o", out, "1234", "--", "python3", "-c", "1"), "1234")
    assert_usage_error(psrec("record", "-o", out, "--bogus", "1234"), "No such option", "--bogus")
    assert_usage_error(psrec("record", "-o", out, "1234", "--rat", "10"),
                       "No such option", "--rat", "--rate")
    assert_usage_error(psrec("record", "-o", out, "--"), "give a pid")


def test_not_python_names_the_versions_psrec_records(tmp_path: Path) -> None:
    p = subprocess.Popen(["sleep", "30"])
    try:
        r = psrec("record", "-o", str(tmp_path / "x.psr"), str(p.pid))
    finally:
        p.kill()
        p.wait()
    assert r.returncode == 1 and "is not a Python process" in r.stderr, r.stderr
    assert SUPPORTED_RANGE in r.stderr and "3.13" not in r.stderr, r.stderr


# -- a zombie ----------------------------------------------------------------------------------

def _stat(pid: int) -> tuple[str, int] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            after = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return after[0], int(after[1])


def _zombie_child_of(parent: int, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                st = _stat(int(entry))
                if st is not None and st[1] == parent and st[0] == "Z":
                    return int(entry)
        time.sleep(0.02)
    raise AssertionError(f"process {parent} has no zombie child after {timeout} s")


@pytest.mark.parametrize("python", PYTHONS)
def test_a_zombie_is_called_a_zombie(python: str, tmp_path: Path) -> None:
    out = tmp_path / "x.psr"
    with target(python, "rec_zombie.py") as t:
        zombie = _zombie_child_of(t.pid)
        runs = [psrec("record", "-o", str(out), str(zombie)), psrec("dump", str(zombie))]
        assert _stat(zombie) == ("Z", t.pid)  # still a zombie while psrec looked at it
    for r in runs:
        assert r.returncode == 1, (r.returncode, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 2 and lines[0].startswith("psrec: error: "), r.stderr
        assert f"process {zombie} has exited" in lines[0] and "zombie" in lines[0], r.stderr
        assert f"{t.pid}" in lines[0], r.stderr  # the parent that has not reaped it
        assert "permission" not in r.stderr and "sudo" not in r.stderr, r.stderr
    assert not out.exists()


# -- the live status line ----------------------------------------------------------------------

def _record_on_a_terminal(pid: int, out: Path, columns: int,
                          env_columns: str | None = None) -> tuple[str, int]:
    """Runs `psrec record` with its stderr on a pseudo-terminal COLUMNS wide; returns what it
    drew there and its exit status."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if env_columns is not None:
        env["COLUMNS"] = env_columns
    proc = subprocess.Popen([sys.executable, "-m", "psrec", "record", "-o", str(out), "-d", "1.5",
                             str(pid)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=slave, cwd=str(TARGETS), env=env)
    os.close(slave)
    drawn = b""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            r, _, _ = select.select([master], [], [], 1.0)
            if not r:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal has closed it
                break
            if not chunk:
                break
            drawn += chunk
        status = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return drawn.decode("utf-8", "replace"), status


def _redraws(drawn: str) -> list[str]:
    """What each carriage return started at the left margin and the next one drew over: the
    status line's redraws (the summary after it is printed once, ending with a newline)."""
    pieces = []
    for line in drawn.split("\r\n"):
        pieces += line.split("\r")[:-1]
    return [p for p in pieces if p]


@pytest.mark.parametrize("python", PYTHONS)
def test_status_line_fits_an_80_column_terminal(python: str, tmp_path: Path) -> None:
    with target(python, "rec_finite.py", "30") as t:
        drawn, status = _record_on_a_terminal(t.pid, tmp_path / "x.psr", 80)
    assert status == 0, drawn
    redraws = _redraws(drawn)
    shown = [p for p in redraws if p.strip()]
    assert len(shown) >= 3, repr(drawn)
    assert all(p.startswith("psrec: ") for p in shown), repr(drawn)
    assert all(len(p) <= 80 for p in redraws), "\n".join(f"{len(p)}: {p!r}" for p in redraws)
    # the fields that matter most are kept
    assert all(" samples" in p and " Hz" in p and "% errors" in p for p in shown), shown


@pytest.mark.parametrize(("columns", "env_columns", "width"),
                         [(30, None, 30), (12, None, 12), (200, "50", 50)])
def test_status_line_fits_narrow_terminals(tmp_path: Path, columns: int, env_columns: str | None,
                                           width: int) -> None:
    if not FOUND:
        pytest.skip("no supported CPython found")
    python = FOUND[0][1]
    with target(python, "rec_finite.py", "30") as t:
        drawn, status = _record_on_a_terminal(t.pid, tmp_path / "x.psr", columns, env_columns)
    assert status == 0, drawn
    redraws = _redraws(drawn)
    assert sum(1 for p in redraws if p.strip()) >= 3, repr(drawn)
    assert all(len(p) <= width for p in redraws), "\n".join(f"{len(p)}: {p!r}" for p in redraws)


# -- stacks deeper than the cap ----------------------------------------------------------------

@pytest.mark.parametrize("python", PYTHONS)
def test_info_counts_truncated_stacks(python: str, tmp_path: Path) -> None:
    out = tmp_path / "deep.psr"
    depth = C.MAX_DEPTH + 800
    with target(python, "rec_traps.py", "recursion", str(depth)) as t:
        r = psrec("record", "-q", "-o", str(out), "-d", "1", str(t.pid))
        assert r.returncode == 0, r.stderr
    samples = [s for s in load(out) if s.os_tid == t.pid]
    cut = [s for s in samples if s.functions[:1] == ("[truncated stack]",)]
    assert len(cut) >= 0.95 * len(samples) > 0, collapsed(samples, 3)[:2000]
    assert all(len(s.stack) == C.MAX_DEPTH and s.functions[-1] == "descend" for s in cut)

    info = psrec("info", str(out))
    assert info.returncode == 0, info.stderr
    m = re.search(r"^ *truncated +([\d,]+) ", info.stdout, re.MULTILINE)
    assert m, info.stdout
    assert int(m.group(1).replace(",", "")) == len(cut), info.stdout
    assert f"{C.MAX_DEPTH:,} frames" in info.stdout, info.stdout

    shallow = tmp_path / "shallow.psr"
    with target(python, "rec_traps.py", "recursion", "50") as t:
        r = psrec("record", "-q", "-o", str(shallow), "-d", "0.5", str(t.pid))
        assert r.returncode == 0, r.stderr
    info = psrec("info", str(shallow))
    assert re.search(r"^ *truncated +none ", info.stdout, re.MULTILINE), info.stdout


# -- a launched program that outlives --duration -----------------------------------------------

def _stderr_until(proc: subprocess.Popen[str], want: str, timeout: float) -> str:
    """What proc wrote to stderr until a line holding `want` (or until timeout)."""
    assert proc.stderr is not None
    fd = proc.stderr.fileno()
    got = b""
    deadline = time.monotonic() + timeout
    while want.encode() not in got and time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not r:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        got += chunk
    return got.decode(errors="replace")


@pytest.mark.parametrize("python", PYTHONS)
def test_duration_says_it_waits_for_the_launched_program(tmp_path: Path, python: str) -> None:
    out = tmp_path / "d.psr"
    proc = subprocess.Popen(
        [sys.executable, "-m", "psrec", "record", "-o", str(out), "-d", "1", "--", python,
         str(TARGETS / "rec_until_cue.py"), "3"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=str(TARGETS))
    try:
        said = _stderr_until(proc, "to exit (Ctrl-C stops it)", 30)
        # Said at the deadline, while the program runs on and psrec waits for it...
        assert ("psrec: --duration 1 s reached: recording stopped; waiting for "
                f"{os.path.basename(python)} to exit (Ctrl-C stops it)") in said, said
        assert proc.poll() is None, said
        # ... with the recording already complete.
        info = psrec("info", "--json", str(out))
        assert info.returncode == 0 and '"closed_cleanly": true' in info.stdout, info.stderr
        assert proc.stdin is not None
        proc.stdin.write("stop\n")
        proc.stdin.close()
        assert proc.wait(30) == 3  # the program's own exit status
        assert proc.stderr is not None
        assert "waiting for" not in proc.stderr.read()  # said once
    finally:
        stop(proc)
