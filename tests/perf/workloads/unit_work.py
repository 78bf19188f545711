"""The same unit of work over and over, each unit timed: for measuring a profiler's slowdown of
a running target in windows, profiled and not, within one process.

Usage: python unit_work.py python|c OUT
  python: the main thread does fixed_work.py's three kinds of work per unit, scaled down to
          about 5 ms: fibonacci(23), text_work(6) and list_work(1).
  c:      two threads each hash a 1 MiB buffer 8 times with hashlib.sha256 per unit (in
          OpenSSL's code, the GIL released); a third sleeps; the main thread waits in join.
Prints "ready" once every working thread runs. On SIGINT or SIGTERM it writes one line per
unit to OUT, "<thread> <start> <wall> <cpu>" (time.monotonic() at its start; its wall and
thread-CPU seconds), and exits.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import threading
import time

from fixed_work import fibonacci, list_work, text_work

BUFFER = bytes(range(256)) * 4096  # 1 MiB


def python_unit() -> None:
    fibonacci(23)
    text_work(6)
    list_work(1)


def hash_unit() -> None:
    for _ in range(8):
        hashlib.sha256(BUFFER).digest()


def timed(unit, rows: list, started: threading.Semaphore) -> None:  # noqa: ANN001
    clock, cpu = time.monotonic, time.thread_time
    started.release()
    while True:
        t0, c0 = clock(), cpu()
        unit()
        rows.append((t0, clock() - t0, cpu() - c0))


def main() -> None:
    kind, out = sys.argv[1], sys.argv[2]
    per_thread: list[list] = []

    def finish(*_: object) -> None:
        with open(out, "w") as f:
            for i, rows in enumerate(per_thread):
                f.writelines(f"{i} {t:.6f} {w:.7f} {c:.7f}\n" for t, w, c in list(rows))
        os._exit(0)

    signal.signal(signal.SIGINT, finish)
    signal.signal(signal.SIGTERM, finish)
    started = threading.Semaphore(0)
    if kind == "python":
        per_thread.append([])
        print("ready", flush=True)
        timed(python_unit, per_thread[0], started)
    threading.Thread(target=lambda: time.sleep(1e6), name="sleeper", daemon=True).start()
    workers = []
    for i in range(2):
        per_thread.append([])
        workers.append(threading.Thread(target=timed, args=(hash_unit, per_thread[i], started),
                                        name=f"hasher_{i}", daemon=True))
        workers[-1].start()
    for _ in workers:
        started.acquire()
    print("ready", flush=True)
    for t in workers:
        t.join()


if __name__ == "__main__":
    main()
