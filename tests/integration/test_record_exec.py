"""Targets that change under the recorder: exec into Python or not, launchers with
--subprocesses, commands that are not Python. Every interpreter, real processes.

Over 400 lines and kept whole: one test per way a target changes under the recorder, sharing
the process-segment readers at the top."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from psrec.format import open_recording
from rec_live import TARGETS, collapsed, load, one_python, psrec, python_params, target

pytestmark = [pytest.mark.live, pytest.mark.timeout(300)]

BUSY = 0.6  # seconds each program of rec_exec.py spins


def _processes(out: Path) -> list[tuple[int, int, str]]:
    with open_recording(out) as rec:
        return [(p.pid, p.parent_pid, p.command) for p in rec.definitions().processes]


def _error_rate(out: Path) -> float:
    with open_recording(out) as rec:
        st = rec.stats
    return st["sample_errors"] / max(1, st["samples"] + st["sample_errors"])


def _share(samples: list, function: str) -> int:
    return sum(1 for s in samples if function in s.functions)


@pytest.mark.timing
@pytest.mark.parametrize("mode", ["launch", "attach"])
@pytest.mark.parametrize("python", python_params())
def test_exec_into_python_opens_a_new_process_segment(python: str, mode: str,
                                                      tmp_path: Path) -> None:
    """A target that execs Python again is recorded on: the old program's threads end, the
    new program is a new segment of the same pid with its own command line, and the exec costs
    no more than a sample error or two."""
    out = tmp_path / "exec.psr"
    if mode == "launch":
        r = psrec("record", "-q", "-o", str(out), "--", python, "rec_exec.py", "python",
                  str(BUSY))
        assert r.returncode == 0, r.stderr
    else:
        with target(python, "rec_exec.py", "python", str(BUSY)) as t:
            r = psrec("record", "-q", "-o", str(out), "-d", "30", str(t.pid))
            assert r.returncode == 0, r.stderr
            pid = t.pid
    procs = _processes(out)
    assert len(procs) == 2, procs
    assert procs[0][0] == procs[1][0], procs
    assert "rec_exec.py python" in procs[0][2] and "rec_exec.py after" in procs[1][2], procs
    if mode == "attach":
        assert procs[0][0] == pid
    samples = load(out)
    before, after = _share(samples, "before_exec"), _share(samples, "after_exec")
    # Each program spins BUSY s: at 1 kHz about 600 samples each (a loaded machine drops some).
    assert before > 200 and after > 200, (before, after, collapsed(samples))
    # The new program's threads are new threads of the file.
    threads_after = {s.thread for s in samples if "after_exec" in s.functions}
    threads_before = {s.thread for s in samples if "before_exec" in s.functions}
    assert threads_after and threads_before
    assert _error_rate(out) < 0.01
    with open_recording(out) as rec:
        assert rec.clean and rec.stats["stopped_by"] == "exit", rec.stats
        if mode == "launch":
            assert rec.stats["exit_code"] == 0


@pytest.mark.parametrize("python", python_params())
def test_exec_through_a_shell_back_into_python(python: str, tmp_path: Path) -> None:
    """Python execs a shell that execs Python: the shell is waited out, the second Python
    program recorded."""
    out = tmp_path / "shell.psr"
    r = psrec("record", "-q", "-o", str(out), "--", python, "rec_exec.py", "shell", str(BUSY))
    assert r.returncode == 0, r.stderr
    procs = _processes(out)
    assert [p[2].split()[-2] for p in procs] == ["shell", "after"], procs
    samples = load(out)
    assert _share(samples, "after_exec") > 200, collapsed(samples)


@pytest.mark.parametrize("python", python_params())
def test_exec_into_a_program_that_is_not_python_stops_cleanly(python: str,
                                                              tmp_path: Path) -> None:
    """Python execs `sleep`: psrec says so in one line, closes the file with everything
    recorded before, and exits with the program's status once it ends."""
    out = tmp_path / "sleep.psr"
    sleep = 2.5
    start = time.monotonic()
    r = psrec("record", "-q", "-o", str(out), "--", python, "rec_exec.py", "sleep", str(sleep))
    took = time.monotonic() - start
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("psrec:")]
    assert len(lines) == 1 and "now runs `sleep 2.5`, which is not Python: recording stopped" \
        in lines[0], r.stderr
    assert took >= BUSY + sleep, took  # the program was waited for, not killed
    with open_recording(out) as rec:
        assert rec.clean and rec.stats["stopped_by"] == "exec", rec.stats
    samples = load(out)
    assert _share(samples, "before_exec") > 200, collapsed(samples)
    assert _error_rate(out) < 0.01


