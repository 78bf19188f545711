"""How a psrec command ends on an error: the words on stderr and the exit status.

Every command ends here: the click commands through ``psrec.cli.handle_errors``, and `psrec
dump PID`, which is answered before click is imported (``psrec.__main__``). It imports nothing
at load time (the dump must start fast), and the error classes and psrec.format.text only when
there is an error to word.
"""

from __future__ import annotations

import sys

__all__ = ["exit_status"]


def exit_status(exc: BaseException, verbose: bool) -> int | None:
    """Says exc on stderr as psrec does and returns the exit status to end with: a PsrecError
    in one line, and its help on a second line if it has one, with its exit_code (1; 2 for
    wrong usage); Ctrl-C as interrupted (130); a closed standard output silently (1); anything
    else as an internal error in one line (1).

    None: exc is to be raised again, for its traceback (verbose: -v was given), or because it
    is no error (SystemExit, and any other BaseException that is not Ctrl-C)."""
    from psrec.format.errors import PsrecError

    if isinstance(exc, PsrecError):
        if verbose:
            return None
        # Messages name files and targets, which may hold terminal escapes or line breaks:
        # escaped here, once, they can neither drive the terminal nor add a line.
        from psrec.format.text import printable

        _say(f"psrec: error: {printable(exc.message)}\n"
             + (f"psrec: {printable(exc.help)}\n" if exc.help else ""))
        return int(exc.exit_code)
    if isinstance(exc, KeyboardInterrupt):
        if verbose:
            return None
        _say("psrec: interrupted\n")
        return 130
    if isinstance(exc, BrokenPipeError):
        sys.stderr.close()
        return 1
    if isinstance(exc, Exception):
        if verbose:
            return None
        from psrec.format.text import printable

        _say(f"psrec: internal error: {type(exc).__name__}: {printable(str(exc))}\n"
             "psrec: run again with -v for the traceback, and please report it\n")
        return 1
    return None


def _say(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()
