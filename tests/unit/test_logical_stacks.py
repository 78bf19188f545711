"""Logical stacks of asyncio tasks (View.logical, analyzer/logical.py) on a synthetic
recording whose task snapshots and samples are known: a task's samples go under the tasks that
await it at that time, each named by a <task> frame with its coroutines down to its await; the
event loop's frames below the task's coroutine are left out; a task no snapshot had seen
awaited yet takes the awaits of the next snapshot; a chain of awaits that comes back on itself
ends; samples outside tasks keep their stacks; both engines agree, in every output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analyzer_synth import BUSY, Synth
from psrec.analyzer.profile import Profile
from psrec.analyzer.view import View
from psrec.format import _constants as C
from psrec.format import native_available

pytestmark = pytest.mark.skipif(
    not native_available(), reason="the native codec (psrec.format._format) is not built"
)

RUN = ("asyncio/base_events.py", "run_forever", 600)
STEP = ("asyncio/events.py", "_run", 80)
HANDLER = ("app.py", "handler", 20)
HANDLER_AWAIT = ("app.py", "handler", 24)
CHILD = ("app.py", "child", 40)
WORK = ("app.py", "work", 50)
POLL = ("selectors.py", "select", 450)
LOOP = (RUN, STEP)


def recording(path: str) -> Synth:
    s = Synth(path)
    s.thread("MainThread", 100)
    s.task("parent", 0x1000, coroutine=HANDLER)
    s.task("child-1", 0x2000, coroutine=CHILD)
    s.task("child-2", 0x3000, coroutine=CHILD)
    s.task("loop-a", 0x4000, coroutine=CHILD)
    s.task("loop-b", 0x5000, coroutine=CHILD)
    s.task("bare", 0x6000)  # its coroutine not known

    def snap(ts: int, parent_awaits: tuple[str, ...]) -> None:
        s.task_snapshot(ts, {
            "parent": (C.TASK_SUSPENDED, "_GatheringFuture", (HANDLER_AWAIT,), parent_awaits),
            "loop-a": (C.TASK_SUSPENDED, "Task", (CHILD,), ("loop-b",)),
            "loop-b": (C.TASK_SUSPENDED, "Task", (CHILD,), ("loop-a",)),
        })

    snap(1000, ("child-1",))
    snap(3000, ("child-1", "child-2"))  # child-2 ran before this snapshot saw it awaited
    snap(5000, ())  # from here on nothing awaits the children
    snap(7000, ())
    ts = 1000
    while ts < 7000:
        ts += 100
        task = ("child-1", "child-2", "loop-a", "bare", "")[ts // 100 % 5]
        stack = (*LOOP, POLL) if not task else (*LOOP, CHILD, WORK)
        s.sample_pass(ts, {"MainThread": (stack, BUSY, 100, *((task,) if task else ()))})
    s.close()
    return s


def stacks(p: Profile) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in p.cells:
        key = ";".join(k.name if k.filename != "<task>" else f"[{k.name}]"
                       for k in p.keys(c.node))
        out[key] = out.get(key, 0) + c.samples
    return out


@pytest.mark.parametrize("native", [False, True], ids=["python", "native"])
def test_samples_of_tasks_go_under_the_tasks_awaiting_them(tmp_path: Path,
                                                          native: bool) -> None:
    s = recording(str(tmp_path / "t.psr"))
    p = Profile.load(s.path, View(logical=True), native=native)
    got = stacks(p)

    def count(task: str, lo: int, hi: int) -> int:
        return sum(1 for x in s.samples if x.task == task and lo <= x.ts < hi)

    want = {
        # awaited by the parent until the snapshot at 5000 ended it
        "[parent];handler;[child-1];child;work": count("child-1", 0, 5000),
        "[child-1];child;work": count("child-1", 5000, 1 << 40),
        # from 1000 to 3000 no snapshot had seen child-2 awaited: the next one's awaits
        "[parent];handler;[child-2];child;work": count("child-2", 0, 5000),
        "[child-2];child;work": count("child-2", 5000, 1 << 40),
        # a cycle of awaits ends at the first task seen twice
        "[loop-b];child;[loop-a];child;work": count("loop-a", 0, 1 << 40),
        # a task whose coroutine is not known keeps its whole stack under its frame
        "[bare];run_forever;_run;child;work": count("bare", 0, 1 << 40),
        # outside tasks: the loop's own stack
        "run_forever;_run;select": sum(1 for x in s.samples if not x.task),
    }
    assert got == {k: v for k, v in want.items() if v}, got
    # The handler's frame is its line at the await.
    lines = {p.defs.frame(f).line for c in p.cells for f in p.stack(c.node)
             if p.defs.frame(f).function.name == "handler"}
    assert lines == {HANDLER_AWAIT[2]}


def test_every_output_shows_the_logical_stacks(tmp_path: Path) -> None:
    """The collapsed stacks, speedscope (its timelines), the API's samples and pprof's task
    labels show the same logical stacks as the cells."""
    import gzip

    import psrec as api
    from click.testing import CliRunner
    from psrec.cli import main

    s = recording(str(tmp_path / "t.psr"))
    want = stacks(Profile.load(s.path, View(logical=True)))
    # the API's samples: each sample's stack is a logical one
    run = api.load(s.path, logical=True)
    got: dict[str, int] = {}
    for node in run.samples.stack:
        key = ";".join(f"[{f.function.name}]" if f.function.filename == "<task>"
                       else f.function.name for f in run.stack(node))
        got[key] = got.get(key, 0) + 1
    assert got == want
    r = CliRunner().invoke(main, ["report", s.path, "--collapsed", "--logical", "-o", "-"])
    assert r.exit_code == 0, r.output
    collapsed = {}
    for line in r.output.splitlines():
        stack, _, n = line.rpartition(" ")
        collapsed[";".join(f"[{f.partition(' (')[0]}]" if "(<task>:" in f
                           else f.partition(" (")[0] for f in stack.split(";"))] = int(n)
    assert collapsed == want
    # speedscope: every thread's timeline has the task frames
    out = tmp_path / "t.speedscope.json"
    r = CliRunner().invoke(main, ["export", s.path, "--speedscope", "--logical", "-o", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    from test_analyzer_speedscope import validate

    validate(doc)  # speedscope's own schema
    names = [f["name"] for f in doc["shared"]["frames"] if f.get("file") == "<task>"]
    assert sorted(names) == ["bare", "child-1", "child-2", "loop-a", "loop-b", "parent"]
    pb = pytest.importorskip("psrec.analyzer.proto.profile_pb2",
                             reason="the protobuf package (>= 7.35, Python 3.10+) is not "
                                    "installed")
    out = tmp_path / "t.pb.gz"
    r = CliRunner().invoke(main, ["export", s.path, "--pprof", "--logical", "-o", str(out)])
    assert r.exit_code == 0, r.output
    prof = pb.Profile()
    prof.ParseFromString(gzip.decompress(out.read_bytes()))
    st = list(prof.string_table)
    by_task: dict[str, int] = {}
    for smp in prof.sample:
        labels = {st[lb.key]: st[lb.str] for lb in smp.label if lb.str}
        by_task[labels.get("task", "")] = by_task.get(labels.get("task", ""), 0) + smp.value[0]
    assert by_task == {
        "": sum(1 for x in s.samples if not x.task),
        **{t: sum(1 for x in s.samples if x.task == t)
           for t in ("child-1", "child-2", "loop-a", "bare")}}


def test_a_recording_without_tasks_says_so(tmp_path: Path) -> None:
    from analyzer_synth import two_thread_recording
    from click.testing import CliRunner
    from psrec.cli import main

    s = two_thread_recording(str(tmp_path / "plain.psr"), passes=50)
    r = CliRunner().invoke(main, ["report", s.path, "--logical"])
    assert r.exit_code != 0
    assert "--logical" in r.output and "has no asyncio tasks" in r.output
    assert "Traceback" not in r.output


def test_collapsed_waits_give_each_await_its_time(tmp_path: Path) -> None:
    """--collapsed --waits: each task's waiting time (the task snapshots' time, less its
    running samples') under its logical stack, ending at its coroutines' await and what it
    awaited, in microseconds; the options it cannot honour are refused."""
    from click.testing import CliRunner
    from psrec.cli import main

    s = recording(str(tmp_path / "t.psr"))
    r = CliRunner().invoke(main, ["report", s.path, "--collapsed", "--waits", "-o", "-"])
    assert r.exit_code == 0, r.output
    got = {line.rpartition(" ")[0]: int(line.rpartition(" ")[2])
           for line in r.output.splitlines()}
    # The parent never ran: suspended at its gather from the first snapshot (1000) to the last
    # (7000), 6,000 ticks of 1 us.
    assert got["parent (<task>:0);handler (app.py:20);awaits _GatheringFuture (<await>:0)"] \
        == 6000
    # loop-a ran some samples (100 us each): the rest of its life it waited on loop-b.
    ran = sum(x.weight for x in s.samples if x.task == "loop-a")
    assert got["loop-b (<task>:0);child (app.py:40);loop-a (<task>:0);child (app.py:40);"
               "awaits Task (<await>:0)"] == 6000 - ran
    # (a cycle of awaits, which asyncio does not make, ends at a task seen twice)
    assert sum(n for stack, n in got.items()
               if stack.endswith("loop-b (<task>:0);child (app.py:40);awaits Task (<await>:0)")
               ) == 6000
    for args, words in ((["--per-thread"], "no thread's time"), (["--mode", "cpu"], "wall time")):
        r = CliRunner().invoke(main, ["report", s.path, "--collapsed", "--waits", *args])
        assert r.exit_code == 2 and words in r.output, r.output
    from analyzer_synth import two_thread_recording

    plain = two_thread_recording(str(tmp_path / "plain.psr"), passes=50)
    r = CliRunner().invoke(main, ["report", plain.path, "--collapsed", "--waits"])
    assert r.exit_code == 1 and "no asyncio task" in r.output, r.output


def test_speedscope_waits_profile(tmp_path: Path) -> None:
    """export --speedscope --waits: one more profile, of the tasks' waiting time by stack down
    to the await (the same stacks and microseconds as --collapsed --waits), within speedscope's
    schema."""
    from click.testing import CliRunner
    from psrec.analyzer.speedscope import WAITS_PROFILE, check_consistency
    from psrec.cli import main
    from test_analyzer_speedscope import validate

    s = recording(str(tmp_path / "t.psr"))
    out = tmp_path / "t.speedscope.json"
    r = CliRunner().invoke(main, ["export", s.path, "--speedscope", "--waits", "-o", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    validate(doc)
    assert not check_consistency(doc)
    frames = doc["shared"]["frames"]
    waits = [p for p in doc["profiles"] if p["name"] == WAITS_PROFILE]
    assert len(waits) == 1 and waits[0]["unit"] == "microseconds"
    got = {";".join(frames[i]["name"] for i in stack): w
           for stack, w in zip(waits[0]["samples"], waits[0]["weights"])}
    c = CliRunner().invoke(main, ["report", s.path, "--collapsed", "--waits", "-o", "-"])
    want = {";".join(f.rpartition(" (")[0] for f in line.rpartition(" ")[0].split(";")):
            int(line.rpartition(" ")[2]) for line in c.output.splitlines()}
    assert got == want and got["parent;handler;awaits _GatheringFuture"] == 6000, got
    # the threads' profiles are there as ever
    assert any(p["name"].startswith("MainThread") for p in doc["profiles"])


def test_pprof_waits_samples(tmp_path: Path) -> None:
    """export --pprof --waits: samples of wall time only for the tasks' waits, labelled with
    the task and its state, on each task's stack down to its await; the same time spread over
    --window's profiles."""
    import gzip

    from click.testing import CliRunner
    from psrec.cli import main

    pb = pytest.importorskip("psrec.analyzer.proto.profile_pb2",
                             reason="the protobuf package (>= 7.35, Python 3.10+) is not "
                                    "installed")
    s = recording(str(tmp_path / "t.psr"))

    def waits_of(path: Path) -> dict[tuple[str, str, str], int]:
        prof = pb.Profile()
        prof.ParseFromString(gzip.decompress(path.read_bytes()))
        st = list(prof.string_table)
        funcs = {f.id: st[f.name] for f in prof.function}
        locs = {loc.id: funcs[loc.line[0].function_id] for loc in prof.location}
        out: dict[tuple[str, str, str], int] = {}
        for smp in prof.sample:
            labels = {st[lb.key]: st[lb.str] for lb in smp.label if lb.str}
            if "task_state" not in labels:
                continue
            assert smp.value[0] == 0 and smp.value[2] == 0
            stack = ";".join(locs[i] for i in reversed(smp.location_id))
            key = (stack, labels["task"], labels["task_state"])
            out[key] = out.get(key, 0) + smp.value[1]
        return out

    out = tmp_path / "t.pb.gz"
    r = CliRunner().invoke(main, ["export", s.path, "--pprof", "--waits", "-o", str(out)])
    assert r.exit_code == 0, r.output
    got = waits_of(out)
    assert got[("parent;handler;awaits _GatheringFuture", "parent", "suspended")] == 6_000_000
    ran = sum(x.weight for x in s.samples if x.task == "loop-a")
    assert got[("loop-b;child;loop-a;child;awaits Task", "loop-a", "suspended")] \
        == (6000 - ran) * 1000
    r = CliRunner().invoke(main, ["export", s.path, "--pprof", "--waits", "--window", "0.002",
                                  "-o", str(tmp_path / "w")])
    assert r.exit_code == 0, r.output
    windows = sorted(tmp_path.glob("w.*.pb.gz"))
    assert len(windows) == 4, windows
    parent = ("parent;handler;awaits _GatheringFuture", "parent", "suspended")
    assert sum(waits_of(w).get(parent, 0) for w in windows) == 6_000_000


