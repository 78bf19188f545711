"""`psrec top PID` (and `psrec top FILE` to replay): a live table, redrawn every second, of
where the time of the last few seconds went: functions by own or total share, each thread's
GIL and CPU share, the sampling rate and errors.

Live, it runs `psrec record` on the process into a file (kept with -o, else a temporary one)
and reads the file as it grows: what the table shows is exactly what the recording holds, and
stopping top (q or Ctrl-C) stops the recording cleanly. Replaying, it walks through a
recording at its own pace. The screen is drawn with rich; keys are read from the terminal.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

from psrec.analyzer.cli import CliUsageError, length
from psrec.analyzer.view import MODES, View
from psrec.format import PsrecError

if TYPE_CHECKING:
    from psrec.analyzer.profile import FrameKey, Profile

__all__ = ["top"]

SLICE_S = 0.5  # the window moves in steps of this many seconds
KEYS = "q quit · w c g i: wall cpu gil idle · o t: sort by own, total · + -: window · space: pause"


@dataclass
class Screen:
    """What the table shows, and the viewer's choices."""

    mode: str
    window_s: float
    limit: int
    sort: str = "own"
    paused: bool = False
    note: str = ""
    replay_to: float | None = None  # replay: seconds into the recording shown so far
    extra: dict[str, Any] = field(default_factory=dict)


def _load(path: str, mode: str) -> Profile | None:
    from psrec.analyzer.profile import Profile  # the analysis engine: loaded when used

    try:
        return Profile.load(path, View(mode=mode), slice_seconds=SLICE_S)
    except PsrecError:
        return None  # nothing yet in this view (or the file not yet readable)


def _table(p: Profile | None, s: Screen) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    head = Text(f"psrec top · {s.extra.get('what', '')} · mode {s.mode} · last "
                f"{s.window_s:g} s · sort {s.sort}" + (" · paused" if s.paused else "")
                + (f" · {s.note}" if s.note else ""),
                style="bold", no_wrap=True, overflow="ellipsis")
    if p is None or not len(p.columns):
        return Group(head, Text("no samples in this view yet"), Text(KEYS))
    slices = p.columns.slice
    last = max(slices)
    if s.replay_to is not None:
        last = min(last, int((p.extent[0] * p.tick_ns / 1e9 + s.replay_to) / SLICE_S))
    first = last - max(1, round(s.window_s / SLICE_S)) + 1
    col, mult = p.value_column()
    own: dict[FrameKey, int] = {}
    total: dict[FrameKey, int] = {}
    threads: dict[int, list[int]] = {}
    all_value = 0
    for sl, th, node, n, gil, on_cpu, v in zip(slices, p.columns.thread, p.columns.node,
                                               p.columns.samples, p.columns.gil,
                                               p.columns.on_cpu, col):
        if sl < first or sl > last:
            continue
        v *= mult
        all_value += v
        keys = p.keys(node)
        own[keys[-1]] = own.get(keys[-1], 0) + v
        for k in set(keys):
            total[k] = total.get(k, 0) + v
        t = threads.setdefault(th, [0, 0, 0])
        t[0] += n
        t[1] += gil
        t[2] += on_cpu
    span = (last - first + 1) * SLICE_S
    most = max((t[0] for t in threads.values()), default=0)
    info = Text(f"{len(threads)} threads · {most / span:,.0f} samples/s per thread · "
                f"{p.sample_errors:,} sample errors in all", no_wrap=True, overflow="ellipsis")
    tt = Table(box=None, pad_edge=False, header_style="bold")
    for name, justify in (("thread", "left"), ("samples", "right"), ("GIL", "right"),
                          ("CPU", "right")):
        tt.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    gil_word = "attached" if p.free_threaded else "GIL"
    tt.columns[2].header = gil_word
    for th, (n, gil, on_cpu) in sorted(threads.items(), key=lambda x: -x[1][0]):
        tt.add_row(p.thread_label(th), f"{n:,}", f"{100 * gil / n:.0f}%" if n else "-",
                   f"{100 * on_cpu / n:.0f}%" if n else "-")
    ft = Table(box=None, pad_edge=False, header_style="bold", expand=True)
    for name in ("own %", "total %", "own", "total"):
        ft.add_column(name, justify="right", no_wrap=True, min_width=7)
    ft.add_column("function", no_wrap=True, overflow="ellipsis", ratio=1)
    rows = sorted(total, key=lambda k: (-(own.get(k, 0) if s.sort == "own" else total[k]),
                                        -total[k], k.name))
    for k in rows[: s.limit]:
        mine, cum = own.get(k, 0), total[k]
        ft.add_row(f"{100 * mine / all_value:.1f}%" if all_value else "-",
                   f"{100 * cum / all_value:.1f}%" if all_value else "-",
                   f"{p.seconds(mine):.2f}s", f"{p.seconds(cum):.2f}s",
                   f"{k.name}  [dim]{k.filename}:{k.line}[/dim]")
    return Group(head, info, Text(""), tt, Text(""), ft, Text(""), Text(KEYS, style="dim"))


@contextlib.contextmanager
def _keys() -> Iterator[Any]:
    """Single keys from the terminal, unbuffered and unechoed, while in the block."""
    import termios
    import tty

    fd = sys.stdin.fileno()
    old = termios.tcgetattr(fd)
    tty.setcbreak(fd)
    try:
        def read(timeout: float) -> str:
            ready, _, _ = select.select([fd], [], [], max(0.0, timeout))
            return os.read(fd, 16).decode(errors="replace") if ready else ""

        yield read
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, old)


