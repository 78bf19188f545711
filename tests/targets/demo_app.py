"""The demo workload: a small multi-threaded program with a known shape, about 4 seconds long.

The main thread parses and sorts records (CPU, holding the GIL); a worker hashes large buffers
(CPU, mostly without the GIL); a poller sleeps (off CPU). Exits by itself.
"""

import hashlib
import threading
import time


def parse_record(i):
    return {"id": i, "name": f"user{i}", "score": (i * 7919) % 1000}


def build_report(n):
    rows = [parse_record(i) for i in range(n)]
    rows.sort(key=lambda r: (r["score"], r["name"]))
    return len(rows)


def fibonacci(n):
    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)


def hash_blobs(stop):
    blob = b"x" * (8 << 20)
    while not stop.is_set():
        hashlib.sha256(blob).hexdigest()


def poll_queue(stop):
    while not stop.is_set():
        time.sleep(0.05)


def main():
    stop = threading.Event()
    workers = [
        threading.Thread(target=hash_blobs, args=(stop,), name="hasher"),
        threading.Thread(target=poll_queue, args=(stop,), name="poller"),
    ]
    for w in workers:
        w.start()
    deadline = time.monotonic() + 4.0
    while time.monotonic() < deadline:
        build_report(20000)
        fibonacci(22)
    stop.set()
    for w in workers:
        w.join()


if __name__ == "__main__":
    main()
