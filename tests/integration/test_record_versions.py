"""A CPython newer than psrec knows: recorded from its _Py_DebugOffsets with a one-line warning,
refused with a clear line when a field psrec needs is missing.

No 3.16 exists to attach to, so the test makes one out of a real one: a copy of sid's 3.15
executable whose _Py_DebugOffsets block states 3.16.0. The interpreter never reads that block
(it is there for debuggers), so the copy runs exactly as 3.15 does, and psrec, which reads the
version from the block first, sees an unknown minor version with 3.15's shape.
"""

from __future__ import annotations

import os
import struct
import subprocess
from pathlib import Path

import gen_layout
import pytest
from rec_live import PROVISIONED, PYTHONS, ROOTS, TARGETS, _wait_line, collapsed, load, psrec, stop

pytestmark = [pytest.mark.live, pytest.mark.timeout(120)]

PY315 = dict(PYTHONS).get("python=3.15")
ROOT = ROOTS.get(PY315 or "")
needs_315 = pytest.mark.skipif(
    PY315 is None or ROOT is None or os.geteuid() != 0,
    reason="needs sid's 3.15 from tests/interpreters/provision, run as root")


def pyruntime_offset(elf: bytes) -> int:
    """File offset of the .PyRuntime section (where _Py_DebugOffsets starts) of an ELF64 file."""
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    def section(i: int) -> tuple[int, int]:
        name, = struct.unpack_from("<I", elf, shoff + i * shentsize)
        offset, = struct.unpack_from("<Q", elf, shoff + i * shentsize + 0x18)
        return name, offset
    _, strtab = section(shstrndx)
    for i in range(shnum):
        name, offset = section(i)
        if elf[strtab + name:strtab + name + 11] == b".PyRuntime\0":
            assert elf[offset:offset + 8] == b"xdebugpy"
            return offset
    raise AssertionError("no .PyRuntime section")


def patched_python(tmp_path: Path, **fields: int) -> Path:
    """A copy of sid's python3.15 whose _Py_DebugOffsets has the given fields changed."""
    assert ROOT is not None
    src = ROOT / "usr" / "bin" / "python3.15"
    header = ROOT / "usr" / "include" / "python3.15" / "internal" / "pycore_debug_offsets.h"
    names = gen_layout.debug_offsets_fields(header.read_text())
    elf = bytearray(src.read_bytes())
    base = pyruntime_offset(bytes(elf))
    for name, value in fields.items():
        struct.pack_into("<Q", elf, base + 8 * names.index(name.replace("__", ".")), value)
    exe = tmp_path / "python3.16"
    exe.write_bytes(bytes(elf))
    exe.chmod(0o755)
    return exe


def start_in_root(exe: Path, script: str, *args: str) -> subprocess.Popen[str]:
    """Runs exe inside the sid root, as tests/interpreters/provision's commands do."""
    assert ROOT is not None
    enter = PROVISIONED / "bin" / "enter-root"
    proc = subprocess.Popen(["unshare", "--mount", str(enter), str(ROOT), str(exe),
                             str(TARGETS / script), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=str(TARGETS),
                            text=True)
    _wait_line(proc, "ready", 30)
    return proc


@needs_315
def test_newer_version_recorded_with_a_warning(tmp_path: Path) -> None:
    exe = patched_python(tmp_path, version=(3 << 24) | (16 << 16) | 0xF0)
    proc = start_in_root(exe, "rec_threads.py")
    out = tmp_path / "new.psr"
    try:
        r = psrec("record", "-d", "1.5", "-o", str(out), str(proc.pid))
        d = psrec("dump", str(proc.pid))
    finally:
        stop(proc)
    assert r.returncode == 0, r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if "warning" in ln]
    assert len(warnings) == 1 and "3.16 is newer than psrec knows" in warnings[0], r.stderr
    samples = load(out)
    busy = [s for s in samples if s.thread == "busy-worker"]
    assert busy and sum(s.leaf == "busy_inner" for s in busy) > 0.9 * len(busy), \
        collapsed(samples)
    assert d.returncode == 0 and "Python 3.16.0" in d.stdout and "busy_inner" in d.stdout, \
        d.stdout + d.stderr


@needs_315
def test_newer_version_missing_a_field_is_refused(tmp_path: Path) -> None:
    exe = patched_python(tmp_path, version=(3 << 24) | (16 << 16) | 0xF0, thread_state__size=0)
    proc = start_in_root(exe, "rec_finite.py", "30")
    try:
        r = psrec("record", "-o", str(tmp_path / "x.psr"), str(proc.pid))
    finally:
        stop(proc)
    assert r.returncode == 1, r.stderr
    first = r.stderr.splitlines()[0]
    assert first.startswith("psrec: error: ") and "Python 3.16.0" in first, r.stderr
    assert "lacks a field psrec needs (thread_state.prev)" in first, r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "x.psr").exists()

