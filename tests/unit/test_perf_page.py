"""docs/performance.md is written by the benchmark (tests/perf/_page.py) from the results JSON a
run saves: each figure's rows with psrec and its peers side by side, the ratio to the best peer,
the run's machine, date and command; a section pasted by hand is kept until every figure is
covered. The results here are made by the test, in the shape `python -m tests.perf --out`
writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.perf._page import FIGURES, PASTED_MARK, render_page, write_page  # noqa: E402


def _summary(median: float, lo: float | None = None, hi: float | None = None,
             n: int = 3) -> dict[str, Any]:
    return {"median": median, "min": median if lo is None else lo,
            "max": median if hi is None else hi, "n": n}


def _results(date: str, command: str, rows: list[dict[str, Any]],
             quick: bool = False) -> dict[str, Any]:
    return {
        "meta": {
            "date": date, "host": "vm", "machine": "Linux 6.18 x86_64, 2 CPUs",
            "loadavg_start": [0.8, 0.7, 0.6], "loadavg_end": [0.6, 0.6, 0.6],
            "command": command, "quick": quick, "seconds": 3174.0, "failures": {},
            "tools": {"psrec_version": "0.1.0", "py_spy_version": "0.4.3",
                      "austin_version": "3.7.0", "tachyon_version": None,
                      "notes": ["austin: an older release"]},
            "targets": {"3.11": "3.11.7 (/usr/bin/python3.11)"},
        },
        "rows": rows,
        "raw": {},
    }


RATE = {
    "figure": "1", "measure": "highest rate, basic.py", "unit": "samples/s", "better": "higher",
    "values": {"psrec": _summary(974100, 967700, 992900), "py-spy": _summary(57900),
               "austin": _summary(404200, 403600, 406000)},
    "best_peer": "austin", "ratio_psrec_to_best_peer": 2.41, "target": "≥ 2× best peer",
    "met": True, "note": "",
}
SIZE = {
    "figure": "F", "measure": "bytes per thread-sample, unchanged stack", "unit": "B",
    "better": "none", "values": {"psrec": _summary(1.35, n=1)}, "best_peer": None,
    "ratio_psrec_to_best_peer": None, "target": "≤ 0.5 B", "met": False, "note": "jitter",
}
TASKS = {
    "figure": "A", "measure": "10,000 tasks: missed deadlines", "unit": "%", "better": "lower",
    "values": {"psrec": _summary(3.32, n=1), "psrec --no-tasks": _summary(0.067, n=1)},
    "best_peer": "psrec --no-tasks", "ratio_psrec_to_best_peer": 49.9, "target": "≤ 10 %",
    "met": True, "note": "",
}


def test_each_figure_has_its_rows_peers_ratio_and_run() -> None:
    full = _results("2026-11-27T11:28:00+00:00", "python -m tests.perf --pythons 3.11",
                    [RATE, SIZE])
    page = render_page([full], "python -m tests.perf --page p.md --from r.json")
    lines = page.splitlines()
    assert lines[0] == "# Performance"
    assert "python -m tests.perf --page p.md --from r.json" in page  # how to make it again
    # the run: its date, machine and command
    run = next(line for line in lines if line.startswith("| run 1 |"))
    assert "2026-11-27 11:28:00 UTC" in run and "Linux 6.18 x86_64, 2 CPUs" in run
    assert "`python -m tests.perf --pythons 3.11`" in run
    assert "psrec 0.1.0, py-spy 0.4.3, Austin 3.7.0" in run
    assert "- run 1: austin: an older release" in lines
    # figure 1: psrec and both peers side by side, the ratio, the target and whether met
    at = lines.index(f"## 1: {FIGURES['1']}")
    assert lines[at + 4] == ("| measure | unit | psrec | py-spy | Austin | psrec ÷ best peer "
                             "| target (psrec) | met |")
    assert lines[at + 6] == ("| highest rate, basic.py | samples/s | 974.1k [967.7k–992.9k] | "
                             "57.9k | 404.2k [403.6k–406.0k] | 2.41× (Austin) | "
                             "≥ 2× best peer | met |")
    # a figure of psrec alone has no peer columns and no ratio; a target missed says so
    at = lines.index(f"## F: {FIGURES['F']}")
    assert lines[at + 4] == "| measure | unit | psrec | target (psrec) | met |"
    assert lines[at + 6] == ("| bytes per thread-sample, unchanged stack (jitter) | B | 1.35 | "
                             "≤ 0.5 B | **not met** |")
    assert "Not in these results: 2 (rate fidelity)" in page


def test_each_figure_from_the_latest_run_that_has_it() -> None:
    old = _results("2026-11-27T11:28:00+00:00", "python -m tests.perf", [RATE, TASKS])
    newer_tasks = dict(TASKS, values={"psrec": _summary(1.5, n=1)}, best_peer=None,
                       ratio_psrec_to_best_peer=None)
    new = _results("2026-11-28T23:24:32+00:00", "python -m tests.perf --only many_tasks",
                   [newer_tasks], quick=True)
    page = render_page([new, old], "cmd")
    lines = page.splitlines()
    assert lines.index("## 1: " + FIGURES["1"]) < lines.index("## A: " + FIGURES["A"])
    at = lines.index("## A: " + FIGURES["A"])
    assert lines[at + 2].startswith("From run 2 (2026-11-28 23:24:32 UTC")
    assert lines[at + 6].startswith("| 10,000 tasks: missed deadlines | % | 1.50 |")
    assert "(`--quick`: a smoke run)" in next(x for x in lines if x.startswith("| run 2 |"))


def test_the_pasted_section_stays_until_every_figure_is_run(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    results.write_text(json.dumps(_results("2026-11-27T11:28:00+00:00", "python -m tests.perf",
                                           [RATE])))
    page = tmp_path / "performance.md"
    pasted = f"{PASTED_MARK}\n\n## Last pasted figures\n\n| old | table |\n"
    page.write_text("# Performance\n\nanything before\n\n" + pasted)
    write_page(str(page), [str(results)])
    text = page.read_text()
    assert text.count(PASTED_MARK) == 1 and text.endswith(pasted)
    assert "anything before" not in text and "## 1: " in text
    write_page(str(page), [str(results)])  # again: the same page
    assert page.read_text() == text

    every = [dict(RATE, figure=f) for f in FIGURES]
    results.write_text(json.dumps(_results("2026-11-28T00:00:00+00:00", "python -m tests.perf",
                                           every)))
    write_page(str(page), [str(results)])
    text = page.read_text()
    assert PASTED_MARK not in text and "Not in these results" not in text


def test_the_command_line_writes_the_page(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    results.write_text(json.dumps(_results("2026-11-27T11:28:00+00:00", "python -m tests.perf",
                                           [RATE])))
    page = tmp_path / "docs" / "performance.md"
    out = subprocess.run([sys.executable, "-m", "tests.perf", "--page", str(page),
                          "--from", str(results)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "| highest rate, basic.py |" in page.read_text()


def test_a_file_that_is_not_results_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a benchmark results file"):
        write_page(str(tmp_path / "p.md"), [str(bad)])


def test_the_committed_page_is_the_rendering_of_its_results() -> None:
    """docs/performance.md is what its own command makes of the results beside it."""
    page = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    command = next(line for line in page.splitlines()
                   if line.startswith("python -m tests.perf --page docs/performance.md"))
    sources = command.split(" --from ")[1:]
    assert sources, "the page names no results"
    from tests.perf._page import _pasted_section, load_results

    docs = load_results(str(ROOT / s) for s in sources)
    assert render_page(docs, command, _pasted_section(str(ROOT / "docs" / "performance.md"))) \
        == page
