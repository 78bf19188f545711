"""The error family every psrec error belongs to."""

from __future__ import annotations

__all__ = [
    "PsrecError",
    "FormatError",
    "NotARecordingError",
    "UnsupportedVersionError",
    "EmptyRecordingError",
    "CorruptRecordingError",
    "OutputExistsError",
]


class PsrecError(Exception):
    """A failure psrec explains in one line; ``help`` says what to do about it."""

    exit_code = 1

    def __init__(self, message: str, help: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.help = help

    def __str__(self) -> str:
        return self.message


class FormatError(PsrecError):
    """A .psr file cannot be read (or written) as the format requires."""


class NotARecordingError(FormatError):
    pass


class UnsupportedVersionError(FormatError):
    pass


class EmptyRecordingError(FormatError):
    pass


class CorruptRecordingError(FormatError):
    pass


class OutputExistsError(PsrecError, FileExistsError):
    def __init__(self, path: str) -> None:
        super().__init__(f"{path} already exists", help="pass --force to overwrite it")
