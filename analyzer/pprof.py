"""`psrec export --pprof`: gzipped pprof profiles (profile.proto) for go tool pprof, Pyroscope,
Parca and Grafana.

One pprof sample per (thread, stack, GIL state, CPU state) with three values: samples/count,
wall/nanoseconds (each sample's time weight) and cpu/nanoseconds (the CPU time the thread used
between samples, placed by spec section 5's one rule, as every output places it); labels name
the thread (`thread`, `thread_id`, and `pid` where the recording has several processes), `gil`
(held, released, waiting to take it where the recording knows it; attached, detached on a
free-threaded target; unknown), `cpu` (on, off, unknown) and, with --logical, `task` (the
asyncio task whose frames the stack ends in). Locations are lines in one mapping,
the target's interpreter; functions are Python functions (name, file, first line). The view's
threads and window select the samples; its mode picks the sample type a viewer shows first
(wall or cpu): the GIL, idle and GIL-wait views are label filters (`-tagfocus gil=held`,
`-tagfocus cpu=off`, `-tagfocus gil=waiting`).

With --window, one profile per window of that length (what a continuous-profiling backend
ingests), each with its own time_nanos and duration_nanos.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from typing import IO, Any

from psrec.format import PsrecError
from psrec.format import constants as C
from psrec.format.writer import Output, is_stream, write_failed

from .common import WAITS, check_waits, raise_no_waits
from .modes import WALL
from .profile import Profile
from .registry import Length, Option, Reporter, default_output, register
from .tasks import WaitSpan, await_stacks, wait_spans
from .view import ViewUsageError

__all__ = ["PprofExporter", "build", "write_windows"]

# The status filters of analyzer.view.STATES whose sums make the labels: (GIL held, on a CPU)
# pairs, and of the samples without the GIL, those waiting to take it. Samples whose GIL or CPU
# state is unknown are in none: they are what the wall view holds beyond them.
COMBOS = {(True, True): "gil+cpu", (True, False): "gil+off", (False, True): "nogil+cpu",
          (False, False): "nogil+off"}
WAITING = {True: "wait+cpu", False: "wait+off"}  # by on a CPU
SUFFIX = ".pb.gz"


def _pb() -> Any:
    try:
        from .proto import profile_pb2
    except ImportError as exc:  # protobuf missing, or older than the generated code needs
        raise PsrecError(f"pprof export needs the protobuf package ({exc})",
                         help="pip install 'protobuf>=7.35' (Python 3.10 or later)") from None
    return profile_pb2


class _Strings:
    def __init__(self) -> None:
        self.table = [""]
        self.index = {"": 0}

    def __call__(self, s: str) -> int:
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.table)
            self.table.append(s)
        return i


INT64 = (-(1 << 63), (1 << 63) - 1)


def _int64(n: int) -> int:
    """n saturated to profile.proto's int64 fields: a file's times and counts can add up
    past them (created 2^63 - 1 ns after the epoch, samples 2^62 ticks apart)."""
    return max(INT64[0], min(INT64[1], n))


# A group_sums factor that puts every slice in one.
_ALL_SLICES = (1 << 64) - 1


def _cells(p: Profile, sl: int | None) -> Iterator[tuple[int, int, str, str, int, int, int]]:
    """(thread, node, gil label, cpu label, samples, weight ticks, cpu ticks), over one slice
    (or all): each state's sums, and what no state took (its GIL or CPU state unknown). Each
    filter keeps CPU time where it keeps the sample the time goes to (spec section 5), so a
    state's sums are within the wall view's, and the waiting ones within those without the
    GIL. The filters' cells are summed together by (slice, thread, node) in one pass of the
    engine, into columns of integers (a dict of lists per filter took several hundred bytes
    a cell: a recording of many threads has many cells)."""
    ft = p.free_threaded
    names = [WALL.name, *COMBOS.values(), *(() if ft else WAITING.values())]
    sources = []
    for name in names:
        c = p.columns if name == WALL.name == p.view.mode else p.also[name]
        sources += [(c.slice, c.thread, c.node, v) for v in (c.samples, c.weight, c.cpu)]
    g_slice, g_thread, g_node, sums = p.engine.group_sums(
        sources, _ALL_SLICES if sl is None else 1)
    width = len(sources)
    at = {name: 3 * i for i, name in enumerate(names)}
    # per state: its labels, where its sums are in a row, and those of its waiting samples
    plan = [(("attached" if gil else "detached") if ft else ("held" if gil else "released"),
             "on" if cpu else "off", at[name],
             at[WAITING[cpu]] if not gil and not ft else 0)
            for (gil, cpu), name in COMBOS.items()]
    for row, (s, th, node) in enumerate(zip(g_slice, g_thread, g_node)):
        if sl is not None and s != sl:
            continue
        v = sums[row * width:(row + 1) * width].tolist()
        r0, r1, r2 = v[0], v[1], v[2]
        for label, cpu_label, i, w in plan:
            c0, c1, c2 = v[i], v[i + 1], v[i + 2]
            r0, r1, r2 = r0 - c0, r1 - c1, r2 - c2
            if w:
                w0, w1, w2 = v[w], v[w + 1], v[w + 2]
                c0, c1, c2 = c0 - w0, c1 - w1, c2 - w2
                if w0 or w1 or w2:
                    yield th, node, "waiting", cpu_label, w0, w1, w2
            if c0 or c1 or c2:
                yield th, node, label, cpu_label, c0, c1, c2
        if r0 or r1 or r2:
            yield th, node, "unknown", "unknown", r0, r1, r2


def _interpreter(p: Profile) -> str:
    """The target's Python executable as the recording names it (the command's program for
    files that do not say), or "python"."""
    build = p.metadata.get("python_build")
    exe = build.get("executable") if isinstance(build, dict) else None
    if isinstance(exe, str) and exe:
        return exe
    command = p.metadata.get("command")
    if isinstance(command, list) and command and isinstance(command[0], str) and command[0]:
        return command[0]
    return "python"


class _Locations:
    """The profile's functions, locations and mappings, each added once, by psrec frame id."""

    def __init__(self, p: Profile, prof: Any, strings: _Strings) -> None:
        self.p, self.prof, self.strings = p, prof, strings
        self.functions: dict[Any, int] = {}
        self.locations: dict[int, int] = {}  # frame id -> location id
        self.mappings: dict[str, int] = {}
        self.empty_loc = 0
        # One mapping, the interpreter that ran the code: pprof names its main binary after
        # it ("File: python3.12"), and every location is in it. Its functions are known
        # (symbolized).
        prof.mapping.add(id=1, filename=strings(_interpreter(p)), has_functions=True,
                         has_filenames=True, has_line_numbers=True)

    def mapping(self, fn: Any) -> int:
        """A native recording's binaries: a mapping each, with its build id, so that pprof
        tools can symbolize its locations too. Their addresses are the binaries' link-time
        ones (memory_start 0, file_offset 0), already symbolized."""
        mid = self.mappings.get(fn.filename)
        if mid is None:
            mid = self.mappings[fn.filename] = len(self.mappings) + 2
            self.prof.mapping.add(id=mid, filename=self.strings(fn.filename),
                                  build_id=self.strings(fn.build_id), memory_start=0,
                                  memory_limit=(1 << 63) - 1, has_functions=True)
        return mid

    def __call__(self, frame_id: int) -> int:
        """The location of a frame."""
        loc = self.locations.get(frame_id)
        if loc is not None:
            return loc
        native = None
        if frame_id == C.TRUNCATED_FRAME:
            key: Any = ("[truncated stack]", "<psrec>", 0)
            line = 0
        else:
            f = self.p.defs.frame(frame_id)
            key = (f.function.name, f.function.filename, f.function.first_line)
            line = f.line
            if f.function.kind:  # native: its line is the pc's offset in the function
                native = f.function
                line = 0
        fid = self.functions.get(key)
        if fid is None:
            fid = self.functions[key] = len(self.functions) + 1
            # A system name only for a native function whose symbol was demangled (its
            # symbol): pprof shows a Python system name's angle-bracketed names (<module>,
            # <lambda>) as <unknown>.
            symbol = native.symbol if native is not None else ""
            self.prof.function.add(id=fid, name=self.strings(key[0]),
                                   filename=self.strings(key[1]), start_line=key[2],
                                   **({"system_name": self.strings(symbol)} if symbol else {}))
        loc = self.locations[frame_id] = len(self.locations) + 1
        if native is not None:
            address = _int64(native.address + max(0, f.line))
            self.prof.location.add(id=loc, mapping_id=self.mapping(native),
                                   address=address).line.add(function_id=fid)
        else:
            self.prof.location.add(id=loc, mapping_id=1).line.add(function_id=fid, line=line)
        return loc

    def empty(self) -> int:
        """The location of samples with no Python stack."""
        if not self.empty_loc:
            fid = len(self.functions) + 1
            self.functions[("[no Python stack]", "<psrec>", 0)] = fid
            self.prof.function.add(id=fid, name=self.strings("[no Python stack]"),
                                   filename=self.strings("<psrec>"))
            self.empty_loc = len(self.locations) + 1
            self.locations[-1] = self.empty_loc
            self.prof.location.add(id=self.empty_loc, mapping_id=1).line.add(function_id=fid)
        return self.empty_loc


