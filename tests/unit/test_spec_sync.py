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
    "Task states": "TASK_",
    "Reader limits": "",
}
# Limits only the Python reader enforces (it works out the file-size limits and gives the
# native decoder what is left of them with each chunk).
PYTHON_ONLY = {"MAX_PAYLOAD", "MAX_RAW", "MAX_MAP_RAW", "RECORDS_BASE", "RECORDS_PER_BYTE",
               "DEFS_RAW_BASE", "DEFS_RAW_PER_BYTE", "INDEX_ENTRY_MAX", "DATA_RAW_BASE",
               "DATA_RAW_PER_BYTE", "TRIE_BASE", "TRIE_PER_BYTE", "THREADS_BASE", "THREAD_BYTES"}


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
        if re.fullmatch(r"MAX_\w+|\w+_(BASE|PER_BYTE)|INDEX_ENTRY_MAX|THREAD_BYTES", name):
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


# -- record field order: the spec's tables, the Python table, the native encoder and decoder ---

ENCODER = (ROOT / "format" / "native" / "encoder.cpp").read_text()
DECODER = (ROOT / "format" / "native" / "decoder.cpp").read_text()
# What the C++ names a field, where it is not the spec's name (spec name <- C++ expression).
CPP_ALIASES = {
    "s.size()": "length", "n": "length", "chunk_seq_": "seq", "base": "base_ts",
    "prev": "prev_pass", "pass_count_ ? last_pass_ts_ + 1 : 0": "prev_pass",
    "ts - (chunk_passes_ == 0 ? chunk_first_ts_ : last_pass_ts_)": "delta",
    "filename_id": "filename", "function_id": "function", "name_id": "name", "cmd_id": "command",
    "cmd": "command", "label_id": "label", "ppid": "parent_pid", "code": "exit_code",
    "missed": "missed_deadlines",
}


def spec_record_fields() -> dict[int, list[tuple[str, str]]]:
    """Each record's named fields (name, type) in the order of the spec's tables (a STRING's
    bytes and a PASS's entries, which have no name:type, end the list)."""
    out: dict[int, list[tuple[str, str]]] = {}
    for title in ("Definition records", "Data records"):
        table = SPEC[re.search(rf"^#+ (?:[\d.]+ )?{title} \*\(checked\)\*$", SPEC, re.M).end():]
        for line in table.splitlines()[1:]:
            if line.startswith("#"):
                break
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 3 or not NUMBER.fullmatch(cells[0]):
                continue
            fields = []
            for item in cells[2].split(", "):
                if ":" not in item:
                    break
                name, typ = item.split(":", 1)
                fields.append((name, typ))
            out[int(cells[0], 0)] = fields
    return out


def cpp_field(expr: str) -> str:
    """The spec's name for a field the C++ puts or reads as expr."""
    expr = re.sub(r"^(?:zigzag|unzigzag)\((.*)\)$", r"\1", expr.strip())
    expr = re.sub(r"^(?:\w+\.)+(\w+)$", r"\1", expr)  # a member: f.filename, c.sum.seq
    return CPP_ALIASES.get(expr, expr)


def same_field(cpp: str, spec: str) -> bool:
    # The encoder's and decoder's local `ts` stands for whichever time a record holds.
    return cpp == spec or (cpp == "ts" and spec.endswith("ts"))


def encoder_orders() -> dict[str, list[str]]:
    """The fields format/native/encoder.cpp puts into each record's body, in order, by the
    kRec constant it writes the record with (a PASS: its delta only, its entries follow; a
    PASS_TASKS: nothing, its entries are all it holds): putVarint calls, or the arguments
    of writeDefFields."""
    orders: dict[str, list[str]] = {}
    puts: dict[str, list[str]] = {}
    for line in ENCODER.splitlines():
        if m := re.match(r"\s*(\w+)\.clear\(\);", line):
            puts[m.group(1)] = []
        elif m := re.match(r"\s*putVarint\((\w+), (.*)\);$", line):
            puts.setdefault(m.group(1), []).append(cpp_field(m.group(2)))
        elif m := re.match(r"\s*writeDefFields\((kRec\w+), (.*)\);$", line):
            orders[m.group(1)] = [cpp_field(arg) for arg in m.group(2).split(",")]
        elif m := re.match(r"\s*(?:writeDef|record)\((kRec\w+), (\w+)\);", line):
            fields = puts.get(m.group(2), [])
            # A PASS's and a PASS_TASKS's entries follow their named fields (sections 4, 4.1).
            orders[m.group(1)] = (fields[:1] if m.group(1) == "kRecPass" else []
                                  if m.group(1) == "kRecPassTasks" else list(fields))
    return orders


