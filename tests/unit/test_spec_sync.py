"""spec/psr-format.md is normative: its checked tables must match the constants in code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from psrec.format import _constants as C

ROOT = Path(__file__).resolve().parents[2]
SPEC = (ROOT / "spec" / "psr-format.md").read_text()
NUMBER = re.compile(r"0x[0-9A-Fa-f]+|\d+")
HEADER = (ROOT / "format" / "native" / "constants.hpp").read_text()

# Section title (as it appears in the spec) -> prefix of the Python constant names.
TABLES = {
    "Constants": "",
    "Chunk types": "CHUNK_",
    "Chunk flags": "CHUNK_FLAG_",
    "Definition records": "REC_",
    "Data records": "REC_",
    "Entry flags": "ENTRY_",
    "Thread status byte": "STATUS_",
    "Reader limits": "",
}
# Limits only the Python reader enforces (it works out the file-size limits and gives the
# native decoder what is left of them with each chunk).
PYTHON_ONLY = {"MAX_PAYLOAD", "MAX_RAW", "MAX_MAP_RAW", "RECORDS_BASE", "RECORDS_PER_BYTE",
               "DEFS_RAW_BASE", "DEFS_RAW_PER_BYTE", "INDEX_ENTRY_MAX"}


def checked_tables() -> dict[str, dict[str, int]]:
    """Every '(checked)' table of the spec, as {constant name: value}."""
    tables: dict[str, dict[str, int]] = {}
    for match in re.finditer(r"^#+ (?:[\d.]+ )?(.+?) \*\(checked\)\*$", SPEC, re.M):
        title = match.group(1)
        body = SPEC[match.end():]
        rows: dict[str, int] = {}
        for line in body.splitlines()[1:]:
            if line.startswith("#"):
                break
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 2:
                continue
            if NUMBER.fullmatch(cells[0]):  # | code | name | ...
                rows[TABLES[title] + cells[1]] = int(cells[0], 0)
            elif NUMBER.fullmatch(cells[1]):  # | name | value | ...
                rows[TABLES[title] + cells[0]] = int(cells[1], 0)
        tables[title] = rows
    return tables


def cpp_constants() -> dict[str, int]:
    return {
        name: int(value, 0)
        for name, value in re.findall(r"constexpr \w+ (k\w+) = (0x[0-9A-Fa-f]+|\d+);", HEADER)
    }


def cpp_name(py_name: str) -> str:
    return "k" + "".join(w.capitalize() for w in py_name.lower().split("_"))


def test_spec_has_every_checked_table() -> None:
    assert set(checked_tables()) == set(TABLES)


@pytest.mark.parametrize("title", sorted(TABLES))
def test_spec_table_matches_python_and_native(title: str) -> None:
    rows = checked_tables()[title]
    assert rows, f"table {title!r} has no rows"
    cpp = cpp_constants()
    for name, value in rows.items():
        ours = getattr(C, name)
        assert ours == value, f"{name}: spec says {value}, format/_constants.py says {ours}"
        if name in PYTHON_ONLY:
            continue
        native = cpp.get(cpp_name(name))
        assert native == value, f"{name}: spec says {value}, constants.hpp says {native}"


def test_every_code_constant_is_in_the_spec() -> None:
    specified = {name for rows in checked_tables().values() for name in rows}
    for name in dir(C):
        not_tabled = ("CHUNK_SYNC", "CHUNK_NAMES", "CHUNK_HEADER_SIZE", "ENTRY_FLAG_BITS")
        if re.match(r"(CHUNK|REC|ENTRY|STATUS)_", name) and name not in not_tabled:
            assert name in specified, f"{name} is in format/_constants.py but not in the spec"
    for cname in cpp_constants():
        py = [n for n in dir(C) if cpp_name(n) == cname]
        assert py, f"{cname} is in constants.hpp but has no Python twin"


def test_spec_header_layout_matches_writer() -> None:
    from psrec.format._layout import Header

    raw = Header(C.FORMAT_MAJOR, C.FORMAT_MINOR, 1, 2, 1000).pack()
    assert len(raw) == C.HEADER_SIZE
    assert raw[:8] == C.MAGIC
    assert "`89 50 53 52 0D 0A 1A 0A`" in SPEC
    assert bytes.fromhex("89 50 53 52 0D 0A 1A 0A") == C.MAGIC
    assert C.TRAILER_MAGIC.decode() == "PSR-END\n" and "`PSR-END\\n`" in SPEC


def test_every_limit_in_code_is_in_the_spec() -> None:
    """The limits of section 9 and the constants of section 1.1: every MAX_ constant and
    every file-size limit in code has its row."""
    specified = {name for rows in checked_tables().values() for name in rows}
    for name in dir(C):
        if re.fullmatch(r"MAX_\w+|\w+_(BASE|PER_BYTE)|INDEX_ENTRY_MAX", name):
            assert name in specified, f"{name} is in format/_constants.py but not in the spec"


def test_native_messages_name_the_limits() -> None:
    """The decoder's errors name the limits they enforce, with their values."""
    decoder = (ROOT / "format" / "native" / "decoder.cpp").read_text()
    assert f"MAX_DEPTH ({C.MAX_DEPTH})" in decoder
    assert f"MAX_CHUNK_SAMPLES ({C.MAX_CHUNK_SAMPLES})" in decoder
    assert f"MAX_CHUNK_PASSES ({C.MAX_CHUNK_PASSES})" in decoder


def test_spec_words_for_the_thread_ref_limit_and_the_cpu_unit() -> None:
    """The prose that restates a constant: the thread-ref limit as a power of two, and the CPU
    field's unit (the header's tick, which psrec's writer sets to 1 us)."""
    assert C.MAX_THREAD_REF == 2**24 and "(2^24, section 9)" in SPEC
    assert "`cpu` is in the ticks of the file header (offset 32: microseconds" in SPEC
    import inspect

    from psrec.format.writer import PsrWriter

    assert inspect.signature(PsrWriter).parameters["tick_ns"].default == 1000
