"""The commands that write an output are built from the output registry: each output's flag and
options are in its command's help, --mode's choices are the view modes, an output registered
after the command line was built is offered too, and the registry imports no output module
(psrec.analyzer.outputs registers the built-in ones)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import IO, Any

import pytest
from click.testing import CliRunner
from psrec.analyzer import outputs
from psrec.analyzer.profile import Profile
from psrec.analyzer.registry import Option, Reporter, register, unregister
from psrec.analyzer.view import MODES
from psrec.cli import main

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = str(ROOT / "tests" / "data" / "two_threads.psr")


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout, r.stderr


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("command", ["report", "export", "diff"])
def test_each_output_flag_and_option_is_in_its_command_help(command: str) -> None:
    code, out, _ = run(command, "--help")
    assert code == 0
    offered = outputs.offered(command)
    assert offered
    for name, cls in offered.items():
        for opt in (cls.flag, *cls.reads) if cls.flag else cls.reads:
            # (an option's row is indented by two spaces; its help's wrapped lines by more)
            assert re.search(rf"^  (-\w, )?{opt.name}\b", out, re.M), (name, opt.name)
            assert flat(opt.help) in flat(out), (name, opt.name)
    mine = {c.flag.name for c in offered.values() if c.flag}
    for other in ("report", "export", "diff"):
        for cls in outputs.offered(other).values():
            if cls.flag and cls.flag.name not in mine:
                assert not re.search(rf"^  {cls.flag.name}\b", out, re.M), cls.flag.name
    choices = re.search(r"--mode \[(.*?)\]", out)
    assert choices and choices.group(1).split("|") == list(MODES)
    assert all(f"{mode}: " in flat(out) for mode in MODES), "--mode's help says what each is"
    # Several recordings (files, folders) are read as one, where an output does not compare.
    arguments = "BASE NEW" if all(c.compares for c in offered.values()) else "RECORDING..."

    assert out.startswith(f"Usage: main {command} [OPTIONS] {arguments}\n"), out


def test_only_diff_compares() -> None:
    assert all(cls.compares for cls in outputs.offered("diff").values())
    assert not any(cls.compares for c in ("report", "export")
                   for cls in outputs.offered(c).values())


class _Lines(Reporter):
    """An output registered at test time: the first samples' stacks, one a line."""

    name = "test-lines"
    description = "the first stacks, one a line"
    command = "export"
    flag = Option(("--test-lines",), help="Write the first stacks, one a line.")
    reads = (Option(("--test-count",), minimum=1, default=2,
                    help="How many stacks the test output writes."),)

    def write(self, profile: Profile, out: IO[Any]) -> str | None:
        for node in sorted(set(profile.columns.node))[:int(self.options["test_count"])]:
            out.write(";".join(k.name for k in profile.keys(node)) + "\n")
        return None


def test_an_output_registered_later_gets_its_flag_and_options(tmp_path: Path) -> None:
    assert run("export", "--help")[0] == 0  # the command line is built before
    register(_Lines)
    try:
        code, out, _ = run("export", "--help")
        assert code == 0 and "--test-lines" in out and "--test-count INTEGER RANGE" in out
        assert "test-lines: the first stacks, one a line" in flat(out)
        code, by_flag, err = run("export", GOLDEN, "--test-lines", "--test-count", "3")
        assert code == 0, err
        assert 1 <= len(by_flag.splitlines()) <= 3, by_flag
        code, by_format, err = run("export", GOLDEN, "--format", "test-lines", "--test-count",
                                   "3")
        assert code == 0 and by_format == by_flag, err
        code, _, err = run("export", GOLDEN, "--pprof", "--test-count", "2", "-o",
                           str(tmp_path / "x.pb.gz"))
        assert code == 2 and err.splitlines()[0] == (
            "psrec: error: --test-count does nothing with --pprof: only the test-lines output "
            "reads it"), err
        code, _, err = run("export", GOLDEN, "--test-lines", "--firefox")
        assert code == 2 and "--firefox and --test-lines cannot be given together" in err, err
    finally:
        unregister(_Lines.name)
    code, out, _ = run("export", "--help")
    assert code == 0 and "--test-lines" not in out
    assert run("export", GOLDEN, "--test-lines")[0] == 2


def imports(path: Path, package: str) -> set[str]:
    """Every module of package a file imports, at module level or in a function, by its name
    within the package (relative imports resolved: the file is a module of package)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = (f"{package}.{node.module}" if node.module else package) if node.level \
                else node.module or ""
            names.add(module)
            names.update(f"{module}.{a.name}" for a in node.names)
    return {n[len(package) + 1:].split(".")[0] for n in names if n.startswith(package + ".")}


def test_the_registry_imports_no_output_module() -> None:
    """The arrows: each output module imports the registry; outputs.py imports both; the
    registry imports neither (not even in a function: that was a circle)."""
    folder = ROOT / "analyzer"
    builtin = {m.__name__.rpartition(".")[2] for m in outputs.BUILTIN}
    registering = {p.stem for p in folder.glob("*.py") if "@register" in p.read_text()}
    assert registering == builtin, "outputs.BUILTIN lists every module that registers outputs"
    assert not imports(folder / "registry.py", "psrec.analyzer") & (builtin | {"outputs"})
    for name in sorted(builtin):
        found = imports(folder / f"{name}.py", "psrec.analyzer")
        assert "registry" in found and "outputs" not in found, name
    assert builtin <= imports(folder / "outputs.py", "psrec.analyzer")
