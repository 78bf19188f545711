"""The outputs psrec comes with, registered, and the lookups the command line makes.

Importing this module imports every built-in output module; each registers its reporters as it
is defined (``psrec.analyzer.registry.register``). The arrows run one way: the output modules
import the registry, this module imports both, and the command line imports this module (when a
command that writes an output parses its command line or shows its help, not before).
"""

from __future__ import annotations

from . import diff, firefox, page, parquet, pprof, reporters, speedscope, task_report
from .registry import Reporter, registered
from .registry import get as _get

__all__ = ["BUILTIN", "get", "names", "offered"]

# The built-in output modules, in the order a command lists its outputs' flags and options.
BUILTIN = (reporters, task_report, page, speedscope, firefox, pprof, parquet, diff)
_ORDER = {m.__name__: i for i, m in enumerate(BUILTIN)}


def get(name: str) -> type[Reporter]:
    """The output registered under name (a PsrecError that lists the known ones otherwise)."""
    return _get(name)


def names() -> list[str]:
    return sorted(registered())


def offered(command: str) -> dict[str, type[Reporter]]:
    """The outputs a psrec command offers, name -> class: the built-in ones in BUILTIN's order
    (whichever output module happened to be imported first), then any registered later, in the
    order they were."""
    found = [cls for cls in registered().values() if cls.command == command]
    # sorted() keeps the registration order within a module and among the later ones.
    found.sort(key=lambda cls: _ORDER.get(cls.__module__, len(BUILTIN)))
    return {cls.name: cls for cls in found}
