"""`psrec report --html` opens in headless Chromium from file://, with no network: its thread
rows, state shares, flame graph and function table are read back from the DOM after the
page's script ran, in each mode and for a window and a thread picked through the address's
fragment (which is all the page's controls change). Screenshots are kept as test artifacts.
Over 400 lines and kept whole: every test shares one Chromium session and its DOM readers.

Needs a Chromium binary (Debian: apt-get install chromium); skips, saying so, without one.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from analyzer_synth import BUSY, MAIN, Synth
from browser import render, screenshot
from click.testing import CliRunner
from psrec.cli import main
from psrec.format import _constants as C
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


def _name(row: tuple[str, ...]) -> str:
    """A function table row's function (its cell ends with the function's file:line)."""
    name, _, where = row[4].rpartition(" ")
    return name if name and ":" in where else row[4]


def _threads(dom: str) -> dict[str, tuple[int, str]]:
    """Thread label -> (ref, the label's title with its state shares)."""
    out = {}
    for ref, title, label in re.findall(
            r'<div class="thread-row[^"]*" data-ref="(\d+)"><div class="thread-label" '
            r'title="([^"]*)">([^<]*)</div>', dom):
        out[html.unescape(label)] = (int(ref), html.unescape(title))
    return out


def _ready(dom: str) -> str:
    m = re.search(r'<footer id="status" data-ready="1" data-mode="([\w-]+)"', dom)
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


HANDLE = ("server.py", "handle", 52)
HANDLE_AWAIT = ("server.py", "handle", 55)
TICK_AWAIT = ("server.py", "tick", 65)
TICK = ("server.py", "tick", 62)
POLL = ("asyncio/base_events.py", "_run_once", 1922)


def _task_page(tmp_path: Path) -> Path:
    """3 s at 1 kHz of an event loop's thread and a worker: the loop runs request-1 for its
    first 1.5 s, request-2 for 0.9 s (both made from handle()), ticker (from tick()) for
    0.4 s, and polls for the last 0.2 s; the worker, no event loop, crunches all along. Task
    snapshots every 100 ms: request-2 waits (suspended at an await) until it runs, ticker
    too; each task ends when it stops running."""
    s = Synth(str(tmp_path / "tasks.psr"))
    s.thread("MainThread", 7)
    s.thread("worker", 8)
    s.task("request-1", 0x1000, coroutine=HANDLE)
    s.task("request-2", 0x2000, coroutine=HANDLE)
    s.task("ticker", 0x3000, coroutine=TICK)
    for i in range(3000):
        task = ("request-1" if i < 1500 else "request-2" if i < 2400 else
                "ticker" if i < 2800 else None)
        if i % 100 == 0:
            states: dict[str, tuple[Any, ...]] = {}
            for name, begin, end in (("request-1", 0, 1500), ("request-2", 1500, 2400),
                                     ("ticker", 2400, 2800)):
                if i < begin:
                    at = TICK_AWAIT if name == "ticker" else HANDLE_AWAIT
                    states[name] = (C.TASK_SUSPENDED, "Future", (at,), ())
                elif i < end:
                    states[name] = (C.TASK_RUNNING, "", (), ())
            s.task_snapshot(i * 1000, states)
        loop = ((MAIN, HANDLE if task != "ticker" else TICK), BUSY, 1000, task) if task else \
            ((MAIN, POLL), 0, 0)
        s.sample_pass(i * 1000, {"MainThread": loop, "worker": ((MAIN, CRUNCH), BUSY, 1000)})
    s.close()
    out = tmp_path / "tasks.html"
    r = CliRunner().invoke(main, ["report", "--html", s.path, "-o", str(out)])
    assert r.exit_code == 0, r.output
    return out


def _table(dom: str, table_id: str) -> list[tuple[str, ...]]:
    body = re.search(rf'<table id="{table_id}"[^>]*>.*?<tbody>(.*?)</tbody>', dom, re.DOTALL)
    assert body, dom[-3000:]
    return [tuple(" ".join(html.unescape(re.sub(r"<[^>]+>", " ", c)).split())
                  for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.DOTALL))
            for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", body.group(1), re.DOTALL)]


def test_page_shows_asyncio_tasks_of_the_window_and_threads_picked(tmp_path: Path) -> None:
    """The tasks tables: the tasks by their coroutine, then each task's running time in the
    selection, as `report --tasks` gives it for the same window; absent from a page of a
    recording without tasks."""
    page = _task_page(tmp_path)
    url = page.resolve().as_uri()
    dom = render(url)
    assert _ready(dom) == "wall"
    rows = _table(dom, "task-table")
    assert [(r[5].split()[0], r[0], r[1], r[3], r[4]) for r in rows] == [
        ("request-1", "1.500 s", "50.0%", "-", "1,500"),
        ("request-2", "900.00 ms", "30.0%", "1.500 s", "900"),
        ("ticker", "400.00 ms", "13.3%", "2.400 s", "400"),
        ("<no", "200.00 ms", "6.7%", "-", "200")], rows
    assert rows[0][5] == "request-1 handle (server.py:50)", rows
    assert rows[0][2] == "1.500 s" and rows[3][2] == "0 µs", rows  # CPU: 1 ms a running sample
    assert _table(dom, "coroutine-table") == [
        ("2.400 s", "80.0%", "2.400 s", "1.500 s", "2", "handle (server.py:50)"),
        ("400.00 ms", "13.3%", "400.00 ms", "2.400 s", "1", "tick (server.py:60)")]
    assert "3 tasks ran in the selection" in _text(dom, "tasks-caption")
    # Where they waited: each await with its time.
    assert _table(dom, "await-table") == [("2.400 s", "61.5%", "tick (server.py:65)"),
                                          ("1.500 s", "38.5%", "handle (server.py:55)")]

    # The same numbers as the report's, in a window: from 2 s on, request-2's last 0.4 s.
    report = CliRunner().invoke(main, ["report", "--tasks", str(tmp_path / "tasks.psr"),
                                       "--from", "2", "-o", "-"])
    assert report.exit_code == 0, report.output
    from_report = {line.split()[-3] if "[" in line else line.split()[-2]: line.split()[0]
                   for line in report.output.splitlines()
                   if re.match(r"\s*[\d,]+ +[\d.]+% ", line) and "(" in line}
    dom = render(url + "#from=2")
    rows = _table(dom, "task-table")
    got = {r[5].split()[0]: (r[3], r[4]) for r in rows}
    assert got == {"request-2": ("-", "400"), "ticker": ("400.00 ms", "400"),
                   "<no": ("-", "200")}, rows
    assert _table(dom, "await-table") == [("400.00 ms", "100.0%", "tick (server.py:65)")]
    # a window in which a task only waited: listed, with its waiting time
    rows = _table(render(url + "#from=0.5&to=1"), "task-table")
    got = {r[5].split()[0]: (r[0], r[3], r[4]) for r in rows}
    assert got == {"request-1": ("500.00 ms", "-", "500"),
                   "request-2": ("0 µs", "500.00 ms", "0"),
                   "ticker": ("0 µs", "500.00 ms", "0")}, rows
    assert from_report.get("request-2") == "400" and from_report.get("ticker") == "400", \
        report.output

    # Threads picked: the worker alone ran no task.
    ref = _threads(dom)["worker (tid 8)"][0]
    dom = render(url + f"#threads={ref}")
    assert _table(dom, "task-table") == [] and _table(dom, "await-table") == []
    assert "0 tasks ran in the selection" in _text(dom, "tasks-caption")

    # A recording of no asyncio program: no tasks section.
    plain = render(_page(tmp_path).resolve().as_uri())
    assert re.search(r'<section id="tasks"[^>]*hidden', plain), plain[-3000:]
    screenshot(url, "html-report-tasks.png")


def _acted(page: Path, script: str, name: str) -> str:
    """The file:// address of a copy of the page with `script` run after the page's own: a
    user's actions (typing, hovering) as the DOM events they make. The script writes what it
    wants checked into the DOM, which render() dumps."""
    text = page.read_text()
    at = text.rindex("</body>")
    copy = page.with_name(name)
    copy.write_text(text[:at] + f"<script>{script}</script>\n" + text[at:])
    return copy.resolve().as_uri()


def _text(dom: str, element_id: str) -> str:
    m = re.search(rf'<(\w+) [^>]*id="{element_id}"[^>]*>(.*?)</\1>', dom, re.DOTALL)
    assert m, f"no #{element_id} in " + dom[-2000:]
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", m.group(2))).split())


def test_search_reaches_every_function_and_answers_as_one_types(tmp_path: Path) -> None:
    """1000 functions, of which the table shows 300: a search finds any of them; typing
    searches without a key to confirm, and a pattern that is not a regular expression is
    said on the page and searched as plain text."""
    s = Synth(str(tmp_path / "many.psr"))
    s.thread("MainThread", 7)
    for i in range(3000):
        leaf = ("app.py", f"f{i % 1000:03d}", 100 + i % 1000 * 10)
        s.sample_pass(i * 1000, {"MainThread": ((MAIN, leaf), BUSY, 1000)})
    s.close()
    page = tmp_path / "many.html"
    r = CliRunner().invoke(main, ["report", "--html", s.path, "-o", str(page)])
    assert r.exit_code == 0, r.output
    url = page.resolve().as_uri()
    # every function has the same time: f005 sorts among the 1000 by name alone, past 300
    dom = render(url + "#q=f005")
    assert [r[4].split()[0] for r in _rows(dom)] == ["f005"], _rows(dom)[:5]
    dom = render(url + "#q=^f")
    assert len(_rows(dom)) == 300
    assert "1,000 functions matching the search in the selection; the first 300 shown" in \
        _text(dom, "table-caption")

    typing = """
      const box = document.getElementById("search");
      box.value = %s;
      box.dispatchEvent(new Event("input", { bubbles: true }));
      setTimeout(() => { document.body.dataset.hash = location.hash; }, 1000);
    """
    dom = render(_acted(page, typing % json.dumps("f12"), "typed.html"))
    assert sorted(r[4].split()[0] for r in _rows(dom)) == [f"f12{i}" for i in range(10)]
    assert 'data-hash="#q=f12"' in dom
    assert _text(dom, "search-error") == ""
    dom = render(_acted(page, typing % json.dumps("f005 ("), "typed-bad.html"))
    assert "not a regular expression" in _text(dom, "search-error"), dom[-2000:]
    assert "searched as plain text" in _text(dom, "search-error")
    assert [r[4].split()[0] for r in _rows(dom)] == ["f005"], _rows(dom)[:5]


def test_strip_readout_totals_in_thread_seconds_and_zoomed_table(tmp_path: Path) -> None:
    page = _page(tmp_path)
    url = page.resolve().as_uri()
    dom = render(url)
    # 2 threads over 4 s: 8 thread-seconds, in the header and the selection
    assert "8.00 thread-seconds" in _text(dom, "meta"), _text(dom, "meta")
    assert _text(dom, "selection").endswith("8.000 thread-seconds"), _text(dom, "selection")
    # the recording's rate and errors: a pass every ms, none late, none unreadable
    assert _text(dom, "health") == ("rate: 1,000 Hz asked, 1,000 Hz achieved · "
                                    "0 missed deadlines · 0 sample errors"), _text(dom, "health")

    # Hovering the worker's strip at 2.5 s: it crunches holding the GIL; at 0.5 s it waits
    # off the CPU. (3.11: no GIL-wait share is given.)
    hover = """
      const row = document.querySelector('.thread-row[data-ref="%d"] canvas');
      const box = row.getBoundingClientRect();
      row.dispatchEvent(new MouseEvent("mousemove", { bubbles: true,
        clientX: box.left + box.width * %f, clientY: box.top + 5 }));
    """
    ref = _threads(dom)["worker (tid 8)"][0]
    for at, want in ((0.625, "100.0% running, holding the GIL"), (0.125, "100.0% off the CPU")):
        readout = _text(render(_acted(page, hover % (ref, at), "hover.html")), "readout")
        assert readout.startswith("worker (tid 8) · " + f"{4 * at:.2f}"), readout
        assert want in readout and "waiting" not in readout, readout

    # Zoomed into main > crunch, the table is that subtree's.
    data = json.loads(re.search(r'<script id="psrec-data" type="application/json">(.*?)'
                                r"</script>", page.read_text(), re.DOTALL).group(1))
    key = {k[0]: i for i, k in enumerate(data["keys"])}
    dom = render(url + f"#zoom={key['main']}.{key['crunch']}")
    rows = _rows(dom)
    assert [(r[4].split()[0], r[2], r[3]) for r in rows] == [("crunch", "3.000 s", "100.0%")]
    assert _text(dom, "table-caption").startswith("1 function under crunch (the zoomed frame")


def _gil_page(tmp_path: Path, version: str, waits: bool) -> Path:
    """2 s at 1 kHz: MainThread computes holding the GIL; the worker waits for it in its first
    second (when `waits`: GIL_REQUESTED | GIL_REQUESTED_KNOWN), then sleeps."""
    name = f"gil-{version}-{waits}"
    s = Synth(str(tmp_path / f"{name}.psr"), metadata={"python_version": version})
    s.thread("MainThread", 7)
    s.thread("worker", 8)
    for i in range(2000):
        worker = 0x04 | 0x40 if waits and i < 1000 else 0x40
        s.sample_pass(i * 1000, {"MainThread": ((MAIN, COMPUTE), BUSY | 0x40, 1000),
                                 "worker": ((MAIN, ("app.py", "take_lock", 62)), worker, 0)})
    s.close()
    out = tmp_path / f"{name}.html"
    r = CliRunner().invoke(main, ["report", "--html", s.path, "-o", str(out)])
    assert r.exit_code == 0, r.output
    return out


def test_gil_wait_is_drawn_where_the_recording_can_know_it(tmp_path: Path) -> None:
    page = _gil_page(tmp_path, "3.15.0", True)
    url = page.resolve().as_uri()
    dom = render(url + "#mode=gil-wait")
    assert _ready(dom) == "gil-wait"
    assert "waiting for the GIL" in _text(dom, "legend")
    assert re.search(r'id="gil-wait-note"[^>]*hidden', dom)
    rows = _rows(dom)
    assert [(r[4].split()[0], r[0], r[2]) for r in rows] == [
        ("take_lock", "1.000 s", "1.000 s"), ("main", "0 µs", "1.000 s")], rows
    worker = _threads(dom)["worker (tid 8)"][1]
    assert "50.0% waiting for the GIL" in worker and "50.0% off the CPU" in worker, worker
    screenshot(url + "#mode=gil-wait", "html-report-gil-wait.png")

    # 3.15 with no thread waiting: the wait state is still known (at zero)
    dom = render(_gil_page(tmp_path, "3.15.0", False).resolve().as_uri())
    assert "waiting for the GIL" in _text(dom, "legend") and "3.15+" not in dom
    assert "0.0% waiting for the GIL" in _threads(dom)["worker (tid 8)"][1]
    assert not re.search(r'<button[^>]*data-mode="gil-wait"[^>]*disabled', dom)

    # 3.12 cannot know: no wait state, the reason said once, the gil-wait mode unavailable
    old = _gil_page(tmp_path, "3.12.3", True).resolve().as_uri()
    dom = render(old + "#mode=gil-wait")
    assert _ready(dom) == "wall"
    assert "waiting" not in _text(dom, "legend")
    note = _text(dom, "gil-wait-note")
    assert note.startswith("GIL waits are not shown: Python 3.12.3 does not say"), note
    shown = dom[:dom.index('<script id="psrec-data"')]
    assert shown.count("does not say which threads wait for the GIL") == 2  # note and button
    assert re.search(r'<button[^>]*data-mode="gil-wait"[^>]*disabled', dom), dom[-3000:]
    assert "waiting" not in _threads(dom)["worker (tid 8)"][1]


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


@pytest.mark.parametrize("python", one_python())
def test_the_native_frames_switch_of_a_native_recording(python: str, tmp_path: Path) -> None:
    """A --native recording's page starts in the view --native-frames asked for and has its
    own python / mixed / all switch, kept in the fragment: "all" draws the evaluation loop
    and the start-up chain from _start; "mixed" neither (the start-up frames below the first
    Python frame are one frame, over the program's Python frames); "Python" no native frame
    at all. Each view's table sums to the same time."""
    out = tmp_path / "native.psr"
    with target(python, "rec_threads.py") as t:
        record(out, t.pid, "--native", "-r", "500", duration=1.5)
    pages = {}
    for view in ("mixed", "all", "python"):
        page = tmp_path / f"{view}.html"
        r = CliRunner().invoke(main, ["report", "--html", str(out), "-o", str(page),
                                      "--native-frames", view])
        assert r.exit_code == 0, r.output
        pages[view] = page
    status = r'<footer id="status" data-ready="1" data-mode="[\w-]+" data-native="(\w*)"'
    names: dict[str, set[str]] = {}
    totals: dict[str, str] = {}
    for view, page in pages.items():
        dom = render(page.resolve().as_uri())
        m = re.search(status, dom)
        assert m and m.group(1) == view, dom[-2000:]
        names[view] = {_name(row) for row in _rows(dom)}
        totals[view] = re.search(r'id="selection"[^>]*>([^<]*)<', dom).group(1)  # type: ignore[union-attr]
        # The page's own switch, from the mixed page's fragment, gives the same view.
        switched = render(pages["mixed"].resolve().as_uri() + f"#native={view}")
        m = re.search(status, switched)
        assert m and m.group(1) == view, switched[-2000:]
        assert {_name(row) for row in _rows(switched)} == names[view]
    startup = "[native start-up frames]"
    assert {"busy_inner", "sleepy_inner"} <= names["python"], names["python"]
    assert "_PyEval_EvalFrameDefault" in names["all"] and "_start" in names["all"]
    assert startup not in names["all"]
    assert startup in names["mixed"] and "busy_inner" in names["mixed"]
    assert not {"_PyEval_EvalFrameDefault", "_start", "Py_RunMain"} & names["mixed"]
    assert not (names["python"] - {"busy_inner", "sleepy_inner"}) & (names["all"] - names["python"])
    data = json.loads(re.search(r'<script id="psrec-data" type="application/json">(.*?)'
                                r"</script>", pages["python"].read_text(), re.DOTALL).group(1))
    native = {k[0] for k in data["keys"] if k[3]}
    assert not native & names["python"], native & names["python"]
    # The same samples in each view: the selection's thread-seconds agree.
    assert len({t.rsplit(" · ", 1)[1] for t in totals.values()}) == 1, totals
    screenshot(pages["mixed"].resolve().as_uri(), "html-report-native-mixed.png")


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


def test_differential_flame_graph_in_seconds(tmp_path: Path) -> None:
    """compute grows from 1 s to 3 s, parse stays at 1 s. Compared in shares parse shrank
    (50 % to 25 %); in seconds (--absolute, or the page's switch) it is unchanged."""
    paths = []
    for name, compute_ms in (("base", 1000), ("new", 3000)):
        s = Synth(str(tmp_path / f"{name}.psr"))
        s.thread("MainThread", 7)
        for i in range(compute_ms + 1000):
            leaf = COMPUTE if i < compute_ms else ("app.py", "parse", 52)
            s.sample_pass(i * 1000, {"MainThread": ((MAIN, leaf), BUSY, 1000)})
        s.close()
        paths.append(s.path)
    out = tmp_path / "diff.html"
    r = CliRunner().invoke(main, ["diff", *paths, "--html", "--absolute", "-o", str(out)])
    assert r.exit_code == 0, r.output
    url = out.resolve().as_uri()
    dom = render(url)
    frames = _diff_frames(dom)
    assert frames["compute"][:2] == ("grew", "+2.000"), frames
    assert frames["parse"][:2] == ("same", "+0.000"), frames
    rows = {r[5].split()[0]: r[:4] for r in _rows(dom)}
    assert rows["compute"] == ("1.000 s", "3.000 s", "+2.000", "+2.000"), rows
    assert rows["parse"] == ("1.000 s", "1.000 s", "+0.000", "+0.000"), rows
    assert "(seconds of each recording, new minus base)" in dom
    screenshot(url, "html-diff-seconds.png")
    # the page's switch back to shares
    frames = _diff_frames(render(url + "#compare=shares"))
    assert frames["parse"][:2] == ("shrank", "-25.00"), frames
    # and from a page written for shares, to seconds
    r = CliRunner().invoke(main, ["diff", *paths, "--html", "-o", str(tmp_path / "s.html")])
    assert r.exit_code == 0, r.output
    dom = render((tmp_path / "s.html").resolve().as_uri() + "#compare=seconds")
    assert _diff_frames(dom)["parse"][:2] == ("same", "+0.000")
    assert [r[5].split()[0] for r in _rows(dom)][:1] == ["compute"], _rows(dom)


def test_hostile_names_leave_the_pages_whole(tmp_path: Path) -> None:
    """Names that would end the data element or open a comment around the page's script
    (`<!--<script>`, `</script>`): the report still draws a strip per thread and a table row
    per function, and the diff page its flame graph and table, each showing the names as
    they are."""
    names = ("<!--<script>", "</script>", "<!--", "-->")
    paths = []
    for name in ("base", "new"):
        s = Synth(str(tmp_path / f"{name}.psr"))
        for i, n in enumerate(names):
            s.thread(n, 7 + i)
        for p in range(1000):
            s.sample_pass(p * 1000, {n: ((MAIN, (n + ".py", n, 12)), BUSY, 1000) for n in names})
        s.close()
        paths.append(s.path)
    page = tmp_path / "hostile.html"
    r = CliRunner().invoke(main, ["report", "--html", paths[1], "-o", str(page)])
    assert r.exit_code == 0, r.output
    dom = render(page.resolve().as_uri())
    assert _ready(dom) == "wall"
    assert set(_threads(dom)) == {f"{n} (tid {7 + i})" for i, n in enumerate(names)}, dom[-3000:]
    assert {r[4] for r in _rows(dom)} >= {f"{n} {n}.py:10" for n in names}, _rows(dom)

    diff = tmp_path / "hostile.diff.html"
    r = CliRunner().invoke(main, ["diff", *paths, "--html", "-o", str(diff)])
    assert r.exit_code == 0, r.output
    dom = render(diff.resolve().as_uri())
    assert 'data-ready="1"' in dom, dom[-2000:]
    assert {r[5] for r in _rows(dom)} >= {f"{n} {n}.py:10" for n in names}, _rows(dom)
