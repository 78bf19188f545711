"""Threads that run in short bursts and sleep between them, at several duty cycles and burst
lengths, for argv[1] seconds (default 3). Each thread measures its own CPU time over its loop
(time.thread_time) and then waits, off the CPU, so that the recording's last samples of it
come after the loop; the main thread then prints a JSON line {thread name: CPU seconds}.

Pure Python bursts: a thread holds the GIL (or is attached) exactly while it burns.

`rec_bursty.py SECONDS alone SHAPE...` (SHAPE: duty:burst, e.g. 0.2:0.001) runs one thread
per shape, one after another, each alone for SECONDS (no thread waits for the GIL), and prints
{name: [CPU seconds, seconds inside its bursts]}: the second is its time holding the GIL."""

import json
import sys
import threading
import time

# (duty cycle, burst seconds): from 1 % in 0.1 ms bursts to 90 % in 1 ms ones.
SHAPES = [(0.01, 0.0001), (0.20, 0.0002), (0.20, 0.001), (0.50, 0.010), (0.90, 0.001)]
results = {}
done = threading.Event()


def burn(seconds):
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1  # LINE burn
    return x


def bursts(name, duty, burst, deadline):
    pause = burst * (1 - duty) / duty
    t0 = time.thread_time()
    while time.monotonic() < deadline:
        burn(burst)
        time.sleep(pause)
    results[name] = time.thread_time() - t0
    done.wait()


def alone(seconds, shapes):
    inside = {}

    def run(name, duty, burst):
        pause = burst * (1 - duty) / duty
        deadline = time.monotonic() + seconds
        t0 = time.thread_time()
        total = 0.0
        while time.monotonic() < deadline:
            start = time.perf_counter()
            burn(burst)
            total += time.perf_counter() - start
            time.sleep(pause)
        inside[name] = [time.thread_time() - t0, total]

    time.sleep(0.3)
    for duty, burst in shapes:
        name = f"alone-{int(duty * 100)}-{int(burst * 1e6)}"
        t = threading.Thread(target=run, name=name, args=(name, duty, burst))
        t.start()
        t.join()
    time.sleep(0.3)
    print(json.dumps(inside), flush=True)


def main():
    if len(sys.argv) > 2 and sys.argv[2] == "alone":
        alone(float(sys.argv[1]), [tuple(map(float, s.split(":"))) for s in sys.argv[3:]])
        return
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    time.sleep(0.3)  # the recorder's first samples see every thread from its start
    deadline = time.monotonic() + seconds
    threads = [threading.Thread(target=bursts, name=f"burst-{int(d * 100)}-{int(b * 1e6)}",
                                args=(f"burst-{int(d * 100)}-{int(b * 1e6)}", d, b, deadline))
               for d, b in SHAPES]
    for t in threads:
        t.start()
    while len(results) < len(threads):
        time.sleep(0.01)
    time.sleep(0.3)  # samples of every thread idle, after its loop
    print(json.dumps(results), flush=True)
    done.set()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