def test_a_wait_goes_under_the_coroutines_its_awaiter_suspends_in(tmp_path: Path) -> None:
    """A task's wait that begins while the task awaiting it still runs (a reading spread over
    several passes sees the awaiter running, with no coroutines of its own to show, and the
    task it made already waiting): the wait goes under the coroutines the awaiter suspends in
    at the next snapshot, for all of its time, not under the bare task."""
    from click.testing import CliRunner
    from psrec.cli import main

    main_await = ("app.py", "main", 68)
    beta_await = ("app.py", "beta_body", 30)
    s = Synth(str(tmp_path / "t.psr"))
    s.thread("MainThread", 100)
    s.task("root", 0x1000, coroutine=("app.py", "main", 60))
    s.task("beta", 0x2000, coroutine=("app.py", "beta_body", 28))
    beta = (C.TASK_SUSPENDED, "Task", (beta_await,), ())
    s.task_snapshot(1000, {"root": (C.TASK_RUNNING, "", (), ("beta",)), "beta": beta})
    for ts in (2000, 7000):
        s.task_snapshot(ts, {"root": (C.TASK_SUSPENDED, "_GatheringFuture", (main_await,),
                                      ("beta",)), "beta": beta})
    for ts in range(1100, 7000, 100):
        s.sample_pass(ts, {"MainThread": ((*LOOP, POLL), BUSY, 100)})
    s.close()
    r = CliRunner().invoke(main, ["report", s.path, "--collapsed", "--waits", "-o", "-"])
    assert r.exit_code == 0, r.output
    got = {line.rpartition(" ")[0]: int(line.rpartition(" ")[2])
           for line in r.output.splitlines()}
    under = {k: n for k, n in got.items() if ";beta (<task>:0);" in k}
    assert list(under.values()) == [6000], got
    assert next(iter(under)).startswith("root (<task>:0);main ("), got
