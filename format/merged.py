"""Several recordings read as one (spec section 11): the samples of each on one timeline, that
of the recording that began first, and the ids of each (thread refs, stack nodes, functions,
frames, strings, tasks) moved past those of the recordings before it, so that nothing of one
is taken for another's. A MergedRecording answers what readers ask of a Recording (its
definitions, its chunks' times, a stream of its samples in a window); its stream yields each
recording's batches in turn, shifted (SampleBatch.shift), and its decoder gives one stack trie.

A thread keeps the recording it came from: ``source_of(sources, ref)`` names it (its path, host,
target pid and command, and where its ids start).
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, Union

from . import _constants as C
from ._budgets import Budgets
from ._model import (
    ChunkInfo,
    Definitions,
    Frame,
    Function,
    ProcessInfo,
    TaskInfo,
    ThreadInfo,
)
from .errors import FormatError
from .reader import Recording, open_recording

__all__ = ["MergedRecording", "Readable", "Source", "open_recordings", "recordings_in",
           "source_of"]

Event = tuple[int, int, int, int, int]


def recordings_in(paths: list[str]) -> list[str]:
    """The recordings named: files, and the .psr files of folders (sorted), each once."""
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            found = sorted(os.path.join(p, n) for n in os.listdir(p) if n.endswith(".psr"))
            if not found:
                raise FormatError(f"{p}: holds no recording (.psr file)",
                                  help="name the recordings, or a folder that holds them")
            out += found
        else:
            out.append(p)
    seen: set[str] = set()
    unique = []
    for p in out:
        key = os.path.realpath(p)
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


def open_recordings(paths: list[str] | str) -> Recording | MergedRecording:
    """One recording (a file), or several read as one (several files, or a folder)."""
    given = [paths] if isinstance(paths, str) else list(paths)
    found = recordings_in(given)
    if len(found) == 1 and not os.path.isdir(given[0]):
        return open_recording(found[0])
    merged = MergedRecording(found, name=given[0] if len(given) == 1 else None)
    merged.given = given[0] if len(given) == 1 else given
    return merged


@dataclass(frozen=True)
class Source:
    """One recording of several read as one: its path, host, target, and how its times and
    ids move (its times are ts_delta ticks later; its ids past the offsets)."""

    index: int
    path: str
    host: str
    pid: int | None
    command: str
    created_wall_ns: int
    ts_delta: int
    thread_offset: int
    threads_end: int  # its threads' refs are thread_offset..threads_end - 1
    string_offset: int
    task_offset: int
    paths: tuple[str, ...] = ()  # its files (windows, snapshots of one recording)

    @property
    def name(self) -> str:
        """How a label names the recording: its file name."""
        return os.path.basename(self.path)


class MergedRecording:
    """Several recordings read as one. Use open_recordings(); close() or use as a context
    manager."""

    def __init__(self, paths: list[str], name: str | None = None) -> None:
        if not paths:
            raise FormatError("no recording given", help="name one or more .psr files")
        self.recordings: list[Recording] = []
        _allow_open(len(paths))
        try:
            for p in paths:
                self.recordings.append(open_recording(p))
        except BaseException:
            self.close()
            raise
        # What was given: a folder, or the files (open_recordings); to open them again.
        self.given: str | list[str] = name if name is not None else list(paths)
        self.path = name if name is not None else (
            f"{paths[0]} and {len(paths) - 1} more" if len(paths) > 1 else paths[0])
        recs = self.recordings
        ticks = {r.tick_ns for r in recs}
        if len(ticks) > 1:
            self.close()
            raise FormatError(
                f"{self.path}: the recordings count time in ticks of different lengths "
                f"({', '.join(f'{t} ns' for t in sorted(ticks))}), which psrec cannot merge",
                help="read them one at a time")
        # The earliest recording's clock is the merged one's.
        first = min(range(len(recs)), key=lambda i: recs[i].header.created_wall_ns)
        self.header = recs[first].header
        self._check_clocks(first)
        self.metadata: dict[str, Any] = recs[first].metadata
        self.stats = None
        self.clean = all(r.clean for r in recs)
        self._defs: Definitions | None = None
        self._own_warnings: list[str] = []
        self.budgets = Budgets.of(self.file_size)
        self.budget_stop: str | None = None
        self.sources: list[Source] = []  # one per recording (its files share it)
        self._parts: list[Source | None] = [None] * len(self.recordings)  # by file
        # Functions and frames by what they are, and each recording's frame ids -> merged.
        self._functions: dict[tuple[Any, ...], Function] = {}
        self._frames: dict[tuple[Any, ...], int] = {}
        self._frame_maps: list[dict[int, int]] = []  # by Source.index
        self._undefined: list[int] = []

    def _check_clocks(self, first: int) -> None:
        """Refuses recordings whose times cannot share one timeline: a recording created so
        long after the first that its samples would pass 2^63 ticks on it (spec section 9.2,
        rule 9; section 11, rule 2)."""
        recs = self.recordings
        base = recs[first].header.created_wall_ns
        for r in recs:
            delta = round((r.header.created_wall_ns - base) / r.tick_ns)
            # (A file not closed cleanly has its times known once read: half the range is
            # kept for them.)
            if delta + _last_ts(r) < _TIME_LIMIT and delta < _TIME_LIMIT // 2:
                continue
            gap = (r.header.created_wall_ns - base) / 1e9 / 86400 / 365.25
            self.close()
            raise FormatError(
                f"{r.path} was created {gap:,.0f} years after {recs[first].path}: their "
                "times cannot be put on one timeline",
                help="read them one at a time (a header's creation time may be damaged: "
                     "psrec info shows it)")

    # -- what a Recording answers --------------------------------------------------------
    @property
    def tick_ns(self) -> int:
        return self.header.tick_ns

    @property
    def interval_ticks(self) -> int:
        """The shortest interval of the recordings (what a count of samples is weighted by;
        each recording's own weighs its samples)."""
        return min(r.interval_ticks for r in self.recordings)

    @property
    def warnings(self) -> list[str]:
        return [w for r in self.recordings for w in r.warnings] + self._own_warnings

    def _warn(self, msg: str, always: bool = False) -> None:
        if f"{self.path}: {msg}" not in self._own_warnings:
            self._own_warnings.append(f"{self.path}: {msg}")

    @property
    def file_size(self) -> int:
        return sum(r.file_size for r in self.recordings)

    @property
    def spans(self) -> dict[tuple[int, int], tuple[int, int, int]]:
        """Each decoded DATA chunk's (first_ts, last_ts, passes) on the merged timeline, by
        (recording, chunk offset)."""
        self.definitions()
        return {(i, off): (a + s.ts_delta if a >= 0 else a, b + s.ts_delta, n)
                for i, (s, r) in enumerate(self._files())
                for off, (a, b, n) in r.spans.items()}

    def definitions(self) -> Definitions:
        """Every recording's definitions on the merged timeline: functions and frames once
        for all (the same code in two recordings is one function), threads, tasks and
        strings each recording's own, past those of the ones before. Files of one recording
        (its windows, a snapshot of it: the same header times, host and pid) share their ids,
        so their threads are the same threads."""
        if self._defs is not None:
            return self._defs
        out = Definitions()
        base_wall = self.header.created_wall_ns
        defs = [r.definitions() for r in self.recordings]
        keys = [(r.header.created_wall_ns, r.header.created_mono_ns,
                 r.metadata.get("hostname"), r.metadata.get("pid")) for r in self.recordings]
        members: dict[Any, list[int]] = {}
        for i, key in enumerate(keys):
            members.setdefault(key, []).append(i)
        ends = [0, 0, 0]  # threads, strings, tasks
        for n, files in enumerate(members.values()):
            rec = self.recordings[files[0]]
            md = rec.metadata
            thr, sid, tsk = ends
            sizes = [max(_end(getattr(defs[i], name)) for i in files)
                     for name in ("threads", "strings", "tasks")]
            source = Source(
                n, rec.path, str(md.get("hostname") or ""),
                md["pid"] if isinstance(md.get("pid"), int) else None,
                " ".join(md.get("command") or []), rec.header.created_wall_ns,
                round((rec.header.created_wall_ns - base_wall) / rec.tick_ns),
                thr, thr + sizes[0], sid, tsk, tuple(self.recordings[i].path for i in files))
            self.sources.append(source)
            self._frame_maps.append({C.TRUNCATED_FRAME: C.TRUNCATED_FRAME})
            for i in files:
                self._parts[i] = source
                self._add(out, defs[i], self.recordings[i], source)
            ends = [e + size for e, size in zip(ends, sizes)]
        out.processes.sort(key=lambda p: p.start_ts)
        self._defs = out
        return out

    def _add(self, out: Definitions, d: Definitions, rec: Recording, s: Source) -> None:
        """One file's definitions into the merged ones, its ids and times moved as its
        recording's (a file of a recording whose other files came first adds what they did
        not hold)."""
        delta = s.ts_delta
        out.strings.update((k + s.string_offset, v) for k, v in d.strings.items())
        functions: dict[int, Function] = {}
        for fid, f in d.functions.items():
            key = (f.filename, f.name, f.first_line, f.kind, f.build_id, f.address)
            got = self._functions.get(key)
            if got is None:
                got = self._functions[key] = replace(f, id=len(self._functions) + 1)
                out.functions[got.id] = got
            functions[fid] = got
        frame_map = self._frame_maps[s.index]
        for frid, fr in d.frames.items():
            if frid == C.TRUNCATED_FRAME or frid in frame_map:
                continue
            fn = functions.get(fr.function.id, fr.function)
            key2 = (fn.id, fn.name, fr.line)
            merged = self._frames.get(key2)
            if merged is None:
                merged = self._frames[key2] = len(self._frames) + 1
                out.frames[merged] = Frame(merged, fn, fr.line)
            frame_map[frid] = merged
        for ref, t in d.threads.items():
            if ref + s.thread_offset not in out.threads:
                out.threads[ref + s.thread_offset] = ThreadInfo(
                    ref + s.thread_offset, t.pid, t.python_tid, t.os_tid, t.name,
                    t.start_ts + delta, None if t.end_ts is None else t.end_ts + delta,
                    source=s.index)
        procs = d.processes
        if not procs and isinstance(rec.metadata.get("pid"), int):
            procs = [ProcessInfo(rec.metadata["pid"], 0,
                                 " ".join(rec.metadata.get("command") or []), 0)]
        known = {(p.pid, p.start_ts, p.source) for p in out.processes}
        out.processes += [ProcessInfo(p.pid, p.parent_pid, p.command, p.start_ts + delta,
                                      s.index)
                          for p in procs if (p.pid, p.start_ts + delta, s.index) not in known]
        for tid, task in d.tasks.items():
            coro = task.coroutine
            out.tasks[tid + s.task_offset] = TaskInfo(
                tid + s.task_offset, task.pid, task.address, task.name,
                None if coro is None else functions.get(coro.id, coro), task.start_ts + delta)
        out.unknown_records += d.unknown_records

    def frame_of(self, source: Source, frame_id: int) -> int:
        """The merged frame id of a recording's frame (one its definitions lack gets an id of
        its own, which names no frame)."""
        frame_map = self._frame_maps[source.index]
        merged = frame_map.get(frame_id)
        if merged is None:
            merged = frame_map[frame_id] = len(self._frames) + 1 + len(self._undefined)
            self._undefined.append(merged)
        return merged

    def _files(self) -> list[tuple[Source, Recording]]:
        """Each file with its recording's Source, in the order given."""
        self.definitions()
        return [(s, r) for s, r in zip(self._parts, self.recordings) if s is not None]

    def data_chunks(self, from_ts: int | None = None,
                    to_ts: int | None = None) -> list[ChunkInfo]:
        """Every recording's data chunks that may hold samples in [from_ts, to_ts) of the
        merged timeline, with their times on it."""
        self.definitions()
        out = []
        for s, rec in self._files():
            d = s.ts_delta
            for c in rec.data_chunks(_minus(from_ts, d), _minus(to_ts, d)):
                out.append(replace(c, first_ts=c.first_ts + d, last_ts=c.last_ts + d)
                           if c.passes else c)
        return out

    def stream(self, from_ts: int | None = None, to_ts: int | None = None,
               native: bool | None = None) -> MergedStream:
        self.definitions()
        return MergedStream(self, from_ts, to_ts, native)

    def thread_renames(self, native: bool | None = None) -> list[Event]:
        self.definitions()
        return [shift_event(e, s) for s, rec in self._files()
                for e in rec.thread_renames(native)]

    def close(self) -> None:
        for r in self.recordings:
            r.close()

    def __enter__(self) -> MergedRecording:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _allow_open(files: int) -> None:
    """Lets this process hold `files` recordings open at once (each holds its file open while
    it is read), raising its limit of open files as far as the system lets it; a clear error
    where that is not far enough."""
    import resource

    need = files + 64  # and what else the process has open
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or need <= soft:
        return
    top = need if hard == resource.RLIM_INFINITY else min(need, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (top, hard))
    except (ValueError, OSError):
        top = soft
    if top < need:
        raise FormatError(
            f"{files:,} recordings are more than this process may hold open at once "
            f"({top - 64:,}: its limit of open files)",
            help="read fewer at once (a folder per day or per host), or raise the limit: "
                 "ulimit -n")


def source_of(sources: list[Source], ref: int) -> Source | None:
    """The recording of `sources` a merged thread ref came from (None: none of them)."""
    for s in sources:
        if s.thread_offset <= ref < s.threads_end:
            return s
    return None


# What readers take: one recording, or several read as one.
Readable = Union[Recording, MergedRecording]


_TIME_LIMIT = 1 << 63  # timestamps are below 2^63 ticks (spec section 9.2, rule 9)


def _last_ts(rec: Recording) -> int:
    """The last time a recording's data chunks reach (their index's or their scanned spans),
    0 when it has none."""
    if rec.clean:
        return max((c.last_ts for c in rec.chunks if c.type == C.CHUNK_DATA), default=0)
    return max((v[1] for v in rec.spans.values()), default=0)


def _end(ids: dict[int, Any]) -> int:
    """One past the largest id (0 for none)."""
    return max(ids, default=-1) + 1


def _minus(ts: int | None, delta: int) -> int | None:
    return None if ts is None else ts - delta


def shift_event(e: Event, s: Source, node_map: Any = ()) -> Event:
    """An event of one recording as the merged recording gives it: its time on the merged
    timeline, and the ids it holds (threads, strings, tasks, stack nodes) moved as theirs."""
    etype, ts, a, b, c = e
    ts += s.ts_delta
    if etype in (C.REC_THREAD_START, C.REC_THREAD_EXIT):
        a += s.thread_offset
    elif etype == C.REC_THREAD_RENAME:
        a, b = a + s.thread_offset, b + s.string_offset
    elif etype == C.REC_PROCESS_START:
        c += s.string_offset
    elif etype == C.REC_MARKER:
        a += s.string_offset
    elif etype == C.REC_TASK_STATE:
        state, waits = b & 3, b >> 2
        a += s.task_offset
        b = state | ((waits + s.string_offset) << 2 if waits else 0)
        c = node_map[c] if c < len(node_map) else 0
    elif etype == C.REC_TASK_AWAITS:
        a, b = a + s.task_offset, (b + s.task_offset if b else 0)
    elif etype == C.REC_TASK_SNAPSHOT and c > 0:
        c += s.ts_delta  # the time of the full snapshot it builds on
    return (etype, ts, a, b, c)


class _Trie:
    """The merged stack trie: one node per distinct stack of every recording (node 0 the
    empty stack), each recording's nodes mapped to it as its decoder makes them."""

    def __init__(self) -> None:
        self.parents = array("I", [0])
        self.frames = array("I", [0])
        self._nodes: dict[tuple[int, int], int] = {}  # (parent, frame) -> node

    def extend(self, node_map: array[int], parents: Any, frames: Any, merged: MergedRecording,
               source: Source) -> None:
        """Maps a recording's nodes past those node_map holds (its decoder's trie grew)."""
        nodes = self._nodes
        for n in range(len(node_map), len(parents)):
            key = (node_map[parents[n]], merged.frame_of(source, frames[n]))
            got = nodes.get(key)
            if got is None:
                got = nodes[key] = len(self.parents)
                self.parents.append(key[0])
                self.frames.append(key[1])
            node_map.append(got)

    def trie_parents(self) -> array[int]:
        return self.parents

    def trie_frames(self) -> array[int]:
        return self.frames

    def trie_size(self) -> int:
        return len(self.parents)


class MergedStream:
    """The samples of every recording in a window of the merged timeline: each recording's
    batches in turn, moved onto it; then the events, summaries and errors of them all, and
    one stack trie (``decoder``)."""

    def __init__(self, merged: MergedRecording, from_ts: int | None, to_ts: int | None,
                 native: bool | None) -> None:
        self.rec = merged
        self.from_ts, self.to_ts, self.native = from_ts, to_ts, native
        self.events: list[Event] = []
        self.outside_renames: list[Event] = []
        self.summaries: list[dict[str, int]] = []
        self.errors = 0
        self.duplicates = 0
        self.decoder = _Trie()
        self.current: ChunkInfo | None = None

    def __iter__(self) -> Iterator[Any]:
        trie = self.decoder
        shared: dict[int, set[int]] = {}  # by recording: the chunks of samples given so far
        twice = twice_samples = 0
        for s, rec in self.rec._files():
            d = s.ts_delta
            stream = rec.stream(_minus(self.from_ts, d), _minus(self.to_ts, d), self.native)
            stream.shared_seqs = shared.setdefault(s.index, set())
            node_map = array("I", [0])
            seen = (0, 0)
            for batch in stream:
                dec = stream.decoder
                trie.extend(node_map, dec.trie_parents(), dec.trie_frames(), self.rec, s)
                batch.shift(d, s.thread_offset, node_map, s.task_offset)
                seen = self._take(stream, s, node_map, seen)
                self.current = stream.current
                yield batch
            dec = stream.decoder
            trie.extend(node_map, dec.trie_parents(), dec.trie_frames(), self.rec, s)
            self._take(stream, s, node_map, seen)
            self.errors += stream.errors
            self.duplicates += stream.duplicates
            twice += stream.given_twice
            twice_samples += stream.given_twice_samples
            self.outside_renames += [shift_event(e, s) for e in stream.outside_renames]
        if twice:
            self.rec._warn(f"{twice:,} chunk{'s' if twice != 1 else ''} of samples "
                           f"({twice_samples:,} samples) given twice, in files of one "
                           "recording (a snapshot and what it was taken from, a window and "
                           "the whole), counted once")

    def _take(self, stream: Any, s: Source, node_map: array[int],
              seen: tuple[int, int]) -> tuple[int, int]:
        """The events and chunk summaries the recording's stream added since `seen` (how
        many of each it had), on the merged timeline."""
        self.events += [shift_event(e, s, node_map) for e in stream.events[seen[0]:]]
        for summary in stream.summaries[seen[1]:]:
            moved = dict(summary)
            if moved["first_ts"] >= 0:
                moved["first_ts"] += s.ts_delta
                moved["last_ts"] += s.ts_delta
            self.summaries.append(moved)
        return len(stream.events), len(stream.summaries)