def decoder_blocks() -> dict[str, str]:
    """The body of each `case kRecX:` of format/native/decoder.cpp, and of each function that
    says it reads `The body of kRecX` (or of two records, `kRecX and kRecY`)."""
    blocks = dict(re.findall(r"case (kRec\w+): \{(.*?)(?=\n\s+case kRec|\n\s+default:)",
                             DECODER, re.S))
    for first, second, body in re.findall(
            r"^// The body of (kRec\w+)(?: and (kRec\w+))?\b.*?\n(.*?)\n\}\n", DECODER,
            re.S | re.M):
        blocks[first] = body
        if second:
            blocks[second] = body
    return blocks


def decoder_orders() -> dict[str, list[str]]:
    """The fields the native decoder reads from each record's body, in order (a PASS: its
    delta only)."""
    orders: dict[str, list[str]] = {}
    for const, block in decoder_blocks().items():
        names = [cpp_field(m) for m in re.findall(
            r"^\s*(?:const )?(?:[\w:]+ )?([\w.]+) = (?:\w+\()*need\w*\(b,", block, re.M)]
        # A PASS's and a PASS_TASKS's entries follow their named fields (sections 4, 4.1).
        orders[const] = (names[:1] if const == "kRecPass" else [] if const == "kRecPassTasks"
                         else names)
    return orders


def rec_constant(code: int) -> str:
    name = next(n for n in dir(C) if n.startswith("REC_") and getattr(C, n) == code)
    return cpp_name(name)


def test_every_record_has_its_fields_in_the_python_table() -> None:
    from psrec.format._layout import RECORD_FIELDS

    spec = spec_record_fields()
    assert set(spec) == set(RECORD_FIELDS) == set(C.RECORD_NAMES)
    for code, fields in spec.items():
        ours = [(f.name, f.type) for f in RECORD_FIELDS[code]]
        assert ours == fields, (f"{C.RECORD_NAMES[code]}: the spec has {fields}, "
                                f"format/_layout.py has {ours}")


@pytest.mark.parametrize("where", ["encoder", "decoder"])
def test_native_field_order_matches_the_spec(where: str) -> None:
    orders = encoder_orders() if where == "encoder" else decoder_orders()
    for code, fields in spec_record_fields().items():
        const = rec_constant(code)
        assert const in orders, f"{where}.cpp: no {const} record found"
        got, want = orders[const], [name for name, _ in fields]
        assert len(got) == len(want) and all(map(same_field, got, want)), (
            f"{C.RECORD_NAMES[code]}: the spec's fields are {want}, {where}.cpp's {got}")


def test_reference_decoder_reads_fields_in_the_spec_order() -> None:
    """Each record written field by field in the spec's order, with a value of its own in each
    field, decodes to those values in both decoders (the reference decoder reads the Python
    table; the native one is the yardstick here too)."""
    from format_helpers import record, zigzag
    from psrec.format import _format
    from psrec.format._layout import RECORD_FIELDS
    from psrec.format.reference import RefBatch, RefDecoder, decode_defs

    def body(code: int) -> tuple[bytes, list[int]]:
        values = [10 + i for i in range(len(RECORD_FIELDS[code]))]
        raw = [zigzag(v) if f.form == "zigzag" else v
               for f, v in zip(RECORD_FIELDS[code], values)]
        return record(code, *raw), values

    defs = {code: body(code) for code in (C.REC_FUNCTION, C.REC_FRAME, C.REC_THREAD,
                                          C.REC_PROCESS)}
    payload = b"".join(raw for raw, _ in defs.values())
    ref = decode_defs(payload)
    native = _format.decode_defs(payload, 100)
    for i, (code, (_, values)) in enumerate(defs.items()):
        assert list(ref[i + 1][0]) == values, C.RECORD_NAMES[code]
    assert [list(map(tuple, part)) for part in ref[:5]] == \
        [list(map(tuple, part)) for part in native[:5]]
    # Events keep their fields as (type, ts, the others in order).
    begin, _ = body(C.REC_BEGIN)
    for code in (C.REC_THREAD_RENAME, C.REC_PROCESS_START, C.REC_PROCESS_EXIT,
                 C.REC_PASS_ERRORS, C.REC_MARKER, C.REC_THREAD_START):
        raw, values = body(code)
        names = [f.name for f in RECORD_FIELDS[code]]
        ts = values[names.index("ts")]
        others = [v for n, v in zip(names, values) if n != "ts"]
        events, _ = RefDecoder(1, 1).decode_data(begin + raw, RefBatch())
        assert list(events[0]) == [code, ts, *others, 0, 0, 0][:5], C.RECORD_NAMES[code]
        native_events, _ = _format.Decoder(1, 1).decode_data(begin + raw, _format.SampleBatch(),
                                                             100)
        assert [tuple(e) for e in native_events] == [tuple(e) for e in events]


