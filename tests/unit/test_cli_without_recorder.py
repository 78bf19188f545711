"""`psrec report`, `export` and `info` work where the native recorder cannot be loaded (a
laptop reading a file recorded on a server); `psrec record` then says what is wrong."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"

# Runs the CLI with the native recorder module made unimportable.
RUNNER = """
import sys
sys.modules["psrec.recorder._recorder"] = None
from psrec.cli import main
sys.argv = ["psrec"] + sys.argv[1:]
main()
"""


def psrec(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", RUNNER, *args], capture_output=True, text=True,
                          timeout=120)


def test_report_export_info_without_native_recorder(tmp_path: Path) -> None:
    golden = DATA / "two_threads.psr"
    r = psrec("report", str(golden))
    assert r.returncode == 0, r.stderr
    assert "samples" in r.stdout and "Traceback" not in r.stderr
    out = tmp_path / "x.speedscope.json"
    r = psrec("export", "--speedscope", str(golden), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["profiles"]
    r = psrec("info", str(golden))
    assert r.returncode == 0, r.stderr


def test_record_without_native_recorder_is_one_clear_line(tmp_path: Path) -> None:
    r = psrec("record", "-o", str(tmp_path / "x.psr"), "--", sys.executable, "-c", "pass")
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    assert "recorder" in r.stderr.lower()
    assert not (tmp_path / "x.psr").exists()
