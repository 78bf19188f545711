"""A busy main thread and a sleeping thread named "sleeper", for a fixed time.

Usage: python analyzer_sleeper.py [SECONDS]
"""
import sys
import threading
import time


def nap(stop):
    while not stop.is_set():
        time.sleep(0.005)


def spin(seconds):
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += 1
    return n


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    stop = threading.Event()
    t = threading.Thread(target=nap, args=(stop,), name="sleeper")
    t.start()
    spin(seconds)
    stop.set()
    t.join()
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
