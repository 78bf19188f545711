"""Threads named by threading, one renamed and one started on cue, and one threading does not
know (started with _thread, named only for the kernel).

Prints "ready" once every thread runs; a line on stdin then renames "before-rename" to
"after-rename" and starts "late-start". Asserted by tests/integration/test_record_live.py.
"""

import _thread
import sys
import threading
import time

from rec_common import ready, set_os_thread_name


def sleeper():
    while True:
        time.sleep(0.02)


def os_only(started):
    set_os_thread_name("os-only")
    started.release()
    while True:
        time.sleep(0.02)


if __name__ == "__main__":
    lock = _thread.allocate_lock()
    lock.acquire()
    _thread.start_new_thread(os_only, (lock,))
    lock.acquire()
    threading.current_thread().name = "main-renamed"
    renamed = threading.Thread(target=sleeper, name="before-rename", daemon=True)
    renamed.start()
    threading.Thread(target=sleeper, name="ünïcode-名前", daemon=True).start()
    ready()
    sys.stdin.readline()
    renamed.name = "after-rename"
    threading.Thread(target=sleeper, name="late-start", daemon=True).start()
    while True:
        time.sleep(0.05)
