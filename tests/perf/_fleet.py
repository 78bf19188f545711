"""Figure F: a fleet's recordings queried together.

FLEET_FILES synthetic recordings of FLEET_SAMPLES thread-samples each (figure 6's generator,
a host and a seed each; cached beside the others), written as one Parquet dataset by `psrec
export --parquet` (every recording of a folder, one process a CPU), then the fleet question
of docs/commands.md (the functions that took the most CPU on each host) asked of it in
DuckDB; and `psrec report` of the folder, its recordings read as one (spec section 11).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from ._figures import Ctx
from ._report import Row, summarize
from ._synth import GENERATOR_VERSION, write_synthetic

FLEET_SQL = """
WITH s AS (SELECT host, recording, stack_id, sum(cpu_ns) AS cpu_ns
           FROM read_parquet('{d}/samples/**/*.parquet', hive_partitioning = true)
           GROUP BY ALL),
     f AS (SELECT recording, stack_id, function, file
           FROM read_parquet('{d}/stacks/*.parquet') WHERE outermost)
SELECT host, function, file, sum(cpu_ns) / 1e9 AS cpu_s
FROM s JOIN f USING (recording, stack_id) GROUP BY ALL ORDER BY cpu_s DESC LIMIT 20
"""


def fig_fleet(ctx: Ctx, cache: str) -> None:
    files = 10 if ctx.quick else 100
    each = 1_000_000
    folder = os.path.join(cache, f"fleet-v{GENERATOR_VERSION}-{files}x{each}")
    os.makedirs(folder, exist_ok=True)
    for n in range(files):
        path = os.path.join(folder, f"host{n:03d}.psr")
        if not os.path.exists(path):
            write_synthetic(path + ".tmp", each, seed=n + 1, host=f"host{n:03d}", pid=1000 + n)
            os.replace(path + ".tmp", path)
    total = files * each
    ctx.log(f"[F] fleet: {files} recordings of {each:,} samples, export --parquet, DuckDB")
    export_s = []
    out = ctx.path("fleet", "parquet")
    for _ in range(1 if not ctx.quick else 1):
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "psrec", "export", "--parquet", folder, "-o",
                            out, "--force"], capture_output=True, text=True)
        export_s.append(time.perf_counter() - t0)
        if r.returncode != 0:
            raise RuntimeError(f"export --parquet failed: {r.stderr.strip()}")
    import duckdb

    query_s = []
    for _ in range(3):
        t0 = time.perf_counter()
        rows = duckdb.sql(FLEET_SQL.format(d=out)).fetchall()
        query_s.append(time.perf_counter() - t0)
    assert rows, "the fleet question found nothing"
    report_s = []
    for _ in range(3):
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "psrec", "report", "--mode", "cpu", folder],
                           capture_output=True, text=True)
        report_s.append(time.perf_counter() - t0)
        if r.returncode != 0 or f"({files} recordings)" not in r.stdout.split("\n")[0]:
            raise RuntimeError(f"psrec report of the fleet failed: {r.stderr.strip()}")
    ctx.raw["fleet"] = {"files": files, "samples": total, "export_s": export_s,
                        "query_s": query_s, "report_s": report_s}
    ctx.add(Row("F", f"psrec report --mode cpu of the {files} recordings read as one, "
                "start-up included", "M samples/s", "higher",
                {"psrec": summarize([total / s / 1e6 for s in report_s])}, "≥ 5",
                lambda p, b: p.median >= 5.0))
    ctx.add(Row("F", f"export --parquet of {files} recordings of {each / 1e6:g} M samples, "
                f"{os.cpu_count()} CPUs, start-up included", "M samples/s", "higher",
                {"psrec": summarize([total / s / 1e6 for s in export_s])}, "≥ 5",
                lambda p, b: p.median >= 5.0))
    ctx.add(Row("F", f"DuckDB: the fleet question over the {total / 1e6:g} M samples", "s",
                "lower", {"psrec": summarize(query_s)}, "< 5 s", lambda p, b: p.median < 5.0))
