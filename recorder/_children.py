"""Programs psrec starts end with it, however psrec ends (even SIGKILL)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

__all__ = ["end_with_parent"]


def end_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A preexec_fn for a program psrec starts: it gets sig when psrec dies, instead of running
    on under init unseen."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getpid()
    pr_set_pdeathsig = 1

    def in_child() -> None:
        libc.prctl(pr_set_pdeathsig, sig, 0, 0, 0)
        if os.getppid() != parent:  # psrec died before the line above
            os.kill(os.getpid(), sig)

    return in_child
