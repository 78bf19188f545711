"""No function of psrec's own code is over 120 lines: a long function is one that does several
jobs, each of which wants a name. The binding modules (tables of what Python sees) are exempt,
as is data written as a constant."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PARTS = ("format", "recorder", "analyzer", "package")
LIMIT = 120
# The nanobind module tables: one line per function or class bound, no logic.
EXEMPT = re.compile(r"^NB_MODULE\(")


def python_functions() -> list[tuple[str, int]]:
    out = []
    for part in PARTS:
        for path in sorted((ROOT / part).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    assert node.end_lineno is not None
                    out.append((f"{path.relative_to(ROOT)}:{node.lineno} {node.name}",
                                node.end_lineno - node.lineno + 1))
    return out


def cpp_functions() -> list[tuple[str, int]]:
    """Each function defined at the left margin, from its first line to its closing brace
    (a line of its own, `}`, at the margin)."""
    out = []
    for part in PARTS:
        for path in sorted((ROOT / part).rglob("*.cpp")):
            lines = path.read_text().splitlines()
            i = 0
            while i < len(lines):
                first = i
                # A signature may span lines: its body opens on the first line ending in `{`.
                if re.match(r"^[A-Za-z_]", lines[i]) and "(" in lines[i] and \
                        not lines[i].rstrip().endswith(";") and "R\"(" not in lines[i]:
                    j = i
                    while j < len(lines) and not lines[j].rstrip().endswith("{") and \
                            not lines[j].rstrip().endswith(";") and j - i < 8:
                        j += 1
                    if j < len(lines) and lines[j].rstrip().endswith("{"):
                        k = j + 1
                        while k < len(lines) and lines[k] != "}":
                            k += 1
                        if not EXEMPT.match(lines[first]):
                            name = lines[first].split("(")[0].split()[-1]
                            out.append((f"{path.relative_to(ROOT)}:{first + 1} {name}",
                                        k - first + 1))
                        i = k + 1
                        continue
                i += 1
    return out


def test_the_scan_finds_the_functions() -> None:
    """The scans see the code: the decoder's and the sampler's functions, the analyzer's."""
    cpp = {name.split()[-1] for name, _ in cpp_functions()}
    assert {"Decoder::decodeData", "Sampler::gate", "PythonProcess::attach"} <= cpp
    py = {name.split()[-1] for name, _ in python_functions()}
    assert {"build", "page_data", "decode_data"} <= py


def test_no_function_is_over_120_lines() -> None:
    long = [f"{name} ({n} lines)" for name, n in python_functions() + cpp_functions()
            if n > LIMIT]
    assert not long, "functions over 120 lines: " + ", ".join(long)
