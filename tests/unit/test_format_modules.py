"""The reader's parts: psrec.format.reader still gives every name it gave before its split, and
the scan that recovers an unclosed file finds the chunks a clean file's index lists."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from psrec import format as fmt
from psrec.format import _constants as C
from psrec.format import open_recording, reader
from psrec.format._scan import ChunkFile

DATA = Path(__file__).resolve().parents[1] / "data"

# What other modules and the tests import from psrec.format.reader.
READER_NAMES = (
    *reader.__all__,
    "Header", "TRUNCATED", "WARNINGS_SHOWN",
    # format/describe.py's
    "_BudgetError", "_DecodeError", "_chunk_seq", "_decode_defs", "_msgpack_limits",
    "_over_budget",
)


@pytest.mark.parametrize("name", READER_NAMES)
def test_the_reader_gives_every_name_it_gave(name: str) -> None:
    assert getattr(reader, name, None) is not None, name


# Names of values that are not classes or functions (no __module__), and the module they are from.
VALUES = {"constants": None, "SAMPLE_COLUMNS": "psrec.format._layout"}


@pytest.mark.parametrize("name", sorted(fmt.__all__))
def test_the_format_package_gives_its_names_from_their_modules(name: str) -> None:
    value = getattr(fmt, name)
    where = VALUES.get(name, getattr(value, "__module__", None))
    if where is not None:
        module = importlib.import_module(where)
        assert getattr(module, name) is value, (name, where)


@pytest.mark.parametrize("name", ["two_threads", "deep_stack"])
def test_a_scan_finds_the_chunks_the_index_lists(name: str) -> None:
    path = DATA / f"{name}.psr"
    with open_recording(path) as rec:
        assert rec.clean
        listed = [(c.offset, c.type, c.length) for c in rec.chunks]
    with open(path, "rb", buffering=0) as fh:
        f = ChunkFile(str(path), fh, path.stat().st_size)
        indexed, _, problem = f.read_index()
        warned: list[str] = []
        scanned, damaged = f.scan(warned.append)
    assert indexed is not None and problem is None
    assert [(c.offset, c.type, c.length) for c in indexed] == listed
    # the scan finds the INDEX chunk too, after the chunks it lists
    assert [(c.offset, c.type, c.length) for c in scanned[:-1]] == listed
    assert scanned[-1].type == C.CHUNK_INDEX
    assert (damaged, warned) == (0, [])


def test_an_unclosed_file_has_no_index_and_is_scanned() -> None:
    path = DATA / "no_trailer.psr"
    with open(path, "rb", buffering=0) as fh:
        f = ChunkFile(str(path), fh, path.stat().st_size)
        assert f.read_index() == (None, None, None)
        warned: list[str] = []
        scanned, _ = f.scan(warned.append)
    with open_recording(path) as rec:
        assert not rec.clean
        assert [c.offset for c in rec.chunks] == [c.offset for c in scanned]
    assert len(warned) == 1 and warned[0].startswith("truncated at byte")
