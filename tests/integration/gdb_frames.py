# Sourced by gdb (`gdb -p PID -batch -x gdb_frames.py`): prints, as one JSON line, every
# thread's frames as gdb unwinds them, innermost first: pc, function name, the function's start
# address (null where gdb knows no symbol). Left out are the frames gdb infers rather than
# finds on the stack: inlined functions (which share their caller's pc) and tail calls
# (rebuilt from the debug information's call sites).
import json
import re

import gdb


def start_of(frame):
    fn = frame.function()
    if fn is not None:
        try:
            return fn.name, int(fn.value().address)
        except gdb.error:
            pass
    pc = frame.pc() - (0 if frame.level() == 0 else 1)
    text = gdb.execute(f"info symbol {pc:#x}", to_string=True)
    m = re.match(r"(\S+)(?: \+ (\d+))? in section", text)
    if not m:
        return frame.name(), None
    return m.group(1), pc - int(m.group(2) or 0)


threads = {}
for thread in gdb.selected_inferior().threads():
    thread.switch()
    frames = []
    frame = gdb.newest_frame()
    while frame is not None and len(frames) < 4096:
        if frame.type() not in (gdb.INLINE_FRAME, gdb.TAILCALL_FRAME):
            name, start = start_of(frame)
            frames.append({"pc": frame.pc(), "name": name, "start": start})
        try:
            frame = frame.older()
        except gdb.error:
            break
    threads[thread.ptid[1]] = frames
print("PSREC-GDB " + json.dumps(threads))
