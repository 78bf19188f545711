"""The one small interface every reporter and exporter implements, and their registry.

A reporter turns a Profile into bytes or text on one output. It says what it needs from the
Profile (time slices, per-thread timelines), whether its output is binary, the suffix of its
default output file (None: it writes to stdout unless given -o), and how the command line
offers it: the command, the flag that chooses it, the options it reads (``Option``), and
whether it compares two recordings. The psrec commands are built from these declarations
(``psrec.analyzer.cli_options``).

Registering is a side effect of defining an output; the outputs psrec comes with are imported,
and so registered, by ``psrec.analyzer.outputs``, which this module does not import (each
output module imports this one).
"""

from __future__ import annotations

import io
import sys
from dataclasses import dataclass
from typing import IO, Any, ClassVar

from psrec.format import PsrecError
from psrec.format.writer import Output, write_failed

from .profile import Profile

__all__ = ["Length", "Option", "Reporter", "default_output", "get", "register", "registered",
           "unregister", "write_output"]


@dataclass(frozen=True)
class Length:
    """The value of an option that is a length of time (`1s`, `250ms`): the command line reads
    it as seconds, and refuses a length that the recording's 64-bit tick counts (in_ns: the
    output's 64-bit nanosecond counts) cannot hold."""

    examples: tuple[str, ...]  # lengths the help of a wrong one suggests: ("1s", "250ms")
    whole: str  # what a length longer than the recording makes: "a single slice"
    in_ns: bool = False
    # What `--format NAME` lacks when the output's flag gives this value and is left out.
    what: str = ""


@dataclass(frozen=True)
class Option:
    """An option of a psrec command that an output reads (Reporter.reads), or the flag that
    chooses an output (Reporter.flag); the command line builds its click option from this.

    With neither choices, minimum nor metavar it is a flag, on or off. Its value reaches the
    reporter as ``options[keyword]``. Options with equal declarations are one option of the
    command, read by every output that declares it.
    """

    flags: tuple[str, ...]  # as spelled on the command line, the long one last: ("-l", "--limit")
    help: str
    keyword: str = ""  # the reporter's name for the value; default: from the long flag
    choices: tuple[str, ...] = ()  # one of these
    minimum: int | None = None  # an integer of at least this
    default: str | int | None = None  # shown in the help when given
    metavar: str | None = None  # a value of another kind (text), shown so in the help
    percent: bool = False  # a share in percent, 0 to 100 (a float)
    length: Length | None = None  # the value is a length of time, read as seconds
    # (message, help) that refuse the option with an output that does not read it, {spelled}
    # naming how that output was chosen. None: the command's own wording, where it refuses
    # options an output leaves unread (report and export do; diff lets them pass).
    refusal: tuple[str, str] | None = None

    @property
    def name(self) -> str:
        return self.flags[-1]

    @property
    def param(self) -> str:
        return self.keyword or self.name.lstrip("-").replace("-", "_")

    @property
    def is_flag(self) -> bool:
        return not self.choices and self.minimum is None and self.metavar is None


class Reporter:
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    command: ClassVar[str] = "report"  # the psrec command that offers it: report, export, diff
    # The flag that chooses it besides `--format NAME` (None: none); a flag that takes a value
    # (--slices DURATION) gives the reporter that value too, as the flag's keyword.
    flag: ClassVar[Option | None] = None
    reads: ClassVar[tuple[Option, ...]] = ()  # the options of its command it reads
    # Whether it reads --by and --weights (pprof and the Firefox Profiler keep every sample's
    # line and both its count and its time, for their own viewers to group and weigh).
    groups: ClassVar[bool] = True
    default_weights: ClassVar[str] = "time"  # the weights when --weights is not given
    # Whether it compares a base recording with a new one: compare(base, profile, out), not
    # write(profile, out). Every output of a command does, or none.
    compares: ClassVar[bool] = False
    suffix: ClassVar[str | None] = None  # default output: <input stem><suffix>; None: stdout
    binary: ClassVar[bool] = False
    needs_timelines: ClassVar[bool] = False
    slice_count: ClassVar[int] = 0  # > 0: about this many slices across the selected span
    # Whether it reads every sample of one recording or several itself, into a folder
    # (write_folder), rather than a Profile of one under a view.
    many: ClassVar[bool] = False

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

    def write_folder(self, recordings: list[str], out_dir: str, force: bool) -> str:
        """An output that reads many (Reporter.many): writes every sample of the recordings
        into out_dir; returns a short summary for stderr."""
        raise NotImplementedError

    def compare(self, base: Profile, profile: Profile, out: IO[Any]) -> str | None:
        """Writes the output of an output that compares (compares = True): base is the base
        recording's Profile, profile the new one's, under the same view."""
        raise NotImplementedError


_REGISTRY: dict[str, type[Reporter]] = {}


def register(cls: type[Reporter]) -> type[Reporter]:
    if not cls.name or cls.name in _REGISTRY:
        raise ValueError(f"reporter name {cls.name!r} is empty or taken")
    _REGISTRY[cls.name] = cls
    return cls


def unregister(name: str) -> None:
    """Takes an output out of the registry (a test's, or a plugin's)."""
    del _REGISTRY[name]


def registered() -> dict[str, type[Reporter]]:
    """Every output registered so far, name -> class, in the order they were registered
    (``psrec.analyzer.outputs`` registers the built-in ones)."""
    return dict(_REGISTRY)


def get(name: str) -> type[Reporter]:
    """The output registered under name, among those registered so far (see registered())."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise PsrecError(f"no reporter named {name!r}",
                         help=f"known: {', '.join(sorted(_REGISTRY))}") from None


def default_output(recording: str, suffix: str) -> str:
    """run.psr -> run<suffix>, next to the input."""
    base = recording.removesuffix(".psr")
    return base + suffix


def write_output(
    reporter: Reporter, profile: Profile, output: str | None, force: bool,
    base: Profile | None = None,
) -> tuple[str, str | None]:
    """Runs the reporter into its output; returns (where it went, summary). An output that
    compares (Reporter.compares) is given the base recording's Profile too.

    Refuses to overwrite an existing file unless force; a failed write leaves no partial file.
    """

    def run(out: IO[Any]) -> str | None:
        if reporter.compares:
            if base is None:
                raise TypeError(f"{reporter.name} compares two recordings: give a base")
            return reporter.compare(base, profile, out)
        return reporter.write(profile, out)

    if output is None and reporter.suffix is not None:
        output = default_output(profile.output_base, reporter.suffix)
    if output is None or output == "-":
        if reporter.binary and sys.stdout.isatty():
            raise PsrecError(
                f"{reporter.name} output is binary and stdout is a terminal",
                help="give a file name with -o",
            )
        try:
            if reporter.binary:
                summary = run(sys.stdout.buffer)
                sys.stdout.buffer.flush()
            else:
                summary = run(sys.stdout)
                sys.stdout.flush()
        except OSError as exc:
            failed = write_failed("standard output", exc)
            if failed is None:
                raise
            raise failed from None
        return "<stdout>", summary
    if profile.reads(output):
        raise PsrecError(f"{output} is the recording itself", help="choose another name with -o")
    out = Output(output, force)
    try:
        if reporter.binary:
            summary = run(out.file)
        else:
            text = io.TextIOWrapper(out.file, encoding="utf-8", newline="\n")
            summary = run(text)
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