@pytest.mark.parametrize("python", python_params())
def test_subprocesses_are_followed_through_a_launcher(python: str, tmp_path: Path) -> None:
    """`--subprocesses -- bash -c "python child.py; true"` (bash forks, then waits): bash is not
    Python, its Python child is recorded, with its own command line and bash as its parent;
    psrec exits with bash's status. A second level of shell is followed too."""
    out = tmp_path / "launcher.psr"
    inner = f'sh -c "{python} rec_finite.py 0.5 0; true"; exit 5'
    r = psrec("record", "-q", "--subprocesses", "-o", str(out), "--", "bash", "-c", inner)
    assert r.returncode == 5, r.stderr
    procs = _processes(out)
    assert procs and all("rec_finite.py 0.5 0" in p[2] for p in procs), procs
    with open_recording(out) as rec:
        root = rec.metadata["pid"]
    assert all(p[0] != root for p in procs), (root, procs)
    samples = load(out)
    assert _share(samples, "finite_work") > 200, collapsed(samples)
    assert _error_rate(out) < 0.01


@pytest.mark.parametrize("python", python_params())
def test_a_fork_about_to_exec_is_not_recorded_as_its_parent(python: str,
                                                            tmp_path: Path) -> None:
    """--subprocesses and children that fork, wait 10 ms and exec another program (as
    subprocess and multiprocessing's spawn do, with a shorter wait): each child is recorded
    as the program it exec'd, never as a copy of its parent (whose stack and command line it
    has until the exec). 10 such children give a scan every 100 ms several chances to find
    one before its exec."""
    out = tmp_path / "forks.psr"
    r = psrec("record", "-q", "--subprocesses", "-o", str(out), "--", python,
              "rec_forkexec.py", "10")
    assert r.returncode == 0, r.stderr
    with open_recording(out) as rec:
        root = rec.metadata["pid"]
    procs = _processes(out)
    children = [p for p in procs if p[1] == root]
    copies = [p for p in children if "rec_forkexec.py" in p[2]]
    assert not copies, procs
    assert len([p for p in children if "-c" in p[2]]) >= 3, procs  # the exec'd programs


def _stderr_lines_with_times(args: list[str],
                             timeout: float) -> tuple[int, list[tuple[float, str]]]:
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "psrec", *args], stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True, cwd=str(TARGETS))
    assert proc.stderr is not None
    lines = []
    for line in proc.stderr:
        lines.append((time.monotonic() - start, line.rstrip("\n")))
    return proc.wait(timeout), lines


def test_a_command_that_is_not_python_is_named_within_a_second(tmp_path: Path) -> None:
    """`psrec record -- sleep 3`: within a second psrec says the command is not Python (yet)
    and that it waits for it to start Python; when it ends without doing so, psrec says nothing
    was recorded, writes no file, and exits with the program's status."""
    out = tmp_path / "sleep.psr"
    code, lines = _stderr_lines_with_times(
        ["record", "-o", str(out), "--", "sh", "-c", "sleep 2.5; exit 7"], 30)
    assert code == 7, lines
    assert lines and "is not a Python process (yet)" in lines[0][1], lines
    assert lines[0][0] < 1.8, lines  # 1 s, plus the interpreter's start on a busy machine
    assert "nothing recorded" in lines[-1][1], lines
    assert not out.exists()


def test_a_process_caught_in_exec_is_not_called_unreadable(tmp_path: Path) -> None:
    """A map of a process opened just before it execs reads empty: the process runs on and is
    readable, so it is no "permission denied" (a launched `chroot DIR python` was refused that
    way when the chroot exec'd Python as psrec attached). A shell that execs itself again and
    again, attached to as fast as psrec can: it is never called unreadable."""
    from psrec.recorder._api import native

    rec = native()
    loop = tmp_path / "execloop.sh"
    loop.write_text('#!/bin/sh\nexec "$0"\n')
    loop.chmod(0o755)
    proc = subprocess.Popen([str(loop)])
    seen: dict[str, int] = {}
    try:
        end = time.monotonic() + 4
        while time.monotonic() < end:
            try:
                rec.inspect(proc.pid)
                why = "a Python process"
            except Exception as exc:  # noqa: BLE001 - every kind is counted below
                why = str(exc).replace(str(proc.pid), "N")
            seen[why] = seen.get(why, 0) + 1
    finally:
        proc.kill()
        proc.wait()
    assert sum(seen.values()) > 1000, seen  # the loop really raced the execs
    assert not [why for why in seen if "permission denied" in why], seen


