"""`psrec dump PID` and `psrec dump PID --json` on live targets, for every interpreter found.

`psrec dump PID` is answered without click and the recording machinery (psrec.recorder._dump,
called by psrec.__main__): these tests check what it prints, that it imports no more than it
needs, and that its errors are worded and exit as the click commands' are.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from rec_live import (
    CALL_KINDS,
    HEAVY_ON_ERROR,
    assert_lean,
    dead_pid,
    is_free_threaded,
    line_of,
    minor_of,
    one_python,
    psrec,
    psrec_imports,
    python_params,
    target,
)

pytestmark = [pytest.mark.live, pytest.mark.timeout(120)]
PYTHONS = python_params()
DATA = Path(__file__).resolve().parents[1] / "data"


def dump_json(pid: int) -> dict[str, Any]:
    r, modules = psrec_imports("dump", str(pid), "--json")
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr
    doc = json.loads(r.stdout)
    # One document, printed as json.dumps(doc, indent=2) prints it.
    assert r.stdout == json.dumps(doc, indent=2) + "\n"
    assert_lean(modules)
    return doc


def by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in doc["threads"]}


THREAD = re.compile(r'^Thread (0x[0-9a-f]+) \(tid (\d+|\?)\)(?: "(.*)")?  \[(\w+): ([-\w?]+), '
                    r"cpu: (\w+|\?)\]$")
FRAME = re.compile(r"^    (.+) \((.+):(\d+)\)$")


def parse_text(text: str) -> list[dict[str, Any]]:
    """The threads of the text form: ids, name, status words and frames (function, file,
    line), innermost first."""
    threads: list[dict[str, Any]] = []
    for line in text.splitlines()[3:]:
        m = THREAD.match(line)
        if m:
            threads.append({"python_tid": int(m[1], 16),
                            "native_tid": None if m[2] == "?" else int(m[2]),
                            "name": m[3] or "", "label": m[4], "gil": m[5], "cpu": m[6],
                            "frames": []})
        elif (f := FRAME.match(line)) and threads:
            threads[-1]["frames"].append((f[1], f[2], int(f[3])))
    return threads


@pytest.mark.parametrize("python", PYTHONS)
def test_json_names_each_thread_and_where_it_is(python: str) -> None:
    with target(python, "rec_threads.py") as t:
        doc = dump_json(t.pid)
    ft = is_free_threaded(python)
    assert doc["pid"] == t.pid
    assert "rec_threads.py" in doc["command"], doc["command"]
    minor = "{}.{}".format(*minor_of(python))  # 3.8 has no Py_Version to read the patch from
    assert doc["python_version"] == minor or doc["python_version"].startswith(minor + "."), doc
    assert doc["free_threaded"] is ft
    assert doc["executable"] and doc["binary"], doc
    threads = by_name(doc)
    assert {"busy-worker", "sleepy-worker", "MainThread"} <= set(threads), list(threads)
    busy_line = line_of("rec_threads.py", "busy_inner")
    want = {  # innermost first: (function, lines it may be on)
        "busy-worker": [("busy_inner", {busy_line - 1, busy_line}), ("busy_worker", None)],
        "sleepy-worker": [("sleepy_inner", {line_of("rec_threads.py", "sleepy_inner")}),
                          ("sleepy_worker", None)],
        "MainThread": [("main_sleep", {line_of("rec_threads.py", "main_sleep")}),
                       ("<module>", None)],
    }
    status = "attached" if ft else "gil_held"
    for name, frames in want.items():
        th = threads[name]
        got = th["frames"][:len(frames)]
        assert [f["function"] for f in got] == [f for f, _ in frames], (name, th["frames"])
        # (as the target names it: in a container, its own path)
        assert all(f["file"].endswith("/rec_threads.py") for f in got), (name, th["frames"])
        for f, (_, lines) in zip(got, frames):
            assert lines is None or f["line"] in lines, (name, th["frames"])
        assert status in th and ("attached" if status == "gil_held" else "gil_held") not in th
        assert th[status] in (True, False) and th["on_cpu"] in (True, False), th
        assert th["truncated"] is False and th["error"] is None, th
        assert isinstance(th["python_tid"], int) and th["python_tid"] > 0, th
    assert threads["MainThread"]["native_tid"] == t.pid
    assert len({th["native_tid"] for th in doc["threads"]}) == len(doc["threads"])
    # A thread in time.sleep has let go of the GIL (or detached, without one).
    assert threads["sleepy-worker"][status] is False, threads["sleepy-worker"]


@pytest.mark.parametrize("python", PYTHONS)
def test_dumps_of_a_fast_changing_stack_are_never_torn(python: str) -> None:
    """A dump reads a stack as a sample does: a copy the thread changed while it was read
    (a caller at the line before its call, a callee that already returned) is read again,
    never shown. Hundreds of dumps of a loop that calls in every way Python can, each callee
    from its own line: the stacks shown have the callee their caller's line calls, all but at
    most one in a hundred (the bound spec/cpython-layouts.md gives samples: a copy that catches
    a whole return and the next call at the same addresses passes every check; one wrong stack
    in a run of 400 dumps was seen once here, while the host stole a fifth of the CPU time)."""
    from psrec.recorder import dump_process

    lines = {line_of("rec_traps.py", marker): fn for marker, fn in CALL_KINDS.items()}
    seen = wrong = torn = 0
    bad: list[Any] = []
    with target(python, "rec_traps.py", "call_kinds") as t:
        for _ in range(400):
            main = next(th for th in dump_process(t.pid)["threads"]
                        if th["native_tid"] == t.pid)
            if main["error"]:
                torn += 1
                continue
            frames = main["frames"]  # innermost first: (file, function, line)
            names = [f[1] for f in frames]
            if "call_kinds_loop" not in names:
                continue
            i = names.index("call_kinds_loop")
            if i == 0 or frames[i][2] not in lines:
                continue
            seen += 1
            callee = names[i - 1].rsplit(".", 1)[-1]
            if callee != lines[frames[i][2]]:
                wrong += 1
                bad.append(frames[: i + 1])
    assert seen >= 100, (seen, torn)
    assert wrong <= seen / 100, (seen, bad[:5])
    assert torn <= 40, torn  # a stack given up after its reads again: rare


@pytest.mark.parametrize("python", PYTHONS)
def test_json_and_text_say_the_same(python: str) -> None:
    """The JSON form holds what the text form shows: the process, each thread's ids, name and
    frames (two dumps of the same process a moment apart: only the busy thread's line and the
    threads' GIL and CPU status may differ between them)."""
    with target(python, "rec_threads.py") as t:
        r, modules = psrec_imports("dump", str(t.pid))
        doc = dump_json(t.pid)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert_lean(modules)
    head = r.stdout.splitlines()[:3]
    assert head[0] == f"Process {t.pid}: {doc['command']}", head
    assert head[1] == (f"Python {doc['python_version']}"
                       f"{' free-threaded' if doc['free_threaded'] else ''} ({doc['binary']})")
    text = parse_text(r.stdout)
    assert len(text) == len(doc["threads"]) >= 3, r.stdout
    label = "attached" if doc["free_threaded"] else "gil"
    word = {True: "yes" if doc["free_threaded"] else "held", False: "-", None: "?"}
    for tt, jt in zip(text, doc["threads"]):
        assert (tt["python_tid"], tt["native_tid"], tt["name"]) == \
            (jt["python_tid"], jt["native_tid"], jt["name"]), (tt, jt)
        assert tt["label"] == label
        assert tt["gil"] in word.values() and tt["cpu"] in ("running", "idle", "?"), tt
        frames = [(f["function"], f["file"], f["line"]) for f in jt["frames"]]
        if jt["name"] == "busy-worker":  # its innermost line moves with its loop
            tt["frames"][0], frames[0] = tt["frames"][0][:2], frames[0][:2]
        assert tt["frames"] == frames, (tt, jt)
    # The statuses of the threads that sleep hold still between the two dumps.
    for tt, jt in zip(text, doc["threads"]):
        if jt["name"] == "sleepy-worker":
            status = jt["attached" if doc["free_threaded"] else "gil_held"]
            assert tt["gil"] == word[status] == "-", (tt, jt)


@pytest.mark.parametrize("python", one_python())
def test_json_keeps_names_as_threading_has_them(python: str) -> None:
    """Names outside ASCII come through (escaped, as json.dumps escapes them)."""
    with target(python, "rec_names.py", stdin=True) as t:
        doc = dump_json(t.pid)
    names = {th["name"] for th in doc["threads"]}
    assert {"main-renamed", "before-rename", "ünïcode-名前", "os-only"} <= names, names


@pytest.mark.parametrize("python", one_python())
def test_text_escapes_names_that_would_drive_a_terminal(python: str) -> None:
    """A function named "sp<ESC>[2Jin" (clear screen) and a thread "bad<ESC>[41mname" (red
    background): the text form shows the escapes, JSON keeps the names as they are."""
    with target(python, "rec_escapes.py", "30") as t:
        r, modules = psrec_imports("dump", str(t.pid))
        doc = dump_json(t.pid)
    assert r.returncode == 0, r.stderr
    assert_lean(modules)
    assert "\x1b" not in r.stdout
    assert 'Thread ' in r.stdout and ' "bad\\x1b[41mname"  [' in r.stdout, r.stdout
    assert "    sp\\x1b[2Jin (" in r.stdout, r.stdout
    assert "bad\x1b[41mname" in {th["name"] for th in doc["threads"]}


def _zombie_child_of(parent: int, timeout: float = 10.0) -> int:
    """rec_zombie.py's child, once it has exited (its parent never reaps it)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(f"/proc/{parent}/task/{parent}/children") as f:
                children = [int(c) for c in f.read().split()]
        except OSError:
            children = []
        for child in children:
            try:
                with open(f"/proc/{child}/stat") as f:
                    if f.read().rpartition(")")[2].split()[0] == "Z":
                        return child
            except OSError:
                pass
        assert time.monotonic() < deadline, f"process {parent} has no zombie child in {timeout} s"
        time.sleep(0.02)


def assert_error(r: subprocess.CompletedProcess[str], status: int, *words: str) -> None:
    """One line that says what went wrong and one that says what to do, with exit status."""
    assert r.returncode == status, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2, r.stderr
    assert lines[0].startswith("psrec: error: ") and lines[1].startswith("psrec: "), r.stderr
    assert r.stdout == "", r.stdout
    for w in words:
        assert w in lines[0], r.stderr


@pytest.mark.parametrize("python", one_python())
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_errors_keep_their_words_and_status(python: str, as_json: bool) -> None:
    flag = ["--json"] if as_json else []
    dead = dead_pid()
    r, modules = psrec_imports("dump", str(dead), *flag)
    assert_error(r, 1, f"no process with pid {dead}")
    assert_lean(modules, HEAVY_ON_ERROR)
    for pid in ("0", "4194305"):  # PID_MAX_LIMIT + 1
        r, modules = psrec_imports("dump", *flag, pid)
        assert_error(r, 2, f"invalid pid {pid}")
        assert_lean(modules, HEAVY_ON_ERROR)
    with target(python, "rec_zombie.py") as t:
        zombie = _zombie_child_of(t.pid)
        r, modules = psrec_imports("dump", str(zombie), *flag)
    assert_error(r, 1, f"process {zombie} has exited and is a zombie", f"process {t.pid}")
    assert "permission" not in r.stderr and "sudo" not in r.stderr, r.stderr
    assert_lean(modules, HEAVY_ON_ERROR)
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        r, modules = psrec_imports("dump", str(sleeper.pid), *flag)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert_error(r, 1, "is not a Python process")
    assert_lean(modules, HEAVY_ON_ERROR)
    # With -v, a traceback instead, and the same status.
    r = psrec("-v", "dump", str(dead), *flag)
    assert r.returncode == 1 and "Traceback" in r.stderr and "NoSuchProcessError" in r.stderr


@pytest.mark.parametrize("flag", [[], ["--json"]], ids=["text", "json"])
def test_errors_are_worded_as_the_click_command_words_them(flag: list[str]) -> None:
    """`psrec dump PID`, answered before click is imported, and the click command (reached by
    any other form of command line: `--` before the pid) end an error alike, in one place
    (psrec._errors): the same lines and the same exit status."""
    dead = dead_pid()
    for pid, status in ((str(dead), 1), ("0", 2)):
        fast, modules = psrec_imports("dump", pid, *flag)
        assert "click" not in modules
        by_click = psrec("dump", *flag, "--", pid)
        assert_error(fast, status)
        assert (fast.returncode, fast.stdout, fast.stderr) == \
            (by_click.returncode, by_click.stdout, by_click.stderr)


def test_json_of_a_recording_is_wrong_usage(tmp_path: Path) -> None:
    """--json is for a process: given a recording, psrec says so and points to psrec info
    --json (exit status 2); `psrec dump FILE` is unchanged, a file named like a pid included."""
    golden = DATA / "two_threads.psr"
    r = psrec("dump", str(golden), "--json")
    assert_error(r, 2, "--json", str(golden))
    assert f"psrec info --json {golden}" in r.stderr, r.stderr
    r = psrec("dump", str(golden))
    assert r.returncode == 0 and "THREAD" in r.stdout, r.stderr
    numbered = tmp_path / "1"
    numbered.write_bytes(golden.read_bytes())
    r = subprocess.run([sys.executable, "-m", "psrec", "dump", "1"], capture_output=True,
                       text=True, timeout=60, cwd=str(tmp_path))
    assert r.returncode == 0 and "THREAD" in r.stdout, r.stderr


def test_other_command_lines_still_go_to_click() -> None:
    """What is not `psrec [-v] dump PID [--json]` is click's to parse: its usage errors, help
    and version."""
    r = psrec("dump", "--jsn", "1")
    assert r.returncode == 2 and "No such option '--jsn'. Did you mean '--json'?" in r.stderr, \
        r.stderr
    r = psrec("dump", "1", "2")
    assert r.returncode == 2 and "Usage:" in r.stderr, r.stderr
    r = psrec("dump", "--help")
    assert r.returncode == 0 and "--json" in r.stdout and "TARGET" in r.stdout, r.stdout
    r = psrec("--version")
    assert r.returncode == 0 and re.fullmatch(r"psrec, version \S+\n", r.stdout), r.stdout


@pytest.mark.parametrize("free_threaded", [False, True], ids=["gil", "free-threaded"])
def test_json_of_what_cannot_be_told(free_threaded: bool) -> None:
    """Unknown statuses, a missing OS thread id or command line, a thread without frames, a
    truncated stack, a read error and names that need escaping: null, flags and text, printed
    as json.dumps(indent=2) prints them, and the text form says the same."""
    from psrec.recorder._dump import dump_json, format_dump, render_json

    def thread(**kw: Any) -> dict[str, Any]:
        return {"python_tid": 0x7F00, "native_tid": 42, "name": "w", "gil_known": True,
                "gil_held": True, "cpu_known": True, "on_cpu": False, "truncated": False,
                "error": "", "frames": [("/a/b.py", "f", 3), ("/a/b.py", "<module>", 1)], **kw}

    native = {
        "info": {"pid": 7, "command": "", "executable": "/usr/bin/python3", "binary": "/lib/x",
                 "version": "3.14.0", "free_threaded": free_threaded},
        "threads": [thread(), thread(gil_known=False, cpu_known=False, native_tid=0),
                    thread(name='q"\\\x1bü名', frames=[]), thread(truncated=True),
                    thread(error="stack read torn", frames=[])],
    }
    doc = dump_json(native)
    text = render_json(doc)
    assert text == json.dumps(doc, indent=2)
    assert json.loads(text) == doc
    status = "attached" if free_threaded else "gil_held"
    assert doc["command"] is None and doc["free_threaded"] is free_threaded
    t = doc["threads"]
    assert [th[status] for th in t] == [True, None, True, True, True]
    assert all(("gil_held" if free_threaded else "attached") not in th for th in t)
    assert [th["on_cpu"] for th in t] == [False, None, False, False, False]
    assert t[1]["native_tid"] is None and t[0]["native_tid"] == 42
    assert t[0]["frames"][0] == {"file": "/a/b.py", "function": "f", "line": 3}
    assert t[2]["frames"] == [] and t[2]["name"] == 'q"\\\x1bü名'
    assert t[3]["truncated"] is True and t[4]["error"] == "stack read torn"
    lines = format_dump(native)
    assert lines[0] == "Process 7: /usr/bin/python3"
    label = "attached: yes" if free_threaded else "gil: held"
    assert f"Thread 0x7f00 (tid 42) \"w\"  [{label}, cpu: idle]" in lines
    assert "    [truncated stack]" in lines and "    [stack read torn]" in lines
    assert "    [no Python frames]" in lines


@pytest.mark.parametrize("python", PYTHONS)
def test_a_stack_that_changes_faster_than_it_is_read_is_dumped_every_time(python: str) -> None:
    """A recursion to a random depth of 1 to 20 in a tight loop (rec_recursive.py): its stack
    changes faster than a copy of it takes. Each dump reads it again, then with the thread held
    still for the read (spec 10, rule 7): the stack is given in at least 99 of 100 dumps, and
    every stack given is one the program can have."""
    from psrec.recorder import dump_process

    given = 0
    bad: list[Any] = []
    with target(python, "rec_recursive.py") as t:
        for _ in range(100):
            main = next(th for th in dump_process(t.pid)["threads"]
                        if th["native_tid"] == t.pid)
            if main["error"] or not main["frames"]:
                continue
            given += 1
            names = [f[1] for f in reversed(main["frames"])]  # root first
            descend = [n for n in names if n == "descend"]
            if names[:2] != ["<module>", "main"] or len(descend) > 20 or (
                    descend and names[2:] != descend):
                bad.append(names)
    assert given >= 99, given
    assert not bad, bad[:3]


@pytest.mark.parametrize("how", ["--native", "--tasks"])
@pytest.mark.parametrize("python", PYTHONS)
def test_a_dump_that_stops_the_process_gives_each_threads_cpu_state_before_the_stop(
        python: str, how: str) -> None:
    """dump --native (and --tasks) stop the process for their read; each thread's CPU state
    is the one it had before the stop, as plain dump gives it: the busy thread running in
    most dumps (it waits for the GIL now and then, when the other threads take it), the one
    sleeping 50 ms at a time off its CPU in at least one (on a loaded host it waits for a CPU,
    and so counts as running, after many of its wake-ups). A state read while the process is
    stopped would be idle in every dump, for both."""
    states: dict[str, list[str]] = {"busy-worker": [], "sleepy-worker": []}
    with target(python, "rec_threads.py") as t:
        for _ in range(5):
            r = psrec("dump", how, str(t.pid))
            assert r.returncode == 0, r.stderr
            for line in r.stdout.splitlines():
                m = re.match(r'Thread \S+ \(tid \d+\) "([^"]+)"  \[.*cpu: (\w+)\]', line)
                if m and m.group(1) in states:
                    states[m.group(1)].append(m.group(2))
    assert states["busy-worker"].count("running") >= 3, states
    assert "idle" in states["sleepy-worker"], states
