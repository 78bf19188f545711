"""psrec.format: the .psr recording format. Depends on nothing else in psrec."""

from __future__ import annotations

from . import _constants as constants
from ._layout import Header
from .errors import (
    CorruptRecordingError,
    EmptyRecordingError,
    FormatError,
    NotARecordingError,
    OutputExistsError,
    PsrecError,
    UnsupportedVersionError,
)
from .reader import (
    ChunkInfo,
    Definitions,
    Frame,
    Function,
    ProcessInfo,
    Recording,
    SampleStream,
    ThreadInfo,
    native_available,
    open_recording,
)
from .writer import PsrWriter, open_output

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
    "ThreadInfo",
    "native_available",
    "open_recording",
    "PsrWriter",
    "open_output",
]
