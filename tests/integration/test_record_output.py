"""Outputs are never lost or destroyed: a full disk, devices, standard output, links, and
outputs that fail halfway. Real disks (a small tmpfs), real devices, real recordings."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from psrec.format import open_recording
from rec_live import TARGETS, one_python, psrec, psrec_async, wait_recording

pytestmark = [pytest.mark.live, pytest.mark.timeout(300),
              pytest.mark.parametrize("python", one_python())]


@contextmanager
def small_disk(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted at where (root only)."""
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "psrec-test", str(where)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill (needs root): {r.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _device(path: Path, major: int, minor: int) -> Path:
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(major, minor))
    except PermissionError:
        pytest.skip("creating a device node needs root (CAP_MKNOD)")
    return path


@pytest.mark.parametrize("mode", ["launch", "attach"])
def test_a_full_disk_is_said_in_one_line_and_keeps_complete_chunks(python: str, mode: str,
                                                                    tmp_path: Path) -> None:
    """The disk fills while recording: psrec says so at once in one line (no traceback),
    stops recording, keeps every chunk written whole (the file is readable), waits for a
    launched program, and exits non-zero."""
    # Room for the first second's chunks (25-80 KB of thread churn, the most on a
    # free-threaded build) but not for ten seconds of them.
    with small_disk(tmp_path / "disk", "112k") as disk:
        out = disk / "run.psr"
        if mode == "launch":
            # 20 s: the disk fills within a few seconds, long before the program ends, even
            # where a busy machine makes the churn (and the data) slower.
            r = psrec("record", "-r", "10k", "-o", str(out), "--", python, "rec_churn.py", "20",
                      timeout=60)
        else:
            target = subprocess.Popen([python, "rec_churn.py", "30"], cwd=str(TARGETS),
                                      stdout=subprocess.DEVNULL)
            try:
                r = psrec("record", "-r", "10k", "-o", str(out), str(target.pid), timeout=60)
                assert target.poll() is None, "the target must keep running"
            finally:
                target.kill()
                target.wait()
        assert r.returncode == 1, r.stderr
        assert "Traceback" not in r.stderr, r.stderr
        errors = [ln for ln in r.stderr.splitlines() if ln.startswith("psrec: error:")]
        assert len(errors) == 1 and "No space left on device" in errors[0], r.stderr
        if mode == "launch":  # said when it happened, not only once the program ended
            assert "recording stopped; waiting for" in r.stderr, r.stderr
        with open_recording(out) as rec:
            data = [c for c in rec.chunks if c.type_name == "DATA"]
            assert data, rec.chunks
            assert sum(1 for _ in rec.stream()) == len(data)


