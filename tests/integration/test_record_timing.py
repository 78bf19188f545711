"""The sampler's schedule: deadline accounting at a fixed rate, and free-running at -r max."""

from __future__ import annotations

from pathlib import Path

import pytest
from psrec.format import open_recording
from rec_live import python_params, record, target

pytestmark = [pytest.mark.live, pytest.mark.timeout(120)]


def _stats(path: Path) -> dict:
    with open_recording(path) as rec:
        return dict(rec.stats)


@pytest.mark.parametrize("python", python_params()[-1:])
def test_passes_and_missed_deadlines_account_for_every_deadline(
    python: str, tmp_path: Path
) -> None:
    """Absolute deadlines: every deadline in the recording is either a pass or a counted miss."""
    out = tmp_path / "rate.psr"
    with target(python, "rec_threads.py") as t:
        record(out, t.pid, "-r", "1000", duration=2.0)
    st = _stats(out)
    deadlines = st["duration_ns"] / 1e6
    accounted = st["passes"] + st["missed_deadlines"]
    assert abs(accounted - deadlines) <= 0.01 * deadlines + 2, st


@pytest.mark.parametrize("python", python_params()[-1:])
def test_max_rate_runs_back_to_back(python: str, tmp_path: Path) -> None:
    """-r max never sleeps and has no deadlines to miss; it never asks for real-time priority."""
    out = tmp_path / "max.psr"
    with target(python, "rec_threads.py") as t:
        record(out, t.pid, "-r", "max", duration=1.0)
    st = _stats(out)
    assert st["missed_deadlines"] == 0 and st["late_passes"] == 0, st
    assert not st["realtime"], st
    assert st["passes"] / (st["duration_ns"] / 1e9) > 2000, st


@pytest.mark.parametrize("python", python_params()[-1:])
def test_stat_is_read_only_for_threads_switched_since_their_last_sample(
    python: str, tmp_path: Path
) -> None:
    """Two of rec_threads.py's three threads sleep and the busy one is switched only at ticks
    and preemptions: most CPU states come from schedstat alone (the CPU flags themselves are
    checked in test_record_live.py)."""
    out = tmp_path / "stat.psr"
    with target(python, "rec_threads.py") as t:
        record(out, t.pid, "-r", "1000", duration=1.5)
    st = _stats(out)
    assert st["samples"] > 1000, st
    assert st["stat_reads"] < 0.5 * st["samples"], st


@pytest.mark.parametrize("python", python_params()[-1:])
def test_realtime_priority_only_when_asked(python: str, tmp_path: Path) -> None:
    """By default the sampler never preempts the target with real-time priority; --realtime
    asks for it (granted here only with CAP_SYS_NICE or an RLIMIT_RTPRIO, as root has)."""
    import os
    import resource

    plain, asked = tmp_path / "plain.psr", tmp_path / "rt.psr"
    with target(python, "rec_threads.py") as t:
        record(plain, t.pid, "-r", "1000", duration=0.5)
        record(asked, t.pid, "-r", "1000", "--realtime", duration=0.5)
    assert not _stats(plain)["realtime"]
    may_rt = os.geteuid() == 0 or resource.getrlimit(resource.RLIMIT_RTPRIO)[0] > 0
    assert _stats(asked)["realtime"] == may_rt
