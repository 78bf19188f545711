"""psrec's version, for the files and outputs every part writes (the package root gives it as
``psrec.__version__``). Found on first use: importlib.metadata takes tens of milliseconds."""

from __future__ import annotations

import os
import sys
from functools import cache

__all__ = ["psrec_version"]


@cache
def psrec_version() -> str:
    # The installed distribution's folder on the path, named NAME-VERSION.dist-info: what
    # importlib.metadata finds too, without its imports (tens of milliseconds).
    for folder in sys.path:
        try:
            names = os.listdir(folder or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith("psrec-") and name.endswith(".dist-info"):
                return name[len("psrec-"):-len(".dist-info")]
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("psrec")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0.0.0+unknown"
