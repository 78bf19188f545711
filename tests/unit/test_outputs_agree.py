"""Every output tells the same truth as `psrec report`: per function, in every mode, over the
whole recording and in a window that starts after the first chunks; and every output names
the threads by the names the recording gives them, in any window.

One synthetic recording holds what makes outputs disagree when they take shortcuts: threads
named only by a rename in the first chunk, a thread that runs in bursts between samples (its
CPU time used between samples must go where spec section 5 says), a thread waiting for the
GIL, samples whose GIL or CPU state is unknown, and a thread with no Python stack. Each
output's file is read back as its own tool would read it (pstats by marshal, collapsed stacks
as text, speedscope and Firefox JSON, pprof by its protobuf classes), its values summed by
innermost function, and compared with the report's own column for that mode.
"""

from __future__ import annotations

import gzip
import json
import marshal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from analyzer_synth import Synth
from click.testing import CliRunner
from psrec.analyzer.profile import Profile, View
from psrec.cli import main

GIL, ON_CPU, REQ, GIL_UNKNOWN, CPU_UNKNOWN, REQ_KNOWN = 0x01, 0x02, 0x04, 0x10, 0x20, 0x40
WAIT = REQ | REQ_KNOWN
MAIN = ("app.py", "main", 5)
WORK = ("app.py", "score", 22)
PARSE = ("lib.py", "parse2", 33)
SLEEP = ("threading.py", "wait", 320)
BURST = ("burst.py", "crunch", 41)
FETCH = ("net.py", "fetch_remote", 57)
TAKE = ("app.py", "take_lock", 64)
MODES = ("wall", "cpu", "gil", "idle", "gil-wait")
WINDOWS = (None, "1.1")  # the whole recording; from 1.1 s, after the chunks that name threads


def _mixed(path: str) -> Synth:
    s = Synth(path, chunk_passes=150, metadata={"python_version": "3.15.2"})
    # Threads as a launched program's are first seen: before threading names them.
    for name, tid in (("MainThread", 100), ("python", 101), ("python-2", 102),
                      ("python-3", 103), ("python-4", 104)):
        s.thread(name, tid)
    ts = 0
    for i in range(2400):
        ts += s.interval_ticks * (3 if i % 11 == 5 else 1)
        if i == 20:  # the names arrive in the first chunk only
            s.rename("python", ts, "scorer")
            s.rename("python-2", ts, "burster")
            s.rename("python-3", ts, "waiter")
        if i == 2300:  # and one late, after both windows start
            s.rename("python-4", ts, "late-name")
        k = i % 10
        main = ((MAIN, WORK), GIL | ON_CPU, 900) if k < 6 else ((MAIN, PARSE), GIL | ON_CPU, 1000)
        if i % 97 == 0:
            main = ((MAIN, PARSE), GIL_UNKNOWN | ON_CPU, 800)
        # A thread that sleeps in fetch_remote and runs in short bursts between samples: its
        # samples are mostly off a CPU yet carry CPU time.
        if k in (0, 1):
            burst = ((MAIN, BURST), GIL | ON_CPU, 700)
        elif k == 2:
            burst = ((MAIN, FETCH), 0, 400)  # ran after the sample before, now asleep
        elif k == 7:
            burst = ((MAIN, FETCH), CPU_UNKNOWN, 300)
        else:
            burst = ((MAIN, FETCH), 0, 150 if k == 5 else 0)
        wait = ((MAIN, TAKE), WAIT | (ON_CPU if k == 3 else 0), 50 if k == 3 else 0)
        if k in (8, 9):
            wait = ((MAIN, WORK), GIL | ON_CPU, 980)
        s.sample_pass(ts, {
            "MainThread": main,
            "python": ((MAIN, SLEEP), 0, 0),
            "python-2": burst,
            "python-3": wait,
            "python-4": ((), ON_CPU if k < 5 else 0, 100 if k < 5 else 0),
        })
    s.close()
    return s


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return _mixed(str(tmp_path_factory.mktemp("agree") / "mixed.psr"))


def _report(path: str, mode: str, start: str | None) -> tuple[Profile, dict[str, int],
                                                              dict[str, int]]:
    """The report's own time (ticks) and own samples per innermost function."""
    p = Profile.load(path, View(mode=mode, start=start))
    own: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for k, t in p.walks.totals().items():
        own[k.name] += t.own
        count[k.name] += t.own_count
    return p, dict(own), dict(count)


