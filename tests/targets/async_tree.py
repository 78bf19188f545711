"""asyncio tasks that await one another, each burning CPU in a function of its own, so that
every sample of that function has one logical stack: the tasks awaiting it, root first.

For argv[1] seconds (default 3): asyncio.run's task awaits the task "root", which gathers
"alpha" and "beta"; "alpha" runs burn_alpha; "beta" awaits the task "gamma" it made, which
runs burn_gamma; "gamma" also makes "delta", which runs burn_delta and which nothing awaits
until its end. Each burns 2 ms, then yields. At the end the program prints one line of JSON:
for each burn function, the logical stack of its samples as names, root first (task names
and coroutine functions).
"""

import asyncio
import json
import sys
import time

from rec_common import ready

DURATION = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0


def burn(seconds):
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x


def burn_alpha():
    return burn(0.002)


def burn_gamma():
    return burn(0.002)


def burn_delta():
    return burn(0.002)


async def spin(work, until):
    while time.perf_counter() < until:
        work()
        await asyncio.sleep(0)


async def alpha_body(until):
    await spin(burn_alpha, until)


async def delta_body(until):
    await spin(burn_delta, until)


async def gamma_body(until):
    delta = asyncio.get_running_loop().create_task(delta_body(until), name="delta")
    await spin(burn_gamma, until)
    return delta


async def beta_body(until):
    gamma = asyncio.get_running_loop().create_task(gamma_body(until), name="gamma")
    delta = await gamma
    await delta


async def main():
    until = time.perf_counter() + DURATION
    loop = asyncio.get_running_loop()
    alpha = loop.create_task(alpha_body(until), name="alpha")
    beta = loop.create_task(beta_body(until), name="beta")
    await asyncio.sleep(0)
    ready()
    await asyncio.gather(alpha, beta)


async def top():
    await asyncio.get_running_loop().create_task(main(), name="root")
    first = [asyncio.current_task().get_name(), "top", "root", "main"]
    print(json.dumps({
        "burn_alpha": first + ["alpha", "alpha_body", "spin", "burn_alpha"],
        "burn_gamma": first + ["beta", "beta_body", "gamma", "gamma_body", "spin",
                               "burn_gamma"],
        "burn_delta": ["delta", "delta_body", "spin", "burn_delta"],
    }), flush=True)


asyncio.run(top())
