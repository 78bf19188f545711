"""Round trip: what the native encoder writes, both decoders read back exactly.

The expected samples are built here from what the test fed the encoder, following
spec/psr-format.md (section 4.1 for which threads yield a sample in a pass and with what
state, section 4.2 for deep stacks, section 5 for weights), not from the encoder's output.
Both the native decoder and the pure-Python reference decoder must produce exactly that.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

import pytest
from format_helpers import INTERVAL_NS, new_writer, read_samples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psrec.format import Frame, Function, native_available, open_recording
from psrec.format import _constants as C

pytestmark = pytest.mark.skipif(
    not native_available(), reason="the native codec (psrec.format._format) is not built"
)

if native_available():
    from psrec.format import _format

TICK_NS = 1000
INTERVAL = INTERVAL_NS // TICK_NS
CAP = C.WEIGHT_CAP_INTERVALS * INTERVAL

names = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


@dataclass
class ThreadModel:
    ref: int
    pid: int
    python_tid: int
    os_tid: int
    name: str
    start_ts: int
    live: bool = True
    written_in_chunk: bool = False  # has had a sample() since the last seal
    stack: tuple[int, ...] = ()
    status: int = 0
    task: int = 0  # the running task as the chunk has it (0 at its start: spec 4)


@dataclass
class Model:
    """What the test fed the encoder, and what a decoder must therefore produce."""

    strings: dict[str, int] = field(default_factory=dict)
    functions: dict[int, tuple[str, str, int]] = field(default_factory=dict)
    frames: dict[int, tuple[int, int]] = field(default_factory=dict)
    threads: list[ThreadModel] = field(default_factory=list)
    tasks: dict[int, tuple[int, int, str, int, int]] = field(default_factory=dict)
    samples: list[tuple[Any, ...]] = field(default_factory=list)
    events: list[tuple[Any, ...]] = field(default_factory=list)
    now: int = 0
    last_pass_ts: int | None = None
    passes: int = 0
    errors: int = 0


def recorded_stack(stack: list[int]) -> tuple[int, ...]:
    """Spec 4.2: a stack deeper than MAX_DEPTH keeps its innermost MAX_DEPTH - 1 frames under
    the TRUNCATED_FRAME root."""
    if len(stack) > C.MAX_DEPTH:
        return (C.TRUNCATED_FRAME, *stack[-(C.MAX_DEPTH - 1):])
    return tuple(stack)


def run_stream(data: st.DataObject, path: str) -> tuple[Model, bool]:
    enc = _format.Encoder()
    writer = new_writer(path)
    m = Model()
    draw = data.draw

    def intern_string(s: str) -> int:
        sid = enc.intern_string(s)
        if s in m.strings:
            assert sid == m.strings[s], "interning the same string twice gave two ids"
        m.strings[s] = sid
        return sid

    def new_defs(n: int) -> None:
        for _ in range(n):
            filename = draw(st.sampled_from(["a.py", "lib/b.py", "<frozen c>", "ü.py"]))
            fname = draw(st.one_of(names, st.sampled_from(["main", "Cls.meth", "<lambda>"])))
            first = draw(st.integers(0, 2**31 - 1))
            fid = enc.intern_function(intern_string(filename), intern_string(fname), first)
            m.functions[fid] = (filename, fname, first)
            line = draw(st.integers(-(2**31), 2**31 - 1))
            frid = enc.intern_frame(fid, line)
            assert frid != C.TRUNCATED_FRAME
            m.frames[frid] = (fid, line)

    def event_ts() -> int:
        m.now += draw(st.sampled_from([0, 0, 1, 7, 300]))
        return m.now

    def draw_stack(prev: tuple[int, ...]) -> list[int]:
        pool = sorted(m.frames)
        kind = draw(st.sampled_from(
            ["same", "same", "leaf", "leaf", "random", "random", "empty", "deep"]))
        if kind == "same" and prev and prev[0] != C.TRUNCATED_FRAME:
            return list(prev)
        if kind == "leaf" and prev and prev[0] != C.TRUNCATED_FRAME:
            keep = draw(st.integers(0, len(prev)))
            return list(prev[:keep]) + draw(st.lists(st.sampled_from(pool), max_size=3))
        if kind == "empty":
            return []
        if kind == "deep" and draw(st.integers(0, 2)) == 0:
            depth = draw(st.sampled_from([C.MAX_DEPTH - 1, C.MAX_DEPTH, C.MAX_DEPTH + 1,
                                          C.MAX_DEPTH + 700]))
            step = draw(st.integers(1, 5))
            stack = [pool[(i * step) % len(pool)] for i in range(depth)]
            stack[-1] = draw(st.sampled_from(pool))
            return stack
        return draw(st.lists(st.sampled_from(pool), max_size=12))

    def do_pass() -> None:
        gap = draw(st.sampled_from([0, 1, 999, 1000, 1000, 1001, 2500, 4000, 4001, 10**7]))
        m.now += gap
        ts = m.now
        enc.begin_pass(ts)
        m.passes += 1
        if m.last_pass_ts is None:
            weight = INTERVAL  # spec 5: the first pass of a recording weighs one interval
        else:
            weight = min(ts - m.last_pass_ts, CAP)
        live = [t for t in m.threads if t.live]
        order = draw(st.permutations(live)) if live else []
        for t in order:
            action = draw(st.sampled_from(["sample", "sample", "sample", "omit", "error"]))
            if action == "sample":
                stack = draw_stack(t.stack)
                status = draw(st.integers(0, 0x7F))
                cpu = draw(st.one_of(st.none(), st.just(0), st.integers(1, 2**32 - 1)))
                enc.sample(t.ref, stack, status, cpu)
                t.stack, t.status, t.written_in_chunk = recorded_stack(stack), status, True
                if m.tasks and draw(st.booleans()):
                    t.task = draw(st.sampled_from([0, *m.tasks]))
                    enc.sample_task(t.ref, t.task)
                m.samples.append((ts, t.ref, t.stack, status, cpu or 0, weight, t.task))
            elif action == "error":
                enc.sample_error(t.ref)
                m.errors += 1
            elif t.written_in_chunk:
                # Not given in the pass: sampled with nothing changed (spec 4.1).
                m.samples.append((ts, t.ref, t.stack, t.status, 0, weight, t.task))
            else:
                # Not yet written whole in this chunk: the encoder must mark it as an error.
                m.errors += 1
        enc.end_pass()
        m.last_pass_ts = ts

    new_defs(draw(st.integers(1, 30)))
    for _ in range(draw(st.integers(1, 60))):
        op = draw(st.sampled_from(
            ["pass"] * 8 + ["thread", "thread", "exit", "rename", "defs", "seal", "seal",
                            "marker", "pstart", "pexit", "perrors", "task"]))
        if op == "pass":
            do_pass()
        elif op == "thread":
            ts = event_ts()
            pid = draw(st.integers(0, 2**32))
            ptid = draw(st.integers(0, 2**64 - 1))
            otid = draw(st.integers(0, 2**31))
            name = draw(names)
            if name:
                intern_string(name)
            ref = enc.add_thread(pid, ptid, otid, name, ts)
            assert ref == len(m.threads) + 1
            m.threads.append(ThreadModel(ref, pid, ptid, otid, name, ts))
            m.events.append((C.REC_THREAD_START, ts, ref, 0, 0))
        elif op == "exit":
            live = [t for t in m.threads if t.live]
            if live:
                t = draw(st.sampled_from(live))
                ts = event_ts()
                enc.thread_exit(t.ref, ts)
                t.live = False
                m.events.append((C.REC_THREAD_EXIT, ts, t.ref, 0, 0))
        elif op == "rename" and m.threads:
            t = draw(st.sampled_from(m.threads))
            ts = event_ts()
            name = draw(names)
            if name:
                intern_string(name)
            enc.thread_rename(t.ref, ts, name)
            m.events.append((C.REC_THREAD_RENAME, ts, t.ref, name, 0))
        elif op == "defs":
            new_defs(draw(st.integers(1, 40)))
        elif op == "task":
            pid = draw(st.integers(0, 2**32))
            address = draw(st.integers(0, 2**64 - 1))
            name = draw(names)
            if name:
                intern_string(name)
            coroutine = draw(st.sampled_from([0, *m.functions]))
            start = event_ts()
            tid = enc.define_task(pid, address, name, coroutine, start)
            assert tid == len(m.tasks) + 1
            m.tasks[tid] = (pid, address, name, coroutine, start)
        elif op == "seal":
            writer.write_sealed(*enc.seal())
            for t in m.threads:
                t.written_in_chunk = False
                t.task = 0
        elif op == "marker":
            ts = event_ts()
            label = draw(names)
            intern_string(label)
            enc.marker(ts, label)
            m.events.append((C.REC_MARKER, ts, label, 0, 0))
        elif op == "pstart":
            ts = event_ts()
            pid, ppid = draw(st.integers(1, 2**22)), draw(st.integers(0, 2**22))
            cmd = draw(names)
            if cmd:
                intern_string(cmd)
            enc.process_start(ts, pid, ppid, cmd)
            m.events.append((C.REC_PROCESS_START, ts, pid, ppid, cmd))
        elif op == "pexit":
            ts = event_ts()
            pid, code = draw(st.integers(1, 2**22)), draw(st.integers(-(2**31), 2**31))
            enc.process_exit(ts, pid, code)
            m.events.append((C.REC_PROCESS_EXIT, ts, pid, code, 0))
        elif op == "perrors":
            ts = event_ts()
            errs, missed = draw(st.integers(0, 2**40)), draw(st.integers(0, 2**40))
            enc.pass_errors(ts, errs, missed)
            m.events.append((C.REC_PASS_ERRORS, ts, errs, missed, 0))

    writer.write_sealed(*enc.seal())
    clean = draw(st.booleans())
    if clean:
        writer.close({"passes": m.passes, "samples": len(m.samples)})
    else:
        writer.abandon()
    stats = enc.stats
    assert stats["passes"] == m.passes
    assert stats["samples"] == len(m.samples), "encoder's sample count disagrees with the spec"
    assert stats["sample_errors"] == m.errors
    return m, clean


def resolve_event(ev: tuple[Any, ...], strings: dict[int, str]) -> tuple[Any, ...]:
    rtype, ts, a, b, c = ev

    def s(sid: int) -> str:
        return "" if sid == 0 else strings[sid]

    if rtype == C.REC_THREAD_RENAME:
        return (rtype, ts, a, s(b), c)
    if rtype == C.REC_MARKER:
        return (rtype, ts, s(a), b, c)
    if rtype == C.REC_PROCESS_START:
        return (rtype, ts, a, b, s(c))
    return (rtype, ts, a, b, c)


def check_recording(path: str, m: Model, clean: bool) -> None:
    expected = sorted(m.samples)
    with open_recording(path) as rec:
        assert rec.clean == clean
        assert not [w for w in rec.warnings if "not closed cleanly" not in w]
        defs = rec.definitions()
        # Definitions: every string, function, frame and thread as fed.
        for s, sid in m.strings.items():
            assert defs.strings[sid] == s
        assert len(defs.strings) == len(m.strings)
        assert defs.functions == {
            fid: Function(fid, fn, name, first) for fid, (fn, name, first) in m.functions.items()
        }
        assert {k: v for k, v in defs.frames.items() if k != C.TRUNCATED_FRAME} == {
            frid: Frame(frid, defs.functions[fid], line) for frid, (fid, line) in m.frames.items()
        }
        assert sorted(defs.threads) == [t.ref for t in m.threads]
        assert {i: (t.pid, t.address, t.name, t.coroutine.id if t.coroutine else 0, t.start_ts)
                for i, t in defs.tasks.items()} == m.tasks
        for t in m.threads:
            d = defs.threads[t.ref]
            assert (d.pid, d.python_tid, d.os_tid, d.name, d.start_ts) == (
                t.pid, t.python_tid, t.os_tid, t.name, t.start_ts)

        for native in (True, False):
            samples, stream = read_samples(rec, native, tasks=True)
            which = "native" if native else "reference"
            ts = [s[0] for s in samples]
            assert ts == sorted(ts), f"{which} decoder: samples out of time order"
            assert sorted(samples) == expected, f"{which} decoder disagrees with the spec"
            events = [resolve_event(e, defs.strings) for e in stream.events]
            assert events == m.events, f"{which} decoder: events differ"
            assert sum(s["passes"] for s in stream.summaries) == m.passes
            assert stream.errors == m.errors
            if clean:
                indexed = [c for c in rec.chunks if c.type == C.CHUNK_DATA]
                assert [c.samples for c in indexed] == [s["samples"] for s in stream.summaries]
                assert [c.passes for c in indexed] == [s["passes"] for s in stream.summaries]
        if clean:
            assert rec.stats == {"passes": m.passes, "samples": len(m.samples)}


@settings(
    max_examples=int(os.environ.get("PSREC_ROUNDTRIP_EXAMPLES", "60")),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_roundtrip_random_streams(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "run.psr")
        m, clean = run_stream(data, path)
        check_recording(path, m, clean)


def test_thread_exit_during_a_pass(tmp_path: Any) -> None:
    enc = _format.Encoder()
    path = tmp_path / "exit.psr"
    w = new_writer(path)
    frame = enc.intern_frame(enc.intern_function(enc.intern_string("a.py"), 0, 1), 1)
    t1 = enc.add_thread(1, 1, 1, "a", 0)
    t2 = enc.add_thread(1, 2, 2, "b", 0)
    enc.begin_pass(1000)
    enc.sample(t1, [frame], 0)
    enc.sample(t2, [frame], 0)
    enc.thread_exit(t2, 1000)
    enc.end_pass()
    enc.begin_pass(2000)
    enc.end_pass()
    w.write_sealed(*enc.seal())
    w.close()
    with open_recording(path) as rec:
        samples, _ = read_samples(rec, native=True)
    # t2 was sampled in pass 1 and then exited: 3 samples (t1 twice, t2 once), as the
    # encoder itself counts.
    assert enc.stats["samples"] == len(samples) == 3


def test_the_encoder_names_no_more_threads_than_a_file_holds(tmp_path: Any) -> None:
    # Refs are never given twice, so a recording names at most MAX_THREAD_REF threads; the
    # encoder refuses the next one (here with the limit lowered to 3) instead of writing a ref
    # that would make its chunk malformed, and what it wrote before stays readable.
    assert _format.Encoder().threads_full is False
    enc = _format.Encoder(max_threads=3)
    path = tmp_path / "full.psr"
    w = new_writer(path)
    frame = enc.intern_frame(enc.intern_function(enc.intern_string("a.py"), 0, 1), 1)
    refs = [enc.add_thread(1, i, i, f"t{i}", 0) for i in range(1, 4)]
    assert refs == [1, 2, 3] and enc.threads_full
    with pytest.raises(ValueError, match="at most 3 threads"):
        enc.add_thread(1, 4, 4, "t4", 0)
    enc.begin_pass(1000)
    for ref in refs:
        enc.sample(ref, [frame], 0)
    enc.end_pass()
    w.write_sealed(*enc.seal())
    w.close()
    with open_recording(path) as rec:
        samples, _ = read_samples(rec, native=True)
        assert len(rec.definitions().threads) == 3
    assert len(samples) == 3
