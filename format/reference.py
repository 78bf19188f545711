"""A small pure-Python decoder of .psr record streams, written from spec/psr-format.md.

It is the yardstick the native decoder is tested against, and the fallback where the native
module cannot be loaded. It produces the same shapes as the native decoder.
"""

from __future__ import annotations

from array import array
from typing import Any

from . import _constants as C
from ._layout import RECORD_FIELDS, SAMPLE_COLUMNS

__all__ = ["RefBudgetError", "RefDecodeError", "decode_defs", "RefBatch", "RefDecoder"]


class RefDecodeError(ValueError):
    pass


class RefBudgetError(RefDecodeError):
    """A chunk would take the file past a budget of spec section 9.3 (the native decoder's
    BudgetError): "<what> <budget>"."""


_U32_MAX = (1 << 32) - 1
_I64_MAX = (1 << 63) - 1


class _Reader:
    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes, pos: int = 0, end: int | None = None) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def varint(self, what: str = "varint") -> int:
        result = 0
        shift = 0
        buf, pos, end = self.buf, self.pos, self.end
        while pos < end:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                if result >= 1 << 64:
                    raise RefDecodeError(f"bad {what}")
                self.pos = pos
                return result
            shift += 7
            if shift > 63:
                raise RefDecodeError(f"bad {what}")
        raise RefDecodeError(f"bad {what}")

    # Values that must fit the decoded form: wider ones only come from a damaged payload and
    # are errors, as in the native decoder.
    def u32(self, what: str = "varint") -> int:
        v = self.varint(what)
        if v > _U32_MAX:
            raise RefDecodeError(what)
        return v

    def i64(self, what: str = "varint") -> int:
        v = self.varint(what)
        if v > _I64_MAX:
            raise RefDecodeError(what)
        return v

    def byte(self, what: str = "byte") -> int:
        if self.pos >= self.end:
            raise RefDecodeError(f"bad {what}")
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def take(self, n: int, what: str) -> bytes:
        if self.end - self.pos < n:
            raise RefDecodeError(f"{what} runs past its record")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return bytes(out)

    def fields(self, rtype: int, what: str) -> tuple[int, ...]:
        """The fields of a record of type rtype, in their order (RECORD_FIELDS), each checked
        to fit what it decodes to."""
        out = []
        for f in RECORD_FIELDS[rtype]:
            if f.optional and self.at_end():
                out.append(0)
            elif f.form == "u32":
                out.append(self.u32(what))
            elif f.form == "i64":
                out.append(self.i64(what))
            elif f.form == "zigzag":
                out.append(unzigzag(self.varint(what)))
            else:
                out.append(self.varint(what))
        return tuple(out)

    def at_end(self) -> bool:
        return self.pos >= self.end

    def records(self) -> Any:
        """Yields (type, body reader) for each record of a payload."""
        while not self.at_end():
            rtype = self.byte()
            length = self.varint("record length")
            if self.end - self.pos < length:
                raise RefDecodeError("record runs past the end of its chunk")
            body = _Reader(self.buf, self.pos, self.pos + length)
            self.pos += length
            yield rtype, body


def unzigzag(v: int) -> int:
    return (v >> 1) ^ -(v & 1)


def decode_defs(
    payload: bytes, max_records: int | None = None,
) -> tuple[list[Any], list[Any], list[Any], list[Any], list[Any], int, list[Any]]:
    strings: list[Any] = []
    functions: list[Any] = []
    frames: list[Any] = []
    threads: list[Any] = []
    processes: list[Any] = []
    tasks: list[Any] = []
    unknown = 0
    records = 0
    for rtype, b in _Reader(payload).records():
        if C.REC_STRING <= rtype <= C.REC_TASK:
            records += 1
            if max_records is not None and records > max_records:
                raise RefDecodeError("more definitions than the file's size allows")
        if rtype == C.REC_STRING:
            sid, n = b.fields(rtype, "bad string id")
            strings.append((sid, b.take(n, "string").decode("utf-8", "replace")))
        elif rtype == C.REC_FUNCTION:
            functions.append(b.fields(rtype, "bad function record"))
        elif rtype == C.REC_FRAME:
            frames.append(b.fields(rtype, "bad frame record"))
        elif rtype == C.REC_THREAD:
            thread = b.fields(rtype, "bad thread record")
            if thread[0] == 0 or thread[0] > C.MAX_THREAD_REF:
                raise RefDecodeError("thread reference out of range")
            threads.append(thread)
        elif rtype == C.REC_PROCESS:
            processes.append(b.fields(rtype, "bad process record"))
        elif rtype == C.REC_TASK:
            tasks.append(b.fields(rtype, "bad task record"))
        else:
            unknown += 1
    return strings, functions, frames, threads, processes, unknown, tasks


