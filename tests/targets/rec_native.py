"""Threads with known native stacks, for `psrec dump --native` against what they do.

Usage: rec_native.py EXT_DIR [gil]. EXT_DIR holds psrec_native_ext built for this interpreter.
Without `gil`: a thread spinning in C under a known chain (c-spinner), one calling back into
Python from C (c-callback), and threads blocked in time.sleep (sleeper), Lock.acquire (locked)
and socket.recv (reader). With `gil`: a pure-Python spinner holding the GIL (gil-hog) and a
thread that sleeps briefly over and over, so that it waits for the GIL most of the time
(gil-waiter). Prints "ready" once every thread is where it stays.
"""

import socket
import sys
import threading
import time

sys.path.insert(0, sys.argv[1])
import psrec_native_ext as ext  # noqa: E402

started = threading.Barrier(6 if sys.argv[2:] != ["gil"] else 3)


def c_caller():
    started.wait()
    while True:
        ext.spin_c(4_000_000_000)


def py_callback():
    n = 0
    for _ in range(20_000_000):
        n += 1
    return n


def callback_caller():
    started.wait()
    while True:
        ext.call_back(py_callback)


def sleeper():
    started.wait()
    time.sleep(3600)


def lock_waiter(lock):
    started.wait()
    lock.acquire()


def socket_reader(sock):
    started.wait()
    sock.recv(1)


def gil_hog():
    started.wait()
    n = 0
    while True:
        n += 1


def gil_waiter():
    started.wait()
    while True:
        time.sleep(0.0001)


def main():
    if sys.argv[2:] == ["gil"]:
        work = [("gil-hog", gil_hog, ()), ("gil-waiter", gil_waiter, ())]
    else:
        held = threading.Lock()
        held.acquire()
        a, b = socket.socketpair()
        work = [("c-spinner", c_caller, ()), ("c-callback", callback_caller, ()),
                ("sleeper", sleeper, ()), ("locked", lock_waiter, (held,)),
                ("reader", socket_reader, (a,))]
    for name, fn, args in work:
        threading.Thread(target=fn, args=args, name=name, daemon=True).start()
    started.wait()
    time.sleep(0.3)  # each thread has reached the call it stays in
    print("ready", flush=True)
    while True:
        time.sleep(3600)


main()
