"""The options of the commands that write an output (`psrec report`, `export`, `diff`), built
from the output registry and the list of view modes.

A command offers the outputs registered for it (Reporter.command), and takes: its recordings
(several files or folders, read as one; BASE and NEW, each a file or a folder, where its outputs
compare); `--format NAME` where it has one; each output's flag
and the options it reads (psrec.analyzer.registry.Option), each output's flag followed by those
of its options not listed yet, in the order ``psrec.analyzer.outputs.offered`` gives; then the
view options every such command shares (--mode's choices are analyzer.modes.MODE_TABLE), -o
and --force.

A command builds them when click first asks for them (to parse its command line, or show its
help), so that a psrec command line that writes no output loads no output module; it builds
them again when the outputs registered for it change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click
from psrec.format.mixed_stacks import NATIVE_VIEWS

from .modes import GROUPINGS, MODE_TABLE, WEIGHTS

if TYPE_CHECKING:
    from .registry import Option, Reporter
    from .view import View

__all__ = ["VIEW_OPTIONS", "OutputCommand", "ViewOption", "click_option", "command_options",
           "mode_option", "outputs_of", "view_of"]


def click_option(opt: Option) -> click.Option:
    """The click option of a declared one; its value is the parameter opt.param."""
    decls = [*opt.flags, opt.param]
    if opt.choices:
        return click.Option(decls, type=click.Choice(list(opt.choices)), default=opt.default,
                            show_default=opt.default is not None, help=opt.help)
    if opt.percent:
        return click.Option(decls, type=click.FloatRange(0, 100), metavar="PCT",
                            default=opt.default, show_default=opt.default is not None,
                            help=opt.help)
    if opt.minimum is not None:
        return click.Option(decls, type=click.IntRange(min=opt.minimum), default=opt.default,
                            show_default=opt.default is not None, help=opt.help)
    if opt.metavar is not None:
        return click.Option(decls, metavar=opt.metavar, help=opt.help)
    return click.Option(decls, is_flag=True, help=opt.help)


def command_options(outputs: dict[str, type[Reporter]]) -> list[Option]:
    """A command's declared options in the order its help lists them: each output's flag, then
    those of the options it reads that are not listed yet."""
    listed: dict[str, Option] = {}
    for cls in outputs.values():
        for opt in (cls.flag, *cls.reads) if cls.flag else cls.reads:
            if listed.setdefault(opt.param, opt) != opt:
                raise ValueError(f"{cls.name} declares {opt.name} ({opt.param}) unlike another "
                                 f"output of `psrec {cls.command}`: {listed[opt.param]}")
    return list(listed.values())


def mode_option(help: str | None = None) -> tuple[list[str], dict[str, Any]]:
    """--mode, one of the view modes (modes.MODE_TABLE; the first is the default): its
    declarations and attributes, for click.Option or click.option. Its help says what each
    mode keeps, unless given."""
    names = [m.name for m in MODE_TABLE]
    if help is None:
        help = "; ".join(m.option_words for m in MODE_TABLE) + "."
    return ["--mode"], {"type": click.Choice(names), "default": names[0], "show_default": True,
                        "help": help}


@dataclass(frozen=True)
class ViewOption:
    """One option of the view every command that writes an output shares: how the command
    line spells it, the View field it fills (analyzer.view.View), and its click declaration.
    A repeatable option fills its field with every value given, in order."""

    flags: tuple[str, ...]
    field: str  # the View's field
    help: str
    # Under which heading the help lists it: "view" (how the samples are shown) or
    # "selection" (which samples are read).
    heading: str = "view"
    param: str = ""  # the click parameter, where it is not the field's name
    metavar: str | None = None
    repeatable: bool = False
    type: Any = None  # click's type: int, or a click.Choice
    default: Any = None
    show_default: bool = False
    is_flag: bool = False

    @property
    def name(self) -> str:
        return self.param or self.field

    def click_option(self) -> click.Option:
        attrs: dict[str, Any] = {"help": self.help}
        if self.is_flag:
            attrs["is_flag"] = True
        if self.repeatable:
            attrs["multiple"] = True
        if self.type is not None:
            attrs["type"] = self.type
        if self.metavar is not None:
            attrs["metavar"] = self.metavar
        if self.default is not None:
            attrs["default"] = self.default
        if self.show_default:
            attrs["show_default"] = True
        return click.Option([*self.flags, self.name], **attrs)

    def value(self, given: Any) -> Any:
        """The View field's value of what the command line gave."""
        return tuple(given) if self.repeatable else given


