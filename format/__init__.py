"""psrec.format: the .psr recording format. Depends on nothing else in psrec.

The reader and writer (and with them msgpack, zstandard and the native codec) are imported on
first use of a name that needs them, so that a module of the package that needs neither (the
errors, psrec.format.text) costs only itself: `psrec dump PID` imports those.
"""

from __future__ import annotations

import importlib

from . import _constants as constants
from .errors import (
    CorruptRecordingError,
    EmptyRecordingError,
    FormatError,
    NotARecordingError,
    OutputExistsError,
    PsrecError,
    UnsupportedVersionError,
)

# Not typing's: typing imports re, which costs more than `psrec dump PID` (mypy takes any name
# TYPE_CHECKING for typing's).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._codec import chunk_seq
    from ._layout import SAMPLE_COLUMNS, Header
    from ._writers import ask_to_seal, writers_of
    from .merged import MergedRecording, open_recordings, recordings_in
    from .reader import (
        ChunkInfo,
        Definitions,
        Frame,
        Function,
        ProcessInfo,
        Recording,
        SampleStream,
        TaskInfo,
        ThreadInfo,
        native_available,
        open_recording,
    )
    from .writer import PsrWriter, open_output

_LAZY = {
    "Header": "._layout",
    "SAMPLE_COLUMNS": "._layout",
    "chunk_seq": "._codec",
    "ask_to_seal": "._writers",
    "writers_of": "._writers",
    **dict.fromkeys(("ChunkInfo", "Definitions", "Frame", "Function", "ProcessInfo",
                     "Recording", "SampleStream", "TaskInfo", "ThreadInfo", "native_available",
                     "open_recording"), ".reader"),
    **dict.fromkeys(("MergedRecording", "open_recordings", "recordings_in"), ".merged"),
    "PsrWriter": ".writer",
    "open_output": ".writer",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "constants",
    "Header",
    "PsrecError",
    "FormatError",
    "NotARecordingError",
    "UnsupportedVersionError",
    "EmptyRecordingError",
    "CorruptRecordingError",
    "OutputExistsError",
    "ChunkInfo",
    "Definitions",
    "Frame",
    "Function",
    "Recording",
    "SampleStream",
    "ProcessInfo",
    "TaskInfo",
    "ThreadInfo",
    "native_available",
    "open_recording",
    "MergedRecording",
    "open_recordings",
    "recordings_in",
    "PsrWriter",
    "open_output",
    # the sample columns of a DATA chunk (spec section 8.1), in order, with their array codes
    "SAMPLE_COLUMNS",
    # a DATA payload's sequence number (spec section 7.2)
    "chunk_seq",
    # who writes a recording now, and asking them to seal their chunk (spec section 7.3)
    "writers_of",
    "ask_to_seal",
]
