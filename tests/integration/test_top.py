"""`psrec top` in a real terminal (tmux): live on a target, the table names its threads and
its busy function; keys switch the view and quit; -o keeps a clean recording; a recording
replays. Names from the target show as they are; the rate and the window's time agree with
the recording; pause shows at once; the keys fit 80x24; the last table stays when the target
exits; a file that is no recording is said to be one; GIL waits show where the recording
knows them, and a sentence says so where it cannot. Off a terminal it says so.

Needs tmux (Debian: apt-get install tmux); skips, saying so, without it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from psrec.format import open_recording
from rec_live import (
    PYTHONS,
    TARGETS,
    WITHOUT_PTRACE,
    minor_of,
    one_python,
    psrec,
    target,
    target_of_nobody,
)

pytestmark = [pytest.mark.live, pytest.mark.timeout(180)]


class Tmux:
    """One detached tmux session on a server of its own, running one command."""

    def __init__(self, name: str, command: str, size: tuple[int, int] = (150, 50)) -> None:
        exe = shutil.which("tmux")
        if exe is None:
            pytest.skip("tmux is not installed (Debian: apt-get install tmux)")
        self.base = [exe, "-L", f"psrec-test-{name}"]
        subprocess.run([*self.base, "kill-server"], capture_output=True, check=False)
        subprocess.run([*self.base, "new-session", "-d", "-x", str(size[0]), "-y", str(size[1]),
                        "-s", "t",
                        f"{command}; echo TOP-EXITED $?; sleep 60"], check=True)

    def screen(self) -> str:
        r = subprocess.run([*self.base, "capture-pane", "-p", "-t", "t"], capture_output=True,
                           text=True, check=True)
        return r.stdout

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.base, "send-keys", "-t", "t", *keys], check=True)

    def wait_for(self, text: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if text in screen:
                return screen
            assert time.monotonic() < deadline, f"{text!r} not on the screen:\n{screen}"
            time.sleep(0.2)

    def close(self) -> None:
        subprocess.run([*self.base, "kill-server"], capture_output=True, check=False)


def _command(*args: str, tmpdir: Path | None = None, as_user: tuple[str, ...] = ()) -> str:
    # COLUMNS and LINES, where pytest's environment has them, would fix the screen's size
    env = [f"TMPDIR={tmpdir}"] if tmpdir is not None else []
    return f"cd {shlex.quote(str(TARGETS))} && " + shlex.join(
        [*as_user, "env", "-u", "COLUMNS", "-u", "LINES", *env, sys.executable, "-m", "psrec",
         "top", *args])


@pytest.mark.parametrize("python", one_python())
def test_top_live_keys_and_kept_recording(python: str, tmp_path: Path) -> None:
    out = tmp_path / "top.psr"
    with target(python, "rec_threads.py") as t:
        tmux = Tmux("live", _command("-o", str(out), str(t.pid)))
        try:
            screen = tmux.wait_for("busy_inner")
            # the CPU view first, and the active threads, busiest first: a sleeper (awake for
            # moments every 50 ms) is counted on a line instead where all its shares round to
            # 0 % (on a loaded host its waits for a CPU may not)
            assert f"pid {t.pid}" in screen and "mode cpu" in screen
            lines = screen.splitlines()
            first = lines.index(next(ln for ln in lines if ln.startswith("thread "))) + 1
            assert lines[first].startswith("busy-worker"), screen
            hidden = re.search(r"(\d) idle threads? not shown \(a: show\)", screen)
            listed = sum(name in screen for name in ("sleepy-worker", "MainThread"))
            assert listed + (int(hidden.group(1)) if hidden else 0) == 2, screen
            # the busy thread holds the GIL nearly all the time, and uses a CPU or waits for
            # one (a loaded host's share of a CPU is what it gets)
            busy = next(line for line in screen.splitlines() if line.startswith("busy-worker"))
            gil, cpu, ready = (int(x.rstrip("%")) for x in busy.split()[-3:])
            assert gil >= 80 and cpu + ready >= 80 and cpu >= 10, busy
            tmux.keys("a")  # every thread listed, at the next redraw
            deadline = time.monotonic() + 10
            while not ("sleepy-worker" in screen and "MainThread" in screen
                       and "not shown (a: show)" not in screen):
                assert time.monotonic() < deadline, screen
                time.sleep(0.2)
                screen = tmux.screen()
            tmux.keys("w")
            screen = tmux.wait_for("mode wall")
            tmux.keys("g")
            screen = tmux.wait_for("mode gil")
            # in the GIL view the sleepers' waits are gone: busy_inner is all of it
            row = next(line for line in screen.splitlines() if "busy_inner" in line)
            assert float(row.split()[0].rstrip("%")) >= 95.0, screen
            tmux.keys("t")
            tmux.wait_for("sort total")
            tmux.keys("q")
            screen = tmux.wait_for("TOP-EXITED 0")
            assert f"recording kept in {out}" in screen
        finally:
            tmux.close()
    with open_recording(out) as rec:
        assert rec.clean, "top's recording should be closed cleanly"
    r = psrec("report", str(out), "-l", "5")
    assert r.returncode == 0 and "busy_inner" in r.stdout


def _recorders_of(pid: int) -> list[int]:
    """Pids of the `psrec record` processes recording pid."""
    r = subprocess.run(["pgrep", "-f", f"psrec record -q -r .* {pid}$"], capture_output=True,
                       text=True, check=False)
    return [int(p) for p in r.stdout.split()]


@pytest.mark.parametrize("python", one_python())
def test_top_killed_outright_leaves_no_file_and_no_recorder(python: str, tmp_path: Path) -> None:
    """kill -9 of top: its recording had a name in $TMPDIR, left behind, and the recorder went
    on recording into it until the target ended."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with target(python, "rec_threads.py") as t:
        tmux = Tmux("killed", _command(str(t.pid), tmpdir=tmp))
        try:
            tmux.wait_for("busy_inner")
            assert list(tmp.iterdir()) == []  # recording, with no file to be seen
            recorders = _recorders_of(t.pid)
            assert len(recorders) == 1, recorders
            top = subprocess.run(["pgrep", "-f", f"psrec top {t.pid}$"], capture_output=True,
                                 text=True, check=False).stdout.split()
            assert len(top) == 1, top
            os.kill(int(top[0]), signal.SIGKILL)
            tmux.wait_for("TOP-EXITED 137")
            deadline = time.monotonic() + 20
            while _recorders_of(t.pid):
                assert time.monotonic() < deadline, "the recorder outlived top"
                time.sleep(0.1)
            assert t.proc.poll() is None  # the target was only recorded, never stopped
        finally:
            tmux.close()
    assert list(tmp.iterdir()) == []


