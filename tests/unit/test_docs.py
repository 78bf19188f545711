"""The README and docs/ stay true: the README short, with its two fresh-machine commands and
links that resolve; docs/commands.md holding each command's `--help` as the CLI prints it
(docs/gen_commands.py writes it); docs/layout.md naming the folders that exist."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _gen_commands() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_commands", DOCS / "gen_commands.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _links(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return [t for t in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
            if "://" not in t]


def test_readme_is_short_with_its_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    blocks = re.findall(r"```\n(.*?)```", readme, re.S)
    assert "make demo\n" in blocks and "make test\n" in blocks
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)


def test_links_of_the_readme_and_docs_resolve() -> None:
    for page in [ROOT / "README.md", *DOCS.glob("*.md")]:
        for target in _links(page):
            assert (page.parent / target).exists(), f"{page.name}: no {target}"


def test_commands_page_holds_each_command_help() -> None:
    gen = _gen_commands()
    page = gen.PAGE.read_text(encoding="utf-8")
    assert set(gen.blocks(page)) == {"", *gen.commands()}, (
        "docs/commands.md: a help block per command; run python docs/gen_commands.py")
    assert gen.render(page) == page, (
        "docs/commands.md is out of date with the CLI: run python docs/gen_commands.py")


def test_commands_help_is_what_the_command_prints() -> None:
    from click.testing import CliRunner
    from psrec.cli import main

    gen = _gen_commands()
    for name in ("", "record", "report"):
        result = CliRunner().invoke(main, [*([name] if name else []), "--help"],
                                    terminal_width=gen.WIDTH, prog_name="psrec")
        assert result.exit_code == 0, result.output
        assert result.output.rstrip("\n") == gen.help_text(name).rstrip("\n")


def test_layout_names_every_recorder_native_folder() -> None:
    """docs/layout.md's table of recorder/native/ lists exactly its subfolders."""
    text = (DOCS / "layout.md").read_text(encoding="utf-8")
    section = text.split("## The recorder's native core: `recorder/native/`", 1)[1]
    section = section.split("\n## ", 1)[0]
    named = set(re.findall(r"^\| `([a-z_]+)/` \|", section, re.M))
    present = {p.name for p in (ROOT / "recorder" / "native").iterdir() if p.is_dir()}
    assert named == present, f"docs/layout.md names {sorted(named)}; there are {sorted(present)}"
    top = set(re.findall(r"^\| `([a-z_/]+)/` \|", text.split("\n## ", 1)[0], re.M))
    assert {"recorder", "format", "analyzer", "package/psrec"} <= top
    for folder in top:
        assert (ROOT / folder).is_dir(), f"docs/layout.md names {folder}/, which is not there"
