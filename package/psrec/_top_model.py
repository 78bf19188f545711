"""What `psrec top`'s table sums, apart from how it is drawn: the viewer's choices (Screen, and
the keys that change them), the window of complete slices the table covers, and the sums over
it (own and total time per function, samples, GIL and CPU per thread)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from psrec.analyzer.modes import GIL_WAIT, MODE_TABLE
from psrec.analyzer.view import View
from psrec.format import PsrecError

if TYPE_CHECKING:
    from psrec.analyzer.profile import FrameKey, Profile
    from psrec.format import Recording

__all__ = ["KEYS", "SEEK", "SLICE_S", "Follower", "Screen", "Sums", "ThreadSums", "also", "apply",
           "load", "sums", "window"]

SLICE_S = 0.5  # the window moves in steps of this many seconds
IDLE_SHARE = 0.005  # a thread under this share of the window on every count is idle in it
# The keys, on two lines that fit 80 columns.
KEYS = ("q quit · space pause · o t: sort by own, total · + -: wider, narrower window",
        f"{' '.join(m.key for m in MODE_TABLE)}: {', '.join(m.name for m in MODE_TABLE)} view · "
        "a: idle threads · ← →: seek")
# Replay: the arrow keys (as terminals send them, in either cursor mode) move back and on.
SEEK = {"\x1b[D": -1, "\x1bOD": -1, "\x1b[C": 1, "\x1bOC": 1}
VIEW_KEYS = {m.key: m.name for m in MODE_TABLE}


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
    idle_threads: bool = False  # the thread table lists threads idle in the window too
    replay_span: float = 0.0  # replay: the recording's length in seconds
    console: Any = None  # rich's Console drawing the table (its size: what fits)
    extra: dict[str, Any] = field(default_factory=dict)


def apply(key: str, s: Screen) -> bool:
    """Applies a key to the screen; returns False to quit."""
    for seq, step in SEEK.items():
        while seq in key:
            key = key.replace(seq, "", 1)
            if s.replay_to is not None:  # a window back or on, within the recording
                s.replay_to = min(s.replay_span, max(min(s.replay_span, s.window_s),
                                                     s.replay_to + step * s.window_s))
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
        elif ch == "a":
            s.idle_threads = not s.idle_threads
        elif ch == " ":
            s.paused = not s.paused
            s.frozen_end = s.shown_end if s.paused else None
    return True


def load(path: str | Recording, mode: str, gil_wait: bool,
         since_ts: int | None = None) -> Profile | None:
    """The table's Profile of a recording (a path, or a Recording kept open as it grows:
    Follower), from since_ts on where given."""
    from psrec.analyzer.profile import Profile  # the analysis engine: loaded when used

    try:
        return Profile.load(path, View(mode=mode), slice_seconds=SLICE_S, also=also(gil_wait),
                            since_ts=since_ts)
    except PsrecError:
        return None  # nothing yet in this view (or the file not yet readable)


class Follower:
    """A recording being written, read as it grows: kept open, each read takes in only the
    chunks completed since the last (Recording.refresh) and decodes only those of the window
    shown and what came after it, so that a day-long top reads as little each second as a
    minute-long one. A file written anew under its name is opened again."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.rec: Recording | None = None

    def load(self, s: Screen, gil_wait: bool) -> Profile | None:
        from psrec.format import open_recording

        if self.rec is not None and not self.rec.refresh():
            self.close()
        if self.rec is None:
            try:
                self.rec = open_recording(self.path)
            except PsrecError:
                return None  # not readable yet
        return load(self.rec, s.mode, gil_wait, self.since(s))

    def since(self, s: Screen) -> int | None:
        """Where the window shown (live, or frozen by a pause) may begin, with room to spare:
        a slice and a second before its start."""
        rec = self.rec
        assert rec is not None
        ends = [b for a, b, passes in rec.spans.values() if passes]
        if not ends:
            return None  # nothing decoded yet: the whole file, once
        end = s.frozen_end if s.frozen_end is not None else max(ends)
        ticks = int(round((s.window_s + SLICE_S + 1.0) * 1e9 / rec.tick_ns))
        return max(0, int(end) - ticks)

    def close(self) -> None:
        if self.rec is not None:
            self.rec.close()
            self.rec = None


