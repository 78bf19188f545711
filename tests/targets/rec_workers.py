"""A parent that runs two multiprocessing workers (spawned interpreters) for argv[1] seconds."""

import multiprocessing
import sys
import time


def child_work(seconds):
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        x += 1  # LINE child_work
    return x


def parent_wait(procs):
    for p in procs:
        p.join()


if __name__ == "__main__":
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=child_work, args=(seconds,)) for _ in range(2)]
    for p in procs:
        p.start()
    print("ready", flush=True)
    parent_wait(procs)
