"""A thread that spins in a C++ library (argv[1], built from native/psrec_cxx_spin.cpp), in
calls of 50 ms from the Python function call_cxx, until killed. Prints "ready" once it runs."""

import ctypes
import sys
import threading

from rec_common import ready


def call_cxx(lib):
    lib.psrec_cxx_spin(50)


def worker(lib):
    ready()
    while True:
        call_cxx(lib)


def main():
    lib = ctypes.CDLL(sys.argv[1])
    lib.psrec_cxx_spin.argtypes = [ctypes.c_int]
    lib.psrec_cxx_spin.restype = ctypes.c_long
    t = threading.Thread(target=worker, args=(lib,), name="cxx", daemon=True)
    t.start()
    t.join()


if __name__ == "__main__":
    main()
