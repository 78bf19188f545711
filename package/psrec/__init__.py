"""psrec: a record-and-replay sampling profiler for running Python processes.

``psrec.load("run.psr", ...)`` reads a recording for a script or a notebook
(``psrec.analyzer.api``); the command line is ``psrec.cli``.
"""

from __future__ import annotations

# Not typing's: typing imports re, which costs more than `psrec dump PID` (mypy takes any name
# TYPE_CHECKING for typing's).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from psrec.analyzer.api import load

__all__ = ["__version__", "load"]

__version__: str  # looked up on first use (PEP 562): importlib.metadata takes tens of ms


def __getattr__(name: str) -> object:
    # psrec.load is the analyzer's own function (so that help() and inspect show its signature
    # and arguments), imported on first use: `import psrec` stays cheap for the command line.
    if name == "load":
        from psrec.analyzer.api import load as found_load

        globals()["load"] = found_load
        return found_load
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from psrec.format.version import psrec_version

    found = psrec_version()
    globals()["__version__"] = found
    return found
