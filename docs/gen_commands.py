"""Write each command's `--help` into docs/commands.md, between its markers.

    python docs/gen_commands.py           # rewrite the page's help blocks from the CLI
    python docs/gen_commands.py --check   # exit 1 if the page differs from the CLI

The page is prose written by hand around generated blocks; a block is

    <!-- psrec record --help -->
    ```text
    ...
    ```
    <!-- end psrec record --help -->

and holds exactly what `psrec record --help` prints on an 80-column terminal. Every command
of the CLI must have its block (tests/unit/test_docs_commands.py checks both).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parent / "commands.md"
WIDTH = 80
BLOCK = re.compile(
    r"(?P<open><!-- psrec (?P<cmd>[a-z-]*) ?--help -->\n)"
    r"(?P<body>.*?)"
    r"(?P<close><!-- end psrec (?P=cmd) ?--help -->)",
    re.S,
)


def commands() -> list[str]:
    """The CLI's commands, by name."""
    from psrec.cli import main

    return sorted(main.list_commands(main.make_context("psrec", [], resilient_parsing=True)))


def help_text(command: str) -> str:
    """What `psrec COMMAND --help` prints (`psrec --help` for ""), at WIDTH columns."""
    from psrec.cli import main

    root = main.make_context("psrec", [], resilient_parsing=True, terminal_width=WIDTH,
                             max_content_width=WIDTH)
    if not command:
        return main.get_help(root)
    cmd = main.get_command(root, command)
    assert cmd is not None, command
    ctx = cmd.make_context(command, [], parent=root, resilient_parsing=True)
    return cmd.get_help(ctx)


def render(page: str) -> str:
    """The page with every help block filled in from the CLI."""

    def fill(m: re.Match[str]) -> str:
        return f"{m['open']}```text\n{help_text(m['cmd'])}\n```\n{m['close']}"

    return BLOCK.sub(fill, page)


def blocks(page: str) -> list[str]:
    """The commands the page has a help block for ("" for `psrec --help`)."""
    return [m["cmd"] for m in BLOCK.finditer(page)]


def main(argv: list[str]) -> int:
    page = PAGE.read_text(encoding="utf-8")
    new = render(page)
    missing = sorted(set(commands()) - set(blocks(page)))
    if "--check" in argv:
        if missing:
            print(f"{PAGE}: no help block for {', '.join(missing)}", file=sys.stderr)
        if new != page:
            print(f"{PAGE}: out of date with the CLI; run python docs/gen_commands.py",
                  file=sys.stderr)
        return 1 if missing or new != page else 0
    if new != page:
        PAGE.write_text(new, encoding="utf-8")
        print(f"wrote {PAGE}")
    if missing:
        print(f"{PAGE}: add a help block for {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
