"""`psrec export --firefox`: the Firefox Profiler's processed profile format (version 70; the
app upgrades older versions as it loads them, so a file stays readable as the format moves on).

One thread track per recorded thread, with its name, tid and pid; its samples in time order
(consecutive samples with the same stack merged into one sample weighted by their count, as
the app draws a sample until the next one); the CPU time the thread used (`threadCPUDelta`, in
ns, on the sample after the run that used it, as the app reads it), so that the app's CPU graph
and CPU totals are the kernel's; one shared stack, frame, function and source
table; Python frames in a "Python" category, the empty stack as "Idle"; and, per thread,
"GIL held" interval markers (on a free-threaded target: "attached").
"""

from __future__ import annotations

import json
from typing import IO, Any

from psrec import __version__

from .profile import NO_STACK, TRUNCATED_KEY, Profile, SelectionError, View
from .registry import Reporter, register
from .view import short_command
from .walks import TrieOrder

__all__ = ["FirefoxExporter", "PROCESSED_VERSION", "build"]

PROCESSED_VERSION = 70
GECKO_VERSION = 36  # the Gecko format version of the same releases (meta.version)
CATEGORIES = [
    {"name": "Other", "color": "grey", "subcategories": ["Other"]},
    {"name": "Idle", "color": "transparent", "subcategories": ["Other"]},
    {"name": "Python", "color": "yellow", "subcategories": ["Other"]},
]
IDLE, PYTHON = 1, 2
MARKER_CAP = 200_000  # GIL intervals per thread; beyond it the rest are left out (and said)


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


def _gil_intervals(p: Profile, gil: Profile | None, ref: int) -> list[tuple[float, float]]:
    """A thread's spans holding the GIL, in ticks: the runs of its GIL-held samples (split
    wherever a sample did not hold it), each from its first sample to about an interval after
    its last, joined where they touch."""
    if gil is None or gil.timelines is None or ref not in gil.timelines:
        return []
    runs = gil.timelines[ref]
    out: list[list[float]] = []
    gap = 1.5 * p.interval_ticks
    for first, weight, count in zip(runs.first_ts, runs.weight, runs.count):
        # a run's weight is the time its samples stand for; its first sample stands for the
        # time before it, so the span ends about one interval after its last sample
        start = first
        end = first + max(weight - weight / count, 0) + p.interval_ticks if count else first
        if out and start - out[-1][1] <= gap:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(a, b) for a, b in out]


