"""The `psrec` command (`python -m psrec` too).

`psrec dump PID` (and --json, --native), a question asked of a live process and answered in well
under a millisecond (a few for native stacks), is answered without the click command line and what
it imports (a few times the time of the dump itself), its errors worded as every command's
(psrec._errors); `psrec --version` too. Every other command line, help and wrong usage
included, goes to click.
"""

from __future__ import annotations

import sys


def main() -> None:
    args = sys.argv[1:]
    if args in (["--version"], ["-V"]):  # what click's -V prints (psrec.cli), without click
        from psrec.format.version import psrec_version

        print(f"psrec, version {psrec_version()}")
        sys.exit(0)
    if "dump" in args:
        from psrec.recorder._dump import parse_args, print_dump

        parsed = parse_args(args)
        if parsed is not None:
            pid, as_json, verbose, native, native_all = parsed
            try:
                print_dump(pid, as_json, native=native, native_all=native_all)
            except BaseException as exc:  # worded as every command words it (psrec.cli)
                from ._errors import exit_status

                status = exit_status(exc, verbose)
                if status is None:
                    raise
                sys.exit(status)
            sys.exit(0)
    from psrec.cli import main as cli

    cli()


if __name__ == "__main__":
    main()
