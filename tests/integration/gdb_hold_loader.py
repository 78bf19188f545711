# Run by gdb (`gdb -batch -nx -x gdb_hold_loader.py --args PYTHON ...`) with LIBPYTHON (the
# shared library's path) and RUNTIME (_PyRuntime's offset in it, hex) in the environment: runs
# the program and stops it at each mmap until the loader has mapped the library's first
# segment over the whole file, so that _PyRuntime's address reads the file's bytes, not yet
# the runtime. Holds it there for HOLD seconds (printing "held PID"), lets it go, and waits
# for it to end. A program never caught there prints "never held".
import os
import time

import gdb

LIB = os.environ["LIBPYTHON"]
RUNTIME = int(os.environ["RUNTIME"], 16)
HOLD = float(os.environ.get("HOLD", "1.0"))


def mappings(pid):
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            fields = line.split()
            start, end = (int(x, 16) for x in fields[0].split("-"))
            yield start, end, fields[1], int(fields[2], 16), fields[5] if len(fields) > 5 else ""


def runtime_unwritable(pid):
    maps = list(mappings(pid))
    base = next((s for s, _, _, off, path in maps if path == LIB and off == 0), None)
    if base is None:
        return False
    at = base + RUNTIME
    return any(s <= at < e and "w" not in perms for s, e, perms, _, _ in maps)


def ended(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


gdb.execute("catch syscall mmap")
gdb.execute("run")
pid = gdb.selected_inferior().pid
held = False
for _ in range(5000):
    if runtime_unwritable(pid):
        held = True
        print(f"held {pid}", flush=True)
        time.sleep(HOLD)
        break
    gdb.execute("continue")
if not held:
    print("never held", flush=True)
gdb.execute("delete")
gdb.execute("detach")
while not ended(pid):
    time.sleep(0.05)
