"""The analyzer's commands: `psrec info`, `report`, `export`, `diff`, and the file half of
`dump`.

The psrec command is put together in ``psrec.cli``, which also handles every command's errors;
these commands raise PsrecError (CliUsageError for wrong usage) and load the analysis engine
only when they run. Output formats are the registry's (``psrec.analyzer.registry``): each
command offers the formats registered for it as ``--format NAME``, and keeps a flag of its own
for each format it offered before ``--format`` (``--pstats``, ``--collapsed``, ``--slices``,
``--speedscope``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click
from psrec.format import PsrecError, open_recording

__all__ = ["COMMANDS", "CliUsageError", "diff", "dump_file", "export", "info", "length",
           "report", "warn_all"]

F = TypeVar("F", bound=Callable[..., Any])


class CliUsageError(PsrecError):
    """Options that cannot go together: one line on stderr and exit status 2."""

    exit_code = 2


def length(option: str, text: str, example: str, least: float = 0.0) -> float:
    """An option's duration in seconds (`1s`, `250ms`, `2`), more than `least`; wrong usage
    otherwise."""
    from psrec.analyzer.view import parse_duration

    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise CliUsageError(f"{option}: {exc}", help=f"give a length, e.g. {example}") from None
    if seconds <= least:
        raise CliUsageError(f"{option}: {text!r} is not more than {least:g} s",
                            help=f"give a length, e.g. {example}")
    return float(seconds)


# Every tick count in a recording is a signed 64-bit integer, and ticks are at least 1 ns: a
# length up to this many seconds fits in any recording.
_SAFE_SECONDS = (2**63 - 1) * 1e-9


def slice_length(option: str, text: str, example: str, recording: str, one: str,
                 in_ns: bool = False) -> float:
    """A slice or window length (``length``) that the recording's 64-bit tick counts can hold
    (in_ns: that an output's 64-bit nanosecond counts can hold, as pprof's): a longer one is
    wrong usage that names the longest that works."""
    seconds = length(option, text, example)
    if seconds <= _SAFE_SECONDS:
        return seconds
    tick_ns = 1
    if not in_ns:
        with open_recording(recording) as rec:
            tick_ns = rec.tick_ns
    # A float rounds 2^63 - 1 up to 2^63: keep below it.
    if seconds * 1e9 / tick_ns < 2.0**63 * (1 - 1e-15):
        return seconds
    longest = (2**63 - 1) * tick_ns / 1e9
    counts = "pprof's nanosecond counts" if in_ns else "this recording's timestamps"
    raise CliUsageError(f"{option}: {text!r} is longer than {counts} reach ({longest:.3g} s)",
                        help=f"give a length of at most {longest * (1 - 1e-3):.3g} s; one "
                             f"longer than the recording makes {one}")


def warn_all(warnings: list[str]) -> None:
    for w in warnings:
        click.echo(f"psrec: warning: {w}", err=True)


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


@click.command()
@click.argument("recording", type=click.Path(dir_okay=True))
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
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
                       f"{d['missed_deadlines']:,} missed deadlines"
                       + (f" ({d['missed_deadlines_in_passes']:,} at recorded passes, which a "
                          "window counts; the rest while no target was read)"
                          if d["missed_deadlines_in_passes"] != d["missed_deadlines"] else "")),
            ("threads", f"{d['threads']:,} seen, {d['threads_with_samples']:,} with samples: "
                        f"{', '.join(d['thread_names'][:12])}"
                        + (" ..." if len(d["thread_names"]) > 12 else "")),
            ("code", f"{d['functions']:,} functions, {d['frames']:,} frames"),
            ("size", f"{d['bytes_per_sample']:.3f} bytes per thread-sample"
                     if d["bytes_per_sample"] is not None else "n/a"),
            ("chunks", f"{d['chunks']} in the file, {d['data_chunks']} of samples "
                       f"({d['corrupt_chunks']} damaged)"),
        ]
        from psrec.format.text import printable

        for k, v in rows:
            click.echo(f"{k:>10}  {printable(v)}")
    if d["samples"] == 0:
        raise EmptyRecordingError(f"{recording}: the recording holds no samples")


def dump_file(recording: str, as_json: bool = False) -> None:
    """`psrec dump FILE`: the recording chunk by chunk and record by record."""
    if as_json:
        raise CliUsageError(f"--json applies to a process (psrec dump PID), not to a "
                            f"recording: {recording}",
                            help=f"psrec info --json {recording} describes a recording as JSON")
    from psrec.format.describe import dump_lines

    with open_recording(recording) as rec:
        for line in dump_lines(rec):
            click.echo(line)
        warn_all(rec.warnings)


# -- report and export -------------------------------------------------------------------------

def _view_options(fn: F) -> F:
    """The view options every analysis command shares."""
    options = [
        click.option("--mode", type=click.Choice(["wall", "cpu", "gil", "idle", "gil-wait"]),
                     default="wall", show_default=True,
                     help="wall: every sample; cpu: samples on a CPU, weighted by the CPU time "
                          "they consumed where it was recorded; gil: samples holding the GIL; "
                          "idle: samples off CPU; gil-wait: samples of threads waiting to take "
                          "the GIL (recorded on CPython 3.15 and later)."),
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


def _view(name: str, view_args: dict[str, Any]) -> Any:
    """The View the shared view options ask for (the reporter's name picks the weights when
    --weights is not given)."""
    from psrec.analyzer.profile import View

    weights = view_args["weights"] or ("count" if name == "collapsed" else "time")
    rest = {k: v for k, v in view_args.items()
            if k not in ("weights", "threads", "pids", "processes")}
    return View(weights=weights, threads=tuple(view_args["threads"]),
                pids=tuple(view_args["pids"]), processes=tuple(view_args["processes"]), **rest)


def _load(recording: str, view: Any, reporter: Any) -> Any:
    from psrec.analyzer.profile import Profile

    return Profile.load(
        recording, view, slice_seconds=reporter.slice_seconds(),
        slice_count=reporter.slice_count, also=reporter.also(view.mode),
        timelines=reporter.needs_timelines,
        more_timelines=reporter.more_timelines(view.mode),
        warn=lambda w: click.echo(f"psrec: warning: {w}", err=True),
    )


def _run_reporter(
    name: str, recording: str, options: dict[str, Any], view_args: dict[str, Any],
    output: str | None, force: bool,
) -> None:
    from psrec.analyzer.registry import get, write_output

    reporter = get(name)(**options)
    profile = _load(recording, _view(name, view_args), reporter)
    where, summary = write_output(reporter, profile, output, force)
    if where != "<stdout>":
        click.echo(f"psrec: wrote {where}" + (f" ({summary})" if summary else ""), err=True)


def _formats(command: str) -> dict[str, str]:
    """The registry's output formats for a command: name -> description."""
    from psrec.analyzer.registry import get, names

    return {n: get(n).description for n in names() if get(n).command == command}


