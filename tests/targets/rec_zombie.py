"""Forks a child that exits at once and is never waited for (a zombie while this process lives),
then sleeps. The test finds the child as the process whose parent this one is."""

import os
import time

from rec_common import ready


def parent():
    if os.fork() == 0:
        os._exit(0)
    ready()
    while True:
        time.sleep(0.05)  # never os.wait(): the child stays a zombie


if __name__ == "__main__":
    parent()
