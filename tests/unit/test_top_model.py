"""What `psrec top`'s table sums, without a terminal: the keys' effect on the screen, the
window of complete slices, and the sums over it (psrec/_top_model.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, NamedTuple

from psrec._top_model import SLICE_S, Screen, ThreadSums, apply, sums, window

TICK_NS = 1000  # 1 µs ticks
SLICE = round(SLICE_S * 1e9 / TICK_NS)
INTERVAL = 1000  # 1 ms


class Key(NamedTuple):  # as the profile's FrameKey
    filename: str
    line: int
    name: str


def profile(first: int, last: int, **more: Any) -> Any:
    return SimpleNamespace(slice_ticks=SLICE, extent=(first, last), first_ts=first,
                           last_ts=last, interval_ticks=INTERVAL, tick_ns=TICK_NS, **more)


def test_keys_change_the_screen_and_q_quits() -> None:
    s = Screen(mode="wall", window_s=2.0, limit=25)
    assert apply("ct+", s) and (s.mode, s.sort, s.window_s) == ("cpu", "total", 4.0)
    assert apply("-" * 10, s) and s.window_s == SLICE_S  # never narrower than a slice
    assert apply("+" * 10, s) and s.window_s == 60.0
    s.shown_end = 1234
    assert apply(" ", s) and s.paused and s.frozen_end == 1234
    assert apply(" ", s) and not s.paused and s.frozen_end is None
    assert not apply("xq", s)


def test_the_arrow_keys_seek_a_replay_by_a_window_within_the_recording() -> None:
    s = Screen(mode="cpu", window_s=2.0, limit=25, replay_to=7.0, replay_span=9.0)
    assert apply("\x1b[D", s) and s.replay_to == 5.0
    assert apply("\x1bOD\x1b[D\x1b[D", s) and s.replay_to == 2.0  # never before a window
    assert apply("\x1b[C" * 5, s) and s.replay_to == 9.0  # nor past the end
    assert apply("a", s) and s.idle_threads and apply("a", s) and not s.idle_threads
    live = Screen(mode="cpu", window_s=2.0, limit=25)
    assert apply("\x1b[D", live) and live.replay_to is None and live.mode == "cpu"


def test_a_thread_whose_every_share_rounds_to_nothing_is_idle() -> None:
    assert ThreadSums(1000, 0, 3, 1_000_000, 2000).idle  # woke 3 times for a moment
    assert not ThreadSums(1000, 0, 10, 1_000_000, 0).idle  # runnable 1 % of the window
    assert ThreadSums(0, 0, 0, 0, 0).idle and ThreadSums(0, 0, 0, 0, 0).ready_share is None


def test_the_window_sums_complete_slices_only() -> None:
    s = Screen(mode="wall", window_s=2.0, limit=25)
    # 1.3 s recorded: slices 0 and 1 are complete, slice 2 is still being recorded
    first, last, span = window(profile(0, 1_300_000 - INTERVAL), s)
    assert (first, last, span) == (1 - 4 + 1, 1, 2 * SLICE) and s.shown_end == 2 * SLICE


def test_before_a_slice_is_complete_the_window_is_what_was_recorded() -> None:
    s = Screen(mode="wall", window_s=2.0, limit=25)
    assert window(profile(0, 200_000 - INTERVAL), s)[1:] == (0, 200_000)


def test_a_paused_window_stays_where_it_was() -> None:
    s = Screen(mode="wall", window_s=1.0, limit=25, frozen_end=SLICE + 100)
    assert window(profile(0, 10 * SLICE), s) == (-1, 0, SLICE)


def test_sums_count_the_window_alone() -> None:
    f, g = Key("a.py", 1, "f"), Key("a.py", 5, "g")
    stacks = {1: [f], 2: [f, g]}  # node -> its frames, innermost last
    columns = SimpleNamespace(slice=[0, 1, 5], thread=[7, 7, 8], node=[1, 2, 2],
                              samples=[3, 4, 100], gil=[3, 0, 0], on_cpu=[1, 4, 0])
    # every sample, whatever the view: the threads' sums (wall and CPU time in ticks)
    states = SimpleNamespace(slice=[0, 1, 5], thread=[7, 7, 8], samples=[3, 5, 100],
                             gil=[3, 0, 0], on_cpu=[2, 5, 0], weight=[3000, 5000, 100000],
                             cpu=[1000, 3000, 0])
    p = profile(0, 2 * SLICE - INTERVAL, columns=columns, also={"state-wall": states},
                also_slices={}, keys=stacks.__getitem__, seconds=lambda t: t * TICK_NS / 1e9,
                value_column=lambda: ([30, 40, 1000], 1))
    w = sums(p, Screen(mode="wall", window_s=1.0, limit=25))  # slices 0 and 1
    assert (w.all_value, w.own, w.total) == (70, {f: 30, g: 40}, {f: 70, g: 40})
    assert w.threads == {7: ThreadSums(8, 3, 7, 8000, 4000)}  # thread 8: outside it
    assert w.waits is None
    t = w.threads[7]
    # used a CPU half its time; on one (runnable) 7 samples of 8: ready 7/8 - 1/2
    assert t.cpu_share == 0.5 and t.ready_share == 7 / 8 - 0.5 and not t.idle
    assert w.span == 2 * SLICE_S
