"""`psrec export --firefox`: the Firefox Profiler's processed profile format (version 70; the
app upgrades older versions as it loads them, so a file stays readable as the format moves on).

One thread track per recorded thread, with its name, tid and pid; its samples in time order
(consecutive samples with the same stack merged into one sample weighted by their count, as
the app draws a sample until the next one); the CPU time the thread used (`threadCPUDelta`, in
ns, on the sample after the run that used it, as the app reads it), so that the app's CPU graph
and CPU totals are the kernel's; one shared stack, frame, function and source
table; Python frames in a "Python" category, and the samples of a thread off its CPU in the
"Idle" category (their innermost frame is a copy of the frame in that category), so that the
app's "Include idle samples", its CPU-category graph and its "Running" shares tell waiting
from running; and, per thread, "GIL held" interval markers (on a free-threaded target:
"attached") and, where the target says so (CPython 3.15 and later, with a GIL), "GIL wait"
markers for the spans it waited to take the GIL. Every thread starts visible, the busiest
(by CPU time) selected: the app would otherwise hide the threads it finds idle.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Any

from psrec.format import constants as C
from psrec.format.version import psrec_version

from .common import WAITS, check_waits, raise_no_waits
from .engine import timeline_of
from .model import NO_STACK, TRUNCATED_KEY, Runs
from .modes import GIL, GIL_WAIT, MODES
from .profile import Profile
from .registry import Option, Reporter, register
from .tasks import await_stacks
from .view import gil_wait_unknown, short_command
from .walks import TrieOrder

__all__ = ["FirefoxExporter", "PROCESSED_VERSION", "build"]

PROCESSED_VERSION = 70
GECKO_VERSION = 36  # the Gecko format version of the same releases (meta.version)
CATEGORIES = [
    {"name": "Other", "color": "grey", "subcategories": ["Other"]},
    {"name": "Idle", "color": "transparent", "subcategories": ["Other"]},
    {"name": "Python", "color": "yellow", "subcategories": ["Other"]},
    {"name": "Native", "color": "blue", "subcategories": ["Other"]},
]
OTHER, IDLE, PYTHON, NATIVE = 0, 1, 2, 3
MARKER_CAP = 200_000  # GIL intervals per thread; beyond it the rest are left out (and said)
WAITS_TRACK = "asyncio tasks waiting"  # --waits' track
_CPU_BITS = C.STATUS_ON_CPU | C.STATUS_CPU_UNKNOWN


@dataclass
class Tracks:
    """What the export draws, from one decode of the view's window and threads: each thread's
    samples in time order, consecutive samples with the same stack and CPU state merged into a
    run (its state: the samples' ON_CPU and CPU_UNKNOWN bits), the stacks' trie, and the runs
    of its samples holding the GIL and waiting for it (for markers; None: not drawn, and
    `wait_unknown` says why where the recording cannot know waits)."""

    runs: Mapping[int, Runs]
    parents: Any
    frames: Any
    gil: Mapping[int, Runs] | None
    wait: Mapping[int, Runs] | None
    wait_unknown: str | None


def _queries(mode: str, markers: bool) -> dict[str, dict[str, Any]]:
    """The timelines the export draws, as named query fields: the view's samples in runs split
    where their CPU state changes; with markers, the runs holding the GIL and waiting for it
    (split wherever a sample was not)."""
    m = MODES[mode]
    out: dict[str, dict[str, Any]] = {"view": {
        "status_mask": m.status_mask, "status_value": m.status_value, "cpu_view": m.weighs_cpu,
        "split_mask": _CPU_BITS}}
    if markers:
        for name, marker in (("gil", GIL), ("wait", GIL_WAIT)):
            out[name] = {"status_mask": marker.status_mask, "status_value": marker.status_value,
                         "split_at_gaps": True}
    return out


def _markers(mode: str) -> bool:
    """GIL markers go over a view that is not itself a GIL state (every sample, or those on a
    CPU), where they say what the samples do not."""
    return MODES[mode].keeps_gil_state


def tracks(p: Profile, markers: bool = True) -> Tracks:
    """The profile's Tracks: from the timelines it was loaded with (Profile.more_timelines, as
    the exporter asks for them), else read from its window and threads again, once. markers:
    also the GIL-held runs and, where the recording knows them, the GIL-wait runs."""
    wanted = _queries(p.view.mode, markers)
    done = p.more_timelines
    parents, frames = p.parents, p.frames
    if not all(name in done for name in wanted):
        sel = p.selection
        with p.open() as rec:
            stream = p.engine.stream(rec, sel.from_ts, sel.to_ts)
            timelines = {name: timeline_of(p.engine, sel, q) for name, q in wanted.items()}
            for batch in stream:
                if p.logical is not None:
                    p.logical.rewrite(batch)
                for t in timelines.values():
                    t.add(batch)
            if p.logical is None:
                parents, frames = stream.decoder.trie_parents(), stream.decoder.trie_frames()
        done = {name: t.result() for name, t in timelines.items()}
    unknown = gil_wait_unknown(p.metadata)
    return Tracks(done["view"], parents, frames, done.get("gil") if markers else None,
                  done.get("wait") if markers and unknown is None else None,
                  unknown if markers else None)


class _Strings:
    def __init__(self) -> None:
        self.array: list[str] = []
        self.index: dict[str, int] = {}

    def __call__(self, s: str) -> int:
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.array)
            self.array.append(s)
        return i


def _process_name(p: Profile, t: Any) -> str:
    proc = p.defs.process_of(t) if t is not None else None
    command: Any = proc.command if proc is not None and proc.command else \
        p.metadata.get("command") or ""
    if not isinstance(command, str):
        command = " ".join(command)
    return short_command(command) if command else "python"


def _intervals(p: Profile, by_ref: Mapping[int, Runs] | None, ref: int
               ) -> list[tuple[float, float]]:
    """A thread's spans in a state (holding the GIL, waiting for it), in ticks: the runs of
    its samples in that state (split wherever a sample was not), each from its first sample to
    about an interval after its last, joined where they touch. No more than MARKER_CAP + 1:
    the export keeps MARKER_CAP, and says it cut them when there are more."""
    if by_ref is None or ref not in by_ref:
        return []
    runs = by_ref[ref]
    out: list[tuple[float, float]] = []
    interval = p.interval_ticks
    gap = 1.5 * interval
    lo = hi = -1.0  # the span being joined (none while hi < 0)
    for first, weight, count in zip(runs.first_ts.tolist(), runs.weight.tolist(),
                                    runs.count.tolist()):
        # a run's weight is the time its samples stand for; its first sample stands for the
        # time before it, so the span ends about one interval after its last sample
        end = first + weight - weight / count + interval if count else first
        if hi >= 0 and first - hi <= gap:
            if end > hi:
                hi = end
            continue
        if hi >= 0:
            out.append((lo, hi))
            if len(out) > MARKER_CAP:
                return out
        lo, hi = first, end
    if hi >= 0:
        out.append((lo, hi))
    return out


class _Clock:
    """Times in ticks as the app's milliseconds from the profile's start."""

    def __init__(self, p: Profile) -> None:
        self.ms = p.tick_ns / 1e6  # milliseconds per tick
        self.origin = p.extent[0] if p.extent[0] >= 0 else 0
        self.ticks_per_ms = 1_000_000 // p.tick_ns if 1_000_000 % p.tick_ns == 0 else 0

    def __call__(self, times: Iterable[float]) -> list[float]:
        """Divided, where a millisecond is whole ticks, for the shortest decimal text:
        1234.567, not 1234.5670000000002."""
        if self.ticks_per_ms:
            return [(ts - self.origin) / self.ticks_per_ms for ts in times]
        return [(ts - self.origin) * self.ms for ts in times]


class _FrameTables:
    """The shared function, source and frame tables, each row made once, by psrec frame id."""

    def __init__(self, p: Profile, strings: _Strings) -> None:
        self.p, self.strings = p, strings
        self.funcs: dict[Any, int] = {}
        self.func_cols: dict[str, list[Any]] = {k: [] for k in (
            "name", "isJS", "relevantForJS", "resource", "source", "lineNumber", "columnNumber",
            "originalLocation")}
        self.sources: dict[str, int] = {}
        self.source_cols: dict[str, list[Any]] = {k: [] for k in (
            "id", "filename", "startLine", "startColumn", "sourceMapURL", "content")}
        self.frames: dict[tuple[int, bool], int] = {}
        self.frame_cols: dict[str, list[Any]] = {k: [] for k in (
            "address", "lib", "inlineDepth", "category", "subcategory", "func", "nativeSymbol",
            "innerWindowID", "line", "column", "originalLocation")}

    def source(self, filename: str) -> int:
        i = self.sources.get(filename)
        if i is None:
            i = self.sources[filename] = len(self.source_cols["id"])
            for k, v in (("id", None), ("filename", self.strings(filename)), ("startLine", 1),
                         ("startColumn", 1), ("sourceMapURL", None), ("content", None)):
                self.source_cols[k].append(v)
        return i

    def frame(self, frame_id: int, idle: bool = False) -> int:
        """A frame row; idle: the copy in the Idle category, for the innermost frame of a
        sample off its CPU (the app takes a sample's category from its innermost frame)."""
        i = self.frames.get((frame_id, idle))
        if i is not None:
            return i
        line: int | None = None
        category = IDLE if idle else PYTHON
        if frame_id < 0:  # the empty stack: code with no Python frame, running or not
            key, category = (NO_STACK.name, NO_STACK.filename, 0), IDLE if idle else OTHER
        elif frame_id == 0:
            key = (TRUNCATED_KEY.name, TRUNCATED_KEY.filename, 0)
        else:
            f = self.p.defs.frame(frame_id)
            key = (f.function.name, f.function.filename, f.function.first_line)
            line = f.line
            if f.function.kind:  # a native recording's C/C++/Rust frame: no source line
                line = None
                if not idle:
                    category = NATIVE
        fi = self.funcs.get(key)
        if fi is None:
            fi = self.funcs[key] = len(self.func_cols["name"])
            for k, v in (("name", self.strings(key[0])), ("isJS", True),
                         ("relevantForJS", False), ("resource", -1),
                         ("source", self.source(key[1])), ("lineNumber", key[2] or None),
                         ("columnNumber", None), ("originalLocation", None)):
                self.func_cols[k].append(v)
        i = self.frames[(frame_id, idle)] = len(self.frame_cols["func"])
        for k, v in (("address", -1), ("lib", -1), ("inlineDepth", 0), ("category", category),
                     ("subcategory", 0), ("func", fi), ("nativeSymbol", None),
                     ("innerWindowID", 0), ("line", line), ("column", None),
                     ("originalLocation", None)):
            self.frame_cols[k].append(v)
        return i

    def shared(self, stacks: _StackTable) -> dict[str, Any]:
        return {
            "stackTable": {"frame": stacks.frame, "prefixOffset": stacks.prefix_offset,
                           "length": len(stacks.frame)},
            "frameTable": {**self.frame_cols, "length": len(self.frame_cols["func"])},
            "funcTable": {**self.func_cols, "length": len(self.func_cols["name"])},
            "resourceTable": {"name": [], "host": [], "type": [], "length": 0},
            "nativeSymbols": {"libIndex": [], "address": [], "name": [], "functionSize": [],
                              "length": 0},
            "stringArray": self.strings.array,
            "sources": {**self.source_cols, "length": len(self.source_cols["id"])},
            "sourceLocationTable": {"source": [], "line": [], "column": [], "length": 0},
        }


class _StackTable:
    """The stack table: psrec's trie nodes that the samples use, parents first; then, for the
    samples off a CPU, a copy of their stack whose innermost frame is in the Idle category
    (numbered after the others, by -1 - k until the others are all known)."""

    def __init__(self, tr: Tracks) -> None:
        self.parents, self.trie_frames = tr.parents, tr.frames
        self.order = TrieOrder(tr.parents)
        self.idle: dict[int, int] = {}  # trie node -> k
        self.frame: list[int] = []
        self.prefix_offset: list[int] = []
        self.base = 0

    def _idle_stack(self, node: int) -> int:
        k = self.idle.get(node)
        if k is None:
            if node:
                self.order.add(self.parents[node] or 0)
            k = self.idle[node] = len(self.idle)
        return -1 - k

    def ids(self, runs: Runs) -> list[int]:
        """Each run's stack: its trie node's number, or for a run off a CPU (known) its idle
        copy's -1 - k. Each run's stack and whether it was off a CPU, as one key: the
        distinct keys (the stacks) are few, the runs many, and each is numbered once, in
        order of use."""
        assert runs.state is not None
        keys = [n << 1 | (not state & _CPU_BITS)
                for n, state in zip(runs.node.tolist(), runs.state.tolist())]
        ids = {k: self._idle_stack(k >> 1) if k & 1 else self.order.add(k >> 1)
               for k in dict.fromkeys(keys)}
        return list(map(ids.__getitem__, keys))

    def rows(self, runs: Runs) -> list[int]:
        """Each run's row in the finished table."""
        return [s if s >= 0 else self.base - 1 - s for s in self.ids(runs)]

    def finish(self, tables: _FrameTables) -> None:
        """Every stack numbered: the table's rows."""
        order, trie_frames = self.order, self.trie_frames
        self.frame = [tables.frame(trie_frames[n] if n else -1) for n in order.nodes]
        self.prefix_offset = [i - up if up >= 0 else 0 for i, up in enumerate(order.parent)]
        self.base = len(self.frame)
        for node, k in sorted(self.idle.items(), key=lambda kv: kv[1]):
            self.frame.append(tables.frame(trie_frames[node] if node else -1, idle=True))
            up = self.parents[node] if node else 0
            self.prefix_offset.append(self.base + k - order.index[up] if up else 0)


@dataclass
class _Shown:
    """What the first pass over the threads found: each shown thread's GIL and GIL-wait
    spans, and what the summary and the app's first view need."""

    threads: list[tuple[int, list[tuple[float, float]], list[tuple[float, float]]]]
    cpu_used: list[int]
    weighed: list[float]  # each track's summed sample weights
    samples: int = 0
    markers: int = 0
    waits: int = 0
    capped: list[str] | None = None


def _first_pass(p: Profile, tr: Tracks, stacks: _StackTable) -> _Shown:
    """Numbers every stack the samples use (the shared tables are written before the
    threads) and finds each thread's spans: two passes over the threads, so that a recording
    of 100,000 threads is never in memory as one document (the second makes each thread's
    track as the exporter writes it)."""
    shown = _Shown([], [], [], capped=[])
    refs = sorted(tr.runs, key=lambda r: (p.threads[r].start_ts if r in p.threads else 0, r))
    for ref in refs:
        runs = tr.runs[ref]
        if not len(runs):
            continue
        stacks.ids(runs)
        spans = _intervals(p, tr.gil, ref)
        waits = _intervals(p, tr.wait, ref)
        if len(spans) > MARKER_CAP or len(waits) > MARKER_CAP:
            assert shown.capped is not None
            shown.capped.append(p.thread_label(ref))
        shown.threads.append((ref, spans[:MARKER_CAP], waits[:MARKER_CAP]))
        shown.cpu_used.append(sum(runs.cpu))
        count = sum(runs.count)
        shown.weighed.append(count)
        shown.samples += count
        shown.markers += min(len(spans), MARKER_CAP)
        shown.waits += min(len(waits), MARKER_CAP)
    return shown


def _no_markers() -> dict[str, Any]:
    return {"data": [], "name": [], "startTime": [], "endTime": [], "phase": [],
            "category": [], "length": 0}


def _thread_track(p: Profile, tr: Tracks, stacks: _StackTable, to_ms: _Clock,
                  names: tuple[int, int], ref: int, spans: list[tuple[float, float]],
                  waits: list[tuple[float, float]]) -> dict[str, Any]:
    """One thread's track; names: the string ids of the GIL and GIL-wait markers."""
    runs = tr.runs[ref]
    cpus, firsts = runs.cpu, runs.first_ts
    counts = list(runs.count)
    t = p.threads.get(ref)
    # A sample's CPU delta is what the thread used since the sample before, which the app
    # draws over the time between them: the CPU of a run goes on the sample after it, and a
    # last sample, of weight 0, where the last run ends carries the last run's.
    last_count, last_weight = counts[-1], runs.weight[-1]
    end = firsts[-1] + (last_weight * (last_count - 1) // last_count if last_count else 0)
    stack = stacks.rows(runs)
    marked = [(names[0], a, b) for a, b in spans] + [(names[1], a, b) for a, b in waits]
    start = t.start_ts if t is not None and t.start_ts >= 0 else firsts[0]
    return {
        "processType": "default",
        "processStartupTime": 0,
        "processShutdownTime": None,
        "registerTime": max(0.0, (start - to_ms.origin) * to_ms.ms),
        "unregisterTime": None,
        "pausedRanges": [],
        "name": t.name if t is not None and t.name else f"thread ref {ref}",
        "isMainThread": bool(t is not None and t.name == "MainThread"),
        "processName": _process_name(p, t),
        "pid": str(t.pid if t is not None else p.metadata.get("pid", 0)),
        "tid": (t.os_tid or t.python_tid) if t is not None else ref,
        "samples": {
            "stack": stack + stack[-1:],
            "time": to_ms(firsts) + to_ms((end,)),
            "weight": counts + [0],
            "weightType": "samples",
            "threadCPUDelta": [0] + [c * p.tick_ns for c in cpus],
            "length": len(runs) + 1,
        },
        "markers": {
            "data": [None] * len(marked),
            "name": [name for name, _, _ in marked],
            "startTime": to_ms(a for _, a, _ in marked),
            "endTime": to_ms(b for _, _, b in marked),
            "phase": [1] * len(marked),  # an interval
            "category": [PYTHON] * len(marked),
            "length": len(marked),
        },
    }


def _waits_track(p: Profile, stacks: _StackTable, to_ms: _Clock,
                 waited: list[tuple[int, int, int]]) -> dict[str, Any]:
    """The asyncio tasks' waits: a sample at each wait's start, weighing its time in ms."""
    return {
        "processType": "default", "processStartupTime": 0, "processShutdownTime": None,
        "registerTime": 0.0, "unregisterTime": None, "pausedRanges": [],
        "name": WAITS_TRACK, "isMainThread": False, "processName": _process_name(p, None),
        "pid": str(p.metadata.get("pid", 0)), "tid": 0,
        "samples": {"stack": [stacks.order.add(node) for _, node, _ in waited],
                    "time": to_ms(a for a, _, _ in waited),
                    "weight": [n * to_ms.ms for _, _, n in waited],
                    "weightType": "tracing-ms",
                    "threadCPUDelta": [0] * len(waited),
                    "length": len(waited)},
        "markers": _no_markers(),
    }


def _meta(p: Profile, tr: Tracks, to_ms: _Clock, shown: _Shown) -> dict[str, Any]:
    md = p.metadata
    command = " ".join(md.get("command") or [])
    misc = f"Python {md.get('python_version', '?')}"
    if tr.wait_unknown is not None:
        misc += f"; no GIL wait markers: {tr.wait_unknown}"
    # The app shows at first only the threads it finds busy enough and selects its guess of
    # the main one: show every thread, and select the one that used the most CPU (the most
    # samples where no CPU time was recorded).
    ntracks = len(shown.cpu_used)
    busiest = max(range(ntracks), default=0,
                  key=lambda i: (shown.cpu_used[i], shown.weighed[i]))
    return {
        "interval": p.interval_ticks * to_ms.ms,
        "startTime": (p.created_wall_ns + to_ms.origin * p.tick_ns) / 1e6,
        "processType": 0,
        "product": f"psrec: {command}" if command else "psrec",
        "stackwalk": 0,
        "version": GECKO_VERSION,
        "preprocessedProfileVersion": PROCESSED_VERSION,
        "categories": CATEGORIES,
        "markerSchema": [],
        "sampleUnits": {"time": "ms", "eventDelay": "ms", "threadCPUDelta": "ns"},
        "symbolicated": True,
        "importedFrom": f"psrec {psrec_version()}",
        "platform": "Linux",
        "misc": misc,
        "usesOnlyOneStackType": True,
        "keepProfileThreadOrder": True,
        "initialVisibleThreads": list(range(ntracks)),
        "initialSelectedThreads": [busiest] if ntracks else [],
    }


def _summary(tr: Tracks, shown: _Shown, stacks: _StackTable, waited: list[Any],
             cut: bool) -> str:
    out = (f"{len(shown.cpu_used)} threads, {shown.samples:,} samples in "
           f"{len(stacks.frame):,} stacks, {shown.markers:,} GIL markers")
    if waited:
        out += f", {len(waited):,} waits of asyncio tasks ({WAITS_TRACK!r}" + (
            ", cut at the budget of frames of logical stacks)" if cut else ")")
    if tr.gil is not None and tr.wait is not None:
        out += f", {shown.waits:,} GIL-wait markers"
    elif tr.wait_unknown is not None:
        out += f" (no GIL-wait markers: {tr.wait_unknown})"
    if shown.capped:
        out += f" (GIL markers cut at {MARKER_CAP:,} for {', '.join(shown.capped)})"
    return out


def build(p: Profile, tr: Tracks | None = None, tasks_waiting: bool = False
          ) -> tuple[dict[str, Any], str]:
    """The processed profile of a Profile and its Tracks (read here when not given, with
    markers); tasks_waiting: one more track, the asyncio tasks' waiting time (--waits).
    Returns it with a summary. Its "threads" are an iterator that makes each thread's track
    as it is read (the exporter writes them one at a time)."""
    if tr is None:
        tr = tracks(p)
    waited: list[tuple[int, int, int]] = []
    cut = False
    if tasks_waiting:
        # Each wait at its time, on its task's logical stack down to the await: the stacks
        # are in the logical stacks' trie, whose first nodes are the recording's own.
        check_waits(p)
        logical, _, cut = await_stacks(p, times=waited)
        if not waited:
            raise_no_waits(p)
        waited.sort()
        tr = Tracks(tr.runs, logical.parents, logical.frames, tr.gil, tr.wait, tr.wait_unknown)
    strings = _Strings()
    to_ms = _Clock(p)
    tables = _FrameTables(p, strings)
    stacks = _StackTable(tr)
    shown = _first_pass(p, tr, stacks)
    if waited:
        for _, node, _ in waited:
            stacks.order.add(node)
        shown.cpu_used.append(-1)  # never the thread selected at open
        shown.weighed.append(sum(n * to_ms.ms for _, _, n in waited))
    names = (strings("attached" if p.free_threaded else "GIL held"), strings("GIL wait"))
    stacks.finish(tables)

    def thread_tracks() -> Iterator[dict[str, Any]]:
        """Each thread's track, made as it is asked for."""
        assert tr is not None
        for ref, spans, waits in shown.threads:
            yield _thread_track(p, tr, stacks, to_ms, names, ref, spans, waits)
        if waited:
            yield _waits_track(p, stacks, to_ms, waited)

    profile = {"meta": _meta(p, tr, to_ms, shown), "libs": [], "pages": [],
               "threads": thread_tracks(), "shared": tables.shared(stacks)}
    return profile, _summary(tr, shown, stacks, waited, cut)


@register
class FirefoxExporter(Reporter):
    name = "firefox"
    description = ("Firefox Profiler (processed format): a track per thread with its samples, "
                   "CPU use and GIL markers")
    command = "export"
    flag = Option(("--firefox",), help="Firefox Profiler file (default RECORDING.firefox.json): "
                                       "a track per thread with its samples, CPU use and GIL "
                                       "markers; open it at profiler.firefox.com (Load a "
                                       "profile from file).")
    reads = (WAITS,)
    groups = False
    suffix = ".firefox.json"

    def more_timelines(self, profile_mode: str) -> dict[str, dict[str, Any]]:
        return _queries(profile_mode, _markers(profile_mode))

    def write(self, profile: Profile, out: IO[Any]) -> str | None:
        doc, summary = build(profile, tracks(profile, markers=_markers(profile.view.mode)),
                             tasks_waiting=bool(self.options.get("waits")))
        # json.dumps, not json.dump: dump encodes in Python, dumps in C (2.5x faster here).
        # Thread by thread, so that one thread's text is in memory at a time.
        threads = doc.pop("threads")
        head = json.dumps(doc, separators=(",", ":"))
        out.write(head[:-1] + ',"threads":[')
        for i, t in enumerate(threads):
            out.write(("," if i else "") + json.dumps(t, separators=(",", ":")))
        out.write("]}\n")
        return summary
