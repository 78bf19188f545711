"""The analyzer's commands: `psrec info`, `report`, `export`, `diff`, and the file half of
`dump`.

The psrec command is put together in ``psrec.cli``, which also handles every command's errors;
these commands raise PsrecError (CliUsageError for wrong usage) and load the analysis engine
only when they run. The commands that write an output (report, export, diff) offer the
outputs registered for them (``psrec.analyzer.registry``, ``psrec.analyzer.outputs``): their
flags and options are built from what each output declares (``psrec.analyzer.cli_options``);
what is here reads them back: which output was chosen, the options it reads, and the options
it would leave unread.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import click
from psrec.format import PsrecError, open_recording

from .cli_options import OutputCommand, command_options, outputs_of, view_of

if TYPE_CHECKING:
    from .registry import Option, Reporter

__all__ = ["COMMANDS", "CliUsageError", "diff", "dump_file", "export", "info", "length",
           "report", "snapshot", "warn_all"]


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


def slice_length(option: str, text: str, example: str, recording: str | list[str], one: str,
                 in_ns: bool = False) -> float:
    """A slice or window length (``length``) that the recording's 64-bit tick counts can hold
    (in_ns: that an output's 64-bit nanosecond counts can hold, as pprof's): a longer one is
    wrong usage that names the longest that works."""
    seconds = length(option, text, example)
    if seconds <= _SAFE_SECONDS:
        return seconds
    tick_ns = 1
    if not in_ns:
        from psrec.format import open_recordings

        with open_recordings(recording) as rec:
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
            *([("part", d["part"])] if d["part"] else []),
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
                       + (f"{pass_errors:,} passes that could not read the process at all, "
                          if (pass_errors := (d.get("stats") or {}).get("pass_errors")) else "")
                       + f"{d['missed_deadlines']:,} missed deadlines"
                       + (f" ({d['missed_deadlines_in_passes']:,} at recorded passes, which a "
                          "window counts; the rest while no target was read)"
                          if d["missed_deadlines_in_passes"] != d["missed_deadlines"] else "")),
            ("threads", f"{d['threads']:,} seen, {d['threads_with_samples']:,} with samples: "
                        f"{', '.join(d['thread_names'][:12])}"
                        + (" ..." if len(d["thread_names"]) > 12 else "")),
            *_read_rows(d.get("stats") or {}, d["metadata"]),
            ("code", f"{d['functions']:,} functions, {d['frames']:,} frames"),
            *([("tasks", f"{d['tasks']:,} asyncio tasks (psrec report --tasks)"
                         + _task_snapshots(d.get("stats") or {}))]
              if d.get("tasks") else []),
            ("size", f"{d['bytes_per_sample']:.3f} bytes per thread-sample"
                     if d["bytes_per_sample"] is not None else "n/a"),
            ("chunks", f"{d['chunks']} in the file, {d['data_chunks']} of samples "
                       f"({d['corrupt_chunks']} damaged)"),
            *([("kept", f"the last {d['duration_s']:.1f} s: a flight recording (--keep, "
                        f"--max-size) that dropped {stats['dropped_samples']:,} older "
                        f"samples")]
              if isinstance((stats := d.get("stats") or {}).get("dropped_samples"), int)
              else []),
        ]
        from psrec.format.text import printable

        for k, v in rows:
            click.echo(f"{k:>10}  {printable(v)}")
    if d["samples"] == 0:
        raise EmptyRecordingError(f"{recording}: the recording holds no samples")


def _read_rows(stats: dict[str, Any], md: dict[str, Any]) -> list[tuple[str, str]]:
    """`psrec info`'s rows on how the stacks were read: torn copies read again or with the
    thread stopped, samples lost to them, and a native recording's pairing (spec section 10,
    rule 7). None for a recording without the recorder's figures (not closed cleanly)."""
    rows = []
    if isinstance(stats.get("torn_dropped"), int):
        rows.append(("torn", f"{stats.get('retries', 0):,} torn reads read again, "
                             f"{stats.get('torn_stopped', 0):,} read with the thread stopped, "
                             f"{stats['torn_dropped']:,} samples lost to them"))
    if (md.get("options") or {}).get("native") and isinstance(stats.get("native_marked"), int):
        from psrec.format.mixed_stacks import MARKER, marked_note

        mixed, marked = stats.get("native_mixed", 0), stats["native_marked"]
        stopped_ms = stats.get("stopped_ns", 0) / 1e6
        rows.append(("native", f"{mixed:,} samples with their native frames (of them "
                               f"{stats.get('native_captured', 0):,} with the Python frames "
                               "the kernel copied at the same perf sample, "
                               f"{stats.get('native_stopped', 0):,} read with the thread "
                               f"stopped: {stopped_ms:,.1f} ms of stops in all), "
                               f"{marked:,} marked {MARKER}"))
        note = marked_note(marked, mixed + marked)
        if note:
            rows.append(("", note))
    return rows


