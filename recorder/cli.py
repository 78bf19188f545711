"""The recorder's commands: `psrec record`, and the process half of `psrec dump`.

The psrec command is put together in ``psrec.cli``, which also handles every command's errors;
these raise PsrecError (RecorderUsageError for wrong usage). Importing this module does not
load the native recorder; the commands do, when they run.
"""

from __future__ import annotations

import dataclasses
import difflib
import shlex
import sys
from typing import Any

import click

from ._dump import check_pid, format_dump, print_dump
from ._options import RecordOptions
from .errors import RecorderUsageError

__all__ = ["COMMANDS", "record", "dump_pid", "format_dump", "check_pid"]

# ctx.meta key: how many words followed `--` on the command line (None: no `--`).
_AFTER_DASHDASH = "psrec.after_dashdash"


def dump_pid(pid: int, blocking: bool = False, as_json: bool = False, native: bool = False,
             native_all: bool = False, tasks: bool = False) -> None:
    """Prints every thread's current stack, with GIL and CPU status (like py-spy dump), as
    text or as one JSON document; with native, native frames interleaved; with tasks, the
    asyncio tasks as a tree."""
    print_dump(pid, as_json, blocking, native, native_all, tasks)


class _RecordCommand(click.Command):
    """`psrec record`, which notes how many words followed `--`: what follows it is a program
    to launch, whatever it looks like. (sys.argv would not do: psrec may be run from Python,
    and a program's own arguments may hold a `--`.)"""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_AFTER_DASHDASH] = len(args) - args.index("--") - 1 if "--" in args else None
        return super().parse_args(ctx, args)


def _options(f: Any) -> Any:
    """`psrec record`'s options, from their table (RECORD_OPTIONS): each passes its text (or
    flag) to record() under the name of the field it sets."""
    from ._options import RECORD_OPTIONS

    for o in reversed(RECORD_OPTIONS):
        kwargs: dict[str, Any] = {"help": o.help, "show_default": o.show_default}
        if o.flag:
            kwargs["default"] = bool(o.default)
            if "/" not in o.decls[0]:
                kwargs["is_flag"] = True
        else:
            kwargs["default"] = o.default
        if o.metavar:
            kwargs["metavar"] = o.metavar
        if o.choices:
            kwargs["type"] = click.Choice(list(o.choices))
        if o.path:
            kwargs.update(required=True, type=click.Path(dir_okay=False))
        f = click.option(*o.decls, o.field or o.decls[-1].lstrip("-"), **kwargs)(f)
    return f


# Words psrec does not know, options included, are left to TARGET, so that a program given
# without `--` can be named in the error rather than one of its options.
@click.command(cls=_RecordCommand,
               context_settings={"help_option_names": ["-h", "--help"],
                                 "ignore_unknown_options": True})
