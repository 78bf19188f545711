"""The psrec command line."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
from psrec.format import PsrecError, open_recording

F = TypeVar("F", bound=Callable[..., Any])


class CliUsageError(PsrecError):
    """Options that cannot go together: one line on stderr and exit status 2."""

    exit_code = 2


class _State:
    verbose = False


def handle_errors(fn: F) -> F:
    """Turns PsrecError into one line (and its help) on stderr and exit status 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except PsrecError as exc:
            if _State.verbose:
                raise
            click.echo(f"psrec: error: {exc.message}", err=True)
            if exc.help:
                click.echo(f"psrec: {exc.help}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            if _State.verbose:
                raise
            click.echo("psrec: interrupted", err=True)
            sys.exit(130)
        except BrokenPipeError:
            sys.stderr.close()
            sys.exit(1)
        except click.ClickException:  # wrong usage click words itself (exit status 2)
            raise
        except Exception as exc:
            if _State.verbose:
                raise
            click.echo(f"psrec: internal error: {type(exc).__name__}: {exc}", err=True)
            click.echo("psrec: run again with -v for the traceback, and please report it", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def warn_all(warnings: list[str]) -> None:
    for w in warnings:
        click.echo(f"psrec: warning: {w}", err=True)


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """click.version_option's -V, with the version looked up only when asked for (importlib.
    metadata takes longer than most commands)."""
    if not value or ctx.resilient_parsing:
        return
    from psrec import __version__

    click.echo(f"psrec, version {__version__}", color=ctx.color)
    ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-V", "--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_show_version, help="Show the version and exit.")
@click.option("-v", "--verbose", is_flag=True, help="Show tracebacks and more detail.")
def main(verbose: bool) -> None:
    """psrec: record a running Python process once, ask questions of the recording offline."""
    _State.verbose = verbose


def _truncated(d: dict[str, Any]) -> str:
    """How many stacks were cut at the depth cap, as the trailer's stats count them."""
    from psrec.format import constants as C

    cap = f"deeper than {C.MAX_DEPTH:,} frames"
    n = (d["stats"] or {}).get("truncated_stacks")
    if n is None:
        return f"not counted in this file (stacks {cap} are cut)"
    if n == 0:
        return f"none (no stack {cap})"
    return (f"{n:,} thread-samples with a stack {cap}, cut to its innermost "
            f"{C.MAX_DEPTH - 1:,} below [truncated stack]")


@main.command()
@click.argument("recording", type=click.Path(dir_okay=True))
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@handle_errors
def info(recording: str, as_json: bool) -> None:
    """Metadata, duration, samples, threads, rate, errors and size of a recording."""
    from psrec.format import EmptyRecordingError
    from psrec.format.describe import info as describe

    with open_recording(recording) as rec:
        d = describe(rec)
        warn_all(rec.warnings)
    if as_json:
        click.echo(json.dumps(d, indent=2, default=str))
    else:
        md = d["metadata"]
        rows = [
            ("file", f"{d['file']} ({d['size_bytes']:,} bytes, format {d['format']})"),
            ("state", "closed cleanly" if d["closed_cleanly"]
                      else "recovered (not closed cleanly)"),
            ("created", d["created"]),
            ("target", f"pid {md.get('pid', '?')}: {' '.join(md.get('command') or []) or '?'}"),
            *[("processes" if i == 0 else "", f"pid {p['pid']}"
               + (f" (parent {p['parent_pid']})" if p["parent_pid"] else "")
               + f": {p['command'] or '?'}")
              for i, p in enumerate(d["processes"]) if len(d["processes"]) > 1],
            ("python", str(md.get("python_version", "?"))
                       + (" free-threaded (no GIL: the GIL status records whether a thread "
                          "was attached to the interpreter)"
                          if (md.get("python_build") or {}).get("free_threaded") else "")),
            ("host", str(md.get("hostname", "?"))),
            ("psrec", str(md.get("psrec_version", "?"))),
            ("requested", f"{md.get('rate_hz', '?')} Hz"),
            ("duration", f"{d['duration_s']:.3f} s"),
            ("passes", f"{d['passes']:,} (achieved {d['achieved_rate_hz']:,.1f} Hz)"),
            ("samples", f"{d['samples']:,} thread-samples"),
            ("truncated", _truncated(d)),
            ("errors", f"{d['sample_errors']:,} sample errors, "
                       f"{d['missed_deadlines']:,} missed deadlines"),
            ("threads", f"{d['threads']}: {', '.join(d['thread_names'][:12])}"
                        + (" ..." if len(d["thread_names"]) > 12 else "")),
            ("code", f"{d['functions']:,} functions, {d['frames']:,} frames"),
            ("size", f"{d['bytes_per_sample']:.3f} bytes per thread-sample"
                     if d["bytes_per_sample"] is not None else "n/a"),
            ("chunks", f"{d['chunks']} ({d['corrupt_chunks']} damaged)"),
        ]
        from psrec.analyzer.reporters import printable

        for k, v in rows:
            click.echo(f"{k:>10}  {printable(v)}")
    if d["samples"] == 0:
        raise EmptyRecordingError(f"{recording}: the recording holds no samples")


# `psrec dump PID [--json]`, plain, is answered by psrec.recorder._dump before click is even
# imported (see psrec.__main__); it comes here from any other form of command line (`-v -v`,
# `--`, ...), with the same output.
@main.command()
@click.argument("target")
@click.option("--json", "as_json", is_flag=True,
              help="With a PID: print the process and its threads' stacks as one JSON "
                   "document.")
@handle_errors
def dump(target: str, as_json: bool) -> None:
    """Dump a recording (a file) chunk by chunk and record by record, or, given a PID, print
    every thread's current Python stack."""
    import os

    if not os.path.exists(target) and target.isdigit():
        from psrec.recorder.cli import dump_pid

        dump_pid(int(target), as_json=as_json)
        return
    if as_json:
        raise CliUsageError(f"--json applies to a process (psrec dump PID), not to a "
                            f"recording: {target}",
                            help=f"psrec info --json {target} describes a recording as JSON")
    from psrec.format.describe import dump_lines

    with open_recording(target) as rec:
        for line in dump_lines(rec):
            click.echo(line)
        warn_all(rec.warnings)


# -- report and export -------------------------------------------------------------------------

def _view_options(fn: F) -> F:
    """The view options every analysis command shares."""
    options = [
        click.option("--mode", type=click.Choice(["wall", "cpu", "gil", "idle"]), default="wall",
                     show_default=True,
                     help="wall: every sample; cpu: samples on a CPU, weighted by the CPU time "
                          "they consumed where it was recorded; gil: samples holding the GIL; "
                          "idle: samples off CPU."),
        click.option("--thread", "threads", multiple=True, metavar="ID|NAME",
                     help="Only this thread (OS or Python thread id, or name); repeatable."),
        click.option("--pid", "pids", multiple=True, type=int, metavar="PID",
                     help="Only this process (psrec info lists them); repeatable."),
        click.option("--process", "processes", multiple=True, metavar="TEXT",
                     help="Only processes whose command line holds TEXT; repeatable."),
        click.option("--from", "start", metavar="T",
                     help="Window start: seconds from the start of the recording (12.5, 500ms) "
                          "or a wall-clock time (14:02:10, 2024-05-01T14:02:10). Inclusive."),
        click.option("--to", "end", metavar="T", help="Window end, like --from. Exclusive."),
        click.option("--weights", type=click.Choice(["time", "count"]), default=None,
                     help="time: each sample weighs the time it stands for (default); count: "
                          "raw sample counts (the default for --collapsed)."),
        click.option("--by", type=click.Choice(["function", "line"]), default="function",
                     show_default=True, help="Group by function or by line."),
        click.option("-o", "--output", type=click.Path(dir_okay=False),
                     help="Output file ('-' for stdout)."),
        click.option("--force", is_flag=True, help="Overwrite an existing output file."),
    ]
    for opt in reversed(options):
        fn = opt(fn)
    return fn


def _run_reporter(
    name: str, recording: str, options: dict[str, Any], view_args: dict[str, Any],
    output: str | None, force: bool,
) -> None:
    from psrec.analyzer.profile import Profile, View
    from psrec.analyzer.registry import get, write_output

    reporter = get(name)(**options)
    weights = view_args.pop("weights") or ("count" if name == "collapsed" else "time")
    view = View(weights=weights, threads=tuple(view_args.pop("threads")),
                pids=tuple(view_args.pop("pids")), processes=tuple(view_args.pop("processes")),
                **view_args)
    profile = Profile.load(
        recording, view, slice_seconds=reporter.slice_seconds(),
        timelines=reporter.needs_timelines,
        warn=lambda w: click.echo(f"psrec: warning: {w}", err=True),
    )
    where, summary = write_output(reporter, profile, output, force)
    if where != "<stdout>":
        click.echo(f"psrec: wrote {where}" + (f" ({summary})" if summary else ""), err=True)


@main.command()
@click.argument("recording", type=click.Path(dir_okay=True))
@click.option("--sort", type=click.Choice(["own", "total", "own-samples", "total-samples", "name",
                                           "file"]),
              default="own", show_default=True, help="Table order.")
@click.option("-l", "--limit", type=click.IntRange(min=0), default=25, show_default=True,
              help="Rows to show (0: all).")
@click.option("--pstats", is_flag=True,
              help="Write a pstats file (default RECORDING.pstats) for pstats, snakeviz, "
                   "gprof2dot.")
@click.option("--collapsed", is_flag=True,
              help="Write collapsed stacks (default RECORDING.collapsed; -o - for stdout) for "
                   "flamegraph.pl and inferno.")
@click.option("--slices", metavar="DURATION",
              help="Time-sliced report, one row per slice (e.g. 1s, 250ms), with a per-thread "
                   "activity strip.")
@click.option("--per-thread", is_flag=True,
              help="Table: one table per thread. Collapsed: a thread root frame on every stack.")
@_view_options
@handle_errors
def report(recording: str, sort: str, limit: int, pstats: bool, collapsed: bool,
           slices: str | None, per_thread: bool, output: str | None, force: bool,
           **view_args: Any) -> None:
    """Where the time went: a table of functions, or pstats, collapsed stacks, time slices.

    Sample columns count stacks seen, not calls; times are estimated from the samples.
    """
    from psrec.analyzer.profile import parse_duration

    given = [name for name, on in (("--pstats", pstats), ("--collapsed", collapsed),
                                   ("--slices", slices is not None)) if on]
    if len(given) > 1:
        both = ", ".join(given[:-1]) + " and " + given[-1]
        raise CliUsageError(f"{both} cannot be given together: choose one output")
    fmt = "pstats" if pstats else "collapsed" if collapsed else None
    options: dict[str, Any] = {"sort": sort, "limit": limit, "per_thread": per_thread}
    name = fmt or "table"
    if slices is not None:
        try:
            seconds = parse_duration(slices)
        except ValueError as exc:
            raise CliUsageError(f"--slices: {exc}", help="see psrec report --help") from None
        if seconds <= 0:
            raise CliUsageError(f"--slices: {slices!r} is not more than 0",
                                help="give the length of a slice, e.g. 1s or 250ms")
        name = "slices"
        options["slice_seconds"] = seconds
    _run_reporter(name, recording, options, view_args, output, force)


@main.command()
@click.argument("recording", type=click.Path(dir_okay=True))
@click.option("--speedscope", "fmt", flag_value="speedscope", default=True,
              help="speedscope JSON (default RECORDING.speedscope.json): one sampled profile "
                   "per thread, samples in time order. The default format.")
@_view_options
@handle_errors
def export(recording: str, fmt: str, output: str | None, force: bool,
           **view_args: Any) -> None:
    """Export a recording for another tool (speedscope)."""
    _run_reporter(fmt, recording, {}, view_args, output, force)


# -- record: lives with the native recorder; importing its command loads nothing native --------
from psrec.recorder.cli import record as _record  # noqa: E402

main.add_command(_record, "record")
