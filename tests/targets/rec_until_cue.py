"""A program that runs until it is told to stop: prints "ready", waits in wait_for_cue for a
line on stdin, then exits with status argv[1] (default 0). Asserted by
tests/integration/test_record_messages.py (psrec record --duration with a launched program)."""

import sys

from rec_common import ready


def wait_for_cue():
    ready()
    sys.stdin.readline()


if __name__ == "__main__":
    wait_for_cue()
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
