"""Headless Chromium for the end-to-end tests: the DOM of a page after its scripts ran, and a
screenshot of it kept as a test artifact (in PSREC_TEST_ARTIFACTS, default
build/test-artifacts). Tests skip, saying why, where no Chromium is installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

ARTIFACTS = Path(os.environ.get("PSREC_TEST_ARTIFACTS",
                                Path(__file__).resolve().parents[2] / "build" / "test-artifacts"))
_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--hide-scrollbars"]


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no Chromium binary on PATH (Debian: apt-get install chromium)")


def _run(url: str, *extra: str, budget_ms: int = 15000) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="psrec-chromium-") as profile_dir:
        r = subprocess.run(
            [chromium(), *_FLAGS, f"--user-data-dir={profile_dir}",
             f"--virtual-time-budget={budget_ms}", *extra, url],
            capture_output=True, text=True, timeout=180, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    return r


def render(url: str, budget_ms: int = 15000) -> str:
    """The DOM of a page after headless Chromium has run it."""
    return _run(url, "--dump-dom", budget_ms=budget_ms).stdout


def render_until(url: str, drawn: Callable[[str], bool], budget_ms: int = 15000,
                 attempts: int = 3) -> str:
    """The DOM of a page once drawn(dom) says it shows what a test checks: a page that draws
    after layout (speedscope's virtual tables) is rendered again with twice the virtual time,
    up to `attempts` renders (a cold Chromium on a busy machine has dumped the DOM before the
    rows were drawn). The last DOM either way: the test's own asserts say what is missing."""
    dom = ""
    for _ in range(attempts):
        dom = render(url, budget_ms)
        if drawn(dom):
            break
        budget_ms *= 2
    return dom


def screenshot(url: str, name: str, size: str = "1400,1000") -> Path:
    """A PNG of the page as Chromium draws it, kept as ARTIFACTS/name."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    out = ARTIFACTS / name
    out.unlink(missing_ok=True)
    _run(url, f"--screenshot={out}", f"--window-size={size}")
    assert out.is_file() and out.stat().st_size > 1000, f"no screenshot written to {out}"
    return out


CACHE = Path(os.environ.get("PSREC_E2E_CACHE", "/tmp/psrec-e2e-cache"))


def npm_package(spec: str, wanted: str) -> Path:
    """CACHE/node_modules/<wanted>, installing the npm package `spec` (name@version) into
    CACHE first if it is not there; skips, saying why, where npm is missing or fails."""
    path = CACHE / "node_modules" / wanted
    if path.exists():
        return path
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(f"{spec} is not installed in {CACHE} and npm is not available")
    CACHE.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(CACHE), spec],
                       capture_output=True, text=True, timeout=300, check=False)
    if r.returncode != 0 or not path.exists():
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"npm install {spec} failed: {last}")
    return path
