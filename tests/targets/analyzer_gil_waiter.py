"""A thread that waits for the GIL while the main thread holds it in one long C call.

The main thread starts "waiter", which runs Python code; once it runs, main calls hog(): a
single sum() over a range, C code that never gives the GIL up, so "waiter" spends that time
asking for the GIL. When hog() returns, waiter sees the flag and exits.
Usage: python analyzer_gil_waiter.py [N]
"""
import sys
import threading

done = False


def waiter_loop(started):
    started.set()
    n = 0
    while not done:
        n += 1
    return n


def hog(n):
    return sum(range(n))


def main():
    global done
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 150_000_000
    started = threading.Event()
    t = threading.Thread(target=waiter_loop, args=(started,), name="waiter")
    t.start()
    started.wait()
    hog(n)
    done = True
    t.join()
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