def _run(*args: str) -> None:
    r = CliRunner().invoke(main, list(args))
    assert r.exit_code == 0, r.output


def _window(start: str | None) -> list[str]:
    return ["--from", start] if start else []


def _close(got: dict[str, float], want: dict[str, float], what: str, tol: float) -> None:
    names = set(got) | set(want)
    bad = {n: (got.get(n, 0), want.get(n, 0)) for n in names
           if abs(got.get(n, 0) - want.get(n, 0)) > tol}
    assert not bad, f"{what}: per function (output, report): {bad}"


@pytest.mark.parametrize("start", WINDOWS, ids=["whole", "late-window"])
@pytest.mark.parametrize("mode", MODES)
def test_every_output_gives_the_reports_time_per_function(
        mixed: Synth, tmp_path: Path, mode: str, start: str | None) -> None:
    p, own, count = _report(mixed.path, mode, start)
    sec = p.tick_ns / 1e9
    view = ["--mode", mode, *_window(start)]

    # pstats: own seconds per function
    _run("report", mixed.path, "--pstats", "-o", str(tmp_path / "a.pstats"), *view)
    stats = marshal.loads((tmp_path / "a.pstats").read_bytes())
    _close({k[2]: v[2] / sec for k, v in stats.items() if v[2]}, own, "pstats", 0.5)

    # collapsed stacks, time weights in microseconds (ticks here)
    _run("report", mixed.path, "--collapsed", "--weights", "time", "-o",
         str(tmp_path / "a.collapsed"), *view)
    col: Counter[str] = Counter()
    for line in (tmp_path / "a.collapsed").read_text().splitlines():
        stack, value = line.rsplit(" ", 1)
        col[stack.split(";")[-1].split(" (")[0]] += int(value)
    _close(dict(col), own, "collapsed", 0.5)

    # speedscope: weights by the innermost frame of each sample
    _run("export", "--speedscope", mixed.path, "-o", str(tmp_path / "a.json"), *view)
    doc = json.loads((tmp_path / "a.json").read_text())
    frames = doc["shared"]["frames"]
    ss: Counter[str] = Counter()
    for prof in doc["profiles"]:
        assert prof["unit"] == "microseconds"
        for stack, w in zip(prof["samples"], prof["weights"]):
            ss[frames[stack[-1]]["name"] if stack else "[no Python stack]"] += w
    _close(dict(ss), own, "speedscope", 0.5)

    # Firefox: samples (its weights are sample counts) by innermost function
    _run("export", "--firefox", mixed.path, "-o", str(tmp_path / "a.ff.json"), *view)
    ff = json.loads((tmp_path / "a.ff.json").read_text())
    sh = ff["shared"]
    names = [sh["stringArray"][sh["funcTable"]["name"][sh["frameTable"]["func"][f]]]
             for f in sh["stackTable"]["frame"]]
    fc: Counter[str] = Counter()
    for t in ff["threads"]:
        for stack, w in zip(t["samples"]["stack"], t["samples"]["weight"]):
            fc[names[stack]] += w
    _close(dict(fc), count, "firefox samples", 0)

    # the HTML page: its cells' values in this mode, by the innermost key of their stack
    # (the page sums them in the browser; tests/e2e/test_html_chromium.py checks it does)
    _run("report", mixed.path, "--html", "-o", str(tmp_path / "a.html"), *view)
    html = (tmp_path / "a.html").read_text()
    blob = html.split('<script id="psrec-data" type="application/json">', 1)[1]
    data = json.loads(blob.split("</script>", 1)[0].replace("<\\/", "</"))
    cells = data["cells"]
    page: Counter[str] = Counter()
    for n, v in zip(cells["n"], cells[mode]):
        page[data["keys"][data["key"][n]][0]] += v
    _close(dict(page), own, "HTML page", 0.5)

    # pprof: the mode's values, a label filter for the modes that are one
    from psrec.analyzer.proto import profile_pb2 as pb

    _run("export", "--pprof", mixed.path, "-o", str(tmp_path / "a.pb.gz"),
         "--mode", "cpu" if mode == "cpu" else "wall", *_window(start))
    prof = pb.Profile()
    prof.ParseFromString(gzip.decompress((tmp_path / "a.pb.gz").read_bytes()))
    st = list(prof.string_table)
    funcs = {f.id: st[f.name] for f in prof.function}
    locs = {loc.id: funcs[loc.line[0].function_id] for loc in prof.location}
    keep = {"gil": ("gil", "held"), "idle": ("cpu", "off"), "gil-wait": ("gil", "waiting")}
    value = 2 if mode == "cpu" else 1
    pp: Counter[str] = Counter()
    for smp in prof.sample:
        labels = {st[lb.key]: st[lb.str] for lb in smp.label if lb.str}
        if mode in keep and labels[keep[mode][0]] != keep[mode][1]:
            continue
        pp[locs[smp.location_id[0]]] += smp.value[value] // 1000
    _close(dict(pp), own, "pprof", 0.5)