def _apply(key: str, s: Screen) -> bool:
    """Applies a key to the screen; returns False to quit."""
    for ch in key:
        if ch in "qQ\x03":
            return False
        mode = {"w": "wall", "c": "cpu", "g": "gil", "i": "idle"}.get(ch)
        if mode:
            s.mode = mode
        elif ch in "ot":
            s.sort = "own" if ch == "o" else "total"
        elif ch == "+":
            s.window_s = min(60.0, s.window_s * 2)
        elif ch == "-":
            s.window_s = max(SLICE_S, s.window_s / 2)
        elif ch == " ":
            s.paused = not s.paused
    return True


def _start_recorder(pid: int, path: str, rate: str, force: bool) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "psrec", "record", "-q", "-r", rate, "-o", path, str(pid)]
    if force:
        cmd.insert(-1, "--force")
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not (os.path.exists(path) and os.path.getsize(path) >= 200):
        if proc.poll() is not None:
            err = (proc.stderr.read() if proc.stderr else b"").decode(errors="replace")
            lines = [ln.removeprefix("psrec: ").removeprefix("error: ")
                     for ln in err.strip().splitlines()]
            raise PsrecError(lines[0] if lines else f"psrec record exited ({proc.returncode})",
                             help=lines[1] if len(lines) > 1 else None)
        if time.monotonic() > deadline:
            proc.kill()
            raise PsrecError(f"psrec record wrote nothing to {path} in 30 s")
        time.sleep(0.05)
    return proc


@click.command()
@click.argument("target")
@click.option("-r", "--rate", default="1000", show_default=True,
              help="Samples per second (a PID only).")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Keep the recording in this file (a PID only; else a temporary one).")
@click.option("--force", is_flag=True, help="Overwrite the output if it exists.")
@click.option("--window", default="2s", show_default=True,
              help="The span the table sums: the last DURATION.")
@click.option("--mode", type=click.Choice(list(MODES)), default="wall", show_default=True,
              help="The view to start in (keys w, c, g, i switch).")
@click.option("-l", "--limit", type=click.IntRange(min=1), default=25, show_default=True,
              help="Functions to show.")
def top(target: str, rate: str, output: str | None, force: bool, window: str, mode: str,
        limit: int) -> None:
    """A live table of where a process's time goes (TARGET: a PID), redrawn every second;
    or a recording (TARGET: a .psr file) replayed at its own pace.

    \b
      psrec top 1234
      psrec top -o run.psr 1234     # and keep the recording
      psrec top run.psr             # replay
    """
    window_s = length("--window", window, "2s", least=SLICE_S / 2)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CliUsageError("psrec top draws on a terminal, and this is not one",
                            help="record with psrec record, then read it with psrec report")
    screen = Screen(mode=mode, window_s=window_s, limit=limit)
    replay = os.path.exists(target) or not target.isdigit()
    if replay:
        if output is not None:
            raise CliUsageError("-o is for recording a PID", help="psrec top FILE replays FILE")
        if not os.path.exists(target):
            raise PsrecError(f"{target} does not exist",
                             help="give a PID to watch, or a .psr recording to replay")
        _replay(target, screen)
        return
    _live(int(target), output, force, rate, screen)


def _live(pid: int, output: str | None, force: bool, rate: str, screen: Screen) -> None:
    from rich.console import Console
    from rich.live import Live

    temporary = output is None
    if temporary:
        fd, path = tempfile.mkstemp(prefix=f"psrec-top-{pid}-", suffix=".psr")
        os.close(fd)
    else:
        path = output  # type: ignore[assignment]
    proc = _start_recorder(pid, path, rate, force or temporary)
    screen.extra["what"] = f"pid {pid}" + ("" if temporary else f" → {os.path.basename(path)}")
    ended = ""
    try:
        with _keys() as read, Live(console=Console(), screen=True, auto_refresh=False) as live:
            due = 0.0
            while True:
                now = time.monotonic()
                if proc.poll() is not None:
                    ended = f"pid {pid} exited; recording stopped"
                    screen.note = ended
                if now >= due or screen.note == ended:
                    if not screen.paused:
                        live.update(_table(_load(path, screen.mode), screen), refresh=True)
                    due = now + 1.0
                if ended:
                    break
                key = read(due - time.monotonic())
                if key and not _apply(key, screen):
                    break
                if key:
                    due = 0.0
    except KeyboardInterrupt:
        pass
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        if temporary:
            with contextlib.suppress(OSError):
                os.unlink(path)
    if ended:
        click.echo(f"psrec: {ended}", err=True)
    if not temporary:
        click.echo(f"psrec: recording kept in {path}", err=True)


def _replay(path: str, screen: Screen) -> None:
    from rich.console import Console
    from rich.live import Live

    p = _load(path, "wall")
    if p is None:
        raise PsrecError(f"{path} holds no samples to replay")
    span = p.seconds(p.extent[1] - p.extent[0])
    screen.extra["what"] = f"replay of {os.path.basename(path)} ({span:.1f} s)"
    screen.replay_to = min(span, screen.window_s)
    profiles: dict[str, Profile | None] = {"wall": p}
    with _keys() as read, Live(console=Console(), screen=True, auto_refresh=False) as live:
        step = time.monotonic() + 1.0  # when the replay moves on by a second
        while True:
            if screen.mode not in profiles:
                profiles[screen.mode] = _load(path, screen.mode)
            screen.note = f"at {screen.replay_to:.1f} of {span:.1f} s" + (
                " (the end)" if screen.replay_to >= span else "")
            live.update(_table(profiles[screen.mode], screen), refresh=True)
            key = read(step - time.monotonic())
            if key:
                if not _apply(key, screen):
                    break
                continue
            step = time.monotonic() + 1.0
            if not screen.paused:
                screen.replay_to = min(span, screen.replay_to + 1.0)
