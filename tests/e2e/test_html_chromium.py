"""`psrec report --html` opens in headless Chromium from file://, with no network: its thread
rows, state shares, flame graph and function table are read back from the DOM after the
page's script ran, in each mode and for a window and a thread picked through the address's
fragment (which is all the page's controls change). Screenshots are kept as test artifacts.

Needs a Chromium binary (Debian: apt-get install chromium); skips, saying so, without one.
"""

from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from analyzer_synth import BUSY, MAIN, Synth
from browser import render, screenshot
from psrec.cli import main
from rec_live import one_python, record, target

pytestmark = pytest.mark.timeout(600)

COMPUTE = ("app.py", "compute", 12)
SLEEP = ("app.py", "sleep_main", 22)
WAIT = ("worker.py", "wait_for_work", 32)
CRUNCH = ("worker.py", "crunch", 42)
ON_CPU_NO_GIL = 0x02


def _page(tmp_path: Path) -> Path:
    """4 s at 1 kHz: for 1 s MainThread computes holding the GIL while the worker waits off
    the CPU; for 3 s MainThread sleeps while the worker crunches, holding the GIL for its
    first 2 s and on a CPU without it for its last second."""
    s = Synth(str(tmp_path / "page.psr"))
    s.thread("MainThread", 7)
    s.thread("worker", 8)
    for i in range(4000):
        if i < 1000:
            main_, work = ((MAIN, COMPUTE), BUSY, 1000), ((MAIN, WAIT), 0, 0)
        else:
            status = BUSY if i < 3000 else ON_CPU_NO_GIL
            main_, work = ((MAIN, SLEEP), 0, 0), ((MAIN, CRUNCH), status, 1000)
        s.sample_pass(i * 1000, {"MainThread": main_, "worker": work})
    s.close()
    out = tmp_path / "page.html"
    r = CliRunner().invoke(main, ["report", "--html", s.path, "-o", str(out)])
    assert r.exit_code == 0, r.output
    return out


def _rows(dom: str) -> list[tuple[str, ...]]:
    """The function table's rows: (own, own %, total, total %, function and file)."""
    body = re.search(r'<table id="functions">.*?<tbody>(.*?)</tbody>', dom, re.DOTALL)
    assert body, dom[-3000:]
    rows = []
    for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", body.group(1), re.DOTALL):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", tr, re.DOTALL)
        rows.append(tuple(html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in cells))
    return rows


def _threads(dom: str) -> dict[str, tuple[int, str]]:
    """Thread label -> (ref, the label's title with its state shares)."""
    out = {}
    for ref, title, label in re.findall(
            r'<div class="thread-row[^"]*" data-ref="(\d+)"><div class="thread-label" '
            r'title="([^"]*)">([^<]*)</div>', dom):
        out[html.unescape(label)] = (int(ref), html.unescape(title))
    return out


def _ready(dom: str) -> str:
    m = re.search(r'<footer id="status" data-ready="1" data-mode="(\w+)"', dom)
    assert m, "the page's script did not finish: " + dom[-3000:]
    return m.group(1)


def test_page_shows_threads_states_flame_and_table(tmp_path: Path) -> None:
    page = _page(tmp_path)
    text = page.read_text()
    assert "http://" not in text.replace("http://www.w3.org", "") and "https://" not in text
    url = page.resolve().as_uri()

    dom = render(url)
    assert _ready(dom) == "wall"
    threads = _threads(dom)
    assert set(threads) == {"MainThread (tid 7)", "worker (tid 8)"}, threads
    main_title = threads["MainThread (tid 7)"][1]
    assert "25.0% running, holding the GIL" in main_title and "75.0% off the CPU" in main_title
    worker_title = threads["worker (tid 8)"][1]
    assert "50.0% running, holding the GIL" in worker_title, worker_title
    assert "25.0% on a CPU without the GIL" in worker_title, worker_title
    # The flame graph's top frame is the root of every stack.
    first = re.search(r'<div class="frame[^"]*"[^>]*data-name="([^"]+)"', dom)
    assert first and first.group(1) == "main", dom[-3000:]
    rows = _rows(dom)
    assert {r[4].split()[0] for r in rows[:2]} == {"crunch", "sleep_main"}, rows
    assert rows[0][0] == "3.000 s" and rows[0][1] == "37.5%", rows  # of 8 thread-seconds

    # The GIL view: 1 s of compute and 2 s of crunch.
    dom = render(url + "#mode=gil")
    assert _ready(dom) == "gil"
    rows = _rows(dom)
    assert [(r[4].split()[0], r[0], r[1]) for r in rows[:2]] == [
        ("crunch", "2.000 s", "66.7%"), ("compute", "1.000 s", "33.3%")], rows

    # A window: the first second, in the CPU view (1 ms of CPU per sample).
    dom = render(url + "#mode=cpu&from=0&to=1")
    rows = _rows(dom)
    assert [(r[4].split()[0], r[0]) for r in rows[:1]] == [("compute", "1.000 s")], rows
    assert "crunch" not in {r[4].split()[0] for r in rows}, rows
    assert re.search(r'id="selection"[^>]*>cpu · 0\.000–1\.000 s', dom), dom[-2000:]

    # One thread: the worker alone, wall view, searched for "crunch".
    ref = threads["worker (tid 8)"][0]
    dom = render(url + f"#threads={ref}&q=crunch")
    rows = _rows(dom)
    assert [r[4].split()[0] for r in rows] == ["crunch"], rows
    assert "matched: 3.000 s (75.0% of the selection)" in dom
    assert re.search(r'class="thread-row off" data-ref="\d+"><div class="thread-label" '
                     r'title="[^"]*">MainThread', dom), "MainThread should be shown unpicked"

    for name, frag in (("html-report.png", ""), ("html-report-gil-window.png",
                                                 "#mode=gil&from=0.5&to=3")):
        screenshot(url + frag, name)


