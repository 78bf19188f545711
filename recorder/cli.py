"""The `psrec record` and `psrec dump <pid>` commands.

Importing this module does not load the native recorder; the commands do, when they run.
"""

from __future__ import annotations

import sys
from typing import Any

import click
from psrec.format.errors import PsrecError

__all__ = ["record", "dump_pid", "format_dump"]


def _short_path(path: str) -> str:
    return path


def format_dump(d: dict[str, Any]) -> list[str]:
    info = d["info"]
    lines = [
        f"Process {info['pid']}: {info.get('command') or info['executable']}",
        f"Python {info['version']}{' free-threaded' if info['free_threaded'] else ''} "
        f"({info['binary']})",
        "",
    ]
    # A free-threaded interpreter has no GIL: what stands in its place is whether the thread
    # was attached to the interpreter (running Python code).
    held, label = ("yes", "attached") if info["free_threaded"] else ("held", "gil")
    for t in d["threads"]:
        gil = (f"{label}: ?" if not t["gil_known"]
               else (f"{label}: {held}" if t["gil_held"] else f"{label}: -"))
        cpu = "cpu: ?" if not t["cpu_known"] else ("cpu: running" if t["on_cpu"] else "cpu: idle")
        name = f' "{t["name"]}"' if t["name"] else ""
        lines.append(
            f"Thread {t['python_tid']:#x} (tid {t['native_tid'] or '?'}){name}  [{gil}, {cpu}]"
        )
        for filename, func, line in t["frames"]:
            lines.append(f"    {func} ({_short_path(filename)}:{line})")
        if t["truncated"]:
            lines.append("    [truncated stack]")
        if t["error"]:
            lines.append(f"    [{t['error']}]")
        if not t["frames"] and not t["error"]:
            lines.append("    [no Python frames]")
        lines.append("")
    return lines


def dump_pid(pid: int, blocking: bool = False) -> None:
    """Prints every thread's current stack, with GIL and CPU status (like py-spy dump)."""
    from ._api import dump_process, native

    d = dump_process(pid, blocking)
    d["info"]["command"] = native().command_line(pid)
    for line in format_dump(d):
        click.echo(line)


def _fail(exc: PsrecError, verbose: bool) -> None:
    if verbose:
        raise exc
    click.echo(f"psrec: error: {exc.message}", err=True)
    if exc.help:
        click.echo(f"psrec: {exc.help}", err=True)
    sys.exit(exc.exit_code)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The recording to write (.psr).")
@click.option("-r", "--rate", default="1000", show_default=True,
              help="Samples per second: 1000, 10k or 10khz; max: as fast as possible.")
@click.option("-d", "--duration", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds to record (default: until the target exits or Ctrl-C).")
@click.option("--subprocesses", is_flag=True,
              help="Also record child Python processes (e.g. multiprocessing workers).")
@click.option("--blocking", is_flag=True,
              help="Pause the target during each sample for exactly consistent stacks.")
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
@click.option("--force", is_flag=True, help="Overwrite the output if it exists.")
@click.option("-q", "--quiet", is_flag=True, help="No live status line and no summary.")
@click.option("-v", "--verbose", is_flag=True, help="Show tracebacks on errors.")
@click.argument("target", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def record(ctx: click.Context, output: str, rate: str, duration: float | None,
           subprocesses: bool, blocking: bool, realtime: bool, cpu_source: str, force: bool,
           quiet: bool, verbose: bool, target: tuple[str, ...]) -> None:
    """Record a running process (TARGET is its pid) or launch a program after `--`.

    \b
      psrec record -o run.psr 1234
      psrec record -o run.psr -r 10k -- python app.py args...
    """
    parent = ctx.find_root().params if ctx.parent is not None else {}
    verbose = verbose or bool(parent.get("verbose"))
    try:
        code = _record(output, rate, duration, subprocesses, blocking, force, quiet, target,
                       realtime=realtime, cpu_source=cpu_source)
    except PsrecError as exc:
        _fail(exc, verbose)
    except KeyboardInterrupt:
        if verbose:
            raise
        click.echo("psrec: interrupted", err=True)
        sys.exit(130)
    sys.exit(code)


def _record(output: str, rate: str, duration: float | None, subprocesses: bool, blocking: bool,
            force: bool, quiet: bool, target: tuple[str, ...], realtime: bool = False,
            cpu_source: str = "auto") -> int:
    from ._api import MAX_RATE_HZ, RecordOptions, parse_rate
    from ._api import record as run
    from .errors import RecorderError

    dashdash = "--" in sys.argv
    if not target:
        raise click.UsageError("give a pid to attach to, or -- and a command to launch")
    if dashdash or not target[0].isdigit() or len(target) > 1:
        command = tuple(target)
        pid = None
    else:
        command = ()
        pid = int(target[0])
    if pid is not None and pid <= 0:
        raise RecorderError(f"invalid pid {pid}", help="give the pid of a running Python process")
    opts = RecordOptions(
        output=output,
        pid=pid,
        command=command,
        rate_hz=parse_rate(rate),
        duration=duration,
        subprocesses=subprocesses,
        blocking=blocking,
        force=force,
        quiet=quiet,
        realtime=realtime,
        cpu_source=cpu_source,
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
        click.echo(
            f"psrec: wrote {result.output} ({result.bytes_written:,} bytes, "
            f"{per:.2f} bytes per sample)",
            err=True,
        )
    return result.exit_code if result.exit_code is not None else 0
