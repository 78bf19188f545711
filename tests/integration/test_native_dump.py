"""`psrec dump --native PID` on live targets, for every interpreter found: native (C) frames
interleaved with Python frames, checked against what the target does (a C extension with a
known chain of calls, a callback from C into Python, threads blocked in known calls, a thread
waiting for the GIL) and, frame for frame, against gdb on the same stopped process."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import native_ext
import pytest
from native_ext import CALLBACK, CHAIN, WAITS, waits_for_the_gil
from rec_live import (
    ROOTS,
    Target,
    assert_lean,
    is_free_threaded,
    psrec,
    psrec_imports,
    python_params,
    target,
)

pytestmark = [pytest.mark.live, pytest.mark.timeout(300)]
PYTHONS = python_params()
GDB_SCRIPT = Path(__file__).resolve().parent / "gdb_frames.py"
# Dumps taken of one target: each is one sample of every thread.
DUMPS = 20


@contextmanager
def native_target(python: str, *args: str) -> Iterator[Target]:
    with target(python, "rec_native.py", str(native_ext.build(python)), *args) as t:
        yield t


def dump(pid: int, *extra: str) -> dict[str, Any]:
    r, modules = psrec_imports("dump", "--native", "--json", str(pid), *extra)
    assert r.returncode == 0, r.stderr
    # Without the command line's machinery, as a Python-only dump.
    assert_lean(modules)
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


def thread(doc: dict[str, Any], name: str) -> dict[str, Any]:
    found = [t for t in doc["threads"] if t["name"] == name]
    assert len(found) == 1, [t["name"] for t in doc["threads"]]
    return found[0]


def names(stack: list[dict[str, Any]]) -> list[str]:
    """A whole stack's functions, innermost first, Python and named native frames alike."""
    return [f["function"] for f in stack if f["function"]]


def above(t: dict[str, Any], function: str) -> list[str]:
    """The native functions between the innermost frame and the Python frame `function`
    (named ones), innermost first; the thread's stacks must pair off."""
    stack = t["stack"]
    assert stack is not None, f"native and Python stacks do not pair off: {t}"
    for i, f in enumerate(stack):
        if f["kind"] == "python":
            assert f["function"] == function, names(stack)
            return [g["function"] for g in stack[:i] if g["function"]]
    raise AssertionError(f"no Python frame in {names(stack)}")


@pytest.mark.parametrize("python", PYTHONS)
def test_c_chain_and_callback(python: str) -> None:
    chain = callback = 0
    with native_target(python) as t:
        for _ in range(DUMPS):
            doc = dump(t.pid)
            spinner = thread(doc, "c-spinner")
            assert spinner["native_end"] == "root", spinner
            if spinner["stack"] and names(spinner["stack"])[:5] == CHAIN:
                chain += 1
            cb = thread(doc, "c-callback")
            # Python -> C -> Python, in that order, with no other Python frame between them.
            seq = [f["function"] for f in cb["stack"] or []
                   if f["kind"] == "python" or f["function"] in CALLBACK]
            if seq[:5] == CALLBACK:
                callback += 1
            else:
                print("callback:", names(cb["stack"] or []) or cb)
    # At least 95% of the spinner's dumps end in exactly the chain, under its Python caller;
    # the callback's interleaving is exact in every dump taken in the callback.
    assert chain >= 0.95 * DUMPS, f"{chain} of {DUMPS} dumps show the chain"
    assert callback >= 0.95 * DUMPS, f"{callback} of {DUMPS} dumps show Python -> C -> Python"




@pytest.mark.parametrize("python", PYTHONS)
def test_blocked_threads_show_what_they_wait_on(python: str) -> None:
    with native_target(python) as t:
        doc = dump(t.pid)
        tasks = len(os.listdir(f"/proc/{t.pid}/task"))
    for name, (caller, wait) in WAITS.items():
        th = thread(doc, name)
        assert th["native_end"] == "root", th
        got = above(th, caller)
        assert any(wait.search(n) for n in got), f"{name}: {got} under {caller}"
    # Every thread of the process is listed once.
    tids = [th["native_tid"] for th in doc["threads"]]
    assert len(tids) == len(set(tids)) == tasks


