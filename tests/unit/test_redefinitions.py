"""An id given other content by a later definition (spec 3.1 forbids it) is a warning and the
first definition stands, in both engines, the merge and the Parquet export alike; recordings
whose clocks cannot share one timeline are refused in one line (spec 11, rule 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from analyzer_synth import BUSY, Synth
from format_helpers import assemble, read_samples, record, string_record, zigzag
from psrec.format import _constants as C
from psrec.format import open_recording, open_recordings
from psrec.format.errors import FormatError
from psrec.format.writer import snapshot

RUN = ("app.py", "run", 10)
WORK = ("app.py", "work", 20)


def _synth(path: Path, wall_ns: int | None = None) -> Synth:
    kw = {} if wall_ns is None else {"created_wall_ns": wall_ns}
    s = Synth(str(path), chunk_passes=20, **kw)
    s.thread("main", 1)
    for i in range(60):
        s.sample_pass((i + 1) * s.interval_ticks, {"main": ((RUN, WORK), BUSY, 500)})
    s.close()
    return s


def _relabelled(src: Path, out: Path) -> None:
    """src with, after its first DATA chunk, a DEFS chunk that gives every FRAME id, the
    first STRING id and the first FUNCTION id other content."""
    with open_recording(src) as rec:
        chunks = [(c.type, rec.payload(c)) for c in rec.chunks
                  if c.type in (C.CHUNK_METADATA, C.CHUNK_DEFS, C.CHUNK_DATA)]
        frames = sorted(rec.definitions().frames)
        functions = sorted(rec.definitions().functions)
    bad = string_record(1, "<not the first>")
    bad += record(C.REC_FUNCTION, functions[0], 1, 1, 999, 0, 0, 0)
    for fid in frames:
        if fid:
            bad += record(C.REC_FRAME, fid, functions[-1], zigzag(7777))
    first_data = next(i for i, c in enumerate(chunks) if c[0] == C.CHUNK_DATA)
    chunks.insert(first_data + 1, (C.CHUNK_DEFS, bad))
    out.write_bytes(assemble([(t, p) for t, p in chunks if p is not None]))


def _stacks(path: Path | list[str], native: bool) -> list[tuple[str, ...]]:
    with open_recordings(path if isinstance(path, list) else str(path)) as rec:
        rows, _ = read_samples(rec, native)
        defs = rec.definitions()
        return [tuple(f"{defs.frame(f).function.name}:{defs.frame(f).line}" for f in r[2])
                for r in rows]


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_a_later_definition_with_other_content_is_a_warning_and_the_first_stands(
        tmp_path: Path, native: bool) -> None:
    src, bad = tmp_path / "src.psr", tmp_path / "bad.psr"
    _synth(src)
    _relabelled(src, bad)
    want = _stacks(src, native)
    assert want and all(s == ("run:10", "work:20") for s in want), set(want)
    assert _stacks(bad, native) == want
    with open_recording(bad) as rec:
        rec.definitions()
        assert any("other content" in w for w in rec.warnings), rec.warnings
        assert rec.definitions().conflicts > 0
        assert rec.definitions().strings[1] != "<not the first>"
    # Read with others, and copied: the same first definitions.
    assert _stacks([str(bad)], native) == want
    copy = tmp_path / "copy.psr"
    snapshot(bad, copy)
    assert _stacks(copy, native) == want


def test_recordings_whose_clocks_cannot_share_a_timeline_are_refused(tmp_path: Path) -> None:
    """b is created 9 * 10^18 ns (9 * 10^15 ticks) after a; its samples lie near the end of
    the 2^63 ticks a timeline may count. Where they would pass it on a's timeline the merge
    is refused in one line naming both files; where they stay below it, their times are
    exact (nothing wraps)."""
    a, b = tmp_path / "a.psr", tmp_path / "b.psr"
    _synth(a, wall_ns=-4 * 10**18)
    gap_ticks = 9 * 10**18 // 1000
    for start, fits in (((1 << 63) - gap_ticks + 10**6, False),
                        ((1 << 63) - gap_ticks - 10**9, True)):
        s = Synth(str(b), chunk_passes=20, created_wall_ns=-4 * 10**18 + 9 * 10**18)
        s.thread("main", 1)
        for i in range(5):
            s.sample_pass(start + i * s.interval_ticks, {"main": ((RUN,), BUSY, 500)})
        s.close()
        if not fits:
            with pytest.raises(FormatError) as err:
                open_recordings([str(a), str(b)])
            assert "cannot be put on one timeline" in str(err.value)
            assert str(a) in str(err.value) and str(b) in str(err.value)
            continue
        for native in (True, False):
            with open_recordings([str(a), str(b)]) as rec:
                rows, _ = read_samples(rec, native)
            assert max(r[0] for r in rows) == start + 4 * 1000 + gap_ticks, native