_LABELS = ("thread", "thread_id", "pid", "gil", "cpu", "task", "task_state")


def _add_samples(p: Profile, prof: Any, strings: _Strings, location: _Locations,
                 keys: dict[str, int], sl: int | None) -> None:
    """A sample per cell of the profile (or of slice sl), labelled with its thread, GIL and
    CPU state, and with --logical its task."""
    many_pids = len({t.pid for t in p.threads.values()}) > 1
    ns = p.tick_ns
    logical = p.logical  # --logical: each stack ends in its task's frames
    # Each stack's locations, innermost first, made once: many threads share few stacks.
    stack_locations: dict[int, list[int]] = {}
    for th, node, gil, cpu, n, w, c in _cells(p, sl):
        sample = prof.sample.add()
        if node:
            locs = stack_locations.get(node)
            if locs is None:
                locs = stack_locations[node] = [location(f)
                                                for f in reversed(p.names.stack(node))]
            sample.location_id.extend(locs)
        else:
            sample.location_id.append(location.empty())
        sample.value.extend((_int64(n), _int64(w * ns), _int64(c * ns)))
        t = p.threads.get(th)
        sample.label.add(key=keys["thread"], str=strings(t.name if t and t.name else "thread"))
        if t is not None:
            sample.label.add(key=keys["thread_id"], num=_int64(t.os_tid or t.python_tid))
            if many_pids:
                sample.label.add(key=keys["pid"], num=_int64(t.pid))
        sample.label.add(key=keys["gil"], str=strings(gil))
        sample.label.add(key=keys["cpu"], str=strings(cpu))
        task = logical.task_of(p.names.stack(node)) if logical is not None and node else 0
        if task:
            info = p.defs.tasks.get(task)
            sample.label.add(key=keys["task"],
                             str=strings(info.label if info else f"task {task}"))


