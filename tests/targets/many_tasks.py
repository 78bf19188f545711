"""argv[1] asyncio tasks (default 40,000) that wait on one event, and a ticker that wakes every
10 ms and prints, whenever it grows, the longest it woke late ("late SECONDS"): a stop of the
process shows there. Prints "ready" once every task waits."""

import asyncio
import sys
import time

from rec_common import ready


async def waiter(event):
    await event.wait()


async def ticker():
    worst = 0.0
    last = time.monotonic()
    while True:
        await asyncio.sleep(0.01)
        now = time.monotonic()
        late = now - last - 0.01
        if late > worst:
            worst = late
            print(f"late {worst:.3f}", flush=True)
        last = now


async def main(n):
    event = asyncio.Event()
    tasks = [asyncio.ensure_future(waiter(event)) for _ in range(n)]
    await asyncio.sleep(0.2)  # every task has run to its wait
    ready()
    await ticker()
    del tasks


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 40000))
