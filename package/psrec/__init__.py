"""psrec: a record-and-replay sampling profiler for running Python processes."""

from __future__ import annotations

__all__ = ["__version__"]

__version__: str  # looked up on first use (PEP 562): importlib.metadata takes tens of ms


def __getattr__(name: str) -> str:
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("psrec")
    except PackageNotFoundError:  # running from a source tree that is not installed
        found = "0.0.0+unknown"
    globals()["__version__"] = found
    return found
