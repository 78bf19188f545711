"""Shared by the recorder's live targets: readiness and OS thread names."""

import ctypes
import ctypes.util
import sys
import threading


def set_os_thread_name(name):
    """Names the calling thread for the kernel (/proc/PID/task/TID/comm), the name psrec reports
    for a thread threading does not know."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME


_lock = threading.Lock()


def ready(tag="ready"):
    """Called from the innermost frame once the target is in its steady state."""
    with _lock:
        sys.stdout.write(tag + "\n")
        sys.stdout.flush()
