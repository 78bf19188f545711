"""Writes recorder/native/cpython/v3_X.hpp from layout_probe.c's output for one interpreter.

Usage: python tests/native/gen_layout.py PROBE_OUTPUT > recorder/native/cpython/v3_X.hpp
(test_layouts.py builds and runs the probe; this script only formats its output).
"""

from __future__ import annotations

import re
import sys

FIELDS = {
    "runtime.interpreters_head": "runtime_interpreters_head",
    "runtime.gil_locked": "runtime_gil_locked",
    "runtime.gil_last_holder": "runtime_gil_last_holder",
    "interp.next": "interp_next",
    "interp.threads_head": "interp_threads_head",
    "interp.modules": "interp_modules",
    "interp.ceval_gil": "interp_ceval_gil",
    "gil.locked": "gil_locked",
    "gil.last_holder": "gil_last_holder",
    "tstate.prev": "tstate_prev",
    "tstate.next": "tstate_next",
    "tstate.interp": "tstate_interp",
    "tstate.thread_id": "tstate_thread_id",
    "tstate.native_thread_id": "tstate_native_thread_id",
    "tstate.frame": "tstate_frame",
    "tstate.cframe": "tstate_cframe",
    "cframe.current_frame": "cframe_current_frame",
    "tstate.current_frame": "tstate_current_frame",
    "tstate.datastack_chunk": "tstate_datastack_chunk",
    "tstate.datastack_top": "tstate_datastack_top",
    "tstate.status": "tstate_status",
    "tstate.state": "tstate_state",
    "tstate.holds_gil": "tstate_holds_gil",
    "tstate.gil_requested": "tstate_gil_requested",
    "tstate.base_frame": "tstate_base_frame",
    "tstate.last_profiled_frame": "tstate_last_profiled_frame",
    "tstate.last_profiled_frame_seq": "tstate_last_profiled_frame_seq",
    "chunk.previous": "chunk_previous",
    "chunk.size": "chunk_size",
    "chunk.top": "chunk_top",
    "chunk.data": "chunk_data",
    "frame.f_back": "frame_back",
    "frame.f_code": "frame_code",
    "frame.f_lasti": "frame_lasti",
    "frame.f_state": "frame_state",
    "frame.f_gen": "frame_gen",
    "iframe.code": "iframe_code",
    "iframe.previous": "iframe_previous",
    "iframe.instr": "iframe_instr",
    "iframe.owner": "iframe_owner",
    "iframe.is_entry": "iframe_is_entry",
    "iframe.tlbc_index": "iframe_tlbc_index",
    "iframe.localsplus": "iframe_size",
    "code.filename": "code_filename",
    "code.name": "code_name",
    "code.qualname": "code_qualname",
    "code.firstlineno": "code_firstlineno",
    "code.linetable": "code_linetable",
    "code.code_adaptive": "code_adaptive",
    "code.stacksize": "code_stacksize",
    "code.nlocalsplus": "code_nlocalsplus",
    "code.tlbc": "code_tlbc",
    "object.ob_type": "object_type",
    "bytes.ob_size": "var_size",
    "bytes.ob_sval": "bytes_sval",
    "unicode.length": "unicode_length",
    "unicode.state": "unicode_state",
    "unicode.ascii_size": "unicode_ascii_size",
    "unicode.compact_size": "unicode_compact_size",
    "type.basicsize": "type_basicsize",
    "type.flags": "type_flags",
    "type.dictoffset": "type_dictoffset",
    "heaptype.cached_keys": "heaptype_cached_keys",
    "dict.keys": "dict_keys",
    "dict.values": "dict_values",
    "dictkeys.size": "dictkeys_size",
    "dictkeys.log2_size": "dictkeys_log2_size",
    "dictkeys.log2_index_bytes": "dictkeys_log2_index_bytes",
    "dictkeys.kind": "dictkeys_kind",
    "dictkeys.nentries": "dictkeys_nentries",
    "dictkeys.indices": "dictkeys_indices",
    "dictvalues.values": "dictvalues_values",
    "module.dict": "module_dict",
}

# Before 3.11 the dict keys object and the module object are private to their .c files
# (Objects/dict-common.h: dk_refcnt, dk_size, dk_lookup, dk_usable, dk_nentries, dk_indices;
# Objects/moduleobject.c: PyObject_HEAD, md_dict), so no installed header can be probed for
# them. These are their offsets on LP64; the live thread-name tests check them.
BEFORE_3_11 = {
    "dictkeys.size": 8,
    "dictkeys.nentries": 32,
    "dictkeys.indices": 40,
    "dictvalues.values": 0,
    "module.dict": 16,
}


def debug_offsets_fields(header: str) -> list[str]:
    """The fields of struct _Py_DebugOffsets in a CPython header, in order, as section.field
    (the 8-byte cookie and every uint64_t count as one field each)."""
    body = re.search(r"typedef struct _Py_DebugOffsets \{(.*?)\n\} _Py_DebugOffsets;", header,
                     re.S)
    assert body, "no struct _Py_DebugOffsets"
    text = re.sub(r"/\*.*?\*/", "", re.sub(r"//[^\n]*", "", body.group(1)), flags=re.S)
    out: list[str] = []
    pending: list[str] | None = None  # fields of the section being read
    for m in re.finditer(r"struct\s*\w*\s*\{|\}\s*(\w+)\s*;|(?:char|uint64_t)\s+(\w+)", text):
        if m.group(0).startswith("struct"):
            pending = []
        elif m.group(1):
            out.extend(f"{m.group(1)}.{f}" for f in pending or [])
            pending = None
        elif pending is not None:
            pending.append(m.group(2))
        else:
            out.append(m.group(2))
    return out


def parse_probe(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in (line.split() for line in text.splitlines() if line.strip())}


def render(values: dict[str, int]) -> str:
    minor = (values["version_hex"] >> 16) & 0xFF
    if minor < 11:
        values = {**values, **BEFORE_3_11}
    model = "kInterpreterFrame" if minor >= 11 else "kFrameObject"
    table = {8: "kLnotab", 9: "kLnotab", 10: "kLinetable"}.get(minor, "kLocations")
    body = "\n".join(f"  l.{FIELDS[k]} = {v};" for k, v in values.items() if k in FIELDS)
    return f"""// CPython 3.{minor} field offsets (LP64 builds, default configuration, GIL enabled).
// Generated by tests/native/gen_layout.py from offsetof() over the 3.{minor} headers
// (tests/native/layout_probe.c) and checked against every installed 3.{minor} by
// tests/native/test_layouts.py. spec/cpython-layouts.md names the CPython source of each field.
#pragma once

#include "recorder/native/cpython/layout.hpp"

namespace psrec::cpython::v3_{minor} {{

inline Layout layout() {{
  Layout l;
  l.version_hex = 0x030{minor:X}0000;
  l.frame_model = FrameModel::{model};
  l.line_table = LineTable::{table};
{body}
  finishLayout(l);
  return l;
}}

}}  // namespace psrec::cpython::v3_{minor}
"""


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        sys.stdout.write(render(parse_probe(f.read())))
