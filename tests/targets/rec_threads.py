"""A busy thread, a sleeping thread and a sleeping main thread, each with an OS name.

Lines marked LINE are asserted by tests/integration/test_record_live.py.
"""

import threading
import time

from rec_common import ready, set_os_thread_name

started = threading.Barrier(3)


def busy_inner():
    started.wait()
    x = 0
    while True:
        x += 1  # LINE busy_inner


def busy_worker():
    set_os_thread_name("busy-worker")
    busy_inner()


def sleepy_inner():
    started.wait()
    while True:
        time.sleep(0.05)  # LINE sleepy_inner


def sleepy_worker():
    set_os_thread_name("sleepy-worker")
    sleepy_inner()


def main_sleep():
    started.wait()
    ready()
    while True:
        time.sleep(0.05)  # LINE main_sleep


if __name__ == "__main__":
    threading.Thread(target=busy_worker, daemon=True).start()
    threading.Thread(target=sleepy_worker, daemon=True).start()
    main_sleep()
