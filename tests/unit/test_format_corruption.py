"""Bad bytes: truncation at every offset, thousands of random corruptions of a small file, and
mutated decompressed payloads fed straight to the decoders.

The reader may refuse a file with a FormatError or open it with warnings; whatever it recovers
must be exactly chunks that were written. Any other exception, a crash or a hang fails.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import msgpack
import pytest
from format_helpers import (
    mutate,
    new_writer,
    read_samples,
    record,
    resolve,
    stacks_of,
    string_record,
    varint,
    zigzag,
)
from psrec.format import (
    CorruptRecordingError,
    FormatError,
    native_available,
    open_recording,
)
from psrec.format import _constants as C
from psrec.format.describe import dump_lines, info
from psrec.format.reference import RefBatch, RefDecodeError, RefDecoder
from psrec.format.reference import decode_defs as ref_decode_defs

pytestmark = pytest.mark.skipif(
    not native_available(), reason="the native codec (psrec.format._format) is not built"
)
if native_available():
    from psrec.format import _format

HERE = Path(__file__).parent


def write_small(path: Path, passes: int = 50, seal_every: int = 8) -> None:
    """Three threads over several chunks: deltas, status changes, cpu, an exit, a rename,
    errors and a marker, definitions spread over several DEFS chunks."""
    enc = _format.Encoder()
    w = new_writer(path)
    fn = enc.intern_string("app.py")
    funcs = [enc.intern_function(fn, enc.intern_string(n), i * 10 + 1)
             for i, n in enumerate(["main", "run", "step"])]
    frames = [enc.intern_frame(f, line) for f in funcs for line in (3, 4)]
    t1 = enc.add_thread(1, 0x1000, 11, "MainThread", 0)
    t2 = enc.add_thread(1, 0x2000, 12, "worker", 0)
    t3 = 0
    for i in range(passes):
        ts = 1000 + i * 1000 + (5000 if i == 30 else 0)
        if i == 12:
            t3 = enc.add_thread(1, 0x3000, 13, "late", ts)
            extra = enc.intern_frame(enc.intern_function(fn, enc.intern_string("late"), 99), 100)
            frames.append(extra)
        enc.begin_pass(ts)
        enc.sample(t1, frames[: 2 + i % 3], 3 if i % 5 else 1, 7 if i % 4 == 0 else None)
        if i % 7 == 3:
            enc.sample_error(t2)
        else:
            enc.sample(t2, [frames[0], frames[1 + i % 4]], 0)
        if t3 and i < 40:
            enc.sample(t3, [frames[-1]] * (i % 4), 2, 1)
        enc.end_pass()
        if t3 and i == 40:
            enc.thread_exit(t3, ts)
        if i == 20:
            enc.thread_rename(t2, ts, "worker-2")
            enc.marker(ts, "halfway")
        if i % seal_every == seal_every - 1:
            w.write_sealed(*enc.seal())
    w.write_sealed(*enc.seal())
    w.close({"passes": passes, "samples": enc.stats["samples"]})


def chunk_samples(rec: Any, native: bool) -> list[tuple[int, list[tuple[Any, ...]]]]:
    """Each readable DATA chunk's samples, decoded one chunk at a time, as (offset, samples)."""
    out = []
    for info_ in rec.data_chunks():
        try:
            payload = rec._file.payload(info_)
        except CorruptRecordingError:
            continue
        if native:
            dec, batch = _format.Decoder(4 * rec.interval_ticks, rec.interval_ticks), \
                _format.SampleBatch()
        else:
            dec, batch = RefDecoder(4 * rec.interval_ticks, rec.interval_ticks), RefBatch()
        try:
            dec.decode_data(payload, batch)
        except (RefDecodeError, getattr(_format, "DecodeError", RefDecodeError)):
            continue
        from format_helpers import _column

        parents, frames = stacks_of(dec)
        cols = [_column(batch.ts, "q"), _column(batch.thread, "I"), _column(batch.node, "I"),
                _column(batch.status, "B"), _column(batch.cpu, "I"), _column(batch.weight, "I")]
        out.append((info_.offset, [(ts, th, resolve(parents, frames, n), st, cpu, w)
                                   for ts, th, n, st, cpu, w in zip(*cols)]))
    return out


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("small") / "small.psr"
    write_small(path)
    raw = path.read_bytes()
    with open_recording(path) as rec:
        assert rec.clean and not rec.warnings
        per_chunk = chunk_samples(rec, native=True)
        assert per_chunk == chunk_samples(rec, native=False)
        all_samples, _ = read_samples(rec, native=True)
        chunks = list(rec.chunks)
    assert [s for _, ss in per_chunk for s in ss] == all_samples
    assert len(per_chunk) >= 6 and len(all_samples) > 100
    return {"path": path, "raw": raw, "per_chunk": per_chunk, "chunks": chunks}


