"""Versioning: unknown chunk and record types are skipped; an unknown major version is refused
with a message naming both versions (spec 1.2, 1.4, 3)."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest
from format_helpers import assemble, header, read_file, record, set_major, string_record, varint
from psrec.format import PsrecError, UnsupportedVersionError, native_available, open_recording
from psrec.format import _constants as C

pytestmark = pytest.mark.skipif(
    not native_available(), reason="the native codec (psrec.format._format) is not built"
)

META = msgpack.packb({"interval_ns": 1_000_000})


def _defs(extra: bytes = b"") -> bytes:
    return (string_record(1, "m.py") + extra + string_record(2, "main")
            + record(C.REC_FUNCTION, 1, 1, 2, 1) + record(C.REC_FRAME, 1, 1, 2 * 7)
            + record(C.REC_THREAD, 1, 5, 77, 78, 0, 0))


def _data(extra: bytes = b"", appended: bytes = b"") -> bytes:
    entry = varint(1 << 3 | C.ENTRY_STACK | C.ENTRY_STATUS) + varint(0) + varint(1) + varint(1)
    return (record(C.REC_BEGIN, 0, 1000, 0) + extra
            + record(C.REC_PASS, body=varint(0) + entry + b"\x01")
            + record(C.REC_MARKER, body=varint(1500) + varint(2) + appended)
            + record(C.REC_PASS, body=varint(1000)))


@pytest.mark.parametrize("trailer", [True, False], ids=["indexed", "scanned"])
@pytest.mark.parametrize("native", [True, False], ids=["native", "reference"])
def test_unknown_chunk_and_record_types_are_skipped(tmp_path: Path, trailer: bool,
                                                    native: bool) -> None:
    plain = tmp_path / "plain.psr"
    plain.write_bytes(assemble([(C.CHUNK_METADATA, META), (C.CHUNK_DEFS, _defs()),
                                (C.CHUNK_DATA, _data())], trailer=trailer))
    unknown_rec = record(0x7A, body=b"\x80\x80\x80\xff anything")
    odd = tmp_path / "odd.psr"
    odd.write_bytes(assemble([
        (C.CHUNK_METADATA, META),
        (0x42, b"a chunk type from a later minor version"),
        (C.CHUNK_DEFS, _defs(unknown_rec)),
        (0x43, b""),
        # A known record with fields appended by a later minor version (spec 3).
        (C.CHUNK_DATA, _data(unknown_rec, appended=varint(99) + b"\x00\xff")),
    ], trailer=trailer))
    want, got = read_file(plain, native), read_file(odd, native)
    assert got["samples"] == want["samples"] and len(want["samples"]) == 2
    assert got["events"] == want["events"] == [(C.REC_MARKER, 1500, 2, 0, 0)]
    assert got["defs"].strings == want["defs"].strings
    assert got["defs"].unknown_records == 1
    assert {c.type for c in got["chunks"]} >= {0x42, 0x43}
    assert [w for w in got["warnings"] if "not closed cleanly" not in w] == []
    with open_recording(odd) as rec:
        stream = rec.stream(native=native)
        list(stream)
        assert stream.summaries[0]["unknown_records"] == 1


def test_newer_major_version_is_refused_naming_both(tmp_path: Path) -> None:
    path = tmp_path / "v2.psr"
    path.write_bytes(set_major(assemble([(C.CHUNK_METADATA, META)]), C.FORMAT_MAJOR + 1))
    with pytest.raises(UnsupportedVersionError) as ei:
        open_recording(path)
    msg = str(ei.value)
    assert str(path) in msg and f"{C.FORMAT_MAJOR + 1}.{C.FORMAT_MINOR}" in msg
    assert f"{C.FORMAT_MAJOR}.x" in msg


def test_newer_minor_version_is_read(tmp_path: Path) -> None:
    path = tmp_path / "minor.psr"
    hdr = header(minor=C.FORMAT_MINOR + 3)
    path.write_bytes(assemble([(C.CHUNK_METADATA, META), (C.CHUNK_DEFS, _defs()),
                               (C.CHUNK_DATA, _data())], hdr=hdr))
    got = read_file(path)
    assert got["clean"] and len(got["samples"]) == 2


@pytest.mark.parametrize("native", [True, False], ids=["native", "reference"])
def test_native_functions_and_their_hostile_forms(tmp_path: Path, native: bool) -> None:
    """Format 1.3: a FUNCTION with a kind, a build id and an address is a native function;
    one that ends after first_line (every file before 1.3) is Python; a kind no reader knows,
    a build id no STRING defines or fields cut short read as far as they go, never crash a
    report."""
    def defs(*functions: bytes) -> bytes:
        return (string_record(1, "/usr/lib/libz.so.1") + string_record(2, "inflate")
                + string_record(3, "0123abcd") + string_record(4, "main")
                + string_record(5, "m.py") + b"".join(functions)
                + record(C.REC_FUNCTION, 9, 5, 4, 1)
                + record(C.REC_FRAME, 9, 9, 2 * 3)
                + b"".join(record(C.REC_FRAME, i, i, 2 * 16) for i in range(1, 6))
                + record(C.REC_THREAD, 1, 5, 77, 78, 0, 0))

    functions = [
        record(C.REC_FUNCTION, 1, 1, 2, 0, 1, 3, 0x4000),     # native, named
        record(C.REC_FUNCTION, 2, 1, 0, 0, 3, 0, 0),          # the interpreter, unnamed
        record(C.REC_FUNCTION, 3, 1, 2, 0, 77, 99, 1 << 40),  # a kind from later, no STRING 99
        record(C.REC_FUNCTION, 4, 1, 2, 0, 1),                # cut after kind
        record(C.REC_FUNCTION, 5, 1, 2, 0, 2, 3),             # the loop, no address
    ]
    entry = (varint(1 << 3 | C.ENTRY_STACK | C.ENTRY_STATUS) + varint(0) + varint(6)
             + b"".join(varint(f) for f in (9, 5, 4, 3, 2, 1)) + b"\x01")
    data = (record(C.REC_BEGIN, 0, 1000, 0) + record(C.REC_PASS, body=varint(0) + entry)
            + record(C.REC_PASS, body=varint(1000)))
    path = tmp_path / "native.psr"
    path.write_bytes(assemble([(C.CHUNK_METADATA, META), (C.CHUNK_DEFS, defs(*functions)),
                               (C.CHUNK_DATA, data)]))
    got = read_file(path, native)
    fns = got["defs"].functions
    assert (fns[1].kind, fns[1].name, fns[1].build_id, fns[1].address) == (1, "inflate",
                                                                           "0123abcd", 0x4000)
    assert (fns[2].kind, fns[2].name) == (3, "[libz.so.1]")
    assert (fns[3].kind, fns[3].build_id, fns[3].address) == (77, "", 1 << 40)
    assert (fns[4].kind, fns[4].build_id, fns[4].address) == (1, "", 0)
    assert (fns[5].kind, fns[5].address) == (2, 0)
    assert fns[9].kind == 0 and not fns[9].native
    assert len(got["samples"]) == 2

    import psrec

    shown = {"mixed": ["main", "inflate", "inflate"], "all": None, "python": ["main"]}
    for view, want in shown.items():
        run = psrec.load(str(path), native_frames=view, native=native)
        names = [f.function.name for f in run.stack(run.samples.stack[0])]
        if want is None:
            assert len(names) == 6
        else:
            assert names == want, (view, names)
    with pytest.raises(PsrecError, match="unknown native frames view 'Python'"):
        psrec.load(str(path), native_frames="Python", native=native)
