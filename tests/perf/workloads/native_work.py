"""Time spent in C: two threads hashing a 1 MiB buffer with hashlib.sha256, one thread asleep.

Usage: python native_work.py [ROUNDS]
Without ROUNDS it runs until killed and prints "ready" once both hashing threads run. With
ROUNDS each hashing thread hashes the buffer ROUNDS times, then the program prints
"RESULT elapsed=<s>" and exits (elapsed: its own clock, from the first hash to
the last thread's end).

sha256 releases the GIL for inputs this large, so both hashing threads spend nearly all their
time in OpenSSL's code, and the main thread waits in join (a lock, in C as well).
"""
from __future__ import annotations

import hashlib
import sys
import threading
import time

BUFFER = bytes(range(256)) * 4096  # 1 MiB


def hash_loop(rounds: int | None, started: threading.Semaphore) -> None:
    started.release()
    n = 0
    while rounds is None or n < rounds:
        hashlib.sha256(BUFFER).digest()
        n += 1


def sleeper() -> None:
    while True:
        time.sleep(3600)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else None
    threading.Thread(target=sleeper, name="sleeper", daemon=True).start()
    started = threading.Semaphore(0)
    clock = time.perf_counter
    start = clock()
    workers = [threading.Thread(target=hash_loop, args=(rounds, started), name=f"hasher_{i}",
                                daemon=True) for i in range(2)]
    for t in workers:
        t.start()
    for _ in workers:
        started.acquire()
    if rounds is None:
        print("ready", flush=True)
    for t in workers:
        t.join()
    elapsed = clock() - start
    print(f"RESULT elapsed={elapsed:.4f}", flush=True)


if __name__ == "__main__":
    main()
