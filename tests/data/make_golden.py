"""Writes the golden .psr files in tests/data/ and their expected decoded content (.json).

Run it only when the format changes on purpose: python tests/data/make_golden.py
The files are deterministic (fixed clocks, fixed inputs), so running it again on an unchanged
format rewrites identical bytes; `git diff` shows what a format change did. The tests never
run this script: they decode the committed files and compare with the committed JSON.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "unit"))

from format_helpers import new_writer, read_file  # noqa: E402  (after the path insert)
from psrec.format import _constants as C  # noqa: E402
from psrec.format import _format  # noqa: E402

EVENT_NAMES = {v: k for k, v in vars(C).items() if k.startswith("REC_")}


def two_threads(path: Path) -> None:
    """Two threads, two chunks; the worker is renamed, errs once and exits."""
    enc = _format.Encoder()
    w = new_writer(path)
    f = enc.intern_string("app.py")
    main = enc.intern_frame(enc.intern_function(f, enc.intern_string("main"), 1), 5)
    loop = enc.intern_frame(enc.intern_function(f, enc.intern_string("loop"), 10), 12)
    work = enc.intern_frame(enc.intern_function(f, enc.intern_string("Worker.run"), 20), 22)
    t1 = enc.add_thread(100, 0x7F0000001000, 100, "MainThread", 0)
    t2 = enc.add_thread(100, 0x7F0000002000, 101, "Thread-1", 0)
    for i in range(6):
        ts = 1000 * (i + 1) + (5000 if i >= 4 else 0)  # a 6 ms gap before pass 4
        enc.begin_pass(ts)
        enc.sample(t1, [main, loop] if i % 2 else [main], C.STATUS_GIL_HELD | C.STATUS_ON_CPU,
                   250 if i % 2 else None)
        if i == 3:
            enc.sample_error(t2)
        elif i < 5:
            enc.sample(t2, [work], C.STATUS_GIL_REQUESTED_KNOWN)
        enc.end_pass()
        if i == 1:
            enc.thread_rename(t2, ts, "worker")
            enc.marker(ts, "step two")
        if i == 2:
            w.write_sealed(*enc.seal())
        if i == 4:
            enc.thread_exit(t2, ts)
    w.write_sealed(*enc.seal())
    w.close({"passes": 6, "samples": enc.stats["samples"]})


def deep_stack(path: Path) -> None:
    """One thread whose stack is one frame deeper than MAX_DEPTH, then shallow again."""
    enc = _format.Encoder()
    w = new_writer(path)
    f = enc.intern_string("rec.py")
    frames = [enc.intern_frame(enc.intern_function(f, enc.intern_string("recurse"), 1), 2),
              enc.intern_frame(enc.intern_function(f, enc.intern_string("leaf"), 9), 10)]
    t = enc.add_thread(7, 1, 7, "MainThread", 0)
    enc.begin_pass(1000)
    enc.sample(t, [frames[0]] * C.MAX_DEPTH + [frames[1]], C.STATUS_GIL_HELD)
    enc.end_pass()
    enc.begin_pass(2000)
    enc.sample(t, [frames[0], frames[1]], C.STATUS_GIL_HELD)
    enc.end_pass()
    w.write_sealed(*enc.seal())
    w.close({"passes": 2, "samples": 2})


def no_trailer(path: Path) -> None:
    """A recorder killed after two chunks: no STATS, INDEX or trailer; part of a third chunk."""
    enc = _format.Encoder()
    w = new_writer(path)
    f = enc.intern_string("svc.py")
    frame = enc.intern_frame(enc.intern_function(f, enc.intern_string("serve"), 3), 4)
    t = enc.add_thread(9, 1, 9, "", 0)
    enc.process_start(0, 9, 1, "svc --port 80")
    for i in range(3):
        enc.begin_pass(1000 * (i + 1))
        enc.sample(t, [frame] * (i + 1), C.STATUS_ON_CPU)
        enc.end_pass()
        w.write_sealed(*enc.seal())
    w.abandon()
    with open(path, "r+b") as fh:  # cut the last chunk short
        fh.truncate(os.path.getsize(path) - 5)


GOLDEN = {"two_threads": two_threads, "deep_stack": deep_stack, "no_trailer": no_trailer}


def expected(path: Path) -> dict[str, Any]:
    """The decoded content of a recording, in the JSON form kept next to it."""
    got = read_file(path, native=True)
    defs = got["defs"]

    def frame(fid: int) -> str:
        fr = defs.frame(fid)
        return f"{fr.function.filename}:{fr.function.name}:{fr.line}"

    def collapsed(stack: tuple[int, ...]) -> str:
        # Runs of one frame are written once with a count, to keep deep stacks readable.
        parts: list[str] = []
        i = 0
        while i < len(stack):
            j = i
            while j < len(stack) and stack[j] == stack[i]:
                j += 1
            parts.append(frame(stack[i]) + (f" x{j - i}" if j - i > 1 else ""))
            i = j
        return ";".join(parts)

    def event(e: tuple[int, ...]) -> list[Any]:
        rtype, *fields = e
        # String ids shown as their strings; which field holds one is in spec section 4.
        at = {C.REC_THREAD_RENAME: 2, C.REC_MARKER: 1, C.REC_PROCESS_START: 3}.get(rtype)
        if at is not None:
            fields[at] = defs.strings.get(fields[at], "") if fields[at] else ""
        return [EVENT_NAMES[rtype][4:], *fields]

    stacks = [collapsed(stack) for _, _, stack, _, _, _ in got["samples"]]
    return {
        "clean": got["clean"],
        "warnings": [w.replace(str(path), path.name) for w in got["warnings"]],
        "metadata": got["metadata"],
        "stats": got["stats"],
        "chunks": [[c.type_name, c.offset, c.length, c.raw_length] for c in got["chunks"]],
        "threads": {str(t.ref): [t.pid, t.python_tid, t.os_tid, t.name, t.start_ts]
                    for t in defs.threads.values()},
        "samples": [
            {"ts": ts, "thread": th, "stack": stack, "status": st, "cpu": cpu, "weight": w}
            for (ts, th, _, st, cpu, w), stack in zip(got["samples"], stacks)
        ],
        "events": [event(e) for e in got["events"]],
    }


def main() -> None:
    for name, make in GOLDEN.items():
        path = HERE / f"{name}.psr"
        if path.exists():
            path.unlink()
        make(path)
        out = HERE / f"{name}.json"
        out.write_text(json.dumps(expected(path), indent=1, sort_keys=True) + "\n")
        print(f"wrote {path.name} ({path.stat().st_size} bytes) and {out.name}")


if __name__ == "__main__":
    main()
