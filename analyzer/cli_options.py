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

from typing import TYPE_CHECKING, Any

import click

from .modes import MODE_TABLE

if TYPE_CHECKING:
    from .registry import Option, Reporter

__all__ = ["OutputCommand", "click_option", "command_options", "mode_option", "outputs_of"]


def click_option(opt: Option) -> click.Option:
    """The click option of a declared one; its value is the parameter opt.param."""
    decls = [*opt.flags, opt.param]
    if opt.choices:
        return click.Option(decls, type=click.Choice(list(opt.choices)), default=opt.default,
                            show_default=opt.default is not None, help=opt.help)
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


def _view_options() -> list[click.Option]:
    """The view options every command that writes an output shares, and -o and --force."""
    decls, attrs = mode_option()
    return [
        click.Option(decls, **attrs),
        click.Option(["--thread", "threads"], multiple=True, metavar="ID|NAME",
                     help="Only this thread (OS or Python thread id, or name); repeatable."),
        click.Option(["--task", "task_specs"], multiple=True, metavar="NAME|COROUTINE|ID",
                     help="Only samples of threads running this asyncio task (by name, by its "
                          "coroutine's function: every task made from it, or by id or "
                          "address; psrec report --tasks lists them); repeatable."),
        click.Option(["--pid", "pids"], multiple=True, type=int, metavar="PID",
                     help="Only this process (psrec info lists them); repeatable."),
        click.Option(["--process", "processes"], multiple=True, metavar="TEXT",
                     help="Only processes whose command line holds TEXT; repeatable."),
        click.Option(["--host", "hosts"], multiple=True, metavar="NAME",
                     help="Several recordings read as one: only those recorded on this host "
                          "(psrec info shows a recording's host); repeatable."),
        click.Option(["--recording", "recording_names"], multiple=True, metavar="NAME",
                     help="Several recordings read as one: only this one (its file name or "
                          "path, .psr optional); repeatable."),
        click.Option(["--from", "start"], metavar="T",
                     help="Window start: seconds from the start of the recording (of the "
                          "earliest, for several read as one) (12.5, 500ms) "
                          "or a wall-clock time (14:02:10, 2024-05-01T14:02:10). Inclusive."),
        click.Option(["--to", "end"], metavar="T", help="Window end, like --from. Exclusive."),
        click.Option(["--weights"], type=click.Choice(["time", "count"]), default=None,
                     help="time: each sample weighs the time it stands for (default); count: "
                          "raw sample counts (the default for --collapsed)."),
        click.Option(["--by"], type=click.Choice(["function", "line"]), default="function",
                     show_default=True, help="Group by function or by line."),
        click.Option(["--native-frames", "native"],
                     type=click.Choice(["mixed", "all", "python"]), default="mixed",
                     show_default=True,
                     help="A recording made with --native: mixed shows native frames "
                          "interleaved with the Python ones, the interpreter's evaluation "
                          "loop and call machinery left out; all keeps those too; python "
                          "shows the Python frames only."),
        click.Option(["--logical"], is_flag=True,
                     help="asyncio tasks' logical stacks: a sample of a task shows the task's "
                          "frames under the tasks that await it (each named by a <task> "
                          "frame, with its coroutines down to its await), as asyncio pstree "
                          "draws them, instead of under the event loop's frames."),
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

