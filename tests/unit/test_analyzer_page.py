"""The HTML report's data (psrec.analyzer.page): its cells give each mode the same totals as
`psrec report` under that mode, its states split each thread's time without overlap, its
size follows distinct stacks rather than samples, and names from the target cannot end its
script. (The page drawn in a browser: tests/e2e/test_html_chromium.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

from analyzer_synth import BUSY, GIL, MAIN, ON_CPU, Synth, two_thread_recording
from click.testing import CliRunner
from psrec.analyzer.page import page_data
from psrec.analyzer.profile import Profile, View
from psrec.analyzer.registry import get
from psrec.cli import main


def _page_profile(path: str, **view: object) -> Profile:
    reporter = get("html")()
    v = View(**view)  # type: ignore[arg-type]
    return Profile.load(path, v, slice_count=reporter.slice_count, also=reporter.also(v.mode))


def _embedded(page: str) -> dict:
    m = re.search(r'<script id="psrec-data" type="application/json">(.*?)</script>', page,
                  re.DOTALL)
    assert m
    return json.loads(m.group(1))


def test_cells_give_every_mode_the_reports_total(tmp_path: Path) -> None:
    s = two_thread_recording(str(tmp_path / "two.psr"))
    data = page_data(_page_profile(s.path))
    for mode in ("wall", "cpu", "gil", "idle"):
        want = Profile.load(s.path, View(mode=mode)).total_value
        assert sum(data["cells"][mode]) == want, mode
    # per thread too, and the window's cells are the window's
    refs = {t["label"].split(" ")[0]: t["ref"] for t in data["threads"]}
    worker = sum(v for t, v in zip(data["cells"]["t"], data["cells"]["wall"])
                 if t == refs["worker"])
    assert worker == Profile.load(s.path, View(threads=("worker",))).total_value
    windowed = page_data(_page_profile(s.path, start="1s", end="2s"))
    assert sum(windowed["cells"]["wall"]) == Profile.load(
        s.path, View(start="1s", end="2s")).total_value


def test_states_split_each_threads_time(tmp_path: Path) -> None:
    """MainThread is busy (holding the GIL, on a CPU) in every sample, the worker asleep."""
    s = two_thread_recording(str(tmp_path / "two.psr"), jitter=False)
    data = page_data(_page_profile(s.path))
    refs = {t["label"].split(" ")[0]: str(t["ref"]) for t in data["threads"]}
    _, wall, gil, cpu, wait = data["states"][refs["MainThread"]]
    assert sum(gil) == sum(wall) > 0 and sum(cpu) == sum(wait) == 0
    _, wall, gil, cpu, wait = data["states"][refs["worker"]]
    assert sum(wall) > 0 and sum(gil) == sum(cpu) == sum(wait) == 0
    assert data["slices"] <= 400
    assert data["gil_wait_unknown"] and "3.11.7" in data["gil_wait_unknown"]
    # slices are a round length: 3 s of samples in 10 ms slices
    assert data["slice_s"] == 0.01


def test_page_grows_with_stacks_not_samples(tmp_path: Path) -> None:
    sizes = []
    for n in (20_000, 200_000):  # both fill every (slice, stack) cell: 400 slices, 50 stacks
        s = Synth(str(tmp_path / f"n{n}.psr"))
        s.thread("MainThread", 7)
        for i in range(n):
            leaf = ("app.py", f"f{i % 50}", 10 + i % 50)
            s.sample_pass(i * 1000, {"MainThread": ((MAIN, leaf), BUSY, 1000)})
        s.close()
        out = tmp_path / f"n{n}.html"
        r = CliRunner().invoke(main, ["report", "--html", s.path, "-o", str(out)])
        assert r.exit_code == 0, r.output
        sizes.append(out.stat().st_size)
    assert sizes[1] < 1.5 * sizes[0], sizes


def test_names_from_the_target_cannot_end_the_script(tmp_path: Path) -> None:
    s = Synth(str(tmp_path / "names.psr"))
    s.thread("</script><script>alert(1)</script>", 7)
    evil = ("</script><b>x.py", "<!--f</script>", 12)
    for i in range(100):
        s.sample_pass(i * 1000, {"</script><script>alert(1)</script>": ((MAIN, evil), BUSY, 0)})
    s.close()
    out = tmp_path / "names.html"
    r = CliRunner().invoke(main, ["report", "--html", s.path, "-o", str(out)])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert page.count("</script>") == 2  # the data's and the program's own
    data = _embedded(page)
    assert ["<!--f</script>", "</script><b>x.py", 10, 0, 0] in data["keys"]
    assert data["threads"][0]["label"].startswith("</script><script>alert(1)</script>")


def test_group_sums_native_and_python_agree(tmp_path: Path) -> None:
    from psrec.analyzer.engine import engine_for

    s = two_thread_recording(str(tmp_path / "two.psr"))
    p = Profile.load(s.path, View(), slice_seconds=0.1, also=("gil",))
    sources = [(c.slice, c.thread, c.node, c.weight) for c in (p.columns, p.also["gil"])]
    for factor in (1, 3):
        for by_node in (True, False):
            rows = []
            for native in (True, False):
                sl, th, node, values = engine_for(native).group_sums(sources, factor, by_node)
                rows.append(sorted(zip(sl, th, node, values[0::2], values[1::2])))
            assert rows[0] == rows[1] and rows[0], (factor, by_node)
            assert sum(r[3] for r in rows[0]) == sum(p.columns.weight)


# A thread waiting to take the GIL, as a 3.15 target says so (spec 4.1): GIL_REQUESTED (0x04)
# with GIL_REQUESTED_KNOWN (0x40); any sample of a 3.15 target carries the KNOWN bit.
WAITING = 0x04 | 0x40
KNOWN = 0x40


def _gil_recording(path: str, version: str, waits: bool) -> Synth:
    """2 s at 1 kHz: MainThread computes holding the GIL; the worker waits for it in its
    first second (when `waits`), then sleeps."""
    s = Synth(path, metadata={"python_version": version})
    s.thread("MainThread", 7)
    s.thread("worker", 8)
    for i in range(2000):
        worker = WAITING if waits and i < 1000 else KNOWN
        s.sample_pass(i * 1000, {"MainThread": ((MAIN, ("app.py", "compute", 12)),
                                                BUSY | KNOWN, 1000),
                                 "worker": ((MAIN, ("app.py", "take_lock", 22)), worker, 0)})
    s.close()
    return s


def test_gil_wait_is_known_by_the_recordings_python_not_by_its_samples(tmp_path: Path) -> None:
    """A 3.15 recording knows GIL waits even where no thread waited (the page shows the wait
    state, at zero); an older one cannot (the page says why, and draws no wait)."""
    for version, waits in (("3.15.0", True), ("3.15.0", False), ("3.12.3", True)):
        s = _gil_recording(str(tmp_path / f"{version}-{waits}.psr"), version, waits)
        data = page_data(_page_profile(s.path))
        refs = {t["label"].split(" ")[0]: str(t["ref"]) for t in data["threads"]}
        waited = sum(data["states"][refs["worker"]][4])
        if version.startswith("3.15"):
            assert data["gil_wait_unknown"] is None, version
            assert waited == (1000 * 1000 if waits else 0)
            # the gil-wait mode's cells are the worker's waiting samples
            assert sum(data["cells"]["gil-wait"]) == waited
        else:
            assert "3.12.3" in data["gil_wait_unknown"] and waited == 0
        assert "gil-wait" in data["modes"] and data["mode_help"]["gil-wait"]


def test_rate_missed_deadlines_and_errors_are_carried(tmp_path: Path) -> None:
    s = Synth(str(tmp_path / "health.psr"))
    s.thread("MainThread", 7)
    for i in range(1001):
        if i in (100, 200):
            s.e.pass_errors(i * 2000, 0, 3)  # 3 deadlines missed before each of two passes
        if i == 300:  # a pass whose one sample could not be read
            s.e.begin_pass(i * 2000)
            s.e.sample_error(s.refs["MainThread"])
            s.e.end_pass()
            continue
        s.sample_pass(i * 2000, {"MainThread": ((MAIN, ("app.py", "compute", 12)), GIL | ON_CPU,
                                                1000)})
    s.close()
    health = page_data(_page_profile(s.path))["health"]
    assert health["requested_hz"] == 1000
    assert round(health["achieved_hz"]) == 500  # a pass every 2 ms
    assert health["missed_deadlines"] == 6 and health["sample_errors"] == 1

