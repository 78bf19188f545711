"""Lifecycle and I/O edges of `psrec record` on real targets: outputs named by links, a
closed terminal (SIGHUP), a disk full from the start."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from rec_live import one_python, psrec, target

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
