"""The recorder's commands: `psrec record`, and the process half of `psrec dump`.

The psrec command is put together in ``psrec.cli``, which also handles every command's errors;
these raise PsrecError (RecorderUsageError for wrong usage). Importing this module does not
load the native recorder; the commands do, when they run.
"""

from __future__ import annotations

import difflib
import math
import shlex
import sys
from typing import Any

import click

from ._dump import check_pid, format_dump, print_dump
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


def _seconds(text: str) -> float:
    """-d's value: a number of seconds above 0. nan (which passes every range check, comparing
    false with everything) and inf are no duration."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (0 < seconds < math.inf):
        raise RecorderUsageError(f"--duration: {text!r} is not a number of seconds above 0")
    return seconds


# Words psrec does not know, options included, are left to TARGET, so that a program given
# without `--` can be named in the error rather than one of its options.
@click.command(cls=_RecordCommand,
               context_settings={"help_option_names": ["-h", "--help"],
                                 "ignore_unknown_options": True})
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The recording to write (.psr), or - for standard output. A name that "
                   "is not a file is written in place only if it is one of psrec's own "
                   "descriptors (/dev/stdout, /dev/fd/N) or a FIFO or character device that "
                   "you or root own, reached through no link another user made; a block "
                   "device or a socket never. A FIFO is waited for until a process reads it.")
@click.option("-r", "--rate", default=None,
              help="Samples per second: 1000, 10k or 10khz; max: as fast as possible "
                   "(default: 1000; 100 with --keep or --max-size).")
@click.option("-d", "--duration", metavar="SECONDS", default=None,
              help="Seconds to record (default: until the target exits or Ctrl-C).")
@click.option("--subprocesses", is_flag=True,
              help="Also record child Python processes (e.g. multiprocessing workers).")
@click.option("--blocking", is_flag=True,
              help="Pause the target during each sample for exactly consistent stacks.")
@click.option("--native", is_flag=True,
              help="Also record each thread's native (C, C++, Rust) frames, interleaved with "
                   "its Python frames, without stopping the target (perf events); they are "
                   "named from the target's binaries as they are recorded.")
@click.option("--realtime", is_flag=True,
              help="Give the sampling thread real-time priority (SCHED_FIFO, where permitted) "
                   "to keep to its deadlines on a busy machine; it preempts the target, so "
                   "the target slows down more.")
@click.option("--cpu-source", type=click.Choice(["auto", "procfs"]), default="auto",
              show_default=True,
              help="Where each thread's CPU state and time come from: auto reads its context "
                   "switches from a perf event ring (no system call per sample) where "
                   "perf_event_open is permitted, else /proc/PID/task/TID/{schedstat,stat}; "
                   "procfs always reads the files.")
@click.option("--frame-cache/--no-frame-cache", default=True, show_default=True,
              help="Targets on CPython 3.15+: read the outer frames of deep stacks from the "
                   "frame cache CPython keeps for profilers, for which psrec writes one "
                   "pointer into each thread's state (last_profiled_frame), as CPython's own "
                   "sampler does. --no-frame-cache reads every frame and writes nothing.")
@click.option("--tasks/--no-tasks", default=True, show_default=True,
              help="Once the target imports asyncio, record which task each thread runs at "
                   "each sample (its name, its coroutine), for the reports' task views. "
                   "--no-tasks reads nothing of asyncio.")
@click.option("--task-rate", metavar="RATE", default=None,
              help="How often, at most, every asyncio task's state is read (suspended or "
                   "ready, its coroutines down to its await, the tasks it waits on), for the "
                   "time tasks spend waiting: 100, 1k (default: the sampling rate, at most "
                   "1k). Reading thousands of tasks is slower: psrec then reads them less "
                   "often, spending at most a tenth of its time on it.")
@click.option("--keep", metavar="DURATION", default=None,
              help="A flight recorder: record until stopped, keeping in the file only the "
                   "samples of the last DURATION (90, 20s, 10m, 1h); the oldest are dropped a "
                   "chunk at a time, and the file read at any moment is a whole recording. "
                   "The rate is 100 Hz unless -r says otherwise.")
@click.option("--max-size", metavar="SIZE", default=None,
              help="A flight recorder whose file never grows past SIZE (200M, 1G); with "
                   "--keep, both bounds hold.")
@click.option("--window", metavar="DURATION", default=None,
              help="Close the file every DURATION and go on in the next: -o is a pattern with "
                   "{n} (the window's number, from 0) or {time} (when it began, UTC), e.g. "
                   "-o 'run-{n}.psr'. Each file reads alone. Each file is created new: a "
                   "window whose file cannot be (its name taken, its folder not writable) "
                   "goes on in the file before it, said in one line.")
@click.option("--force", is_flag=True, help="Overwrite the output if it exists.")
@click.option("-q", "--quiet", is_flag=True, help="No live status line and no summary.")
@click.option("-v", "--verbose", is_flag=True, help="Show tracebacks on errors.")
@click.argument("target", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def record(ctx: click.Context, output: str, rate: str | None, duration: str | None,
           subprocesses: bool, blocking: bool, native: bool, realtime: bool, cpu_source: str,
           frame_cache: bool, tasks: bool, task_rate: str | None, keep: str | None,
           max_size: str | None, window: str | None, force: bool, quiet: bool,
           verbose: bool, target: tuple[str, ...]) -> None:
    """Record a running process (TARGET is its pid) or launch a program after `--`.

    \b
      psrec record -o run.psr 1234
      psrec record -o run.psr -r 10k -- python app.py args...
      psrec record -o last.psr --keep 10m 1234
      psrec record -o 'run-{n}.psr' --window 60s 1234
    """
    # -v (verbose) is read by the error handling psrec.cli gives every command.
    seconds = None if duration is None else _seconds(duration)
    sys.exit(_record(output, rate, seconds, subprocesses, blocking, force, quiet, target,
                     realtime=realtime, cpu_source=cpu_source, native=native,
                     frame_cache=frame_cache, tasks=tasks, task_rate=task_rate,
                     after_dashdash=ctx.meta.get(_AFTER_DASHDASH),
                     bounds=_bounds(keep, max_size, window, output)))


def _bounds(keep: str | None, max_size: str | None, window: str | None,
            output: str) -> dict[str, Any]:
    """--keep, --max-size and --window, checked: RecordOptions' keep_s, max_bytes, window_s."""
    from ._options import parse_duration, parse_size

    if window is not None and (keep is not None or max_size is not None):
        raise RecorderUsageError("--window cannot be given with --keep or --max-size",
                                 help="record windows, or one flight recording, not both")
    if window is not None and "{n}" not in output and "{time}" not in output:
        raise RecorderUsageError(
            f"--window: the output {output!r} names one file",
            help="put {n} (the window's number) or {time} in -o, e.g. -o 'run-{n}.psr'")
    return {
        "keep_s": None if keep is None else parse_duration("--keep", keep),
        "max_bytes": None if max_size is None else parse_size("--max-size", max_size),
        "window_s": None if window is None else parse_duration("--window", window),
    }


