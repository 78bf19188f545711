"""One thread alternates two phases of about 150 ms: hashing in OpenSSL with the GIL released,
then a pure-Python recursion whose depth changes at every call."""

import hashlib
import threading
import time

from rec_common import ready

BUFFER = bytes(range(256)) * 4096  # 1 MiB
started = threading.Event()


def hash_phase(until):
    while time.monotonic() < until:
        hashlib.sha256(BUFFER).digest()  # LINE hash_phase


def descend(n):
    if n:
        return descend(n - 1)  # LINE descend
    return 0


def python_phase(until):
    k = 0
    while time.monotonic() < until:
        descend(k % 12)  # LINE python_phase
        k += 1


def phases_loop():
    started.set()
    while True:
        hash_phase(time.monotonic() + 0.15)  # LINE call_hash
        python_phase(time.monotonic() + 0.15)  # LINE call_python


def main():
    threading.Thread(target=phases_loop, name="phases", daemon=True).start()
    started.wait()
    ready()
    threading.Event().wait()


if __name__ == "__main__":
    main()
