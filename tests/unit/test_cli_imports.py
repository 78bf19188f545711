"""What each command line imports: the psrec command imports a command's module only when that
command runs or shows its help, so that `psrec --version` and `psrec --help` answer in about
the interpreter's own start-up, and no command pays for what it does not use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"

# The command line as the psrec script runs it, then the psrec modules it imported.
RUNNER = """
import sys
from psrec.__main__ import main
sys.argv = ["psrec"] + sys.argv[1:]
try:
    main()
except SystemExit:
    pass
print("MODULES", " ".join(sorted(m for m in sys.modules if m.split(".")[0] in
                                  ("psrec", "click", "msgpack", "zstandard", "numpy",
                                   "pyarrow"))))
"""


def imported(*args: str) -> tuple[str, set[str]]:
    r = subprocess.run([sys.executable, "-c", RUNNER, *args], capture_output=True, text=True,
                       timeout=120)
    out, _, mods = r.stdout.rpartition("MODULES ")
    assert mods, r.stderr
    return out, set(mods.split())


def test_version_and_help_import_no_command() -> None:
    out, mods = imported("--version")
    assert out.startswith("psrec, version ") and not {m for m in mods if m.startswith("click")}
    assert not {m for m in mods if m.startswith(("psrec.cli", "psrec.analyzer", "psrec.recorder",
                                                 "msgpack", "zstandard"))}, mods
    out, mods = imported("--help")
    assert "report" in out and "record" in out
    assert {m for m in mods if m.startswith("psrec")} == {"psrec", "psrec.__main__", "psrec.cli",
                                                          "psrec._errors"}, mods


def test_the_version_is_the_one_click_prints() -> None:
    from click.testing import CliRunner
    from psrec.cli import main

    clicks = CliRunner().invoke(main, ["--version"], prog_name="psrec").output
    assert imported("--version")[0] == clicks
    assert imported("-V")[0] == clicks


@pytest.mark.parametrize(("args", "not_used"), [
    (("record", "--help"), ("psrec.analyzer", "psrec.top")),
    (("top", "--help"), ("psrec.analyzer.outputs", "psrec.analyzer.parquet")),
    (("info", str(DATA / "two_threads.psr")),
     ("psrec.recorder", "psrec.top", "psrec.analyzer.outputs", "psrec.analyzer.profile",
      "psrec.format.writer", "numpy", "pyarrow")),
    (("report", str(DATA / "two_threads.psr")), ("psrec.recorder", "psrec.top", "pyarrow")),
    (("export", "--speedscope", "--help"), ("psrec.recorder", "psrec.top", "pyarrow")),
])
def test_a_command_imports_only_what_it_uses(args: tuple[str, ...],
                                             not_used: tuple[str, ...]) -> None:
    _, mods = imported(*args)
    assert "psrec.cli" in mods
    wrong = {m for m in mods if m.startswith(not_used)}
    assert not wrong, f"psrec {' '.join(args)} imported {sorted(wrong)}"


def test_the_command_table_holds_every_command_of_both_halves() -> None:
    """Each command the recorder and the analyzer define (their COMMANDS) is in psrec.cli's
    table under its own name and found there: a new one cannot be left out of the CLI."""
    import importlib

    from psrec.analyzer import cli as analyzer
    from psrec.cli import COMMANDS
    from psrec.recorder import cli as recorder

    for command in (*recorder.COMMANDS, *analyzer.COMMANDS):
        assert command.name in COMMANDS, command.name
        module, attr, _ = COMMANDS[command.name]
        assert getattr(importlib.import_module(module), attr) is command
