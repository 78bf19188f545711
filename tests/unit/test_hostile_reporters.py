"""The HTML report and the pprof export of files made to hurt their reader
(tests/unit/hostile_files.py), against the real `psrec`.

As in test_format_hostile.py, each command runs in a process of its own with at most 1 GiB of
address space (RLIMIT_AS) and 10 s. The page's size is bounded by its thread rows, states
and cells, whatever the samples: where a bound merged threads or slices, the page and the
summary line say so. The page picks its own time slices, and always slices that fit. A
pprof profile's int64 times saturate instead of failing.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import msgpack
import pytest
from analyzer_synth import BUSY, GIL, MAIN, ON_CPU, Synth
from hostile_files import (
    CAP_CHUNKS,
    CAP_THREADS,
    FAR_S,
    GOOD_SAMPLES,
    INTERVAL,
    begin,
    chunks_of,
    defs_raw,
    entry,
    good_chunks,
    layout,
    metadata_chunk,
    no_crash,
    pass_,
    psrec,
    write,
    zchunk,
)
from psrec.analyzer import page
from psrec.analyzer.page import MAX_CELLS, MAX_ROWS, MAX_STATES, OTHERS, SLICES, page_data
from psrec.analyzer.profile import Profile, View
from psrec.analyzer.registry import get
from psrec.format import _constants as C
from psrec.format import native_available

pytestmark = pytest.mark.skipif(
    not native_available(), reason="the native codec (psrec.format._format) is not built"
)

INT64_MAX = (1 << 63) - 1


def page_of(path: Path) -> Any:
    """The data a written page draws."""
    m = re.search(r'<script id="psrec-data" type="application/json">(.*?)</script>',
                  path.read_text(encoding="utf-8"), re.DOTALL)
    assert m
    return json.loads(m.group(1))


def html(path: Path, tmp_path: Path, env: dict[str, str] | None = None) -> tuple[Any, str]:
    """`psrec report --html` of a file: the page's data and the summary line."""
    out = tmp_path / "page.html"
    r = psrec("report", path, "--html", "-o", out, "--force", env=env)
    no_crash(r)
    assert r.returncode == 0, r.stderr[-2000:]
    return page_of(out), r.stderr.splitlines()[-1]


def assert_consistent(d: Any) -> None:
    """Every sample in a row and in the cells, within the page's bounds."""
    assert sum(t["samples"] for t in d["threads"]) == d["samples"]
    assert sum(t.get("threads", 1) for t in d["threads"]) == d["thread_count"]
    assert len(d["threads"]) <= MAX_ROWS
    assert sum(len(s[1]) for s in d["states"].values()) <= MAX_STATES
    assert len(d["cells"]["n"]) <= MAX_CELLS
    assert 1 <= d["slices"] <= SLICES + 2, d["slices"]
    for at, *lists in d["states"].values():
        assert at >= 0 and at + len(lists[0]) <= d["slices"]


# -- the page's memory follows what changes, not the samples ---------------------------------

