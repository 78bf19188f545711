"""`psrec report --slices`: the GIL-wait column (the share of each slice's samples waiting to
take the GIL), and the one line that replaces it where a recording cannot know GIL waits."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from analyzer_synth import BUSY, F_A, F_B, MAIN, ON_CPU, Synth
from click.testing import CliRunner
from psrec.analyzer.outputs import get
from psrec.analyzer.profile import Profile, View
from psrec.cli import main
from psrec.format import constants as C
from psrec.format import native_available

pytestmark = pytest.mark.skipif(not native_available(),
                                reason="writing a recording needs the native encoder")

KNOWN = C.STATUS_GIL_REQUESTED_KNOWN
WAITING = C.STATUS_GIL_REQUESTED | KNOWN


def _recording(path: Path, version: str) -> str:
    """Four threads over 300 passes of 1 ms: main holds the GIL; in the first 100 ms the
    three web threads wait for it, off CPU; in the next 100 ms one of them waits, on a CPU
    (spinning); in the last 100 ms none does."""
    s = Synth(str(path), metadata={"python_version": version})
    for name, tid in (("MainThread", 10), ("web_0", 11), ("web_1", 12), ("web_2", 13)):
        s.thread(name, tid)
    for i in range(300):
        entries = {"MainThread": ((MAIN, F_A), BUSY | KNOWN, 900)}
        for k in range(3):
            if i < 100:
                status = WAITING
            elif i < 200 and k == 0:
                status = WAITING | ON_CPU
            else:
                status = ON_CPU | KNOWN
            entries[f"web_{k}"] = ((MAIN, F_B), status, 0)
        s.sample_pass(i * 1000, entries)
    s.close()
    return s.path


def _rows(out: str) -> list[list[str]]:
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("slice (s)"))
    rows = []
    for ln in lines[head + 1:]:
        if not ln.strip():
            break
        rows.append(ln.split())
    return rows


def _report(path: str, mode: str = "wall", native: bool = True) -> str:
    """The sliced report as the command writes it, through the native engine or not."""
    if native:
        r = CliRunner().invoke(main, ["report", path, "--slices", "100ms", "--mode", mode])
        assert r.exit_code == 0, r.stderr
        return r.stdout
    reporter = get("slices")(slice_seconds=0.1)
    profile = Profile.load(path, View(mode=mode), slice_seconds=0.1, native=False,
                           also=reporter.also(mode))
    out = io.StringIO()
    reporter.write(profile, out)
    return out.getvalue()


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("mode", ["wall", "cpu", "gil-wait"])
def test_the_column_is_the_share_of_all_samples_waiting(tmp_path: Path, mode: str,
                                                        native: bool) -> None:
    out = _report(_recording(tmp_path / "w.psr", "3.15.0a2"), mode, native)
    assert "GIL-wait: share of all the slice's samples" in out and "No GIL-wait" not in out
    head = next(ln for ln in out.splitlines() if ln.lstrip().startswith("slice (s)")).split()
    at = head.index("GIL-wait") - 1  # "slice (s)" is two words in the heading
    shares = {row[0]: row[at] for row in _rows(out)}
    # 3 of 4 threads wait in the first slice, 1 of 4 in the second, none in the third,
    # whatever the mode leaves in the other columns.
    want = {"0.000-0.100": "75.0%", "0.100-0.200": "25.0%", "0.200-0.300": "0.0%"}
    assert {k: v for k, v in shares.items() if k in want} == \
        {k: v for k, v in want.items() if k in shares}, out
    assert len(shares) >= 2, out


def test_a_recording_that_cannot_know_says_so_once(tmp_path: Path) -> None:
    out = _report(_recording(tmp_path / "o.psr", "3.12.4"))
    assert out.count("No GIL-wait column: Python 3.12.4 does not say which threads wait") == 1
    assert "GIL-wait" not in out.replace("No GIL-wait column", "")
    assert all(len(row) >= 5 and not row[4].endswith("%") for row in _rows(out)), out


def test_gil_wait_known_as_the_recorder_says() -> None:
    """The recorder's word (options.gil_requested, from the target's layout) decides; a
    recording without it is judged by its Python's version."""
    from psrec.analyzer.view import gil_wait_unknown

    def meta(version: str, said: bool | None) -> dict[str, Any]:
        m: dict[str, Any] = {"python_version": version, "python_build": {}}
        if said is not None:
            m["options"] = {"gil_requested": said}
        return m

    assert gil_wait_unknown(meta("3.15.2", True)) is None
    assert gil_wait_unknown(meta("3.15.2", None)) is None
    assert "could not read" in (gil_wait_unknown(meta("3.15.2", False)) or "")
    assert "3.12.1 does not say" in (gil_wait_unknown(meta("3.12.1", None)) or "")
    assert "3.12.1 does not say" in (gil_wait_unknown(meta("3.12.1", False)) or "")
