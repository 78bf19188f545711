"""spec/parquet.md is normative: its checked tables must be the Parquet export's schema, column
for column, in order, with the types pyarrow writes."""

from __future__ import annotations

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
    return str(kind)


def test_every_table_of_the_export_is_in_the_spec_as_written() -> None:
    from psrec.analyzer.parquet import TABLES, _schemas

    schemas = _schemas(pa)
    spec = spec_tables()
    assert sorted(spec) == sorted(TABLES) == sorted(schemas)
    for table, schema in schemas.items():
        assert spec[table] == [(f.name, spelled(f.type)) for f in schema], table