def test_top_refused_by_the_target_says_why_and_leaves_no_file(tmp_path: Path) -> None:
    """Root without CAP_SYS_PTRACE on another user's Python: one error that says so, and no
    file left (a failed start left an empty one in $TMPDIR)."""
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with target_of_nobody("rec_threads.py") as t:
        tmux = Tmux("refused", _command(str(t.pid), tmpdir=tmp, as_user=WITHOUT_PTRACE))
        try:
            screen = tmux.wait_for("TOP-EXITED 1")
            flat = " ".join(screen.split())
            assert f"permission denied reading the memory of process {t.pid}" in flat, screen
            assert "without CAP_SYS_PTRACE" in flat and "Traceback" not in screen, screen
        finally:
            tmux.close()
    assert list(tmp.iterdir()) == []


@pytest.mark.parametrize("python", one_python())
def test_top_replays_a_recording(python: str, tmp_path: Path) -> None:
    out = tmp_path / "rec.psr"
    with target(python, "rec_threads.py") as t:
        r = psrec("record", "-q", "-d", "2", "-o", str(out), str(t.pid))
        assert r.returncode == 0, r.stderr
    tmux = Tmux("replay", _command("--window", "1s", str(out)))
    try:
        screen = tmux.wait_for("busy_inner")
        assert "replay of rec.psr" in screen and "at 1.0 of" in screen, screen
        screen = tmux.wait_for("(the end)", timeout=15)
        end = re.search(r"at ([\d.]+) of ([\d.]+) s \(the end\)", screen)
        assert end, screen
        # the arrow keys seek a window (1 s) back and on; the replay then goes on from there
        tmux.keys("Space", "Left")
        screen = tmux.wait_for(f"at {float(end.group(1)) - 1.0:.1f} of")
        assert "(the end)" not in screen, screen
        tmux.keys("Right")
        tmux.wait_for("(the end)", timeout=3)
        tmux.keys("Space", "i")
        screen = tmux.wait_for("mode idle")
        assert "sleepy_inner" in screen, screen
        tmux.keys("q")
        tmux.wait_for("TOP-EXITED 0")
    finally:
        tmux.close()


