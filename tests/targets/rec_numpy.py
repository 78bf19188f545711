"""numpy matrix products in a loop (its BLAS on one thread), for `psrec record --native`."""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

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