def exercise(path: Path) -> tuple[Any, ...] | None:
    """Everything a user can do with a file: open, info, dump, both decoders.
    Returns None if it was refused with a FormatError, else what was recovered."""
    try:
        rec = open_recording(path)
    except FormatError as exc:
        assert str(path) in str(exc), f"error does not name the file: {exc}"
        return None
    with rec:
        d = info(rec)
        lines = list(dump_lines(rec))
        assert lines[0].startswith("HEADER")
        native_samples, _ = read_samples(rec, native=True)
        ref_samples, _ = read_samples(rec, native=False)
        assert native_samples == ref_samples
        assert d["samples"] == len(native_samples)
        per_chunk = chunk_samples(rec, native=True)
        assert sorted(s for _, ss in per_chunk for s in ss) == sorted(native_samples)
        return rec.clean, list(rec.warnings), per_chunk


def test_truncated_at_every_offset(small: dict[str, Any], tmp_path: Path) -> None:
    raw: bytes = small["raw"]
    per_chunk = small["per_chunk"]
    data_ends = {c.offset: c.end for c in small["chunks"] if c.type == C.CHUNK_DATA}
    path = tmp_path / "cut.psr"
    for cut in range(len(raw) + 1):
        path.write_bytes(raw[:cut])
        if cut < C.HEADER_SIZE:
            with pytest.raises(FormatError) as ei:
                open_recording(path)
            assert str(path) in str(ei.value)
            continue
        got = exercise(path)
        assert got is not None, f"cut at {cut}: a file with an intact header was refused"
        clean, warnings, recovered = got
        if cut == len(raw):
            assert clean and not warnings
        else:
            assert not clean and warnings, f"cut at {cut}: no warning"
        # Every complete DATA chunk before the cut, and nothing else.
        expected = [(off, ss) for off, ss in per_chunk if data_ends[off] <= cut]
        assert recovered == expected, f"cut at {cut}"


def regions(small: dict[str, Any]) -> list[tuple[int, int]]:
    raw: bytes = small["raw"]
    out = [(0, C.HEADER_SIZE), (len(raw) - C.TRAILER_SIZE, len(raw))]
    for c in small["chunks"]:
        out.append((c.offset, c.offset + C.CHUNK_HEADER_SIZE))
        out.append((c.offset + C.CHUNK_HEADER_SIZE, c.end))
    return out


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout


