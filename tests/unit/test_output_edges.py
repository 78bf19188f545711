"""Outputs of report and export at their edges: names that are links, a full disk. Every
output format, written by the real CLI from a real (golden) recording."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from format_helpers import new_writer

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


@pytest.mark.parametrize("output", list(OUTPUTS))
def test_a_full_disk_is_said_in_one_line(output: str) -> None:
    """Every output written to a full disk (/dev/full): one line that says so, exit 1."""
    r = psrec(*OUTPUTS[output], "-o", "/dev/full", str(RECORDING))
    assert r.returncode == 1, r.stderr
    first = r.stderr.splitlines()[0]
    assert first == "psrec: error: cannot write /dev/full: no space left on device", r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr


def test_a_full_standard_output_is_said_in_one_line() -> None:
    with open("/dev/full", "wb") as full:
        r = subprocess.run([sys.executable, "-m", "psrec", "report", "--collapsed", "-o", "-",
                            str(RECORDING)], stdout=full, stderr=subprocess.PIPE, text=True,
                           timeout=60)
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("psrec: error: cannot write standard output: no space left"), \
        r.stderr


def test_pprof_windows_on_a_full_disk_are_said_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "w.0.pb.gz").symlink_to("/dev/full")
    r = psrec("export", "--pprof", "--window", "50ms", "-o", str(tmp_path / "w"),
              str(RECORDING))
    assert r.returncode == 1, r.stderr
    assert "cannot write" in r.stderr and "no space left on device" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("output", list(OUTPUTS))
def test_a_file_on_a_full_disk_leaves_nothing_behind(output: str, tmp_path: Path) -> None:
    """A real file asked for on a disk that fills: one line, and no partial file (or
    temporary one) left in the folder."""
    disk = tmp_path / "disk"
    disk.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "psrec-test", str(disk)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill (needs root): {r.stderr.strip()}")
    try:
        (disk / "filler").write_bytes(b"x" * 4096)
        r = psrec(*OUTPUTS[output], "-o", str(disk / "out"), str(RECORDING))
        assert r.returncode == 1, r.stderr
        assert r.stderr.startswith(f"psrec: error: cannot write {disk / 'out'}: no space"), \
            r.stderr
        assert sorted(os.listdir(disk)) == ["filler"]
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_info_on_a_recording_without_samples_says_so_and_fails_alike(as_json: bool,
                                                                     tmp_path: Path) -> None:
    """A recorder killed in its first second leaves the header and metadata only. info, as
    text or JSON, prints what it can on stdout (the JSON stays valid) and exits 1 with one
    line on stderr that says the recording holds no samples."""
    path = tmp_path / "killed.psr"
    new_writer(path).abandon()  # no data chunk, no index, no trailer: as SIGKILL leaves it
    r = psrec("info", *(["--json"] if as_json else []), str(path))
    assert r.returncode == 1, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if "error" in ln]
    assert errors == [f"psrec: error: {path}: the recording holds no samples"], r.stderr
    if as_json:
        assert json.loads(r.stdout)["samples"] == 0
    else:
        assert "recovered (not closed cleanly)" in r.stdout


def test_a_name_taken_while_an_output_is_written_is_not_replaced(tmp_path: Path) -> None:
    """An output written beside its name takes it only if it is still free (without --force):
    a file that came to hold the name meanwhile stays, and no temporary copy is left."""
    from psrec.format.errors import OutputExistsError
    from psrec.format.writer import Output

    name = tmp_path / "out.json"
    out = Output(name)
    out.file.write(b"{}")
    name.write_bytes(b"came meanwhile")
    with pytest.raises(OutputExistsError):
        out.commit()
    assert name.read_bytes() == b"came meanwhile"
    assert os.listdir(tmp_path) == ["out.json"]


def test_a_window_file_not_created_leaves_the_current_file_going(tmp_path: Path) -> None:
    """PsrWriter.rotate to a name anything holds (a link, a FIFO, a file): refused in one line
    naming it, nothing written there or through, and the current file goes on and closes
    whole with every chunk; a free name is then taken (a file of psrec's own, not a link)."""
    from psrec.format import open_recording
    from psrec.format.errors import PsrecError

    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (tmp_path / "w-1.psr").symlink_to(victim)
    os.mkfifo(tmp_path / "w-2.psr")
    (tmp_path / "w-3.psr").write_bytes(b"earlier")
    with open_recording(RECORDING) as rec:
        chunks = [(c.type, rec.payload(c)) for c in rec.chunks if c.type_name in ("DEFS", "DATA")]
        samples = sum(len(b) for b in rec.stream())
    writer = new_writer(tmp_path / "w-0.psr")
    for n, kind in ((1, "a symbolic link"), (2, "a FIFO"), (3, "a file")):
        with pytest.raises(PsrecError) as err:
            writer.rotate(str(tmp_path / f"w-{n}.psr"), {"stopped_by": "window"})
        assert str(err.value) == f"cannot create {tmp_path}/w-{n}.psr: {kind} is there"
    assert victim.read_bytes() == b"precious" and (tmp_path / "w-3.psr").read_bytes() == b"earlier"
    assert writer.path == str(tmp_path / "w-0.psr")
    for ctype, payload in chunks:  # what comes after the refusals goes on in w-0.psr
        writer.write_chunk(ctype, payload)
    writer.rotate(str(tmp_path / "w-4.psr"), {"stopped_by": "window", "windows": [0, 3]})
    writer.close({"stopped_by": "exit"})
    with open_recording(tmp_path / "w-0.psr") as rec:
        assert rec.clean and rec.stats == {"stopped_by": "window", "windows": [0, 3]}
        assert sum(len(b) for b in rec.stream()) == samples > 0
    with open_recording(tmp_path / "w-4.psr") as rec:
        assert rec.clean
    assert not (tmp_path / "w-4.psr").is_symlink()
    assert sorted(os.listdir(tmp_path)) == ["victim", "w-0.psr", "w-1.psr", "w-2.psr",
                                            "w-3.psr", "w-4.psr"]
