"""asyncio task snapshots (spec section 4.3), round trip: the states the native encoder is
given at each snapshot are what both decoders, replayed by the analyzer, say each task was
doing at that time; the encoder writes a state only where it changed, every state at a
process's first snapshot in a chunk, and the file stays readable chunk by chunk."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import pytest
from format_helpers import new_writer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psrec.analyzer.tasks import replay_task_states
from psrec.format import _constants as C
from psrec.format import native_available, open_recording

pytestmark = pytest.mark.skipif(
    not native_available(), reason="the native codec (psrec.format._format) is not built"
)

if native_available():
    from psrec.format import _format

PIDS = (11, 22)
WAITS = ("", "Future", "Task", "_GatheringFuture")

# A task's state as fed: (state, waits, frames root first, awaited task ids).
State = tuple[int, str, tuple[int, ...], tuple[int, ...]]


def stack_of(parents: Any, frames: Any, node: int) -> tuple[int, ...]:
    out = []
    while node:
        out.append(frames[node])
        node = parents[node]
    return tuple(reversed(out))


def run_snapshots(data: st.DataObject, path: str) -> tuple[list[tuple[int, int, dict[int, State]]],
                                                           int]:
    """Feeds random snapshots of two processes' tasks, with chunks sealed in between; returns
    every snapshot as (pid, ts, {task: state}) and the bytes of task records written."""
    enc = _format.Encoder()
    writer = new_writer(path)
    fn = enc.intern_function(enc.intern_string("app.py"), enc.intern_string("handle"), 1)
    frame_ids = [enc.intern_frame(fn, line) for line in range(1, 6)]
    tasks = {pid: [enc.define_task(pid, 0x1000 * (i + 1), f"t{pid}-{i}", fn, 0)
                   for i in range(4)] for pid in PIDS}
    fed: list[tuple[int, int, dict[int, State]]] = []
    now: dict[int, dict[int, State]] = {pid: {} for pid in PIDS}
    ts = 100
    for _ in range(data.draw(st.integers(1, 40))):
        ts += data.draw(st.integers(1, 3000))
        if data.draw(st.integers(0, 5)) == 0:
            writer.write_sealed(*enc.seal())
            continue
        pid = data.draw(st.sampled_from(PIDS))
        state = now[pid]
        for task in tasks[pid]:
            if data.draw(st.integers(0, 2)) == 0:  # most keep their state
                continue
            kind = data.draw(st.integers(0, 3))
            if kind == C.TASK_ENDED:
                state.pop(task, None)
                continue
            frames = (() if kind == C.TASK_RUNNING else
                      tuple(data.draw(st.lists(st.sampled_from(frame_ids), max_size=3))))
            waits = data.draw(st.sampled_from(WAITS)) if kind == C.TASK_SUSPENDED else ""
            awaits = tuple(sorted(set(data.draw(st.lists(st.sampled_from(tasks[pid]),
                                                         max_size=2))) - {task}))
            state[task] = (kind, waits, frames, awaits)
        enc.begin_task_snapshot(pid, ts)
        for task, (kind, waits, frames, awaits) in state.items():
            enc.task_state(task, kind, waits, list(frames), list(awaits))
        enc.end_task_snapshot()
        fed.append((pid, ts, dict(state)))
    writer.write_sealed(*enc.seal())
    writer.close({})
    return fed, ts


@settings(max_examples=int(os.environ.get("PSREC_ROUNDTRIP_EXAMPLES", "60")), deadline=None,
          derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_task_states_round_trip(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tasks.psr")
        fed, _ = run_snapshots(data, path)
        with open_recording(path) as rec:
            assert not rec.warnings, rec.warnings
            strings = rec.definitions().strings
            results = []
            for native in (True, False):
                stream = rec.stream(native=native)
                for _ in stream:
                    pass
                parents, frames = stream.decoder.trie_parents(), stream.decoder.trie_frames()
                stretches = [(task, state, strings.get(waits, ""),
                              stack_of(parents, frames, node), awaits, start, end, seen)
                             for task, state, waits, node, awaits, start, end, seen
                             in replay_task_states(stream.events)]
                results.append(sorted(stretches))
            assert results[0] == results[1], "the decoders disagree"
    stretches = results[0]
    last = {pid: max(ts for p, ts, _ in fed if p == pid) for pid in {p for p, _, _ in fed}}
    for pid, ts, state in fed:
        for task, (kind, waits, frames, awaits) in state.items():
            # The stretch the task was in at ts: it began at or before ts and ends after it
            # (or at it, where the recording's last snapshot of the process ends it).
            at = [s for s in stretches if s[0] == task and s[5] <= ts
                  and (ts < s[6] or ts == s[6] == s[7] == last[pid])]
            assert len(at) == 1, (task, ts, [s[1:2] + s[5:] for s in at])
            assert at[0][1:5] == (kind, waits, frames, tuple(awaits)), (task, ts, at[0])
            assert at[0][5] <= at[0][7] <= at[0][6]
        gone = [s for s in stretches if s[0] not in state and s[0] in
                {t for p, _, st_ in fed if p == pid for t in st_} and s[5] <= ts < s[6]]
        assert not gone, (ts, gone)


def test_unchanged_states_are_not_written_again(tmp_path: Any) -> None:
    """A snapshot writes only the tasks whose state changed (every one at the first in a
    chunk), and a task it does not give has ended."""
    enc = _format.Encoder()
    fn = enc.intern_function(enc.intern_string("app.py"), enc.intern_string("f"), 1)
    frame = enc.intern_frame(fn, 3)
    a, b = enc.define_task(7, 0x10, "a", fn, 0), enc.define_task(7, 0x20, "b", fn, 0)
    writer = new_writer(tmp_path / "t.psr")

    def snapshot(ts: int, states: dict[int, int]) -> None:
        enc.begin_task_snapshot(7, ts)
        for task, state in states.items():
            enc.task_state(task, state, "Future" if state == 1 else "", [frame], [])
        enc.end_task_snapshot()

    snapshot(10, {a: 1, b: 2})
    snapshot(20, {a: 1, b: 2})  # nothing changed: nothing written
    snapshot(30, {a: 1, b: 1})  # b changed
    snapshot(40, {a: 1})  # b ended
    writer.write_sealed(*enc.seal())
    snapshot(50, {a: 1})  # a new chunk: every task again
    writer.write_sealed(*enc.seal())
    writer.close({})
    with open_recording(tmp_path / "t.psr") as rec:
        stream = rec.stream()
        for _ in stream:
            pass
    snaps = [e[1:] for e in stream.events if e[0] == C.REC_TASK_SNAPSHOT]
    states = [(e[1], e[2], e[3] & 3) for e in stream.events if e[0] == C.REC_TASK_STATE]
    # (ts, pid, full, since): the unchanged snapshot at 20 is not written; the chunk's last
    # one closes it; the next chunk's first is full.
    assert snaps == [(10, 7, 1, 0), (30, 7, 0, 10), (40, 7, 0, 10), (50, 7, 1, 10)]
    assert states == [(10, a, 1), (10, b, 2), (30, b, 1), (40, b, C.TASK_ENDED), (50, a, 1)]
    stretches = sorted(s for s in replay_task_states(stream.events))
    assert [(s[0], s[1], s[5], s[6], s[7]) for s in stretches] == [
        (a, 1, 10, 50, 50), (b, 1, 30, 40, 30), (b, 2, 10, 30, 20)]