@pytest.mark.timeout(240)
def test_random_corruptions(small: dict[str, Any], tmp_path: Path) -> None:
    raw: bytes = small["raw"]
    originals = Counter(tuple(ss) for _, ss in small["per_chunk"])
    rng = random.Random(0x5EED)
    spots = regions(small)
    path = tmp_path / "bad.psr"
    n = int(os.environ.get("PSREC_CORRUPTIONS", "2000"))
    outcomes: Counter[str] = Counter()
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for case in range(n):
            bad = raw
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                bad = mutate(rng, bad, spots)
            path.write_bytes(bad)
            start = time.monotonic()
            signal.alarm(5)
            try:
                got = exercise(path)
            except _Timeout:
                pytest.fail(f"case {case}: reading took more than 5 s (a hang?)")
            except Exception as exc:
                (tmp_path / "failing.psr").write_bytes(bad)
                raise AssertionError(
                    f"case {case}: {type(exc).__name__} escaped; file kept as "
                    f"{tmp_path / 'failing.psr'}"
                ) from exc
            finally:
                signal.alarm(0)
            assert time.monotonic() - start < 5
            if got is None:
                outcomes["refused"] += 1
                continue
            clean, warnings, recovered = got
            if bad != raw:
                outcomes["clean" if clean and not warnings else "recovered"] += 1
            # Whatever was recovered is chunks that were written, never garbage.
            for _, ss in recovered:
                assert tuple(ss) in originals, f"case {case}: a recovered chunk was never written"
            if clean and not warnings and bad != raw:
                # Only harmless damage (e.g. to reserved bytes or the index's unread parts)
                # may go unnoticed, and then nothing may be lost.
                assert Counter(tuple(ss) for _, ss in recovered) == originals, f"case {case}"
    finally:
        signal.signal(signal.SIGALRM, old)
    # The corruptions must have exercised both refusal and recovery.
    assert outcomes["refused"] > n // 50 and outcomes["recovered"] > n // 3, outcomes


def payload_corpus(small: dict[str, Any]) -> list[tuple[str, bytes]]:
    corpus: list[tuple[str, bytes]] = []
    with open_recording(small["path"]) as rec:
        for ctype, kind in ((C.CHUNK_DEFS, "defs"), (C.CHUNK_DATA, "data")):
            for _, payload in rec.payloads(ctype):
                corpus.append((kind, payload))
    return corpus


