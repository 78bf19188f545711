"""`psrec export --pprof` read by the real pprof: `go tool pprof -top` shows the same totals
and the same functions' own times as `psrec report` (within pprof's rounding), in the wall and
CPU views, and `-traces` shows each stack with its thread, GIL and CPU labels, for a real
recording of a live target.

Needs Go (Debian: apt-get install golang-go); skips, saying so, without it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from psrec.analyzer.profile import Profile, View
from psrec.analyzer.reporters import function_totals
from psrec.cli import main
from rec_live import one_python, record, target

pytestmark = pytest.mark.timeout(600)
pytest.importorskip("psrec.analyzer.proto.profile_pb2",
                    reason="the protobuf package (>= 7.35, Python 3.10+) is not installed")


def go() -> str:
    path = shutil.which("go") or next(
        (str(p) for p in sorted(Path("/usr/lib").glob("go*/bin/go"))), None)
    if path is None:
        pytest.skip("no Go toolchain for go tool pprof (Debian: apt-get install golang-go)")
    return path


def pprof(*args: str) -> str:
    r = subprocess.run([go(), "tool", "pprof", *args], capture_output=True, text=True,
                       timeout=300, env={"HOME": "/tmp", "PATH": "/usr/bin:/bin",
                                         "GOCACHE": "/tmp/psrec-go-cache",
                                         "PPROF_TMPDIR": "/tmp"})
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stderr + r.stdout


def _top(text: str) -> tuple[float, dict[str, float]]:
    """go tool pprof -top -unit ms: the total, and each function's flat time (ms)."""
    total = re.search(r"of ([\d.]+)ms total", text)
    assert total, text[:2000]
    flat = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d.]+)ms\s+[\d.]+%\s+[\d.]+%\s+[\d.]+ms\s+[\d.]+%\s+(.+)$", line)
        if m:
            flat[m.group(2).strip()] = flat.get(m.group(2).strip(), 0.0) + float(m.group(1))
    return float(total.group(1)), flat


def _report(path: Path, mode: str) -> tuple[float, dict[str, float]]:
    """psrec's own totals (ms): all, and own time by function name."""
    p = Profile.load(str(path), View(mode=mode))
    own: dict[str, float] = {}
    for key, t in function_totals(p).items():
        own[key.name] = own.get(key.name, 0.0) + p.seconds(t.own) * 1e3
    return p.seconds(p.total_value) * 1e3, own


@pytest.mark.parametrize("python", one_python())
def test_go_tool_pprof_reads_the_same_totals(python: str, tmp_path: Path) -> None:
    go()
    rec = tmp_path / "live.psr"
    with target(python, "rec_threads.py") as t:
        record(rec, t.pid, "-r", "1000", duration=1.5)
    out = tmp_path / "live.pb.gz"
    r = CliRunner().invoke(main, ["export", "--pprof", str(rec), "-o", str(out)])
    assert r.exit_code == 0, r.output
    for mode, index in (("wall", "wall"), ("cpu", "cpu")):
        total, flat = _top(pprof("-top", "-unit", "ms", f"-sample_index={index}",
                                 "-nodefraction=0", "-nodecount=1000", str(out)))
        want_total, want_own = _report(rec, mode)
        assert total == pytest.approx(want_total, rel=0.005, abs=1.0), (mode, total, want_total)
        # every function psrec gives more than 1% of the time, pprof gives the same own time
        # (pprof names a function without its file), in the CPU view too: CPU used between
        # samples goes where spec section 5 says in both
        for name, ms in want_own.items():
            if ms > 0.01 * want_total:
                assert flat.get(name, 0.0) == pytest.approx(ms, rel=0.01, abs=1.0), (
                    mode, name, flat, want_own)
    top = pprof("-top", "-nodefraction=0", "-nodecount=1000", str(out))
    # the interpreter is the profile's main binary; Python's <module> keeps its name
    assert "Main binary filename not available" not in top
    assert re.search(r"^File: python", top, re.M), top[:500]
    assert "<module>" in top and "<unknown>" not in top, top[:3000]
    traces = pprof("-traces", "-sample_index=wall", str(out))
    assert "busy_inner" in traces
    for label in ("thread:", "gil:", "cpu:"):
        assert label in traces, traces[:3000]
    blocks = re.split(r"\n-{20,}\+?-*\n", traces)
    busy = [b for b in blocks if "busy_inner" in b]
    assert busy and all(re.search(r"thread:\s+busy-worker", b) for b in busy), busy[:2]
    assert any(re.search(r"gil:\s+held", b) and re.search(r"cpu:\s+on", b) for b in busy), busy
    sleepy = [b for b in blocks if "sleepy_inner" in b]
    assert sleepy and any(re.search(r"cpu:\s+off", b) for b in sleepy), sleepy[:2]
