"""`psrec dump PID`: every thread's current Python stack, read once, as text or as JSON.

psrec's entry point (``psrec.__main__.main``) answers ``psrec [-v] dump PID [--json] [--native]
[--native-all]`` with these functions (parse_args, print_dump) before it imports anything else: no
click, no reader or writer, no recording machinery (only psrec.format.text, which imports nothing).
What a dump needs is the native recorder and these few functions, so it starts about as fast as
Python itself (the read takes well under a millisecond). Its errors are raised, and worded by the
entry point as every command's are (``psrec._errors``), with the modules that word them imported
only when there is an error to word. The click command (``psrec dump``, for any other form of
command line) prints with print_dump too, so both print the same text.
"""

from __future__ import annotations

import os
import sys

# typing imports `re`, which costs more than the whole dump: annotations only (mypy takes any
# name TYPE_CHECKING for typing's).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

__all__ = ["format_dump", "format_tasks", "dump_json", "tasks_json", "render_json", "check_pid",
           "read_dump", "render", "parse_args", "print_dump"]

# The largest pid Linux hands out (PID_MAX_LIMIT, include/linux/threads.h).
_PID_MAX_LIMIT = 1 << 22


def _short_path(path: str) -> str:
    return path


# How a native walk ended, when it did not end at the thread's first function.
_NATIVE_ENDS = {
    "no-info": "native stack ends in code that no binary describes",
    "failed": "native stack ends where its call-frame information could not be applied",
    "truncated": "native stack truncated",
}


def _native_name(f: tuple[Any, ...]) -> str:
    """A native frame as text: function+offset (library), or library+offset unnamed."""
    pc, _exact, module, _build_id, function, offset, is_eval = f
    lib = module.rsplit("/", 1)[-1]
    loop = " [evaluation loop]" if is_eval and not function else ""
    if function:
        return f"{function}+{offset:#x} ({lib})"
    return (f"{lib}+{offset:#x}" if module else f"{pc:#x}") + loop


def _mixed(t: dict[str, Any], hide: bool) -> list[Any] | None:
    """A thread's frames, innermost first, native and Python interleaved (None when its two
    stacks do not pair off). Python frames are (file, function, line) tuples, native frames
    the recorder's 6-tuples."""
    from psrec.format.mixed_stacks import interleave

    mixed: list[Any] | None = interleave(
        t["native"], [f[4] for f in t["native"]], [f[6] for f in t["native"]], t["frames"],
        t["entry"], hide=hide)
    return mixed


def _native_lines(t: dict[str, Any], hide: bool) -> list[str]:
    from psrec.format.text import printable as p

    def py(f: tuple[str, str, int]) -> str:
        return f"    {p(f[1])} ({p(_short_path(f[0]))}:{f[2]})"

    lines = []
    if t["native_error"]:
        lines.append(f"    [no native frames: {p(t['native_error'])}]")
        lines.extend(py(f) for f in t["frames"])
        return lines
    mixed = _mixed(t, hide)
    if mixed is None:
        loops = sum(1 for f in t["native"] if f[6])
        runs = sum(1 for i, e in enumerate(t["entry"]) if e or i == len(t["entry"]) - 1)
        lines.extend(f"    {p(_native_name(f))}" for f in t["native"])
        lines.append(f"    [native and Python stacks do not pair off: {loops} evaluation "
                     f"loops, {runs} runs of Python frames]")
        lines.extend(py(f) for f in t["frames"])
    else:
        lines.extend(py(f) if len(f) == 3 else f"    {p(_native_name(f))}" for f in mixed)
    if t["native_end"] in _NATIVE_ENDS:
        lines.append(f"    [{_NATIVE_ENDS[t['native_end']]}]")
    return lines


