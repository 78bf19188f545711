"""numpy matrix products in a loop (its BLAS on one thread), for `psrec record --native`.
Argument: a folder holding numpy for this interpreter, put first on sys.path (optional)."""

import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
if len(sys.argv) > 1:
    sys.path.insert(0, sys.argv[1])

import numpy  # noqa: E402

a = numpy.random.default_rng(1).random((400, 400))


def multiply():
    b = a
    for _ in range(10):
        b = a @ b
        b /= b.max()
    return b


multiply()
print("ready", flush=True)
while True:
    multiply()
