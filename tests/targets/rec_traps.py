"""The unwinder's correctness traps, one per mode (argv[1]).

generator: a generator resumed from two caller lines, doing different work after each.
same_address: two functions called in turn from one caller: the same frame address, two lines.
recursion: a static recursion DEPTH frames deep (argv[2], default 1000).
recursion_busy: a recursion DEPTH frames deep whose innermost frame calls and returns all the
    time (argv[2], default 3000).
reentry: Python called back from C (sorted's key): no shim or entry frame may show.
c_generators: generators resumed from C in a loop (sum of a generator, join of a generator
    expression): the thread enters and leaves a generator's frame every few tens of ns.
threads: two threads with disjoint functions: frames of different threads never mix.
deep_chains: under a static recursion 60 frames deep, a loop that calls, in turn, two
    recursions of different functions to depths that change at every call (1 to 120): the
    frames under a deep stack's top come and go all the time.
call_kinds: every way the interpreter calls Python code, directly or through C, each from
    its own line (argv[2] "traced": with a line tracer installed, so that 3.12+ runs
    instrumented instructions).
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


def descend_busy(n):
    if n <= 1:
        ready()
        while True:
            spin(300)  # LINE busy bottom
    return descend_busy(n - 1) + 1


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


def via_plain():
    return spin(3000)


def via_keywords(n=0):
    return spin(3000)


def via_star(*args):
    return spin(3000)


class Kinds:
    def __init__(self):
        spin(3000)

    def __getitem__(self, key):
        return spin(3000)

    @property
    def prop(self):
        return spin(3000)

    def method(self):
        return spin(3000)


class Overridden:
    def __getattribute__(self, name):
        return spin(3000)


def via_generator():
    yield spin(3000)


def via_delegation():
    yield from via_generator()


def via_c_key(v):
    return spin(3000)


def via_c_generator():
    # Resumed from C (sum) thousands of times a call, each resume short: the thread enters
    # and leaves the generator's frame faster than a copy of the stack takes.
    for i in range(3000):
        yield i + 1


def sum_of_generator():
    return sum(via_c_generator())


def join_of_genexpr():
    return ",".join(str(i) for i in range(1000))


def c_generators():
    ready()
    while True:
        sum_of_generator()
        join_of_genexpr()


def call_kinds_loop():
    k = Kinds()
    o = Overridden()
    ready()
    while True:
        via_plain()  # LINE kind_plain
        via_keywords(n=1)  # LINE kind_keywords
        via_star(*(1, 2))  # LINE kind_star
        Kinds()  # LINE kind_init
        _ = k[0]  # LINE kind_getitem
        _ = k.prop  # LINE kind_prop
        k.method()  # LINE kind_method
        _ = o.anything  # LINE kind_getattribute
        for _ in via_generator():  # LINE kind_for
            pass
        for _ in via_delegation():  # LINE kind_send
            pass
        sorted([1], key=via_c_key)  # LINE kind_c
        sum(via_c_generator())  # LINE kind_c_gen


def chain_a(n):
    if n <= 0:
        return spin(40)
    return chain_a(n - 1)  # LINE chain_a


def chain_b(n):
    if n <= 0:
        return spin(40)
    return chain_b(n - 1)  # LINE chain_b


def chains_loop():
    ready()
    depth = 1
    while True:
        depth = depth * 7 % 121
        chain_a(depth)  # LINE call_chain_a
        chain_b(120 - depth)  # LINE call_chain_b


def chains_base(n):
    if n <= 1:
        return chains_loop()
    return chains_base(n - 1)


def line_tracer(frame, event, arg):
    return line_tracer


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
    elif mode == "recursion_busy":
        depth = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
        sys.setrecursionlimit(depth + 200)
        descend_busy(depth)
    elif mode == "reentry":
        reentry_caller()
    elif mode == "threads":
        two_threads()
    elif mode == "c_generators":
        c_generators()
    elif mode == "deep_chains":
        chains_base(60)
    elif mode == "call_kinds":
        if sys.argv[2:] == ["traced"]:
            sys.settrace(line_tracer)
        call_kinds_loop()
    else:
        raise SystemExit(f"unknown mode {mode}")
