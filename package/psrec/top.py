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
from psrec.analyzer.view import MODES, View, gil_wait_unknown
from psrec.format import PsrecError, open_recording
from psrec.format.text import printable
from psrec.recorder._children import end_with_parent

if TYPE_CHECKING:
    from psrec.analyzer.profile import FrameKey, Profile

__all__ = ["top"]

SLICE_S = 0.5  # the window moves in steps of this many seconds
# The keys, on two lines that fit 80 columns.
KEYS = ("q quit · space pause · o t: sort by own, total · + -: wider, narrower window",
        "w c g i G: wall, cpu, gil, idle, gil-wait view")
VIEW_KEYS = {"w": "wall", "c": "cpu", "g": "gil", "i": "idle", "G": "gil-wait"}


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
    # Live and paused: the end (in ticks) of the window shown when the pause began, so that the
    # table stays as it was, and a view switched to while paused shows the same window.
    frozen_end: int | None = None
    shown_end: int | None = None  # the end of the window last drawn
    gil_wait_unknown: str | None = None  # why the recording cannot know GIL waits (None: it can)
    console: Any = None  # rich's Console drawing the table (its size: what fits)
    extra: dict[str, Any] = field(default_factory=dict)


def _load(path: str, mode: str, gil_wait: bool) -> Profile | None:
    from psrec.analyzer.profile import Profile  # the analysis engine: loaded when used

    try:
        return Profile.load(path, View(mode=mode), slice_seconds=SLICE_S, also=_also(gil_wait))
    except PsrecError:
        return None  # nothing yet in this view (or the file not yet readable)


