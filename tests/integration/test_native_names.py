"""Native names as a debugger shows them: a C++ library's mangled symbols demangled in every
output (the toolchain's c++filt is the truth), the symbol kept where a format has a place for
it (pprof's system name), on every interpreter."""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from psrec.format import open_recording
from rec_live import TARGETS, python_params, record, target
from rec_live import psrec as run_psrec

pytestmark = [pytest.mark.live, pytest.mark.timeout(300)]

SOURCE = TARGETS / "native" / "psrec_cxx_spin.cpp"
# The spinning thread's C++ frames, outermost first, by symbol.
SYMBOLS = ["_ZN10psrec_demo10overloadedEi", "_ZN10psrec_demo10overloadedEd",
           "_ZN10psrec_demo5twiceIdEElT_", "_ZN10psrec_demo7SpinnerIlE4spinEd"]
_BUILT: list[Path] = []


def library() -> Path:
    """libpsrec_cxx_spin.so, built once a session under /tmp (which the provisioned roots
    share with the host)."""
    if _BUILT:
        return _BUILT[0]
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler (g++): the test builds its C++ library")
    folder = Path(tempfile.mkdtemp(prefix="psrec-cxx-", dir="/tmp"))
    folder.chmod(0o755)
    lib = folder / "libpsrec_cxx_spin.so"
    r = subprocess.run([cxx, "-shared", "-fPIC", "-O1", "-o", str(lib), str(SOURCE)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    _BUILT.append(lib)
    return lib


def cxxfilt(symbols: list[str]) -> list[str]:
    """The symbols as the toolchain's c++filt demangles them."""
    tool = shutil.which("c++filt")
    if tool is None:
        pytest.skip("c++filt (binutils) is the truth for demangled names")
    r = subprocess.run([tool], input="\n".join(symbols) + "\n", capture_output=True,
                       text=True, timeout=60)
    return r.stdout.splitlines()


@pytest.mark.parametrize("python", python_params())
def test_cxx_frames_are_named_as_cxxfilt_names_them(python: str, tmp_path: Path) -> None:
    """A thread spinning in a C++ library, recorded with --native: the report's stacks show
    its functions demangled, in their call order, the names c++filt gives; by line each is
    one row; pprof keeps each symbol as its function's system name; dump --native names them
    the same. The clock it reads is read in the vDSO, named as in gdb."""
    lib = library()
    names = cxxfilt(SYMBOLS)
    assert names[0] == "psrec_demo::overloaded(int)", names  # c++filt works here
    out = tmp_path / "cxx.psr"
    with target(python, "rec_cxx.py", str(lib)) as t:
        record(out, t.pid, "--native", duration=1.5)
        dump = run_psrec("dump", "--native", str(t.pid))
    assert dump.returncode == 0, dump.stderr
    assert re.search(re.escape(names[-1]) + r"\+0x[0-9a-f]+ \(libpsrec_cxx_spin\.so\)",
                     dump.stdout), dump.stdout

    r = run_psrec("report", str(out), "--collapsed", "--thread", "cxx", "-o", "-")
    assert r.returncode == 0, r.stderr
    chains = vdso = 0
    for line in r.stdout.splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [f.rpartition(" (")[0] or f for f in stack.split(";")]
        assert not any(f.startswith("_Z") for f in frames), frames
        # The clock read in the kernel's vDSO, which no file holds: named from its image in
        # the target, as gdb names it, not an anonymous mapping.
        assert not any("[anonymous]" in f for f in stack.split(";")), stack
        vdso += int(count) if stack.endswith("clock_gettime ([vdso]:0)") else 0
        if names[-1] in frames:
            at = frames.index(names[-1])
            assert frames[at - len(names) + 1:at + 1] == names, frames
            chains += int(count)
    assert chains >= 500, r.stdout[-2000:]  # 1.5 s at 1 kHz, nearly all in the spin
    assert vdso >= 100, r.stdout[-2000:]  # most of the spin is in the clock's read

    # By line, a native function (whose frames have no source line) is one row, not one per
    # pc offset.
    r = run_psrec("report", str(out), "--by", "line", "--thread", "cxx", "--limit", "0")
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if line.endswith(f"({names[-1]})")]
    assert len(rows) == 1 and ":0(" in rows[0], rows

    with open_recording(out) as rec:
        shown = {f.name: f.symbol for f in rec.definitions().functions.values() if f.native}
    for symbol, name in zip(SYMBOLS, names):
        assert shown.get(name) == symbol, (name, shown.get(name))

    pb = tmp_path / "p.pb.gz"
    r = run_psrec("export", "--pprof", str(out), "-o", str(pb))
    assert r.returncode == 0, r.stderr
    from psrec.analyzer.proto import profile_pb2

    p = profile_pb2.Profile()
    p.ParseFromString(gzip.decompress(pb.read_bytes()))
    table = p.string_table
    system = {table[f.name]: table[f.system_name] for f in p.function}
    for symbol, name in zip(SYMBOLS, names):
        assert system.get(name) == symbol, (name, system.get(name))