@pytest.mark.timeout(240)
def test_mutated_payloads_native_decoder_isolated(small: dict[str, Any], tmp_path: Path) -> None:
    """The crc protects stored payloads, so the decoder only sees damaged records if the
    writer wrote them; still, no payload may crash it. Run in a child process, so that a
    crash fails this test rather than killing pytest."""
    corpus_path = tmp_path / "corpus.msgpack"
    corpus_path.write_bytes(msgpack.packb(payload_corpus(small)))
    n = int(os.environ.get("PSREC_PAYLOAD_MUTATIONS", "8000"))
    proc = subprocess.run(
        [sys.executable, str(HERE / "format_helpers.py"), str(corpus_path), "1234", str(n)],
        check=False, capture_output=True, text=True, timeout=200,
        env={**os.environ, "PYTHONPATH": str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", "")},
    )
    last_case = proc.stderr.strip().splitlines()[-1:] if proc.stderr else []
    assert proc.returncode == 0, (
        f"native decoder worker died (status {proc.returncode}) at {last_case}:\n"
        + proc.stderr[-3000:]
    )
    decoded, rejected = (int(p.split("=")[1]) for p in proc.stdout.split())
    assert decoded + rejected == n and decoded > 0 and rejected > 0


def test_mutated_payloads_reference_decoder(small: dict[str, Any]) -> None:
    """The reference decoder raises nothing but RefDecodeError on any payload, and agrees
    with the native decoder on which payloads are malformed and on what the others hold."""
    corpus = payload_corpus(small)
    rng = random.Random(99)
    n = int(os.environ.get("PSREC_PAYLOAD_MUTATIONS_REF", "3000"))
    for i in range(n):
        kind, payload = corpus[i % len(corpus)]
        data = mutate(rng, payload)
        if kind == "defs":
            try:
                ref: Any = ref_decode_defs(data)
            except RefDecodeError:
                ref = "error"
            try:
                nat: Any = _format.decode_defs(data)
                nat = (*[[tuple(x) for x in part] for part in nat[:4]], nat[4])
                ref = ref if ref == "error" else (*[[tuple(x) for x in p] for p in ref[:4]],
                                                  ref[4])
            except _format.DecodeError:
                nat = "error"
            if nat != ref:
                raise AssertionError(f"case {i}: decoders disagree on a DEFS payload: "
                                     f"native {str(nat)[:200]} reference {str(ref)[:200]}")
            continue
        results = []
        for native in (True, False):
            dec = (_format.Decoder(4000, 1000), _format.SampleBatch()) if native else \
                (RefDecoder(4000, 1000), RefBatch())
            try:
                events, summary = dec[0].decode_data(data, dec[1])
            except (RefDecodeError, _format.DecodeError):
                results.append("error")
                continue
            from format_helpers import _column

            parents, frames = stacks_of(dec[0])
            b = dec[1]
            cols = [_column(b.ts, "q"), _column(b.thread, "I"), _column(b.node, "I"),
                    _column(b.status, "B"), _column(b.cpu, "I"), _column(b.weight, "I"),
                    _column(b.task, "I")]
            rows = [(ts, th, resolve(parents, frames, nd), st, cpu, w, task)
                    for ts, th, nd, st, cpu, w, task in zip(*cols)]
            results.append((rows, [tuple(e) for e in events], summary))
        assert results[0] == results[1], (
            f"case {i}: decoders disagree on a DATA payload: native {str(results[0])[:300]} "
            f"reference {str(results[1])[:300]}"
        )



def _begin(base: int = 0, prev: int = 0) -> bytes:
    return record(C.REC_BEGIN, 0, base, prev)


def _pass(delta: int, *entry: int, status: bytes = b"") -> bytes:
    return record(C.REC_PASS, body=b"".join(varint(v) for v in (delta, *entry)) + status)


EDGE_DATA = {
    "cpu beyond 32 bits saturates": _begin() + _pass(0, 1 << 3 | C.ENTRY_CPU, 5 << 32),
    "frame id beyond 32 bits": _begin() + _pass(0, 1 << 3 | C.ENTRY_STACK, 0, 1, (1 << 32) + 5),
    "base_ts beyond int64": _begin(base=(1 << 64) - 5) + _pass(0, 1 << 3),
    "pass ts overflows int64": _begin(base=(1 << 63) - 5) + _pass(100, 1 << 3 | C.ENTRY_STATUS,
                                                                   status=b"\x01"),
    "prev_pass beyond int64": _begin(prev=1 << 63) + _pass(0, 1 << 3),
    "pass errors count beyond int64": _begin() + record(C.REC_PASS_ERRORS, 5, 1 << 63, 0),
    "marker label beyond int64": _begin() + record(C.REC_MARKER, 5, (1 << 64) - 1),
    "thread ref beyond 2^24": _begin() + _pass(0, ((1 << 24) + 1) << 3),
    "thread ref 0": _begin() + _pass(0, 0),
    "pop below the root": _begin() + _pass(0, 1 << 3 | C.ENTRY_STACK, 1, 0),
    "push beyond MAX_DEPTH": _begin() + _pass(0, 1 << 3 | C.ENTRY_STACK, 0, C.MAX_DEPTH + 1),
    "PASS before BEGIN": _pass(0, 1 << 3),
    "status byte missing": _begin() + _pass(0, 1 << 3 | C.ENTRY_STATUS),
    "varint of 11 bytes": _begin() + record(C.REC_MARKER, body=b"\xff" * 10 + b"\x01"),
    "record length past the end": _begin() + bytes([C.REC_MARKER]) + varint(1000) + b"\x00",
    "unknown record skipped": _begin() + record(0x7E, body=b"\xff\xff\x80")
    + _pass(0, 1 << 3 | C.ENTRY_STATUS, status=b"\x03"),
    "PASS_TASKS sets its pass's task and the next": _begin()
    + record(C.REC_PASS, body=varint(0) + varint(1 << 3 | C.ENTRY_STATUS) + b"\x01"
             + varint(2 << 3 | C.ENTRY_STATUS) + b"\x01")
    + record(C.REC_PASS_TASKS, 2, 7) + _pass(5) + record(C.REC_PASS_TASKS, 2, 0, 1, 3)
    + _pass(5),
    "PASS_TASKS before any PASS": _begin() + record(C.REC_PASS_TASKS, 1, 2),
    "PASS_TASKS names a thread not live": _begin()
    + _pass(0, 1 << 3 | C.ENTRY_STATUS, status=b"\x01") + record(C.REC_PASS_TASKS, 2, 7),
    "PASS_TASKS after its thread exited": _begin()
    + _pass(0, 1 << 3 | C.ENTRY_STATUS, status=b"\x01")
    + record(C.REC_THREAD_EXIT, 1, 0) + record(C.REC_PASS_TASKS, 1, 7),
    "PASS_TASKS task id beyond 32 bits": _begin()
    + _pass(0, 1 << 3 | C.ENTRY_STATUS, status=b"\x01") + record(C.REC_PASS_TASKS, 1, 1 << 33),
    "PASS_TASKS thread ref beyond 2^24": _begin()
    + _pass(0, 1 << 3 | C.ENTRY_STATUS, status=b"\x01")
    + record(C.REC_PASS_TASKS, (1 << 24) + 1, 1),
    "PASS_TASKS cut inside an entry": _begin()
    + _pass(0, 1 << 3 | C.ENTRY_STATUS, status=b"\x01") + record(C.REC_PASS_TASKS, 1),
    # Task snapshots (section 4.3): a TASK_STATE's event is (type, snapshot ts, task,
    # state | waits << 2, trie node), a TASK_AWAITS's (type, snapshot ts, task, awaited, 0).
    "task snapshot with states and awaits": _begin()
    + record(C.REC_TASK_SNAPSHOT, 7, 42, 1, 0) + record(C.REC_TASK_STATE, 3, 1, 5, 2, 11, 12)
    + record(C.REC_TASK_AWAITS, 3, 4) + record(C.REC_TASK_STATE, 4, 2, 0, 1, 11)
    + record(C.REC_TASK_SNAPSHOT, 9, 42, 0, 2) + record(C.REC_TASK_STATE, 3, 0, 0, 0),
    "task state without a snapshot": _begin() + record(C.REC_TASK_STATE, 3, 1, 0, 0),
    "task state after another record": _begin() + record(C.REC_TASK_SNAPSHOT, 7, 42, 1, 0)
    + record(C.REC_MARKER, 7, 1) + record(C.REC_TASK_STATE, 3, 1, 0, 0),
    "task state out of range": _begin() + record(C.REC_TASK_SNAPSHOT, 7, 42, 1, 0)
    + record(C.REC_TASK_STATE, 3, 4, 0, 0),
    "task stack beyond MAX_DEPTH": _begin() + record(C.REC_TASK_SNAPSHOT, 7, 42, 1, 0)
    + record(C.REC_TASK_STATE, 3, 1, 0, C.MAX_DEPTH + 1),
    "task stack cut short": _begin() + record(C.REC_TASK_SNAPSHOT, 7, 42, 1, 0)
    + record(C.REC_TASK_STATE, 3, 1, 0, 3, 11),
    "task id beyond 32 bits in a state": _begin() + record(C.REC_TASK_SNAPSHOT, 7, 42, 1, 0)
    + record(C.REC_TASK_STATE, 1 << 33, 1, 0, 0),
    "task awaits of another task": _begin() + record(C.REC_TASK_SNAPSHOT, 7, 42, 1, 0)
    + record(C.REC_TASK_STATE, 3, 1, 0, 0) + record(C.REC_TASK_AWAITS, 4, 3),
    "task awaits without a state": _begin() + record(C.REC_TASK_SNAPSHOT, 7, 42, 1, 0)
    + record(C.REC_TASK_AWAITS, 3, 4),
    "task snapshot cut short": _begin() + record(C.REC_TASK_SNAPSHOT, 7, 42, 1),
}


@pytest.mark.parametrize("payload", list(EDGE_DATA.values()), ids=list(EDGE_DATA))
def test_edge_data_payloads_decoders_agree(payload: bytes) -> None:
    results = []
    for native in (True, False):
        dec, batch = ((_format.Decoder(4000, 1000), _format.SampleBatch()) if native
                      else (RefDecoder(4000, 1000), RefBatch()))
        try:
            events, summary = dec.decode_data(payload, batch)
        except (RefDecodeError, _format.DecodeError) as exc:
            results.append(("error", type(exc).__name__.endswith("DecodeError")))
            continue
        from format_helpers import _column

        results.append((_column(batch.ts, "q"), _column(batch.cpu, "I"),
                        _column(batch.task, "I"), [tuple(e) for e in events], summary))
    assert results[0] == results[1]
    name = next(k for k, v in EDGE_DATA.items() if v == payload)
    if name == "PASS_TASKS sets its pass's task and the next":
        assert results[0][2] == [0, 7, 3, 0, 3, 0]  # per pass: thread 1, thread 2
    elif name.startswith("PASS_TASKS"):
        assert results[0][0] == "error", name
    elif name == "task snapshot with states and awaits":
        events = results[0][3]
        assert events[0] == (C.REC_TASK_SNAPSHOT, 7, 42, 1, 0)
        assert events[1][:4] == (C.REC_TASK_STATE, 7, 3, 1 | 5 << 2) and events[1][4] > 0
        assert events[2] == (C.REC_TASK_AWAITS, 7, 3, 4, 0)
        # The same frame at the root: the same trie node as the first stack's root.
        assert events[3][:4] == (C.REC_TASK_STATE, 7, 4, 2) and 0 < events[3][4] < events[1][4]
        assert events[4] == (C.REC_TASK_SNAPSHOT, 9, 42, 0, 2)
        assert events[5] == (C.REC_TASK_STATE, 9, 3, 0, 0)
    elif name.startswith("task"):
        assert results[0][0] == "error", name


EDGE_DEFS = {
    "invalid utf-8 is replaced": string_record(1, "ok") + record(
        C.REC_STRING, body=varint(2) + varint(3) + b"a\xff\xfe"),
    "string id beyond 32 bits": record(C.REC_STRING, body=varint(1 << 32) + varint(0)),
    "function field beyond 32 bits": record(C.REC_FUNCTION, 1, 1, 1, 1 << 40),
    "string past its record": record(C.REC_STRING, body=varint(1) + varint(9) + b"ab"),
    "frame line far negative": record(C.REC_FRAME, 1, 1, zigzag(-(1 << 62))),
    "unknown record skipped": record(0x3F, 1, 2, 3) + string_record(1, "x"),
    "a task": record(C.REC_TASK, 1, 42, 0x7F00_0000_1000, 0, 0, 5),
    "task id beyond 32 bits": record(C.REC_TASK, 1 << 33, 42, 1, 0, 0, 5),
    "task cut short": record(C.REC_TASK, 1, 42, 1),
}


@pytest.mark.parametrize("payload", list(EDGE_DEFS.values()), ids=list(EDGE_DEFS))
def test_edge_defs_payloads_decoders_agree(payload: bytes) -> None:
    results = []
    for decode in (_format.decode_defs, ref_decode_defs):
        try:
            d = decode(payload)
            results.append(([[tuple(x) for x in part] for part in (*d[:5], d[6])], d[5]))
        except (RefDecodeError, _format.DecodeError) as exc:
            results.append(("error", type(exc).__name__.endswith("DecodeError")))
    assert results[0] == results[1]
    if "utf-8" in str(payload) or b"\xff\xfe" in payload:
        assert results[0][0][0] == [(1, "ok"), (2, "a\ufffd\ufffd")]