def test_a_page_of_105m_samples_that_never_change_is_bounded(tmp_path: Path) -> None:
    """4096 threads, 105M samples of one stack, from a 100 KB file whose index does not say
    when its chunks' samples fall (every sample was a cell of its own: 60 s and 23 GB). The
    reader's budgets are lifted, so that every sample is read."""
    path = write("samples_at_cap", tmp_path)
    d, summary = html(path, tmp_path, env={"PSREC_BUDGET": "unlimited"})
    samples = CAP_CHUNKS * (C.MAX_CHUNK_SAMPLES // CAP_THREADS) * CAP_THREADS
    assert d["samples"] == samples and d["thread_count"] == CAP_THREADS
    assert_consistent(d)
    # each sample stands for one interval of its thread, in every cell and state
    assert sum(d["cells"]["wall"]) == samples * INTERVAL
    assert sum(sum(s[1]) for s in d["states"].values()) == samples * INTERVAL
    assert sum(sum(s[2]) for s in d["states"].values()) == samples * INTERVAL  # GIL held
    # the threads past MAX_ROWS share the last row, and the page and the summary say so
    assert len(d["threads"]) == MAX_ROWS
    others = d["threads"][-1]
    assert others["ref"] == OTHERS and others["threads"] == CAP_THREADS - MAX_ROWS + 1
    assert others["label"] == f"{CAP_THREADS - MAX_ROWS + 1:,} other threads"
    assert others["samples"] == samples // CAP_THREADS * others["threads"]
    shared = f"{CAP_THREADS - MAX_ROWS + 1:,} threads with the fewest samples share the last row"
    assert any(b.startswith(shared) for b in d["bounds"]), d["bounds"]
    assert f"{CAP_THREADS} threads" in summary and shared in summary, summary


def _profile(path: str, **view: Any) -> Profile:
    reporter = get("html")()
    v = View(**view)
    return Profile.load(path, v, slice_count=reporter.slice_count, also=reporter.also(v.mode))


def _five_threads(path: str) -> Synth:
    """Five threads over 2 s, each busy, idle or without the GIL in its own way, in stacks
    that differ by thread."""
    s = Synth(path)
    names = [f"t{i}" for i in range(5)]
    for i, n in enumerate(names):
        s.thread(n, 10 + i)
    for k in range(2000):
        entries = {}
        for i, n in enumerate(names):
            if k < 300 * i:  # thread i starts after 0.3 * i s
                continue
            status = (BUSY, GIL, ON_CPU, 0, BUSY)[(i + k // 100) % 5]
            entries[n] = ((MAIN, ("app.py", f"f{i}_{k % 7}", 20 + i)), status, 500)
        s.sample_pass(k * 1000, entries)
    s.close()
    return s


@pytest.mark.parametrize("bounds", [{"MAX_ROWS": 3, "MAX_STATES": 300}, {"MAX_CELLS": 1000},
                                    {"MAX_ROWS": 3, "MAX_CELLS": 600}],
                         ids=["rows+states", "cells", "rows+cells"])
def test_bounds_merge_rows_slices_and_cells_without_changing_sums(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bounds: dict[str, int]) -> None:
    """With small bounds, the same recording's page merges threads into its last row, or
    timeline or cell slices in twos, and says which: each mode's cells sum as before, in all
    and per row kept, and the merged row's states are the sums of its threads'."""
    s = _five_threads(str(tmp_path / "five.psr"))
    whole = page_data(_profile(s.path))
    assert whole["bounds"] == [] and len(whole["threads"]) == 5
    for name, value in bounds.items():
        monkeypatch.setattr(page, name, value)
    small = page_data(_profile(s.path))
    assert len(small["bounds"]) == len(bounds), small["bounds"]
    assert small["thread_count"] == 5
    assert sum(t["samples"] for t in small["threads"]) == whole["samples"]
    assert sum(len(x[1]) for x in small["states"].values()) <= bounds.get("MAX_STATES", 10**9)
    assert len(small["cells"]["n"]) <= bounds.get("MAX_CELLS", 10**9)
    assert small["cell_factor"] * small["slice_s"] > 5 * whole["slice_s"] or \
        "MAX_CELLS" not in bounds
    rows = bounds.get("MAX_ROWS", 5)
    assert len(small["threads"]) == rows
    kept = {t["ref"] for t in small["threads"]} - {OTHERS}
    for mode in whole["modes"]:
        assert sum(small["cells"][mode]) == sum(whole["cells"][mode]), mode
        for ref in kept:
            assert sum(v for t, v in zip(small["cells"]["t"], small["cells"][mode])
                       if t == ref) == sum(v for t, v in zip(whole["cells"]["t"],
                                                              whole["cells"][mode])
                                           if t == ref), (mode, ref)
    # each row's states, slice by slice, are its threads' summed
    factor = round(small["slice_s"] / whole["slice_s"])
    assert (factor > 1) == ("MAX_STATES" in bounds)
    base = round((small["origin_s"] - whole["origin_s"]) / whole["slice_s"])
    groups = {ref: [ref] for ref in kept}
    if rows < 5:
        assert small["threads"][-1]["threads"] == 5 - rows + 1
        groups[OTHERS] = [t["ref"] for t in whole["threads"] if t["ref"] not in kept]
    for row, refs in groups.items():
        for j in range(4):
            want: dict[int, int] = {}
            for ref in refs:
                at, *lists = whole["states"][str(ref)]
                for i, v in enumerate(lists[j]):
                    a = (at + i - base) // factor
                    want[a] = want.get(a, 0) + v
            at, *lists = small["states"][str(row)]
            got = {at + i: v for i, v in enumerate(lists[j]) if v}
            assert got == {a: v for a, v in want.items() if v}, (row, j)


# -- the page's slices always fit ------------------------------------------------------------

def _unclocked_index() -> bytes:
    """201 samples 1 ms apart (0.2 s), in a file whose index does not say when its chunks'
    samples fall (slices of one tick: 200,001 of them, more than a sliced view may have)."""
    raw = begin() + pass_(0, entry(1, [1], status=3)) + pass_(INTERVAL) * 200
    return layout([metadata_chunk(), zchunk(C.CHUNK_DEFS, defs_raw()),
                   zchunk(C.CHUNK_DATA, raw)])


def _lying_index() -> bytes:
    """The same samples, in a file whose index says they all fall at one instant."""
    chunks = [metadata_chunk(), zchunk(C.CHUNK_DEFS, defs_raw()),
              zchunk(C.CHUNK_DATA, begin() + pass_(0, entry(1, [1], status=3))
                     + pass_(INTERVAL) * 200)]
    entries = [[off, ctype, 0, 0, 201, 201] if ctype == C.CHUNK_DATA else [off, ctype, 0, 0, 0, 0]
               for off, ctype, _ in chunks_of(layout(chunks))[:len(chunks)]]
    return layout(chunks, index_chunk=zchunk(C.CHUNK_INDEX, msgpack.packb({"chunks": entries})))


def _empty_chunks_after() -> bytes:
    """The good recording (10 samples over 9 ms), then 30 data chunks without a sample: a
    guess from the first chunk's span times the chunks is far too long."""
    return layout([*good_chunks(), *(zchunk(C.CHUNK_DATA, begin(seq, 20_000 + seq))
                                     for seq in range(1, 31))])


def _many_threads() -> bytes:
    """3000 threads sampled once each, in 3 chunks 50 ms apart."""
    refs = list(range(1, 3001))
    chunks = [metadata_chunk(), zchunk(C.CHUNK_DEFS, defs_raw(refs))]
    for seq in range(3):
        part = refs[seq * 1000:(seq + 1) * 1000]
        raw = begin(seq, 1000 + seq * 50 * INTERVAL) + pass_(
            0, b"".join(entry(r, [1], status=3) for r in part))
        chunks.append(zchunk(C.CHUNK_DATA, raw))
    return layout(chunks)


BUILT = {"unclocked_index": (_unclocked_index, 201, 0.2),
         "lying_index": (_lying_index, 201, 0.2),
         "empty_chunks_after": (_empty_chunks_after, GOOD_SAMPLES, 0.009),
         "many_threads_3000": (_many_threads, 3000, 0.1)}
# hostile_files' own: name -> (samples, seconds they span); None: as the reader's budgets allow
HOSTILE = {"far_times": (2, (1 << 62) / 1e6), "slices_jumbled": (3, FAR_S + 1.0),
           "many_threads": (None, None)}


@pytest.mark.parametrize("name", [*BUILT, *HOSTILE])
def test_the_page_picks_slices_that_fit(tmp_path: Path, name: str) -> None:
    """No --slices given: the page cuts the samples' span into at most about SLICES slices,
    whatever the index says (it refused with "--slices: slices of 1e-06 s would make
    5,999,001 rows ..."), and its timeline covers every sample."""
    if name in BUILT:
        make, samples, span = BUILT[name]
        path = tmp_path / f"{name}.psr"
        path.write_bytes(make())
    else:
        samples, span = HOSTILE[name]
        path = write(name, tmp_path)
    d, _ = html(path, tmp_path)
    assert_consistent(d)
    if samples is not None:
        assert d["samples"] == samples
    if span is not None:
        assert d["slices"] * d["slice_s"] >= span * (1 - 1e-9)
        # and not much coarser than it needs to be
        assert d["slices"] >= SLICES / 10, d["slices"]
    if name == "many_threads_3000":
        assert d["thread_count"] == 3000 and d["threads"][-1]["threads"] == 3000 - MAX_ROWS + 1


# -- pprof's int64 times ---------------------------------------------------------------------

def test_pprof_times_past_int64_saturate(tmp_path: Path) -> None:
    """Created 2^63 - 1 ns after the epoch, samples 2^62 ticks apart ("internal error:
    ValueError: Value out of range")."""
    from psrec.analyzer.proto import profile_pb2 as pb

    path = write("far_times", tmp_path)
    out = tmp_path / "far.pb.gz"
    r = psrec("export", "--pprof", "-o", out, path)
    no_crash(r)
    assert r.returncode == 0, r.stderr
    prof = pb.Profile()
    prof.ParseFromString(gzip.decompress(out.read_bytes()))
    assert prof.time_nanos == INT64_MAX and prof.duration_nanos == INT64_MAX
    assert [s.value[0] for s in prof.sample] == [2]
    assert all(0 <= v <= INT64_MAX for s in prof.sample for v in s.value)
