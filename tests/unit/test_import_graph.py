"""The arrows between psrec's parts: recorder -> format <- analyzer, and only the package root
(psrec.cli, psrec.__main__) puts the recorder and the analyzer together."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# folder -> the psrec packages its modules must not import. None imports the package root
# (`psrec`, for its version or anything else, nor any module of package/psrec: psrec.cli,
# psrec.top and those top is made of): the root puts the parts together, not the other way
# round.
FORBIDDEN = {
    "format": ("psrec.recorder", "psrec.analyzer"),
    "recorder": ("psrec.analyzer",),
    "analyzer": ("psrec.recorder",),
}
PARTS = {"format", "recorder", "analyzer"}


def of_the_root(name: str) -> bool:
    """The package root or one of its modules: psrec, or psrec.X where X is not a part."""
    return name == "psrec" or (name.startswith("psrec.") and name.split(".")[1] not in PARTS)


def imported(path: Path) -> set[str]:
    """Every module an import statement of the file names (absolute names only: a relative
    import stays inside its own part)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


@pytest.mark.parametrize("part", sorted(FORBIDDEN))
def test_parts_import_only_along_the_arrows(part: str) -> None:
    wrong = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / part).rglob("*.py"))
        for name in sorted(imported(path))
        if of_the_root(name)
        or any(name == f or name.startswith(f + ".") for f in FORBIDDEN[part])
    ]
    assert not wrong, "\n".join(wrong)


def test_every_module_of_the_package_root_is_one_no_part_may_import() -> None:
    modules = [f"psrec.{p.stem}" for p in (ROOT / "package" / "psrec").glob("*.py")]
    assert "psrec.top" in modules and all(of_the_root(m) for m in modules)
    assert not any(of_the_root(f"psrec.{part}.x") for part in PARTS)


# folder -> the folders whose C++ headers its C++ sources must not include. Native cores
# (native/) include no nanobind; only bindings/ convert between C++ and Python.
FORBIDDEN_INCLUDES = {
    "format": ("recorder/", "analyzer/"),
    "recorder": ("analyzer/",),
    "analyzer": ("recorder/",),
}


@pytest.mark.parametrize("part", sorted(FORBIDDEN_INCLUDES))
def test_native_sources_include_only_along_the_arrows(part: str) -> None:
    wrong = []
    for path in sorted((ROOT / part).rglob("*.[ch]pp")):
        for line in path.read_text().splitlines():
            if not line.startswith("#include"):
                continue
            target = line.split(None, 1)[1].strip('<>"')
            if target.startswith(FORBIDDEN_INCLUDES[part]) or (
                    "/native/" in str(path) and target.startswith("nanobind")):
                wrong.append(f"{path.relative_to(ROOT)}: {line}")
    assert not wrong, "\n".join(wrong)


def module_imports(path: Path, package: str) -> set[str]:
    """The package's modules a module imports at module level, by module name within the
    package (``from . import x`` and ``from .x import y`` name x). Imports under
    TYPE_CHECKING count (a cycle kept for the type checker is still one); those in a
    function do not (they run when it is called)."""
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.If, ast.Try, ast.With)):
                for part in ("body", "orelse", "finalbody"):
                    visit(getattr(node, part, []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
            elif isinstance(node, ast.Import):
                names.update(a.name[len(package) + 1:].split(".")[0]
                             for a in node.names if a.name.startswith(package + "."))
            elif isinstance(node, ast.ImportFrom):
                if node.level == 1 and node.module is None:
                    names.update(a.name for a in node.names)
                elif node.level == 1 and node.module:
                    names.add(node.module.split(".")[0])
                elif node.level == 0 and node.module and node.module.startswith(package + "."):
                    names.add(node.module[len(package) + 1:].split(".")[0])

    visit(ast.parse(path.read_text(), str(path)).body)
    return names


def test_no_import_cycle_among_the_analyzer_modules() -> None:
    """No chain of module-level imports among the analyzer's modules comes back to where it
    started: each can be read, and loaded, after the ones it names (profile.py and walks.py
    once imported each other, walks.py for the type checker)."""
    folder = ROOT / "analyzer"
    modules = {p.stem: p for p in folder.glob("*.py") if p.stem != "__init__"}
    graph = {name: sorted(module_imports(path, "psrec.analyzer") & modules.keys() - {name})
             for name, path in modules.items()}
    cycles = []
    done: set[str] = set()

    def walk(name: str, path: list[str]) -> None:
        if name in path:
            cycles.append(" -> ".join(path[path.index(name):] + [name]))
            return
        if name in done:
            return
        for nxt in graph[name]:
            walk(nxt, path + [name])
        done.add(name)

    for name in sorted(graph):
        walk(name, [])
    assert not cycles, "\n".join(cycles)
    assert "walks" in graph["engine"] and "profile" not in graph["walks"]
