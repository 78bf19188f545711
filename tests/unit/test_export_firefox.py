"""`psrec export --firefox`: the processed profile's tables are whole and consistent (every
column as long as its table, stacks in topological order), each thread's samples carry its
sample counts, its CPU time and its stacks in time order, and its GIL-held time is marked.
(The Firefox Profiler's own loader reads it in tests/e2e/test_firefox_profiler_cli.py.)"""

from __future__ import annotations

import json
from pathlib import Path

from analyzer_synth import BUSY, MAIN, Synth, two_thread_recording
from click.testing import CliRunner
from psrec.cli import main


def _export(path: str, out: Path, *args: str) -> dict:
    r = CliRunner().invoke(main, ["export", "--firefox", path, "-o", str(out), *args])
    assert r.exit_code == 0, r.output
    return json.loads(out.read_text())


def _tables_whole(doc: dict) -> None:
    for name, table in doc["shared"].items():
        if isinstance(table, dict):
            for col, values in table.items():
                if col != "length":
                    assert len(values) == table["length"], (name, col)
    for t in doc["threads"]:
        for table in (t["samples"], t["markers"]):
            for col, values in table.items():
                if isinstance(values, list):
                    assert len(values) == table["length"], (t["name"], col)
    offsets = doc["shared"]["stackTable"]["prefixOffset"]
    assert all(off == 0 or 0 < off <= i for i, off in enumerate(offsets))


def _stack(doc: dict, s: int) -> list[str]:
    sh = doc["shared"]
    names = []
    while True:
        func = sh["frameTable"]["func"][sh["stackTable"]["frame"][s]]
        names.append(sh["stringArray"][sh["funcTable"]["name"][func]])
        off = sh["stackTable"]["prefixOffset"][s]
        if off == 0:
            return names[::-1]
        s -= off


def test_samples_cpu_stacks_and_gil_markers(tmp_path: Path) -> None:
    s = two_thread_recording(str(tmp_path / "two.psr"), jitter=False)
    doc = _export(s.path, tmp_path / "two.json")
    assert doc["meta"]["preprocessedProfileVersion"] == 70
    assert doc["meta"]["sampleUnits"] == {"time": "ms", "eventDelay": "ms",
                                          "threadCPUDelta": "ns"}
    assert doc["meta"]["interval"] == 1.0
    _tables_whole(doc)
    threads = {t["name"]: t for t in doc["threads"]}
    assert set(threads) == {"MainThread", "worker"}
    for name, t in threads.items():
        mine = [x for x in s.samples if x.thread == name]
        smp = t["samples"]
        assert sum(smp["weight"]) == len(mine)
        assert sum(smp["threadCPUDelta"]) == sum(x.cpu for x in mine) * 1000
        assert smp["threadCPUDelta"][0] == 0
        assert smp["time"] == sorted(smp["time"])
        assert t["tid"] == s.tids[name] and t["isMainThread"] == (name == "MainThread")
        # each sample's stack is the one recorded at its time
        offset = mine[0].ts / 1000 - smp["time"][0]  # ms of ts 0 on the profile's clock
        at = {round(x.ts / 1000 - offset, 6): [f for _, f, _ in x.stack] for x in mine}
        for stack, time in zip(smp["stack"], smp["time"]):
            assert _stack(doc, stack) == at[round(time, 6)]
    # MainThread held the GIL throughout: one marker over the whole recording; the worker none
    main_markers = threads["MainThread"]["markers"]
    assert main_markers["length"] == 1
    assert doc["shared"]["stringArray"][main_markers["name"][0]] == "GIL held"
    span = main_markers["endTime"][0] - main_markers["startTime"][0]
    assert abs(span - (len(s.samples) / 2)) <= 2.0  # ms: one sample a ms
    assert threads["worker"]["markers"]["length"] == 0


def test_bursts_make_one_marker_each(tmp_path: Path) -> None:
    s = Synth(str(tmp_path / "bursts.psr"))
    s.thread("MainThread", 7)
    busy, idle = ((MAIN, ("app.py", "burn", 12)), BUSY, 1000), ((MAIN, ("app.py", "nap", 22)), 0, 0)
    for i in range(1000):  # 10 bursts of 20 ms in 100 ms
        s.sample_pass(i * 1000, {"MainThread": busy if i % 100 < 20 else idle})
    s.close()
    doc = _export(s.path, tmp_path / "b.json")
    _tables_whole(doc)
    m = doc["threads"][0]["markers"]
    assert m["length"] == 10
    for a, b in zip(m["startTime"], m["endTime"]):
        assert 19.0 <= b - a <= 21.0


