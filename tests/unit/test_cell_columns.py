"""The cells' columns are declared once (analyzer/model.py's CELL_COLUMNS): the types that
name them follow that table, and both engines sum a recording into the same columns, in its
order."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest
from psrec.analyzer.engine import engine_for
from psrec.analyzer.model import CELL_COLUMNS, Cell, CellColumns, Selection
from psrec.format import native_available, open_recording

DATA = Path(__file__).resolve().parents[1] / "data"
NAMES = tuple(c.name for c in CELL_COLUMNS)


def test_the_cell_types_name_the_declared_columns_in_order() -> None:
    assert Cell._fields == NAMES
    assert tuple(f.name for f in fields(CellColumns)) == NAMES
    assert CellColumns.TYPES == tuple(c.typecode for c in CELL_COLUMNS)


def _sums(native: bool) -> tuple[list[int], ...]:
    engine = engine_for(native)
    with open_recording(DATA / "two_threads.psr") as rec:
        acc = engine.accumulator(Selection())
        for batch in engine.stream(rec):
            acc.add(batch)
    return tuple(list(c) for c in acc.columns())


@pytest.mark.skipif(not native_available(), reason="the native engine is not built")
def test_both_engines_give_the_declared_columns() -> None:
    native, python = _sums(True), _sums(False)
    assert len(native) == len(python) == len(CELL_COLUMNS)
    key = sorted(zip(*python))
    assert sorted(zip(*native)) == key and key
