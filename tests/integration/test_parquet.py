"""`psrec export --parquet`: recordings of live targets as one Parquet dataset, read back by
DuckDB and by Dask on a distributed LocalCluster. Each engine's time per function, wall and
CPU, own and total, equals what psrec's own reports give for the same recordings."""

from __future__ import annotations

import json
import math
import os
import re
from collections import defaultdict
from pathlib import Path

import pytest
from rec_live import SYSTEM_PYTHON, TARGETS, one_python, psrec

pytestmark = [pytest.mark.live, pytest.mark.timeout(300)]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "commands.md"
Key = tuple[str, str, int]  # function, file, first line
Times = dict[Key, list[float]]  # own wall, total wall, own CPU, total CPU (seconds)

TOTALS_SQL = """
WITH s AS (SELECT * FROM read_parquet('{d}/samples/**/*.parquet', hive_partitioning = true)),
     k AS (SELECT * FROM read_parquet('{d}/stacks/*.parquet')),
     own AS (SELECT k.function, k.file, k.first_line,
                    sum(s.wall_ns) AS own_wall, sum(s.cpu_ns) AS own_cpu
             FROM s JOIN k USING (recording, stack_id) WHERE k.leaf GROUP BY ALL),
     fs AS (SELECT recording, stack_id, function, file, first_line FROM k WHERE outermost),
     total AS (SELECT fs.function, fs.file, fs.first_line,
                      sum(s.wall_ns) AS total_wall, sum(s.cpu_ns) AS total_cpu
               FROM s JOIN fs USING (recording, stack_id) GROUP BY ALL)
SELECT function, file, first_line, coalesce(own_wall, 0), total_wall,
       coalesce(own_cpu, 0), total_cpu
FROM total LEFT JOIN own USING (function, file, first_line)
"""


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three recordings of two programs on two interpreters: per_second.py (one thread that
    spins in a function a second) twice, and rec_churn.py (short threads, most of the time
    off a CPU), so that functions repeat across recordings and CPU time is not wall time."""
    folder = tmp_path_factory.mktemp("fleet")
    python = one_python()[0].values[0]  # type: ignore[attr-defined]
    runs = [(python, "per_second.py", "2"), (SYSTEM_PYTHON, "per_second.py", "2"),
            (python, "rec_churn.py", "1", "2", "300")]
    out = []
    for n, (py, script, *args) in enumerate(runs):
        path = folder / f"r{n}.psr"
        r = psrec("record", "-q", "-r", "1000", "-o", str(path), "--", py,
                  str(TARGETS / script), *args)
        assert r.returncode == 0, r.stderr
        out.append(path)
    return out


def _psrec_times(paths: list[Path]) -> Times:
    """Each function's times as psrec.load's function table gives them, summed over the
    recordings (a function's samples are in one recording or another)."""
    import psrec

    times: Times = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for path in paths:
        for mode, at in (("wall", 0), ("cpu", 2)):
            for row in psrec.load(str(path), mode).functions():
                t = times[(row.name, row.filename, row.line)]
                t[at] += row.own_s
                t[at + 1] += row.total_s
    return dict(times)


def _export(paths: list[Path], out: Path) -> None:
    r = psrec("export", "--parquet", *map(str, paths), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert f"psrec: wrote {out} (" in r.stderr


def _same(engine: Times, ours: Times) -> None:
    """Equal within rounding: a nanosecond a sample, at most."""
    wrong = {}
    for key in set(engine) | set(ours):
        a, b = engine.get(key, [0.0] * 4), ours.get(key, [0.0] * 4)
        if any(not math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-5) for x, y in zip(a, b)):
            wrong[key] = (a, b)
    assert not wrong, json.dumps({str(k): v for k, v in list(wrong.items())[:10]}, indent=1)
    assert sum(t[1] for t in ours.values()) > 0 and sum(t[3] for t in ours.values()) > 0


def test_duckdb_gives_each_function_the_time_psrec_report_gives(recordings: list[Path],
                                                                 tmp_path: Path) -> None:
    import duckdb

    out = tmp_path / "fleet"
    _export(recordings, out)
    rows = duckdb.sql(TOTALS_SQL.format(d=out)).fetchall()
    engine = {(f, file, line): [ow / 1e9, tw / 1e9, oc / 1e9, tc / 1e9]
              for f, file, line, ow, tw, oc, tc in rows}
    _same(engine, _psrec_times(recordings))
    # The partitions are columns; every recording is there, with its threads and host.
    parts = duckdb.sql(f"SELECT count(DISTINCT recording), count(DISTINCT host), "
                       f"count(DISTINCT date) FROM read_parquet('{out}/samples/**/*.parquet', "
                       "hive_partitioning = true)").fetchall()
    assert parts[0][0] == 3 and parts[0][1] == 1 and parts[0][2] >= 1, parts
    named = duckdb.sql(f"SELECT DISTINCT name FROM read_parquet('{out}/threads/*.parquet')"
                       ).fetchall()
    assert ("phases",) in named
    # A stack's outermost frames are one a function of it: its distinct functions.
    differ = duckdb.sql(f"""
        WITH k AS (SELECT * FROM read_parquet('{out}/stacks/*.parquet'))
        (SELECT recording, stack_id, function, file, first_line FROM k WHERE outermost
         EXCEPT ALL SELECT DISTINCT recording, stack_id, function, file, first_line FROM k)
        UNION ALL
        (SELECT DISTINCT recording, stack_id, function, file, first_line FROM k
         EXCEPT ALL SELECT recording, stack_id, function, file, first_line FROM k
         WHERE outermost)""").fetchall()
    assert not differ, differ[:5]


def test_a_dask_cluster_gives_each_function_the_time_psrec_report_gives(
        recordings: list[Path], tmp_path: Path) -> None:
    """The same question, on Dask's distributed scheduler (a LocalCluster of two worker
    processes), as a fleet's would be asked on many machines."""
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    out = tmp_path / "fleet"
    _export(recordings, out)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster):
        s = dd.read_parquet(str(out / "samples"), columns=["recording", "stack_id", "wall_ns",
                                                           "cpu_ns"])
        s["recording"] = s["recording"].astype(str)
        k = dd.read_parquet(str(out / "stacks"))
        k["recording"] = k["recording"].astype(str)
        keys = ["function", "file", "first_line"]
        own = (s.merge(k[k["leaf"]], on=["recording", "stack_id"])
               .groupby(keys)[["wall_ns", "cpu_ns"]].sum().compute())
        fs = k[k["outermost"]][["recording", "stack_id", *keys]]
        total = (s.merge(fs, on=["recording", "stack_id"])
                 .groupby(keys)[["wall_ns", "cpu_ns"]].sum().compute())
    engine: Times = {}
    for key, row in total.iterrows():
        o = own.loc[key] if key in own.index else None
        engine[(key[0], key[1], int(key[2]))] = [
            (o["wall_ns"] if o is not None else 0) / 1e9, row["wall_ns"] / 1e9,
            (o["cpu_ns"] if o is not None else 0) / 1e9, row["cpu_ns"] / 1e9]
    _same(engine, _psrec_times(recordings))


