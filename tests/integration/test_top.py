"""`psrec top` in a real terminal (tmux): live on a target, the table names its threads and
its busy function; keys switch the view and quit; -o keeps a clean recording; a recording
replays. Off a terminal it says so.

Needs tmux (Debian: apt-get install tmux); skips, saying so, without it.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from psrec.format import open_recording
from rec_live import TARGETS, one_python, psrec, target

pytestmark = [pytest.mark.live, pytest.mark.timeout(180)]


class Tmux:
    """One detached tmux session on a server of its own, running one command."""

    def __init__(self, name: str, command: str) -> None:
        exe = shutil.which("tmux")
        if exe is None:
            pytest.skip("tmux is not installed (Debian: apt-get install tmux)")
        self.base = [exe, "-L", f"psrec-test-{name}"]
        subprocess.run([*self.base, "kill-server"], capture_output=True, check=False)
        subprocess.run([*self.base, "new-session", "-d", "-x", "150", "-y", "50", "-s", "t",
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


def _command(*args: str) -> str:
    # COLUMNS and LINES, where pytest's environment has them, would fix the screen's size
    return f"cd {shlex.quote(str(TARGETS))} && " + shlex.join(
        ["env", "-u", "COLUMNS", "-u", "LINES", sys.executable, "-m", "psrec", "top", *args])


@pytest.mark.parametrize("python", one_python())
def test_top_live_keys_and_kept_recording(python: str, tmp_path: Path) -> None:
    out = tmp_path / "top.psr"
    with target(python, "rec_threads.py") as t:
        tmux = Tmux("live", _command("-o", str(out), str(t.pid)))
        try:
            screen = tmux.wait_for("busy_inner")
            assert f"pid {t.pid}" in screen and "mode wall" in screen
            for name in ("busy-worker", "sleepy-worker", "MainThread"):
                assert name in screen, screen
            # the busy thread holds the GIL and is on a CPU nearly all the time
            busy = next(line for line in screen.splitlines() if line.startswith("busy-worker"))
            gil, cpu = (int(x.rstrip("%")) for x in busy.split()[-2:])
            assert gil >= 80 and cpu >= 80, busy
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
        tmux.wait_for("(the end)", timeout=15)
        tmux.keys("i")
        screen = tmux.wait_for("mode idle")
        assert "sleepy_inner" in screen, screen
        tmux.keys("q")
        tmux.wait_for("TOP-EXITED 0")
    finally:
        tmux.close()


def test_top_off_a_terminal_says_so() -> None:
    r = psrec("top", "1")
    assert r.returncode == 2
    assert "psrec top draws on a terminal" in r.stderr and "Traceback" not in r.stderr