def _cpu_ticks(pid: int, tid: int) -> int:
    with open(f"/proc/{pid}/task/{tid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


@pytest.mark.parametrize("python", one_python())
def test_top_cpu_is_the_cpu_time_used_and_ready_the_wait_for_one(python: str) -> None:
    """A busy thread sharing one CPU with another busy process: runnable all the time, on a
    CPU about half of it. top's CPU column is the CPU time it used (as /proc counts it over
    the same seconds), not the time it was runnable; its ready column the rest."""
    hz = os.sysconf("SC_CLK_TCK")
    with target(python, "rec_threads.py") as t:
        tids = [int(x) for x in os.listdir(f"/proc/{t.pid}/task")]
        busy = next(tid for tid in tids
                    if open(f"/proc/{t.pid}/task/{tid}/comm").read().strip() == "os-busy")
        for tid in tids:
            os.sched_setaffinity(tid, {0})
        rival = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            os.sched_setaffinity(rival.pid, {0})
            tmux = Tmux("ready", _command("--window", "2s", str(t.pid)))
            try:
                tmux.wait_for("busy_inner")
                shown: list[tuple[int, int, float]] = []
                deadline = time.monotonic() + 40
                while len(shown) < 3 and time.monotonic() < deadline:
                    c0, t0 = _cpu_ticks(t.pid, busy), time.monotonic()
                    time.sleep(2.0)
                    screen = tmux.screen()
                    share = (_cpu_ticks(t.pid, busy) - c0) / hz / (time.monotonic() - t0)
                    row = next((ln for ln in screen.splitlines()
                                if ln.startswith("busy-worker")), None)
                    if row is None or "so far" in screen:
                        continue
                    cpu, ready = (int(x.rstrip("%")) for x in row.split()[-2:])
                    shown.append((cpu, ready, 100 * share))
                tmux.keys("q")
                tmux.wait_for("TOP-EXITED 0")
            finally:
                tmux.close()
        finally:
            rival.kill()
            rival.wait()
    assert len(shown) >= 2, shown
    for cpu, ready, proc in shown:
        assert abs(cpu - proc) <= 15, (shown, "top's CPU against /proc's")
        assert cpu <= 80 and cpu + ready >= 85, shown


def test_top_off_a_terminal_says_so() -> None:
    r = psrec("top", "1")
    assert r.returncode == 2
    assert "psrec top draws on a terminal" in r.stderr and "Traceback" not in r.stderr


# -- what the table says -----------------------------------------------------------------------

@pytest.mark.parametrize("python", one_python())
def test_top_shows_names_as_they_are(python: str) -> None:
    # Names that read as markup ("[bold]...", "[/]"), a "[v2]" folder, a control character,
    # and psrec's own "[no Python stack]" and "[truncated stack]": each shown literally.
    with target(python, "top_names.py") as t:
        tmux = Tmux("names", _command("--mode", "wall", str(t.pid)))
        try:
            screen = tmux.wait_for("[truncated stack]")
            for name in ("[no Python stack]", "[bold]hot[/bold]", "/opt/app/[v2]/lib.py",
                         "a[/]b", "bell\\x07sleep", "[red]worker[/red] (tid"):
                assert name in screen, f"{name!r} not shown:\n{screen}"
            assert "\x07" not in screen
            tmux.keys("q")
            tmux.wait_for("TOP-EXITED 0")
        finally:
            tmux.close()


_RATE = re.compile(r"(\d[\d,]*) samples/s per thread")
_THREADS = re.compile(r"^(\d+) threads ·", re.MULTILINE)
_ROW = re.compile(r"^ *[\d.]+% +[\d.]+% +([\d.]+)s +[\d.]+s +\S")


@pytest.mark.parametrize("python", one_python())
def test_top_rate_and_window_agree_with_the_recording(python: str, tmp_path: Path) -> None:
    out = tmp_path / "rate.psr"
    rates: list[float] = []
    sums: list[tuple[float, int, str]] = []
    with target(python, "rec_threads.py") as t:
        tmux = Tmux("rate", _command("--mode", "wall", "-r", "200", "-o", str(out), str(t.pid)))
        try:
            tmux.wait_for("busy_inner")
            # once the window is full: each redraw's rate, and the time its functions sum to
            deadline = time.monotonic() + 20
            while len(rates) < 5 and time.monotonic() < deadline:
                time.sleep(1.0)  # about one redraw apart
                screen = tmux.wait_for("samples/s per thread")
                if "so far" in screen:
                    continue
                rate, threads = _RATE.search(screen), _THREADS.search(screen)
                assert rate and threads, screen
                rates.append(float(rate.group(1).replace(",", "")))
                own = sum(float(m.group(1)) for line in screen.splitlines()
                          if (m := _ROW.match(line)))
                sums.append((own, int(threads.group(1)), screen))
            assert len(rates) >= 3, f"too few redraws with a full window: {rates}"
            tmux.keys("q")
            tmux.wait_for("TOP-EXITED 0")
        finally:
            tmux.close()
    info = psrec("info", str(out))
    achieved = re.search(r"achieved ([\d.]+) Hz", info.stdout)
    assert achieved, info.stdout
    hz = float(achieved.group(1))
    rates.sort()
    median = rates[len(rates) // 2]
    assert abs(median - hz) <= 0.05 * hz, f"top showed {rates} samples/s, psrec info {hz} Hz"
    # wall time: each thread's 2 s window is 2 s of samples
    for own, threads, screen in sums:
        assert abs(own - 2.0 * threads) <= 0.06 * 2.0 * threads, screen
    # a recording that cannot know GIL waits says so once, and shows no column of them
    assert screen.count("does not say which threads wait for the GIL") == 1, screen
    assert "GIL wait " not in screen.replace("GIL wait: ", ""), screen


@pytest.mark.parametrize("python", one_python())
def test_top_pause_shows_at_once_and_holds_the_table(python: str) -> None:
    with target(python, "rec_finite.py", "30") as t:
        tmux = Tmux("pause", _command(str(t.pid)))
        try:
            tmux.wait_for("finite_work")
            tmux.keys("Space")
            screen = tmux.wait_for("paused", timeout=3)
            row = next(ln for ln in screen.splitlines() if ln.startswith("python"))
            # paused, the table stays as it was while the target runs on
            deadline = time.monotonic() + 2.5
            while time.monotonic() < deadline:
                now = tmux.screen()
                assert row in now and "paused" in now, f"{row!r} changed:\n{now}"
                time.sleep(0.25)
            tmux.keys("c")  # another view, at once, still paused
            screen = tmux.wait_for("mode cpu", timeout=3)
            assert "paused" in screen, screen
            tmux.keys("Space")
            deadline = time.monotonic() + 3
            while "paused" in screen:
                assert time.monotonic() < deadline, screen
                time.sleep(0.2)
                screen = tmux.screen()
            tmux.keys("q")
            tmux.wait_for("TOP-EXITED 0")
        finally:
            tmux.close()


@pytest.mark.parametrize("python", one_python())
def test_top_fits_80x24_and_keeps_its_table_when_the_target_exits(python: str) -> None:
    with target(python, "rec_finite.py", "6", "3") as t:
        tmux = Tmux("small", _command(str(t.pid)), size=(80, 24))
        try:
            screen = tmux.wait_for("finite_work")
            # every key in sight on a small terminal
            for keys in ("q quit", "space pause", "o t: sort by own, total",
                         "+ -: wider, narrower window", "w c g i G: wall, cpu, gil, idle, "
                         "gil-wait view"):
                assert keys in screen, f"{keys!r} not on the screen:\n{screen}"
            # the target exits: its last table stays, saying so, until q
            screen = tmux.wait_for("exited", timeout=20)
            assert f"pid {t.pid} exited" in screen and "finite_work" in screen, screen
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                screen = tmux.screen()
                assert "finite_work" in screen and "TOP-EXITED" not in screen, screen
                time.sleep(0.25)
            tmux.keys("q")
            screen = tmux.wait_for("TOP-EXITED 0")
            assert f"pid {t.pid} exited" in screen
        finally:
            tmux.close()


def test_top_says_why_a_file_is_no_recording(tmp_path: Path) -> None:
    text = tmp_path / "notapsr.txt"
    text.write_text("hello\n")
    for path, why in ((text, "not a psrec recording"), (tmp_path, "is a directory")):
        tmux = Tmux("notapsr", _command(str(path)))
        try:
            screen = tmux.wait_for("TOP-EXITED")
            assert why in screen and "TOP-EXITED 1" in screen, screen
            assert "no samples" not in screen and "Traceback" not in screen, screen
        finally:
            tmux.close()
        r = psrec("top", str(path))  # off a terminal too
        assert r.returncode == 1 and why in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_top_shows_gil_waits_of_a_recording_that_knows_them(tmp_path: Path) -> None:
    # A recording as CPython 3.15 makes it, written with the format's own encoder: "waiter"
    # waits for the GIL in 2 of every 5 passes, while "holder" holds it.
    from analyzer_synth import BUSY, Synth

    known, requested = 0x40, 0x04  # GIL_REQUESTED_KNOWN, GIL_REQUESTED
    s = Synth(str(tmp_path / "gil315.psr"), metadata={"python_version": "3.15.0"})
    s.thread("holder", 100)
    s.thread("waiter", 101)
    loop = (("app.py", "main", 5), ("app.py", "spin", 12))
    for i in range(4000):  # 4 s at 1 kHz
        wait = i % 5 < 2
        s.sample_pass((i + 1) * s.interval_ticks, {
            "holder": (loop, (BUSY if wait else 0) | known, 1000 if wait else 0),
            "waiter": (loop, (requested if wait else BUSY) | known, 0 if wait else 1000)})
    s.close()
    tmux = Tmux("gilwait", _command("--window", "2s", s.path))
    try:
        screen = tmux.wait_for("waiter")
        header = next(ln for ln in screen.splitlines() if ln.startswith("thread "))
        assert header.split()[-2:] == ["GIL", "wait"], screen
        shares = {ln.split()[0]: ln.split()[-1] for ln in screen.splitlines()
                  if ln.startswith(("holder", "waiter"))}
        assert shares == {"holder": "0%", "waiter": "40%"}, screen
        assert "does not say" not in screen
        tmux.keys("G")
        screen = tmux.wait_for("mode gil-wait", timeout=3)
        # the functions are those of the waits; the threads table is the view's every thread
        row = next(ln for ln in screen.splitlines() if ln.rstrip().endswith("spin  app.py:10"))
        assert row.split()[0] == "100.0%", screen
        tmux.keys("q")
        tmux.wait_for("TOP-EXITED 0")
    finally:
        tmux.close()


def _python_315() -> list[object]:
    found = [pytest.param(path, id=ident) for ident, path in PYTHONS
             if minor_of(path) >= (3, 15)]
    return found[:1] or [pytest.param(None, id="python=3.15", marks=pytest.mark.skip(
        reason="no CPython 3.15 found (tests/interpreters/provision installs it)"))]


@pytest.mark.parametrize("python", _python_315())
def test_top_shows_a_live_threads_gil_wait(python: str) -> None:
    # On 3.15 the target says which threads wait: one pure-Python thread waits behind
    # another that holds the GIL in long C calls.
    with target(python, "rec_gil.py") as t:
        tmux = Tmux("gillive", _command(str(t.pid)))
        try:
            screen = tmux.wait_for("want_gil")
            deadline = time.monotonic() + 10
            while "so far" in screen and time.monotonic() < deadline:
                time.sleep(0.3)
                screen = tmux.screen()
            header = next(ln for ln in screen.splitlines() if ln.startswith("thread "))
            assert header.split()[-2:] == ["GIL", "wait"], screen
            waiter = next(ln for ln in screen.splitlines() if ln.startswith("gil-waiter"))
            assert int(waiter.split()[-1].rstrip("%")) >= 50, screen
            tmux.keys("q")
            tmux.wait_for("TOP-EXITED 0")
        finally:
            tmux.close()


@pytest.mark.parametrize("python", one_python())
def test_top_native_shows_c_functions(python: str) -> None:
    """top --native: the C function a thread spins in, by name, in the live table."""
    import native_ext

    with target(python, "rec_native.py", str(native_ext.build(python))) as t:
        tmux = Tmux("native", _command("--native", str(t.pid)))
        try:
            screen = tmux.wait_for("c_inner")
            assert "c-spinner" in screen, screen
            tmux.keys("q")
            tmux.wait_for("TOP-EXITED 0")
        finally:
            tmux.close()


@pytest.mark.parametrize("python", one_python())
def test_top_reads_what_is_new_and_sums_the_window_as_a_whole_read(python: str,
                                                                    tmp_path: Path) -> None:
    """top's reading of a recording being written (psrec._top_model.Follower): once it has
    read the file, each refresh decodes the window's chunks and the new ones, not the file
    again (a day-long top costs what a minute-long one does), and the table's sums of a
    window are those of the whole file read afresh at that moment."""
    from psrec._top_model import Follower, Screen, sums
    from psrec._top_model import load as load_whole
    from psrec.format import constants as C

    out = tmp_path / "grow.psr"
    follower = Follower(str(out))
    screen = Screen(mode="wall", window_s=2.0, limit=25)
    with target(python, "per_second.py") as t:
        rec = subprocess.Popen([sys.executable, "-m", "psrec", "record", "-q", "-r", "1000",
                                "-o", str(out), str(t.pid)], stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 30
            first = None
            while first is None and time.monotonic() < deadline:
                time.sleep(0.5)
                first = follower.load(screen, False) if out.exists() else None
            assert first is not None and follower.rec is not None
            read = _data_chunks_read(follower.rec)
            for _ in range(9):
                time.sleep(1.0)
                before = read()
                p = follower.load(screen, False)
                assert p is not None
                data = sum(1 for c in follower.rec.chunks if c.type == C.CHUNK_DATA)
                # The window (2 s, a slice and a second to spare) and what is new, not more.
                assert read() - before <= 6, (read() - before, data)
                mine = sums(p, screen)
                screen.frozen_end = screen.shown_end  # the same slices, in a whole read
                whole = load_whole(str(out), "wall", False)
                assert whole is not None
                theirs = sums(whole, screen)
                screen.frozen_end = None
                assert (mine.own, mine.total, mine.threads) == \
                    (theirs.own, theirs.total, theirs.threads)
            assert data >= 9
        finally:
            rec.send_signal(signal.SIGINT)
            rec.wait(30)
            follower.close()


def _data_chunks_read(rec: Any) -> Callable[[], int]:
    """Counts the DATA chunks whose payloads the recording reads from now on."""
    from psrec.format import constants as C

    seen: list[int] = []
    real = rec.payload

    def payload(info: Any) -> Any:
        if info.type == C.CHUNK_DATA:
            seen.append(info.offset)
        return real(info)

    rec.payload = payload
    return lambda: len(seen)
