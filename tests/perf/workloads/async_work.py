"""asyncio tasks whose running time the program measures itself, on one event loop, until it is
stopped: the benchmark's target for the task views (figure T).

Usage: python async_work.py OUT
"heavy-0" and "heavy-1" run 3 ms of CPU then sleep 2 ms, "light" runs 1 ms then sleeps 6 ms,
"sleeper" only sleeps. Prints "ready" once the tasks run. On SIGINT or SIGTERM it writes to OUT,
as JSON, the seconds since then ("elapsed") and each task's running seconds ("running"), and
exits.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time

RAN: dict[str, float] = {}


def spin(seconds: float) -> int:
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x


async def worker(run_s: float, sleep_s: float) -> None:
    task = asyncio.current_task()
    name = task.get_name() if task is not None else "?"
    while True:
        t0 = time.perf_counter()
        if run_s:
            spin(run_s)
        RAN[name] = RAN.get(name, 0.0) + time.perf_counter() - t0
        await asyncio.sleep(sleep_s)


async def main(out: str) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    tasks = [loop.create_task(worker(0.003, 0.002), name=f"heavy-{i}") for i in range(2)]
    tasks.append(loop.create_task(worker(0.001, 0.006), name="light"))
    tasks.append(loop.create_task(worker(0.0, 0.005), name="sleeper"))
    await asyncio.sleep(0)
    start = time.perf_counter()
    RAN.clear()
    print("ready", flush=True)
    await stop.wait()
    elapsed = time.perf_counter() - start
    with open(out, "w") as f:
        json.dump({"elapsed": elapsed, "running": RAN}, f)
    for t in tasks:
        t.cancel()


asyncio.run(main(sys.argv[1]))
