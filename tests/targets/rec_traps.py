"""The unwinder's correctness traps, one per mode (argv[1]).

generator: a generator resumed from two caller lines, doing different work after each.
same_address: two functions called in turn from one caller: the same frame address, two lines.
recursion: a static recursion DEPTH frames deep (argv[2], default 1000).
reentry: Python called back from C (sorted's key): no shim or entry frame may show.
threads: two threads with disjoint functions: frames of different threads never mix.
"""

import sys
import threading
import time

from rec_common import ready


def spin(n):
    x = 0
    for i in range(n):
        x += i
    return x


def work_a():
    return spin(20000)  # LINE work_a


def work_b():
    return spin(20000)  # LINE work_b


def alternating():
    while True:
        yield work_a()
        yield work_b()


def generator_caller():
    g = alternating()
    ready()
    while True:
        next(g)  # LINE gen_first
        next(g)  # LINE gen_second


def func_one():
    return spin(20000)


def func_two():
    return spin(20000)


def same_address_caller():
    ready()
    while True:
        func_one()  # LINE call_one
        func_two()  # LINE call_two


def descend(n):
    if n <= 1:
        ready()
        while True:
            time.sleep(0.01)  # LINE bottom
    return descend(n - 1) + 1


def key_function(v):
    return spin(200) + v  # LINE key_function


def reentry_caller():
    data = list(range(2000))
    ready()
    while True:
        sorted(data, key=key_function)  # LINE sorted_call


def alpha_leaf():
    return spin(5000)


def alpha_mid():
    return alpha_leaf()


def alpha_loop(started):
    started.wait()
    while True:
        alpha_mid()


def beta_leaf():
    return spin(5000)


def beta_mid():
    return beta_leaf()


def beta_loop(started):
    started.wait()
    while True:
        beta_mid()


def two_threads():
    started = threading.Barrier(3)
    threading.Thread(target=alpha_loop, args=(started,), daemon=True).start()
    threading.Thread(target=beta_loop, args=(started,), daemon=True).start()
    started.wait()
    ready()
    while True:
        time.sleep(0.05)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "generator":
        generator_caller()
    elif mode == "same_address":
        same_address_caller()
    elif mode == "recursion":
        depth = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
        sys.setrecursionlimit(depth + 200)
        descend(depth)
    elif mode == "reentry":
        reentry_caller()
    elif mode == "threads":
        two_threads()
    else:
        raise SystemExit(f"unknown mode {mode}")
