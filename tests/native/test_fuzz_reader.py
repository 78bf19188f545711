"""The record decoder's fuzz target (tests/fuzz/fuzz_reader.cpp), built with the address and
undefined-behaviour sanitizers and run over mutated payloads: no crash, no sanitizer report,
and what a decoder keeps within the budgets of the whole file it is given (spec 9.3)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ["tests/fuzz/fuzz_reader.cpp", "format/native/decoder.cpp", "format/native/encoder.cpp"]


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed here")
@pytest.mark.timeout(300)
def test_the_decoder_survives_mutated_payloads(tmp_path: Path) -> None:
    exe = tmp_path / "fuzz_reader"
    build = subprocess.run(
        ["g++", "-std=c++17", "-O1", "-g", "-fsanitize=address,undefined",
         "-fno-sanitize-recover=all", f"-I{ROOT}", *(str(ROOT / s) for s in SOURCES),
         "-o", str(exe)], capture_output=True, text=True, timeout=240)
    assert build.returncode == 0, build.stderr[-3000:]
    run = subprocess.run([str(exe), "30000", "2026"], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, (run.stdout[-1000:], run.stderr[-3000:])
    assert run.stdout.strip() == "ran 30000 mutated inputs"
