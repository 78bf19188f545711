"""An asyncio echo server under load: thousands of short-lived tasks a second.

The main thread's loop accepts connections and runs each in a task of its own, "conn-N"; a
second thread's loop ("clients") runs client tasks, "client-N", each of which connects, sends
a line, reads it back and closes, several at a time, for argv[1] seconds (default 3). Every
task does a little CPU work (about 200 us) so that samples catch it now and then.

When done, the program writes to the file argv[2] one JSON document: each task's name with the
CLOCK_MONOTONIC nanoseconds (time.monotonic_ns) of a time before it was created and of one
after it was done (its done callback), and the thread (threading.get_ident) whose loop ran it;
and under "gone", by name, the nanoseconds of when each task object was freed, as its loop
forgets it (later than its done callback by however long the loop thread took to drop it:
milliseconds where other programs hold up its CPU); then it prints "done". A sample of the
task lies between its creation and its done callback; a reading of the loop's tasks can
find it until it is gone.
"""

import asyncio
import json
import socket
import sys
import threading
import time
import weakref

DURATION = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
OUT = sys.argv[2] if len(sys.argv) > 2 else "echo.json"
CONCURRENCY = 8
LIVES = []  # (name, before it was created, after it was done, thread), in ns
GONE = {}  # name -> when the task object was freed, in ns


def spawn(loop, coro, name):
    """A task of that name, whose life goes to LIVES once it is done."""
    created = time.monotonic_ns()
    task = loop.create_task(coro, name=name)
    thread = threading.get_ident()
    task.add_done_callback(
        lambda t: LIVES.append((name, created, time.monotonic_ns(), thread)))
    weakref.finalize(task, lambda: GONE.__setitem__(name, time.monotonic_ns()))
    return task


def work():
    end = time.perf_counter() + 0.0002
    while time.perf_counter() < end:
        pass


async def handle(conn):
    loop = asyncio.get_running_loop()
    data = await loop.sock_recv(conn, 100)
    work()
    await loop.sock_sendall(conn, data)
    conn.close()


async def serve(server, stop):
    loop = asyncio.get_running_loop()
    n = 0
    while not stop.is_set():
        try:
            conn, _ = await asyncio.wait_for(loop.sock_accept(server), 0.2)
        except asyncio.TimeoutError:
            continue
        conn.setblocking(False)
        n += 1
        spawn(loop, handle(conn), f"conn-{n}")


async def client(port):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"ping\n")
    await writer.drain()
    await reader.readline()
    work()
    writer.close()
    await writer.wait_closed()


async def clients(port, until):
    loop = asyncio.get_running_loop()
    n = 0
    running = set()
    while time.monotonic() < until:
        while len(running) < CONCURRENCY:
            n += 1
            t = spawn(loop, client(port), f"client-{n}")
            running.add(t)
            t.add_done_callback(running.discard)
        await asyncio.sleep(0.0005)
    await asyncio.gather(*running, return_exceptions=True)


def client_thread(port, until, done):
    asyncio.run(clients(port, until))
    done.set()


async def main():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(256)
    server.setblocking(False)
    port = server.getsockname()[1]
    stop = asyncio.Event()
    done = threading.Event()
    until = time.monotonic() + DURATION
    threading.Thread(target=client_thread, args=(port, until, done), name="clients").start()
    serving = asyncio.get_running_loop().create_task(serve(server, stop), name="server")
    while not done.is_set():
        await asyncio.sleep(0.05)
    stop.set()
    await serving
    await asyncio.sleep(0.05)  # the last handlers finish
    now = time.monotonic_ns()  # a task not freed yet is gone no earlier than now
    with open(OUT, "w") as f:
        json.dump({"tasks": LIVES, "gone": {n: GONE.get(n, now) for n, *_ in LIVES}}, f)
    print("done", flush=True)


asyncio.run(main())