@pytest.mark.parametrize("start", WINDOWS + ("2",), ids=["whole", "from-1.1", "from-2"])
def test_every_output_names_threads_in_any_window(mixed: Synth, tmp_path: Path,
                                                  start: str | None) -> None:
    want = {"MainThread", "scorer", "burster", "waiter", "late-name"}
    view = _window(start)

    def has_all(text: str, what: str) -> None:
        missing = {n for n in want if n not in text}
        assert not missing, f"{what} with {view}: names missing: {missing}"

    r = CliRunner().invoke(main, ["report", mixed.path, "--per-thread", *view])
    assert r.exit_code == 0, r.output
    has_all(r.output, "report --per-thread")
    r = CliRunner().invoke(main, ["report", mixed.path, "--slices", "500ms", *view])
    assert r.exit_code == 0, r.output
    has_all(r.output, "report --slices")
    r = CliRunner().invoke(main, ["report", mixed.path, "--collapsed", "--per-thread", "-o",
                                  "-", *view])
    assert r.exit_code == 0, r.output
    has_all(r.output, "report --collapsed --per-thread")
    for args, out in ((["export", "--speedscope"], "s.json"), (["export", "--firefox"], "f.json"),
                      (["report", "--html"], "r.html")):
        _run(*args, mixed.path, "-o", str(tmp_path / out), *view)
        has_all((tmp_path / out).read_text(), " ".join(args))

    from psrec.analyzer.proto import profile_pb2 as pb

    _run("export", "--pprof", mixed.path, "-o", str(tmp_path / "n.pb.gz"), *view)
    prof = pb.Profile()
    prof.ParseFromString(gzip.decompress((tmp_path / "n.pb.gz").read_bytes()))
    st = list(prof.string_table)
    threads = {st[lb.str] for smp in prof.sample for lb in smp.label if st[lb.key] == "thread"}
    assert threads == want

    import psrec

    run = psrec.load(mixed.path, start=start)
    assert {t.label for t in run.threads.values()} == want
    # and a thread is selected by its name in a window that does not hold its rename
    assert psrec.load(mixed.path, threads=("scorer",), start=start).totals()


def test_a_window_reads_no_samples_outside_it(mixed: Synth) -> None:
    """The names come from the skipped chunks' renames alone: their samples are not decoded."""
    from psrec.format import open_recording

    with open_recording(mixed.path) as rec:
        stream = rec.stream(from_ts=2_000_000)
        decoded = sum(len(b) for b in stream)
        assert {e[3] for e in stream.outside_renames}
        assert decoded < len(mixed.samples) // 2


def test_cpu_view_follows_spec_section_5(mixed: Synth) -> None:
    """CPU used between two samples goes to the earlier when this one is off a CPU and that one
    was on a CPU, else to this one (its CPU state unknown included): computed by hand."""
    want: Counter[str] = Counter()
    previous: dict[str, Any] = {}
    for x in mixed.samples:
        prev = previous.get(x.thread)
        previous[x.thread] = x
        if not x.cpu:
            continue
        dest = x
        if not x.status & ON_CPU and prev is not None and prev.status & ON_CPU \
                and not prev.status & CPU_UNKNOWN:
            dest = prev
        want[dest.stack[-1][1] if dest.stack else "[no Python stack]"] += x.cpu
    _, own, _ = _report(mixed.path, "cpu", None)
    _close(own, dict(want), "report --mode cpu", 0)
    # fetch_remote gets only the CPU time of bursts that began after a sample off the CPU
    assert 0 < own["fetch_remote"] < own["crunch"]