def test_split_timelines_native_and_python_agree(tmp_path: Path) -> None:
    from psrec.analyzer.profile import Profile, View

    s = Synth(str(tmp_path / "gaps.psr"))
    s.thread("MainThread", 7)
    busy, idle = ((MAIN, ("app.py", "burn", 12)), BUSY, 1000), ((MAIN, ("app.py", "nap", 22)), 0, 0)
    for i in range(300):
        s.sample_pass(i * 1000, {"MainThread": busy if i % 30 < 7 else idle})
    s.close()
    runs = []
    for native in (True, False):
        for split in ("split", True):
            p = Profile.load(s.path, View(mode="gil"), timelines=split, native=native)
            assert p.timelines is not None
            r = next(iter(p.timelines.values()))
            runs.append([list(c) for c in (r.node, r.count, r.weight, r.cpu, r.first_ts)])
    assert runs[0] == runs[2] and runs[1] == runs[3]
    assert len(runs[0][0]) == 10 and len(runs[1][0]) == 1  # ten bursts; joined without split


def _category(doc: dict, stack: int) -> str:
    sh = doc["shared"]
    return doc["meta"]["categories"][sh["frameTable"]["category"][sh["stackTable"]["frame"][stack]]
                                     ]["name"]


def test_off_cpu_samples_are_idle_and_every_thread_shows(tmp_path: Path) -> None:
    """A sample off its CPU is in the Idle category (the app takes a sample's category from its
    innermost frame), one on a CPU in Python, the same stack either way; every thread starts
    visible and the one that used the most CPU selected."""
    s = Synth(str(tmp_path / "naps.psr"))
    s.thread("sleeper", 7)
    s.thread("MainThread", 8)
    s.thread("napper", 9)
    nap = (MAIN, ("app.py", "nap", 22))
    for i in range(400):
        s.sample_pass(i * 1000, {
            "sleeper": (nap, 0, 0),
            "MainThread": ((MAIN, ("app.py", "burn", 12)), BUSY, 1000),
            # the same stack on and off its CPU, in turns of 50 samples
            "napper": (nap, BUSY if i % 100 < 50 else 0, 1000 if i % 100 < 50 else 0)})
    s.close()
    doc = _export(s.path, tmp_path / "naps.json")
    _tables_whole(doc)
    names = [t["name"] for t in doc["threads"]]
    assert doc["meta"]["initialVisibleThreads"] == list(range(len(names)))
    assert doc["meta"]["initialSelectedThreads"] == [names.index("MainThread")]
    threads = dict(zip(names, doc["threads"]))
    for name, want in (("sleeper", {"Idle": 400}), ("MainThread", {"Python": 400}),
                       ("napper", {"Idle": 200, "Python": 200})):
        smp = threads[name]["samples"]
        got: dict[str, int] = {}
        for stack, w in zip(smp["stack"], smp["weight"]):
            if w:
                got[_category(doc, stack)] = got.get(_category(doc, stack), 0) + w
                assert _stack(doc, stack)[-1] == ("burn" if name == "MainThread" else "nap")
        assert got == want, name
    napper = threads["napper"]["samples"]
    assert napper["weight"][:-1] == [50] * 8  # runs split where the CPU state changes
    assert sum(napper["threadCPUDelta"]) == 200 * 1000 * 1000


def test_gil_wait_markers_where_the_recording_knows_them(tmp_path: Path) -> None:
    """GIL wait: markers for the spans a thread waited to take the GIL (3.15+); before 3.15 no
    such markers, and the summary and the profile's meta say why, once."""
    from analyzer_synth import GIL

    requested = 0x04 | 0x40  # GIL_REQUESTED, GIL_REQUESTED_KNOWN
    for version, waits in (("3.15.2", 4), ("3.11.7", 0)):
        s = Synth(str(tmp_path / f"wait{version}.psr"), metadata={"python_version": version})
        s.thread("MainThread", 7)
        s.thread("web", 8)
        for i in range(400):  # web waits 30 ms in every 100 while MainThread holds the GIL
            s.sample_pass(i * 1000, {
                "MainThread": ((MAIN, ("app.py", "burn", 12)), GIL | 0x02, 1000),
                "web": ((MAIN, ("web.py", "handle", 32)),
                        requested if i % 100 < 30 else 0, 0)})
        s.close()
        out = tmp_path / f"wait{version}.json"
        r = CliRunner().invoke(main, ["export", "--firefox", s.path, "-o", str(out)])
        assert r.exit_code == 0, r.output
        doc = json.loads(out.read_text())
        _tables_whole(doc)
        web = next(t for t in doc["threads"] if t["name"] == "web")["markers"]
        names = [doc["shared"]["stringArray"][n] for n in web["name"]]
        assert names.count("GIL wait") == waits, names
        for a, b, name in zip(web["startTime"], web["endTime"], names):
            assert 29.0 <= b - a <= 31.0, (name, a, b)
        if waits:
            assert "4 GIL-wait markers" in r.output and "GIL wait markers:" not in \
                doc["meta"]["misc"]
        else:
            assert r.output.count("does not say which threads wait for the GIL") == 1, r.output
            assert "no GIL wait markers: Python 3.11.7" in doc["meta"]["misc"]
