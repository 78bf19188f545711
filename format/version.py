"""psrec's version, for the files and outputs every part writes (the package root gives it as
``psrec.__version__``). Found on first use: importlib.metadata takes tens of milliseconds."""

from __future__ import annotations

from functools import cache

__all__ = ["psrec_version"]


@cache
def psrec_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("psrec")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0.0.0+unknown"
