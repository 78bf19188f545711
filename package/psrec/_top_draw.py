"""`psrec top` on the terminal: its table drawn with rich, fitted to the terminal's size, and
single keys read from it. What the table sums is in _top_model.py."""

from __future__ import annotations

import contextlib
import os
import select
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from psrec.format.text import printable

from ._top_model import KEYS, Screen, sums

if TYPE_CHECKING:
    from psrec.analyzer.profile import Profile

__all__ = ["console", "keys", "table"]


def _text(text: str, style: str = "") -> Any:
    """A name from the target, shown as it is: never read as markup, control characters
    escaped (a name can hold anything, "[/]" and escape sequences included)."""
    from rich.text import Text

    return Text(printable(text), style=style)


def table(p: Profile | None, s: Screen) -> Any:
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
    w = sums(p, s)
    span = w.span
    most = max((t.samples for t in w.threads.values()), default=0)
    # a recording younger than the window covers less of it
    so_far = f" ({span:.1f} s so far)" if span < s.window_s - 0.05 else ""
    info = Text(f"{len(w.threads)} threads · {most / span if span > 0 else 0:,.0f} samples/s "
                f"per thread · {p.sample_errors:,} sample errors in all{so_far}",
                no_wrap=True, overflow="ellipsis")
    tt = Table(box=None, pad_edge=False, header_style="bold")
    # CPU: the CPU time each thread used, over its time in the window (a thread runnable but
    # waiting for a CPU is not using one: "ready" says how long it waited, where the recording
    # has CPU times to tell the two apart).
    names = ["thread", "samples", "attached" if p.free_threaded else "GIL", "CPU", "ready"]
    if w.waits is not None:
        names.append("GIL wait")
    for name in names:
        tt.add_column(name, justify="left" if name == "thread" else "right", no_wrap=True)

    def share(part: int, n: int) -> str:
        return f"{100 * part / n:.0f}%" if n else "-"

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.0f}%"

    # Rows left for the two tables once the lines around them are drawn: the keys stay in
    # sight on a small terminal (24 rows, 80 columns).
    shown_on = s.console or console()
    width, height = shown_on.size
    # info, unknown, blank, thread header, blank, function header, blank, keys
    around = len(top) + 1 + sum(len(u.wrap(shown_on, width)) for u in unknown) + 5 + len(keys)
    rows = max(2, height - around)
    # The busiest first; threads idle through the window (off a CPU, without the GIL) only
    # when asked for (key a), counted on a line of their own.
    idle = 0 if s.idle_threads else sum(1 for t in w.threads.values() if t.idle)
    shown_threads = sorted(((th, t) for th, t in w.threads.items()
                            if s.idle_threads or not t.idle),
                           key=lambda x: (-(x[1].cpu_share or 0), -x[1].gil, -x[1].samples))
    thread_rows = min(len(shown_threads), max(1, rows // 3 - (1 if idle else 0)))
    if thread_rows < len(shown_threads):
        thread_rows -= 1  # a line saying how many more
    for th, t in shown_threads[:max(thread_rows, 0)]:
        row = [_text(p.thread_label(th)), f"{t.samples:,}", share(t.gil, t.samples),
               pct(t.cpu_share), pct(t.ready_share)]
        if w.waits is not None:
            row.append(share(w.waits.get(th, 0), t.samples))
        tt.add_row(*row)
    if len(shown_threads) > max(thread_rows, 0):
        tt.add_row(Text(f"... {len(shown_threads) - max(thread_rows, 0)} more threads",
                        style="dim"))
    if idle:
        tt.add_row(Text(f"{idle} idle thread{'s' if idle != 1 else ''} not shown (a: show)",
                        style="dim"))
    ft = Table(box=None, pad_edge=False, header_style="bold", expand=True)
    for name in ("own %", "total %", "own", "total"):
        ft.add_column(name, justify="right", no_wrap=True, min_width=7)
    ft.add_column("function", no_wrap=True, overflow="ellipsis", ratio=1)
    own, total, all_value = w.own, w.total, w.all_value
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


def console() -> Any:
    from rich.console import Console

    return Console()  # the terminal's, as rich finds it


@contextlib.contextmanager
def keys() -> Iterator[Any]:
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
