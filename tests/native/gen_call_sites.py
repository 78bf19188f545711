"""Prints the call-site table of recorder/native/cpython/call_sites.hpp for the running
CPython (3.11+), from its own opcode and dis modules.

A frame that has a Python callee pushed by the interpreter loop itself (not through C) is
stopped at the instruction that pushed it. Which instructions can do that is a fact of each
version's Python/bytecodes.c (ceval.c in 3.11); where the frame's instruction pointer then
points is another: 3.11-3.12 leave prev_instr on the last inline cache entry of that
instruction, 3.13 leaves instr_ptr on the instruction itself. Numbers of specialized and
instrumented opcodes differ between versions, so they are read from the interpreter here and
tests/native/test_layouts.py checks the header against every installed 3.11+.
"""

from __future__ import annotations

import dis
import opcode
import sys

# Families whose instructions may push a Python frame without going through C: those that
# push a function's frame, and those that resume a generator's (3.12+; 3.11 resumes
# generators through C only).
PUSHING = {
    11: ["CALL", "CALL_FUNCTION_EX", "BINARY_SUBSCR"],
    12: ["CALL", "CALL_FUNCTION_EX", "BINARY_SUBSCR", "LOAD_ATTR"],
    13: ["CALL", "CALL_KW", "CALL_FUNCTION_EX", "BINARY_SUBSCR", "LOAD_ATTR"],
    # 3.14 folded BINARY_SUBSCR into BINARY_OP (BINARY_OP_SUBSCR_GETITEM pushes the frame of
    # a class's __getitem__).
    14: ["CALL", "CALL_KW", "CALL_FUNCTION_EX", "BINARY_OP", "LOAD_ATTR"],
    15: ["CALL", "CALL_KW", "CALL_FUNCTION_EX", "BINARY_OP", "LOAD_ATTR"],
}
RESUMING = {11: [], 12: ["SEND", "FOR_ITER"], 13: ["SEND", "FOR_ITER"], 14: ["SEND", "FOR_ITER"],
            15: ["SEND", "FOR_ITER"]}
# Opcodes that hide the instruction underneath (line and instruction instrumentation, executors):
# a frame at one of them is taken as possibly at a call.
OPAQUE = ["INSTRUMENTED_LINE", "INSTRUMENTED_INSTRUCTION", "ENTER_EXECUTOR"]


def all_opmap() -> dict[str, int]:
    m = dict(opcode.opmap)
    m.update(getattr(dis, "_all_opmap", {}) or {})
    m.update(getattr(opcode, "_specialized_opmap", {}) or {})
    return m


def families(names: list[str]) -> dict[str, list[str]]:
    spec = getattr(opcode, "_specializations", {}) or {}
    known = all_opmap()
    out = {}
    for fam in names:
        members = [fam] + list(spec.get(fam, []))
        if "INSTRUMENTED_" + fam in known:
            members.append("INSTRUMENTED_" + fam)
        out[fam] = members
    return out


def cache_entries(fam: str) -> int:
    if sys.version_info >= (3, 13):
        return 0  # instr_ptr stays on the instruction
    return opcode._inline_cache_entries[opcode.opmap[fam]]


def render() -> str:
    minor = sys.version_info[1]
    names = all_opmap()
    opaque = {names[n] for n in OPAQUE if n in names}
    lines = [f"inline CallSites callSites3_{minor}() {{", "  CallSites s;"]
    for gen, fams in ((False, PUSHING[minor]), (True, RESUMING[minor])):
        by_back: dict[int, set[int]] = {}
        fams_at: dict[int, list[str]] = {}
        for fam, members in families(fams).items():
            by_back.setdefault(cache_entries(fam), set()).update(names[m] for m in members)
            fams_at.setdefault(cache_entries(fam), []).append(fam)
        for back in sorted(by_back):
            words = [0, 0, 0, 0]
            for op in by_back[back] | opaque:
                words[op >> 6] |= 1 << (op & 63)
            hexes = ", ".join(f"0x{w:016x}u" for w in words)
            what = "a generator's frame" if gen else "a function's frame"
            lines.append(f"  // {' '.join(fams_at[back])}, {back} code units back: {what}")
            lines.append(f"  s.add({back}, {'true' if gen else 'false'},")
            lines.append(f"        {{{hexes}}});")
    lines += ["  return s;", "}"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
