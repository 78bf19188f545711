"""`psrec info` and `psrec dump` on bad input: one line naming the file and the problem, exit
status 1; or, for truncation and corruption, warnings and the recovered data with status 0.
Never a traceback unless -v."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from format_helpers import new_writer, set_major
from psrec.format import _constants as C
from psrec.format import native_available

DATA = Path(__file__).resolve().parent.parent / "data"
GOOD = DATA / "two_threads.psr"


def psrec(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "psrec", *args], check=False,
                          capture_output=True, text=True,
                          timeout=60)


def _zero_samples(path: Path) -> None:
    from psrec.format import _format

    enc = _format.Encoder()
    w = new_writer(path)
    enc.add_thread(1, 1, 1, "MainThread", 0)
    w.write_sealed(*enc.seal())
    w.close({"passes": 0, "samples": 0})


def _bad_file(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"{kind}.psr"
    good = GOOD.read_bytes()
    if kind == "not_a_recording":
        path.write_text("name,value\nx,1\n")
    elif kind == "newer_major":
        path.write_bytes(set_major(good, C.FORMAT_MAJOR + 1))
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "header_only_part":
        path.write_bytes(good[:40])
    elif kind == "missing":
        pass
    elif kind == "directory":
        path.mkdir()
    elif kind == "zero_samples":
        if not native_available():
            pytest.skip("writing a recording needs the native encoder")
        _zero_samples(path)
    return path


ERRORS = {
    "not_a_recording": "not a psrec recording",
    "newer_major": f"format {C.FORMAT_MAJOR + 1}.0",
    "empty": "empty",
    "header_only_part": "truncated",
    "missing": "no such file",
    "directory": "directory",
}


def _one_line_error(proc: subprocess.CompletedProcess[str], path: Path, problem: str) -> None:
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert str(path) in lines[0] and problem in lines[0], lines[0]


@pytest.mark.parametrize("command", ["info", "dump"])
@pytest.mark.parametrize("kind", list(ERRORS))
def test_bad_input_one_line_exit_1(tmp_path: Path, command: str, kind: str) -> None:
    path = _bad_file(tmp_path, kind)
    _one_line_error(psrec(command, str(path)), path, ERRORS[kind])


def test_newer_major_names_both_versions(tmp_path: Path) -> None:
    path = _bad_file(tmp_path, "newer_major")
    proc = psrec("info", str(path))
    assert f"{C.FORMAT_MAJOR + 1}.0" in proc.stderr and f"{C.FORMAT_MAJOR}.x" in proc.stderr


def test_zero_samples(tmp_path: Path) -> None:
    path = _bad_file(tmp_path, "zero_samples")
    _one_line_error(psrec("info", str(path)), path, "no samples")
    # dump shows what there is (the header, the definitions) and does not fail.
    proc = psrec("dump", str(path))
    assert proc.returncode == 0 and "THREAD" in proc.stdout and "Traceback" not in proc.stderr


@pytest.mark.skipif(not native_available(), reason="decoding needs the native codec")
@pytest.mark.parametrize("command", ["info", "dump"])
@pytest.mark.parametrize("damage", ["truncated", "corrupt_chunk"])
def test_damaged_file_warns_and_recovers(tmp_path: Path, command: str, damage: str) -> None:
    good = GOOD.read_bytes()
    path = tmp_path / f"{damage}.psr"
    from psrec.format import open_recording

    with open_recording(GOOD) as rec:
        data = [c for c in rec.chunks if c.type == C.CHUNK_DATA]
    if damage == "truncated":
        path.write_bytes(good[: data[-1].offset + 30])  # inside the last DATA chunk
    else:
        bad = bytearray(good)
        bad[data[-1].offset + C.CHUNK_HEADER_SIZE + 5] ^= 0x40  # in the payload: crc fails
        path.write_bytes(bytes(bad))
    proc = psrec(command, str(path))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    warnings = [ln for ln in proc.stderr.splitlines() if "warning" in ln]
    assert warnings and all(str(path) in ln for ln in warnings), proc.stderr
    if command == "info":
        # The first DATA chunk (3 passes, 6 samples) is recovered.
        assert "6 thread-samples" in proc.stdout, proc.stdout
    else:
        assert proc.stdout.count("PASS +") >= 3


def test_verbose_allows_a_traceback(tmp_path: Path) -> None:
    path = _bad_file(tmp_path, "not_a_recording")
    proc = psrec("-v", "info", str(path))
    assert proc.returncode != 0 and str(path) in proc.stderr
