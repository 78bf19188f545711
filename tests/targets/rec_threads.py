"""A busy thread, a sleeping thread and a sleeping main thread, named by threading (the OS
names differ: psrec reports threading's).

Lines marked LINE are asserted by tests/integration/test_record_live.py.
"""

import threading
import time

from rec_common import ready, set_os_thread_name

started = threading.Barrier(3)
# Each worker releases this once it is past the barrier, so that the main thread says ready only
# when every thread is in its loop (a thread still waking from the barrier would be caught in
# threading's code by the first look and in its loop by the next).
in_loop = threading.Semaphore(0)


def busy_inner():
    started.wait()
    in_loop.release()
    x = 0
    while True:
        x += 1  # LINE busy_inner


def busy_worker():
    set_os_thread_name("os-busy")
    busy_inner()


def sleepy_inner():
    started.wait()
    in_loop.release()
    while True:
        time.sleep(0.05)  # LINE sleepy_inner


def sleepy_worker():
    set_os_thread_name("os-sleepy")
    sleepy_inner()


def main_sleep():
    started.wait()
    in_loop.acquire()
    in_loop.acquire()
    ready()
    while True:
        time.sleep(0.05)  # LINE main_sleep


if __name__ == "__main__":
    threading.Thread(target=busy_worker, name="busy-worker", daemon=True).start()
    threading.Thread(target=sleepy_worker, name="sleepy-worker", daemon=True).start()
    main_sleep()
