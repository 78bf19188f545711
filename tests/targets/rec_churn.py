"""Thread churn: the main thread starts short-lived threads for argv[1] seconds, argv[2] at a
time (default 4), about argv[3] a second (default 2000; 0: back to back), then prints a JSON
line with its own OS thread id and every worker's, and exits. Prints "ready" (with its tid)
first.
"""

import json
import sys
import threading
import time

tids = []


def short_worker():
    tids.append(threading.get_native_id())
    x = 0
    for i in range(200):
        x += i
    return x


def churn(seconds, width, rate):
    start = time.monotonic()
    end = start + seconds
    started = 0
    while time.monotonic() < end:
        if rate:
            ahead = start + started / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        batch = [threading.Thread(target=short_worker) for _ in range(width)]
        for t in batch:
            t.start()
        for t in batch:
            t.join()
        started += width
    return started


if __name__ == "__main__":
    seconds = float(sys.argv[1])
    width = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    rate = float(sys.argv[3]) if len(sys.argv) > 3 else 2000.0
    main_tid = threading.get_native_id()
    print("ready", main_tid, flush=True)
    started = churn(seconds, width, rate)
    print(json.dumps({"main": main_tid, "workers": tids, "started": started,
                      "per_second": started / seconds}), flush=True)
