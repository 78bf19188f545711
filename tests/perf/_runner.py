"""Runs a workload script as __main__ and records what it costs the process itself.

Usage: python _runner.py RESULT_JSON SCRIPT [ARGS...]

Profilers launch this runner in place of the workload, so the target's own CPU time is measured
inside the target (process_time around the work) whichever tool started it. The workload's last
stdout line (fixed_work.py: "RESULT elapsed=... fib=... fib_share=...") is parsed into the JSON.
"""

import io
import json
import runpy
import sys
import time


def run() -> None:
    out_path, script = sys.argv[1], sys.argv[2]
    sys.argv = [script, *sys.argv[3:]]
    captured = io.StringIO()
    real_stdout = sys.stdout
    sys.stdout = captured
    cpu0, wall0 = time.process_time(), time.perf_counter()
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        cpu1, wall1 = time.process_time(), time.perf_counter()
        sys.stdout = real_stdout
    result = {"cpu_s": cpu1 - cpu0, "wall_s": wall1 - wall0}
    for line in captured.getvalue().splitlines():
        if line.startswith("RESULT "):
            for kv in line.split()[1:]:
                k, _, v = kv.partition("=")
                result[k] = float(v)
    with open(out_path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    run()
