"""A copy of one CPython struct reads only that struct's fields: the recorder's StructView<S>
takes a Field<S> (or a field of a struct S begins with) and refuses, at compile time, a field
of another struct. Compiled here with the project's own headers and the machine's g++."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CXX = shutil.which("g++") or shutil.which("c++")

PROLOGUE = """
#include "recorder/native/memory/remote_memory.hpp"
using namespace psrec;
using namespace psrec::cpython;
int main() {
  Layout l;
  l.tstate_next = 8;
  l.iframe_previous = 8;
  l.code_filename = 112;
  uint8_t bytes[256] = {};
"""


def compile_snippet(body: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    src = tmp_path / "snippet.cpp"
    src.write_text(PROLOGUE + body + "\n  return 0;\n}\n")
    return subprocess.run([str(CXX), "-std=c++17", "-fsyntax-only", f"-I{ROOT}", str(src)],
                          capture_output=True, text=True, timeout=120, check=False)


pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler (g++) on this machine")


def test_a_struct_reads_its_own_fields_and_those_it_begins_with(tmp_path: Path) -> None:
    r = compile_snippet("""
  recorder::StructView<st::TState> t(bytes, sizeof bytes);
  recorder::StructView<st::Code> c(bytes, sizeof bytes);
  (void)t.ptr(l.tstate_next);
  (void)c.ptr(l.code_filename);
  (void)c.ptr(l.object_type);        // PyObject's header begins a code object
  (void)c.get<int64_t>(l.var_size);  // and PyVarObject's
  (void)t.at<uint64_t>(l.tstate_next + 8);  // an offset computed at run time
""", tmp_path)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(("view", "field"), [
    ("st::IFrame", "l.tstate_next"),     # a thread state's field from a frame's bytes
    ("st::TState", "l.iframe_previous"),
    ("st::Object", "l.code_filename"),   # a code object's field from any object
])
def test_a_field_of_another_struct_does_not_compile(view: str, field: str,
                                                     tmp_path: Path) -> None:
    r = compile_snippet(f"""
  recorder::StructView<{view}> v(bytes, sizeof bytes);
  (void)v.ptr({field});
""", tmp_path)
    assert r.returncode != 0
    assert "a field of another struct" in r.stderr, r.stderr