if TYPE_CHECKING:
    _StrChoice = click.Choice[str]  # generic from click 8.2 on
else:
    _StrChoice = click.Choice


class _FormatChoice(_StrChoice):
    """--format's choices: the formats registered for a command, looked up when they are
    needed (to parse --format, or show help), so that a command line without --format does not
    load every reporter."""

    def __init__(self, command: str) -> None:
        self._command = command
        super().__init__([])

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(_formats(self._command))

    @choices.setter
    def choices(self, _value: Any) -> None:
        pass


class _FormatOption(click.Option):
    """--format NAME, whose help lists each format with its description."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        record = super().get_help_record(ctx)
        if record is None:
            return None
        assert isinstance(self.type, _FormatChoice)
        listed = "; ".join(f"{name}: {text}" for name, text in
                           _formats(self.type._command).items())
        return record[0], f"{self.help} {listed}."


def _format_option(command: str, default: str) -> Callable[[F], F]:
    return click.option(
        "--format", "fmt", cls=_FormatOption, type=_FormatChoice(command), default=None,
        help=f"Output format (default: {default}; each has a flag of its own too):")


def _chosen_format(given: list[tuple[str, str]], default: str) -> str:
    """The one format named by --format and the format flags, as (what was given, format)
    pairs; naming two formats is wrong usage."""
    formats = list(dict.fromkeys(fmt for _, fmt in given))
    if len(formats) > 1:
        spelled = [what for what, _ in given]
        both = ", ".join(spelled[:-1]) + " and " + spelled[-1]
        raise CliUsageError(f"{both} cannot be given together: choose one output")
    return formats[0] if formats else default


# The options of report and export that only some formats read: option -> (parameter name,
# the formats that read it). pprof and the Firefox Profiler keep every sample's line and both
# its count and its time, for their own viewers to group and weigh, so --by and --weights do
# nothing there.
_READ_BY: dict[str, tuple[str, tuple[str, ...]]] = {
    "--sort": ("sort", ("table",)),
    "--limit": ("limit", ("table",)),
    "--per-thread": ("per_thread", ("table", "collapsed", "pstats")),
    "--by": ("by", ("table", "pstats", "collapsed", "slices", "html", "speedscope")),
    "--weights": ("weights", ("table", "pstats", "collapsed", "slices", "html", "speedscope")),
}


def _refuse_unread(ctx: click.Context, name: str, spelled: str, output: str | None) -> None:
    """Wrong usage: an option given on the command line that the chosen format would leave
    unread (options left at their defaults are not looked at)."""
    from click.core import ParameterSource

    def given(param: str) -> bool:
        return ctx.get_parameter_source(param) not in (None, ParameterSource.DEFAULT,
                                                       ParameterSource.DEFAULT_MAP)

    for option, (param, formats) in _READ_BY.items():
        if param in ctx.params and given(param) and name not in formats:
            offered = _formats(str(ctx.command.name))
            mine = [f for f in formats if f in offered]
            listed = ", ".join(mine[:-1]) + " and " + mine[-1] if len(mine) > 1 else mine[0]
            raise CliUsageError(
                f"{option} does nothing with {spelled}: only the {listed} "
                f"output{'s read' if len(mine) > 1 else ' reads'} it",
                help=f"leave out {option}, or choose {'one of those' if len(mine) > 1 else 'it'}"
                     " with --format")
    if given("force") and (output == "-" or (output is None and _stdout_format(name))):
        raise CliUsageError(f"--force does nothing here: {spelled} goes to stdout, where "
                            "there is no file to overwrite",
                            help="leave out --force, or name a file with -o")


def _stdout_format(name: str) -> bool:
    from psrec.analyzer.registry import get

    return get(name).suffix is None


def _spelled(given: list[tuple[str, str]], name: str) -> str:
    """How the command line named the format: its flag or --format, or the default."""
    return given[0][0] if given else f"the default format ({name})"


@click.command()
@click.argument("recording", type=click.Path(dir_okay=True))
@_format_option("report", "table")
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
@click.option("--html", is_flag=True,
              help="Write one self-contained HTML page (default RECORDING.html): each "
                   "thread's GIL and CPU states over time, a brush for a window, and a flame "
                   "graph and function table of it, in every mode.")
@click.option("--per-thread", is_flag=True,
              help="Table: one table per thread. Collapsed: a thread root frame on every stack. "
                   "pstats: a root function per thread, under one <all threads> root.")
@_view_options
def report(recording: str, fmt: str | None, sort: str, limit: int, pstats: bool,
           collapsed: bool, slices: str | None, html: bool, per_thread: bool, output: str | None,
           force: bool, **view_args: Any) -> None:
    """Where the time went: a table of functions, or pstats, collapsed stacks, time slices,
    an HTML page.

    Sample columns count stacks seen, not calls; times are estimated from the samples.
    """

    given = [(f"--format {fmt}", fmt)] if fmt is not None else []
    given += [(flag, name) for flag, name, on in (
        ("--pstats", "pstats", pstats), ("--collapsed", "collapsed", collapsed),
        ("--slices", "slices", slices is not None), ("--html", "html", html)) if on]
    name = _chosen_format(given, "table")
    _refuse_unread(click.get_current_context(), name, _spelled(given, name), output)
    options: dict[str, Any] = {"sort": sort, "limit": limit, "per_thread": per_thread}
    if name == "slices":
        if slices is None:
            raise CliUsageError("--format slices needs the length of a slice",
                                help="give it with --slices DURATION, e.g. --slices 1s")
        options["slice_seconds"] = slice_length("--slices", slices, "1s or 250ms", recording,
                                                "a single slice")
    _run_reporter(name, recording, options, view_args, output, force)


@click.command()
@click.argument("recording", type=click.Path(dir_okay=True))
@_format_option("export", "speedscope")
@click.option("--speedscope", is_flag=True,
              help="speedscope JSON (default RECORDING.speedscope.json): one sampled profile "
                   "per thread, samples in time order. The default format.")
@click.option("--firefox", is_flag=True,
              help="Firefox Profiler file (default RECORDING.firefox.json): a track per "
                   "thread with its samples, CPU use and GIL markers; open it at "
                   "profiler.firefox.com (Load a profile from file).")
@click.option("--pprof", is_flag=True,
              help="Gzipped pprof profile (default RECORDING.pb.gz) for go tool pprof, "
                   "Pyroscope, Parca, Grafana: samples, wall and CPU time, labelled by thread, "
                   "GIL and CPU state.")
@click.option("--window", metavar="DURATION",
              help="pprof: one profile per window of this length (e.g. 10s), written as "
                   "BASE.0.pb.gz, BASE.1.pb.gz, ...")
@_view_options
def export(recording: str, fmt: str | None, speedscope: bool, firefox: bool, pprof: bool,
           window: str | None, output: str | None, force: bool, **view_args: Any) -> None:
    """Export a recording for another tool (speedscope, Firefox Profiler, pprof)."""
    given = [(f"--format {fmt}", fmt)] if fmt is not None else []
    given += [(flag, name) for flag, name, on in (("--speedscope", "speedscope", speedscope),
                                                  ("--firefox", "firefox", firefox),
                                                  ("--pprof", "pprof", pprof)) if on]
    name = _chosen_format(given, "speedscope")
    _refuse_unread(click.get_current_context(), name, _spelled(given, name), output)
    if window is None:
        _run_reporter(name, recording, {}, view_args, output, force)
        return
    if name != "pprof":
        raise CliUsageError("--window is for pprof profiles", help="add --pprof")
    from psrec.analyzer.pprof import write_windows
    from psrec.analyzer.registry import get

    reporter = get(name)(window=slice_length("--window", window, "10s", recording,
                                                  "a single profile", in_ns=True))
    profile = _load(recording, _view(name, view_args), reporter)
    written = write_windows(profile, output, force)
    click.echo(f"psrec: wrote {len(written)} profiles: {written[0]} ... {written[-1]}"
               if len(written) > 1 else f"psrec: wrote {written[0]}", err=True)


@click.command()
@click.argument("base", type=click.Path(dir_okay=True))
@click.argument("new", type=click.Path(dir_okay=True))
@click.option("--sort", type=click.Choice(["own", "total", "z"]), default="own",
              show_default=True,
              help="Order: largest change of own share, of total share, or largest |z|.")
@click.option("-l", "--limit", type=click.IntRange(min=0), default=25, show_default=True,
              help="Rows to show (0: all).")
@click.option("--html", is_flag=True,
              help="Write a differential flame graph with the table as one HTML page "
                   "(default NEW.diff.html): frames coloured by how their share changed.")
@click.option("--speedscope", is_flag=True,
              help="Write both recordings as two profiles of one speedscope file (default "
                   "NEW.diff.speedscope.json), to switch between in speedscope.")
@click.option("--absolute", is_flag=True,
              help="Compare seconds, not shares of each recording's total (the table and, "
                   "with --html, the colours): a function that did not change stays unchanged "
                   "when another grew.")
@_view_options
def diff(base: str, new: str, sort: str, limit: int, html: bool, speedscope: bool,
         absolute: bool, output: str | None, force: bool, **view_args: Any) -> None:
    """Functions whose share of the time (with --absolute, whose time) changed most from BASE
    to NEW, under one view.

    The view options (mode, threads, processes, window, weights, by) apply to both
    recordings; a window counts from each recording's own start.
    """
    from psrec.analyzer.registry import get, write_output

    given = [(flag, name) for flag, name, on in (("--html", "diff-html", html),
                                                 ("--speedscope", "diff-speedscope", speedscope))
             if on]
    name = _chosen_format(given, "diff")
    if absolute and name == "diff-speedscope":
        raise CliUsageError("--absolute does not apply to --speedscope (each profile keeps "
                            "its own times)", help="leave out --absolute")
    reporter = get(name)(sort=sort, limit=limit, absolute=absolute)
    view = _view("diff", view_args)
    reporter.options["base"] = _load(base, view, reporter)
    profile = _load(new, view, reporter)
    if output is not None and output != "-" and os.path.exists(output) and \
            os.path.samefile(output, base):
        raise PsrecError(f"{output} is the base recording itself",
                         help="choose another name with -o")
    where, summary = write_output(reporter, profile, output, force)
    if where != "<stdout>":
        click.echo(f"psrec: wrote {where}" + (f" ({summary})" if summary else ""), err=True)


# The commands psrec.cli puts into the psrec command (it adds `dump`, which dump_file serves).
COMMANDS = (info, report, export, diff)