def _task_snapshots(stats: dict[str, Any]) -> str:
    """', 1,024 snapshots of their states (300 us of CPU each)', from a closed recording's
    STATS; nothing for one without them."""
    n, ns = stats.get("task_snapshots"), stats.get("task_snapshot_ns")
    if not isinstance(n, int) or not n:
        return ""
    each = f" ({ns / n / 1e3:,.0f} us of CPU each)" if isinstance(ns, int) else ""
    return f", {n:,} snapshots of their states{each}"


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


@click.command()
@click.argument("recording", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The copy to write (.psr).")
@click.option("--force", is_flag=True, help="Overwrite the output if it exists.")
def snapshot(recording: str, output: str, force: bool) -> None:
    """A closed copy of a recording that is still being written (a flight recording, or any
    other), as it stands now; the recording goes on.

    \b
      psrec record -o last.psr --keep 10m 1234 &
      psrec snapshot last.psr -o incident.psr
    """
    from psrec.format import ask_to_seal, writers_of
    from psrec.format.writer import snapshot as copy

    if os.path.abspath(recording) == os.path.abspath(output):
        raise CliUsageError(f"the snapshot of {recording} cannot be written over it",
                            help="give the copy another name with -o")
    # A recorder still writing the file is asked to seal the chunk it is filling, so that
    # the copy holds the samples up to now (spec section 7.3).
    writers = writers_of(recording)
    if writers:
        ask_to_seal(recording, writers)
    chunks, samples = copy(recording, output, force, running=bool(writers))
    with open_recording(output) as snap:
        part = snap.metadata.get("part") or {}
    left = part.get("left_out_s")
    how = ""
    if writers:
        how = "; the recording goes on" + (
            f": the {left:.3f} s from its last pass copied to the copy are not in it"
            if isinstance(left, float) else "")
    click.echo(f"psrec: wrote {output} ({samples:,} samples in {chunks:,} chunks{how})",
               err=True)


# -- report, export and diff ------------------------------------------------------------------

def _load(recording: str | list[str], view: Any, reporter: Reporter) -> Any:
    from psrec.analyzer.profile import Profile

    return Profile.load(
        recording, view, slice_seconds=reporter.slice_seconds(),
        slice_count=reporter.slice_count, also=reporter.also(view.mode),
        timelines=reporter.needs_timelines,
        more_timelines=reporter.more_timelines(view.mode),
        warn=lambda w: click.echo(f"psrec: warning: {w}", err=True),
    )


def _listed(names: list[str]) -> str:
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]


def _chosen_format(given: list[tuple[str, str]], default: str) -> str:
    """The one format named by --format and the format flags, as (what was given, format)
    pairs; naming two formats is wrong usage."""
    formats = list(dict.fromkeys(fmt for _, fmt in given))
    if len(formats) > 1:
        both = _listed([what for what, _ in given])
        raise CliUsageError(f"{both} cannot be given together: choose one output")
    return formats[0] if formats else default