def test_a_flight_recording_that_cannot_drop_its_oldest_chunks_says_so(python: str,
                                                                       tmp_path: Path) -> None:
    """--max-size whose folder becomes read-only while it records (a read-only bind mount over
    it: the open file is still written, nothing new can be made in the folder): the copy
    without the oldest chunks cannot be made, which is said once in one line, and the
    recording goes on past its bound with every sample kept; once the folder is writable
    again, the next copy is made and that is said too."""
    folder = tmp_path / "out"
    folder.mkdir()
    out = folder / "run.psr"
    proc = psrec_async("record", "-r", "10k", "--max-size", "64k", "-o", str(out), "--", python,
                       "rec_churn.py", "8")
    bound = False
    try:
        wait_recording(out, proc)
        r = subprocess.run(f"mount --bind {folder} {folder} && "
                           f"mount -o remount,bind,ro {folder}", shell=True,
                           capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot make the folder read-only under the recorder (a bind mount "
                        f"needs root): {r.stderr.strip()}")
        bound = True
        time.sleep(4)
        grown = out.stat().st_size
        subprocess.run(["umount", str(folder)], check=True)
        bound = False
        _, err = proc.communicate(timeout=60)
    finally:
        if bound:
            subprocess.run(["umount", "-l", str(folder)], check=False)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    said = [ln for ln in err.splitlines() if "cannot drop the oldest chunks" in ln]
    assert len(said) == 1 and "Read-only file system" in said[0], err
    assert grown > 64 * 1024, grown  # past its bound while it could not drop chunks
    assert any("within --keep/--max-size again" in ln for ln in err.splitlines()), err
    assert out.stat().st_size <= 64 * 1024
    with open_recording(out) as rec:
        assert rec.stats and rec.stats.get("rewrite_failures", 0) >= 1, rec.stats


def test_recording_to_standard_output(python: str, tmp_path: Path) -> None:
    """`-o -` writes the recording to stdout (the program's own output goes to stderr then),
    and so does `-o /dev/stdout`."""
    for name in ("-", "/dev/stdout"):
        out = tmp_path / f"stdout{len(name)}.psr"
        with open(out, "wb") as fh:
            r = subprocess.run([sys.executable, "-m", "psrec", "record", "-q", "-o", name, "--",
                                python, "rec_finite.py", "0.5", "0"], stdout=fh,
                               stderr=subprocess.PIPE, text=True, cwd=str(TARGETS), timeout=60)
        assert r.returncode == 0, r.stderr
        assert "ready" in r.stderr  # the program's stdout
        with open_recording(out) as rec:
            assert rec.clean and rec.stats["samples"] > 200, rec.stats


def test_outputs_to_devices_and_links_are_written_in_place(python: str, tmp_path: Path) -> None:
    """A device or a link to a stream is written in place and never removed, even when the
    write fails (a copy of /dev/full fails every write: it was deleted before)."""
    rec = tmp_path / "r.psr"
    r = psrec("record", "-q", "-o", str(rec), "--", python, "rec_finite.py", "0.3", "0")
    assert r.returncode == 0, r.stderr
    null = _device(tmp_path / "fake_null", 1, 3)
    full = _device(tmp_path / "fake_full", 1, 7)
    ok = psrec("report", str(rec), "--collapsed", "-o", str(null))
    assert ok.returncode == 0, ok.stderr
    failed = psrec("report", str(rec), "--collapsed", "-o", str(full))
    assert failed.returncode != 0 and "Traceback" not in failed.stderr, failed.stderr
    for dev in (null, full):
        assert stat.S_ISCHR(os.lstat(dev).st_mode), f"{dev} was replaced or removed"
    link = tmp_path / "to_stdout"
    link.symlink_to("/proc/self/fd/1")
    r = psrec("report", str(rec), "--collapsed", "-o", str(link))
    assert r.returncode == 0 and "finite_work" in r.stdout, r.stderr
    assert link.is_symlink()


def test_a_failed_output_leaves_the_old_file_whole(python: str, tmp_path: Path) -> None:
    """--force over an existing file: the new output is written beside it and takes its name
    only when complete; a write that fails (a full disk) leaves the old file as it was and
    no partial file behind."""
    rec = tmp_path / "r.psr"
    r = psrec("record", "-q", "-r", "10k", "-o", str(rec), "--", python, "rec_churn.py", "1")
    assert r.returncode == 0, r.stderr
    with small_disk(tmp_path / "disk", "8k") as disk:
        old = disk / "out.speedscope.json"
        old.write_text("precious")
        r = psrec("export", str(rec), "--force", "-o", str(old))
        assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
        assert old.read_text() == "precious"
        assert sorted(p.name for p in disk.iterdir()) == [old.name]


def test_control_characters_in_names_are_escaped_in_text(python: str, tmp_path: Path) -> None:
    """A function or thread name holding terminal control sequences is shown escaped by the
    text outputs (report, --per-thread, --slices, info), never sent raw to the terminal."""
    out = tmp_path / "esc.psr"
    r = psrec("record", "-q", "-o", str(out), "--", python, "rec_escapes.py", "1")
    assert r.returncode == 0, r.stderr
    texts = {
        "report": psrec("report", str(out)).stdout,
        "per-thread": psrec("report", str(out), "--per-thread").stdout,
        "slices": psrec("report", str(out), "--slices", "500ms").stdout,
        "info": psrec("info", str(out)).stdout,
    }
    for what, text in texts.items():
        assert "\x1b" not in text, (what, text)
    assert "sp\\x1b[2Jin" in texts["report"], texts["report"]
    for what in ("per-thread", "slices", "info"):
        assert "bad\\x1b[41mname" in texts[what], (what, texts[what])
