"""A program psrec launches to record: found, started under its guard (it ends with psrec,
and so do the processes it starts: _children.py), watched while it does not run Python, and
stopped or waited for."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from typing import Any, TextIO

from ._children import Guard, end_with_parent
from ._options import RecordOptions
from .errors import CommandNotFoundError, RecorderError

__all__ = ["Waiting", "exit_status", "launch", "native_error", "stop_child"]


def resolve_command(command: tuple[str, ...]) -> list[str]:
    if not command:
        raise RecorderError("no command given after --",
                            help="psrec record -o out.psr -- python app.py")
    exe = command[0]
    if os.sep in exe:
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            raise CommandNotFoundError(f"command not found: {exe}")
        return list(command)
    found = shutil.which(exe)
    if not found:
        raise CommandNotFoundError(f"command not found: {exe}")
    return [exe, *command[1:]]


def launch(command: tuple[str, ...], to_stdout: bool
           ) -> tuple[subprocess.Popen[bytes], Guard, list[str]]:
    """The program started, with its guard and the command line it was started with. With
    to_stdout the recording goes to standard output, and the program's output to stderr."""
    argv = resolve_command(command)
    # A recording written to standard output must not be mixed with the program's own
    # output: the program's goes to standard error then.
    child_stdout = sys.stderr.fileno() if to_stdout else None
    # The program ends with psrec however psrec ends, and so do the processes it starts
    # (a shell's, a launcher's): marked, and ended by a guard if psrec dies.
    guard = Guard()
    try:
        child = subprocess.Popen(argv, preexec_fn=end_with_parent(), stdout=child_stdout,
                                 env=guard.env())
    except FileNotFoundError:
        guard.release()
        raise CommandNotFoundError(f"command not found: {argv[0]}") from None
    except PermissionError:
        guard.release()
        raise CommandNotFoundError(
            f"cannot run {argv[0]}: permission denied", help="check the file's execute bit"
        ) from None
    return child, guard, argv


def exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def stop_child(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(2)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def native_error(state: dict[str, Any]) -> RecorderError:
    from . import errors

    cls = getattr(errors, state["root_error_class"], RecorderError)
    err: RecorderError = cls(state["root_error"])
    return err


class Waiting:
    """A launched program that does not run Python (yet): what to say, and when to stop
    waiting. With --subprocesses the program may be a launcher (a shell, make, tox): its Python
    processes are recorded for as long as it runs. Without, it may exec Python within
    ``timeout`` seconds. A failure other than "not Python (yet)" that persists for a second
    (an unsupported version, no access) is final."""

    SAY_AFTER = 1.0
    SETTLE = 1.0

    def __init__(self, opts: RecordOptions, child: subprocess.Popen[bytes], stream: TextIO,
                 name: str) -> None:
        self.opts, self.child, self.stream, self.name = opts, child, stream, name
        self.start = time.monotonic()
        self.said = False
        self.last: tuple[str, str] | None = None
        self.last_since = self.start

    def check(self, state: dict[str, Any]) -> bool:
        """False when waiting is over: nothing will be recorded."""
        now = time.monotonic()
        waited = now - self.start
        error = (state["root_error_class"], state["root_error"])
        if error != self.last:
            self.last, self.last_since = error, now
        if (error[0] not in ("NotPythonError", "TargetReadError", "NoSuchProcessError")
                and now - self.last_since >= self.SETTLE):
            raise native_error(state)
        if not self.said and waited >= self.SAY_AFTER:
            self.said = True
            what = f"{self.name} (pid {self.child.pid}) is not a Python process"
            if self.opts.subprocesses:
                print(f"psrec: {what}: recording the Python processes it starts",
                      file=self.stream)
            else:
                print(f"psrec: {what} (yet): waiting up to {self.opts.attach_timeout:g} s "
                      "for it to start Python (--subprocesses records the Python processes "
                      "it starts)", file=self.stream)
        if not self.opts.subprocesses and waited >= self.opts.attach_timeout:
            print(f"psrec: {self.name} did not start Python within "
                  f"{self.opts.attach_timeout:g} s: nothing recorded; waiting for it to exit "
                  "(Ctrl-C stops it)", file=self.stream)
            return False
        return True

