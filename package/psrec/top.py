"""`psrec top PID` (and `psrec top FILE` to replay): a live table, redrawn every second, of
where the time of the last few seconds went: functions by own or total share, each thread's
GIL and CPU share, the sampling rate and errors.

Live, it runs `psrec record` on the process into a file (kept with -o, else a temporary one)
and reads the file as it grows: what the table shows is exactly what the recording holds, and
stopping top (q or Ctrl-C) stops the recording cleanly. Replaying, it walks through a
recording at its own pace. This module holds the command and its two loops, and runs the
recorder; what the table sums is in _top_model.py, and how it is drawn (with rich), and keys
read, in _top_draw.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import TYPE_CHECKING

import click

from psrec.analyzer.cli import CliUsageError, length
from psrec.analyzer.cli_options import mode_option
from psrec.analyzer.modes import CPU, MODE_TABLE, WALL
from psrec.analyzer.view import View, gil_wait_unknown
from psrec.format import PsrecError, open_recording
from psrec.recorder._children import end_with_parent

from ._top_draw import console, keys, table
from ._top_model import SLICE_S, Follower, Screen, also, apply, load

if TYPE_CHECKING:
    from psrec.analyzer.profile import Profile

__all__ = ["top"]


def _start_recorder(pid: int, path: str, rate: str, force: bool,
                    to_fd: int | None = None, native: bool = False) -> subprocess.Popen[bytes]:
    """`psrec record` on pid into path, or with to_fd into that open file (its stdout). It
    ends with top, however top ends (SIGTERM on top's death: it closes the file cleanly)."""
    out = "-" if to_fd is not None else path
    cmd = [sys.executable, "-m", "psrec", "record", "-q", "-r", rate, "-o", out, str(pid)]
    if force:
        cmd.insert(-1, "--force")
    if native:
        cmd.insert(-1, "--native")
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                            stdout=to_fd if to_fd is not None else subprocess.DEVNULL,
                            stderr=subprocess.PIPE, preexec_fn=end_with_parent())
    try:
        _wait_started(proc, path)
    except BaseException:
        # Not started (or Ctrl-C meanwhile): the recorder ends before its file is removed, so
        # that it cannot create the file again afterwards.
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        raise
    return proc


def _wait_started(proc: subprocess.Popen[bytes], path: str) -> None:
    """Until the recorder has written its file's header and metadata; its own error if it
    stops first."""
    deadline = time.monotonic() + 30
    while not (os.path.exists(path) and os.path.getsize(path) >= 200):
        if proc.poll() is not None:
            err = (proc.stderr.read() if proc.stderr else b"").decode(errors="replace")
            lines = [ln.removeprefix("psrec: ").removeprefix("error: ")
                     for ln in err.strip().splitlines()]
            raise PsrecError(lines[0] if lines else f"psrec record exited ({proc.returncode})",
                             help=lines[1] if len(lines) > 1 else None)
        if time.monotonic() > deadline:
            raise PsrecError(f"psrec record wrote nothing to {path} in 30 s")
        time.sleep(0.05)


# --mode: the view to start in (the same modes as psrec report's, switched by their keys)
_MODE = mode_option(help=f"The view to start in (keys {', '.join(m.key for m in MODE_TABLE)} "
                         "switch): cpu, the time threads spent on a CPU, by default.")
_MODE[1]["default"] = CPU.name


@click.command()
@click.argument("target")
@click.option("-r", "--rate", default="1000", show_default=True,
              help="Samples per second (a PID only).")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Keep the recording in this file (a PID only; else a temporary one).")
@click.option("--force", is_flag=True, help="Overwrite the output if it exists.")
@click.option("--window", default="2s", show_default=True,
              help="The span the table sums: the last DURATION.")
@click.option(*_MODE[0], **_MODE[1])
@click.option("-l", "--limit", type=click.IntRange(min=1), default=25, show_default=True,
              help="Functions to show.")
@click.option("--native", is_flag=True,
              help="Record native (C, C++, Rust) frames too, as psrec record --native does "
                   "(a PID only).")
def top(target: str, rate: str, output: str | None, force: bool, window: str, mode: str,
        limit: int, native: bool) -> None:
    """A live table of where a process's time goes (TARGET: a PID), redrawn every second;
    or a recording (TARGET: a .psr file) replayed at its own pace.

    \b
      psrec top 1234
      psrec top -o run.psr 1234     # and keep the recording
      psrec top run.psr             # replay
    """
    window_s = length("--window", window, "2s", least=SLICE_S / 2)
    replay = os.path.exists(target) or not target.isdigit()
    if replay:
        if output is not None:
            raise CliUsageError("-o is for recording a PID", help="psrec top FILE replays FILE")
        if native:
            raise CliUsageError("--native is for recording a PID",
                                help="psrec top FILE replays FILE as it was recorded")
        if not os.path.exists(target):
            raise PsrecError(f"{target} does not exist",
                             help="give a PID to watch, or a .psr recording to replay")
        with open_recording(target):
            pass  # not a recording, a directory, unreadable: said now, as psrec report says it
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CliUsageError("psrec top draws on a terminal, and this is not one",
                            help="record with psrec record, then read it with psrec report")
    screen = Screen(mode=mode, window_s=window_s, limit=limit)
    if replay:
        _replay(target, screen)
        return
    _live(int(target), output, force, rate, screen, native)