@pytest.mark.timing
@pytest.mark.parametrize("python", python_params())
def test_a_launcher_that_execs_python_later_is_recorded(python: str, tmp_path: Path) -> None:
    """A shell script that prepares for a while, then execs Python (a common wrapper): psrec
    keeps watching it and records the Python program."""
    out = tmp_path / "wrapper.psr"
    r = psrec("record", "-o", str(out), "--", "sh", "-c",
              f'sleep 1.5; exec "{python}" rec_finite.py 0.5 4')
    assert r.returncode == 4, r.stderr
    assert "is not a Python process (yet)" in r.stderr
    samples = load(out)
    assert _share(samples, "finite_work") > 200, collapsed(samples)
    with open_recording(out) as rec:
        assert rec.stats["exit_code"] == 4, rec.stats
        # The recording's time counts from the first sample, not from the launch.
        assert rec.stats["duration_ns"] < 1.4e9, rec.stats


@pytest.mark.parametrize("python", python_params())
def test_each_process_is_named_and_selectable(python: str, tmp_path: Path) -> None:
    """With --subprocesses: `psrec info` lists every process with its pid and command line,
    `report --per-thread` names each thread's process, and `report --pid` / `--process` select
    exactly that process's samples."""
    import json

    out = tmp_path / "workers.psr"
    r = psrec("record", "-q", "--subprocesses", "-o", str(out), "--", python, "rec_workers.py",
              "1.0")
    assert r.returncode == 0, r.stderr
    samples = load(out)
    with open_recording(out) as rec:
        root = rec.metadata["pid"]
    info = json.loads(psrec("info", "--json", str(out)).stdout)
    procs = info["processes"]
    assert procs[0]["pid"] == root and "rec_workers.py" in procs[0]["command"], procs
    children = [p for p in procs if p["parent_pid"] == root]
    assert len(children) >= 2, procs  # the spawned workers (and the resource tracker)
    text = psrec("info", str(out)).stdout
    for p in procs:
        assert f"pid {p['pid']}" in text, text
    per_thread = psrec("report", str(out), "--per-thread", "-l", "1").stdout
    headers = [ln for ln in per_thread.splitlines() if ln.startswith("== thread")]
    assert headers and all("pid " in h for h in headers), headers
    assert any(f"pid {root}: " in h and "rec_workers.py 1.0" in h for h in headers), headers
    worker = next(p["pid"] for p in children
                  if any(s.pid == p["pid"] and "child_work" in s.functions for s in samples))
    want = sum(1 for s in samples if s.pid == worker)
    picked = psrec("report", str(out), "--pid", str(worker), "--weights", "count", "-l", "1")
    assert picked.returncode == 0, picked.stderr
    assert f": {want:,} samples over" in picked.stdout.splitlines()[0], (want, picked.stdout)
    by_name = psrec("report", str(out), "--process", "rec_workers.py 1.0", "--weights", "count",
                    "-l", "1")
    parent = sum(1 for s in samples if s.pid == root)
    assert f": {parent:,} samples over" in by_name.stdout.splitlines()[0], (parent, by_name.stdout)
    wrong = psrec("report", str(out), "--pid", "1")
    assert wrong.returncode != 0 and "no process with pid 1" in wrong.stderr, wrong.stderr


