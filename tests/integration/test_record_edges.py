"""Lifecycle and I/O edges of `psrec record` on real targets: outputs named by links, a
closed terminal (SIGHUP), a disk full from the start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from rec_live import dead_pid, load, one_python, psrec, psrec_async, stop, target, wait_samples
from test_record_output import small_disk

pytestmark = [pytest.mark.live, pytest.mark.timeout(120),
              pytest.mark.parametrize("python", one_python())]


def test_a_dangling_link_output_is_refused_and_with_force_replaced(python: str,
                                                                   tmp_path: Path) -> None:
    """A link planted at the output's name never decides where the recording goes: without
    --force it is refused in one line and nothing is created where it points; with --force
    the link itself is replaced by the recording and its target is still not created."""
    out, planted = tmp_path / "out.psr", tmp_path / "elsewhere" / "victim"
    planted.parent.mkdir()
    out.symlink_to(planted)
    with target(python, "rec_finite.py", "60") as t:
        r = psrec("record", "-q", "-d", "0.5", "-o", str(out), str(t.pid))
        assert r.returncode == 1, r.stderr
        assert "is a symbolic link" in r.stderr and "--force" in r.stderr
        assert "Traceback" not in r.stderr
        assert not planted.exists() and out.is_symlink()

        r = psrec("record", "-q", "-d", "0.5", "--force", "-o", str(out), str(t.pid))
        assert r.returncode == 0, r.stderr
    assert not planted.exists()
    assert not out.is_symlink() and out.is_file()
    info = psrec("info", str(out))
    assert info.returncode == 0, info.stderr


def test_a_link_to_a_file_is_never_written_through(python: str, tmp_path: Path) -> None:
    out, kept = tmp_path / "out.psr", tmp_path / "kept"
    kept.write_bytes(b"not a recording")
    out.symlink_to(kept)
    with target(python, "rec_finite.py", "60") as t:
        r = psrec("record", "-q", "-d", "0.5", "-o", str(out), str(t.pid))
        assert r.returncode == 1 and "is a symbolic link" in r.stderr, r.stderr
        r = psrec("record", "-q", "-d", "0.5", "--force", "-o", str(out), str(t.pid))
        assert r.returncode == 0, r.stderr
    assert kept.read_bytes() == b"not a recording"
    assert not out.is_symlink() and os.path.getsize(out) > 0


def _signalled_recording(python: str, out: Path, sig: signal.Signals) -> tuple[int, str]:
    """Records rec_finite.py until it holds samples, sends sig to psrec; returns its exit
    status and standard error."""
    with target(python, "rec_finite.py", "60") as t:
        p = psrec_async("record", "-o", str(out), str(t.pid))
        try:
            wait_samples(out, p, lambda samples, base: len(samples) > 100, "100 samples")
            p.send_signal(sig)
            _, err = p.communicate(timeout=20)
        finally:
            stop(p)  # type: ignore[arg-type]
    return p.returncode, err


def test_sighup_closes_the_recording_as_sigterm_does(python: str, tmp_path: Path) -> None:
    """A closed terminal (SIGHUP) ends the recording as SIGTERM does: same exit status and
    summary, the file closed cleanly with its last chunk, not recovered."""
    from psrec.format import open_recording

    results = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        (tmp_path / sig.name).mkdir()
        out = tmp_path / sig.name / "run.psr"
        status, err = _signalled_recording(python, out, sig)
        info = psrec("info", str(out))
        assert info.returncode == 0, info.stderr
        assert "closed cleanly" in info.stdout, info.stdout
        with open_recording(out) as rec:
            assert rec.clean and rec.stats["stopped_by"] == "terminate"
            # Every pass taken is in the file: nothing is lost after the last chunk.
            assert rec.stats["samples"] == len(load(out)) > 100
        # The summary (a hint about late passes may follow, as the machine's load decides).
        results[sig.name] = (status, [" samples in " in err, "psrec: wrote " in err], err)
    assert results["SIGHUP"][:2] == results["SIGTERM"][:2] == (0, [True, True]), results


def test_a_disk_full_from_the_start_leaves_no_file(python: str, tmp_path: Path) -> None:
    """Nothing could be written (not even the header): one line, exit 1, and no empty .psr
    left behind."""
    disk = tmp_path / "disk"
    with small_disk(disk, "4k"):
        (disk / "filler").write_bytes(b"x" * 4096)
        out = disk / "run.psr"
        with target(python, "rec_finite.py", "60") as t:
            r = psrec("record", "-q", "-d", "2", "-o", str(out), str(t.pid))
        assert r.returncode == 1, r.stderr
        assert r.stderr.startswith(f"psrec: error: cannot write {out}: "), r.stderr
        assert "Traceback" not in r.stderr
        assert sorted(os.listdir(disk)) == ["filler"]


def test_a_failed_top_leaves_no_temporary_file(python: str, tmp_path: Path) -> None:
    """psrec top on a pid that does not exist, in a real terminal: one line, exit 1, and the
    temporary recording it made for the recorder is removed."""
    import pty

    main, terminal = pty.openpty()
    try:
        r = subprocess.run([sys.executable, "-m", "psrec", "top", str(dead_pid())],
                           stdin=terminal, stdout=terminal, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, "TMPDIR": str(tmp_path)}, timeout=60)
    finally:
        os.close(terminal)
        os.close(main)
    assert r.returncode == 1, r.stderr
    assert "no process with pid" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert os.listdir(tmp_path) == []
