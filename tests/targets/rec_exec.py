"""A program that replaces itself (exec) while it is recorded.

    rec_exec.py python SECONDS   busy in before_exec, then execs this file again as
                                 `rec_exec.py after SECONDS`: busy in after_exec, exits 0
    rec_exec.py sleep SECONDS    busy in before_exec, then execs `sleep SECONDS` (not Python)
    rec_exec.py shell SECONDS    busy in before_exec, then execs `sh -c "exec python ..."`:
                                 a shell that execs Python again

Prints "ready" (and "ready after" in the new program) once busy.
"""

import os
import sys
import time


def spin(seconds):
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        x += 1
    return x


def before_exec(seconds):
    return spin(seconds)


def after_exec(seconds):
    return spin(seconds)


if __name__ == "__main__":
    how, seconds = sys.argv[1], float(sys.argv[2])
    me = os.path.abspath(__file__)
    if how == "after":
        print("ready after", flush=True)
        after_exec(seconds)
        sys.exit(0)
    print("ready", flush=True)
    before_exec(seconds)
    if how == "python":
        os.execv(sys.executable, [sys.executable, me, "after", str(seconds)])
    elif how == "sleep":
        os.execv("/bin/sleep", ["sleep", str(seconds)])
    elif how == "shell":
        os.execv("/bin/sh", ["sh", "-c", f'exec "{sys.executable}" "{me}" after {seconds}'])
    sys.exit(f"unknown mode {how}")