@pytest.mark.parametrize("python", one_python())
def test_page_of_a_live_recording(python: str, tmp_path: Path) -> None:
    """A real recording of a target with a busy and a sleepy thread: every thread has a row,
    and the busy thread's function heads the GIL view."""
    out = tmp_path / "live.psr"
    with target(python, "rec_threads.py") as t:
        record(out, t.pid, "-r", "1000", duration=1.5)
    page = tmp_path / "live.html"
    r = CliRunner().invoke(main, ["report", "--html", str(out), "-o", str(page)])
    assert r.exit_code == 0, r.output
    dom = render(page.resolve().as_uri() + "#mode=gil")
    assert _ready(dom) == "gil"
    names = {label.split(" (")[0] for label in _threads(dom)}
    assert {"MainThread", "busy-worker", "sleepy-worker"} <= names, names
    rows = _rows(dom)
    assert rows and rows[0][4].split()[0] == "busy_inner", rows[:5]
    data = json.loads(re.search(r'<script id="psrec-data" type="application/json">(.*?)'
                                r"</script>", page.read_text(), re.DOTALL).group(1))
    assert data["samples"] > 1000 and len(data["threads"]) == len(names)
    screenshot(page.resolve().as_uri(), "html-report-live.png")


def test_differential_flame_graph(tmp_path: Path) -> None:
    """Base: compute 25% of the time, parse 75%; new: the other way round. The page colours
    compute as grown by 50 points and parse as shrunk, sized by either recording."""
    paths = []
    for name, compute_share in (("base", 1), ("new", 3)):
        s = Synth(str(tmp_path / f"{name}.psr"))
        s.thread("MainThread", 7)
        for i in range(2000):
            leaf = COMPUTE if i % 4 < compute_share else ("app.py", "parse", 52)
            s.sample_pass(i * 1000, {"MainThread": ((MAIN, leaf), BUSY, 1000)})
        s.close()
        paths.append(s.path)
    out = tmp_path / "diff.html"
    r = CliRunner().invoke(main, ["diff", *paths, "--html", "-o", str(out)])
    assert r.exit_code == 0, r.output
    url = out.resolve().as_uri()
    dom = render(url)
    assert 'data-ready="1" data-size="new"' in dom, dom[-2000:]
    frames = _diff_frames(dom)
    assert frames["compute"][:2] == ("grew", "+50.00"), frames
    assert frames["parse"][:2] == ("shrank", "-50.00"), frames
    assert frames["main"][:2] == ("same", "+0.00"), frames
    assert frames["compute"][2] == pytest.approx(3 * frames["parse"][2], rel=0.01)
    rows = _rows(dom)
    assert {r[5].split()[0] for r in rows[:2]} == {"compute", "parse"}, rows
    assert {r[2] for r in rows[:2]} == {"+50.00", "-50.00"}, rows
    # sized by the base recording, parse is the wider
    frames = _diff_frames(render(url + "#size=base"))
    assert frames["parse"][2] == pytest.approx(3 * frames["compute"][2], rel=0.01)
    screenshot(url, "html-diff.png")


def _diff_frames(dom: str) -> dict[str, tuple[str, str, float]]:
    """Frame name -> (grew, shrank or same; change in points; width in px)."""
    out = {}
    for kind, name, delta, width in re.findall(
            r'<div class="frame (\w+)" data-name="(\w+)" data-delta="([^"]+)"[^>]*?'
            r'width: ([\d.]+)px', dom):
        out[name] = (kind, delta, float(width))
    return out