@pytest.fixture(scope="module")
def native_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """per_second.py recorded with --native: its evaluation loop is the innermost frame of
    most of its stacks, and _start the outermost."""
    path = tmp_path_factory.mktemp("native") / "n.psr"
    python = one_python()[0].values[0]  # type: ignore[attr-defined]
    r = psrec("record", "-q", "--native", "-r", "1000", "-o", str(path), "--", python,
              str(TARGETS / "per_second.py"), "2")
    assert r.returncode == 0, r.stderr
    return path


def _doc_queries() -> list[str]:
    """The Python blocks of docs/commands.md's fleet section, as a user would paste them."""
    section = DOCS.read_text().split("### A fleet, queried together", 1)[1]
    return re.findall(r"```python\n(.*?)```", section.split("\n### ", 1)[0], re.S)


def test_every_fleet_query_of_the_docs_gives_what_psrec_report_gives(
        recordings: list[Path], native_recording: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each query of the docs' fleet section (DuckDB, own and total CPU time; Dask, own),
    run as written over an export of Python and --native recordings: each row is the own or
    total CPU time that psrec report's default view gives the function (none is the
    evaluation loop's time), and the first row is the largest of them."""
    import psrec

    queries = _doc_queries()
    assert len(queries) == 3, queries
    paths = [*recordings, native_recording]
    _export(paths, tmp_path / "fleet")
    ours: dict[str, dict[tuple[str, str], float]] = {"own": defaultdict(float),
                                                     "total": defaultdict(float)}
    for path in paths:
        for row in psrec.load(str(path), "cpu").functions():
            ours["own"][(row.name, row.filename)] += row.own_s
            ours["total"][(row.name, row.filename)] += row.total_s
    monkeypatch.chdir(tmp_path)
    for code in queries:
        ns: dict[str, object] = {}
        exec(compile(code, str(DOCS), "exec"), ns)  # noqa: S102 - the docs' own code
        top = ns["top"]
        if "client" in ns:  # Dask: a Series of own CPU seconds by (host, function, file)
            ns["client"].shutdown()  # type: ignore[attr-defined]
            measure = "own"
            rows = [(f, file, v) for (_, f, file), v in top.items()]  # type: ignore[attr-defined]
        else:
            measure = "own" if "own_cpu_s" in top.columns else "total"  # type: ignore[attr-defined]
            rows = [(f, file, v) for _, f, file, v in top.fetchall()]  # type: ignore[attr-defined]
        want = ours[measure]
        assert len(rows) >= 5, rows
        wrong = [(f, file, v, want.get((f, file), 0.0)) for f, file, v in rows
                 if not math.isclose(v, want.get((f, file), 0.0), abs_tol=1e-5)]
        assert not wrong, (measure, wrong[:5])
        assert math.isclose(rows[0][2], max(want.values()), abs_tol=1e-5), (measure, rows[:3])
        # (_start and the start-up chain are where every stack of the native recording
        # begins: report shows them, with its whole time as their total)
        hidden = {"_PyEval_EvalFrameDefault"} | ({"_start"} if measure == "own" else set())
        assert not hidden & {f for f, _, _ in rows}, rows


def test_parquet_usage_errors(recordings: list[Path], tmp_path: Path) -> None:
    """A view would leave samples out: refused, not ignored. Other outputs read several
    recordings as one. A folder of recordings is its .psr files."""
    r = psrec("export", "--parquet", "--mode", "cpu", str(recordings[0]), "-o",
              str(tmp_path / "x"))
    assert r.returncode == 2
    assert "psrec: error: --mode does nothing with --parquet: it writes every sample" in r.stderr
    r = psrec("export", "--speedscope", *map(str, recordings[:2]))  # read as one
    assert r.returncode == 0, r.stderr
    merged = str(recordings[0]).removesuffix(".psr") + "+1.speedscope.json"
    assert f"psrec: wrote {merged}" in r.stderr and os.path.exists(merged)
    out = tmp_path / "d"
    r = psrec("export", "--parquet", str(recordings[0].parent), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "samples of 3 recordings" in r.stderr
    r = psrec("export", "--parquet", str(recordings[0]), "-o", str(out))
    assert r.returncode == 1 and f"psrec: error: {out} exists" in r.stderr
    r = psrec("export", "--parquet", str(recordings[0]), "-o", str(out), "--force")
    assert r.returncode == 0, r.stderr
