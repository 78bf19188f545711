"""Launch mode under repetition, and --blocking, against live interpreters."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from psrec.format import open_recording
from rec_live import (
    PYTHONS,
    collapsed,
    line_of,
    load,
    one_python,
    psrec,
    python_params,
    record,
    target,
)

pytestmark = [pytest.mark.live, pytest.mark.timeout(300)]

LAUNCHES = 20


def _launch_params() -> list[object]:
    """Interpreters that cover the ways a runtime is found: statically linked executables
    (Debian's python3, and sid's 3.14 and 3.15, launched through a chroot that execs into
    them), a shared libpython with a built-in table (3.8), one with 3.13's _Py_DebugOffsets,
    and a free-threaded build. All of them when none of those is present."""
    wanted = ("python=3.8", "python=3.13", "python=3.14", "python=3.15", "python=3.14t")
    chosen = [pytest.param(p, id=i) for i, p in PYTHONS
              if i in wanted or i.endswith("-debian-static")]
    return chosen or python_params()


@pytest.mark.parametrize("python", _launch_params())
def test_launch_many_times_in_a_row(python: str, tmp_path: Path) -> None:
    """Right after exec the child is briefly unreadable, half-mapped or uninitialised: psrec
    waits it out every time instead of failing with a wrong version or permission error.
    The program runs 0.2 s: one that exits within milliseconds of starting may be gone
    before the sampler attaches, which is reported as such and is not what this tests."""
    failures = []
    for i in range(LAUNCHES):
        out = tmp_path / f"launch{i}.psr"
        r = psrec("record", "-q", "-o", str(out), "--", python, "rec_finite.py", "0.2", "0")
        if r.returncode != 0:
            failures.append(f"launch {i}: status {r.returncode}: {r.stderr.strip()}")
            continue
        with open_recording(out) as rec:
            if not rec.clean or rec.stats.get("exit_code") != 0:
                failures.append(f"launch {i}: {rec.stats}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("cpu_source", ["auto", "procfs"])
@pytest.mark.parametrize("python", one_python())
def test_blocking_keeps_a_busy_thread_on_cpu_beside_a_cpu_hog(python: str, cpu_source: str,
                                                               tmp_path: Path) -> None:
    """The target and a program that never sleeps share one CPU. --blocking pauses the target
    at every pass; a thread that was runnable is runnable again after the pause, but the
    context switches (--cpu-source auto) read the pause as a sleep until the thread next ran:
    the busy worker was on a CPU in 68-80 % of samples (procfs: 99.9 %)."""
    import os

    out = tmp_path / "hog.psr"
    hog = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    try:
        os.sched_setaffinity(hog.pid, {0})
        with target(python, "rec_threads.py") as t:
            for tid in os.listdir(f"/proc/{t.pid}/task"):
                os.sched_setaffinity(int(tid), {0})
            record(out, t.pid, "--blocking", "--cpu-source", cpu_source, duration=2)
    finally:
        hog.kill()
        hog.wait()
    from psrec.format import constants as C

    samples = load(out)
    busy = [s for s in samples if s.thread == "busy-worker"]
    sleepy = [s for s in samples if s.thread == "sleepy-worker"]
    assert len(busy) > 100 and sleepy, collapsed(samples)
    busy_on = sum(1 for s in busy if s.status & C.STATUS_ON_CPU) / len(busy)
    assert busy_on >= 0.97, busy_on
    # (A sleeping thread woken by each pause waits behind the hog to sleep again: /proc
    # shows it runnable then. The switches tell it apart.)
    if cpu_source == "auto":
        sleepy_on = sum(1 for s in sleepy if s.status & C.STATUS_ON_CPU) / len(sleepy)
        assert sleepy_on < 0.2, sleepy_on


@pytest.mark.parametrize("python", python_params())
def test_blocking_records_consistent_stacks(python: str, tmp_path: Path) -> None:
    """--blocking pauses the target for each pass: every sample reads whole, with the right
    functions at the right lines, and nothing is counted as an error."""
    out = tmp_path / "blocking.psr"
    with target(python, "rec_threads.py") as t:
        record(out, t.pid, "--blocking", "-r", "200", duration=1.5)
        assert t.proc.poll() is None, "the target must keep running after --blocking"
    samples = load(out)
    with open_recording(out) as rec:
        st = rec.stats
    assert st["sample_errors"] == 0, st
    assert st["samples"] > 100, st
    busy = [s for s in samples if s.thread == "busy-worker"]
    sleepy = [s for s in samples if s.thread == "sleepy-worker"]
    busy_line = line_of("rec_threads.py", "busy_inner")
    sleepy_line = line_of("rec_threads.py", "sleepy_inner")
    assert busy and sleepy, collapsed(samples)
    busy_ok = sum(
        1
        for s in busy
        if s.functions[-2:] == ("busy_worker", "busy_inner")
        and s.stack[-1][2] in {busy_line - 1, busy_line}
    )
    assert busy_ok / len(busy) > 0.95, collapsed(busy)
    sleepy_ok = sum(1 for s in sleepy if s.stack[-1][1:] == ("sleepy_inner", sleepy_line))
    assert sleepy_ok / len(sleepy) > 0.95, collapsed(sleepy)
    # A thread is off its CPU while psrec has the process stopped: its CPU state is the one
    # from before the pause. The busy worker spins (on a shared 2-core machine it is on a CPU
    # most of the time), the sleepy one sleeps.
    from psrec.format import constants as C

    busy_on = sum(1 for s in busy if s.status & C.STATUS_ON_CPU) / len(busy)
    sleepy_on = sum(1 for s in sleepy if s.status & C.STATUS_ON_CPU) / len(sleepy)
    assert busy_on > 0.6 and sleepy_on < 0.2, (busy_on, sleepy_on)
    # Every pass saw all three threads (the process was paused while it was read).
    per_pass: dict[int, int] = {}
    for s in samples:
        per_pass[s.ts] = per_pass.get(s.ts, 0) + 1
    assert min(per_pass.values()) == 3, sorted(set(per_pass.values()))


HOLD_LOADER = Path(__file__).resolve().parent / "gdb_hold_loader.py"
SPIN_AFTER_LOAD = """
import time
def spin_after_load():
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        pass
spin_after_load()
"""


def _libpython(python: str) -> Path | None:
    """The shared libpython an interpreter loads, if it loads one (as its own map shows)."""
    r = subprocess.run([python, "-c", "print(next((line.split()[-1] for line in "
                        "open('/proc/self/maps') if '/libpython' in line), ''))"],
                       capture_output=True, text=True, timeout=60)
    lib = r.stdout.strip()
    return Path(lib) if lib and Path(lib).is_file() else None


@pytest.mark.parametrize("python", python_params())
def test_a_program_caught_while_the_loader_maps_libpython_is_recorded_once_it_runs(
        python: str, tmp_path: Path) -> None:
    """While the dynamic loader maps a shared libpython, its first segment spans the whole
    file for a moment, so _PyRuntime's address reads the file's bytes. gdb holds a launched
    interpreter there for a second while psrec --subprocesses watches it, then lets it run
    a 1.5 s loop: the loop is recorded (a runtime read then, not a garbage interpreter
    pointer kept for the whole run)."""
    if shutil.which("gdb") is None or shutil.which("nm") is None:
        pytest.skip("gdb and nm (binutils) hold the program at the loader's first mapping")
    lib = _libpython(python)
    if lib is None:
        pytest.skip("the runtime is in the executable, which the kernel maps whole before "
                    "the program runs: no moment to catch")
    nm = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True,
                        text=True, timeout=60)
    runtime = next((line.split()[0] for line in nm.stdout.splitlines()
                    if line.endswith(" _PyRuntime")), None)
    assert runtime, f"{lib} exports no _PyRuntime"
    out = tmp_path / "held.psr"
    env = {**os.environ, "LIBPYTHON": str(lib), "RUNTIME": runtime, "HOLD": "1.0"}
    r = subprocess.run(
        [sys.executable, "-m", "psrec", "record", "-q", "--subprocesses", "-o", str(out),
         "--", "gdb", "-q", "-batch", "-nx", "-x", str(HOLD_LOADER), "--args", python, "-c",
         SPIN_AFTER_LOAD], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert "never held" not in r.stdout, r.stdout
    held = int(next(w.split()[1] for w in r.stdout.splitlines() if w.startswith("held ")))
    samples = [s for s in load(out) if s.pid == held]
    spun = sum(1 for s in samples if "spin_after_load" in s.functions)
    # 1.5 s at 1 kHz: half of it, however loaded the host
    assert spun >= 500, (spun, len(samples), collapsed(samples))
