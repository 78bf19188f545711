"""The HTML report's data (psrec.analyzer.page): its cells give each mode the same totals as
`psrec report` under that mode, its states split each thread's time without overlap, its
size follows distinct stacks rather than samples, and names from the target cannot end its
script. (The page drawn in a browser: tests/e2e/test_html_chromium.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

from analyzer_synth import BUSY, MAIN, Synth, two_thread_recording
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
    assert data["slices"] <= 400 and not data["gil_wait_known"]
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
    assert ["<!--f</script>", "</script><b>x.py", 10] in data["keys"]
    assert data["threads"][0]["label"].startswith("</script><script>alert(1)</script>")


def test_group_sums_native_and_python_agree(tmp_path: Path) -> None:
    from psrec.analyzer import engine

    s = two_thread_recording(str(tmp_path / "two.psr"))
    p = Profile.load(s.path, View(), slice_seconds=0.1, also=("gil",))
    sources = [(c.slice, c.thread, c.node, c.weight) for c in (p.columns, p.also["gil"])]
    for factor in (1, 3):
        for by_node in (True, False):
            rows = []
            for use_native in (True, False):
                sl, th, node, values = engine.group_sums(use_native, sources, factor, by_node)
                rows.append(sorted(zip(sl, th, node, values[0::2], values[1::2])))
            assert rows[0] == rows[1] and rows[0], (factor, by_node)
            assert sum(r[3] for r in rows[0]) == sum(p.columns.weight)
