"""`psrec export --firefox` read by the Firefox Profiler's own code: profiler-cli (npm
@firefox-devtools/profiler-cli, which bundles the app's profile loading, upgrading and call
tree logic) loads a real recording's export and shows its threads, their CPU time as psrec
measured it, their hot functions, the GIL markers, the busiest thread selected at open and a
sleeping thread's samples as idle.

(The profiler's web app is not published as a package; its loader is, in this tool.) Needs
Node.js and npm; skips, saying so, without them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from browser import npm_package
from click.testing import CliRunner
from psrec.analyzer.profile import Profile, View
from psrec.cli import main
from rec_live import one_python, record, target

pytestmark = pytest.mark.timeout(600)
PROFILER_CLI = "@firefox-devtools/profiler-cli@0.10.0"


def profiler_cli(tmp_path: Path):  # type: ignore[no-untyped-def]
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed (Debian: apt-get install nodejs npm)")
    script = npm_package(PROFILER_CLI, "@firefox-devtools/profiler-cli") / "dist" / \
        "profiler-cli.js"
    env = {**os.environ, "PROFILER_CLI_SESSION_DIR": str(tmp_path / "pq-sessions"),
           "PROFILER_CLI_NO_SYMBOLICATE": "1", "NO_COLOR": "1"}

    def run(*args: str) -> str:
        r = subprocess.run([node, str(script), *args], capture_output=True, text=True,
                           timeout=120, env=env, check=False)
        assert r.returncode == 0, (args, r.stdout[-2000:], r.stderr[-2000:])
        return r.stdout

    return run


@pytest.mark.parametrize("python", one_python())
def test_profiler_loads_threads_cpu_functions_and_gil(python: str, tmp_path: Path) -> None:
    pq = profiler_cli(tmp_path)
    rec = tmp_path / "live.psr"
    with target(python, "rec_threads.py") as t:
        record(rec, t.pid, "-r", "1000", duration=1.5)
    out = tmp_path / "live.firefox.json"
    r = CliRunner().invoke(main, ["export", "--firefox", str(rec), "-o", str(out)])
    assert r.exit_code == 0, r.output
    loaded = pq("load", str(out))
    try:
        # the thread selected at open is the one that used the most CPU
        assert re.search(r"Selected thread: t-\d+ \(busy-worker", loaded), loaded
        info = pq("profile", "info")
        handles = dict((name, h) for h, name in re.findall(r"(t-\d+): (\S+) \[tid", info))
        assert {"MainThread", "busy-worker", "sleepy-worker"} <= set(handles), info
        # the CPU time the profiler shows per thread is psrec's (threadCPUDelta)
        cpu = Profile.load(str(rec), View(mode="cpu"))
        for name, ref_ms in re.findall(r"t-\d+: (\S+) \[tid \d+\] - ([\d.]+)ms", info):
            want = sum(cpu.seconds(v) for ref, (_, v) in cpu.thread_sums().items()
                       if cpu.threads[ref].name == name) * 1e3
            assert float(ref_ms) == pytest.approx(want, rel=0.01, abs=2.0), (name, info)
        pq("thread", "select", handles["busy-worker"])
        samples = pq("thread", "samples")
        top = re.search(r"f-\d+\. (\S+) - total: \d+", samples.split("Top Functions")[1])
        hot = re.findall(r"f-\d+\. (\S+) - self: \d+", samples)
        assert top and "busy_inner" in samples, samples
        assert not hot or hot[0] == "busy_inner", samples
        markers = pq("thread", "markers")
        assert re.search(r"GIL held\s+\d+ markers", markers), markers
        pq("thread", "select", handles["sleepy-worker"])
        idle = pq("thread", "samples", "--include-idle")
        assert "sleepy_inner" in idle, idle
        # its samples off the CPU are idle to the profiler: left out unless asked for. (A
        # sleeping thread is caught on a CPU now and then, in its wakes: those, and only
        # those, are running samples.)
        import psrec

        run = psrec.load(str(rec))
        sleepy = [r for r, t in run.threads.items() if t.name == "sleepy-worker"]
        mine = [on for th, on in zip(run.samples.thread, run.samples.on_cpu) if th in sleepy]
        on_cpu = sum(1 for on in mine if on == 1)
        assert on_cpu * 10 < len(mine), (on_cpu, len(mine))
        running = pq("thread", "samples")
        if on_cpu == 0:
            assert "sleepy_inner - self" not in running, running
        else:
            assert re.search(rf"Categories \({on_cpu} running samples?\)", running), (
                on_cpu, running)
    finally:
        pq("stop")


def test_profiler_shows_where_tasks_waited(tmp_path: Path) -> None:
    """export --firefox --waits: one more track, the asyncio tasks' waits, each on its task's
    logical stack down to the await, weighing its time: the profiler's own totals are
    `report --collapsed --waits`'s (tests/unit/test_logical_stacks.py's recording)."""
    from psrec.analyzer.firefox import WAITS_TRACK
    from test_logical_stacks import recording

    pq = profiler_cli(tmp_path)
    s = recording(str(tmp_path / "tasks.psr"))
    out = tmp_path / "tasks.firefox.json"
    r = CliRunner().invoke(main, ["export", "--firefox", "--waits", s.path, "-o", str(out)])
    assert r.exit_code == 0, r.output
    c = CliRunner().invoke(main, ["report", s.path, "--collapsed", "--waits", "-o", "-"])
    want: dict[str, float] = {}
    for line in c.output.splitlines():
        stack, _, us = line.rpartition(" ")
        leaf = stack.rsplit(";", 1)[-1].rpartition(" (")[0]
        want[leaf] = want.get(leaf, 0.0) + int(us) / 1000
    pq("load", str(out))
    try:
        info = pq("profile", "info")
        handle = re.search(rf"(t-\d+): {re.escape(WAITS_TRACK)} ", info)
        assert handle, info
        pq("thread", "select", handle.group(1))
        samples = pq("thread", "samples")
        got = {name: float(ms) for name, ms in
               re.findall(r"f-\d+\. (awaits \S+|ready) - self: ([\d.]+)ms", samples)}
        assert got == pytest.approx(want, abs=0.01), (got, want, samples[-2000:])
        assert got["awaits _GatheringFuture"] == pytest.approx(6.0)
    finally:
        pq("stop")
