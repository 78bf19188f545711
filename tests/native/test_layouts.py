"""The recorder's field tables against offsetof() over each installed CPython's own headers,
and against the running interpreters (3.13+ tables come from the target's _Py_DebugOffsets)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import gen_layout
import pytest
from rec_live import PYTHONS, ROOTS, is_free_threaded, minor_of, target

HERE = Path(__file__).resolve().parent
CPYTHON = HERE.parent.parent / "recorder" / "native" / "cpython"


def include_dirs(python: str, tmp_path: Path) -> list[Path] | None:
    """The -I folders that compile against the interpreter's own headers (internal ones
    included), seen from here: an interpreter in another root has them under that root, and
    Debian's pyconfig.h includes <x86_64-linux-gnu/python3.X/pyconfig.h> from the system's
    include folder, which a folder of links stands in for."""
    query = "import sysconfig; print(sysconfig.get_paths()['include'])"
    out = subprocess.run([python, "-c", query], capture_output=True, text=True, timeout=30)
    inside = out.stdout.strip()
    root = ROOTS.get(python, Path("/"))
    inc = root / inside.lstrip("/")
    if not (inc / "internal").is_dir():
        return None
    dirs = [inc, inc / "internal"]
    arch = root / "usr" / "include" / "x86_64-linux-gnu" / inc.name
    if arch.is_dir():
        links = tmp_path / "arch-include" / "x86_64-linux-gnu"
        links.mkdir(parents=True)
        (links / inc.name).symlink_to(arch)
        dirs.append(links.parent)
    return dirs


def probe(python: str, tmp_path: Path) -> dict[str, int]:
    """offsetof() of every field psrec reads, from the interpreter's own headers."""
    dirs = include_dirs(python, tmp_path)
    if dirs is None:
        pytest.skip(f"{python} has no internal headers installed")
    if not shutil.which("cc"):
        pytest.skip("no C compiler")
    exe = tmp_path / "probe"
    subprocess.run(["cc", "-w", *(f"-I{d}" for d in dirs), "-o", str(exe),
                    str(HERE / "layout_probe.c")], check=True, timeout=120)
    return gen_layout.parse_probe(subprocess.run([str(exe)], capture_output=True, text=True,
                                                 check=True).stdout)


@pytest.mark.parametrize("python", [pytest.param(p, id=i) for i, p in PYTHONS])
def test_table_matches_headers(python: str, tmp_path: Path) -> None:
    """recorder/native/cpython/v3_X.hpp is what gen_layout.py makes of the version's headers
    (default builds: a free-threaded build's offsets are read from its _Py_DebugOffsets, and
    checked by the next test)."""
    if is_free_threaded(python):
        pytest.skip("the tables describe default builds; a free-threaded one is checked live")
    values = probe(python, tmp_path)
    minor = (values["version_hex"] >> 16) & 0xFF
    table = (CPYTHON / f"v3_{minor}.hpp").read_text()
    expected = gen_layout.render(values)
    assert table == expected, f"recorder/native/cpython/v3_{minor}.hpp differs from the headers"


@pytest.mark.parametrize("python", [pytest.param(p, id=i) for i, p in PYTHONS
                                    if minor_of(p) >= (3, 13)])
def test_live_layout_matches_headers(python: str, tmp_path: Path) -> None:
    """On 3.13+ the offsets come from the target's _Py_DebugOffsets, with what that block lacks
    taken from the version's table and moved with the struct it belongs to: every field must
    equal offsetof() over the target's own headers (free-threaded builds included)."""
    import psrec.recorder._recorder as native

    values = probe(python, tmp_path)
    with target(python, "rec_finite.py", "30") as t:
        live = native.inspect(t.pid)["layout"]
    wrong = {gen_layout.FIELDS[k]: (live.get(gen_layout.FIELDS[k]), v)
             for k, v in values.items()
             if k in gen_layout.FIELDS and live.get(gen_layout.FIELDS[k]) != v}
    assert not wrong, f"field: (psrec's, the headers') {wrong}"


@pytest.mark.parametrize("python", [pytest.param(p, id=i) for i, p in PYTHONS
                                    if minor_of(p) >= (3, 13)])
def test_debug_offsets_fields_match_header(python: str, tmp_path: Path) -> None:
    """offsets.cpp lists the fields of the version's _Py_DebugOffsets in the header's order."""
    dirs = include_dirs(python, tmp_path)
    if dirs is None:
        pytest.skip(f"{python} has no internal headers installed")
    header = next((d / n for d in dirs[1:2]
                   for n in ("pycore_debug_offsets.h", "pycore_runtime.h")
                   if (d / n).exists() and "_Py_DebugOffsets {" in (d / n).read_text()), None)
    assert header is not None, f"no _Py_DebugOffsets in {dirs[1]}"
    fields = gen_layout.debug_offsets_fields(header.read_text())
    minor = minor_of(python)[1]
    source = (CPYTHON.parent / "python" / "offsets.cpp").read_text()
    listed = re.search(rf'kDebugFields3_{minor} = R"\((.*?)\)"', source, re.S)
    assert listed, f"offsets.cpp has no field list for 3.{minor}"
    assert listed.group(1).split() == fields


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
    assert info["free_threaded"] == is_free_threaded(python)
    assert info["layout_warning"] == ""


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
