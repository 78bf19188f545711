"""Analyzer throughput: report, --collapsed and export --speedscope on a synthetic recording.

Usage: python tests/perf/analyzer_bench.py [--samples 10000000] [--model walk|jumps] [--keep DIR]

The recording is written with the format's own encoder: 4 threads at 10 kHz, with statuses
and CPU times. Two models of how stacks change:
  walk  (default) each thread walks a fixed call tree of 3000 functions 6 to 40 deep: on each
        sample the leaf moves to another line with probability 0.4, calls a child with 0.1,
        returns with 0.1 -- what busy Python code looks like at 10 kHz;
  jumps a harsh case: on one sample in five a thread jumps to one of 400 unrelated stacks
        8 to 40 frames deep.
Each command runs as a real `psrec` process; the table shows its wall time, decode-plus-
aggregation rate and peak RSS. A recording with a tenth of the samples is measured too, so
that memory growing with samples would show. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from typing import Any

from psrec.format import PsrWriter
from psrec.format import _format as F

THREADS = 4
INTERVAL_US = 100


def _script_jumps(rng: random.Random, frames: list[int]) -> list[list[tuple[Any, int, Any]]]:
    base = [rng.sample(frames, 6) for _ in range(8)]
    stacks = [base[i % 8] + rng.sample(frames, rng.randint(2, 34)) for i in range(400)]
    script = []
    for _t in range(THREADS):
        seq = []
        cur = rng.randrange(400)
        for _ in range(10007):
            if rng.random() < 0.2:
                cur = rng.randrange(400)
            status = rng.choice((3, 3, 3, 2, 0))
            seq.append((stacks[cur], status, rng.randint(60, 100) if status & 2 else None))
        script.append(seq)
    return script


def _script_walk(rng: random.Random, e: Any, files: list[int]) -> list[list[tuple[Any, int, Any]]]:
    # A fixed call tree: function i has 3 children; each function has 5 lines.
    nfunc = 3000
    funcs = [e.intern_function(files[i % 20], e.intern_string(f"step_{i}_work"), 10 * i)
             for i in range(nfunc)]
    lines = [[e.intern_frame(funcs[i], 10 * i + k + 1) for k in range(5)] for i in range(nfunc)]
    children = [[(3 * i + k) % nfunc for k in (1, 2, 3)] for i in range(nfunc)]
    script = []
    for t in range(THREADS):
        path = [t]  # function ids, root first
        at = [0]  # line index per frame
        for _ in range(5):
            path.append(children[path[-1]][0])
            at.append(0)
        seq = []
        status = 3
        for _ in range(20011):
            r = rng.random()
            if r < 0.4:
                at[-1] = rng.randrange(5)
            elif r < 0.5 and len(path) < 40:
                path.append(rng.choice(children[path[-1]]))
                at.append(0)
            elif r < 0.6 and len(path) > 6:
                path.pop()
                at.pop()
            if rng.random() < 0.02:
                status = rng.choice((3, 3, 2, 0))
            stack = [lines[f][k] for f, k in zip(path, at)]
            seq.append((stack, status, rng.randint(60, 100) if status & 2 else None))
        script.append(seq)
    return script


def make(path: str, samples: int, model: str = "walk", seed: int = 1) -> float:
    rng = random.Random(seed)
    w = PsrWriter(path, metadata={"interval_ns": INTERVAL_US * 1000, "rate_hz": 1e6 / INTERVAL_US,
                                  "pid": 1, "command": ["python", "bench.py"]},
                  created_wall_ns=time.time_ns(), created_mono_ns=time.monotonic_ns(),
                  force=True)
    e = F.Encoder()
    files = [e.intern_string(f"/srv/app/module_{i}.py") for i in range(20)]
    if model == "jumps":
        funcs = [e.intern_function(files[i % 20], e.intern_string(f"handler_{i}_step"), 10 * i)
                 for i in range(300)]
        frames = [e.intern_frame(funcs[i % 300], 10 * (i % 300) + i // 300 + 1)
                  for i in range(900)]
        script = _script_jumps(rng, frames)
    else:
        script = _script_walk(rng, e, files)
    refs = [e.add_thread(1, 0x1000 + t, 100 + t, f"worker-{t}", 0) for t in range(THREADS)]
    period = len(script[0])
    passes = samples // THREADS
    t0 = time.perf_counter()
    ts = 0
    for i in range(passes):
        ts += INTERVAL_US
        e.begin_pass(ts)
        k = i % period
        for t in range(THREADS):
            stack, status, cpu = script[t][k]
            e.sample(refs[t], stack, status, cpu)
        e.end_pass()
        if e.chunk_due(ts):
            w.write_sealed(*e.seal())
    w.write_sealed(*e.seal())
    w.close(dict(e.stats))
    return time.perf_counter() - t0


_WRAPPER = (
    "import resource, subprocess, sys\n"
    "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode)\n"
)


def measure(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one command, run in a wrapper process of its own so
    that the peak is that command's alone."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", _WRAPPER, *cmd], capture_output=True, text=True,
                       check=False)
    dt = time.perf_counter() - t0
    rss_kib, code = r.stdout.split()
    if code != "0":
        raise SystemExit(f"{' '.join(cmd)} failed: {r.stderr}")
    return dt, int(rss_kib) / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=10_000_000)
    ap.add_argument("--model", choices=("walk", "jumps"), default="walk")
    ap.add_argument("--keep", help="folder to keep (and reuse) the recordings in")
    args = ap.parse_args()
    folder = args.keep or tempfile.mkdtemp(prefix="psrec-bench-")
    os.makedirs(folder, exist_ok=True)
    psrec = [sys.executable, "-m", "psrec"]
    rows = []
    for n in (args.samples // 10, args.samples):
        path = os.path.join(folder, f"bench-{args.model}-{n}.psr")
        if not os.path.exists(path):
            print(f"writing {path} ({n:,} samples)...", file=sys.stderr)
            print(f"  written in {make(path, n, args.model):.1f} s", file=sys.stderr)
        size = os.path.getsize(path)
        out = os.path.join(folder, f"bench-{args.model}-{n}.speedscope.json")
        cmds = {
            "report": psrec + ["report", path],
            "report --collapsed": psrec + ["report", path, "--collapsed", "-o", "-"],
            "report --pstats": psrec + ["report", path, "--pstats", "-o",
                                        os.path.join(folder, "b.pstats"), "--force"],
            "report --slices 10s": psrec + ["report", path, "--slices", "10s"],
            "export --speedscope": psrec + ["export", "--speedscope", path, "-o", out, "--force"],
        }
        # Each measured in a fresh process; the smallest of 3 runs (the machine is shared).
        for name, cmd in cmds.items():
            runs = [measure(cmd) for _ in range(3)]
            dt = min(r[0] for r in runs)
            rss = max(r[1] for r in runs)
            rows.append((n, size, name, dt, n / dt / 1e6, rss))
    print(f"{'samples':>12} {'file MB':>8}  {'command':<22} {'seconds':>8} {'M samples/s':>12} "
          f"{'peak RSS MB':>12}")
    for n, size, name, dt, rate, rss in rows:
        print(f"{n:>12,} {size / 1e6:>8.1f}  {name:<22} {dt:>8.2f} {rate:>12.1f} {rss:>12.0f}")
    print("(seconds include starting Python and importing psrec, about 0.15 s)", file=sys.stderr)


if __name__ == "__main__":
    main()