_MODE_DECLS, _MODE_ATTRS = mode_option()

# The view options, in the order the commands' help lists them.
VIEW_OPTIONS: tuple[ViewOption, ...] = (
    ViewOption(("--mode",), "mode", _MODE_ATTRS["help"], type=_MODE_ATTRS["type"],
               default=_MODE_ATTRS["default"], show_default=True),
    ViewOption(("--thread",), "threads", "Only this thread (OS or Python thread id, or name); "
               "repeatable.", metavar="ID|NAME", repeatable=True, heading="selection"),
    ViewOption(("--task",), "tasks", "Only samples of threads running this asyncio task (by "
               "name, by its coroutine's function: every task made from it, or by id or "
               "address; psrec report --tasks lists them); repeatable.",
               param="task_specs", metavar="NAME|COROUTINE|ID", repeatable=True,
               heading="selection"),
    ViewOption(("--pid",), "pids", "Only this process (psrec info lists them); repeatable.",
               metavar="PID", repeatable=True, type=int, heading="selection"),
    ViewOption(("--process",), "processes", "Only processes whose command line holds TEXT; "
               "repeatable.", metavar="TEXT", repeatable=True, heading="selection"),
    ViewOption(("--host",), "hosts", "Several recordings read as one: only those recorded on "
               "this host (psrec info shows a recording's host); repeatable.", metavar="NAME",
               repeatable=True, heading="selection"),
    ViewOption(("--recording",), "recordings", "Several recordings read as one: only this one "
               "(its file name or path, .psr optional); repeatable.", param="recording_names",
               metavar="NAME", repeatable=True, heading="selection"),
    ViewOption(("--from",), "start", "Window start: seconds from the start of the recording "
               "(of the earliest, for several read as one) (12.5, 500ms) or a wall-clock time "
               "(14:02:10, 2024-05-01T14:02:10). Inclusive.", metavar="T", heading="selection"),
    ViewOption(("--to",), "end", "Window end, like --from. Exclusive.", metavar="T",
               heading="selection"),
    # None: the output's default weights (Reporter.default_weights)
    ViewOption(("--weights",), "weights", "time: each sample weighs the time it stands for "
               "(default); count: raw sample counts (the default for --collapsed).",
               type=click.Choice(list(WEIGHTS))),
    ViewOption(("--by",), "by", "Group by function or by line.",
               type=click.Choice(list(GROUPINGS)), default=GROUPINGS[0], show_default=True),
    ViewOption(("--native-frames",), "native", "A recording made with --native: mixed shows "
               "native frames interleaved with the Python ones, the interpreter's evaluation "
               "loop and call machinery left out; all keeps those too; python shows the Python "
               "frames only.", type=click.Choice(list(NATIVE_VIEWS)), default=NATIVE_VIEWS[0],
               show_default=True),
    ViewOption(("--logical",), "logical", "asyncio tasks' logical stacks: a sample of a task "
               "shows the task's frames under the tasks that await it (each named by a <task> "
               "frame, with its coroutines down to its await), as asyncio pstree draws them, "
               "instead of under the event loop's frames.", is_flag=True),
)


def view_of(params: dict[str, Any], default_weights: str) -> View:
    """The View the view options' values ask for (by click parameter), with default_weights
    where --weights is not given."""
    from .view import View

    fields = {o.field: o.value(params[o.name]) for o in VIEW_OPTIONS}
    fields["weights"] = fields["weights"] or default_weights
    return View(**fields)


