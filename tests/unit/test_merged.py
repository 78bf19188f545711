"""Several recordings read as one (psrec.format.merged, spec section 11), checked against the
samples written into synthetic recordings: ids kept apart, times on one timeline, events and
tasks moved with their recordings, and the errors a merge can meet."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import psrec
import pytest
from analyzer_synth import BUSY, WALL_NS, Synth
from psrec.format import PsrWriter, open_recordings
from psrec.format import _constants as C
from psrec.format.errors import FormatError
from psrec.format.merged import source_of

# Two programs that share one function (shared.py:10 helper) and have one each of their own.
SHARED = ("shared.py", "helper", 10)
A_OWN = ("a.py", "serve", 20)
B_OWN = ("b.py", "crunch", 30)
LATER_S = 7  # b began this many seconds after a


def _program(path: str, host: str, own: tuple[str, str, int], wall_ns: int,
             passes: int) -> Synth:
    """Two threads, one named 'main' (renamed 'main-2' half way) and one 'worker' running an
    asyncio task; the worker's stack is the shared helper under the program's own function."""
    s = Synth(path, metadata={"hostname": host, "pid": 100 if host == "a" else 200},
              created_wall_ns=wall_ns, chunk_passes=50)
    s.thread("main", 1)
    s.thread("worker", 2)
    s.task(f"task-{host}", 0x1000, coroutine=own)
    for i in range(passes):
        ts = (i + 1) * s.interval_ticks
        if i == passes // 2:
            s.rename("main", ts, "main-2")
        s.sample_pass(ts, {"main": ((own,), BUSY, 500),
                           "worker": ((own, SHARED), BUSY, 800, f"task-{host}")})
        if i % 100 == 10:  # the task waits on something of its own recording's
            s.task_snapshot(ts, {f"task-{host}": (C.TASK_SUSPENDED, f"waits-{host}-{i}",
                                                  (own,), ())})
    s.close()
    return s


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> tuple[Synth, Synth]:
    d = tmp_path_factory.mktemp("merged")
    a = _program(str(d / "a.psr"), "a", A_OWN, WALL_NS, 300)
    b = _program(str(d / "b.psr"), "b", B_OWN, WALL_NS + LATER_S * 10**9, 200)
    return a, b


@pytest.mark.parametrize("native", [True, False])
def test_two_recordings_read_as_one_keep_their_threads_tasks_and_times(
        two: tuple[Synth, Synth], native: bool) -> None:
    a, b = two
    run = psrec.load([a.path, b.path], native=native)
    s = run.samples
    assert len(s) == len(a.samples) + len(b.samples)
    # each thread: its recording, its name at the end, its samples
    by_thread = Counter(s.thread)
    names = Counter()
    for ref, n in by_thread.items():
        src = run.recording_of(ref)
        assert src is not None
        names[(src.host, run.threads[ref].name)] += n
    assert names == {("a", "main-2"): 300, ("a", "worker"): 300,
                     ("b", "main-2"): 200, ("b", "worker"): 200}
    # b's samples lie LATER_S later on the merged timeline than in b alone
    b_refs = {ref for ref in by_thread if run.recording_of(ref).host == "b"}  # type: ignore
    b_times = [t for t, ref in zip(s.time, s.thread) if ref in b_refs]
    assert min(b_times) == pytest.approx(LATER_S + b.samples[0].ts * 1e-6)
    # the shared function is one function, with the samples of both
    rows = {(r.filename, r.name): r for r in run.functions()}
    assert rows[("shared.py", "helper")].total_samples == 500
    assert rows[("a.py", "serve")].total_samples == 600
    assert rows[("b.py", "crunch")].total_samples == 400
    # each task is its recording's, running on its worker
    tasks = {t.name: tid for tid, t in run.tasks.items()}
    assert set(tasks) == {"task-a", "task-b"}
    ran = Counter((run.tasks[k].name, run.recording_of(ref).host)  # type: ignore[union-attr]
                  for k, ref in zip(s.task, s.thread) if k)
    assert ran == {("task-a", "a"): 300, ("task-b", "b"): 200}
    assert run.tasks[tasks["task-b"]].coroutine.name == "crunch"  # type: ignore[union-attr]


def test_task_states_keep_their_tasks_and_what_they_wait_on(two: tuple[Synth, Synth]) -> None:
    a, b = two
    with open_recordings([a.path, b.path]) as rec:
        stream = rec.stream()
        for _ in stream:
            pass
        defs = rec.definitions()
        states = sorted((defs.tasks[e[2]].name, defs.strings[e[3] >> 2]) for e in stream.events
                        if e[0] == C.REC_TASK_STATE)
    assert states == sorted([("task-a", f"waits-a-{i}") for i in (10, 110, 210)]
                            + [("task-b", f"waits-b-{i}") for i in (10, 110)])


def test_selection_by_host_and_recording_and_a_window_on_the_merged_timeline(
        two: tuple[Synth, Synth]) -> None:
    a, b = two
    only_b = psrec.load([a.path, b.path], hosts="b")
    assert len(only_b.samples) == len(b.samples)
    assert psrec.load([a.path, b.path], recordings="a.psr").functions() == \
        psrec.load(a.path).functions()
    # a window of the merged timeline: only b's samples are past a's end
    late = psrec.load([a.path, b.path], start=LATER_S)
    assert len(late.samples) == len(b.samples)
    with pytest.raises(psrec.format.PsrecError, match="no recording from host 'c'"):
        psrec.load([a.path, b.path], hosts="c")


def test_a_folder_is_its_recordings_in_name_order(two: tuple[Synth, Synth]) -> None:
    a, _ = two
    with open_recordings(os.path.dirname(a.path)) as rec:
        rec.definitions()
        assert [s.host for s in rec.sources] == ["a", "b"]
        assert rec.path == os.path.dirname(a.path)


def test_recordings_of_other_tick_lengths_are_not_merged(two: tuple[Synth, Synth],
                                                         tmp_path: Path) -> None:
    odd = tmp_path / "odd.psr"
    PsrWriter(str(odd), metadata={"pid": 1}, created_wall_ns=WALL_NS, created_mono_ns=1,
              tick_ns=1).close({"samples": 0})
    with pytest.raises(FormatError, match="ticks of different lengths"):
        open_recordings([two[0].path, str(odd)])


def test_more_recordings_than_may_be_open_are_said_in_one_line(two: tuple[Synth, Synth],
                                                               tmp_path: Path) -> None:
    """Under a limit of 100 open files that cannot be raised, 200 recordings: one line that
    says the limit and what to do."""
    for i in range(200):
        os.link(two[0].path, tmp_path / f"r{i:03d}.psr")
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (100, 100)); "
            "from psrec.__main__ import main; sys.argv = ['psrec', 'report', sys.argv[1]]; "
            "main()")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    lines = r.stderr.splitlines()
    assert lines[0] == ("psrec: error: 200 recordings are more than this process may hold "
                        "open at once (36: its limit of open files)"), r.stderr
    assert "ulimit -n" in lines[1] and "Traceback" not in r.stderr


def test_processes_of_the_same_pid_in_two_recordings_keep_their_own_threads(
        tmp_path: Path) -> None:
    """Two hosts' programs under one pid: each thread's process is its own recording's."""
    paths = []
    for host, command in (("a", "python serve.py"), ("b", "python crunch.py")):
        s = Synth(str(tmp_path / f"{host}.psr"), metadata={"hostname": host})
        s.e.process_start(0, 4242, 1, command)
        s.thread("main", 1)
        for i in range(20):
            s.sample_pass((i + 1) * s.interval_ticks, {"main": ((A_OWN,), BUSY, 500)})
        paths.append(s.close())
    with open_recordings(paths) as rec:
        defs = rec.definitions()
        commands = {source_of(rec.sources, ref).host: defs.process_of(t).command  # type: ignore
                    for ref, t in defs.threads.items()}
    assert commands == {"a": "python serve.py", "b": "python crunch.py"}


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_files_of_one_recording_given_together_count_each_sample_once(
        tmp_path: Path, native: bool) -> None:
    """A recording with a snapshot of it, and with parts cut from it (as windows are), read as
    one in any order: each chunk of samples counts once, the others are said."""
    from format_helpers import read_samples
    from psrec.format.writer import snapshot

    whole = tmp_path / "whole.psr"
    s = Synth(str(whole), chunk_passes=20)
    s.thread("main", 1)
    for i in range(100):
        s.sample_pass((i + 1) * s.interval_ticks, {"main": ((A_OWN, SHARED), BUSY, 500)})
    s.close()
    snap, first, second = tmp_path / "snap.psr", tmp_path / "p1.psr", tmp_path / "p2.psr"
    snapshot(whole, snap)
    snapshot(whole, first, only=slice(0, 3))
    snapshot(whole, second, only=slice(2, 5))
    with open_recordings(str(whole)) as rec:
        want = sorted(read_samples(rec, native)[0])
    for files in ([whole, snap], [snap, whole], [first, whole], [second, first, snap],
                  [first, second]):
        with open_recordings([str(f) for f in files]) as rec:
            got = sorted(read_samples(rec, native)[0])
            warnings = list(rec.warnings)
        assert got == want, [f.name for f in files]  # (p1 and p2: chunks 0-2 and 2-4)
        assert any("given twice" in w for w in warnings), (files, warnings)