def format_dump(d: dict[str, Any], hide: bool = True) -> list[str]:
    """The text form of a dump (the native recorder's dict, with the command line in
    d["info"]["command"]): a header, then one block per thread, innermost frame first. A dump
    with native stacks interleaves them with the Python frames; with hide, the interpreter's
    call machinery is left out."""
    from psrec.format.text import printable as p

    info = d["info"]
    lines = [
        f"Process {info['pid']}: {p(info.get('command') or info['executable'])}",
        f"Python {info['version']}{' free-threaded' if info['free_threaded'] else ''} "
        f"({info['binary']})",
        *(f"[{p(said)}]" for said in d.get("native_replaced", ())),
        "",
    ]
    # A free-threaded interpreter has no GIL: what stands in its place is whether the thread
    # was attached to the interpreter (running Python code).
    held, label = ("yes", "attached") if info["free_threaded"] else ("held", "gil")
    for t in d["threads"]:
        gil = (f"{label}: ?" if not t["gil_known"]
               else (f"{label}: {held}" if t["gil_held"] else f"{label}: -"))
        cpu = "cpu: ?" if not t["cpu_known"] else ("cpu: running" if t["on_cpu"] else "cpu: idle")
        name = f' "{p(t["name"])}"' if t["name"] else ""
        if "native" in t:
            if t["python"]:
                lines.append(f"Thread {t['python_tid']:#x} (tid {t['native_tid'] or '?'}){name}"
                             f"  [{gil}, {cpu}]")
            else:
                lines.append(f"Thread (tid {t['native_tid']}){name}  [no Python, {cpu}]")
            lines.extend(_native_lines(t, hide))
            if t["error"]:
                lines.append(f"    [{p(t['error'])}]")
            lines.append("")
            continue
        lines.append(
            f"Thread {t['python_tid']:#x} (tid {t['native_tid'] or '?'}){name}  [{gil}, {cpu}]"
        )
        for filename, func, line in t["frames"]:
            lines.append(f"    {p(func)} ({p(_short_path(filename))}:{line})")
        if t["truncated"]:
            lines.append("    [truncated stack]")
        if t["error"]:
            lines.append(f"    [{p(t['error'])}]")
        if not t["frames"] and not t["error"]:
            lines.append("    [no Python frames]")
        lines.append("")
    return lines


def _native_json(t: dict[str, Any], hide: bool) -> dict[str, Any]:
    """A thread's native part in JSON: its native frames, innermost first, how their walk
    ended, and its whole stack (null when the two stacks do not pair off)."""

    def native(f: tuple[Any, ...]) -> dict[str, Any]:
        pc, exact, module, build_id, function, offset, is_eval = f
        return {"kind": "native", "pc": pc, "return_address": not exact,
                "module": module or None, "build_id": build_id or None,
                "function": function or None, "offset": offset, "eval_loop": is_eval}

    mixed = None if t["native_error"] else _mixed(t, hide)
    return {
        "python": t["python"],
        "native": [native(f) for f in t["native"]],
        "native_end": t["native_end"] or None,
        "native_error": t["native_error"] or None,
        "stack": None if mixed is None else [
            {"kind": "python", "file": f[0], "function": f[1], "line": f[2]} if len(f) == 3
            else native(f) for f in mixed],
    }


def dump_json(d: dict[str, Any], hide: bool = True) -> dict[str, Any]:
    """The JSON form of a dump: the process, then its threads in the text form's order.

    What cannot be told is null: a thread's OS id, its GIL or CPU status, the command line.
    On a free-threaded build each thread has "attached" (attached to the interpreter) where a
    build with a GIL has "gil_held". A dump with native stacks gives each thread its native
    frames and its whole stack too (_native_json)."""
    info = d["info"]
    free_threaded = bool(info["free_threaded"])
    status = "attached" if free_threaded else "gil_held"
    threads = [
        {
            "python_tid": t["python_tid"],
            "native_tid": t["native_tid"] or None,
            "name": t["name"],
            status: bool(t["gil_held"]) if t["gil_known"] else None,
            "on_cpu": bool(t["on_cpu"]) if t["cpu_known"] else None,
            "frames": [{"file": filename, "function": func, "line": line}
                       for filename, func, line in t["frames"]],
            "truncated": bool(t["truncated"]),
            "error": t["error"] or None,
            **(_native_json(t, hide) if "native" in t else {}),
        }
        for t in d["threads"]
    ]
    return {
        "pid": info["pid"],
        "command": info.get("command") or None,
        "executable": info["executable"],
        "binary": info["binary"],
        "python_version": info["version"],
        "free_threaded": free_threaded,
        "threads": threads,
    }


