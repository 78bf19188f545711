"""asyncio tasks of a known structure, parked, with one task running for ever.

Main thread's loop, under the task "main" (which gathers the others):
- req-0..2 (handle_request): each awaits a gather of its own two tasks, cpu-N (waits on an
  Event) and sleep-N (asyncio.sleep);
- grouped (3.11+): a TaskGroup of tg-a and tg-b, both waiting on an Event;
- lock-holder holds an asyncio.Lock and waits on an Event; lock-waiter waits for that lock;
- threaded awaits a blocking call in another thread (asyncio.to_thread, run_in_executor on 3.8);
- direct awaits the task target-task;
- py-task (3.8-3.13): a task of the pure-Python Task class, waiting on an Event;
- spinner runs, and never awaits again once everything is parked.
A second thread ("loop2") runs its own loop with one task, other-loop, asleep.

Once parked, the target writes to the file argv[1] what it knows of itself, as JSON: every task
(name, state, the thread running it) with its coroutines, outermost first, each as (function,
line), and the await edges (parent, child) it built; then it prints "ready".
"""

import asyncio
import json
import sys
import threading

from rec_common import ready

PARK = threading.Event()
EDGES = []
TRUTH = {}


def chain(coro):
    """The coroutines a suspended task is in, outermost first: (function, current line)."""
    out = []
    while coro is not None:
        if hasattr(coro, "cr_frame"):
            frame, inner = coro.cr_frame, coro.cr_await
        elif hasattr(coro, "gi_frame"):
            frame, inner = coro.gi_frame, coro.gi_yieldfrom
        else:
            break
        if frame is None:
            break
        out.append((frame.f_code.co_name, frame.f_lineno))
        coro = inner
    return out


def describe(loop, thread_ident, running=None):
    for t in asyncio.all_tasks(loop):
        TRUTH[t.get_name()] = {
            "state": "running" if t is running else "suspended",
            "thread": thread_ident if t is running else None,
            "chain": [] if t is running else chain(t.get_coro()),
        }


async def cpu_child(ev):
    await ev.wait()  # LINE cpu-await


async def sleep_child():
    await asyncio.sleep(3600)  # LINE sleep-await


async def handle_request(i, ev):
    loop = asyncio.get_running_loop()
    a = loop.create_task(cpu_child(ev), name=f"cpu-{i}")
    b = loop.create_task(sleep_child(), name=f"sleep-{i}")
    EDGES.extend([(f"req-{i}", f"cpu-{i}"), (f"req-{i}", f"sleep-{i}")])
    await asyncio.gather(a, b)  # LINE gather-await


async def tg_child(ev):
    await ev.wait()


async def grouped(ev):
    async with asyncio.TaskGroup() as tg:
        tg.create_task(tg_child(ev), name="tg-a")
        tg.create_task(tg_child(ev), name="tg-b")
        EDGES.extend([("grouped", "tg-a"), ("grouped", "tg-b")])


async def lock_holder(lock, ev, held):
    async with lock:
        held.set()
        await ev.wait()


async def lock_waiter(lock, held):
    await held.wait()
    async with lock:  # LINE lock-await
        pass


def blocking():
    PARK.wait()


async def threaded():
    if sys.version_info >= (3, 9):  # noqa: UP036 (targets run on 3.8 too)
        await asyncio.to_thread(blocking)
    else:
        await asyncio.get_running_loop().run_in_executor(None, blocking)


async def target_task(ev):
    await ev.wait()


async def direct(other):
    await other  # LINE direct-await


async def py_child(ev):
    await ev.wait()


def other_loop(started):
    async def other():
        started.set()
        await asyncio.sleep(3600)

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    task = loop.create_task(other(), name="other-loop")
    TRUTH_LOOPS.append((loop, threading.get_ident()))
    loop.run_until_complete(task)


TRUTH_LOOPS = []


async def spinner(loop2):
    for _ in range(20):  # everything parks
        await asyncio.sleep(0.01)
    me = asyncio.current_task()
    describe(asyncio.get_running_loop(), threading.get_ident(), running=me)
    loop, ident = TRUTH_LOOPS[0]
    describe(loop, ident)
    with open(sys.argv[1], "w") as f:
        json.dump({"tasks": TRUTH, "edges": EDGES, "main_thread": threading.get_ident()}, f)
    ready()
    x = 0
    while True:  # LINE spin
        x += 1


async def main():
    loop = asyncio.get_running_loop()
    ev = asyncio.Event()
    lock = asyncio.Lock()
    held = asyncio.Event()
    started = threading.Event()
    threading.Thread(target=other_loop, args=(started,), name="loop2", daemon=True).start()
    started.wait(10)
    kids = [loop.create_task(handle_request(i, ev), name=f"req-{i}") for i in range(3)]
    if sys.version_info >= (3, 11):
        kids.append(loop.create_task(grouped(ev), name="grouped"))
    kids.append(loop.create_task(lock_holder(lock, ev, held), name="lock-holder"))
    kids.append(loop.create_task(lock_waiter(lock, held), name="lock-waiter"))
    kids.append(loop.create_task(threaded(), name="threaded"))
    other = loop.create_task(target_task(ev), name="target-task")
    kids.append(loop.create_task(direct(other), name="direct"))
    EDGES.append(("direct", "target-task"))
    if sys.version_info < (3, 14):
        kids.append(asyncio.tasks._PyTask(py_child(ev), loop=loop, name="py-task"))
    kids.append(loop.create_task(spinner(None), name="spinner"))
    EDGES.extend(("main", k.get_name()) for k in kids)
    await asyncio.gather(*kids)


if __name__ == "__main__":
    async def named_main():
        asyncio.current_task().set_name("main")
        await main()

    asyncio.run(named_main())
