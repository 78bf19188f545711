"""A parent that forks argv[1] children one after another (default 10); each child sleeps
10 ms in Python, as a child about to exec would be found, then execs the same Python into
`-c` that runs about 0.15 s. The parent waits for each before the next."""

import os
import sys
import time

CHILD = "import time\nend = time.monotonic() + 0.15\nwhile time.monotonic() < end: pass  # exec'd"

if __name__ == "__main__":
    for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 10):
        pid = os.fork()
        if pid == 0:
            time.sleep(0.01)
            os.execv(sys.executable, [sys.executable, "-c", CHILD])
        os.waitpid(pid, 0)
        time.sleep(0.03)