def _task_rate(text: str) -> float:
    """--task-rate: task snapshots a second, as -r reads a rate (not `max`)."""
    from ._api import MAX_RATE_HZ, parse_rate

    help_ = "give task snapshots a second, from 1 to 100k, for example --task-rate 1k"
    try:
        value = parse_rate(text)
    except RecorderUsageError:
        raise RecorderUsageError(f"--task-rate {text!r} is not a rate", help=help_) from None
    if value == MAX_RATE_HZ:
        raise RecorderUsageError(f"--task-rate {text!r} is not a rate", help=help_)
    return value


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


def _record(output: str, rate: str | None, duration: float | None, subprocesses: bool,
            blocking: bool, force: bool, quiet: bool, target: tuple[str, ...],
            realtime: bool = False, cpu_source: str = "auto", after_dashdash: int | None = None,
            native: bool = False, frame_cache: bool = True, tasks: bool = True,
            task_rate: str | None = None, bounds: dict[str, Any] | None = None) -> int:
    from ._api import MAX_RATE_HZ, RecordOptions, parse_rate
    from ._api import record as run
    from ._options import ALWAYS_ON_RATE_HZ

    bounds = bounds or {}
    pid, command = _target(output, target, after_dashdash)
    if rate is None:
        always_on = bounds.get("keep_s") is not None or bounds.get("max_bytes") is not None
        rate = str(ALWAYS_ON_RATE_HZ) if always_on else "1000"
    opts = RecordOptions(
        output=output,
        pid=pid,
        command=command,
        rate_hz=parse_rate(rate),
        **bounds,
        duration=duration,
        subprocesses=subprocesses,
        blocking=blocking,
        force=force,
        quiet=quiet,
        realtime=realtime,
        cpu_source=cpu_source,
        native=native,
        frame_cache=frame_cache,
        tasks=tasks,
        task_rate_hz=None if task_rate is None else _task_rate(task_rate),
    )
    result = run(opts)
    st = result.stats
    if not quiet and st:
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
