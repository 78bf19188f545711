"""spec/parquet.md is normative: its checked tables must be the Parquet export's schema, column
for column, in order, with the types pyarrow writes."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow", reason="export --parquet needs pyarrow ('psrec[parquet]')")

ROOT = Path(__file__).resolve().parents[2]
SPEC = (ROOT / "spec" / "parquet.md").read_text()


def spec_tables() -> dict[str, list[tuple[str, str]]]:
    """Each checked table: its (column, type) rows, the header row and its rule left out."""
    tables: dict[str, list[tuple[str, str]]] = {}
    for match in re.finditer(r"^## (\w+) \*\(checked\)\*$", SPEC, re.M):
        lines = SPEC[match.end():].splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("|"))
        rows = []
        for line in lines[start + 2:]:
            if not line.startswith("|"):
                break
            name, kind = (c.strip() for c in line.strip("|").split("|")[:2])
            rows.append((name, kind))
        tables[match.group(1)] = rows
    return tables


def spelled(kind: object) -> str:
    """A pyarrow type as the spec writes it."""
    if isinstance(kind, pa.DictionaryType):
        return f"dictionary<{kind.index_type}, {kind.value_type}>"
    if isinstance(kind, pa.TimestampType):
        return f"timestamp[{kind.unit}, {kind.tz}]"
    if isinstance(kind, pa.ListType):
        return f"list<{spelled(kind.value_type)}>"
    return str(kind)


def test_every_table_of_the_export_is_in_the_spec_as_written() -> None:
    from psrec.analyzer.parquet import TABLES, _schemas

    schemas = _schemas(pa)
    spec = spec_tables()
    assert sorted(spec) == sorted(TABLES) == sorted(schemas)
    for table, schema in schemas.items():
        assert spec[table] == [(f.name, spelled(f.type)) for f in schema], table


def test_each_sample_s_stack_reads_back_from_the_stacks_table(tmp_path: Path) -> None:
    """The stacks table gives every sample its stack, root first (one a depth, the last its
    leaf), a sample with no Python frame included; checked against what a synthetic
    recording was given."""
    pq = pytest.importorskip("pyarrow.parquet")
    from analyzer_synth import BUSY, F_A, F_B, MAIN, Synth
    from psrec.analyzer.model import NO_STACK
    from psrec.analyzer.parquet import write_dataset

    s = Synth(str(tmp_path / "s.psr"), chunk_passes=7)
    s.thread("main", 1)
    s.thread("other", 2)
    shapes = [(), (MAIN,), (MAIN, F_A), (MAIN, F_A, F_B), (MAIN, F_B, F_A, F_B)]
    for i in range(60):
        s.sample_pass((i + 1) * s.interval_ticks,
                      {"main": (shapes[i % 5], BUSY, 0), "other": (shapes[(i * 3) % 5], BUSY, 0)})
    s.close()
    write_dataset([s.path], str(tmp_path / "ds"))
    samples = pq.read_table(str(tmp_path / "ds" / "samples")).to_pydict()
    stacks = pq.read_table(str(tmp_path / "ds" / "stacks")).to_pylist()
    by_id: dict[int, list[dict[str, object]]] = {}
    for row in stacks:
        by_id.setdefault(int(row["stack_id"]), []).append(row)
    for rows in by_id.values():
        assert [r["depth"] for r in rows] == list(range(len(rows)))
        assert [r["leaf"] for r in rows] == [False] * (len(rows) - 1) + [True]
    got = [tuple((r["file"], r["function"], r["line"]) for r in by_id[sid])
           for sid in samples["stack_id"]]
    want = [tuple((f, name, line) for f, name, line in x.stack) if x.stack
            else ((NO_STACK.filename, NO_STACK.name, 0),) for x in s.samples]
    assert sorted(got) == sorted(want)


def test_a_dataset_of_another_schema_version_is_not_added_to(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    from analyzer_synth import BUSY, MAIN, Synth
    from psrec.analyzer.parquet import SCHEMA_VERSION, write_dataset
    from psrec.format import PsrecError

    s = Synth(str(tmp_path / "s.psr"))
    s.thread("main", 1)
    s.sample_pass(1000, {"main": ((MAIN,), BUSY, 0)})
    s.close()
    write_dataset([s.path], str(tmp_path / "ds"))
    assert write_dataset([s.path], str(tmp_path / "ds"), force=True).samples == 1  # its own
    folder = tmp_path / "ds" / "recordings"
    (name,) = os.listdir(folder)
    table = pq.read_table(str(folder / name))
    old = table.set_column(table.schema.get_field_index("schema_version"),
                           table.schema.field("schema_version"),
                           pa.array([SCHEMA_VERSION - 1], pa.uint16()))
    pq.write_table(old, str(folder / name))
    with pytest.raises(PsrecError, match=f"schema version {SCHEMA_VERSION - 1}; this psrec "
                                         f"writes version {SCHEMA_VERSION}"):
        write_dataset([s.path], str(tmp_path / "ds"), force=True)
