"""The exported speedscope file opens in the real speedscope app (npm speedscope@1.25.0) in
headless Chromium, and the expected frames render with the expected times.

Needs a Chromium binary (Debian: apt-get install chromium) and speedscope's release files:
PSREC_SPEEDSCOPE_DIR pointing at an unpacked speedscope package, or npm, with which the test
installs speedscope@1.25.0 into PSREC_E2E_CACHE (default /tmp/psrec-e2e-cache). It skips,
saying which, when either is missing.
"""

from __future__ import annotations

import functools
import html
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from analyzer_synth import BUSY, MAIN, Synth
from browser import render_until
from psrec.cli import main

SPEEDSCOPE_VERSION = "1.25.0"
CACHE = Path(os.environ.get("PSREC_E2E_CACHE", "/tmp/psrec-e2e-cache"))

pytestmark = pytest.mark.timeout(600)


def speedscope_release() -> Path:
    env = os.environ.get("PSREC_SPEEDSCOPE_DIR")
    candidates = [Path(env)] if env else []
    candidates.append(CACHE / "node_modules" / "speedscope")
    for c in candidates:
        if (c / "dist" / "release" / "index.html").is_file():
            return c / "dist" / "release"
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(f"speedscope@{SPEEDSCOPE_VERSION} is not installed in {CACHE} and npm is "
                    "not available to install it (set PSREC_SPEEDSCOPE_DIR)")
    CACHE.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(CACHE),
                        f"speedscope@{SPEEDSCOPE_VERSION}"],
                       capture_output=True, text=True, timeout=300, check=False)
    release = CACHE / "node_modules" / "speedscope" / "dist" / "release"
    if r.returncode != 0 or not (release / "index.html").is_file():
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"npm install speedscope@{SPEEDSCOPE_VERSION} failed: {last}")
    return release


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture()
def site(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A loopback HTTP server over a copy of speedscope's release folder."""
    root = tmp_path / "site"
    shutil.copytree(speedscope_release(), root)
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        t.join(timeout=10)


def sandwich_rows(dom: str) -> dict[str, tuple[str, str]]:
    """Symbol name -> (total, self) as the sandwich table shows them."""
    rows = {}
    for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", dom, flags=re.DOTALL):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", tr, flags=re.DOTALL)
        if len(cells) != 3:
            continue
        text = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in cells]
        rows[text[2]] = (text[0], text[1])
    return rows


def test_exported_profile_renders_in_speedscope(site: tuple[Path, str], tmp_path: Path) -> None:
    root, base = site
    s = Synth(str(tmp_path / "e2e.psr"))
    s.thread("MainThread", 7)
    s.thread("helper", 8)
    alpha = ("e2e_app.py", "alpha_outer", 10)
    beta = ("e2e_app.py", "beta_inner", 20)
    gamma = ("e2e_lib.py", "gamma_leaf", 30)
    for i in range(1, 2001):  # 2 s at 1 kHz: alpha 25% self, beta 50% self, gamma 25% self
        k = i % 4
        stack = (MAIN, alpha) if k == 0 else (MAIN, alpha, beta) if k < 3 else (MAIN, gamma)
        s.sample_pass(i * 1000, {"MainThread": (stack, BUSY, 0),
                                 "helper": ((MAIN, ("e2e_lib.py", "helper_wait", 40)), 0, 0)})
    s.close()
    out = root / "profile.json"
    from click.testing import CliRunner

    r = CliRunner().invoke(main, ["export", "--speedscope", s.path, "-o", str(out)])
    assert r.exit_code == 0, r.stderr
    dom = render_until(f"{base}/index.html#profileURL={base}/profile.json&view=sandwich",
                       lambda d: "gamma_leaf" in d)
    assert "e2e.psr (mode wall)" in dom, dom[-3000:]  # the document title: the file loaded
    rows = sandwich_rows(dom)
    assert set(rows) >= {"alpha_outer", "beta_inner", "gamma_leaf", "main"}, dom[-3000:]
    # weights are microseconds: speedscope shows them as real times
    assert rows["beta_inner"] == ("1.00s (50%)", "1.00s (50%)"), rows
    assert rows["alpha_outer"] == ("1.50s (75%)", "500.00ms (25%)"), rows
    assert rows["gamma_leaf"][1] == "500.00ms (25%)", rows
    # both threads are offered as profiles
    assert "MainThread (tid 7)" in dom and "helper (tid 8)" in dom


def test_logical_stacks_render_in_speedscope(site: tuple[Path, str], tmp_path: Path) -> None:
    """--logical's task frames in speedscope: each task a symbol of its own, whose total is
    the time of the samples of the tasks it awaited (tests/unit/test_logical_stacks.py's
    recording)."""
    from test_logical_stacks import recording

    root, base = site
    s = recording(str(tmp_path / "tasks.psr"))
    out = root / "profile.json"
    from click.testing import CliRunner

    r = CliRunner().invoke(main, ["export", "--speedscope", "--logical", s.path, "-o", str(out)])
    assert r.exit_code == 0, r.output
    dom = render_until(f"{base}/index.html#profileURL={base}/profile.json&view=sandwich",
                       lambda d: "gamma_leaf" in d)
    rows = sandwich_rows(dom)
    assert set(rows) >= {"parent", "child-1", "child-2", "loop-a", "loop-b", "bare"}, \
        dom[-3000:]
    under_parent = sum(x.weight for x in s.samples if x.task in ("child-1", "child-2")
                       and x.ts < 5000)
    share = 100 * under_parent / sum(x.weight for x in s.samples)
    assert rows["parent"][0] == f"{under_parent / 1000:.2f}ms ({share:.0f}%)", rows
