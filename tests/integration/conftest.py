"""Fixtures of the live tests. Helpers that are not fixtures (interpreters, targets, psrec
runs, recordings, the bounds a timing test derives from its run) are in rec_live.py."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def recorder() -> None:
    """Skips, saying why, where this install has no native recorder (a build without it),
    checked here rather than guessed from a failed recording. A native recorder that is there
    but does not load, or any other failure of `psrec record`, fails the test."""
    if importlib.util.find_spec("psrec.recorder._recorder") is None:
        pytest.skip("this install has no native recorder (psrec.recorder._recorder)")


@pytest.fixture
def busy() -> Iterator[None]:
    """A CPU-bound process per core, for as long as the test runs: a loaded host."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(os.cpu_count() or 1)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=10)