@pytest.mark.parametrize("python", PYTHONS)
def test_thread_waiting_for_the_gil(python: str) -> None:
    if is_free_threaded(python):
        pytest.skip("a free-threaded build has no GIL to wait for")
    waiting = 0
    with native_target(python, "gil") as t:
        for _ in range(DUMPS):
            got = above(thread(dump(t.pid), "gil-waiter"), "gil_waiter")
            if waits_for_the_gil(got):
                waiting += 1
    # The hog holds the GIL 5 ms at a time; the waiter's sleeps are 0.1 ms.
    assert waiting >= DUMPS // 2, f"{waiting} of {DUMPS} dumps show the wait for the GIL"


def gdb_threads(pid: int, in_root: bool) -> dict[int, list[dict[str, Any]]]:
    # A target in a root of its own (a container): gdb reads its files there.
    root = ["-iex", f"set sysroot /proc/{pid}/root"] if in_root else []
    r = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", *root, "-x", str(GDB_SCRIPT)],
                       capture_output=True, text=True, timeout=240)
    line = next((x for x in r.stdout.splitlines() if x.startswith("PSREC-GDB ")), None)
    assert line, f"gdb printed no frames: {r.stdout[-800:]} {r.stderr[-800:]}"
    return {int(k): v for k, v in json.loads(line[len("PSREC-GDB "):]).items()}


def base(name: str) -> str:
    """A function's name without the suffix of a compiler's part of it (.cold, .part.0)."""
    return name.split(".", 1)[0]


def dump_and_gdb(python: str, pid: int) -> tuple[dict[str, Any], dict[int, list[Any]]]:
    """psrec's native dump and gdb's frames of a target stopped (SIGSTOP) between them."""
    os.kill(pid, signal.SIGSTOP)
    try:
        doc = dump(pid)
        truth = gdb_threads(pid, python in ROOTS)
    finally:
        os.kill(pid, signal.SIGCONT)
    if python in ROOTS and any(f and f[-1]["pc"] == 0 for f in truth.values()):
        pytest.skip("gdb lost its way in this target's own root (its unwinding ends at pc 0): "
                    "gdb 13 does not read the files of a target chrooted in a mount namespace")
    return doc, truth


def assert_agrees(name: str, ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> None:
    """The same pcs, frame by frame, and each named function where gdb's starts."""
    assert [f["pc"] for f in ours] == [f["pc"] for f in theirs], (
        name, [hex(f["pc"]) for f in ours], [hex(f["pc"]) for f in theirs])
    for f, g in zip(ours, theirs):
        if not f["function"]:
            continue  # no symbol in the binary: gdb may know one from debug files
        same_start = g["start"] is not None and f["pc"] - f["offset"] == g["start"]
        assert same_start or base(f["function"]) == base(g["name"] or ""), (name, f, g)


@pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed (Debian's gdb)")
@pytest.mark.parametrize("python", PYTHONS)
def test_native_frames_agree_with_gdb(python: str) -> None:
    with native_target(python) as t:
        doc, truth = dump_and_gdb(python, t.pid)
    assert set(truth) == {th["native_tid"] for th in doc["threads"]}
    for th in doc["threads"]:
        assert_agrees(th["name"], th["native"], truth[th["native_tid"]])


@pytest.mark.parametrize("python", PYTHONS[:1])
def test_native_needs_a_pid(python: str, tmp_path: Path) -> None:
    """--native reads a live process: with a recording it is a usage error, not ignored."""
    rec = tmp_path / "x.psr"
    rec.write_bytes(b"")
    r = psrec("dump", "--native", str(rec))
    assert r.returncode == 2 and "--native reads a live process" in r.stderr, r.stderr
