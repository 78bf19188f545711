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


def _churned(path: Path) -> Path:
    """Three threads with samples (one without a name), two that never got one, PASS_ERRORS
    that miss 5 deadlines, and a trailer whose recorder counted 9 (4 more while it read no
    target) and one data chunk."""
    from analyzer_synth import BUSY, F_A, MAIN, Synth

    s = Synth(str(path))
    for name, tid in (("MainThread", 70), ("", 77), ("web_0", 80), ("gone_1", 81),
                      ("gone_2", 82)):
        s.thread(name, tid)
    for i in range(30):
        s.sample_pass((i + 1) * 1000, {n: ((MAIN, F_A), BUSY, 500)
                                       for n in ("MainThread", "", "web_0")})
        if i in (3, 17):
            s.e.pass_errors((i + 1) * 1000, 0, 2 + (i == 17))
    s.w.write_sealed(*s.e.seal())
    s.w.close({"samples": len(s.samples), "missed_deadlines": 9, "chunks": 1})
    return path


@pytest.mark.skipif(not native_available(), reason="writing a recording needs the native encoder")
def test_info_and_report_count_alike(tmp_path: Path) -> None:
    import json

    path = _churned(tmp_path / "churn.psr")
    d = json.loads(psrec("info", "--json", str(path)).stdout)
    report = psrec("report", str(path), "--per-thread").stdout
    # threads: the ones seen, and the ones with samples, which report counts
    assert d["threads"] == 5 and d["threads_with_samples"] == 3
    assert f"in {d['threads_with_samples']} threads;" in report.splitlines()[0], report
    # missed deadlines: the recorder's count, and those at recorded passes
    assert d["missed_deadlines"] == d["stats"]["missed_deadlines"] == 9
    assert d["missed_deadlines_in_passes"] == 5
    # chunks: every one in the file, and the data chunks the recorder's stats count
    assert d["data_chunks"] == d["stats"]["chunks"] == 1 and d["chunks"] > 1
    # a thread without a name reads the same in both
    assert "thread (tid 77)" in d["thread_names"]
    assert "== thread (tid 77):" in report, report
    text = psrec("info", str(path)).stdout
    assert "9 missed deadlines (5 at recorded passes" in text, text
    assert "5 seen, 3 with samples:" in text and "thread (tid 77)" in text, text
    assert f"{d['chunks']} in the file, 1 of samples" in text, text