def test_entry_fields_in_the_spec_order() -> None:
    """entry := head [stack] [status] [cpu], stack := pop push frame*: in the encoder, both
    decoders and psrec dump."""
    import inspect

    from psrec.format import describe, reference

    assert "entry := head:varint [stack] [status] [cpu]" in SPEC
    assert "stack := pop:varint push:varint frame_id:varint * push" in SPEC
    sources = {
        "encoder.cpp": (ENCODER[ENCODER.index("void Encoder::sample("):],
                        ["if (stack_changed) {", "t.stack.size() - common", "total - common",
                         "if (status_changed) {", "if (cpu) putVarint"]),
        "decoder.cpp": (decoder_blocks()["kRecPass"],
                        ["flags & kEntryStack", "pop = need", "push = need",
                         "flags & kEntryStatus", "flags & kEntryCpu"]),
        "reference.py": (inspect.getsource(reference._Chunk.read_pass),
                         ["flags & C.ENTRY_STACK", "pop = b.varint()", "push = b.varint()",
                          "flags & C.ENTRY_STATUS", "flags & C.ENTRY_CPU"]),
        "describe.py": (inspect.getsource(describe._fields),
                        ["flags & C.ENTRY_STACK", "pop, push = b.varint(), b.varint()",
                         "flags & C.ENTRY_STATUS", "flags & C.ENTRY_CPU"]),
    }
    for where, (source, steps) in sources.items():
        at = [source.find(step) for step in steps]
        assert -1 not in at and at == sorted(at), f"{where}: {dict(zip(steps, at))}"


SAMPLE_COLUMNS_HPP = (ROOT / "format" / "native" / "sample_columns.hpp").read_text()
CTYPE_OF = {"q": "int64_t", "I": "uint32_t", "B": "uint8_t"}


def spec_sample_columns() -> list[tuple[str, str]]:
    """Section 8.1's table: (column, typecode) in order."""
    body = SPEC[SPEC.index("### 8.1 Sample columns *(checked columns)*"):]
    rows = []
    for line in body.splitlines()[1:]:
        if line.startswith("#"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1] in CTYPE_OF:
            rows.append((cells[0], cells[1]))
    return rows


def test_sample_columns_in_step() -> None:
    """The spec's columns are the Python twin's (format/_layout.py), the native struct's
    (sample_columns.hpp, each of the C++ type its typecode names), the bound SampleBatch's
    properties and _format.pyi's, and the reference decoder's arrays, in the same order."""
    from psrec.format import _format
    from psrec.format._layout import SAMPLE_COLUMNS
    from psrec.format.reference import RefBatch

    spec = spec_sample_columns()
    assert len(spec) >= 6, spec
    assert [(c.name, c.typecode) for c in SAMPLE_COLUMNS] == spec, "format/_layout.py"
    native = re.findall(r'X\((\w+), (\w+), "(\w)"\)', SAMPLE_COLUMNS_HPP)
    assert [(name, code) for name, _, code in native] == spec, "sample_columns.hpp"
    for name, ctype, code in native:
        assert CTYPE_OF[code] == ctype, f"{name}: typecode {code} but C++ type {ctype}"
    assert [tuple(c) for c in _format.SAMPLE_COLUMNS] == spec, "the bound SAMPLE_COLUMNS"
    batch = _format.SampleBatch()
    assert all(getattr(batch, name) == b"" for name, _ in spec)
    stub = (ROOT / "format" / "_format.pyi").read_text()
    stub_batch = stub[stub.index("class SampleBatch:"):]
    stub_batch = stub_batch[:stub_batch.index("\nclass ")]
    assert re.findall(r"def (\w+)\(self\) -> bytes", stub_batch) == [n for n, _ in spec]
    ref = RefBatch()
    assert [(n, getattr(ref, n).typecode) for n, _ in spec] == spec


def test_reserved_status_bits_are_not_defined() -> None:
    """0x08 and 0x80 of the status byte are reserved (section 4.1): nothing defines them."""
    assert "Bits 0x08 and 0x80 are reserved and zero." in SPEC
    defined = {getattr(C, n) for n in dir(C) if n.startswith("STATUS_")}
    assert not defined & {0x08, 0x80}
