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


# -- the rooms of the parts, and no circle in any -----------------------------------------

def every_import(path: Path, package: str, modules: set[str]) -> set[str]:
    """The modules of `package` (a part, or the package root: its modules by name, a
    subpackage by its own name) that a module imports anywhere: at module level, under
    TYPE_CHECKING or in a function, as a reader of the code (and farm-studio's picture of it)
    follows them."""
    names: set[str] = set()

    def add(name: str) -> None:
        head = name.split(".")[0]
        if head in modules:
            names.add(head)

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(package + "."):
                    add(a.name[len(package) + 1:])
        elif isinstance(node, ast.ImportFrom):
            if node.level == 1 and path.name != "__init__.py" or (
                    node.level == 2 and path.parent.name in modules):
                # `from . import x` / `from .x import y`, from a module of the part (or from
                # a module of one of its subpackages, two dots up)
                if node.module is None:
                    for a in node.names:
                        add(a.name)
                else:
                    add(node.module)
            elif node.level == 0 and node.module:
                if node.module == package:
                    for a in node.names:
                        add(a.name)
                elif node.module.startswith(package + "."):
                    add(node.module[len(package) + 1:])
    return names


def graph_of(folder: Path, package: str) -> dict[str, set[str]]:
    """Module (or subpackage) name -> the others of the folder it imports."""
    files: dict[str, list[Path]] = {}
    for path in folder.rglob("*.py"):
        rel = path.relative_to(folder)
        name = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        files.setdefault(name, []).append(path)
    modules = set(files)
    return {name: set().union(*(every_import(p, package, modules) for p in paths)) - {name}
            for name, paths in files.items()}


def cycles_of(graph: dict[str, set[str]]) -> list[str]:
    found = []
    done: set[str] = set()

    def walk(name: str, path: list[str]) -> None:
        if name in path:
            found.append(" -> ".join(path[path.index(name):] + [name]))
            return
        if name in done:
            return
        for nxt in sorted(graph.get(name, ())):
            walk(nxt, path + [name])
        done.add(name)

    for name in sorted(graph):
        walk(name, [])
    return found


@pytest.mark.parametrize(("folder", "package"), [("analyzer", "psrec.analyzer"),
                                                 ("format", "psrec.format"),
                                                 ("package/psrec", "psrec")])
def test_no_import_circle_in_a_part_counting_every_import(folder: str, package: str) -> None:
    """No circle through any import, a function's or the type checker's too: a module's
    imports name only the modules below it."""
    graph = graph_of(ROOT / folder, package)
    assert len(graph) > 5, graph
    cycles = cycles_of(graph)
    assert not cycles, "\n".join(cycles)


@pytest.mark.parametrize("part", ["analyzer", "recorder", "package"])
def test_no_part_imports_a_private_module_of_the_format(part: str) -> None:
    """What another part needs of the format is public (psrec.format's names, or a public
    module of it); its _private modules are its own."""
    wrong = [f"{path.relative_to(ROOT)} imports {name}"
             for path in sorted((ROOT / part).rglob("*.py"))
             for name in sorted(imported(path))
             if name.startswith("psrec.format._")]
    assert not wrong, "\n".join(wrong)


# The analyzer's rooms (analyzer/__init__.py says what each holds). The model: the view asked
# for, the samples it selects, their sums and stacks, the tasks; below every output.
MODEL = {"model", "modes", "view", "pyengine", "walks", "engine", "stack_names", "task_states",
         "logical", "loading", "messages", "profile", "tasks"}
# What every output stands on besides the model: the output interface and registry, and what
# several outputs write alike.
SHARED = {"registry", "common"}
# The outputs, one module per format (pprof's protobuf classes in proto/).
OUTPUTS = {"reporters", "task_report", "page", "speedscope", "firefox", "pprof", "parquet",
           "diff", "proto"}
# On top: the Python API (psrec.load, on the model), the list of built-in outputs and the
# command line.
TOP = {"api", "outputs", "cli_options", "cli"}
# What each room may import of the analyzer.
MAY_IMPORT = {
    "model": MODEL,
    "shared": MODEL | SHARED,
    "output": MODEL | SHARED,
    "api": MODEL,
}


def test_every_analyzer_module_is_in_one_room() -> None:
    modules = set(graph_of(ROOT / "analyzer", "psrec.analyzer")) - {"__init__"}
    rooms = [MODEL, SHARED, OUTPUTS, TOP]
    assert modules == set().union(*rooms), "place a new module in a room"
    assert sum(len(r) for r in rooms) == len(modules), "a module is in two rooms"


def test_the_model_imports_no_output_and_no_output_imports_another() -> None:
    graph = graph_of(ROOT / "analyzer", "psrec.analyzer")
    room_of = {**dict.fromkeys(MODEL, "model"), **dict.fromkeys(SHARED, "shared"),
               **dict.fromkeys(OUTPUTS, "output"), "api": "api"}
    wrong = []
    for name, room in sorted(room_of.items()):
        allowed = MAY_IMPORT[room] | ({"proto"} if name == "pprof" else set())
        wrong += [f"{name} ({room}) imports {other}"
                  for other in sorted(graph[name] - allowed)]
    assert not wrong, "\n".join(wrong)
