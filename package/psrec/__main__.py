"""The `psrec` command (`python -m psrec` too).

`psrec dump PID`, a question asked of a live process and answered in well under a millisecond,
is answered without the click command line and what it imports (a few times the time of the
dump itself); every other command line, help and wrong usage included, goes to click.
"""

from __future__ import annotations

import sys


def main() -> None:
    args = sys.argv[1:]
    if "dump" in args:
        from psrec.recorder._dump import main as dump

        status = dump(args)
        if status is not None:
            sys.exit(status)
    from psrec.cli import main as cli

    cli()


if __name__ == "__main__":
    main()
