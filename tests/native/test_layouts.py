"""The recorder's field tables against offsetof() over each installed CPython's own headers,
and against the running interpreters (3.13+ tables come from the target's _Py_DebugOffsets)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))
from rec_live import PYTHONS, minor_of, target  # noqa: E402

sys.path.insert(0, str(HERE))
import gen_layout  # noqa: E402

CPYTHON = HERE.parent.parent / "recorder" / "native" / "cpython"


def include_dir(python: str) -> Path | None:
    query = "import sysconfig; print(sysconfig.get_paths()['include'])"
    out = subprocess.run([python, "-c", query],
                         capture_output=True, text=True, timeout=30)
    p = Path(out.stdout.strip())
    return p if (p / "internal").is_dir() else None


@pytest.mark.parametrize("python", [pytest.param(p, id=i) for i, p in PYTHONS])
def test_table_matches_headers(python: str, tmp_path: Path) -> None:
    inc = include_dir(python)
    if inc is None:
        pytest.skip(f"{python} has no internal headers installed")
    if not shutil.which("cc"):
        pytest.skip("no C compiler")
    exe = tmp_path / "probe"
    subprocess.run(["cc", "-w", f"-I{inc}", f"-I{inc / 'internal'}", "-o", str(exe),
                    str(HERE / "layout_probe.c")], check=True, timeout=120)
    values = gen_layout.parse_probe(subprocess.run([str(exe)], capture_output=True, text=True,
                                                   check=True).stdout)
    minor = (values["version_hex"] >> 16) & 0xFF
    table = (CPYTHON / f"v3_{minor}.hpp").read_text()
    expected = gen_layout.render(values)
    assert table == expected, f"recorder/native/cpython/v3_{minor}.hpp differs from {inc}"


def test_reads_its_own_process() -> None:
    """The unwinder reading this very process finds this test function on the main thread."""
    import psrec.recorder._recorder as native

    d = native.dump(os.getpid())
    me = [t for t in d["threads"] if t["native_tid"] == os.getpid()]
    assert me and me[0]["frames"], d
    names = [f[1] for f in me[0]["frames"]]
    code = sys._getframe().f_code
    assert any(n.endswith(code.co_name) for n in names), names
    here = [f for f in me[0]["frames"] if f[1].endswith(code.co_name)][0]
    assert here[0] == code.co_filename
    assert d["info"]["version"].startswith(f"{sys.version_info[0]}.{sys.version_info[1]}")


@pytest.mark.parametrize("python", [pytest.param(p, id=i) for i, p in PYTHONS])
def test_version_and_layout_source(python: str) -> None:
    import psrec.recorder._recorder as native

    with target(python, "rec_finite.py", "30") as t:
        info = native.inspect(t.pid)
    out = subprocess.run([python, "-c", "import sys; print(sys.hexversion)"], capture_output=True,
                         text=True, timeout=30).stdout
    hexversion = int(out)
    assert info["version_hex"] >> 16 == hexversion >> 16
    if hexversion >= 0x030B0000:
        assert info["version_hex"] == hexversion  # Py_Version / _Py_DebugOffsets: exact
    if hexversion >= 0x030D0000:
        assert info["layout_source"] == "_Py_DebugOffsets"


@pytest.mark.parametrize("python", [pytest.param(p, id=i) for i, p in PYTHONS
                                    if minor_of(p) >= (3, 11)])
def test_call_site_table_matches_opcodes(python: str) -> None:
    """cpython/call_sites.hpp holds, for the interpreter's version (3.11+; older frames are
    objects read one by one, with no table), the opcode numbers its own opcode module gives,
    specialized and instrumented ones included."""
    block = subprocess.run([python, str(HERE / "gen_call_sites.py")], capture_output=True,
                           text=True, check=True, timeout=30).stdout
    header = (CPYTHON / "call_sites.hpp").read_text()
    assert block in header, f"recorder/native/cpython/call_sites.hpp lacks, for {python}:\n{block}"
