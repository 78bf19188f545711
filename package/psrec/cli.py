"""The `psrec` command: where psrec's parts are put together.

The recorder (``psrec.recorder.cli``: record, and dump of a process) and the analyzer
(``psrec.analyzer.cli``: info, report, export, and dump of a file) each define their commands
and never import each other; this module builds the one click group from both, and gives every
command the same error handling (``handle_errors``). A command's module is imported only when
that command runs or shows its help (COMMANDS): `psrec --help` and `psrec --version` load
neither half, and each command loads what it needs when it runs.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ._errors import exit_status

__all__ = ["COMMANDS", "main", "handle_errors"]

F = TypeVar("F", bound=Callable[..., Any])


def _verbose() -> bool:
    """Whether -v was given, before the command (`psrec -v report ...`) or, for a command that
    takes it too (`psrec record -v ...`), after it."""
    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        if ctx.params.get("verbose"):
            return True
        ctx = ctx.parent
    return False


def handle_errors(fn: F) -> F:
    """What every psrec command does with an error: it is worded and gives the exit status as
    ``psrec._errors.exit_status`` says (a PsrecError in one line, and its help on a second
    line if it has one, with the error's exit status: 1, 2 for wrong usage; anything else an
    internal error in one line); click words wrong usage it finds itself (exit status 2). The
    traceback is shown only with -v."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise  # wrong usage click words itself (exit status 2), and click's own exits
        except BaseException as exc:
            status = exit_status(exc, _verbose())
            if status is None:
                raise
            sys.exit(status)

    return wrapper  # type: ignore[return-value]


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """click.version_option's -V, with the version looked up only when asked for (importlib.
    metadata takes longer than most commands)."""
    if not value or ctx.resilient_parsing:
        return
    from psrec import __version__

    click.echo(f"psrec, version {__version__}", color=ctx.color)
    ctx.exit()


# Each command: the module and name of its click command, and its summary in `psrec --help`
# (one line that fits 80 columns beside the names; each command's short_help, so that the
# summary is the same wherever click shows it).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "record": ("psrec.recorder.cli", "record",
               "Record a process (PID) or a program it launches, to a file"),
    "top": ("psrec.top", "top", "A live table of where a process's time goes"),
    "dump": ("psrec.cli", "dump",
             "dump PID: every thread's stack now; dump FILE: its records"),
    "info": ("psrec.analyzer.cli", "info",
             "A recording's duration, threads, rate, errors and size"),
    "report": ("psrec.analyzer.cli", "report",
               "Where the time went: tables, flame graph stacks, an HTML page"),
    "export": ("psrec.analyzer.cli", "export",
               "For another tool: speedscope, Firefox, pprof, Parquet"),
    "diff": ("psrec.analyzer.cli", "diff", "What changed between two recordings, by function"),
    "snapshot": ("psrec.analyzer.cli", "snapshot",
                 "A closed copy of a recording still being written"),
}


class _Commands(click.Group):
    """The psrec group: its commands listed from COMMANDS, each imported when asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = self.commands.get(cmd_name)
        if found is None and cmd_name in COMMANDS:
            module, attr, summary = COMMANDS[cmd_name]
            found = getattr(importlib.import_module(module), attr)
            assert isinstance(found, click.Command)
            found.short_help = summary
            if found.callback is not None:
                found.callback = handle_errors(found.callback)
            self.commands[cmd_name] = found
        return found

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # From the table: listing the commands imports none of them.
        with formatter.section("Commands"):
            formatter.write_dl([(name, summary) for name, (_, _, summary) in COMMANDS.items()])


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-V", "--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_show_version, help="Show the version and exit.")
@click.option("-v", "--verbose", is_flag=True, help="Show tracebacks and more detail.")
def main(verbose: bool) -> None:
    """psrec: record a running Python process once, ask questions of the recording offline."""


# `psrec dump PID [--json]`, plain, is answered by psrec.recorder._dump before click is even
# imported (see psrec.__main__); it comes here from any other form of command line (`-v -v`,
# `--`, ...), with the same output. A target that names an existing file is a recording.
@click.command()
@click.argument("target")
@click.option("--json", "as_json", is_flag=True,
              help="With a PID: print the process and its threads' stacks as one JSON "
                   "document.")
@click.option("--native", is_flag=True,
              help="With a PID: also read each thread's native (C, C++, Rust) stack and show "
                   "it interleaved with the Python frames, as a debugger would. The process is "
                   "stopped (ptrace) for the read, a few milliseconds.")
@click.option("--native-all", is_flag=True,
              help="Like --native, keeping the interpreter's own frames (its evaluation loop "
                   "aside) that only carry calls.")
@click.option("--tasks", is_flag=True,
              help="With a PID: also print its asyncio tasks as a tree (each under the task "
                   "that waits on it), with where each suspended task waits. The process is "
                   "stopped for the read when psrec may stop it (ptrace).")
def dump(target: str, as_json: bool, native: bool, native_all: bool, tasks: bool) -> None:
    """Dump a recording (a file) chunk by chunk and record by record, or, given a PID, print
    every thread's current Python stack."""
    if not os.path.exists(target) and target.isdigit():
        from psrec.recorder import cli as recorder

        recorder.dump_pid(int(target), as_json=as_json, native=native, native_all=native_all,
                          tasks=tasks)
    else:
        if native or native_all or tasks:
            flag = "--tasks" if tasks else f"--native{'-all' if native_all else ''}"
            raise click.UsageError(
                f"{flag} reads a live process: give a PID, not the recording {target}")
        from psrec.analyzer import cli as analyzer

        analyzer.dump_file(target, as_json=as_json)
