"""Threads that start and exit on a schedule, so that the thread list changes at its head and in
its middle while psrec records.

Prints "ready"; a line on stdin then starts the schedule (seconds after the cue):
  a: 0.00-1.20   b: 0.20-0.60   c: 0.40-1.00   d: 0.70-0.85
CPython adds each new thread state at the head of the list, so b exits from the middle of
[c, b, a, main], and d and c from its head. Once every thread has ended, prints one JSON line
with each thread's CLOCK_MONOTONIC start and end (ns) as it measured them, then idles.
Asserted by tests/integration/test_record_live.py.
"""

import json
import sys
import threading
import time

from rec_common import ready

SCHEDULE = {"a": (0.00, 1.20), "b": (0.20, 0.60), "c": (0.40, 1.00), "d": (0.70, 0.85)}


def lifetime(name, until, spans):
    start = time.monotonic_ns()
    while time.monotonic() < until:
        time.sleep(0.005)
    spans[name] = (start, time.monotonic_ns())


if __name__ == "__main__":
    ready()
    sys.stdin.readline()
    t0 = time.monotonic()
    spans = {}
    threads = []
    for name, (begin, end) in sorted(SCHEDULE.items(), key=lambda kv: kv[1][0]):
        time.sleep(max(0.0, t0 + begin - time.monotonic()))
        t = threading.Thread(target=lifetime, args=(name, t0 + end, spans), name=f"life-{name}")
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    sys.stdout.write(json.dumps(spans) + "\n")
    sys.stdout.flush()
    while True:
        time.sleep(0.05)