def also(gil_wait: bool) -> tuple[str, ...]:
    """The other sums the table needs: every sample by thread, and GIL waits where known."""
    return ("state-wall", GIL_WAIT.name) if gil_wait else ("state-wall",)


def window(p: Profile, s: Screen) -> tuple[int, int, int]:
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
    return {th: t.samples for th, t in _thread_sums(p, state, first, last).items()}


@dataclass
class ThreadSums:
    """A thread's samples in the window under one status filter: how many, holding the GIL,
    on a CPU (running or runnable: the kernel's R), their wall time and the CPU time used
    between them where it was recorded (ticks)."""

    samples: int = 0
    gil: int = 0
    on_cpu: int = 0
    wall: int = 0
    cpu: int = 0

    def share(self, part: int) -> float | None:
        return part / self.samples if self.samples else None

    @property
    def cpu_share(self) -> float | None:
        """The CPU time it used over its time in the window (one CPU: 1.0)."""
        return self.cpu / self.wall if self.wall else None

    @property
    def ready_share(self) -> float | None:
        """Its share of the window spent runnable but waiting for a CPU: on a CPU by its
        state, less the CPU time it used (known only where CPU time was recorded)."""
        if not self.cpu or not self.samples or self.cpu_share is None:
            return None
        return max(0.0, self.on_cpu / self.samples - self.cpu_share)

    @property
    def idle(self) -> bool:
        """Nothing it did in the window shows: its GIL, on-CPU and CPU shares all round to 0 %
        (a thread that wakes for a moment now and then is idle too)."""
        return all(x is None or x < IDLE_SHARE for x in (self.share(self.gil),
                                                          self.share(self.on_cpu),
                                                          self.cpu_share))


def _thread_sums(p: Profile, state: str, first: int, last: int) -> dict[int, ThreadSums]:
    cols, ticks = p.also.get(state), p.also_slices.get(state, p.slice_ticks)
    out: dict[int, ThreadSums] = {}
    if cols is None:
        return out
    for sl, th, n, gil, on_cpu, wall, cpu in zip(cols.slice, cols.thread, cols.samples,
                                                 cols.gil, cols.on_cpu, cols.weight, cols.cpu):
        if first <= sl * ticks // p.slice_ticks <= last:
            t = out.get(th)
            if t is None:
                t = out[th] = ThreadSums()
            t.samples += n
            t.gil += gil
            t.on_cpu += on_cpu
            t.wall += wall
            t.cpu += cpu
    return out


@dataclass
class Sums:
    """The window's sums, in the profile's values (time, or samples in the views that count
    them) unless said."""

    span: float  # seconds the window covers
    own: dict[FrameKey, int]  # per function: on top of the stack
    total: dict[FrameKey, int]  # per function: anywhere in the stack
    all_value: int
    # Each thread's every sample in the window, whatever the view selects: the sampling rate,
    # and its GIL and CPU shares.
    threads: dict[int, ThreadSums]
    # The samples of each thread that waited for the GIL (None: not known).
    waits: dict[int, int] | None


def sums(p: Profile, s: Screen) -> Sums:
    """What the table shows of the window (see window()); notes the window's end in s."""
    first, last, span_ticks = window(p, s)
    span = p.seconds(span_ticks)
    col, mult = p.value_column()
    own: dict[FrameKey, int] = {}
    total: dict[FrameKey, int] = {}
    all_value = 0
    for sl, node, v in zip(p.columns.slice, p.columns.node, col):
        if sl < first or sl > last:
            continue
        v *= mult
        all_value += v
        keys_of = p.keys(node)
        own[keys_of[-1]] = own.get(keys_of[-1], 0) + v
        for k in set(keys_of):
            total[k] = total.get(k, 0) + v
    threads = _thread_sums(p, "state-wall", first, last)
    waits = (_per_thread(p, GIL_WAIT.name, first, last) if GIL_WAIT.name in p.also
             else None)
    return Sums(span, own, total, all_value, threads, waits)
