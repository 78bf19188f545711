"""The one small interface every reporter and exporter implements, and their registry.

A reporter turns a Profile into bytes or text on one output. It says what it needs from the
Profile (time slices, per-thread timelines), whether its output is binary, and the suffix of its
default output file (None: it writes to stdout unless given -o).
"""

from __future__ import annotations

import io
import os
import sys
from typing import IO, Any, ClassVar

from psrec.format import PsrecError
from psrec.format.writer import Output, write_failed

from .profile import Profile

__all__ = ["Reporter", "default_output", "get", "names", "register", "write_output"]


class Reporter:
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    command: ClassVar[str] = "report"  # the psrec command that offers it: report or export
    suffix: ClassVar[str | None] = None  # default output: <input stem><suffix>; None: stdout
    binary: ClassVar[bool] = False
    needs_timelines: ClassVar[bool] = False
    slice_count: ClassVar[int] = 0  # > 0: about this many slices across the selected span

    def __init__(self, **options: Any) -> None:
        self.options = options

    def slice_seconds(self) -> float:
        """Time slices the Profile must keep (0: none)."""
        return 0.0

    def also(self, profile_mode: str) -> tuple[str, ...]:
        """Status filters (names of analyzer.view.STATES) whose sums the Profile must keep
        besides its own mode's (Profile.also)."""
        return ()

    def more_timelines(self, profile_mode: str) -> dict[str, dict[str, Any]]:
        """Named timelines the Profile must keep besides its own (Profile.more_timelines):
        name -> query fields (status filter, run options), read in the same decode."""
        return {}

    def write(self, profile: Profile, out: IO[Any]) -> str | None:
        """Writes the output; returns a short summary for stderr, or None."""
        raise NotImplementedError


_REGISTRY: dict[str, type[Reporter]] = {}


def register(cls: type[Reporter]) -> type[Reporter]:
    if not cls.name or cls.name in _REGISTRY:
        raise ValueError(f"reporter name {cls.name!r} is empty or taken")
    _REGISTRY[cls.name] = cls
    return cls


def get(name: str) -> type[Reporter]:
    _load_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise PsrecError(f"no reporter named {name!r}",
                         help=f"known: {', '.join(sorted(_REGISTRY))}") from None


def names() -> list[str]:
    _load_builtins()
    return sorted(_REGISTRY)


def _load_builtins() -> None:
    from . import diff, firefox, page, pprof, reporters, speedscope  # noqa: F401  (registering is a side effect)


def default_output(recording: str, suffix: str) -> str:
    """run.psr -> run<suffix>, next to the input."""
    base = recording.removesuffix(".psr")
    return base + suffix


def write_output(
    reporter: Reporter, profile: Profile, output: str | None, force: bool
) -> tuple[str, str | None]:
    """Runs the reporter into its output; returns (where it went, summary).

    Refuses to overwrite an existing file unless force; a failed write leaves no partial file.
    """
    if output is None and reporter.suffix is not None:
        output = default_output(profile.path, reporter.suffix)
    if output is None or output == "-":
        if reporter.binary and sys.stdout.isatty():
            raise PsrecError(
                f"{reporter.name} output is binary and stdout is a terminal",
                help="give a file name with -o",
            )
        try:
            if reporter.binary:
                summary = reporter.write(profile, sys.stdout.buffer)
                sys.stdout.buffer.flush()
            else:
                summary = reporter.write(profile, sys.stdout)
                sys.stdout.flush()
        except OSError as exc:
            failed = write_failed("standard output", exc)
            if failed is None:
                raise
            raise failed from None
        return "<stdout>", summary
    if os.path.abspath(output) == os.path.abspath(profile.path):
        raise PsrecError(f"{output} is the recording itself", help="choose another name with -o")
    out = Output(output, force)
    try:
        if reporter.binary:
            summary = reporter.write(profile, out.file)
        else:
            text = io.TextIOWrapper(out.file, encoding="utf-8", newline="\n")
            summary = reporter.write(profile, text)
            text.flush()
            text.detach()
        out.commit()
    except BaseException as exc:
        out.discard()  # a file asked for is left as it was: no partial output at its name
        failed = write_failed(output, exc)
        if failed is None:
            raise
        raise failed from None
    return output, summary