def _view_options() -> list[click.Option]:
    """The view options every command that writes an output shares, and -o and --force."""
    return [
        *(o.click_option() for o in VIEW_OPTIONS),
        # A folder is refused by the outputs that write a file, with their own words.
        click.Option(["-o", "--output"], type=click.Path(),
                     help="Output file ('-' for stdout), or folder."),
        click.Option(["--force"], is_flag=True, help="Overwrite an existing output file."),
    ]


def _format_option(outputs: dict[str, type[Reporter]], default: str) -> click.Option:
    """--format NAME, whose help lists each output with its description."""
    listed = "; ".join(f"{name}: {outputs[name].description}" for name in sorted(outputs))
    return click.Option(["--format", "fmt"], type=click.Choice(sorted(outputs)), default=None,
                        help=f"Output format (default: {default}; each has a flag of its own "
                             f"too): {listed}.")


def outputs_of(command: str) -> dict[str, type[Reporter]]:
    """The outputs registered for a command (loading the built-in ones)."""
    from .outputs import offered as found

    return found(command)


class OutputCommand(click.Command):
    """A command that writes one of the outputs registered for it: default is the one it
    writes when none is named, format_option whether it takes --format NAME, refuses_unread
    whether it refuses an option the chosen output would leave unread (and --force where there
    is no file; an option declared with a refusal of its own is refused either way).

    Its parameters are built from the registry when click first asks for them (give it
    none): ``@click.command(cls=OutputCommand, default="table")``."""

    def __init__(self, name: str, *, default: str, format_option: bool = True,
                 refuses_unread: bool = True, **attrs: Any) -> None:
        self.default = default
        self.format_option = format_option
        self.refuses_unread = refuses_unread
        self._built: list[click.Parameter] = []
        self._built_for: tuple[type[Reporter], ...] | None = None
        super().__init__(name, **attrs)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The options under three headings: the output (which one, its options, where it
        goes), the view (how the samples are shown) and the selection (which are read)."""
        selection = {o.name for o in VIEW_OPTIONS if o.heading == "selection"}
        view = {o.name for o in VIEW_OPTIONS if o.heading == "view"}
        sections: dict[str, list[tuple[str, str]]] = {
            "Output options": [], "View options": [], "Selection options": [], "Options": []}
        help_option = self.get_help_option(ctx)
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            title = ("Selection options" if param.name in selection else
                     "View options" if param.name in view else
                     "Options" if param is help_option else "Output options")
            sections[title].append(record)
        for title, records in sections.items():
            if records:
                with formatter.section(title):
                    formatter.write_dl(records)

    @property
    def params(self) -> list[click.Parameter]:
        outputs = outputs_of(str(self.name))
        if tuple(outputs.values()) != self._built_for:
            # In place: click adds its help option to this list for a moment to build it.
            self._built[:] = self._build(outputs)
            self._built_for = tuple(outputs.values())
        return self._built

    @params.setter
    def params(self, value: list[click.Parameter]) -> None:
        if value:
            raise TypeError("an output command's parameters come from the output registry")

    def _build(self, outputs: dict[str, type[Reporter]]) -> list[click.Parameter]:
        compares = {cls.compares for cls in outputs.values()}
        if len(compares) != 1 or self.default not in outputs:
            raise ValueError(f"psrec {self.name}: its outputs ({', '.join(outputs)}) must all "
                             f"compare recordings or none, and include {self.default}")
        if compares.pop():
            params: list[click.Parameter] = [click.Argument([r], type=click.Path(dir_okay=True))
                                             for r in ("base", "new")]
        else:  # one recording, or several read as one (files, or folders of them)
            params = [click.Argument(["recording"], type=click.Path(dir_okay=True), nargs=-1,
                                     required=True)]
        if self.format_option:
            params.append(_format_option(outputs, self.default))
        params += [click_option(opt) for opt in command_options(outputs)]
        return params + _view_options()

