"""Where the recording goes, checked before anything is started: a file psrec may create or
(with --force) overwrite, or a stream (standard output, a pipe, a device) that psrec writes to
(psrec.format.writer.check_stream: never a block device, a socket, or another user's FIFO,
device or link), never a terminal."""

from __future__ import annotations

import os
import stat
import sys
import tempfile

from psrec.format.errors import OutputExistsError, PsrecError
from psrec.format.writer import check_link, check_stream, is_stream

__all__ = ["check_output", "to_stdout"]


def to_stdout(path: str) -> bool:
    """The recording goes to psrec's standard output ('-', /dev/stdout, the same pipe)."""
    if path == "-":
        return True
    try:
        a, b = os.stat(path), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError):
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def check_output(path: str, force: bool, needs_file: bool = False) -> None:
    """Fails before anything is started if the output cannot be written (needs_file: --keep,
    --max-size and --window write files, which a stream is not)."""
    if needs_file and (path == "-" or is_stream(path)):
        raise PsrecError(f"{path} is a stream: --keep, --max-size and --window write files",
                         help="give a file name with -o")
    if is_stream(path):
        # '-', a device or a pipe: written in place, nothing to overwrite, once check_stream
        # allows it. A terminal cannot take a binary recording. (A FIFO is not opened here:
        # that waits for its reader, which the recorder does once it has a recording to write,
        # with the signals that end it caught.)
        check_stream(path)
        if to_stdout(path) and sys.stdout.isatty():
            raise PsrecError("the recording is binary and stdout is a terminal",
                             help="give a file name with -o, or redirect stdout")
        if _names_a_terminal(path):
            raise PsrecError(f"{path} is a terminal and the recording is binary",
                             help="give a file name with -o")
        return
    if not force:
        check_link(path)  # dangling or not: never created or written through
    if os.path.isdir(path) and not os.path.islink(path):
        raise PsrecError(f"{path} is a directory", help="give a file name with -o")
    if os.path.exists(path) and not force:
        raise OutputExistsError(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise PsrecError(
            f"cannot create {path}: folder {folder} does not exist",
            help="create the folder first or choose another path with -o",
        )
    try:  # access() says yes to root everywhere: try for real, before anything starts
        fd, probe = tempfile.mkstemp(prefix=".psrec-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError:
        raise PsrecError(
            f"cannot create {path}: folder {folder} is not writable",
            help="choose a folder you can write to with -o",
        ) from None


def _names_a_terminal(path: str) -> bool:
    """Whether path is a terminal, told from its device number (a device is not opened to ask:
    opening one may do something): a pseudo-terminal (majors 136-143, the kernel's
    devices.txt) or a device of the tty class in sysfs (/dev/tty, consoles, serial lines)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    if not stat.S_ISCHR(st.st_mode):
        return False
    major, minor = os.major(st.st_rdev), os.minor(st.st_rdev)
    if 136 <= major <= 143:
        return True
    try:
        return os.path.basename(os.readlink(f"/sys/dev/char/{major}:{minor}/subsystem")) == "tty"
    except OSError:
        return False
