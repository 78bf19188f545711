"""What a .psr file holds, as Python objects: its chunks (ChunkInfo) and its definitions
(functions, frames, threads and the programs processes ran), gathered in Definitions."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from . import _constants as C

__all__ = ["ChunkInfo", "Function", "Frame", "ProcessInfo", "TaskInfo", "ThreadInfo",
           "Definitions", "TRUNCATED"]


@dataclass(frozen=True)
class ChunkInfo:
    offset: int
    type: int
    flags: int
    length: int
    raw_length: int
    crc: int
    first_ts: int = 0
    last_ts: int = 0
    passes: int = 0
    samples: int = 0

    @property
    def type_name(self) -> str:
        return C.CHUNK_NAMES.get(self.type, f"TYPE{self.type}")

    @property
    def end(self) -> int:
        return self.offset + C.CHUNK_HEADER_SIZE + self.length


def where(info: ChunkInfo) -> str:
    """How a warning names a chunk."""
    return f"{info.type_name} chunk at byte {info.offset}"


# Function.kind (spec 3.1): Python code, a native (C, C++, Rust) function, the interpreter's
# evaluation loop, the interpreter's code that no symbol names (a stripped interpreter), the
# marker of native frames that were not captured with the sample's Python frames.
PYTHON, NATIVE, EVAL_LOOP, INTERPRETER_UNNAMED, NATIVE_MISSING = 0, 1, 2, 3, 4


@dataclass(frozen=True)
class Function:
    id: int
    filename: str  # a native function's: its binary's path as the target saw it
    name: str
    first_line: int
    kind: int = PYTHON
    build_id: str = ""  # a native function's binary's GNU build id (hex), "" if none
    address: int = 0  # a native function's link-time address in its binary
    # A native function's symbol as its binary has it, where name is that symbol demangled
    # (spec 3.1); "" where the two are the same.
    symbol: str = ""

    @property
    def native(self) -> bool:
        return self.kind != PYTHON


@dataclass(frozen=True)
class Frame:
    id: int
    function: Function
    line: int


@dataclass
class ProcessInfo:
    """One program a process ran while it was recorded: a process that exec'd has one for
    each Python program it ran, in time order."""

    pid: int
    parent_pid: int
    command: str
    start_ts: int
    source: int | None = None  # of several recordings read as one, the one it is of

    @property
    def label(self) -> str:
        return f"pid {self.pid}" + (f" ({self.command})" if self.command else "")


@dataclass
class ThreadInfo:
    ref: int
    pid: int
    python_tid: int
    os_tid: int
    name: str
    start_ts: int
    end_ts: int | None = None
    names: list[tuple[int, str]] = field(default_factory=list)  # renames: (ts, new name)
    source: int | None = None  # of several recordings read as one, the one it is of

    @property
    def label(self) -> str:
        return self.name or f"thread (tid {self.os_tid or self.python_tid})"


@dataclass(frozen=True)
class TaskInfo:
    """An asyncio task a thread ran (format 1.4): its TASK id, process, address (asyncio's own
    tools call it the task's id), name when first seen, the function of its coroutine (None
    when not known) and when it was first seen."""

    id: int
    pid: int
    address: int
    name: str
    coroutine: Function | None
    start_ts: int

    @property
    def label(self) -> str:
        return self.name or f"task {self.address:#x}"


_UNKNOWN_FUNCTION = Function(0, "<unknown>", "<unknown>", 0)
TRUNCATED = Frame(0, Function(0, "<psrec>", "[truncated stack]", 0), 0)


@dataclass
class Definitions:
    strings: dict[int, str] = field(default_factory=dict)
    functions: dict[int, Function] = field(default_factory=dict)
    frames: dict[int, Frame] = field(default_factory=lambda: {0: TRUNCATED})
    threads: dict[int, ThreadInfo] = field(default_factory=dict)
    processes: list[ProcessInfo] = field(default_factory=list)  # in start order
    tasks: dict[int, TaskInfo] = field(default_factory=dict)  # by TASK id
    unknown_records: int = 0
    # Definitions of an id seen before with other content (spec 3.1 forbids it): the first
    # stands, in every reader, the merge and the exports alike; readers warn.
    conflicts: int = 0
    _processes_seen: set[tuple[int, int, int, int]] = field(default_factory=set, repr=False)
    _raw: dict[tuple[int, int], tuple[Any, ...]] = field(default_factory=dict, repr=False)

    def _new(self, kind: int, ident: int, content: tuple[Any, ...]) -> bool:
        """Whether (kind, ident) is defined for the first time: then it is noted with its
        content. Defined again (the same content: a later epoch, a chunk written twice) it is
        not; with other content, counted in conflicts."""
        seen = self._raw.setdefault((kind, ident), content)
        if seen is content:
            return True
        if seen != content:
            self.conflicts += 1
        return False

    def add(self, decoded: tuple[list[Any], list[Any], list[Any], list[Any], list[Any], int,
                                 list[Any]]) -> None:
        strings, functions, frames, threads, processes, unknown, tasks = decoded
        s = self.strings
        for sid, value in strings:
            seen = s.setdefault(sid, value)
            if seen != value:
                self.conflicts += 1
        native = []
        for fid, filename, name, first_line, kind, build_id, address in functions:
            if not self._new(C.REC_FUNCTION, fid,
                             (filename, name, first_line, kind, build_id, address)):
                continue
            path = s.get(filename, "<unknown>")
            if kind == PYTHON:
                self.functions[fid] = Function(
                    fid, path, s.get(name, "<unknown>"), first_line)
            else:  # a binary with no symbol there stands as a whole: [libfoo.so]
                f = Function(
                    fid, path, s.get(name, "") if name else f"[{path.rsplit('/', 1)[-1]}]",
                    first_line, kind, s.get(build_id, "") if build_id else "", address)
                self.functions[fid] = f
                if f.name.startswith("_Z"):
                    native.append(f)
        self._demangle(native)
        for frid, fid, line in frames:
            if frid != C.TRUNCATED_FRAME and self._new(C.REC_FRAME, frid, (fid, line)):
                self.frames[frid] = Frame(frid, self.functions.get(fid, _UNKNOWN_FUNCTION),
                                          line)
        for ref, pid, ptid, otid, name, start in threads:
            # (again in a later epoch, spec 7.4: the same thread)
            if self._new(C.REC_THREAD, ref, (pid, ptid, otid, name, start)):
                self.threads[ref] = ThreadInfo(ref, pid, ptid, otid, s.get(name, ""), start)
        for pid, ppid, command, start in processes:
            key = (pid, ppid, command, start)
            if key in self._processes_seen:  # the same definition again: a chunk written twice
                continue
            self._processes_seen.add(key)
            self.processes.append(ProcessInfo(pid, ppid, s.get(command, ""), start))
        for tid, pid, address, name, coroutine, start in tasks:
            if not self._new(C.REC_TASK, tid, (pid, address, name, coroutine, start)):
                continue
            self.tasks[tid] = TaskInfo(tid, pid, address, s.get(name, ""),
                                       self.functions.get(coroutine), start)
        self.unknown_records += unknown

    def _demangle(self, native: list[Function]) -> None:
        """Native functions named by a mangled symbol take its demangled name and keep the
        symbol (without the native codec, names stay as their symbols)."""
        if not native:
            return
        from .text import demangle

        for f, shown in zip(native, demangle([f.name for f in native])):
            if shown != f.name:
                self.functions[f.id] = replace(f, name=shown, symbol=f.name)

    def process_of(self, thread: ThreadInfo) -> ProcessInfo | None:
        """The program the thread ran in: the last one its process (of its recording, where
        several are read as one) started before it."""
        found = None
        for p in self.processes:
            if p.pid == thread.pid and p.start_ts <= thread.start_ts and \
                    p.source == thread.source:
                found = p
        return found

    def apply_renames(self, events: list[tuple[int, int, int, int, int]]) -> None:
        """Gives each thread the names THREAD_RENAME events gave it, in time order; its name
        becomes the last one. Applying the same events again changes nothing."""
        renames: dict[int, list[tuple[int, str]]] = {}
        for etype, ts, ref, name_id, _ in events:
            if etype == C.REC_THREAD_RENAME and ref in self.threads:
                renames.setdefault(ref, []).append((ts, self.strings.get(name_id, "")))
        for ref, names in renames.items():
            names.sort(key=lambda n: n[0])
            self.threads[ref].names = names
            self.threads[ref].name = names[-1][1]

    def frame(self, frame_id: int) -> Frame:
        f = self.frames.get(frame_id)
        if f is None:
            f = Frame(frame_id, Function(0, "<unknown>", f"<frame {frame_id}>", 0), 0)
        return f

