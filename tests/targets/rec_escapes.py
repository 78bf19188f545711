"""Names holding terminal control sequences: a function whose code is named
"sp<ESC>[2Jin" (clear screen) and a thread named "bad<ESC>[41mname" (red background).
Spins for argv[1] seconds (default 1.5) after printing "ready"."""

import sys
import threading
import time


def spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


names = {"co_name": "sp\x1b[2Jin"}
if sys.version_info >= (3, 11):
    names["co_qualname"] = "sp\x1b[2Jin"
spin.__code__ = spin.__code__.replace(**names)

if __name__ == "__main__":
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 1.5
    t = threading.Thread(target=time.sleep, args=(seconds,), name="bad\x1b[41mname")
    t.start()
    print("ready", flush=True)
    spin(seconds)
    t.join()
