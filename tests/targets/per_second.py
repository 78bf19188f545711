"""Works in one function a second, cycling through phase_0 .. phase_4, for argv[1] seconds
(default: until killed), and prints a JSON line for each second it worked: its number, the
phase and its CLOCK_MONOTONIC start and end in nanoseconds. Prints "ready" first, then names
its thread "phases" (a recording learns the name after the thread began); at the second
argv[2] (if given) it renames the thread "phases-2"."""

import json
import sys
import threading
import time


def spin(until):
    x = 0
    while time.monotonic_ns() < until:
        x += 1
    return x


def phase_0(until):
    return spin(until)


def phase_1(until):
    return spin(until)


def phase_2(until):
    return spin(until)


def phase_3(until):
    return spin(until)


def phase_4(until):
    return spin(until)


PHASES = [phase_0, phase_1, phase_2, phase_3, phase_4]

if __name__ == "__main__":
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else float("inf")
    rename_at = int(sys.argv[2]) if len(sys.argv) > 2 else -1
    print("ready", flush=True)
    threading.current_thread().name = "phases"
    start = time.monotonic_ns()
    n = 0
    while n < seconds:
        begin = start + n * 1_000_000_000
        if n == rename_at:
            threading.current_thread().name = "phases-2"
        phase = PHASES[n % len(PHASES)]
        phase(begin + 1_000_000_000)
        print(json.dumps({"second": n, "phase": phase.__name__, "start": begin,
                          "end": time.monotonic_ns()}), flush=True)
        n += 1
