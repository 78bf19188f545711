"""Human-readable views of a .psr file: `psrec info` and `psrec dump`."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator
from typing import Any

from . import _constants as C
from ._layout import RECORD_FIELDS
from .reader import (
    BUDGET_ENV,
    Recording,
    _BudgetError,
    _chunk_seq,
    _decode_defs,
    _DecodeError,
    _msgpack_limits,
    _over_budget,
    native_available,
)
from .reference import RefBatch, RefDecodeError, RefDecoder, _Reader, unzigzag

__all__ = ["info", "dump_lines", "describe_part"]


def describe_part(part: Any) -> str | None:
    """What part of a recording a file is, from its METADATA `part` (spec section 2): a
    window of a series, a snapshot of a recording, or a part cut from one; None for a whole
    recording (or a `part` this psrec does not know)."""
    if not isinstance(part, dict):
        return None

    def num(key: str) -> float | None:
        v = part.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    kind, of = part.get("kind"), str(part.get("of", "?"))
    if kind == "window":
        n, lo, hi = part.get("window"), num("from_s"), num("to_s")
        span = f", {lo:.3f}-{hi:.3f} s after the recording began" if lo is not None \
            and hi is not None else ""
        return f"window {n} of {of}{span} (file {part.get('file', '?')} of the series)"
    if kind in ("snapshot", "part"):
        taken = part.get("taken_wall_ns")
        when = ""
        if isinstance(taken, int) and 0 <= taken < 1 << 63:
            when = " taken " + _dt.datetime.fromtimestamp(taken / 1e9, _dt.timezone.utc) \
                .strftime("%Y-%m-%d %H:%M:%S UTC")
        text = f"{'snapshot' if kind == 'snapshot' else 'a part'} of {of}{when}"
        inner = describe_part(part.get("of_part"))
        if inner:
            text += f" ({inner})"
        left = num("left_out_s")
        if part.get("running") is True:
            text += "; the recording went on" + (
                f": its last {left:.3f} s before the copy are not in it"
                if left is not None else "")
        elif part.get("running") is False:
            text += "; the recording had ended: all of it"
        return text
    return None


def info(rec: Recording) -> dict[str, Any]:
    """Everything `psrec info` shows, computed by decoding the file once."""
    defs = rec.definitions()
    stream = rec.stream()
    samples = passes = 0
    first = last = -1
    sampled: set[int] = set()  # threads with at least one sample (those a report counts)
    for batch in stream:
        samples += len(batch)
        # Once every thread has samples, the rest need not be looked at (30 ms a million).
        if len(sampled) >= len(defs.threads):
            continue
        refs = batch.thread
        if isinstance(refs, (bytes, bytearray)):
            refs = memoryview(refs).cast("I")
        sampled.update(refs)
    for s in stream.summaries:
        passes += s["passes"]
        if s["first_ts"] >= 0:
            first = s["first_ts"] if first < 0 else min(first, s["first_ts"])
            last = max(last, s["last_ts"])
    duration_s = (last - first) * rec.tick_ns / 1e9 if passes > 1 else 0.0
    # Missed deadlines: the data holds those of recorded passes (what a window counts); the
    # recorder's trailer counts every one, also while no target was being read (waiting for
    # Python, or after it exited). The trailer's is the recording's count where it has one.
    missed_in_passes = sum(e[3] for e in stream.events if e[0] == C.REC_PASS_ERRORS)
    recorder_missed = (rec.stats or {}).get("missed_deadlines")
    missed = recorder_missed if isinstance(recorder_missed, int) else missed_in_passes
    defs.apply_renames(stream.events)
    data_bytes = sum(c.length + C.CHUNK_HEADER_SIZE for c in rec.chunks
                     if c.type in (C.CHUNK_DATA, C.CHUNK_DEFS))
    created = _dt.datetime.fromtimestamp(rec.header.created_wall_ns / 1e9, _dt.timezone.utc)
    return {
        "file": rec.path,
        "format": f"{rec.header.major}.{rec.header.minor}",
        "size_bytes": rec.file_size,
        "closed_cleanly": rec.clean,
        "created": created.isoformat(timespec="milliseconds"),
        # what part of a recording the file is (a window, a snapshot); None: a whole one
        "part": describe_part(rec.metadata.get("part")),
        "tick_ns": rec.tick_ns,
        "metadata": rec.metadata,
        "stats": rec.stats,
        "duration_s": duration_s,
        "passes": passes,
        "samples": samples,
        "sample_errors": stream.errors,
        "missed_deadlines": missed,
        "missed_deadlines_in_passes": missed_in_passes,
        "achieved_rate_hz": (passes - 1) / duration_s if duration_s > 0 else 0.0,
        # threads the recording saw (defined), and those of them with samples ("in N threads"
        # of psrec report, where the view is the whole recording)
        "threads": len(defs.threads),
        "threads_with_samples": len(sampled & defs.threads.keys()),
        # the programs recorded, in start order (format 1.1; empty in older files)
        "processes": [{"pid": p.pid, "parent_pid": p.parent_pid, "command": p.command,
                       "start_s": p.start_ts * rec.tick_ns / 1e9} for p in defs.processes],
        # named as psrec report names them: a thread without a name as "thread (tid N)"
        "thread_names": sorted({t.label for t in defs.threads.values()}),
        "functions": len(defs.functions),
        "frames": len(defs.frames) - 1,
        # asyncio tasks the recording names (format 1.4; 0 in older files and without asyncio)
        "tasks": len(defs.tasks),
        "bytes_per_sample": data_bytes / samples if samples else None,
        # every chunk in the file; the recorder's stats count its data chunks alone
        "chunks": len(rec.chunks),
        "data_chunks": sum(1 for c in rec.chunks if c.type == C.CHUNK_DATA),
        "corrupt_chunks": rec.corrupt_chunks,
    }


def _fields(rtype: int, b: _Reader) -> str:
    """A record's fields as `name=value` words, as they are in the file: no range is checked,
    so that a record the reader refuses still shows."""
    if rtype == C.REC_STRING:
        sid = b.varint()
        n = b.varint()
        return f"id={sid} {b.take(n, 'string').decode('utf-8', 'replace')!r}"
    if rtype == C.REC_BEGIN:
        seq, base, prev = b.varint(), b.varint(), b.varint()
        return f"seq={seq} base_ts={base} prev_pass={'none' if not prev else prev - 1}"
    if rtype == C.REC_PASS:
        parts = [f"+{b.varint()}"]
        while not b.at_end():
            head = b.varint()
            ref, flags = head >> C.ENTRY_FLAG_BITS, head & 7
            if flags == 0:
                parts.append(f"t{ref}:error")
                continue
            p = f"t{ref}:"
            if flags & C.ENTRY_STACK:
                pop, push = b.varint(), b.varint()
                frames = [b.varint() for _ in range(push)]
                p += f"-{pop}+{frames}"
            if flags & C.ENTRY_STATUS:
                p += f" s={b.byte():#04x}"
            if flags & C.ENTRY_CPU:
                p += f" cpu={b.varint()}"
            parts.append(p)
        return " ".join(parts)
    if rtype == C.REC_PASS_TASKS:  # ref:task pairs (0: no task)
        pairs = []
        while not b.at_end():
            ref = b.varint()
            pairs.append(f"t{ref}:task={b.varint()}")
        return " ".join(pairs)
    if rtype == C.REC_TASK_STATE:  # its fields, then `depth` frame ids (section 4.3)
        task, state, waits, depth = (b.varint() for _ in range(4))
        frames = [b.varint() for _ in range(min(depth, b.end - b.pos))]
        return f"task={task} state={state} waits={waits} frames={frames}"
    fields = RECORD_FIELDS.get(rtype)
    if fields is None:
        return f"({b.end - b.pos} bytes, unknown record type: skipped)"
    words = []
    for f in fields:
        if f.optional and b.at_end():  # not in this record (a Python FUNCTION's)
            break
        value = unzigzag(b.varint()) if f.form == "zigzag" else b.varint()
        words.append(f"{f.label or f.name}={f.show.format(value)}")
    return " ".join(words)


# Records of a chunk the reader refuses that dump still shows, to see where it goes wrong.
DUMP_REFUSED_RECORDS = 100
# Record lines dump shows for a file of S bytes: DUMP_LINES_BASE + DUMP_LINES_PER_BYTE * S
# (scaled as the budgets of spec section 9.3 are), runs of identical lines shown once.
DUMP_LINES_BASE = 1 << 16
DUMP_LINES_PER_BYTE = 16


def dump_lines(rec: Recording) -> Iterator[str]:
    """One line per chunk and per record. A DEFS or DATA chunk the reader refuses (malformed,
    or past a limit of spec section 9) shows its first records and why: its whole content
    could be millions of lines from a few bytes. Where the reader stops at a budget of the
    whole file (section 9.3), dump stops too; records repeated back to back are one line."""
    import msgpack

    h = rec.header
    yield (f"HEADER format={h.major}.{h.minor} created_wall_ns={h.created_wall_ns} "
           f"created_mono_ns={h.created_mono_ns} tick_ns={h.tick_ns}")
    check = _Checker(rec)
    lines_left = rec.budgets.scaled(DUMP_LINES_BASE + DUMP_LINES_PER_BYTE * rec.file_size)
    seqs: dict[int, int] = {}  # sequence number -> offset of the first DATA chunk with it
    stopped: str | None = None
    for info in rec.chunks:
        yield (f"CHUNK @{info.offset} {info.type_name} stored={info.length} raw={info.raw_length}"
               + (f" ts={info.first_ts}..{info.last_ts} passes={info.passes} samples={info.samples}"
                  if info.type == C.CHUNK_DATA and info.passes else ""))
        if stopped is not None and info.type == C.CHUNK_DATA:
            yield "  (not read: the reader stopped before it)"
            continue
        if info.type == C.CHUNK_DATA:
            over = check.raw(info)
            if over is not None:
                stopped = over
                yield f"  (not read: {over}; the reader stops here)"
                continue
        payload = rec.payload(info)
        if payload is None:
            yield "  (damaged: skipped)"
            continue
        if info.type in (C.CHUNK_METADATA, C.CHUNK_STATS, C.CHUNK_INDEX):
            try:
                value = msgpack.unpackb(payload, raw=False, **_msgpack_limits(len(payload)))
            except (ValueError, TypeError, msgpack.UnpackException) as exc:
                yield f"  (not valid msgpack: {exc})"
                continue
            yield f"  {value!r}"
            continue
        if info.type not in (C.CHUNK_DEFS, C.CHUNK_DATA):
            continue
        refused, past_budget = check.refused(payload, info.type)
        if past_budget:
            stopped = refused
        seq = _chunk_seq(payload) if info.type == C.CHUNK_DATA else None
        if refused is None and seq is not None:
            if seq in seqs:
                yield (f"  (repeats sequence number {seq} of the chunk at byte {seqs[seq]}: "
                       "the reader counts it once)")
            seqs.setdefault(seq, info.offset)
        last, repeats = "", 0
        try:
            for i, (rtype, body) in enumerate(_Reader(payload).records()):
                if refused is not None and i == DUMP_REFUSED_RECORDS:
                    break
                name = C.RECORD_NAMES.get(rtype, f"RECORD{rtype:#x}")
                line = f"  {name} {_fields(rtype, body)}"
                if line == last:
                    repeats += 1
                    continue
                if repeats:
                    yield f"  (the record above {repeats:,} more time{'s' if repeats > 1 else ''})"
                    repeats = 0
                if lines_left <= 0:
                    yield (f"  (dump stops here: a file of {rec.file_size:,} bytes shows at most "
                           f"that many record lines; {BUDGET_ENV}=unlimited shows them all)")
                    return
                lines_left -= 1
                last = line
                yield line
        except RefDecodeError as exc:
            if refused is None:
                refused = str(exc)
        if repeats:
            yield f"  (the record above {repeats:,} more time{'s' if repeats > 1 else ''})"
        if past_budget:
            yield f"  ({refused}; the reader stops here)"
        elif refused is not None:
            yield f"  (malformed: {refused}; the reader skips this chunk)"


class _Checker:
    """What the reader makes of each DEFS and DATA chunk, in file order, with the file's
    limits and budgets (spec sections 9.2 and 9.3) as the reader spends them."""

    def __init__(self, rec: Recording) -> None:
        self.rec = rec
        self.records = self.events = rec.max_records
        self.raw_read = 0
        if native_available():
            from . import _format

            self.decoder: Any = _format.Decoder(1, 1)
            self.batch: Any = _format.SampleBatch()
        else:
            self.decoder, self.batch = RefDecoder(1, 1), RefBatch()

    def raw(self, info: Any) -> str | None:
        """Why a DATA chunk is not read at all (past the budget of uncompressed bytes)."""
        self.raw_read += info.raw_length
        if self.raw_read > self.rec.budgets.data_raw:
            return (f"past the file's budget of {self.rec.budgets.data_raw:,} uncompressed "
                    "bytes of DATA chunks")
        return None

    def refused(self, payload: bytes, ctype: int) -> tuple[str | None, bool]:
        """Why the reader refuses a DEFS or DATA payload, if it does, and whether that is a
        budget of the whole file (reading stops there)."""
        try:
            if ctype == C.CHUNK_DEFS:
                decoded = _decode_defs(payload, self.records)
                self.records -= sum(len(part) for part in (*decoded[:5], decoded[6]))
            else:
                self.batch.clear()
                b = self.rec.budgets
                events, _ = self.decoder.decode_data(payload, self.batch, self.events,
                                                     b.nodes, b.threads)
                self.batch.clear()
                self.events -= len(events)
        except _BudgetError as exc:
            what, budget = _over_budget(exc)
            return f"past the file's budget of {budget:,} {what}", True
        except (RefDecodeError, _DecodeError) as exc:
            return str(exc), False
        return None, False