@pytest.mark.parametrize("mode", MODES)
def test_the_python_engine_follows_the_same_rule(mixed: Synth, mode: str) -> None:
    """The engine written in Python (where the native one is not built) agrees, CPU included."""
    for start in WINDOWS:
        view = View(mode=mode, start=start)
        native = Profile.load(mixed.path, view, native=True, timelines=True)
        python = Profile.load(mixed.path, view, native=False, timelines=True)
        def sums(p: Profile) -> dict[Any, tuple[int, ...]]:
            return {k: (t.own_count, t.own, t.total_count, t.total)
                    for k, t in p.walks.totals().items()}

        assert sums(native) == sums(python)
        assert sum(native.columns.cpu) == sum(python.columns.cpu)
        for ref, runs in native.timelines.items():  # type: ignore[union-attr]
            other = python.timelines[ref]  # type: ignore[index]
            assert list(runs.cpu) == list(other.cpu) and list(runs.count) == list(other.count)


def test_gil_wait_says_once_where_a_recording_cannot_know_it(tmp_path: Path) -> None:
    """Before 3.15 (and on a free-threaded build) no sample says whether its thread waited for
    the GIL: the gil-wait view says why in one line, instead of an empty table of zeros."""
    for metadata, words in (({"python_version": "3.12.1"}, "Python 3.12.1 does not say"),
                            ({"python_version": "3.14.0", "python_build": {"free_threaded": True}},
                             "free-threaded")):
        s = Synth(str(tmp_path / "old.psr"), metadata=metadata)
        s.thread("MainThread", 100)
        for i in range(50):
            s.sample_pass(1000 * (i + 1), {"MainThread": ((MAIN, WORK), GIL | ON_CPU, 900)})
        s.close()
        for args in (["report", s.path, "--mode", "gil-wait"],
                     ["export", "--speedscope", s.path, "--mode", "gil-wait", "-o", "-"]):
            r = CliRunner().invoke(main, args)
            assert r.exit_code == 1, r.output
            lines = [x for x in r.output.splitlines() if x.startswith("psrec: error")]
            assert len(lines) == 1 and words in lines[0], r.output
            assert "Traceback" not in r.output


def test_a_thread_without_a_name_reads_alike_everywhere(tmp_path: Path) -> None:
    s = Synth(str(tmp_path / "unnamed.psr"))
    s.thread("", 4321)
    for i in range(20):
        s.sample_pass(1000 * (i + 1), {"": ((MAIN, WORK), GIL | ON_CPU, 900)})
    s.close()
    r = CliRunner().invoke(main, ["info", s.path])
    assert "thread (tid 4321)" in r.output, r.output
    r = CliRunner().invoke(main, ["report", s.path, "--per-thread"])
    assert "== thread (tid 4321): 20 samples" in r.output, r.output
    import psrec

    run = psrec.load(s.path)
    assert [t.label for t in run.threads.values()] == ["thread (tid 4321)"]


def test_timelines_split_by_state_alike_native_and_python(mixed: Synth) -> None:
    """A timeline with split_mask ends a run where its samples' CPU state changes and keeps
    that state per run (the Firefox export's idle samples): the engines agree, and no run mixes
    states."""
    from psrec.analyzer.engine import engine_for
    from psrec.analyzer.model import Selection
    from psrec.format import open_recording

    cpu_bits = ON_CPU | CPU_UNKNOWN
    results = []
    for native in (True, False):
        engine = engine_for(native)
        with open_recording(mixed.path) as rec:
            stream = engine.stream(rec)
            t = engine.timeline(Selection(), split_mask=cpu_bits)
            for batch in stream:
                t.add(batch)
            results.append({ref: tuple(list(col) for col in (r.node, r.count, r.cpu, r.state))
                            for ref, r in t.result().items()})
    assert results[0] == results[1]
    states = {s for runs in results[0].values() for s in runs[3]}
    assert states == {0, ON_CPU, CPU_UNKNOWN}
    # the burster's runs alternate with its CPU state, though its stack stays the same
    burster = results[0][mixed.refs["python-2"]]
    assert len(burster[0]) > 2 * len(set(burster[0]))
