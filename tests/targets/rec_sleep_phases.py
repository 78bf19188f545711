"""A thread that sleeps through five phases, 0.2 s each, each in a function of its own
(phase_0 to phase_4), waking only to go from one to the next; the main thread waits for it.
Its samples show each phase for about a fifth of its time, in order."""

import threading
import time


def phase_0():
    time.sleep(0.2)


def phase_1():
    time.sleep(0.2)


def phase_2():
    time.sleep(0.2)


def phase_3():
    time.sleep(0.2)


def phase_4():
    time.sleep(0.2)


def phases():
    for phase in (phase_0, phase_1, phase_2, phase_3, phase_4):
        phase()


def main():
    time.sleep(0.2)  # the recorder's first samples of the process
    worker = threading.Thread(target=phases, name="phases")
    worker.start()
    worker.join()
    time.sleep(0.1)


if __name__ == "__main__":
    main()