def render_json(doc: dict[str, Any]) -> str:
    """``json.dumps(doc, indent=2)`` for a document of dump_json(), without importing json: its
    encoder and decoder import `re`, which takes longer than the whole dump, and its indented
    encoder is pure Python. tests/integration/test_dump_pid.py checks that the two agree."""
    from _json import encode_basestring_ascii as quote

    def scalar(v: Any) -> str:
        if v is None or v is True or v is False:
            return "null" if v is None else "true" if v else "false"
        return str(quote(v)) if isinstance(v, str) else int.__repr__(v)

    def array(items: list[str], pad: str) -> str:
        return "[\n" + ",\n".join(items) + "\n" + pad + "]" if items else "[]"

    def obj(d: dict[str, Any], pad: str) -> str:
        inner = pad + "  "
        fields = []
        for key, v in d.items():
            if key == "threads":
                text = array([inner + "  " + obj(t, inner + "  ") for t in v], inner)
            elif key == "frames":  # most of a dump: one template, not a walk per value
                at = inner + "  "
                text = array([f'{at}{{\n{at}  "file": {quote(f["file"])},\n'
                              f'{at}  "function": {quote(f["function"])},\n'
                              f'{at}  "line": {int.__repr__(f["line"])}\n{at}}}' for f in v],
                             inner)
            else:
                text = scalar(v)
            fields.append(f"{inner}{quote(key)}: {text}")
        return "{\n" + ",\n".join(fields) + "\n" + pad + "}"

    return obj(doc, "")


