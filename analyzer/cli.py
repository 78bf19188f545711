"""The psrec command line."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from psrec import __version__
from psrec.format import PsrecError, open_recording

F = TypeVar("F", bound=Callable[..., Any])


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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="psrec")
@click.option("-v", "--verbose", is_flag=True, help="Show tracebacks and more detail.")
def main(verbose: bool) -> None:
    """psrec: record a running Python process once, ask questions of the recording offline."""
    _State.verbose = verbose


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
            ("state", "closed cleanly" if d["closed_cleanly"] else "recovered (not closed cleanly)"),
            ("created", d["created"]),
            ("target", f"pid {md.get('pid', '?')}: {' '.join(md.get('command') or []) or '?'}"),
            ("python", str(md.get("python_version", "?"))),
            ("host", str(md.get("hostname", "?"))),
            ("psrec", str(md.get("psrec_version", "?"))),
            ("requested", f"{md.get('rate_hz', '?')} Hz"),
            ("duration", f"{d['duration_s']:.3f} s"),
            ("passes", f"{d['passes']:,} (achieved {d['achieved_rate_hz']:,.1f} Hz)"),
            ("samples", f"{d['samples']:,} thread-samples"),
            ("errors", f"{d['sample_errors']:,} sample errors, "
                       f"{d['missed_deadlines']:,} missed deadlines"),
            ("threads", f"{d['threads']}: {', '.join(d['thread_names'][:12])}"
                        + (" ..." if len(d["thread_names"]) > 12 else "")),
            ("code", f"{d['functions']:,} functions, {d['frames']:,} frames"),
            ("size", f"{d['bytes_per_sample']:.3f} bytes per thread-sample"
                     if d["bytes_per_sample"] is not None else "n/a"),
            ("chunks", f"{d['chunks']} ({d['corrupt_chunks']} damaged)"),
        ]
        for k, v in rows:
            click.echo(f"{k:>10}  {v}")
    if d["samples"] == 0:
        raise EmptyRecordingError(f"{recording}: the recording holds no samples")


@main.command()
@click.argument("target")
@handle_errors
def dump(target: str) -> None:
    """Dump a recording (a file) chunk by chunk and record by record, or, given a PID, print
    every thread's current Python stack."""
    import os

    if not os.path.exists(target) and target.isdigit():
        from psrec.recorder.cli import dump_pid

        dump_pid(int(target))
        return
    from psrec.format.describe import dump_lines

    with open_recording(target) as rec:
        for line in dump_lines(rec):
            click.echo(line)
        warn_all(rec.warnings)
