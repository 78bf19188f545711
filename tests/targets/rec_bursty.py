"""Threads that run in short bursts and sleep between them, at several duty cycles and burst
lengths, for argv[1] seconds (default 3). Each thread waits for the start (0.3 s, so that the
recorder's first samples of it find it waiting: line "gate"), runs its loop, and then waits,
off the CPU, so that the recording's last samples of it come after the loop (line "after").
The main thread reads each one's CPU time and the times it was switched in (the kernel's
counts, /proc/self/task/TID/schedstat) while it waits at the gate and again while it waits
after its loop, and prints a JSON line {thread name: [CPU seconds, times switched in]} of what
each used in between: the stretch the recording's samples between those two waits cover,
waking and going to sleep included (a free-threaded build's locks spin before they sleep,
which a thread's own time.thread_time() after its loop would leave out).

Pure Python bursts: a thread holds the GIL (or is attached) exactly while it burns.

`rec_bursty.py SECONDS alone SHAPE...` (SHAPE: duty:burst, e.g. 0.2:0.001) runs one thread
per shape, one after another, each alone for SECONDS (no thread waits for the GIL), and prints
{name: [CPU seconds, seconds inside its bursts]}: the second is its time holding the GIL.
Its pauses vary at random, from half to one and a half times the mean its duty cycle sets, so
that no thread keeps in step with a sampling interval (0.2 ms bursts at 20 %, one every 1 ms,
kept to the same instants of a 1 kHz sampler for stretches of a run)."""

import json
import random
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


def schedstat(tid):
    """The kernel's count of a thread's CPU time (s) and of the times it was switched in."""
    with open(f"/proc/self/task/{tid}/schedstat") as f:
        fields = f.read().split()
    return int(fields[0]) / 1e9, int(fields[2])


def bursts(name, duty, burst, go, deadline):
    pause = burst * (1 - duty) / duty
    go.wait()  # LINE gate
    while time.monotonic() < deadline[0]:
        burn(burst)
        time.sleep(pause)
    results[name] = True
    done.wait()  # LINE after


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
            time.sleep(pause * random.uniform(0.5, 1.5))
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
    go, deadline = threading.Event(), []
    threads = [threading.Thread(target=bursts, name=f"burst-{int(d * 100)}-{int(b * 1e6)}",
                                args=(f"burst-{int(d * 100)}-{int(b * 1e6)}", d, b, go,
                                      deadline))
               for d, b in SHAPES]
    for t in threads:
        t.start()
    time.sleep(0.3)  # the recorder's first samples see every thread waiting for the start
    before = {t.name: schedstat(t.native_id) for t in threads}
    deadline.append(time.monotonic() + seconds)
    go.set()
    while len(results) < len(threads):
        time.sleep(0.01)
    time.sleep(0.3)  # samples of every thread idle, after its loop
    after = {t.name: schedstat(t.native_id) for t in threads}
    print(json.dumps({n: [after[n][0] - before[n][0], after[n][1] - before[n][1]]
                      for n in before}), flush=True)
    done.set()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
