"""Busy for argv[1] seconds (default 1.5) in finite_work, then exits with status argv[2]."""

import sys
import time


def finite_work(seconds):
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        x += 1  # LINE finite_work
    return x


if __name__ == "__main__":
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 1.5
    status = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    print("ready", flush=True)
    finite_work(seconds)
    sys.exit(status)
