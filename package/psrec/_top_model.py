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

__all__ = ["KEYS", "SLICE_S", "Follower", "Screen", "Sums", "also", "apply", "load", "sums",
           "window"]

SLICE_S = 0.5  # the window moves in steps of this many seconds
# The keys, on two lines that fit 80 columns.
KEYS = ("q quit · space pause · o t: sort by own, total · + -: wider, narrower window",
        f"{' '.join(m.key for m in MODE_TABLE)}: {', '.join(m.name for m in MODE_TABLE)} view")
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
    console: Any = None  # rich's Console drawing the table (its size: what fits)
    extra: dict[str, Any] = field(default_factory=dict)


def apply(key: str, s: Screen) -> bool:
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
    cols, ticks = p.also.get(state), p.also_slices.get(state, p.slice_ticks)
    out: dict[int, int] = {}
    if cols is None:
        return out
    for sl, th, n in zip(cols.slice, cols.thread, cols.samples):
        if first <= sl * ticks // p.slice_ticks <= last:
            out[th] = out.get(th, 0) + n
    return out


@dataclass
class Sums:
    """The window's sums, in the profile's values (time, or samples in the views that count
    them) unless said."""

    span: float  # seconds the window covers
    own: dict[FrameKey, int]  # per function: on top of the stack
    total: dict[FrameKey, int]  # per function: anywhere in the stack
    all_value: int
    threads: dict[int, list[int]]  # thread ref -> samples in the view, with the GIL, on a CPU
    # Every sample of each thread in the window, whatever the view selects: the sampling rate,
    # and the share of its time each thread waited for the GIL (None: not known).
    every: dict[int, int]
    waits: dict[int, int] | None


def sums(p: Profile, s: Screen) -> Sums:
    """What the table shows of the window (see window()); notes the window's end in s."""
    first, last, span_ticks = window(p, s)
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
    every = _per_thread(p, "state-wall", first, last)
    waits = (_per_thread(p, GIL_WAIT.name, first, last) if GIL_WAIT.name in p.also
             else None)
    return Sums(span, own, total, all_value, threads, every, waits)
