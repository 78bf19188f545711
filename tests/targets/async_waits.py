"""asyncio tasks that measure where their time goes: running, and waiting at each await.

For argv[1] seconds (default 3), on one event loop:
- req-0..2 (handle_request): each awaits, again and again, a gather of a CPU-bound child (5 ms
  of CPU) and an asyncio.sleep child (15 ms);
- grouped (3.11+): a TaskGroup of two tasks that sleep 10 ms, again and again;
- threaded: awaits a blocking call run in another thread (asyncio.to_thread, 8 ms;
  run_in_executor on 3.8);
- holder: holds an asyncio.Lock for 2 ms of CPU and 25 ms of sleep; then sleeps 20 ms;
- waiter: waits for that lock, then runs 1 ms under it; then sleeps 20 ms;
- spinner: runs 3 ms, then sleeps 2 ms.
Each task measures the time it ran (perf_counter around its CPU work) and the time it spent in
each of its own awaits, by the line of the await (tagged '# LINE name' in this file). A task
that waits at two places moves between them every 20 ms or more: psrec places a move between
two of its task snapshots (a few ms apart) by the task's samples, and where the task did not
run long enough to be sampled, half way. At the
end the program prints one line of JSON: the seconds it ran in all ("elapsed"), and per task
its running seconds ("running") and its waits by tag ("waits"). It prints "ready" once the
tasks have started.
"""

import asyncio
import json
import sys
import threading
import time

from rec_common import ready

DURATION = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
RAN = {}
WAITS = {}


def spin(seconds):
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x


def ran(seconds_from):
    name = asyncio.current_task().get_name()
    RAN[name] = RAN.get(name, 0.0) + time.perf_counter() - seconds_from


def waited(tag, seconds_from):
    w = WAITS.setdefault(asyncio.current_task().get_name(), {})
    w[tag] = w.get(tag, 0.0) + time.perf_counter() - seconds_from


async def cpu_child():
    t0 = time.perf_counter()
    spin(0.005)
    ran(t0)


async def sleep_child():
    await asyncio.sleep(0.015)


async def handle_request(until):
    loop = asyncio.get_running_loop()
    n = 0
    while time.perf_counter() < until:
        n += 1
        a = loop.create_task(cpu_child(), name=f"{asyncio.current_task().get_name()}-cpu-{n}")
        b = loop.create_task(sleep_child(), name=f"{asyncio.current_task().get_name()}-sleep-{n}")
        t0 = time.perf_counter()
        await asyncio.gather(a, b)  # LINE gather
        waited("gather", t0)


async def grouped(until):
    while time.perf_counter() < until:
        t0 = time.perf_counter()
        async with asyncio.TaskGroup() as tg:  # LINE taskgroup
            tg.create_task(asyncio.sleep(0.01))
            tg.create_task(asyncio.sleep(0.01))
        waited("taskgroup", t0)


async def threaded(until):
    loop = asyncio.get_running_loop()
    while time.perf_counter() < until:
        t0 = time.perf_counter()
        if sys.version_info >= (3, 9):  # noqa: UP036 (targets run on 3.8 too)
            await asyncio.to_thread(time.sleep, 0.008)  # LINE thread
        else:
            await loop.run_in_executor(None, time.sleep, 0.008)  # LINE thread38
        waited("thread" if sys.version_info >= (3, 9) else "thread38", t0)  # noqa: UP036


async def holder(lock, until):
    while time.perf_counter() < until:
        t0 = time.perf_counter()
        async with lock:  # LINE holder-lock
            waited("holder-lock", t0)
            t0 = time.perf_counter()
            spin(0.002)
            ran(t0)
            t0 = time.perf_counter()
            await asyncio.sleep(0.025)  # LINE holder-sleep
            waited("holder-sleep", t0)
        t0 = time.perf_counter()
        await asyncio.sleep(0.020)  # LINE holder-pause
        waited("holder-pause", t0)


async def waiter(lock, until):
    while time.perf_counter() < until:
        t0 = time.perf_counter()
        async with lock:  # LINE waiter-lock
            waited("waiter-lock", t0)
            t0 = time.perf_counter()
            spin(0.001)
            ran(t0)
        t0 = time.perf_counter()
        await asyncio.sleep(0.020)  # LINE waiter-pause
        waited("waiter-pause", t0)


async def spinner(until):
    while time.perf_counter() < until:
        t0 = time.perf_counter()
        spin(0.003)
        ran(t0)
        t0 = time.perf_counter()
        await asyncio.sleep(0.002)  # LINE spinner-sleep
        waited("spinner-sleep", t0)


async def main():
    start = time.perf_counter()
    until = start + DURATION
    loop = asyncio.get_running_loop()
    lock = asyncio.Lock()
    tasks = [loop.create_task(handle_request(until), name=f"req-{i}") for i in range(3)]
    if sys.version_info >= (3, 11):
        tasks.append(loop.create_task(grouped(until), name="grouped"))
    tasks.append(loop.create_task(threaded(until), name="threaded"))
    tasks.append(loop.create_task(holder(lock, until), name="holder"))
    tasks.append(loop.create_task(waiter(lock, until), name="waiter"))
    tasks.append(loop.create_task(spinner(until), name="spinner"))
    await asyncio.sleep(0)
    ready()
    await asyncio.gather(*tasks)
    print(json.dumps({"elapsed": time.perf_counter() - start, "running": RAN, "waits": WAITS,
                      "thread": threading.get_ident()}), flush=True)


asyncio.run(main())
