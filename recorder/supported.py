"""The CPython versions psrec records, as the built recorder names them (the one place they are
typed is recorder/native/python/offsets.hpp): messages, tests and scripts read them from here."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

__all__ = ["Supported", "supported"]


class Supported(NamedTuple):
    oldest_minor: int  # CPython 3.<oldest_minor> ...
    newest_minor: int  # ... to 3.<newest_minor>; a later one is tried from _Py_DebugOffsets
    free_threaded_from_minor: int  # free-threaded builds from 3.<this>
    range: str  # as messages say it: "3.8 to 3.15"

    def minors(self) -> list[str]:
        """Every supported minor version: "3.8", ..."""
        return [f"3.{m}" for m in range(self.oldest_minor, self.newest_minor + 1)]


@cache
def supported() -> Supported | None:
    """The built recorder's range, or None where the native recorder is not built."""
    try:
        from . import _recorder
    except ImportError:
        return None
    return Supported(_recorder.OLDEST_MINOR, _recorder.NEWEST_MINOR,
                     _recorder.FREE_THREADED_FROM_MINOR, _recorder.SUPPORTED_RANGE)
