"""Names a terminal table could misread, for psrec top: functions named like rich markup
("[bold]hot[/bold]", "a[/]b") or holding a control character, a file in a folder named
"[v2]", a thread named "[red]worker[/red]", a thread with no Python stack (a C function run
by _thread) and a stack deeper than psrec's cap ([truncated stack]). Prints "ready" from the
innermost frame, then runs until killed."""

import _thread
import sys
import threading
import time

from rec_common import ready

DEPTH = 9000  # deeper than psrec's MAX_DEPTH (8192)


def hot(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def slash(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def deep_sleep():
    while True:
        time.sleep(0.05)


def _rename(fn, name, filename=None):
    names = {"co_name": name}
    if sys.version_info >= (3, 11):
        names["co_qualname"] = name
    if filename is not None:
        names["co_filename"] = filename
    fn.__code__ = fn.__code__.replace(**names)


_rename(hot, "[bold]hot[/bold]", "/opt/app/[v2]/lib.py")
_rename(slash, "a[/]b")
_rename(deep_sleep, "bell\x07sleep")


def work():
    while True:
        hot(0.02)
        slash(0.01)


def descend(n, started):
    if n <= 1:
        started.set()
        deep_sleep()
    return descend(n - 1, started) + 1


if __name__ == "__main__":
    _thread.start_new_thread(time.sleep, (3600,))  # no Python frame in this thread
    threading.Thread(target=work, name="[red]worker[/red]", daemon=True).start()
    sys.setrecursionlimit(DEPTH + 200)
    threading.stack_size(256 << 20)
    started = threading.Event()
    threading.Thread(target=descend, args=(DEPTH, started), name="deep", daemon=True).start()
    started.wait()
    ready()
    while True:
        time.sleep(1)
