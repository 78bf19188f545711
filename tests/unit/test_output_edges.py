"""Outputs of report and export at their edges: names that are links, a full disk. Every
output format, written by the real CLI from a real (golden) recording."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent.parent / "data"
RECORDING = DATA / "two_threads.psr"

# Each output written to a file with -o: the command and its format flag.
OUTPUTS = {
    "table": ("report",),
    "pstats": ("report", "--pstats"),
    "collapsed": ("report", "--collapsed"),
    "html": ("report", "--html"),
    "speedscope": ("export", "--speedscope"),
    "firefox": ("export", "--firefox"),
    "pprof": ("export", "--pprof"),
}


def psrec(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "psrec", *args], capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("output", list(OUTPUTS))
def test_a_link_output_is_refused_and_with_force_replaced(output: str, tmp_path: Path) -> None:
    """The same rule as record: a link at the output's name (here dangling) is refused in one
    line; with --force the link itself is replaced and what it points to is never created."""
    out, planted = tmp_path / "out", tmp_path / "elsewhere" / "victim"
    planted.parent.mkdir()
    out.symlink_to(planted)
    r = psrec(*OUTPUTS[output], "-o", str(out), str(RECORDING))
    assert r.returncode == 1, r.stderr
    assert r.stderr.count("\n") <= 2 and "is a symbolic link" in r.stderr, r.stderr
    assert not planted.exists() and out.is_symlink()

    r = psrec(*OUTPUTS[output], "--force", "-o", str(out), str(RECORDING))
    assert r.returncode == 0, r.stderr
    assert not planted.exists()
    assert not out.is_symlink() and out.stat().st_size > 0
