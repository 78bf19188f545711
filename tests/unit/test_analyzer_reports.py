"""The analyzer's reports on synthetic recordings whose answers are known from what was written.

Over 400 lines and kept whole: one test per rule of the reports, on the same few recordings.
"""

from __future__ import annotations

import io
import json
import marshal
import os
import pstats
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from analyzer_synth import (
    BUSY,
    F_A,
    F_B,
    F_SLEEP,
    MAIN,
    ON_CPU,
    Synth,
    expected,
    two_thread_recording,
)
from click.testing import CliRunner
from psrec.analyzer.profile import Profile, SelectionError, View
from psrec.analyzer.reporters import PstatsReporter, function_totals, slice_sums
from psrec.analyzer.speedscope import SpeedscopeExporter
from psrec.cli import main
from psrec.format import Recording, open_recording


@pytest.fixture(scope="module")
def rec(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return two_thread_recording(str(tmp_path_factory.mktemp("rec") / "run.psr"))


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout, r.stderr


def table_rows(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if re.match(r"^\s*[\d,]+\s+[\d,]+\s+[\d.]+%", ln)]


def own_by_name(profile: Profile) -> dict[str, int]:
    out: dict[str, int] = {}
    for k, t in function_totals(profile).items():
        if t.own:
            out[k.name] = out.get(k.name, 0) + t.own
    return out


def test_time_weights_match_what_was_written(rec: Synth) -> None:
    p = Profile.load(rec.path)
    assert p.selected == len(rec.samples)
    assert own_by_name(p) == expected(rec.samples)
    # jitter makes time weights and counts disagree; the test would not see a mix-up otherwise
    counts = expected(rec.samples, weights="count")
    assert own_by_name(p) != counts
    pc = Profile.load(rec.path, View(weights="count"))
    assert own_by_name(pc) == counts


def test_weight_cap_is_four_intervals(tmp_path: Path) -> None:
    s = Synth(str(tmp_path / "gap.psr"))
    s.thread("MainThread", 1)
    for ts in (1000, 2000, 30000, 31000):  # a 28-interval stall before the third pass
        s.sample_pass(ts, {"MainThread": ((MAIN, F_A), BUSY, 0)})
    s.close()
    p = Profile.load(s.path)
    assert p.total_value == 1000 + 1000 + 4000 + 1000


def test_table_headers_say_samples_and_estimates(rec: Synth) -> None:
    code, out, err = run("report", rec.path)
    assert code == 0, err
    assert "samples" in out and "est. own" in out and "est. total" in out
    assert "not calls" in out
    lines = table_rows(out)
    locs = [ln.split()[-1] for ln in lines]
    # by function: compute's two lines are one row, keyed by its first line
    assert locs[0] == "threading.py:320(wait)"  # the sleeping worker: half of all samples
    assert sum(1 for x in locs if x.endswith("(compute)")) == 1
    exp = expected(rec.samples)
    total = sum(exp.values())
    row = next(ln for ln in lines if ln.endswith("app.py:10(compute)"))
    own_pct = float(row.split()[2].rstrip("%"))
    assert own_pct == pytest.approx(100 * exp["compute"] / total, abs=0.006)
    assert err == ""


def test_by_line_sort_and_limit(rec: Synth) -> None:
    code, out, _ = run("report", rec.path, "--by", "line", "-l", "0", "--sort", "name")
    assert code == 0
    locs = [ln.split()[-1] for ln in table_rows(out)]
    assert "app.py:12(compute)" in locs and "app.py:14(compute)" in locs
    names = [x.rsplit("(", 1)[1] for x in locs]
    assert names == sorted(names)
    code, out, _ = run("report", rec.path, "-l", "1")
    rows = table_rows(out)
    assert len(rows) == 1 and "more (use -l 0" in out


def _pstats(rec: Synth, out: Path, *options: str) -> tuple[pstats.Stats, dict[Any, Any]]:
    """report --pstats into out, checked to load with the selection's calls and own time;
    the Stats and the raw dict."""
    code, _, err = run("report", rec.path, "--pstats", *options, "-o", str(out))
    assert code == 0, err
    st = pstats.Stats(str(out))
    assert st.total_calls == len(rec.samples)  # type: ignore[attr-defined]
    assert st.total_tt == pytest.approx(  # type: ignore[attr-defined]
        sum(x.weight for x in rec.samples) / 1e6)
    return st, marshal.loads(out.read_bytes())


def test_pstats_loads_and_totals_equal_selection(rec: Synth, tmp_path: Path) -> None:
    out = tmp_path / "run.pstats"
    _, raw = _pstats(rec, out)
    for key, (_cc, nc, tt, ct, callers) in raw.items():
        assert isinstance(key, tuple) and len(key) == 3
        assert ct >= tt - 1e-12
        for value in callers.values():
            assert len(value) == 4  # (cc, nc, tt, ct) as gprof2dot and snakeviz expect
        if callers:
            assert sum(v[1] for v in callers.values()) == nc
    compute = raw[("app.py", 10, "compute")]
    assert compute[2] == pytest.approx(expected(rec.samples)["compute"] / 1e6)
    assert set(compute[4]) == {("app.py", 0, "main")}


@pytest.mark.skipif(shutil.which("gprof2dot") is None and
                    subprocess.run([sys.executable, "-c", "import gprof2dot"], check=False,
                                   capture_output=True).returncode != 0,
                    reason="gprof2dot is not installed (pip install gprof2dot)")
def test_pstats_opens_in_gprof2dot(rec: Synth, tmp_path: Path) -> None:
    out = tmp_path / "g.pstats"
    assert run("report", rec.path, "--pstats", "-o", str(out))[0] == 0
    r = subprocess.run([sys.executable, "-m", "gprof2dot", "-f", "pstats", str(out)],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert "compute" in r.stdout and "parse2" in r.stdout


COLLAPSED_LINE = re.compile(r"^(?P<stack>[^ ].*) (?P<n>\d+)$")


def parse_collapsed(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        m = COLLAPSED_LINE.match(line)
        assert m, f"not a collapsed line: {line!r}"
        out[m.group("stack")] = int(m.group("n"))
    return out


def test_collapsed_counts_sum_to_selected_samples(rec: Synth) -> None:
    code, out, _ = run("report", rec.path, "--collapsed", "-o", "-")
    assert code == 0
    stacks = parse_collapsed(out)
    assert sum(stacks.values()) == len(rec.samples)
    for stack in stacks:
        frames = stack.split(";")
        assert frames[0] == "main (app.py:0)"  # root first
        for f in frames:
            assert not f[-1].isdigit(), f"frame name ends in a number: {f!r}"
    assert stacks["main (app.py:0);parse2 (lib.py:30)"] == expected(
        rec.samples, weights="count")["parse2"] // 1000


def test_collapsed_per_thread_and_time_weights(rec: Synth) -> None:
    code, out, _ = run("report", rec.path, "--collapsed", "--per-thread", "--weights", "time",
                       "-o", "-")
    assert code == 0
    stacks = parse_collapsed(out)
    roots = {s.split(";")[0] for s in stacks}
    assert roots == {"thread MainThread (tid 100)", "thread worker (tid 101)"}
    assert sum(stacks.values()) == sum(x.weight for x in rec.samples)  # microseconds


def test_thread_selection(rec: Synth) -> None:
    by_name = Profile.load(rec.path, View(threads=("worker",)))
    assert by_name.selected == len(rec.samples) // 2
    assert own_by_name(by_name) == expected(rec.samples, lambda x: x.thread == "worker")
    by_tid = Profile.load(rec.path, View(threads=("100",)))
    assert own_by_name(by_tid) == expected(rec.samples, lambda x: x.thread == "MainThread")
    both = Profile.load(rec.path, View(threads=("100", "worker")))
    assert both.selected == len(rec.samples)
    code, out, err = run("report", rec.path, "--thread", "nosuch")
    assert code == 1 and out == ""
    assert "no thread named or numbered 'nosuch'" in err and "MainThread (tid 100)" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("native", [True, False])
def test_a_thread_found_by_a_later_name_is_decoded_once(
        tmp_path: Path, native: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # A name a thread got after it started (THREAD_RENAME, in the data chunks) selects it: the
    # renames are read from the chunks without decoding their samples, which are decoded once.
    s = Synth(str(tmp_path / "renamed.psr"), chunk_passes=50)
    s.thread("MainThread", 100)
    s.thread("Thread-1", 101)
    for i in range(200):
        if i == 120:
            s.e.thread_rename(s.refs["Thread-1"], 120_000, "fetcher")
        s.sample_pass((i + 1) * 1000, {"MainThread": ((MAIN, F_A), BUSY, 900),
                                       "Thread-1": ((MAIN, F_SLEEP), 0, 0)})
    s.close()
    decodes = []
    real_stream = Recording.stream

    def counted(self: Recording, *args: Any, **kwargs: Any) -> Any:
        decodes.append(1)
        return real_stream(self, *args, **kwargs)

    monkeypatch.setattr(Recording, "stream", counted)
    p = Profile.load(s.path, View(threads=("fetcher",)), native=native)
    assert len(decodes) == 1
    assert p.selected == 200 and p.thread_refs() == [s.refs["Thread-1"]]
    assert p.threads[s.refs["Thread-1"]].name == "fetcher"
    assert Profile.load(s.path, View(threads=("Thread-1",)), native=native).selected == 200


def test_modes_on_status(tmp_path: Path) -> None:
    s = Synth(str(tmp_path / "modes.psr"))
    s.thread("holder", 1)
    s.thread("waiter", 2)
    s.thread("sleeper", 3)
    for i in range(1, 1001):
        s.sample_pass(i * 1000, {
            "holder": ((MAIN, F_A), BUSY, 800),  # on CPU, holds the GIL, 0.8 ms CPU per sample
            "waiter": ((MAIN, F_B), 0x02 | 0x04 | 0x40, 50),  # on CPU, asking for the GIL
            "sleeper": ((MAIN, ("t.py", "sleep", 40)), 0, 0),
        })
    s.close()

    def names(p: Profile) -> set[str]:
        return set(own_by_name(p))

    assert names(Profile.load(s.path)) == {"compute", "parse2", "sleep"}
    cpu = Profile.load(s.path, View(mode="cpu"))
    assert names(cpu) == {"compute", "parse2"}
    assert cpu.cpu_weighted and own_by_name(cpu) == {"compute": 800_000, "parse2": 50_000}
    assert names(Profile.load(s.path, View(mode="gil"))) == {"compute"}
    assert names(Profile.load(s.path, View(mode="idle"))) == {"sleep"}
    assert own_by_name(Profile.load(s.path, View(mode="cpu", weights="count"))) == {
        "compute": 1_000_000, "parse2": 1_000_000}


def test_window_selects_exactly_the_samples_inside(rec: Synth) -> None:
    ts = sorted({x.ts for x in rec.samples})
    lo, hi = ts[100], ts[900]  # exact sample timestamps: the edges are where mistakes hide
    p = Profile.load(rec.path, View(start=f"{lo / 1e6}", end=f"{hi / 1e6}"))
    inside = [x for x in rec.samples if lo <= x.ts < hi]
    assert p.selected == len(inside)
    assert own_by_name(p) == expected(inside)
    assert p.first_ts == lo and p.last_ts < hi
    # the same window as wall-clock times (UTC, ISO 8601)
    import datetime as dt

    def wall(t: int) -> str:
        return dt.datetime.fromtimestamp((1_700_000_000_000_000_000 + t * 1000) / 1e9,
                                         dt.timezone.utc).isoformat()

    q = Profile.load(rec.path, View(start=wall(lo), end=wall(hi)))
    assert q.selected == len(inside)


def test_window_errors(rec: Synth) -> None:
    code, _, err = run("report", rec.path, "--from", "9999")
    assert code == 1 and "outside the recording" in err and "Traceback" not in err
    code, _, err = run("report", rec.path, "--from", "2", "--to", "1")
    assert code == 2 and "not after" in err
    code, _, err = run("report", rec.path, "--from", "yesterday")
    assert code == 2 and "neither seconds" in err


@pytest.mark.parametrize("options", [("--pstats", "--collapsed"), ("--collapsed", "--pstats"),
                                     ("--pstats", "--slices", "1s"),
                                     ("--slices", "1s", "--collapsed")])
def test_output_formats_are_exclusive(rec: Synth, tmp_path: Path, options: tuple[str, ...]) -> None:
    out = tmp_path / "out"
    code, stdout, err = run("report", rec.path, *options, "-o", str(out))
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "cannot be given together" in err
    assert not out.exists() and stdout == ""


def test_slices_rows_and_activity_strip(tmp_path: Path) -> None:
    s = Synth(str(tmp_path / "sl.psr"))
    s.thread("MainThread", 1)
    s.thread("late", 2)
    # 3 s at 1 kHz: MainThread busy with the GIL in second 0 and 2, idle in second 1;
    # "late" only exists in second 2 and runs on a CPU without the GIL.
    for i in range(1, 3000):
        busy = (i // 1000) != 1
        e = {"MainThread": ((MAIN, F_A if busy else F_B), BUSY if busy else 0, 0)}
        if i >= 2000:
            e["late"] = ((MAIN, F_B), 0x02, 0)
        s.sample_pass(i * 1000, e)
    s.close()
    code, out, err = run("report", s.path, "--slices", "1s")
    assert code == 0, err
    rows = [ln for ln in out.splitlines() if re.match(r"^\s*\d+\.\d{3}-", ln)]
    assert len(rows) == 3
    assert rows[0].split()[1] == "999" and "100.0%" in rows[0] and "compute 100%" in rows[0]
    assert "0.0%" in rows[1] and "parse2 100%" in rows[1]
    assert "2/2" in rows[2]
    strip = {ln.split("|")[0].strip(): ln.split("|")[1] for ln in out.splitlines()
             if ln.count("|") == 2}
    assert strip["MainThread (tid 1)"] == "#.#"
    assert strip["late (tid 2)"] == "  ="


def test_output_names_and_force(rec: Synth, tmp_path: Path) -> None:
    src = tmp_path / "job.psr"
    shutil.copy(rec.path, src)
    code, _, err = run("report", str(src), "--collapsed")
    assert code == 0 and (tmp_path / "job.collapsed").exists(), err
    assert "wrote" in err
    before = (tmp_path / "job.collapsed").read_bytes()
    code, _, err = run("report", str(src), "--collapsed", "--thread", "worker")
    assert code == 1 and "already exists" in err and "--force" in err
    assert (tmp_path / "job.collapsed").read_bytes() == before
    code, _, _ = run("report", str(src), "--collapsed", "--thread", "worker", "--force")
    assert code == 0 and (tmp_path / "job.collapsed").read_bytes() != before
    assert run("report", str(src), "--pstats")[0] == 0
    assert (tmp_path / "job.pstats").exists()
    assert run("export", str(src))[0] == 0
    assert (tmp_path / "job.speedscope.json").exists()


def test_pure_python_fallback_gives_the_same_answers(tmp_path: Path) -> None:
    # Loaded without the native engine, a profile is summed and walked by the Python twins
    # (engine.PyEngine: pyengine.PyAccumulator, PyTimeline, walks.PyWalks, PySpeedscopeText):
    # every output agrees.
    s = two_thread_recording(str(tmp_path / "small.psr"), passes=400)
    views = (View(), View(mode="cpu"), View(by="line", start="0.1", end="0.3"),
             View(mode="gil", weights="count"))
    for view in views:
        a = Profile.load(s.path, view, timelines=True, slice_seconds=0.1, native=True)
        b = Profile.load(s.path, view, timelines=True, slice_seconds=0.1, native=False)
        assert (a.engine.name, b.engine.name) == ("native", "python")
        assert type(a.walks).__name__ == "NativeWalks" and type(b.walks).__name__ == "PyWalks"

        def key(p: Profile) -> list[Any]:
            return sorted((c.slice, c.thread, p.keys(c.node), c[3:]) for c in p.cells)

        assert key(a) == key(b)
        assert PstatsReporter.build(a) == PstatsReporter.build(b)

        def totals(p: Profile, ref: int | None = None) -> dict[Any, tuple[int, ...]]:
            return {k: (t.own_count, t.own, t.total_count, t.total)
                    for k, t in function_totals(p, ref).items()}

        assert totals(a) == totals(b)
        refs = a.thread_refs()
        assert refs == b.thread_refs() and len(refs) == (2 if view.mode == "wall" else len(refs))
        for ref in refs:  # one thread's totals: not the whole's when there are two
            assert totals(a, ref) == totals(b, ref)
            assert (totals(a, ref) == totals(a)) == (len(refs) == 1)
        assert a.thread_sums() == b.thread_sums()
        assert slice_sums(a) == slice_sums(b)
        assert a.timelines is not None and b.timelines is not None
        assert {r: [list(x.count), list(x.weight), [a.keys(n) for n in x.node]]
                for r, x in a.timelines.items()} == {
                r: [list(x.count), list(x.weight), [b.keys(n) for n in x.node]]
                for r, x in b.timelines.items()}
        texts = []
        for p in (a, b):
            out = io.StringIO()
            SpeedscopeExporter().write(p, out)
            texts.append(out.getvalue())
        assert texts[0] == texts[1]
        assert json.loads(texts[0])["profiles"]


def _members(protocol: type) -> dict[str, Any]:
    """A Protocol's members: its methods' parameters, and its attributes and properties
    (None)."""
    out: dict[str, Any] = dict.fromkeys(getattr(protocol, "__annotations__", {}))
    for name, value in vars(protocol).items():
        if not name.startswith("_"):
            out[name] = _parameters(value) if callable(value) else None
    return out


def _parameters(method: Any) -> list[Any]:
    """A method's parameters, names, kinds, defaults and types (an implementation may
    return a type of its own)."""
    import inspect

    return list(inspect.signature(method).parameters.values())


def test_both_engines_satisfy_one_protocol_and_agree(tmp_path: Path) -> None:
    """The native engine and the one in Python are one Engine (engine.py), their sums, timelines,
    walks and speedscope text each one protocol, with the same parameters; over the same
    selection they give the same cells and runs."""
    from psrec.analyzer import engine as E
    from psrec.analyzer import walks as W
    from psrec.analyzer.model import CellColumns

    engines = [E.engine_for(True), E.engine_for(False), E.engine_for(None)]
    assert [type(e) for e in engines] == [E.NativeEngine, E.PyEngine, E.NativeEngine]
    for cls in (E.NativeEngine, E.PyEngine):
        for name, sig in _members(E.Engine).items():
            assert hasattr(cls, name), (cls, name)
            if sig is not None:
                assert _parameters(getattr(cls, name)) == sig, (cls, name)
    for cls in (W.NativeWalks, W.PyWalks):
        for name, sig in _members(W.Walks).items():
            assert _parameters(getattr(cls, name)) == sig, (cls, name)
    for cls in (W.NativeSpeedscopeText, W.PySpeedscopeText):
        for name, sig in _members(W.SpeedscopeText).items():
            if sig is not None:
                assert _parameters(getattr(cls, name)) == sig, (cls, name)

    s = two_thread_recording(str(tmp_path / "two.psr"), passes=500)
    found = []
    for engine in engines[:2]:
        assert isinstance(engine, E.Engine)
        p = Profile.load(s.path, View(mode="cpu", start="0.05"), native=engine.name == "native",
                         slice_seconds=0.1)
        assert type(p.engine) is type(engine) and p.walks is p.walks
        assert isinstance(p.walks, W.Walks)
        assert isinstance(p.walks.speedscope_text(), W.SpeedscopeText)
        sel = p.selection.under()  # the profile's window and threads, every sample
        with open_recording(s.path) as rec:
            stream = engine.stream(rec, sel.from_ts, sel.to_ts)
            acc = engine.accumulator(sel, slice_ticks=p.slice_ticks)
            timeline = engine.timeline(sel, split_mask=ON_CPU)
            assert isinstance(acc, E.Accumulator) and isinstance(timeline, E.Timeline)
            for batch in stream:
                acc.add(batch)
                timeline.add(batch)
            parents, frames = stream.decoder.trie_parents(), stream.decoder.trie_frames()

        def stack(node: int, parents: Any = parents, frames: Any = frames) -> tuple[int, ...]:
            out = []
            while node:
                out.append(frames[node])
                node = parents[node]
            return tuple(out)

        cells = sorted((c.slice, c.thread, stack(c.node), c[3:])
                       for c in CellColumns(*acc.columns()).cells())
        runs = {ref: [[stack(n) for n in r.node], list(r.count), list(r.weight), list(r.cpu),
                      list(r.first_ts), list(r.state or [])]
                for ref, r in timeline.result().items()}
        found.append((cells, acc.selected, acc.first_ts, acc.last_ts, acc.slice_overflow, runs))
    assert found[0] == found[1]
    assert found[0][0] and found[0][1] > 0 and len(found[0][5]) == 2


def test_native_cells_when_chunks_come_out_of_time_order(tmp_path: Path) -> None:
    # The native accumulator sums one time slice at a time; a file whose chunks are not in
    # time order brings slices back, and must still give each (slice, thread, stack) one cell.
    s = Synth(str(tmp_path / "ooo.psr"), chunk_passes=10**9)
    s.thread("MainThread", 1)
    s.thread("worker", 2)
    sealed = []
    for i in range(3000):
        stack = (MAIN, F_A) if i % 3 else (MAIN, F_B)
        s.sample_pass(1000 * (i + 1), {"MainThread": (stack, BUSY, 700),
                                       "worker": ((MAIN, F_B), 0 if i % 5 else BUSY, 0)})
        if (i + 1) % 700 == 0:
            sealed.append(s.e.seal())
    sealed.append(s.e.seal())
    for chunk in (sealed[2], sealed[0], sealed[4], sealed[1], sealed[3]):
        s.w.write_sealed(*chunk)
    s.w.close({"samples": len(s.samples)})

    def cells(p: Profile) -> list[tuple[Any, ...]]:
        return sorted((c.slice, c.thread, p.keys(c.node), c[3:]) for c in p.cells)

    for view in (View(), View(mode="gil", start="0.5")):
        a = Profile.load(s.path, view, slice_seconds=0.25, native=True)
        b = Profile.load(s.path, view, slice_seconds=0.25, native=False)
        assert len({(c.slice, c.thread, c.node) for c in a.cells}) == len(a.cells)
        assert cells(a) == cells(b)
        assert a.selected == b.selected


def test_memory_follows_distinct_stacks_not_samples(tmp_path: Path) -> None:
    small = two_thread_recording(str(tmp_path / "s.psr"), passes=1000, jitter=False)
    big = two_thread_recording(str(tmp_path / "b.psr"), passes=20000, jitter=False)
    ps, pb = Profile.load(small.path), Profile.load(big.path)
    assert pb.selected == 20 * ps.selected
    assert len(pb.cells) == len(ps.cells) == 4  # (thread, stack) pairs
    assert len(pb.parents) == len(ps.parents)


def test_cli_without_traceback_on_bad_input(tmp_path: Path) -> None:
    junk = tmp_path / "junk.psr"
    junk.write_bytes(b"this is not a recording at all" * 10)
    r = subprocess.run([sys.executable, "-m", "psrec", "report", str(junk)],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 1 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) <= 2 and "Traceback" not in r.stderr
    assert str(junk) in r.stderr
    r = subprocess.run([sys.executable, "-m", "psrec", "report", str(tmp_path / "none.psr")],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 1 and "no such file" in r.stderr


def test_empty_recording(tmp_path: Path) -> None:
    s = Synth(str(tmp_path / "empty.psr"))
    s.thread("MainThread", 1)
    s.close()
    code, _, err = run("report", s.path)
    assert code == 1 and "holds no samples" in err


def test_truncated_recording_recovers_with_warning(tmp_path: Path) -> None:
    s = Synth(str(tmp_path / "cut.psr"), chunk_passes=500)
    s.thread("MainThread", 1)
    for i in range(1, 2001):
        s.sample_pass(i * 1000, {"MainThread": ((MAIN, F_A if i % 2 else F_B), BUSY, 0)})
    s.close()
    data = Path(s.path).read_bytes()
    cut = tmp_path / "cut2.psr"
    cut.write_bytes(data[: int(len(data) * 0.7)])
    code, out, err = run("report", str(cut), "--collapsed", "-o", "-")
    assert code == 0, err
    assert "warning" in err and "Traceback" not in err
    n = sum(parse_collapsed(out).values())
    assert 0 < n < 2000 and n % 500 == 0  # whole chunks recovered


def test_selection_matching_nothing(rec: Synth) -> None:
    code, out, err = run("report", rec.path, "--mode", "gil", "--thread", "worker")
    assert code == 1 and out == ""
    assert "no samples match" in err and "--mode wall" in err


def test_default_output_does_not_clobber_the_input(tmp_path: Path, rec: Synth) -> None:
    odd = tmp_path / "noext"
    shutil.copy(rec.path, odd)
    assert run("report", str(odd), "--pstats")[0] == 0
    assert (tmp_path / "noext.pstats").exists()
    code, _, err = run("report", str(odd), "--collapsed", "-o", str(odd), "--force")
    assert code == 1 and "recording itself" in err
    assert os.path.getsize(odd) == os.path.getsize(rec.path)




def test_cpu_view_keeps_cpu_used_between_samples(tmp_path: Path) -> None:
    """A thread that runs in bursts between samples: CPU time reported by a sample off the CPU
    goes to the previous sample when that one was on a CPU, else to its own stack without
    counting as a sample on a CPU; the CPU view's total is every CPU tick recorded, natively
    and in pure Python, in the cells and in the timelines alike (spec/psr-format.md, section 5)."""
    s = Synth(str(tmp_path / "bursty.psr"))
    s.thread("worker", 7)
    # pass: (stack, status, cpu): on CPU in compute, then off in wait having used CPU (goes to
    # compute), off in wait again with CPU nobody saw (stays on wait), off with none (dropped).
    cycle = [((MAIN, F_A), ON_CPU, 300), ((MAIN, F_SLEEP), 0, 200), ((MAIN, F_SLEEP), 0, 150),
             ((MAIN, F_SLEEP), 0, 0)]
    for i in range(400):
        s.sample_pass(1000 * (i + 1), {"worker": cycle[i % 4]})
    s.close()
    total = sum(x.cpu for x in s.samples)
    for native in (True, False):
        p = Profile.load(s.path, View(mode="cpu"), timelines=True, native=native)
        by_func: dict[str, int] = {}
        for c in p.cells:
            name = p.keys(c.node)[-1].name
            by_func[name] = by_func.get(name, 0) + c.cpu
        assert sum(by_func.values()) == total, (native, by_func)
        assert by_func == {"compute": 100 * 500, "wait": 100 * 150}, (native, by_func)
        assert p.selected == 100  # samples on a CPU; the others bring CPU time only
        assert p.timelines is not None
        assert sum(sum(r.cpu) for r in p.timelines.values()) == total
    # Other views are untouched: the GIL view selects no sample of an off-GIL thread.
    with pytest.raises(SelectionError):
        Profile.load(s.path, View(mode="gil"))


def test_pstats_per_thread_gives_each_thread_a_root_under_all_threads(rec: Synth,
                                                                      tmp_path: Path) -> None:
    """--pstats --per-thread: a root function per thread, calling its stacks' outermost
    frames, under one `<all threads>` root that a viewer starting from the largest
    cumulative time (snakeviz, gprof2dot) takes; the file's totals stay the report's."""
    out = tmp_path / "threads.pstats"
    st, raw = _pstats(rec, out, "--per-thread")
    roots = {k[2]: v for k, v in raw.items() if k[0] == "<thread>"}
    assert set(roots) == {"<all threads>", "thread MainThread (tid 100)",
                          "thread worker (tid 101)"}
    for name in ("MainThread", "worker"):
        cc, nc, tt, ct, callers = roots[f"thread {name} (tid {rec.tids[name]})"]
        assert (cc, nc, tt) == (0, 0, 0.0)
        assert ct == pytest.approx(sum(x.weight for x in rec.samples if x.thread == name) / 1e6)
        assert set(callers) == {("<thread>", 0, "<all threads>")}
    assert roots["<all threads>"][3] == pytest.approx(st.total_tt)  # type: ignore[attr-defined]
    # each thread's outermost frame is called by that thread's root, its time split by thread
    main_callers = raw[("app.py", 0, "main")][4]
    assert {k[2] for k in main_callers} == {"thread MainThread (tid 100)",
                                            "thread worker (tid 101)"}
    for (_, _, name), (_, _, _, ct) in main_callers.items():
        assert ct == pytest.approx(roots[name][3])
    st.sort_stats("cumulative")
    assert st.fcn_list[0] == ("<thread>", 0, "<all threads>")  # type: ignore[attr-defined]
    if shutil.which("gprof2dot") is not None or subprocess.run(
            [sys.executable, "-c", "import gprof2dot"], check=False,
            capture_output=True).returncode == 0:
        r = subprocess.run([sys.executable, "-m", "gprof2dot", "-f", "pstats", str(out)],
                           capture_output=True, text=True, timeout=60, check=False)
        assert r.returncode == 0, r.stderr
        assert "thread MainThread" in r.stdout and "thread worker" in r.stdout, r.stdout


def test_a_task_view_selects_the_samples_of_its_tasks(tmp_path: Path) -> None:
    # Two threads, each running tasks in turn (and none at times): --task selects the samples
    # of threads running the task, by name or by coroutine id, the same in both engines, and
    # the tasks report sums them per task.
    s = Synth(str(tmp_path / "tasks.psr"))
    s.thread("MainThread", 100)
    s.thread("loop2", 101)
    s.task("req-1", 0x1000)
    s.task("req-2", 0x2000)
    s.task("other", 0x3000)
    plan = ["req-1", "req-1", "req-2", "", "req-2", "req-1"]
    for i in range(300):
        main_task = plan[i % len(plan)]
        s.sample_pass((i + 1) * 1000, {
            "MainThread": ((MAIN, F_A if main_task == "req-1" else F_B), BUSY, 500,
                           *((main_task,) if main_task else ())),
            "loop2": ((MAIN, F_SLEEP), 0, 0, *(("other",) if i % 3 == 0 else ())),
        })
    s.close()
    want = {name: sum(1 for x in s.samples if x.task == name) for name in ("req-1", "req-2",
                                                                           "other")}
    for native in (True, False):
        p = Profile.load(s.path, View(tasks=("req-1",)), native=native)
        assert p.selected == want["req-1"]
        totals = function_totals(p)
        assert {k.name for k in totals if totals[k].own_count} == {F_A[1]}
        both = Profile.load(s.path, View(tasks=("req-1", "other")), native=native)
        assert both.selected == want["req-1"] + want["other"]
        cells = sorted((c.thread, c[3:]) for c in both.cells)
        if native:
            first = cells
        else:
            assert cells == first  # the Python engine agrees
    from psrec.analyzer.tasks import task_sums

    sums = task_sums(Profile.load(s.path))
    names = {Profile.load(s.path).defs.tasks[t].name: v.samples for t, v in sums.items() if t}
    assert names == want
    # Both threads ran a task at some time: their samples outside tasks are the loops' time.
    assert sums[0].samples == sum(1 for x in s.samples if not x.task)
    code, out, err = run("report", s.path, "--tasks")
    assert code == 0 and "req-1" in out and "<no task>" in out, err
    # The tasks by the time threads ran them (req-1 150 samples; req-2 and other 100 each),
    # the loops' own time last, though it is the most (250 samples).
    table = out.split("  task\n", 1)[1].split("\n\n", 1)[0].splitlines()
    labels = [line.rsplit("  ", 1)[1].split(" [")[0] for line in table]
    assert labels[0] == "req-1" and set(labels[1:3]) == {"req-2", "other"}, table
    assert labels[3] == "<no task>" and int(table[3].split()[0].replace(",", "")) == 250, table
    code, out, err = run("report", s.path, "--task", "nope")
    assert code == 1 and "no asyncio task named" in err and "req-1" in err