def _add_waits(p: Profile, prof: Any, strings: _Strings, location: _Locations,
               keys: dict[str, int], span: tuple[int, int] | None,
               waits: list[WaitSpan]) -> None:
    """The tasks' waiting time (in span, ticks, where given): samples of wall time only, on
    each task's logical stack down to its await, labelled with the task and its state
    (suspended or ready)."""
    stacks, ticks, _ = await_stacks(p, None if span is None else span[0],
                                    None if span is None else span[1], spans=waits)
    for node, n in sorted(ticks.items()):
        path = [f for f in stacks.path(node) if not p.names.hidden(f)]
        sample = prof.sample.add()
        sample.location_id.extend(location(f) for f in reversed(path))
        sample.value.extend((0, _int64(n * p.tick_ns), 0))
        task = stacks.task_of(tuple(path))
        info = p.defs.tasks.get(task)
        sample.label.add(key=keys["task"], str=strings(info.label if info else f"task {task}"))
        leaf = p.defs.frame(path[-1]).function.name if path else ""
        sample.label.add(key=keys["task_state"],
                         str=strings("ready" if leaf == "ready" else "suspended"))


def build(p: Profile, sl: int | None = None, waits: list[WaitSpan] | None = None) -> Any:
    """The pprof Profile message of a profile (or of one of its slices); waits: with the
    asyncio tasks' waiting time too (--waits: tasks.wait_spans, read once for every slice)."""
    pb = _pb()
    prof = pb.Profile()
    strings = _Strings()
    for kind, unit in (("samples", "count"), ("wall", "nanoseconds"), ("cpu", "nanoseconds")):
        prof.sample_type.add(type=strings(kind), unit=strings(unit))
    prof.default_sample_type = strings("cpu" if p.view.mode_record.weighs_cpu else "wall")
    prof.period_type.type = strings("wall")
    prof.period_type.unit = strings("nanoseconds")
    prof.period = _int64(p.interval_ticks * p.tick_ns)
    location = _Locations(p, prof, strings)
    keys = {k: strings(k) for k in _LABELS}
    _add_samples(p, prof, strings, location, keys, sl)
    if sl is None:
        lo, hi = p.first_ts, p.last_ts + p.interval_ticks
    else:
        lo, hi = sl * p.slice_ticks, (sl + 1) * p.slice_ticks
    if waits is not None:
        _add_waits(p, prof, strings, location, keys, None if sl is None else (lo, hi), waits)
    prof.time_nanos = _int64(p.created_wall_ns + lo * p.tick_ns)
    prof.duration_nanos = _int64(max(0, hi - lo) * p.tick_ns)
    prof.comment.append(strings(f"psrec {p.path}: {p.describe()}"))
    prof.string_table.extend(strings.table)
    return prof


