"""Analyzer throughput: report, --collapsed and export --speedscope on a synthetic recording.

Usage: python tests/perf/analyzer_bench.py [--samples 10000000] [--keep DIR]

The recording is written with the format's own encoder: 4 threads at 10 kHz, 400 distinct
stacks 8 to 40 frames deep, each thread changing stack on about one sample in five, with
statuses and CPU times. Each command runs as a real `psrec` process; the table shows its wall
time, decode-plus-aggregation rate and peak RSS. A recording with a tenth of the samples and
the same stacks is measured too, so that memory growing with samples would show.
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time

from psrec.format import PsrWriter
from psrec.format import _format as F

THREADS = 4
INTERVAL_US = 100


def make(path: str, samples: int, seed: int = 1) -> float:
    rng = random.Random(seed)
    w = PsrWriter(path, metadata={"interval_ns": INTERVAL_US * 1000, "rate_hz": 1e6 / INTERVAL_US,
                                  "pid": 1, "command": ["python", "bench.py"]},
                  created_wall_ns=time.time_ns(), created_mono_ns=time.monotonic_ns(),
                  force=True)
    e = F.Encoder()
    files = [e.intern_string(f"/srv/app/module_{i}.py") for i in range(20)]
    funcs = [e.intern_function(files[i % 20], e.intern_string(f"handler_{i}_step"), 10 * i)
             for i in range(300)]
    frames = [e.intern_frame(funcs[i % 300], 10 * (i % 300) + i // 300 + 1) for i in range(900)]
    base = [rng.sample(frames, 6) for _ in range(8)]
    stacks = [base[i % 8] + rng.sample(frames, rng.randint(2, 34)) for i in range(400)]
    refs = [e.add_thread(1, 0x1000 + t, 100 + t, f"worker-{t}", 0) for t in range(THREADS)]
    # A fixed pseudo-random script per thread, cycled: (stack index, status, cpu) per sample.
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
    passes = samples // THREADS
    t0 = time.perf_counter()
    ts = 0
    for i in range(passes):
        ts += INTERVAL_US
        e.begin_pass(ts)
        k = i % 10007
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
    ap.add_argument("--keep", help="folder to keep (and reuse) the recordings in")
    args = ap.parse_args()
    folder = args.keep or tempfile.mkdtemp(prefix="psrec-bench-")
    os.makedirs(folder, exist_ok=True)
    psrec = [sys.executable, "-m", "psrec"]
    rows = []
    for n in (args.samples // 10, args.samples):
        path = os.path.join(folder, f"bench-{n}.psr")
        if not os.path.exists(path):
            print(f"writing {path} ({n:,} samples)...", file=sys.stderr)
            print(f"  written in {make(path, n):.1f} s", file=sys.stderr)
        size = os.path.getsize(path)
        out = os.path.join(folder, f"bench-{n}.speedscope.json")
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