def _refuse_unread(ctx: click.Context, command: OutputCommand, chosen: type[Reporter],
                   spelled: str, output: str | None) -> None:
    """Wrong usage: an option given on the command line that the chosen output would leave
    unread (options left at their defaults are not looked at). A command that lets unread
    options pass (OutputCommand.refuses_unread) still refuses those declared with a refusal of
    their own (Option.refusal), which come last."""
    from click.core import ParameterSource

    def given(param: str) -> bool:
        return ctx.get_parameter_source(param) not in (None, ParameterSource.DEFAULT,
                                                       ParameterSource.DEFAULT_MAP)

    outputs = outputs_of(command.name or "")
    read = [opt for opt in command_options(outputs)
            if any(opt in cls.reads for cls in outputs.values())]
    if command.refuses_unread:
        # The options some outputs read, then --by and --weights, which pprof and the Firefox
        # Profiler leave to their own viewers.
        checks = [(opt.name, opt.param, [n for n, cls in outputs.items() if opt in cls.reads])
                  for opt in read if opt.refusal is None]
        grouping = [n for n, cls in outputs.items() if cls.groups]
        checks += [("--by", "by", grouping), ("--weights", "weights", grouping)]
        for option, param, readers in checks:
            if given(param) and chosen.name not in readers:
                raise CliUsageError(
                    f"{option} does nothing with {spelled}: only the {_listed(readers)} "
                    f"output{'s read' if len(readers) > 1 else ' reads'} it",
                    help=f"leave out {option}, or choose "
                         f"{'one of those' if len(readers) > 1 else 'it'} with --format")
        if given("force") and (output == "-" or (output is None and chosen.suffix is None)):
            raise CliUsageError(f"--force does nothing here: {spelled} goes to stdout, where "
                                "there is no file to overwrite",
                                help="leave out --force, or name a file with -o")
    for opt in read:
        if opt.refusal is not None and given(opt.param) and opt not in chosen.reads:
            message, help = opt.refusal
            raise CliUsageError(message.format(spelled=spelled), help=help.format(spelled=spelled))


def _value(opt: Option, value: Any, recording: str | list[str]) -> Any:
    """An option's value as the reporter reads it: a length in seconds."""
    if opt.length is None or value is None:
        return value
    return slice_length(opt.name, value, " or ".join(opt.length.examples), recording,
                        opt.length.whole, in_ns=opt.length.in_ns)