def _window(p: Profile, s: Screen) -> tuple[int, int, int]:
    """The slices the table sums (first, last) and the time they cover, in ticks. Only
    complete slices count, as a slice still being recorded holds part of its time; until one
    is complete, the part recorded so far counts for its real length."""
    size = p.slice_ticks
    begin, latest = p.extent if p.extent[0] >= 0 else (p.first_ts, p.last_ts)
    now = latest + p.interval_ticks  # the latest sample stands for the interval after it
    if s.replay_to is not None:
        now = min(now, begin + round(s.replay_to * 1e9 / p.tick_ns))
    if s.frozen_end is not None:
        now = min(now, s.frozen_end)
    end = now // size * size  # the end of the newest complete slice
    if end <= begin:  # none complete yet: the first slice, as far as it is recorded
        end = min((begin // size + 1) * size, latest + p.interval_ticks)
    last = (end - 1) // size
    first = last - max(1, round(s.window_s / SLICE_S)) + 1
    s.shown_end = end
    return first, last, end - max(first * size, begin)


def _per_thread(p: Profile, state: str, first: int, last: int) -> dict[int, int]:
    """Samples per thread in slices first..last, summed under another status filter (one of
    the profile's `also`, whose slices may be finer than the profile's)."""
    cols, ticks = p.also.get(state), p.also_slices.get(state, p.slice_ticks)
    out: dict[int, int] = {}
    if cols is None:
        return out
    for sl, th, n in zip(cols.slice, cols.thread, cols.samples):
        if first <= sl * ticks // p.slice_ticks <= last:
            out[th] = out.get(th, 0) + n
    return out


def _also(gil_wait: bool) -> tuple[str, ...]:
    """The other sums the table needs: every sample by thread, and GIL waits where known."""
    return ("state-wall", "gil-wait") if gil_wait else ("state-wall",)


def _text(text: str, style: str = "") -> Any:
    """A name from the target, shown as it is: never read as markup, control characters
    escaped (a name can hold anything, "[/]" and escape sequences included)."""
    from rich.text import Text

    return Text(printable(text), style=style)


def _table(p: Profile | None, s: Screen) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    head = Text(f"psrec top · {printable(s.extra.get('what', ''))} · mode {s.mode} · last "
                f"{s.window_s:g} s · sort {s.sort}", style="bold", no_wrap=True,
                overflow="ellipsis")
    if s.paused:
        head.append(" · paused", style="bold reverse")
    top: list[Any] = [head]
    if s.note:
        top.append(Text(s.note, style="bold", no_wrap=True, overflow="ellipsis"))
    keys = [Text(line, style="dim", no_wrap=True, overflow="ellipsis") for line in KEYS]
    unknown = [Text(f"GIL wait: {s.gil_wait_unknown}", style="dim")] \
        if s.gil_wait_unknown else []
    if p is None or not len(p.columns):
        return Group(*top, *unknown, Text("no samples in this view yet"), Text(""), *keys)
    first, last, span_ticks = _window(p, s)
    span = p.seconds(span_ticks)
    col, mult = p.value_column()
    own: dict[FrameKey, int] = {}
    total: dict[FrameKey, int] = {}
    threads: dict[int, list[int]] = {}
    all_value = 0
    for sl, th, node, n, gil, on_cpu, v in zip(p.columns.slice, p.columns.thread,
                                               p.columns.node, p.columns.samples,
                                               p.columns.gil, p.columns.on_cpu, col):
        if sl < first or sl > last:
            continue
        v *= mult
        all_value += v
        keys_of = p.keys(node)
        own[keys_of[-1]] = own.get(keys_of[-1], 0) + v
        for k in set(keys_of):
            total[k] = total.get(k, 0) + v
        t = threads.setdefault(th, [0, 0, 0])
        t[0] += n
        t[1] += gil
        t[2] += on_cpu
    # Every sample of each thread in the window, whatever the view selects: the sampling
    # rate, and the share of its time each thread waited for the GIL.
    every = _per_thread(p, "state-wall", first, last)
    waits = _per_thread(p, "gil-wait", first, last) if "gil-wait" in p.also else None
    most = max(every.values(), default=0)
    # a recording younger than the window covers less of it
    so_far = f" ({span:.1f} s so far)" if span < s.window_s - 0.05 else ""
    info = Text(f"{len(threads)} threads · {most / span if span > 0 else 0:,.0f} samples/s "
                f"per thread · {p.sample_errors:,} sample errors in all{so_far}",
                no_wrap=True, overflow="ellipsis")
    tt = Table(box=None, pad_edge=False, header_style="bold")
    names = ["thread", "samples", "attached" if p.free_threaded else "GIL", "CPU"]
    if waits is not None:
        names.append("GIL wait")
    for name in names:
        tt.add_column(name, justify="left" if name == "thread" else "right", no_wrap=True)

    def share(part: int, n: int) -> str:
        return f"{100 * part / n:.0f}%" if n else "-"

    # Rows left for the two tables once the lines around them are drawn: the keys stay in
    # sight on a small terminal (24 rows, 80 columns).
    console = s.console or _console()
    width, height = console.size
    # info, unknown, blank, thread header, blank, function header, blank, keys
    around = len(top) + 1 + sum(len(u.wrap(console, width)) for u in unknown) + 5 + len(keys)
    rows = max(2, height - around)
    shown_threads = sorted(threads.items(), key=lambda x: -x[1][0])
    thread_rows = min(len(shown_threads), max(1, rows // 3))
    if thread_rows < len(shown_threads):
        thread_rows -= 1  # a line saying how many more
    for th, (n, gil, on_cpu) in shown_threads[:max(thread_rows, 0)]:
        row = [_text(p.thread_label(th)), f"{n:,}", share(gil, n), share(on_cpu, n)]
        if waits is not None:
            row.append(share(waits.get(th, 0), every.get(th, 0)))
        tt.add_row(*row)
    if len(shown_threads) > max(thread_rows, 0):
        tt.add_row(Text(f"... {len(shown_threads) - max(thread_rows, 0)} more threads",
                        style="dim"))
    ft = Table(box=None, pad_edge=False, header_style="bold", expand=True)
    for name in ("own %", "total %", "own", "total"):
        ft.add_column(name, justify="right", no_wrap=True, min_width=7)
    ft.add_column("function", no_wrap=True, overflow="ellipsis", ratio=1)
    order = sorted(total, key=lambda k: (-(own.get(k, 0) if s.sort == "own" else total[k]),
                                         -total[k], k.name))
    room = max(1, rows - len(tt.rows))
    for k in order[: min(s.limit, room)]:
        mine, cum = own.get(k, 0), total[k]
        name = _text(k.name)
        name.append(f"  {printable(k.filename)}:{k.line}", style="dim")
        ft.add_row(f"{100 * mine / all_value:.1f}%" if all_value else "-",
                   f"{100 * cum / all_value:.1f}%" if all_value else "-",
                   f"{p.seconds(mine):.2f}s", f"{p.seconds(cum):.2f}s", name)
    return Group(*top, info, *unknown, Text(""), tt, Text(""), ft, Text(""), *keys)


def _console() -> Any:
    from rich.console import Console

    return Console()  # the terminal's, as rich finds it


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
        mode = VIEW_KEYS.get(ch)
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
            s.frozen_end = s.shown_end if s.paused else None
    return True


def _start_recorder(pid: int, path: str, rate: str, force: bool,
                    to_fd: int | None = None) -> subprocess.Popen[bytes]:
    """`psrec record` on pid into path, or with to_fd into that open file (its stdout). It
    ends with top, however top ends (SIGTERM on top's death: it closes the file cleanly)."""
    out = "-" if to_fd is not None else path
    cmd = [sys.executable, "-m", "psrec", "record", "-q", "-r", rate, "-o", out, str(pid)]
    if force:
        cmd.insert(-1, "--force")
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
              help="The view to start in (keys w, c, g, i, G switch).")
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
    replay = os.path.exists(target) or not target.isdigit()
    if replay:
        if output is not None:
            raise CliUsageError("-o is for recording a PID", help="psrec top FILE replays FILE")
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
    _live(int(target), output, force, rate, screen)


def _gil_wait_unknown(path: str) -> str | None:
    with open_recording(path) as rec:
        why: str | None = gil_wait_unknown(rec.metadata)
    return why


def _live(pid: int, output: str | None, force: bool, rate: str, screen: Screen) -> None:
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
    try:
        proc = _start_recorder(pid, path, rate, force, to_fd=fd)
        screen.extra["what"] = (f"pid {pid}"
                                + ("" if temporary else f" → {os.path.basename(path)}"))
        screen.gil_wait_unknown = _gil_wait_unknown(path)
        screen.console = _console()
        with _keys() as read, Live(console=screen.console, screen=True,
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
                        profile = _load(path, screen.mode, screen.gil_wait_unknown is None)
                        loaded = (screen.mode, screen.paused)
                    live.update(_table(profile, screen), refresh=True)
                    due = now + 1.0 if not ended else float("inf")
                key = read(min(due - time.monotonic(), 1.0))
                if key and not _apply(key, screen):
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
    p = Profile.load(path, View(mode="wall"), slice_seconds=SLICE_S, also=_also(gil_wait))
    span = p.seconds(p.extent[1] - p.extent[0])
    screen.extra["what"] = f"replay of {os.path.basename(path)} ({span:.1f} s)"
    screen.replay_to = min(span, screen.window_s)
    profiles: dict[str, Profile | None] = {"wall": p}
    screen.console = _console()
    with _keys() as read, Live(console=screen.console, screen=True, auto_refresh=False) as live:
        step = time.monotonic() + 1.0  # when the replay moves on by a second
        while True:
            if screen.mode not in profiles:
                profiles[screen.mode] = _load(path, screen.mode, gil_wait)
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