@_options
@click.argument("target", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def record(ctx: click.Context, /, target: tuple[str, ...], verbose: bool, **given: Any) -> None:
    """Record a running process (TARGET is its pid) or launch a program after `--`.

    \b
      psrec record -o run.psr 1234
      psrec record -o run.psr -r 10k -- python app.py args...
      psrec record -o last.psr --keep 10m 1234
      psrec record -o 'run-{n}.psr' --window 60s 1234
    """
    from ._options import record_options

    # -v (verbose) is read by the error handling psrec.cli gives every command.
    opts = record_options(given)
    pid, command = _target(opts.output, target, ctx.meta.get(_AFTER_DASHDASH))
    sys.exit(_record(dataclasses.replace(opts, pid=pid, command=command)))


def _no_such_option(word: str) -> click.NoSuchOption:
    ctx = click.get_current_context()
    names = [o for p in ctx.command.params for o in p.opts if o.startswith("--")]
    return click.NoSuchOption(word, possibilities=difflib.get_close_matches(word, names), ctx=ctx)


def _target(output: str, words: tuple[str, ...],
            after_dashdash: int | None) -> tuple[int | None, tuple[str, ...]]:
    """The pid to attach to, or the program to launch, from the words psrec's options left
    and the number of them that followed `--`."""
    if not words:
        raise click.UsageError("give a pid to attach to, or -- and a command to launch")
    split = len(words) - (after_dashdash or 0)
    before, command = words[:split], words[split:]
    if not before:
        return None, command
    first = before[0]
    if first.startswith("-"):
        raise _no_such_option(first)
    if not (first.isascii() and first.isdigit()):
        raise RecorderUsageError(
            f"{first} is not a pid; to launch a program, put -- before it",
            help=f"run psrec record -o {shlex.quote(output)} -- {shlex.join(words)}")
    option = next((w for w in before[1:] if w.startswith("-")), None)
    if option is not None:
        raise _no_such_option(option)
    if command:
        raise RecorderUsageError(f"a pid ({first}) and a command after -- were both given",
                                 help="give a pid to attach to, or -- and a command to launch")
    if len(before) > 1:
        raise RecorderUsageError(f"one pid was expected, not {' '.join(before)}",
                                 help=f"give the pid of one running Python process: psrec "
                                      f"record -o {shlex.quote(output)} {first}")
    pid = int(first)
    check_pid(pid)
    return pid, ()


def _record(opts: RecordOptions) -> int:
    from ._api import MAX_RATE_HZ
    from ._api import record as run

    result = run(opts)
    st = result.stats
    if not opts.quiet and st:
        secs = st["duration_ns"] / 1e9
        achieved = st["passes"] / secs if secs > 0 else 0.0
        total = st["samples"] + st["sample_errors"]
        err = 100.0 * st["sample_errors"] / total if total else 0.0
        per = result.bytes_written / st["samples"] if st["samples"] else 0.0
        requested = "max" if opts.rate_hz == MAX_RATE_HZ else f"{opts.rate_hz:g} Hz"
        click.echo(
            f"psrec: {st['samples']:,} samples in {secs:.1f} s, {achieved:,.1f} Hz achieved "
            f"({requested} requested), {st['missed_deadlines']:,} missed deadlines, "
            f"{err:.2f}% errors",
            err=True,
        )
        if len(result.files) > 1:
            click.echo(f"psrec: wrote {len(result.files)} files, {result.files[0]} to "
                       f"{result.files[-1]}", err=True)
        elif st.get("dropped_chunks"):
            click.echo(
                f"psrec: wrote {result.output} ({result.bytes_written:,} bytes), which keeps "
                f"the last {st['samples'] - st['dropped_samples']:,} samples "
                f"({st['dropped_samples']:,} older ones dropped)", err=True)
        else:
            click.echo(
                f"psrec: wrote {result.output} ({result.bytes_written:,} bytes, "
                f"{per:.2f} bytes per sample)",
                err=True,
            )
        if opts.native:
            from psrec.format.mixed_stacks import marked_note

            note = marked_note(st.get("native_marked", 0),
                               st.get("native_mixed", 0) + st.get("native_marked", 0))
            if note:
                click.echo(f"psrec: --native: {note}", err=True)
        late = st.get("late_passes", 0) / st["passes"] if st["passes"] else 0.0
        if late >= LATE_HINT_SHARE and not st.get("realtime") and opts.rate_hz != MAX_RATE_HZ:
            click.echo(
                f"psrec: {late:.1%} of passes began late (the sampler waited for a CPU), so "
                "work in bursts shorter than a few ms reads low: --realtime keeps the schedule",
                err=True,
            )
    if result.stopped_by == "thread_limit":
        return 1  # the program runs on, unrecorded: the recording is not the whole run
    return result.exit_code if result.exit_code is not None else 0


# A share of late passes (begun more than a quarter interval late) above which the summary
# says that the schedule slipped: a late pass misses the start of a thread's burst of work.
LATE_HINT_SHARE = 0.01

# The commands psrec.cli puts into the psrec command (it adds `dump`, which dump_pid serves).
COMMANDS = (record,)