def _stat(path: str) -> tuple[str, str, int] | None:
    """(command name, state letter, parent pid) from a /proc/PID[/task/TID]/stat file."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    # "pid (comm) S ppid ...": comm may hold spaces and parentheses of its own.
    name, _, rest = text.partition(" (")[2].rpartition(") ")
    fields = rest.split()
    return (name, fields[0], int(fields[1])) if len(fields) > 1 else None


def check_pid(pid: int) -> None:
    """Says before attaching what psrec can tell from /proc: a number that cannot be a pid
    (wrong usage), or a process that has exited but is not reaped yet (a zombie: its memory is
    gone, and reading it is refused as if psrec lacked the permission)."""
    if not 0 < pid <= _PID_MAX_LIMIT:
        from .errors import RecorderUsageError

        raise RecorderUsageError(f"invalid pid {pid}",
                                 help="give the pid of a running Python process "
                                      "(ps aux | grep python)")
    st = _stat(f"/proc/{pid}/stat")
    if st is None or st[1] not in ("Z", "X"):
        return
    try:  # a leader that has exited while other threads run: the process lives on
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        tids = []
    for tid in tids:
        task = _stat(f"/proc/{pid}/task/{tid}/stat")
        if task is not None and task[1] not in ("Z", "X"):
            return
    parent = _stat(f"/proc/{st[2]}/stat")
    from .errors import ZombieProcessError

    raise ZombieProcessError(
        f"process {pid} has exited and is a zombie: its parent, process {st[2]}"
        + (f" ({parent[0]})" if parent else "") + ", has not reaped it yet")


def _native() -> ModuleType:
    try:
        from . import _recorder
    except ImportError as exc:
        from .errors import NativeRecorderMissingError

        raise NativeRecorderMissingError(
            f"the native recorder cannot be loaded: {exc}") from None
    module: ModuleType = _recorder
    return module


def read_dump(pid: int, blocking: bool = False, native: bool = False,
              tasks: bool = False) -> dict[str, Any]:
    """Every thread's current stack, GIL and CPU state, read once, with the process's command
    line in d["info"]["command"]. With native, each thread's native stack too (the process is
    stopped while it is read). With tasks, its asyncio tasks in d["tasks"] (the process is
    stopped while they are read, so that the tasks and their links are of one moment, for at
    most 100 ms: a process with more tasks than that reads is resumed, the rest read after,
    and d["tasks"]["past_deadline"] says so)."""
    check_pid(pid)
    rec = _native()
    d: dict[str, Any] = (rec.dump(pid, blocking or tasks, native, True) if tasks
                         else rec.dump(pid, blocking, native))
    d["info"]["command"] = rec.command_line(pid)
    if native:
        _demangle(d)
    return d


def _demangle(d: dict[str, Any]) -> None:
    """Native frames named by a mangled symbol (C++, Rust's legacy scheme) take its
    demangled name, as a debugger shows it."""
    frames = [f for t in d["threads"] for f in t.get("native", ()) if f[4].startswith("_Z")]
    if not frames:
        return
    from psrec.format.text import demangle

    shown = dict(zip((f[4] for f in frames), demangle([f[4] for f in frames])))
    for t in d["threads"]:
        if "native" in t:
            t["native"] = [(*f[:4], shown.get(f[4], f[4]), *f[5:]) for f in t["native"]]


def tasks_json(d: dict[str, Any]) -> dict[str, Any]:
    """The asyncio part of a dump's JSON form: each task with its id (the task object's
    address, as asyncio's own tools give it), name, state, the thread running it, its
    coroutines innermost first (while suspended), what it waits on, and the ids of the tasks
    it waits on and that wait on it."""
    t = d["tasks"]
    return {
        "imported": bool(t["asyncio"]),
        "error": t["error"] or None,
        # The tasks read while the process was stopped (all of them, unless the stop's
        # 100 ms ran out first: the others were read after it resumed).
        "read_stopped": t["before_deadline"] if t["past_deadline"] else len(t["tasks"]),
        # The lists of tasks were not walked whole within the stop's limit: not all tasks.
        "incomplete": bool(t.get("incomplete")),
        "tasks": [
            {
                "id": r["id"],
                "name": r["name"],
                "state": r["state"],
                "thread": r["thread_id"] or None,
                "coroutines": [{"file": f, "function": fn, "line": line}
                               for f, fn, line in r["stack"]],
                "waits_on": r["waits_on"] or None,
                "awaits": list(r["awaits"]),
                "awaited_by": list(r["awaited_by"]),
            }
            for r in t["tasks"]
        ],
    }


def format_tasks(d: dict[str, Any]) -> list[str]:
    """The text form of a dump's asyncio tasks: a tree, each task under the task waiting on it
    (as a gather's or a TaskGroup's tasks under their parent), its coroutines innermost first."""
    from psrec.format.text import printable as p

    t = d["tasks"]
    if not t["asyncio"]:
        return ["Asyncio tasks: none (asyncio is not imported)", ""]
    if t["error"]:
        return [f"Asyncio tasks: not read ({p(t['error'])})", ""]
    tasks = {r["id"]: r for r in t["tasks"]}
    running = sum(1 for r in t["tasks"] if r["state"] == "running")
    lines = [f"Asyncio tasks: {len(tasks):,} ({running:,} running)"]
    if t.get("incomplete"):
        lines.append("  (not all: the process's lists of tasks were not walked whole within "
                     "the 100 ms it may be stopped for; record it to see them all)")
    if t["past_deadline"]:
        lines.append(f"  ({t['before_deadline']:,} read with the process stopped, the "
                     f"{len(tasks) - t['before_deadline']:,} others after it was resumed at "
                     "the stop's limit of 100 ms: their states and links may be of a later "
                     "moment)")
    thread_names = {th["python_tid"]: th["name"] for th in d["threads"]}
    shown: set[int] = set()

    def show(tid: int, depth: int) -> None:
        r = tasks[tid]
        pad = "    " * depth
        head = f'{pad}Task "{p(r["name"])}" ({tid:#x})'
        if tid in shown:
            lines.append(f"{head}  [shown above]")
            return
        shown.add(tid)
        if r["state"] == "running":
            th = r["thread_id"]
            name = thread_names.get(th)
            where = (f" on thread {th:#x}" + (f' "{p(name)}"' if name else "")) if th else ""
            lines.append(f"{head}  [running{where}]")
        elif r["state"] == "pending":
            lines.append(f"{head}  [pending: not started]")
        else:
            waits = f", waits on {p(r['waits_on'])}" if r["waits_on"] else ""
            lines.append(f"{head}  [suspended{waits}]")
        for filename, func, line in r["stack"]:
            lines.append(f"{pad}    {p(func)} ({p(filename)}:{line})")
        for child in r["awaits"]:
            if child in tasks:
                show(child, depth + 1)

    roots = [i for i, r in tasks.items() if not any(a in tasks for a in r["awaited_by"])]
    for tid in sorted(roots, key=lambda i: (tasks[i]["name"], i)):
        show(tid, 0)
    # Tasks only reachable through a cycle of waits.
    for tid in sorted(set(tasks) - shown):
        show(tid, 0)
    lines.append("")
    return lines


def render(pid: int, as_json: bool, blocking: bool = False, native: bool = False,
           native_all: bool = False, tasks: bool = False) -> str:
    """The dump of process pid as psrec prints it, text or JSON, newline-terminated. native
    adds native stacks; native_all keeps the interpreter's call machinery in them; tasks adds
    the asyncio tasks."""
    d = read_dump(pid, blocking, native or native_all, tasks)
    if as_json:
        doc = dump_json(d, hide=not native_all)
        if tasks:
            doc["asyncio"] = tasks_json(d)
        if native or native_all or tasks:
            import json

            return json.dumps(doc, indent=2) + "\n"
        return render_json(doc) + "\n"
    lines = format_dump(d, hide=not native_all)
    if tasks:
        lines += format_tasks(d)
    return "".join(line + "\n" for line in lines)


def _echo(text: str) -> None:
    """What a dump prints, text the stream cannot encode replaced (names from the target
    are escaped by format_dump, so nothing here can drive a terminal)."""
    stream = sys.stdout
    try:
        stream.write(text)
    except UnicodeEncodeError:
        stream.flush()
        stream.buffer.write(text.encode(stream.encoding or "utf-8", "replace"))
    stream.flush()


# The dump's options the fast path takes, each at most once (the click command, psrec.cli.dump,
# takes the same).
_FLAGS = ("--json", "--native", "--native-all")


def parse_args(args: list[str]) -> tuple[int, bool, bool, bool, bool] | None:
    """(pid, --json, -v, --native, --native-all) when args are exactly ``[-v ...] dump PID``
    with those flags, each at most once, before or after PID, and PID names no file; None for
    anything else (help, a recording, an option psrec does not know, a repeated or misplaced
    word), which the click command handles."""
    i = 0
    while i < len(args) and args[i] in ("-v", "--verbose"):
        i += 1
    if args[i:i + 1] != ["dump"]:
        return None
    rest = args[i + 1:]
    if any(rest.count(f) > 1 for f in _FLAGS):
        return None
    words = [w for w in rest if w not in _FLAGS]
    if len(words) != 1:
        return None
    target = words[0]
    # As the click command decides (psrec.cli.dump): a file of that name is a file.
    if not target.isdigit() or os.path.exists(target):
        return None
    return int(target), "--json" in rest, i > 0, "--native" in rest, "--native-all" in rest


def print_dump(pid: int, as_json: bool, blocking: bool = False, native: bool = False,
               native_all: bool = False, tasks: bool = False) -> None:
    """Prints the dump of process pid, text or JSON (the click command and the fast path
    alike); its errors are the caller's to word."""
    _echo(render(pid, as_json, blocking, native, native_all, tasks))
