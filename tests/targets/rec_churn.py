# Copied from the shared workloads: threads that start and exit all the time.
"""Many threads that come and go, each mixing CPU work and sleeping.

The main thread keeps between 10 and 100 worker threads alive, starting and
retiring a few at random, and does some CPU work itself. Runs until killed.
Prints "ready" once the first workers run.
"""
import math
import random
import threading
import time


def cpu_burst():
    acc = 0.0
    for _ in range(10000):
        acc += math.sin(random.random()) * math.cos(random.random())
    return acc


def io_wait():
    time.sleep(0.1)


def worker(stop):
    while not stop.is_set():
        if random.random() < 0.3:
            cpu_burst()
        else:
            io_wait()


def spawn(count):
    started = []
    for _ in range(count):
        stop = threading.Event()
        t = threading.Thread(target=worker, args=(stop,), daemon=True)
        t.start()
        started.append((t, stop))
    return started


def main():
    workers = spawn(10)
    print("ready", flush=True)
    while True:
        if random.random() < 0.1:
            if random.random() < 0.5 and len(workers) < 100:
                workers += spawn(random.randint(1, 5))
            elif len(workers) > 10:
                for _, stop in workers[: random.randint(1, 5)]:
                    stop.set()
                workers = [w for w in workers if not w[1].is_set()]
        cpu_burst()
        time.sleep(0.05)


if __name__ == "__main__":
    main()
