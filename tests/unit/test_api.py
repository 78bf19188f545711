"""psrec.load: a recording read from Python, checked against the samples written into it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import psrec
import pytest
from analyzer_synth import BUSY, F_A, F_B, F_SLEEP, MAIN, ON_CPU, Synth, two_thread_recording
from psrec.analyzer.profile import Profile, SelectionError, View
from psrec.analyzer.reporters import function_totals
from psrec.format import constants as C


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return two_thread_recording(str(tmp_path_factory.mktemp("api") / "two.psr"), passes=600)


@pytest.mark.parametrize("native", [True, False])
def test_samples_are_the_ones_written(synth: Synth, native: bool) -> None:
    run = psrec.load(synth.path, native=native)
    s = run.samples
    assert len(s) == len(synth.samples)
    names = {ref: t.name for ref, t in run.threads.items()}
    # The file's order is by pass; the synth's too (main, then worker, in each pass).
    for i, want in enumerate(synth.samples):
        assert names[s.thread[i]] == want.thread
        assert s.time[i] == pytest.approx(want.ts * 1e-6)
        assert s.gil[i] == int(bool(want.status & 1)) and s.on_cpu[i] == int(bool(want.status & 2))
        assert s.weight_ns[i] == want.weight * 1000
        assert s.cpu_ns[i] == want.cpu * 1000
        frames = run.stack(s.stack[i])
        assert [(f.function.filename, f.function.name, f.line) for f in frames] == \
            list(want.stack)
    assert run.stack(0) == []


def test_the_view_selects_samples_and_gives_the_reports_totals(synth: Synth) -> None:
    run = psrec.load(synth.path, "idle", threads=("worker",), start="0.1", end="0.3")
    s = run.samples
    selected = run.profile.selected_threads
    assert selected is not None and len(s) > 0 and set(s.thread) == {selected[0]}
    assert all(0.1 <= t < 0.3 for t in s.time)
    assert set(s.gil) == {0} and set(s.on_cpu) == {0}  # the worker sleeps throughout
    # The window holds the samples the view selects, as the report counts them.
    assert len(s) == run.profile.selected
    # totals() are the report's, under the view's mode: the worker never holds the GIL.
    gil = Profile.load(synth.path, View(mode="gil"))
    main_run = psrec.load(synth.path, "gil")
    assert {k: (t.own_count, t.total) for k, t in main_run.totals().items()} == \
        {k: (t.own_count, t.total) for k, t in function_totals(gil).items()}
    assert "wait" not in {k.name for k in main_run.totals()}
    ref = next(r for r, t in main_run.threads.items() if t.name == "MainThread")
    assert main_run.totals(ref).keys() == main_run.totals().keys()  # only it holds the GIL


def test_bad_input_says_what_to_do(tmp_path: Path, synth: Synth) -> None:
    with pytest.raises(psrec.format.PsrecError, match="no such file"):
        psrec.load(str(tmp_path / "missing.psr"))
    with pytest.raises(SelectionError, match="no thread named or numbered 'nosuch'"):
        psrec.load(synth.path, threads=("nosuch",))
    with pytest.raises(SelectionError, match="unknown mode"):
        psrec.load(synth.path, "fast")


def test_to_pandas(tmp_path: Path) -> None:
    if importlib.util.find_spec("pandas") is None:
        run = psrec.load(two_thread_recording(str(tmp_path / "p.psr"), passes=50).path)
        with pytest.raises(psrec.format.PsrecError, match="needs pandas") as err:
            run.to_pandas()
        assert err.value.help == "pip install pandas"
        pytest.skip("pandas is not installed here (pip install pandas): only its absence "
                    "was checked")
    s = Synth(str(tmp_path / "p.psr"))
    s.thread("MainThread", 100)
    for i in range(100):
        s.sample_pass((i + 1) * 1000, {"MainThread": ((MAIN, F_A if i < 30 else F_B), BUSY, 700)})
    s.sample_pass(101_000, {"MainThread": ((MAIN, F_SLEEP), 0, 0)})
    s.close()
    df = psrec.load(s.path).to_pandas()
    # Python 3.11 cannot say who waits for the GIL: no gil_wait column, and the frame says why.
    assert list(df.columns) == ["time", "thread", "thread_name", "stack", "leaf", "gil",
                                "on_cpu", "cpu_ns", "weight_ns", "task", "task_name"]
    assert df.task.sum() == 0 and set(df.task_name) == {""}  # no asyncio task ran
    assert "Python 3.11.7 does not say" in df.attrs["gil_wait_unknown"]
    assert df.leaf[0] == "compute (app.py:10)" and df.leaf[100] == "wait (threading.py:320)"
    assert len(df) == 101 and set(df.thread_name) == {"MainThread"}
    assert df.gil.sum() == 100 and df.on_cpu.sum() == 100
    assert df.weight_ns.sum() == 101 * 1_000_000


@pytest.mark.parametrize("native", [True, False])
def test_one_thread_or_process_may_be_given_alone(synth: Synth, native: bool) -> None:
    whole = psrec.load(synth.path, threads=("worker",), native=native).samples
    assert len(whole) > 0
    for one in ("worker", synth.tids["worker"], str(synth.tids["worker"]), ["worker"]):
        assert list(psrec.load(synth.path, threads=one, native=native).samples.time) == \
            list(whole.time), one
    assert len(psrec.load(synth.path, pids=4242, processes="synth").samples) == \
        len(synth.samples)
    with pytest.raises(SelectionError, match="no thread named or numbered 'web_0'"):
        psrec.load(synth.path, threads="web_0")


def test_run_totals_and_samples_read_as_what_they_hold(synth: Synth) -> None:
    run = psrec.load(synth.path, "idle", threads="worker", start=0.1, end="0.3")
    text = repr(run)
    assert text.startswith(f"<Run {synth.path!r}: mode idle, weights time, by function, "
                           "window 0.1 .. 0.3; ") and text.endswith(" samples in 1 thread>")
    k, t = next(iter(psrec.load(synth.path).totals().items()))
    assert repr(t) == (f"Totals(own_count={t.own_count}, own={t.own}, "
                       f"total_count={t.total_count}, total={t.total})")
    samples = psrec.load(synth.path).samples
    assert repr(samples).startswith(f"<Samples: {len(synth.samples):,} rows of time, thread")


def test_help_shows_the_signature_and_every_argument() -> None:
    import inspect
    import pydoc

    from psrec.analyzer import api

    assert inspect.signature(psrec.load) == inspect.signature(api.load)
    text = pydoc.render_doc(psrec.load, renderer=pydoc.plaintext)
    assert ("load(path: 'str | os.PathLike[str] | Iterable[str | os.PathLike[str]]', mode: "
            "'str' = 'wall', *, threads: 'str | int | Iterable") in text
    # every argument has a paragraph of its own: "name: ..." or "a, b: ..."
    described = {name for line in text.splitlines() if ": " in line and line.startswith("    ")
                 and not line.startswith("     ")
                 for name in line.strip().split(": ", 1)[0].split(", ")}
    assert set(inspect.signature(api.load).parameters) <= described, described
    assert "gil-wait" in text and "wall-clock" in text


@pytest.mark.parametrize("native", [True, False])
def test_functions_are_the_reports_table(synth: Synth, native: bool) -> None:
    run = psrec.load(synth.path, native=native)
    want = function_totals(Profile.load(synth.path, native=native))
    rows = run.functions()
    assert {(r.name, r.filename, r.line): (r.own_samples, r.total_samples) for r in rows} == \
        {(k.name, k.filename, k.line): (t.own_count, t.total_count) for k, t in want.items()}
    assert [r.own_s for r in rows] == sorted((r.own_s for r in rows), reverse=True)
    assert sum(r.own_s for r in rows) == pytest.approx(
        sum(s.weight for s in synth.samples) * 1e-6)


def test_leaf_follows_the_stack(synth: Synth) -> None:
    run = psrec.load(synth.path, by="line")
    s = run.samples
    for i in range(0, len(s), 97):
        file, name, line = synth.samples[i].stack[-1]
        assert s.leaf[i] == f"{name} ({file}:{line})"
        f = run.stack(s.stack[i])[-1]
        assert (f.function.name, f.line) == (name, line)


GIL_REQUESTED, GIL_REQUESTED_KNOWN = C.STATUS_GIL_REQUESTED, C.STATUS_GIL_REQUESTED_KNOWN
WAITING = GIL_REQUESTED | GIL_REQUESTED_KNOWN


def _waits(path: str, version: str) -> Synth:
    s = Synth(path, metadata={"python_version": version})
    s.thread("MainThread", 100)
    s.thread("web_0", 101)
    for i in range(40):
        s.sample_pass((i + 1) * 1000, {
            "MainThread": ((MAIN, F_A), BUSY | GIL_REQUESTED_KNOWN, 900),
            # web_0 waits for the GIL in every other pass, runs without it otherwise
            "web_0": ((MAIN, F_B), WAITING if i % 2 else ON_CPU | GIL_REQUESTED_KNOWN, 0)})
    s.close()
    return s


def test_gil_wait_is_known_where_the_recording_can_know_it(tmp_path: Path) -> None:
    run = psrec.load(_waits(str(tmp_path / "w.psr"), "3.15.0a1").path)
    assert run.gil_wait_unknown is None
    names = {ref: t.name for ref, t in run.threads.items()}
    s = run.samples
    web = [w for w, r in zip(s.gil_wait, s.thread) if names[r] == "web_0"]
    main = [w for w, r in zip(s.gil_wait, s.thread) if names[r] == "MainThread"]
    assert web == [i % 2 for i in range(40)] and main == [0] * 40
    # the same samples --mode gil-wait selects
    waiting = sum(w == 1 for w in s.gil_wait)
    assert psrec.load(run.path, "gil-wait").profile.selected == waiting == 20
    old = psrec.load(_waits(str(tmp_path / "o.psr"), "3.12.4").path)
    assert set(old.samples.gil_wait) == {-1}
    assert old.gil_wait_unknown is not None and "Python 3.12.4" in old.gil_wait_unknown
    if importlib.util.find_spec("pandas") is None:
        pytest.skip("pandas is not installed here: its frame was not checked")
    df = run.to_pandas()
    assert list(df.gil_wait[df.thread_name == "web_0"]) == [bool(i % 2) for i in range(40)]
    assert "gil_wait" not in old.to_pandas().columns


def test_to_pandas_functions(synth: Synth) -> None:
    if importlib.util.find_spec("pandas") is None:
        pytest.skip("pandas is not installed here")
    run = psrec.load(synth.path)
    df = run.to_pandas("functions")
    assert list(df.columns) == ["name", "filename", "line", "own_samples", "total_samples",
                                "own_s", "total_s"]
    assert df.own_samples.sum() == len(synth.samples)
    assert list(df.name) == [r.name for r in run.functions()]
    with pytest.raises(psrec.format.PsrecError, match="no table named 'stacks'"):
        run.to_pandas("stacks")