@pytest.mark.parametrize("python", python_params())
def test_a_killed_recorder_takes_its_launched_program_with_it(python: str,
                                                             tmp_path: Path) -> None:
    """SIGKILL of `psrec record -- cmd` (no chance to clean up): the program gets SIGTERM
    instead of running on under init, and what was recorded is readable."""
    import os
    import signal

    out = tmp_path / "killed.psr"
    p = subprocess.Popen([sys.executable, "-m", "psrec", "record", "-q", "-o", str(out), "--",
                          python, "rec_finite.py", "60", "0"], cwd=str(TARGETS),
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "ready"
    program = _launched(p.pid, "rec_finite.py")
    deadline = time.monotonic() + 20
    while not out.exists() or out.stat().st_size < 200:  # the file has begun
        assert time.monotonic() < deadline
        time.sleep(0.05)
    begun = out.stat().st_size
    while out.stat().st_size == begun:  # and holds a first chunk of samples
        assert time.monotonic() < deadline
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait(10)
    deadline = time.monotonic() + 10
    while True:
        try:
            state = Path(f"/proc/{program}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            break
        if state in ("Z", "X"):
            break
        assert time.monotonic() < deadline, f"the program (pid {program}) still runs: {state}"
        time.sleep(0.05)
    assert not any(pid == str(program) for pid in os.listdir("/proc")) or state in ("Z", "X")
    with open_recording(out) as rec:
        assert rec.definitions().threads


def _launched(psrec_pid: int, script: str) -> int:
    """The pid of psrec's child that runs script (psrec has another child: the guard)."""
    children = Path(f"/proc/{psrec_pid}/task/{psrec_pid}/children").read_text().split()
    own = Path(f"/proc/{psrec_pid}/cmdline").read_bytes()  # the guard's too: a fork of psrec
    mine = [int(c) for c in children
            if script.encode() in (cmd := Path(f"/proc/{c}/cmdline").read_bytes()) and cmd != own]
    assert len(mine) == 1, children
    return mine[0]


def _gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize(("subprocesses", "sig"), [(False, "SIGKILL"), (True, "SIGKILL"),
                                                   (True, "SIGTERM")],
                         ids=["killed", "killed-subprocesses", "terminated"])
@pytest.mark.parametrize("python", one_python())
def test_a_killed_recorder_takes_what_its_program_started_with_it(
        python: str, subprocesses: bool, sig: str, tmp_path: Path) -> None:
    """SIGKILL of `psrec record -- bash -c "python x.py; true"`: the shell got SIGTERM, but
    the Python it started ran on under init (PR_SET_PDEATHSIG is not inherited). SIGTERM
    ends them too, and the file closes cleanly."""
    import os
    import signal

    out = tmp_path / "killed.psr"
    shell = f"{shlex.quote(python)} rec_finite.py 60 0; true"
    p = subprocess.Popen([sys.executable, "-m", "psrec", "record", "-q", "-o", str(out),
                          *(["--subprocesses"] if subprocesses else []), "--", "bash", "-c",
                          shell], cwd=str(TARGETS), stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "ready"
    bash = _launched(p.pid, "rec_finite.py")
    guard = [int(c) for c in Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()
             if int(c) != bash]
    assert len(guard) == 1, guard
    grandchildren = Path(f"/proc/{bash}/task/{bash}/children").read_text().split()
    assert len(grandchildren) == 1, grandchildren
    program = int(grandchildren[0])
    if subprocesses:
        deadline = time.monotonic() + 20
        while not out.exists() or out.stat().st_size < 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    p.send_signal(getattr(signal, sig))
    p.wait(20)
    try:
        assert _gone(bash, 10), f"the shell (pid {bash}) still runs"
        assert _gone(program, 10), f"the shell's Python (pid {program}) still runs"
        assert _gone(guard[0], 10), f"the guard (pid {guard[0]}) still runs"
        if sig == "SIGTERM":
            with open_recording(out) as rec:
                assert rec.clean and rec.stats and rec.stats["stopped_by"] == "terminate"
    finally:
        for pid in (program, bash, guard[0]):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.parametrize("python", one_python())
def test_a_recorder_that_ends_as_it_should_leaves_no_guard(python: str, tmp_path: Path) -> None:
    """The guard of a launched program ends with psrec, and signals nothing: a process the
    program left running (a daemon) runs on, as without psrec."""
    import os
    import signal

    out = tmp_path / "done.psr"
    pidfile = tmp_path / "daemon.pid"
    shell = (f"{shlex.quote(python)} rec_finite.py 60 0 > /dev/null 2>&1 & echo $! > {pidfile}; "
             f"{shlex.quote(python)} rec_finite.py 0.5 0")
    r = subprocess.run([sys.executable, "-m", "psrec", "record", "-q", "-o", str(out), "--",
                        "bash", "-c", shell], cwd=str(TARGETS), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    daemon = int(pidfile.read_text())
    try:
        time.sleep(1.5)  # what a guard that signalled would have needed
        assert not _gone(daemon, 0.1), "the program's daemon was ended"
        guards = [pid for pid in os.listdir("/proc") if pid.isdigit() and _is_guard(int(pid))]
        assert guards == [], guards
    finally:
        os.kill(daemon, signal.SIGKILL)


def _is_guard(pid: int) -> bool:
    """A guard is a fork of `psrec record` whose parent is no psrec (here: all psrec records
    ended)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"psrec\0record" in cmd and b"done.psr" in cmd
