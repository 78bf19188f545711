"""The native modules' stubs, which mypy checks the Python parts against, say what the built
modules are.

recorder/_recorder.pyi is nanobind's stubgen output as it is (`make stubs` writes it): it must
be what stubgen makes of the installed build, byte for byte. analyzer/_engine.pyi and
format/_format.pyi began as stubgen output and were then given the shapes of the tuples and
arrays their functions return, which stubgen cannot know: they must declare the same names,
and each function the same parameters, as stubgen makes of the build."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# module -> its stub in the tree, and whether the stub is stubgen's output unedited
STUBS = {
    "psrec.recorder._recorder": (ROOT / "recorder" / "_recorder.pyi", True),
    "psrec.analyzer._engine": (ROOT / "analyzer" / "_engine.pyi", False),
    "psrec.format._format": (ROOT / "format" / "_format.pyi", False),
}


def stubgen(module: str, out: Path) -> str:
    """What nanobind's stubgen makes of the installed build of `module`. Skips, saying why,
    where the module is not built or stubgen is not installed."""
    if importlib.util.find_spec("nanobind") is None:
        pytest.skip("nanobind is not installed (it is in the test extra): no stubgen")
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"this install has no {module} (a build without it)")
    r = subprocess.run([sys.executable, "-m", "nanobind.stubgen", "-q", "-m", module,
                        "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return out.read_text()


Signature = tuple[int, tuple[str, ...], int]


def surface(text: str) -> dict[str, object]:
    """A stub's names (module level and in classes) and, for each function, its parameters:
    how many are positional-only (stubgen names those arg0, arg1...: their names do not
    count), the names of the others, and how many have defaults. Overloads in order."""
    out: dict[str, object] = {}

    def signature(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Signature:
        a = fn.args
        names = ([p.arg for p in a.args] + ([f"*{a.vararg.arg}"] if a.vararg else [])
                 + [f"{p.arg}=" for p in a.kwonlyargs] + (["**"] if a.kwarg else []))
        defaults = len(a.defaults) + sum(d is not None for d in a.kw_defaults)
        return len(a.posonlyargs), tuple(names), defaults

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                sigs = out.setdefault(prefix + node.name, [])
                assert isinstance(sigs, list)
                sigs.append(signature(node))
            elif isinstance(node, ast.ClassDef):
                out[prefix + node.name] = "class"
                walk(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                out[prefix + node.target.id] = "variable"
            elif isinstance(node, ast.Assign):
                out.update((prefix + t.id, "variable") for t in node.targets
                           if isinstance(t, ast.Name))

    walk(ast.parse(text).body, "")
    return out


def test_recorder_stub_is_stubgen_output(tmp_path: Path) -> None:
    stub, _ = STUBS["psrec.recorder._recorder"]
    made = stubgen("psrec.recorder._recorder", tmp_path / "_recorder.pyi")
    assert stub.read_text() == made, (
        f"{stub.relative_to(ROOT)} is not what nanobind's stubgen makes of the built recorder: "
        "run `make stubs` and commit the result")


@pytest.mark.parametrize("module", [m for m, (_, whole) in STUBS.items() if not whole])
def test_hand_kept_stub_declares_what_the_build_binds(module: str, tmp_path: Path) -> None:
    stub, _ = STUBS[module]
    ours, built = surface(stub.read_text()), surface(stubgen(module, tmp_path / "stub.pyi"))
    differ = {k: (ours.get(k), built.get(k)) for k in sorted(set(ours) | set(built))
              if ours.get(k) != built.get(k)}
    assert not differ, (
        f"{stub.relative_to(ROOT)} and the build differ (name: (stub, build); a signature is "
        f"(positional-only, names, defaults)): {differ}")