def _write(params: dict[str, Any]) -> None:
    """What report, export and diff do: the output named by --format or a flag (or the
    command's default), with the options it reads, written from the recording (for an output
    that compares, from NEW and BASE) under the view the view options ask for."""
    from psrec.analyzer.registry import write_output

    ctx = click.get_current_context()
    command = ctx.command
    assert isinstance(command, OutputCommand)
    outputs = outputs_of(command.name or "")
    *bases, named = [params.pop(r) for r in ("base", "new", "recording") if r in params]
    base = bases[0] if bases else None
    recordings = list(named) if isinstance(named, tuple) else [named]
    output, force, fmt = params.pop("output"), params.pop("force"), params.pop("fmt", None)
    flags = {cls.flag.param: (cls.flag, name) for name, cls in outputs.items() if cls.flag}
    given = [(f"--format {fmt}", fmt)] if fmt is not None else []
    given += [(flag.name, name) for param, (flag, name) in flags.items()
              if params[param] not in (None, False)]
    name = _chosen_format(given, command.default)
    chosen = outputs[name]
    spelled = given[0][0] if given else f"the default format ({name})"
    _refuse_unread(ctx, command, chosen, spelled, output)
    options = {opt.param: params.pop(opt.param) for opt in command_options(outputs)}
    view_args = params  # what is left: the view options
    if chosen.many:
        _write_many(ctx, chosen, spelled, recordings, view_args, output, force)
        return
    # Several recordings (or a folder of them) are read as one.
    recording: str | list[str] = recordings[0] if len(recordings) == 1 else recordings
    flag = chosen.flag
    if flag is not None and flag.length is not None and options[flag.param] is None:
        # Chosen with --format, without the flag that gives its value.
        raise CliUsageError(f"--format {name} needs {flag.length.what}",
                            help=f"give it with {flag.name} {flag.metavar}, e.g. "
                                 f"{flag.name} {flag.length.examples[0]}")
    # The options it reads, and the value of a flag that gives one (--slices DURATION).
    taken = (flag, *chosen.reads) if flag is not None and not flag.is_flag else chosen.reads
    reporter = chosen(**{opt.param: _value(opt, options[opt.param], recording)
                         for opt in taken})
    view = view_of(view_args, chosen.default_weights)
    # A command whose outputs compare takes BASE and NEW (OutputCommand).
    base_profile = _load(base, view, reporter) if base is not None else None
    profile = _load(recording, view, reporter)
    if name == "pprof" and reporter.options.get("window"):
        # pprof's --window: one profile per window, each to a file of its own (BASE.0.pb.gz,
        # BASE.1.pb.gz, ...), where every other output writes one.
        from psrec.analyzer.pprof import write_windows

        written = write_windows(profile, output, force, reporter.options)
        click.echo(f"psrec: wrote {len(written)} profiles: {written[0]} ... {written[-1]}"
                   if len(written) > 1 else f"psrec: wrote {written[0]}", err=True)
        return
    if base is not None and output is not None and output != "-" and \
            os.path.isfile(output) and os.path.exists(base) and os.path.samefile(output, base):
        raise PsrecError(f"{output} is the base recording itself",
                         help="choose another name with -o")
    said = len(profile.warnings)
    where, summary = write_output(reporter, profile, output, force, base=base_profile)
    for w in profile.warnings[said:]:  # what the output found as it was written
        click.echo(f"psrec: warning: {w}", err=True)
    if where != "<stdout>":
        click.echo(f"psrec: wrote {where}" + (f" ({summary})" if summary else ""), err=True)


def _write_many(ctx: click.Context, chosen: type[Reporter], spelled: str,
                recordings: list[str], view_args: dict[str, Any], output: str | None,
                force: bool) -> None:
    """An output of every sample of several recordings (Reporter.many): a view would leave
    samples out, so its options are refused rather than ignored."""
    from click.core import ParameterSource

    for param in view_args:
        if ctx.get_parameter_source(param) not in (None, ParameterSource.DEFAULT):
            option = next(p for p in ctx.command.params if p.name == param).opts[-1]
            raise CliUsageError(f"{option} does nothing with {spelled}: it writes every sample",
                                help="leave it out, and select in the engine that reads it")
    if output is None or output == "-":
        if output == "-":
            raise CliUsageError(f"{spelled} writes a folder, not standard output",
                                help="give a folder name with -o")
        stem = recordings[0].rstrip("/")
        output = (stem[:-4] if stem.endswith(".psr") else stem) + f".{chosen.name}"
    summary = chosen().write_folder(recordings, output, force)
    click.echo(f"psrec: wrote {output} ({summary})", err=True)


@click.command(cls=OutputCommand, default="table")
def report(**params: Any) -> None:
    """Where the time went: a table of functions, or pstats, collapsed stacks, time slices,
    an HTML page.

    Sample columns count stacks seen, not calls; times are estimated from the samples.
    """
    _write(params)


@click.command(cls=OutputCommand, default="speedscope")
def export(**params: Any) -> None:
    """Export a recording for another tool (speedscope, Firefox Profiler, pprof), or
    recordings for an engine that reads many (Parquet: DuckDB, Dask, Spark)."""
    _write(params)


@click.command(cls=OutputCommand, default="diff", format_option=False, refuses_unread=False)
def diff(**params: Any) -> None:
    """Functions whose share of the time (with --absolute, whose time) changed most from BASE
    to NEW, under one view.

    The view options (mode, threads, processes, window, weights, by) apply to both
    recordings; a window counts from each recording's own start.
    """
    _write(params)


# The commands psrec.cli puts into the psrec command (it adds `dump`, which dump_file serves).
COMMANDS = (info, report, export, diff, snapshot)