def _check_mode(p: Profile) -> None:
    if not p.view.mode_record.keeps_gil_state:
        raise ViewUsageError(
            f"--mode {p.view.mode}: a pprof profile holds every sample, labelled by its GIL "
            "and CPU state", help="export with --mode wall or cpu, and filter in pprof, e.g. "
            "go tool pprof -tagfocus gil=held")


@register
class PprofExporter(Reporter):
    name = "pprof"
    description = ("gzipped pprof profile (go tool pprof, Pyroscope, Parca, Grafana): "
                   "samples, wall and CPU time, with thread, GIL and CPU labels")
    command = "export"
    flag = Option(("--pprof",), help="Gzipped pprof profile (default RECORDING.pb.gz) for go "
                                     "tool pprof, Pyroscope, Parca, Grafana: samples, wall and "
                                     "CPU time, labelled by thread, GIL and CPU state.")
    # --window writes one profile per window (write_windows), each to a file of its own.
    reads = (Option(("--window",), metavar="DURATION",
                    length=Length(("10s",), "a single profile", in_ns=True),
                    refusal=("--window is for pprof profiles", "add --pprof"),
                    help="pprof: one profile per window of this length (e.g. 10s), written "
                         "as BASE.0.pb.gz, BASE.1.pb.gz, ..."), WAITS)
    groups = False
    suffix = SUFFIX
    binary = True

    def also(self, profile_mode: str) -> tuple[str, ...]:
        return ((WALL.name,) * (profile_mode != WALL.name) + tuple(COMBOS.values())
                + tuple(WAITING.values()))

    def slice_seconds(self) -> float:
        return float(self.options.get("window") or 0.0)

    def write(self, profile: Profile, out: IO[Any]) -> str | None:
        _check_mode(profile)
        waits, said = _waits(profile, self.options)
        data = build(profile, waits=waits).SerializeToString()
        out.write(gzip.compress(data, mtime=0))
        return f"{len(data):,} bytes before gzip{said}"


def _waits(p: Profile, options: dict[str, Any]) -> tuple[list[WaitSpan] | None, str]:
    """--waits, checked (the view is wall time, and some task waited): the tasks' waits, and
    what the summary says of them (None: not asked for)."""
    if not options.get("waits"):
        return None, ""
    check_waits(p)
    spans = wait_spans(p)
    _, ticks, cut = await_stacks(p, spans=spans)
    if not ticks:
        raise_no_waits(p)
    return spans, " (the tasks' waits cut at the budget of frames of logical stacks)" * cut


def write_windows(p: Profile, output: str | None, force: bool,
                  options: dict[str, Any] | None = None) -> list[str]:
    """One profile per slice of the profile (every window with samples): BASE.N.pb.gz, BASE
    from -o (its .pb.gz left off) or the recording's name; options: the exporter's (--waits).
    Returns the files written."""
    _check_mode(p)
    waits = _waits(p, options or {})[0]
    if output is not None and is_stream(output):
        raise ViewUsageError(f"--window writes one file per window; -o {output} names a stream",
                             help="give -o a base name: -o run writes run.0.pb.gz, run.1.pb.gz, "
                                  "...")
    base = output if output is not None else default_output(p.output_base, SUFFIX)
    base = base[: -len(SUFFIX)] if base.endswith(SUFFIX) else base
    slices = sorted(set((p.columns if p.view.mode == WALL.name else p.also[WALL.name]).slice))
    first = slices[0] if slices else 0
    written = []
    for sl in slices:
        name = f"{base}.{sl - first}{SUFFIX}"
        if p.reads(name):
            raise PsrecError(f"{name} is the recording itself", help="choose another -o")
        out = Output(name, force)
        try:
            out.file.write(gzip.compress(build(p, sl, waits).SerializeToString(), mtime=0))
            out.commit()
        except BaseException as exc:
            out.discard()
            failed = write_failed(name, exc)
            if failed is None:
                raise
            raise failed from None
        written.append(name)
    return written