def _gil_wait_unknown(path: str) -> str | None:
    with open_recording(path) as rec:
        why: str | None = gil_wait_unknown(rec.metadata)
    return why


def _live(pid: int, output: str | None, force: bool, rate: str, screen: Screen,
          native: bool = False) -> None:
    from rich.live import Live

    temporary = output is None
    fd: int | None = None
    if temporary:
        # A file without a name: made and removed at once, the recorder writes it through its
        # standard output and top reads it through /proc/self/fd. Nothing is left behind
        # however top ends, even killed outright (the recorder then ends too).
        fd, name = tempfile.mkstemp(prefix=f"psrec-top-{pid}-", suffix=".psr")
        os.unlink(name)
        path = f"/proc/self/fd/{fd}"
    else:
        path = output  # type: ignore[assignment]
    proc: subprocess.Popen[bytes] | None = None
    ended = ""
    follower = Follower(path)
    try:
        proc = _start_recorder(pid, path, rate, force, to_fd=fd, native=native)
        screen.extra["what"] = (f"pid {pid}"
                                + ("" if temporary else f" → {os.path.basename(path)}"))
        screen.gil_wait_unknown = _gil_wait_unknown(path)
        screen.console = console()
        with keys() as read, Live(console=screen.console, screen=True,
                                   auto_refresh=False) as live:
            due = 0.0  # when the table is next read afresh and drawn
            profile: Profile | None = None
            loaded: tuple[str, bool] | None = None  # the view and pause profile was loaded in
            while True:
                if not ended and proc.poll() is not None:
                    # The recording has stopped: its last table stays, read once more to
                    # the end, until the user quits.
                    ended = f"pid {pid} exited; recording stopped · q to quit"
                    screen.note = ended
                    due = 0.0
                now = time.monotonic()
                if now >= due:
                    # paused, the same window is shown: read afresh only for another view
                    if not (screen.paused and loaded == (screen.mode, True)):
                        profile = follower.load(screen, screen.gil_wait_unknown is None)
                        loaded = (screen.mode, screen.paused)
                    live.update(table(profile, screen), refresh=True)
                    due = now + 1.0 if not ended else float("inf")
                key = read(min(due - time.monotonic(), 1.0))
                if key and not apply(key, screen):
                    break
                if key:
                    due = 0.0  # every key redraws at once
    except KeyboardInterrupt:
        if proc is None:  # Ctrl-C while the recorder started: it got the SIGINT too
            raise
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        follower.close()
        if fd is not None:
            os.close(fd)
    if ended:
        click.echo(f"psrec: pid {pid} exited; recording stopped", err=True)
    if not temporary:
        click.echo(f"psrec: recording kept in {path}", err=True)


def _replay(path: str, screen: Screen) -> None:
    from rich.live import Live

    from psrec.analyzer.profile import Profile

    screen.gil_wait_unknown = _gil_wait_unknown(path)
    gil_wait = screen.gil_wait_unknown is None
    # the wall view holds every sample: a recording with none is said so here, as report does
    p = Profile.load(path, View(mode=WALL.name), slice_seconds=SLICE_S, also=also(gil_wait))
    span = p.seconds(p.extent[1] - p.extent[0])
    screen.extra["what"] = f"replay of {os.path.basename(path)} ({span:.1f} s)"
    screen.replay_to = min(span, screen.window_s)
    screen.replay_span = span
    profiles: dict[str, Profile | None] = {WALL.name: p}
    screen.console = console()
    with keys() as read, Live(console=screen.console, screen=True, auto_refresh=False) as live:
        step = time.monotonic() + 1.0  # when the replay moves on by a second
        while True:
            if screen.mode not in profiles:
                profiles[screen.mode] = load(path, screen.mode, gil_wait)
            screen.note = f"at {screen.replay_to:.1f} of {span:.1f} s" + (
                " (the end)" if screen.replay_to >= span else "")
            live.update(table(profiles[screen.mode], screen), refresh=True)
            key = read(step - time.monotonic())
            if key:
                if not apply(key, screen):
                    break
                continue
            step = time.monotonic() + 1.0
            if not screen.paused:
                screen.replay_to = min(span, screen.replay_to + 1.0)
