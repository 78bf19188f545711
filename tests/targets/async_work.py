"""asyncio tasks whose running and suspended times the program measures itself.

Tasks on one event loop, for argv[1] seconds (default 3): "heavy-N" (N = 0, 1) run 3 ms of
CPU, then sleep 2 ms; "light" runs 1 ms, then sleeps 6 ms; "sleeper" only sleeps; the loop's
own time is what is left. Each task measures the time it ran (perf_counter around its work).
At the end the program prints one line of JSON: the seconds it ran in all ("elapsed"), the
same run as its start and end on CLOCK_MONOTONIC in ns ("window": the clock of psrec's
samples), each task's running seconds ("running") and the module of its event loop's class
("loop"). It
prints "ready" once the tasks have started. argv[2], if given: a folder holding uvloop, whose
event loop then runs the tasks.
"""

import asyncio
import json
import sys
import time

from rec_common import ready

DURATION = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
UVLOOP = sys.argv[2] if len(sys.argv) > 2 else None


def spin(seconds):
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:  # LINE spin
        x += 1
    return x


async def worker(run_s, sleep_s, until, ran):
    name = asyncio.current_task().get_name()
    while time.perf_counter() < until:
        t0 = time.perf_counter()
        if run_s:
            spin(run_s)
        ran[name] = ran.get(name, 0.0) + time.perf_counter() - t0
        await asyncio.sleep(sleep_s)


async def main():
    start, start_ns = time.perf_counter(), time.monotonic_ns()
    until = start + DURATION
    ran = {}
    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(worker(0.003, 0.002, until, ran), name=f"heavy-{i}")
             for i in range(2)]
    tasks.append(loop.create_task(worker(0.001, 0.006, until, ran), name="light"))
    tasks.append(loop.create_task(worker(0.0, 0.005, until, ran), name="sleeper"))
    await asyncio.sleep(0)
    ready()
    await asyncio.gather(*tasks)
    elapsed, end_ns = time.perf_counter() - start, time.monotonic_ns()
    print(json.dumps({"elapsed": elapsed, "window": [start_ns, end_ns], "running": ran,
                      "loop": type(loop).__module__}), flush=True)


if UVLOOP:
    sys.path.insert(0, UVLOOP)
    import uvloop

    uvloop.run(main())
else:
    asyncio.run(main())
