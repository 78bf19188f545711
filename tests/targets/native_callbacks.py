"""Python code called back from C, in a loop, for `record --native` against what happens.

Usage: native_callbacks.py WORKLOAD [EXT_DIR]. One thread (named after the workload) runs it
for ever; "ready" is printed once it has begun. Each workload's Python caller reaches its
Python callee only through C, so a stack with the callee directly under the caller never
happened:
- qsort: ctypes calls libc's qsort, which calls py_cmp (a ctypes callback) at each comparison;
- sorted: sorted() calls key_of for each item of a large list;
- resub: re.sub calls replace_match for each match of a large text;
- callback: psrec_native_ext.call_back (EXT_DIR) calls py_callback from C;
and two that stay in C, without calling back: zlib (compress_it calls zlib.compress) and numpy
(multiply_it multiplies matrices: the interpreter must have numpy).
"""

import ctypes
import ctypes.util
import re
import sys
import threading


def py_cmp(a, b):
    x, y = a[0], b[0]
    return (x > y) - (x < y)


def sort_it(libc, cmp, data):
    libc.qsort(data, len(data), ctypes.sizeof(ctypes.c_int), cmp)


def run_qsort():
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    kind = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                            ctypes.POINTER(ctypes.c_int))
    cmp = kind(py_cmp)
    values = [(i * 7919) % 5003 for i in range(5003)]
    while True:
        sort_it(libc, cmp, (ctypes.c_int * len(values))(*values))


def key_of(v):
    return -v


def sort_keyed(items):
    return sorted(items, key=key_of)


def run_sorted():
    items = [(i * 7919) % 100003 for i in range(100003)]
    while True:
        sort_keyed(items)


def replace_match(m):
    return m.group(0).upper()


def substitute(text):
    return re.sub(r"[a-z]+", replace_match, text)


def run_resub():
    text = "alpha beta, gamma; delta " * 20000
    while True:
        substitute(text)


def py_callback():
    n = 0
    for _ in range(200):
        n += 1
    return n


def call_into_c(ext):
    for _ in range(1000):
        ext.call_back(py_callback)


def run_callback():
    sys.path.insert(0, sys.argv[2])
    import psrec_native_ext as ext

    while True:
        call_into_c(ext)


def compress_it(zlib, data):
    return zlib.compress(data, 6)


def run_zlib():
    import zlib

    data = bytes(range(256)) * 4096
    while True:
        compress_it(zlib, data)


def multiply_it(a):
    return a @ a


def run_numpy():
    import numpy

    a = numpy.ones((300, 300))
    while True:
        multiply_it(a)


WORKLOADS = {"qsort": run_qsort, "sorted": run_sorted, "resub": run_resub,
             "callback": run_callback, "zlib": run_zlib, "numpy": run_numpy}


def main():
    name = sys.argv[1]
    worker = threading.Thread(target=WORKLOADS[name], name=name, daemon=True)
    worker.start()
    print("ready", flush=True)
    worker.join()


if __name__ == "__main__":
    main()