def build(p: Profile, gil: Profile | None = None) -> tuple[dict[str, Any], str]:
    """The processed profile of a Profile loaded with timelines (and of its GIL view's, for
    the markers); returns it with a summary."""
    assert p.timelines is not None
    strings = _Strings()
    ms = p.tick_ns / 1e6  # milliseconds per tick
    origin = p.extent[0] if p.extent[0] >= 0 else 0
    # functions, sources and frames, by psrec frame id
    funcs: dict[Any, int] = {}
    func_cols: dict[str, list[Any]] = {k: [] for k in (
        "name", "isJS", "relevantForJS", "resource", "source", "lineNumber", "columnNumber",
        "originalLocation")}
    sources: dict[str, int] = {}
    source_cols: dict[str, list[Any]] = {k: [] for k in (
        "id", "filename", "startLine", "startColumn", "sourceMapURL", "content")}
    frames: dict[int, int] = {}
    frame_cols: dict[str, list[Any]] = {k: [] for k in (
        "address", "lib", "inlineDepth", "category", "subcategory", "func", "nativeSymbol",
        "innerWindowID", "line", "column", "originalLocation")}

    def source(filename: str) -> int:
        i = sources.get(filename)
        if i is None:
            i = sources[filename] = len(source_cols["id"])
            for k, v in (("id", None), ("filename", strings(filename)), ("startLine", 1),
                         ("startColumn", 1), ("sourceMapURL", None), ("content", None)):
                source_cols[k].append(v)
        return i

    def frame(frame_id: int) -> int:
        i = frames.get(frame_id)
        if i is not None:
            return i
        line: int | None = None
        if frame_id < 0:  # the empty stack
            key, category = (NO_STACK.name, NO_STACK.filename, 0), IDLE
        elif frame_id == 0:
            key, category = (TRUNCATED_KEY.name, TRUNCATED_KEY.filename, 0), PYTHON
        else:
            f = p.defs.frame(frame_id)
            key = (f.function.name, f.function.filename, f.function.first_line)
            line, category = f.line, PYTHON
        fi = funcs.get(key)
        if fi is None:
            fi = funcs[key] = len(func_cols["name"])
            for k, v in (("name", strings(key[0])), ("isJS", True), ("relevantForJS", False),
                         ("resource", -1), ("source", source(key[1])),
                         ("lineNumber", key[2] or None), ("columnNumber", None),
                         ("originalLocation", None)):
                func_cols[k].append(v)
        i = frames[frame_id] = len(frame_cols["func"])
        for k, v in (("address", -1), ("lib", -1), ("inlineDepth", 0), ("category", category),
                     ("subcategory", 0), ("func", fi), ("nativeSymbol", None),
                     ("innerWindowID", 0), ("line", line), ("column", None),
                     ("originalLocation", None)):
            frame_cols[k].append(v)
        return i

    # the stack table: psrec's trie nodes that the samples use, parents first
    order = TrieOrder(p.parents)
    gil_name = strings("attached" if p.free_threaded else "GIL held")
    threads: list[dict[str, Any]] = []
    nsamples = nmarkers = 0
    capped = []
    refs = sorted(p.timelines, key=lambda r: (p.threads[r].start_ts if r in p.threads else 0, r))
    for ref in refs:
        runs = p.timelines[ref]
        if not len(runs):
            continue
        t = p.threads.get(ref)
        # A sample's CPU delta is what the thread used since the sample before, which the
        # app draws over the time between them: the CPU of a run goes on the sample after it,
        # and a last sample, of weight 0, where the last run ends carries the last run's.
        last_count, last_weight = runs.count[len(runs) - 1], runs.weight[len(runs) - 1]
        end = runs.first_ts[len(runs) - 1] + (last_weight * (last_count - 1) // last_count
                                               if last_count else 0)
        stack_ids = [order.add(n) for n in runs.node]
        samples = {
            "stack": stack_ids + stack_ids[-1:],
            "time": [(ts - origin) * ms for ts in runs.first_ts] + [(end - origin) * ms],
            "weight": list(runs.count) + [0],
            "weightType": "samples",
            "threadCPUDelta": [0] + [c * p.tick_ns for c in runs.cpu],
            "length": len(runs) + 1,
        }
        spans = _gil_intervals(p, gil, ref)
        if len(spans) > MARKER_CAP:
            capped.append(p.thread_label(ref))
            spans = spans[:MARKER_CAP]
        markers = {
            "data": [None] * len(spans),
            "name": [gil_name] * len(spans),
            "startTime": [(a - origin) * ms for a, _ in spans],
            "endTime": [(b - origin) * ms for _, b in spans],
            "phase": [1] * len(spans),  # an interval
            "category": [PYTHON] * len(spans),
            "length": len(spans),
        }
        start = t.start_ts if t is not None and t.start_ts >= 0 else runs.first_ts[0]
        threads.append({
            "processType": "default",
            "processStartupTime": 0,
            "processShutdownTime": None,
            "registerTime": max(0.0, (start - origin) * ms),
            "unregisterTime": None,
            "pausedRanges": [],
            "name": t.name if t is not None and t.name else f"thread ref {ref}",
            "isMainThread": bool(t is not None and t.name == "MainThread"),
            "processName": _process_name(p, t),
            "pid": str(t.pid if t is not None else p.metadata.get("pid", 0)),
            "tid": (t.os_tid or t.python_tid) if t is not None else ref,
            "samples": samples,
            "markers": markers,
        })
        nsamples += sum(runs.count)
        nmarkers += len(spans)
    stack_frame = [frame(p.frames[n] if n else -1) for n in order.nodes]
    stack_prefix_offset = [i - up if up >= 0 else 0 for i, up in enumerate(order.parent)]
    md = p.metadata
    command = " ".join(md.get("command") or [])
    profile = {
        "meta": {
            "interval": p.interval_ticks * ms,
            "startTime": (p.created_wall_ns + origin * p.tick_ns) / 1e6,
            "processType": 0,
            "product": f"psrec: {command}" if command else "psrec",
            "stackwalk": 0,
            "version": GECKO_VERSION,
            "preprocessedProfileVersion": PROCESSED_VERSION,
            "categories": CATEGORIES,
            "markerSchema": [],
            "sampleUnits": {"time": "ms", "eventDelay": "ms", "threadCPUDelta": "ns"},
            "symbolicated": True,
            "importedFrom": f"psrec {__version__}",
            "platform": "Linux",
            "misc": f"Python {md.get('python_version', '?')}",
            "usesOnlyOneStackType": True,
            "keepProfileThreadOrder": True,
        },
        "libs": [],
        "pages": [],
        "threads": threads,
        "shared": {
            "stackTable": {"frame": stack_frame, "prefixOffset": stack_prefix_offset,
                           "length": len(stack_frame)},
            "frameTable": {**frame_cols, "length": len(frame_cols["func"])},
            "funcTable": {**func_cols, "length": len(func_cols["name"])},
            "resourceTable": {"name": [], "host": [], "type": [], "length": 0},
            "nativeSymbols": {"libIndex": [], "address": [], "name": [], "functionSize": [],
                              "length": 0},
            "stringArray": strings.array,
            "sources": {**source_cols, "length": len(source_cols["id"])},
            "sourceLocationTable": {"source": [], "line": [], "column": [], "length": 0},
        },
    }
    summary = (f"{len(threads)} threads, {nsamples:,} samples in {len(stack_frame):,} stacks, "
               f"{nmarkers:,} GIL markers")
    if capped:
        summary += f" (GIL markers cut at {MARKER_CAP:,} for {', '.join(capped)})"
    return profile, summary


@register
class FirefoxExporter(Reporter):
    name = "firefox"
    description = ("Firefox Profiler (processed format): a track per thread with its samples, "
                   "CPU use and GIL markers")
    command = "export"
    suffix = ".firefox.json"
    needs_timelines = True

    def write(self, profile: Profile, out: IO[Any]) -> str | None:
        gil = None
        if profile.view.mode in ("wall", "cpu"):
            try:
                gil = Profile.load(profile.path, View(
                    mode="gil", threads=profile.view.threads, pids=profile.view.pids,
                    processes=profile.view.processes, start=profile.view.start,
                    end=profile.view.end), timelines="split")
            except SelectionError:  # no sample in the view held the GIL: no markers
                gil = None
        doc, summary = build(profile, gil)
        # json.dumps, not json.dump: dump encodes in Python, dumps in C (2.5x faster here).
        # Thread by thread, so that one thread's text is in memory at a time.
        threads = doc.pop("threads")
        head = json.dumps(doc, separators=(",", ":"))
        out.write(head[:-1] + ',"threads":[')
        for i, t in enumerate(threads):
            out.write(("," if i else "") + json.dumps(t, separators=(",", ":")))
        out.write("]}\n")
        return summary
