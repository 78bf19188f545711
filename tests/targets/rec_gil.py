"""One thread holds the GIL inside a long C call; another, pure Python, waits for it."""

import threading

from rec_common import ready

holder_ready = threading.Event()
waiter_ready = threading.Event()


def hold_gil():
    holder_ready.set()
    while True:
        sum(range(10**7))  # LINE hold_gil: a C loop that never releases the GIL


def want_gil():
    waiter_ready.set()
    x = 0
    while True:
        x += 1  # LINE want_gil


def main():
    threading.Thread(target=hold_gil, name="gil-holder", daemon=True).start()
    threading.Thread(target=want_gil, name="gil-waiter", daemon=True).start()
    holder_ready.wait()
    waiter_ready.wait()
    ready()
    threading.Event().wait()


if __name__ == "__main__":
    main()
