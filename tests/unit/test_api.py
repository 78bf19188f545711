"""psrec.load: a recording read from Python, checked against the samples written into it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import psrec
import pytest
from analyzer_synth import BUSY, F_A, F_B, F_SLEEP, MAIN, Synth, two_thread_recording
from psrec.analyzer.profile import Profile, SelectionError, View
from psrec.analyzer.reporters import function_totals


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
    assert list(df.columns) == ["time", "thread", "thread_name", "stack", "gil", "on_cpu",
                                "cpu_ns", "weight_ns"]
    assert len(df) == 101 and set(df.thread_name) == {"MainThread"}
    assert df.gil.sum() == 100 and df.on_cpu.sum() == 100
    assert df.weight_ns.sum() == 101 * 1_000_000