def thread_renames(payload: bytes, max_events: int | None = None,
                   exits: bool = False) -> list[Any]:
    """The THREAD_RENAME events of a DATA payload, its passes skipped by their length (and
    its THREAD_EXIT events, with exits)."""
    out: list[Any] = []
    for rtype, b in _Reader(payload).records():
        if exits and rtype == C.REC_THREAD_EXIT:
            ref, ts = b.fields(rtype, "bad THREAD_EXIT record")
            if max_events is not None and len(out) >= max_events:
                raise RefDecodeError("more events than the file's size allows")
            out.append((rtype, ts, ref, 0, 0))
        elif rtype == C.REC_THREAD_RENAME:
            ref, ts, name = b.fields(rtype, "bad THREAD_RENAME record")
            if max_events is not None and len(out) >= max_events:
                raise RefDecodeError("more events than the file's size allows")
            out.append((rtype, ts, ref, name, 0))
    return out


class RefBatch:
    """Sample columns in time order, like the native SampleBatch: one array per column of
    SAMPLE_COLUMNS, as an attribute of its name."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        for column in SAMPLE_COLUMNS:
            setattr(self, column.name, array(column.typecode))

    def __getattr__(self, name: str) -> array[int]:  # the columns, for type checkers
        raise AttributeError(name)

    def __len__(self) -> int:
        return len(self.ts)

    def shift(self, ts_delta: int, thread_offset: int, node_map: Any,
              task_offset: int) -> None:
        """As SampleBatch.shift: the samples moved onto the timeline and ids of several
        recordings read as one (node n to node_map[n])."""
        ts, thread, node, task = self.ts, self.thread, self.node, self.task
        if any(n >= len(node_map) for n in node):
            raise IndexError("a sample's stack node is past the node map")
        ts[:] = array("q", (t + ts_delta for t in ts))
        thread[:] = array("I", (r + thread_offset for r in thread))
        node[:] = array("I", (node_map[n] for n in node))
        task[:] = array("I", (k + task_offset if k else 0 for k in task))


class _Thread:
    __slots__ = ("node", "status", "live", "cpu", "pass_no", "error", "task", "row",
                 "row_pass")

    def __init__(self) -> None:
        self.task = 0
        self.row = 0
        self.row_pass = 0
        self.node = 0
        self.status = 0
        self.live = False
        self.cpu = 0
        self.pass_no = 0
        self.error = False


class RefDecoder:
    def __init__(self, weight_cap_ticks: int, first_weight_ticks: int) -> None:
        self.weight_cap = weight_cap_ticks
        self.first_weight = first_weight_ticks
        self.parents = [0]
        self.frames = [0]
        self.depths = [0]
        self._index: dict[tuple[int, int], int] = {}
        self._seen: set[int] = set()  # refs given state, in all chunks

    @property
    def threads_seen(self) -> int:
        return len(self._seen)

    def _child(self, parent: int, frame: int) -> int:
        key = (parent, frame)
        node = self._index.get(key)
        if node is None:
            node = len(self.parents)
            self.parents.append(parent)
            self.frames.append(frame)
            self.depths.append(self.depths[parent] + 1)
            self._index[key] = node
        return node

    def trie_size(self) -> int:
        return len(self.parents)

    def trie_parents(self) -> array[int]:
        return array("I", self.parents)

    def trie_frames(self) -> array[int]:
        return array("I", self.frames)

    def decode_data(self, payload: bytes, out: RefBatch, max_events: int | None = None,
                    max_nodes: int | None = None, max_threads: int | None = None,
                    ) -> tuple[list[Any], dict[str, int]]:
        """The samples of a DATA payload, appended to out; returns its events and a
        summary."""
        chunk = _Chunk(self, out, max_events, max_nodes, max_threads)
        for rtype, b in _Reader(payload).records():
            chunk.record(rtype, b)
        chunk.summary["samples"] = len(out) - chunk.before
        return chunk.events, chunk.summary


# The records that are only events: their fields, as (type, ts, a, b, c), by type.
_EVENT_FIELDS: dict[int, Any] = {
    C.REC_THREAD_RENAME: lambda f: (f[1], f[0], f[2], 0),
    C.REC_PROCESS_START: lambda f: f,
    C.REC_PROCESS_EXIT: lambda f: (*f, 0),
    C.REC_PASS_ERRORS: lambda f: (*f, 0),
    C.REC_MARKER: lambda f: (*f, 0, 0),
}


class _Chunk:
    """The decoding of one DATA payload: its threads' state, its passes so far, the events."""

    def __init__(self, dec: RefDecoder, out: RefBatch, max_events: int | None,
                 max_nodes: int | None, max_threads: int | None) -> None:
        self.dec, self.out = dec, out
        self.max_events, self.max_nodes, self.max_threads = max_events, max_nodes, max_threads
        self.threads: dict[int, _Thread] = {}
        self.live: dict[int, None] = {}  # refs in order of first entry (a dict: O(1) removal)
        self.events: list[Any] = []
        self.summary = {
            "seq": 0, "passes": 0, "samples": 0, "errors": 0, "unknown_records": 0,
            "first_ts": -1, "last_ts": -1,
        }
        self.before = len(out)
        self.last_pass = -1
        self.base = 0
        self.begun = False
        self.pass_no = 0
        # A TASK_SNAPSHOT's TASK_STATE and TASK_AWAITS records follow it (spec section 4.3).
        self.in_snapshot, self.snap_ts, self.state_task = False, 0, 0

    def event(self, e: tuple[int, Any, Any, Any, Any]) -> None:
        if self.max_events is not None and len(self.events) >= self.max_events:
            raise RefDecodeError("more events than the file's size allows")
        self.events.append(e)

    def thread(self, ref: int) -> _Thread:
        if ref == 0 or ref > C.MAX_THREAD_REF:
            raise RefDecodeError("thread reference out of range")
        t = self.threads.get(ref)
        if t is None:
            seen = self.dec._seen
            if ref not in seen:
                seen.add(ref)
                if self.max_threads is not None and len(seen) > self.max_threads:
                    raise RefBudgetError(f"thread refs {self.max_threads}")
            t = self.threads[ref] = _Thread()
        return t

    def record(self, rtype: int, b: Any) -> None:
        if rtype not in (C.REC_TASK_STATE, C.REC_TASK_AWAITS):
            self.in_snapshot, self.state_task = False, 0
        if rtype == C.REC_BEGIN:
            self.summary["seq"], self.base, prev = b.fields(rtype, "bad BEGIN record")
            self.last_pass = prev - 1 if prev else -1
            self.begun = True
        elif rtype == C.REC_PASS:
            self.read_pass(b)
        elif rtype == C.REC_PASS_TASKS:
            self.pass_tasks(b)
        elif rtype == C.REC_TASK_SNAPSHOT:
            self.snap_ts, pid, full, since = b.fields(rtype, "bad TASK_SNAPSHOT record")
            self.event((rtype, self.snap_ts, pid, full, since))
            self.state_task = 0
            self.in_snapshot = True
        elif rtype == C.REC_TASK_STATE:
            self.task_state(b)
        elif rtype == C.REC_TASK_AWAITS:
            task, awaited = b.fields(rtype, "bad TASK_AWAITS record")
            if not self.state_task or task != self.state_task or awaited > _U32_MAX:
                raise RefDecodeError("TASK_AWAITS without its task's TASK_STATE")
            self.event((rtype, self.snap_ts, task, awaited, 0))
        elif rtype in (C.REC_THREAD_START, C.REC_THREAD_EXIT):
            ref, ts = b.fields(rtype, f"bad {C.RECORD_NAMES[rtype]} record")
            t = self.thread(ref)
            if rtype == C.REC_THREAD_EXIT and t.live:
                self.threads[ref] = _Thread()
                del self.live[ref]
            self.event((rtype, ts, ref, 0, 0))
        elif rtype in _EVENT_FIELDS:
            fields = b.fields(rtype, f"bad {C.RECORD_NAMES[rtype]} record")
            self.event((rtype, *_EVENT_FIELDS[rtype](fields)))
        else:
            self.summary["unknown_records"] += 1

    def read_pass(self, b: Any) -> None:
        if not self.begun:
            raise RefDecodeError("PASS before BEGIN")
        (delta,) = b.fields(C.REC_PASS, "bad PASS timestamp")
        ts = (self.base if self.pass_no == 0 else self.last_pass) + delta
        if ts > _I64_MAX:
            raise RefDecodeError("PASS timestamp out of range")
        self.pass_no += 1
        pass_no, dec = self.pass_no, self.dec
        if pass_no > C.MAX_CHUNK_PASSES:
            raise RefDecodeError(f"more than MAX_CHUNK_PASSES ({C.MAX_CHUNK_PASSES}) "
                                 "passes in one chunk")
        while not b.at_end():
            head = b.varint()
            ref = head >> C.ENTRY_FLAG_BITS
            flags = head & ((1 << C.ENTRY_FLAG_BITS) - 1)
            t = self.thread(ref)
            if not t.live:
                t.live = True
                self.live[ref] = None
            t.pass_no = pass_no
            t.error = flags == 0
            if flags & C.ENTRY_STACK:
                pop = b.varint()
                push = b.varint()
                depth = dec.depths[t.node]
                if pop > depth:
                    raise RefDecodeError("stack delta pops more frames than the stack has")
                if depth - pop + push > C.MAX_DEPTH:
                    raise RefDecodeError(f"stack deeper than MAX_DEPTH ({C.MAX_DEPTH}) frames")
                node = t.node
                for _ in range(pop):
                    node = dec.parents[node]
                for _ in range(push):
                    node = dec._child(node, b.u32("bad frame id"))
                if self.max_nodes is not None and len(dec.parents) > self.max_nodes:
                    raise RefBudgetError(f"stack-trie nodes {self.max_nodes}")
                t.node = node
            if flags & C.ENTRY_STATUS:
                t.status = b.byte("status byte")
            # CPU time beyond the column's range saturates, as in the native decoder.
            t.cpu = min(b.varint(), _U32_MAX) if flags & C.ENTRY_CPU else 0
        self.samples(ts)

    def samples(self, ts: int) -> None:
        """A sample of each live thread at the pass just read (but those it read in error)."""
        out, pass_no, summary = self.out, self.pass_no, self.summary
        if self.last_pass < 0:
            w = self.dec.first_weight
        else:
            w = min(max(ts - self.last_pass, 0), self.dec.weight_cap)
        for ref in self.live:
            t = self.threads[ref]
            if t.pass_no == pass_no and t.error:
                summary["errors"] += 1
                continue
            if len(out) - self.before >= C.MAX_CHUNK_SAMPLES:
                raise RefDecodeError(f"more than MAX_CHUNK_SAMPLES ({C.MAX_CHUNK_SAMPLES}) "
                                     "thread-samples in one chunk")
            t.row, t.row_pass = len(out), pass_no
            out.task.append(t.task)
            out.ts.append(ts)
            out.thread.append(ref)
            out.node.append(t.node)
            out.status.append(t.status)
            out.cpu.append(t.cpu if t.pass_no == pass_no else 0)
            out.weight.append(w)
        if summary["first_ts"] < 0:
            summary["first_ts"] = ts
        summary["last_ts"] = ts
        self.last_pass = ts
        summary["passes"] += 1

    def pass_tasks(self, b: Any) -> None:
        """The running tasks of the pass just read: each thread's from now on, and the row
        that pass gave it."""
        if self.pass_no == 0:
            raise RefDecodeError("PASS_TASKS before any PASS")
        while not b.at_end():
            ref = b.varint()
            task = b.u32("bad PASS_TASKS entry")
            if ref == 0 or ref > C.MAX_THREAD_REF:
                raise RefDecodeError("thread reference out of range")
            named = self.threads.get(ref)
            if named is None or not named.live:
                raise RefDecodeError("PASS_TASKS names a thread that is not live")
            named.task = task
            if named.row_pass == self.pass_no:
                self.out.task[named.row] = task

    def task_state(self, b: Any) -> None:
        if not self.in_snapshot:
            raise RefDecodeError("TASK_STATE without its TASK_SNAPSHOT")
        task, state, waits, depth = b.fields(C.REC_TASK_STATE, "bad TASK_STATE record")
        if task > _U32_MAX or waits > _U32_MAX:
            raise RefDecodeError("bad TASK_STATE record")
        if state > C.TASK_RUNNING:
            raise RefDecodeError("TASK_STATE state out of range")
        if depth > C.MAX_DEPTH:
            raise RefDecodeError(f"task stack deeper than MAX_DEPTH ({C.MAX_DEPTH}) frames")
        node = 0
        for _ in range(depth):
            node = self.dec._child(node, b.u32("bad frame id"))
        if self.max_nodes is not None and len(self.dec.parents) > self.max_nodes:
            raise RefBudgetError(f"stack-trie nodes {self.max_nodes}")
        # The state and what it waits on share a field: state | waits << 2.
        self.event((C.REC_TASK_STATE, self.snap_ts, task, state | waits << 2, node))
        self.state_task = task
