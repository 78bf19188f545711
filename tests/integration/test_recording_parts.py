"""Files that are part of a recording say so (METADATA `part`, spec sections 2, 7.2 and 7.3):
window files, snapshots taken with `psrec snapshot` and with SIGUSR1. Their figures add up,
and a snapshot of a running recording holds its samples up to the moment it is taken."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from psrec.format import open_recording
from rec_live import TARGETS, load, one_python, psrec, target, wait_recording

pytestmark = [pytest.mark.live, pytest.mark.timeout(120)]


def _info(path: Path) -> dict[str, object]:
    r = psrec("info", "--json", str(path))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("python", one_python())
def test_window_files_say_which_window_and_their_figures_add_up(python: str,
                                                                tmp_path: Path) -> None:
    """--window 1s over about 4.5 s: each file says which window of which series it holds
    and over which span, and no file counts more missed deadlines at its recorded passes
    than it counts in all (each file's figures stop at the seal of its own last chunk)."""
    pattern = str(tmp_path / "w-{n}.psr")
    r = psrec("record", "-q", "-r", "1000", "-o", pattern, "--window", "1s", "--", python,
              str(TARGETS / "per_second.py"), "4")
    assert r.returncode == 0, r.stderr
    files = sorted(tmp_path.glob("w-*.psr"), key=lambda p: int(p.stem.split("-")[1]))
    assert len(files) >= 4, files
    windows = []
    for i, f in enumerate(files):
        d = _info(f)
        part = d["metadata"]["part"]  # type: ignore[index]
        assert part["kind"] == "window" and part["file"] == i and part["of"] == pattern, part
        windows.append(part["window"])
        assert part["to_s"] - part["from_s"] == pytest.approx(1.0), part
        assert f"window {part['window']} of {pattern}" in str(d["part"]), d["part"]
        assert d["missed_deadlines_in_passes"] <= d["missed_deadlines"], (f.name, d)
        with open_recording(f) as rec:
            tick = rec.tick_ns
        samples = load(f)
        assert samples, f
        # Every sample of the file lies in the window its METADATA names.
        lo, hi = part["from_s"] * 1e9 / tick, part["to_s"] * 1e9 / tick
        outside = [s.ts for s in samples if not lo <= s.ts < hi]
        assert not outside, (f.name, part, outside[:5])
    assert windows == sorted(windows) and len(set(windows)) == len(windows), windows
    text = psrec("info", str(files[1])).stdout
    assert f"window {windows[1]} of {pattern}" in text, text


def _recording(python: str, out: Path, act: Callable[[subprocess.Popen[str]], None]) -> str:
    """Records per_second.py (attached) into `out`, calls act(recorder) once the recording
    has run 1.6 s (its second chunk half filled), then stops it; returns its stderr."""
    with target(python, "per_second.py") as t:
        proc = subprocess.Popen([sys.executable, "-m", "psrec", "record", "-q", "-r", "1000",
                                 "-o", str(out), str(t.pid)], cwd=str(TARGETS),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_recording(out, proc)
            time.sleep(1.6)
            act(proc)
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return err


def _last_pass_ns(path: Path) -> int:
    with open_recording(path) as rec:
        base, tick = rec.header.created_mono_ns, rec.tick_ns
    return base + max(s.ts for s in load(path)) * tick


@pytest.mark.parametrize("python", one_python())
def test_a_snapshot_of_a_running_recording_holds_it_up_to_now(python: str,
                                                              tmp_path: Path) -> None:
    """`psrec snapshot` of a recording being written asks its recorder to seal the chunk it
    is filling: the copy holds the samples up to the moment it was taken (a chunk spans up
    to a second; what it leaves out is a few passes), and says what it is a snapshot of."""
    out, snap = tmp_path / "live.psr", tmp_path / "snap.psr"
    asked: list[int] = []

    def take(_: subprocess.Popen[str]) -> None:
        asked.append(time.monotonic_ns())
        r = psrec("snapshot", str(out), "-o", str(snap))
        assert r.returncode == 0, r.stderr
        assert "the recording goes on" in r.stderr, r.stderr

    _recording(python, out, take)
    d = _info(snap)
    part = d["metadata"]["part"]  # type: ignore[index]
    assert part["kind"] == "snapshot" and part["running"] is True, part
    assert part["of"] == str(out), part
    assert part["left_out_s"] < 0.25, part
    assert asked[0] - _last_pass_ns(snap) < 0.25e9, (asked[0] - _last_pass_ns(snap)) / 1e9
    assert "snapshot of" in str(d["part"]) and "went on" in str(d["part"]), d["part"]


@pytest.mark.parametrize("python", one_python())
def test_sigusr1_snapshot_holds_the_chunk_in_progress(python: str, tmp_path: Path) -> None:
    """SIGUSR1 asks the recorder for a snapshot beside its file: taken once the chunk sealed
    after the signal is written, it holds the samples up to the signal."""
    out = tmp_path / "fr.psr"
    asked: list[int] = []
    found: list[Path] = []

    def signal_it(proc: subprocess.Popen[str]) -> None:
        asked.append(time.monotonic_ns())
        proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not found:
            found.extend(tmp_path.glob("fr.snapshot-*.psr"))
            time.sleep(0.05)

    err = _recording(python, out, signal_it)
    assert len(found) == 1, err
    with open_recording(found[0]) as rec:
        part = rec.metadata["part"]
    assert part["kind"] == "snapshot" and part["running"] is True, part
    assert asked[0] - _last_pass_ns(found[0]) < 0.25e9, (asked[0] - _last_pass_ns(found[0])) / 1e9
