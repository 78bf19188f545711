"""Files made to hurt their reader (tests/unit/hostile_files.py) against the real `psrec`.
Over 400 lines and kept whole: one test per hostile file, through one runner.

Each command runs in a process of its own with at most 1 GiB of address space (RLIMIT_AS, as
`ulimit -v 1048576`) and 10 s: what the file holds may make the reader refuse a chunk (a
warning naming it, exact) or the command (one exact line), never allocate or loop beyond
those bounds, and never end in a traceback or an "internal error". The rest of the file is
still read: most files hold a good recording of 10 samples of `work` besides their hostile
chunk. spec/psr-format.md, section 9, is the rulebook.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from format_helpers import header, new_writer, record
from hostile_files import (
    BIG_REF,
    BIG_REF_CHUNKS,
    BOMB_BYTES,
    BOMB_DECLARED,
    DEEP_LEAVES,
    DEEP_THREADS,
    FAR_S,
    GOOD_SAMPLES,
    HUGE_FRAME,
    INTERVAL,
    TIB,
    WRAP_S,
    begin,
    chunks_of,
    defs_raw,
    entry,
    no_crash,
    pass_,
    psrec,
    write,
)
from psrec.format import _constants as C
from psrec.format import native_available

pytestmark = pytest.mark.skipif(
    not native_available(), reason="the native codec (psrec.format._format) is not built"
)

DATA = Path(__file__).resolve().parent.parent / "data"


def lines(text: str) -> list[str]:
    return text.splitlines()


def warning(path: Path, text: str) -> str:
    return f"psrec: warning: {path}: {text}"


def offset_of(path: Path, ctype: int, nth: int = 0) -> int:
    return [off for off, t, _ in chunks_of(path.read_bytes()) if t == ctype][nth]


def assert_good_report(r: subprocess.CompletedProcess[str], samples: int = GOOD_SAMPLES) -> None:
    """The report of the good recording: its samples, all in `work`."""
    assert r.returncode == 0, r.stderr
    assert f": {samples} samples over" in r.stdout, r.stdout[:2000]
    assert f"{samples:>9,} {samples:>9,} 100.00%" in r.stdout and "app.py:10(work)" in r.stdout


# -- decompression bombs ----------------------------------------------------------------------

@pytest.mark.parametrize("cmd", ["info", "report"])
def test_a_frame_inflating_far_past_its_header_is_refused_before_it_inflates(
        tmp_path: Path, cmd: str) -> None:
    """49 KB of RLE blocks that inflate to 1.6 GB, in a chunk whose header says 1 MiB (the
    frame says 1.6 GB: it used to be allocated, and decompressed)."""
    path = write("bomb_inflate", tmp_path)
    r = psrec(cmd, path)
    no_crash(r)
    off = offset_of(path, C.CHUNK_DATA, 1)
    assert lines(r.stderr) == [warning(
        path, f"DATA chunk at byte {off} does not match its header: its zstd frame declares "
              f"{BOMB_BYTES:,} bytes uncompressed, its header {BOMB_DECLARED:,}; skipped")]
    assert r.returncode == 0
    if cmd == "report":
        assert_good_report(r)


def test_a_frame_without_a_size_is_stopped_at_its_header_length(tmp_path: Path) -> None:
    """The same frame without a content size: decompression stops one byte past 1 MiB."""
    path = write("bomb_inflate_unsized", tmp_path)
    r = psrec("report", path)
    no_crash(r)
    off = offset_of(path, C.CHUNK_DATA, 1)
    assert lines(r.stderr) == [warning(
        path, f"DATA chunk at byte {off} decompresses to more than the {BOMB_DECLARED:,} bytes "
              "its header declares; skipped")]
    assert_good_report(r)


def test_a_frame_claiming_a_tebibyte_is_an_exact_error(tmp_path: Path) -> None:
    """A file of a few hundred bytes whose only DATA chunk's frame says 1 TiB ("internal
    error: MemoryError")."""
    path = write("bomb_tib", tmp_path)
    assert path.stat().st_size < 400
    r = psrec("info", path)
    no_crash(r)
    off = offset_of(path, C.CHUNK_DATA)
    assert lines(r.stderr)[-2:] == [
        warning(path, f"DATA chunk at byte {off} does not match its header: its zstd frame "
                      f"declares {TIB:,} bytes uncompressed, its header 4,096; skipped"),
        f"psrec: error: {path}: the recording holds no samples",
    ]
    assert r.returncode == 1


# -- amplification ----------------------------------------------------------------------------

@pytest.mark.parametrize("cmd", ["info", "report"])
def test_stack_depth_is_capped_across_passes(tmp_path: Path, cmd: str) -> None:
    """Every pass pushes MAX_DEPTH frames on the same stack: each delta is within the limit,
    the stack is not (16M trie nodes from 2 KB: std::bad_alloc)."""
    path = write("depth_growth", tmp_path)
    r = psrec(cmd, path)
    no_crash(r)
    off = offset_of(path, C.CHUNK_DATA, 1)
    assert lines(r.stderr) == [warning(
        path, f"DATA chunk at byte {off} is malformed (stack deeper than MAX_DEPTH "
              f"({C.MAX_DEPTH}) frames); skipped")]
    assert r.returncode == 0
    if cmd == "report":
        assert_good_report(r)


@pytest.mark.parametrize("args", [(), ("--collapsed", "-o", "-"), ("--pstats",),
                                  ("--slices", "1ms")], ids=["table", "collapsed", "pstats",
                                                              "slices"])
def test_a_huge_frame_id_costs_no_more_than_a_small_one(tmp_path: Path,
                                                        args: tuple[str, ...]) -> None:
    """A frame id of 2^32 - 1 that nothing defines is shown as unknown (the native walks
    made a table by frame id: 16 GiB)."""
    path = write("huge_frame_id", tmp_path)
    r = psrec("report", path, *args)
    no_crash(r)
    assert r.returncode == 0 and not [x for x in lines(r.stderr) if "warning" in x], r.stderr
    name = f"<frame {HUGE_FRAME}>"
    if not args:
        assert f"{GOOD_SAMPLES:>9,} {GOOD_SAMPLES:>9,} 100.00%" in r.stdout
        assert f"<unknown>:0({name})" in r.stdout
    elif args[0] == "--collapsed":
        assert lines(r.stdout) == [f"work (app.py:10);{name} (<unknown>:0) {GOOD_SAMPLES}"]
    elif args[0] == "--slices":
        assert f"{name} 100%" in r.stdout


def test_collapsed_stacks_cost_memory_in_their_depth_not_its_square(tmp_path: Path) -> None:
    """Threads recursing past MAX_DEPTH: --collapsed kept every prefix of every stack (270 MB
    for each stack 8192 frames deep; here four, so beyond 1 GiB)."""
    path = write("collapsed_deep", tmp_path)
    r = psrec("report", path, "--collapsed", "-o", "-")
    no_crash(r)
    assert r.returncode == 0, r.stderr
    rows = lines(r.stdout)
    assert len(rows) == DEEP_THREADS * DEEP_LEAVES
    total = 0
    for row in rows:
        stack, count = row.rsplit(" ", 1)
        frames = stack.split(";")
        assert len(frames) == C.MAX_DEPTH and frames[0] == "[truncated stack] (<psrec>:0)"
        assert len(set(frames[1:-1])) == 1 and frames[-1] != frames[-2]
        total += int(count)
    assert total == 20 * DEEP_THREADS


@pytest.mark.parametrize("args", [("info",), ("report",), ("report", "--per-thread"),
                                  ("export", "-o", "out.json")],
                         ids=["info", "report", "per-thread", "export"])
def test_a_thread_ref_of_2_24_costs_what_ref_1_does(tmp_path: Path,
                                                     args: tuple[str, ...]) -> None:
    """Ref 2^24 in 1000 small chunks (per-thread state was kept by ref and cleared for every
    chunk: every command took more than 10 s; export needed 2 GB)."""
    path = write("thread_ref_2_24", tmp_path)
    cmd = [a if a != "out.json" else str(tmp_path / a) for a in args]
    r = psrec(cmd[0], path, *cmd[1:])
    no_crash(r)
    assert r.returncode == 0 and not [x for x in lines(r.stderr) if "warning" in x], r.stderr
    n = 2 * BIG_REF_CHUNKS
    if args[0] == "info":
        assert f"samples  {n:,} thread-samples" in r.stdout
    elif args[0] == "report":
        assert f"{n:>9,} {n:>9,} 100.00%" in r.stdout
        if "--per-thread" in args:
            assert f"(tid {4242 + BIG_REF % 1000})" in r.stdout
    else:
        doc = json.loads((tmp_path / "out.json").read_text())
        assert [len(p["samples"]) for p in doc["profiles"]] == [1]
        assert doc["profiles"][0]["unit"] == "microseconds"
        assert sum(doc["profiles"][0]["weights"]) == n * 1000  # 1 ms each


def test_an_index_of_a_million_entries_is_refused_and_the_file_scanned(tmp_path: Path) -> None:
    """A 1 KB INDEX chunk that lists 1M chunks (20 s and 360 MB)."""
    path = write("index_1m", tmp_path)
    size = path.stat().st_size
    off, _, raw = chunks_of(path.read_bytes())[-1]
    most = (size - C.HEADER_SIZE - C.TRAILER_SIZE) // C.CHUNK_HEADER_SIZE
    r = psrec("report", path)
    no_crash(r)
    assert lines(r.stderr) == [warning(
        path, f"its index is damaged: INDEX chunk at byte {off} is {raw:,} bytes uncompressed, "
              f"more than an index of the {most:,} chunks a file of {size:,} bytes can hold "
              f"takes ({64 + C.INDEX_ENTRY_MAX * most:,}); the file was scanned instead "
              "(1 data chunk found)")]
    assert_good_report(r)


def test_a_chunk_of_too_many_samples_is_refused(tmp_path: Path) -> None:
    """4096 threads and 16384 empty passes: 67M samples from 60 KB of records (1.7 GB)."""
    path = write("sample_flood", tmp_path)
    r = psrec("report", path)
    no_crash(r)
    off = offset_of(path, C.CHUNK_DATA, 1)
    assert lines(r.stderr) == [warning(
        path, f"DATA chunk at byte {off} is malformed (more than MAX_CHUNK_SAMPLES "
              f"({C.MAX_CHUNK_SAMPLES}) thread-samples in one chunk); skipped")]
    assert_good_report(r)


def test_a_chunk_of_too_many_passes_is_refused(tmp_path: Path) -> None:
    path = write("pass_flood", tmp_path)
    r = psrec("report", path)
    no_crash(r)
    off = offset_of(path, C.CHUNK_DATA, 1)
    assert lines(r.stderr) == [warning(
        path, f"DATA chunk at byte {off} is malformed (more than MAX_CHUNK_PASSES "
              f"({C.MAX_CHUNK_PASSES}) passes in one chunk); skipped")]
    assert_good_report(r)


@pytest.mark.parametrize(("name", "problem"), [
    ("depth_growth", "stack deeper than MAX_DEPTH ({MAX_DEPTH}) frames"),
    ("sample_flood", "more than MAX_CHUNK_SAMPLES ({MAX_CHUNK_SAMPLES}) thread-samples in one "
                     "chunk"),
    ("pass_flood", "more than MAX_CHUNK_PASSES ({MAX_CHUNK_PASSES}) passes in one chunk"),
    ("event_flood", "more events than the file's size allows"),
], ids=["depth_growth", "sample_flood", "pass_flood", "event_flood"])
def test_dump_shows_where_a_refused_chunk_goes_wrong_not_all_of_it(
        tmp_path: Path, name: str, problem: str) -> None:
    """`psrec dump` printed every record: 16M lines for pass_flood, 8M for event_flood."""
    problem = problem.format(**{k: getattr(C, k, "?") for k in dir(C) if k.startswith("MAX_")})
    path = write(name, tmp_path)
    r = psrec("dump", path)
    no_crash(r)
    assert r.returncode == 0, r.stderr
    out = lines(r.stdout)
    refused = [i for i, x in enumerate(out) if x.startswith("  (malformed:")]
    assert refused and out[refused[0]] == f"  (malformed: {problem}; the reader skips this chunk)"
    start = max(i for i, x in enumerate(out[:refused[0]]) if x.startswith("CHUNK "))
    assert refused[0] - start - 1 <= 100  # its first 100 records
    assert len(out) < 10_000  # (sample_flood defines 4096 threads)


def test_dump_names_a_chunk_written_twice(tmp_path: Path) -> None:
    path = write("duplicate_chunk", tmp_path)
    r = psrec("dump", path)
    assert r.returncode == 0, r.stderr
    first, second = (offset_of(path, C.CHUNK_DATA, i) for i in (0, 1))
    out = lines(r.stdout)
    at = out.index(f"CHUNK @{second} DATA stored=33 raw=50")
    assert out[at + 1] == (f"  (repeats sequence number 0 of the chunk at byte {first}: the "
                           "reader counts it once)")


def test_events_are_bounded_by_the_file_size(tmp_path: Path) -> None:
    """Two chunks of 4M MARKER records each, in 4 KB (every event was kept: beyond 1 GiB)."""
    path = write("event_flood", tmp_path)
    r = psrec("report", path)
    no_crash(r)
    offs = [offset_of(path, C.CHUNK_DATA, i) for i in (1, 2)]
    assert lines(r.stderr) == [warning(
        path, f"DATA chunk at byte {off} is malformed (more events than the file's size "
              "allows); skipped") for off in offs]
    assert_good_report(r)


@pytest.mark.parametrize(("name", "span"), [("slices_far", FAR_S), ("slices_jumbled", FAR_S + 1)],
                         ids=["far", "jumbled"])
def test_slices_are_bounded_by_the_samples_extent(tmp_path: Path, name: str, span: int) -> None:
    """Two samples 8,000,000 s apart in a file of a few hundred bytes: --slices 1s wrote a row
    for each of 8M slices (147 MB); the report now says how long a slice must be. (Jumbled:
    the samples between are earlier and later, and the first and last are 1 s apart.)"""
    path = write(name, tmp_path)
    r = psrec("report", path, "--slices", "1s")
    no_crash(r)
    assert r.returncode == 2 and r.stdout == ""
    assert lines(r.stderr)[-2:] == [
        f"psrec: error: --slices: slices of 1 s would make {span + 1:,} rows over the "
        f"{span:,}.000 s the samples span, more than 100,000",
        "psrec: give slices of at least 100 s, or a window with --from and --to",
    ]
    r = psrec("report", path, "--slices", "100s")
    assert r.returncode == 0, r.stderr
    assert len(lines(r.stdout)) < span // 100 + 20


def test_a_slice_index_does_not_wrap_at_32_bits(tmp_path: Path) -> None:
    """Samples 2^32 + 5 s after the start, with 1 s slices (shown as slices 5 and 6)."""
    path = write("slice_wrap", tmp_path)
    r = psrec("report", path, "--slices", "1s")
    no_crash(r)
    assert r.returncode == 0, r.stderr
    rows = [x for x in lines(r.stdout) if "work 100%" in x]
    assert [x.split()[0] for x in rows] == [f"{WRAP_S}.000-{WRAP_S + 1}.000",
                                            f"{WRAP_S + 1}.000-{WRAP_S + 2}.000"]


# -- duplicated chunks ------------------------------------------------------------------------

@pytest.mark.parametrize("cmd", ["info", "report"])
def test_a_chunk_written_twice_is_counted_once(tmp_path: Path, cmd: str) -> None:
    path = write("duplicate_chunk", tmp_path)
    r = psrec(cmd, path, *(["--json"] if cmd == "info" else []))
    no_crash(r)
    first, second = (offset_of(path, C.CHUNK_DATA, i) for i in (0, 1))
    assert lines(r.stderr) == [warning(
        path, f"1 DATA chunk repeats the sequence number of an earlier one (first: the chunk "
              f"at byte {second}, sequence number 0, as the chunk at byte {first}); each "
              "sequence number was counted once")]
    if cmd == "info":
        d = json.loads(r.stdout)
        assert (d["samples"], d["passes"]) == (GOOD_SAMPLES, GOOD_SAMPLES)
    else:
        assert_good_report(r)


def test_chunks_of_a_sound_recording_all_have_their_own_sequence_number(tmp_path: Path) -> None:
    """What the writer does: every DATA chunk a new seq, so no warning and nothing dropped."""
    from psrec.format import _format

    path = tmp_path / "many.psr"
    enc = _format.Encoder(chunk_bytes=64)
    w = new_writer(path)
    f = enc.intern_frame(enc.intern_function(enc.intern_string("a.py"),
                                             enc.intern_string("f"), 1), 2)
    t = enc.add_thread(1, 1, 1, "MainThread", 0)
    for i in range(200):
        enc.begin_pass(1000 * (i + 1))
        enc.sample(t, [f] * (1 + i % 3), 3)
        enc.end_pass()
        if enc.chunk_due(1000 * (i + 1)):
            w.write_sealed(*enc.seal())
    w.write_sealed(*enc.seal())
    w.close(dict(enc.stats))
    r = psrec("info", path, "--json")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    d = json.loads(r.stdout)
    assert d["samples"] == 200 and d["chunks"] > 20


# -- wrong types in the maps ------------------------------------------------------------------

@pytest.mark.parametrize("args", [("info",), ("info", "--json"), ("report", "--per-thread")],
                         ids=["info", "json", "report"])
def test_a_metadata_value_of_the_wrong_type_is_ignored_with_a_warning(
        tmp_path: Path, args: tuple[str, ...]) -> None:
    path = write("wrong_types", tmp_path)
    r = psrec(args[0], path, *args[1:])
    no_crash(r)
    assert r.returncode == 0, r.stderr
    md, stats = (offset_of(path, t) for t in (C.CHUNK_METADATA, C.CHUNK_STATS))
    assert lines(r.stderr) == [warning(path, text) for text in [
        f"METADATA chunk at byte {md}: 'pid' is a str, not an integer; ignored",
        f"METADATA chunk at byte {md}: 'command' is an int, not a list of strings; ignored",
        f"METADATA chunk at byte {md}: 'hostname' is a list, not a string; ignored",
        f"METADATA chunk at byte {md}: 'rate_hz' is a str, not a number; ignored",
        f"METADATA chunk at byte {md}: 'python_build' is a list, not a map; ignored",
        f"STATS chunk at byte {stats}: 'passes' is a str, not an integer; ignored",
        f"STATS chunk at byte {stats}: 'samples' is a list, not an integer; ignored",
        f"STATS chunk at byte {stats}: 'truncated_stacks' is a str, not an integer; ignored",
        f"STATS chunk at byte {stats}: 'stopped_by' is an int, not a string; ignored",
    ]]
    if args == ("info",):
        assert "    target  pid ?: ?" in lines(r.stdout)
        assert "      host  ?" in lines(r.stdout)
    elif args[0] == "info":
        d = json.loads(r.stdout)
        assert "command" not in d["metadata"] and d["metadata"]["python_version"] == "3.12.1"
        assert d["stats"] == {}


# -- options out of range: usage errors -------------------------------------------------------

VIEW_OPTIONS = [
    ("--slices", "0"), ("--slices", "-1s"), ("--slices", "nan"), ("--slices", "inf"),
    ("--slices", "1parsec"), ("--slices", "1e400"), ("--from", "1e400"), ("--to", "1e13"),
]


@pytest.mark.parametrize("args", VIEW_OPTIONS, ids=[" ".join(a) for a in VIEW_OPTIONS])
def test_out_of_range_view_options_are_usage_errors(args: tuple[str, str]) -> None:
    r = psrec("report", DATA / "two_threads.psr", *args)
    no_crash(r)
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""
    err = lines(r.stderr)
    assert err[0].startswith(f"psrec: error: {args[0]}: '{args[1]}'") or (
        args == ("--slices", "0") and err[0].startswith("psrec: error: --slices:")), err
    assert len(err) <= 2, err  # the error, and what to do about it


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_duration_that_is_no_number_of_seconds_is_a_usage_error(tmp_path: Path,
                                                                  value: str) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    out = tmp_path / "x.psr"
    r = psrec("record", "-q", "-o", out, "-d", value, str(dead.pid))
    no_crash(r)
    assert r.returncode == 2, r.stderr
    assert f"'{value}'" in r.stderr and "--duration" in r.stderr, r.stderr
    assert not out.exists()


# -- budgets of the whole file (spec section 9.3) ---------------------------------------------

def budget_stop(path: Path, off: int, n: int, total: int, what: str, budget: int) -> str:
    return warning(path, f"reading stopped at the DATA chunk at byte {off}: it would take the "
                         f"file past its budget of {budget:,} {what} (a file of "
                         f"{path.stat().st_size:,} bytes, spec section 9.3); {n:,} of {total:,} "
                         f"data chunks were read. For a file you trust, PSREC_BUDGET=10 raises "
                         "the budgets tenfold, PSREC_BUDGET=unlimited lifts them")


def trie_budget(path: Path) -> int:
    return C.TRIE_BASE + C.TRIE_PER_BYTE * path.stat().st_size


def raw_budget(path: Path) -> int:
    return C.DATA_RAW_BASE + C.DATA_RAW_PER_BYTE * path.stat().st_size


def thread_budget(path: Path) -> int:
    return C.THREADS_BASE + path.stat().st_size // C.THREAD_BYTES


BUDGET_COMMANDS = [("info",), ("report",), ("report", "--collapsed", "-o", "-"),
                   ("report", "--pstats", "-o", "{out}.pstats"),
                   ("export", "--speedscope", "-o", "{out}.json"),
                   ("export", "--pprof", "-o", "{out}.pb.gz"),
                   ("export", "--firefox", "-o", "{out}.ff.json")]


def _run_all(path: Path, tmp_path: Path, commands: list[tuple[str, ...]] = BUDGET_COMMANDS
             ) -> dict[str, subprocess.CompletedProcess[str]]:
    out = {}
    for cmd in commands:
        args = [a.format(out=tmp_path / "out") for a in cmd]
        out[" ".join(cmd[:2])] = r = psrec(*args[:1], path, *args[1:])
        no_crash(r)
        assert r.returncode == 0, (cmd, r.stderr)
    return out


def test_a_trie_that_grows_with_every_pass_stops_at_its_budget(tmp_path: Path) -> None:
    """Each pass pops the whole stack and pushes one that differs at its root: MAX_DEPTH - 1
    new trie nodes a pass from a 25 KB file (every reader needed 1.9-2.3 GB)."""
    path = write("trie_churn", tmp_path)
    stop = budget_stop(path, offset_of(path, C.CHUNK_DATA, 1), 1, 2, "stack-trie nodes",
                       trie_budget(path))
    for cmd, r in _run_all(path, tmp_path, BUDGET_COMMANDS[1:]).items():
        assert lines(r.stderr)[0] == stop, (cmd, r.stderr)
        if cmd == "report":
            assert_good_report(r)


def test_task_stacks_that_grow_with_every_state_stop_at_the_trie_budget(tmp_path: Path) -> None:
    """asyncio task states (spec 4.3) whose await chains are MAX_DEPTH - 1 frames deep and
    differ at their root: each adds a path to the same stack trie, within the same budget."""
    path = write("task_trie_churn", tmp_path)
    stop = budget_stop(path, offset_of(path, C.CHUNK_DATA, 1), 1, 2, "stack-trie nodes",
                       trie_budget(path))
    commands = [*BUDGET_COMMANDS[1:], ("report", "--tasks")]
    for cmd, r in _run_all(path, tmp_path, commands).items():
        assert lines(r.stderr)[0] == stop, (cmd, r.stderr)


def test_a_flood_of_task_states_is_read_within_the_bounds(tmp_path: Path) -> None:
    """300,000 defined tasks in a 2 MB file, each suspended and awaiting the next: `report
    --tasks` replays them all within the time and memory every command has here (one was
    8 s and 500 MB on this project's 2-core machine)."""
    from hostile_files import TASK_FLOOD

    path = write("task_flood", tmp_path)
    r = psrec("report", path, "--tasks")
    no_crash(r)
    assert r.returncode == 0, r.stderr
    assert f"... {TASK_FLOOD - 25:,} more (use -l 0 to show all)" in r.stdout
    # Where they waited: all at one await, 898.5 ms each.
    assert re.search(rf"^ *269,550\.0s +{TASK_FLOOD:,} +work \(app\.py:11\)$", r.stdout,
                     re.M), r.stdout[-2000:]
    # The same waits as stacks, each task under the 255 awaiting it: cut at the budget of
    # frames of logical stacks, and said (12 s and 720 MB here).
    r = psrec("report", path, "--collapsed", "--waits", "-o", "-")
    no_crash(r)
    assert r.returncode == 0, r.stderr
    said = (f"psrec: warning: {path}: --waits: the tasks' waits would take the file past its "
            "budget of")
    assert sum(line.startswith(said) for line in lines(r.stderr)) == 1, r.stderr


def test_logical_stacks_of_long_await_chains_stop_at_their_budget(tmp_path: Path) -> None:
    """20,000 tasks, each awaiting the next, each run by one sample: with --logical every
    sample's stack goes through the 256 tasks awaiting its task, 512 new nodes each. Every
    command that shows stacks stops making them at a quarter of the file's budget of stack
    nodes, says so once, and shows the samples after it with their recorded stacks."""
    from psrec.analyzer.logical import LOGICAL_SHARE

    path = write("task_chains", tmp_path)
    budget = trie_budget(path) // LOGICAL_SHARE
    said = (f"psrec: warning: {path}: --logical: the tasks' stacks would take the file past "
            f"its budget of {budget:,} frames of logical stacks")
    commands = [c + ("--logical",) for c in BUDGET_COMMANDS[1:]] + [
        ("report", "--html", "--logical", "-o", "{out}.html")]
    for cmd, r in _run_all(path, tmp_path, commands).items():
        assert r.returncode == 0, (cmd, r.stderr[-2000:])
        assert sum(line.startswith(said) for line in lines(r.stderr)) == 1, (cmd, r.stderr)
    r = psrec("report", path, "--logical", "--collapsed", "-o", "-")
    stacks = {line.rpartition(" ")[0] for line in r.stdout.splitlines()}
    # the first samples' stacks through their tasks, the last ones' as recorded
    assert any(s.count("(<task>:0)") == 256 for s in stacks), sorted(stacks)[:3]
    assert "work (app.py:10)" in stacks


def test_chunks_of_unknown_records_stop_at_the_budget_of_uncompressed_bytes(
        tmp_path: Path) -> None:
    """Chunks of MAX_RAW bytes of 2-byte unknown records, 8 KB each stored (forty took every
    command 12 s, and `dump` past 20 s with one)."""
    path = write("unknown_flood", tmp_path)
    stop = budget_stop(path, offset_of(path, C.CHUNK_DATA, 1), 1, 5,
                       "uncompressed bytes of DATA chunks", raw_budget(path))
    for cmd, r in _run_all(path, tmp_path, BUDGET_COMMANDS[1:]).items():
        assert lines(r.stderr)[0] == stop, (cmd, r.stderr)
        if cmd == "report":
            assert_good_report(r)
    # PSREC_BUDGET=4.6 makes room for one of the four.
    r = psrec("report", path, env={"PSREC_BUDGET": "4.6"})
    assert lines(r.stderr)[0] == budget_stop(
        path, offset_of(path, C.CHUNK_DATA, 2), 2, 5, "uncompressed bytes of DATA chunks",
        int(raw_budget(path) * 4.6))
    assert_good_report(r)


def test_a_million_thread_refs_stop_at_the_budget_of_thread_refs(tmp_path: Path) -> None:
    """1M distinct thread refs in a 690 KB file (`report` took 655 MB, `report --html`
    aborted, the exports passed 1 GB)."""
    path = write("many_threads", tmp_path)
    # The good chunk, then chunks of 65,536 refs: the third would pass the budget.
    budget = thread_budget(path)
    assert 1 + 65536 <= budget < 1 + 2 * 65536
    stop = budget_stop(path, offset_of(path, C.CHUNK_DATA, 2), 2, 17, "thread refs", budget)
    commands = [*BUDGET_COMMANDS[1:], ("report", "--html", "-o", "{out}.html")]
    for cmd, r in _run_all(path, tmp_path, commands).items():
        assert lines(r.stderr)[0] == stop, (cmd, r.stderr)
        if cmd == "report":
            assert ": 65,546 samples over" in r.stdout, r.stdout


@pytest.mark.parametrize("name", ["trie_churn", "unknown_flood", "many_threads"])
def test_dump_stops_where_the_reader_stops(tmp_path: Path, name: str) -> None:
    path = write(name, tmp_path)
    r = psrec("dump", path)
    no_crash(r)
    assert r.returncode == 0, r.stderr
    out = lines(r.stdout)
    stops = [x for x in out if "the reader stops here" in x]
    assert len(stops) == 1 and "past the file's budget of" in stops[0], stops
    assert out.count("  (not read: the reader stopped before it)") == sum(
        1 for x in out if x.startswith("CHUNK ") and " DATA " in x) - (
            2 if name == "unknown_flood" else 3 if name == "many_threads" else 2)


def test_dump_shows_a_run_of_identical_records_once(tmp_path: Path) -> None:
    path = write("duplicate_chunk", tmp_path)
    out = lines(psrec("dump", path).stdout)
    at = out.index("  PASS +1000")
    assert out[at + 1] == f"  (the record above {GOOD_SAMPLES - 2} more times)"
    assert out[at + 2].startswith("CHUNK ")


def test_a_bad_budget_factor_is_one_line_that_says_what_to_give(tmp_path: Path) -> None:
    path = write("duplicate_chunk", tmp_path)
    for value in ("0.5", "lots", "nan", "inf"):
        r = psrec("report", path, env={"PSREC_BUDGET": value})
        assert r.returncode == 1, r.stderr
        assert lines(r.stderr)[0] == f"psrec: error: PSREC_BUDGET={value!r} is not a budget factor"
        assert "'unlimited'" in r.stderr and "Traceback" not in r.stderr


def test_many_damaged_chunks_give_a_bounded_number_of_warnings(tmp_path: Path) -> None:
    """100,000 chunks whose checksums are wrong printed 100,001 warning lines (200,002 for
    `report --html`)."""
    from psrec.format.reader import WARNINGS_SHOWN

    path = write("damaged_chunks", tmp_path)
    for args in (("report",), ("info",), ("report", "--html", "-o", str(tmp_path / "p.html"))):
        r = psrec(args[0], path, *args[1:])
        no_crash(r)
        assert r.returncode == 0, r.stderr
        warns = [x for x in lines(r.stderr) if x.startswith("psrec: warning:")]
        assert len(warns) == WARNINGS_SHOWN + 1, (args, len(warns))
        more = 100_000 + 1 - WARNINGS_SHOWN
        assert warns[-1] == warning(path, f"{more:,} more warnings like these not shown "
                                          "(`psrec dump` shows every chunk and what is wrong "
                                          "with it)"), warns[-1]
        if args == ("report",):
            assert_good_report(r)


@pytest.mark.parametrize(("renames", "problem"), [
    ([7], "names a renaming chunk that is no DATA chunk it lists"),
    ("all", "holds a `renames` that is not a list of chunk offsets"),
    ([1] * 9, "holds a `renames` that is not a list of chunk offsets"),
], ids=["not-a-chunk", "not-a-list", "too-long"])
def test_an_index_whose_renames_are_wrong_is_damaged(tmp_path: Path, renames: Any,
                                                     problem: str) -> None:
    """The index's `renames` (format 1.2) tells a window which chunks to read for thread
    names: one that lists what is no DATA chunk of the file is not trusted."""
    import msgpack
    from hostile_files import good_chunks, layout, zchunk

    chunks = good_chunks()
    entries, at = [], len(header())
    for c in chunks:
        entries.append([at, c[4], 0, 0, 0, 0])
        at += len(c)
    index = zchunk(C.CHUNK_INDEX, msgpack.packb({"chunks": entries, "renames": renames}))
    path = tmp_path / "renames.psr"
    path.write_bytes(layout(chunks, index_chunk=index))
    r = psrec("report", path)
    no_crash(r)
    assert lines(r.stderr) == [warning(
        path, f"its index is damaged: INDEX chunk at byte {at} {problem}; the file was "
              "scanned instead (1 data chunk found)")], r.stderr
    assert_good_report(r)


def test_a_second_metadata_chunk_does_not_replace_the_target(tmp_path: Path) -> None:
    path = write("second_metadata", tmp_path)
    second = offset_of(path, C.CHUNK_METADATA, 1)
    first = offset_of(path, C.CHUNK_METADATA, 0)
    r = psrec("info", path, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["metadata"]["pid"] == 4242
    assert lines(r.stderr) == [warning(path, f"METADATA chunk at byte {second} repeats the "
                                             f"METADATA chunk at byte {first}; ignored")]
    r = psrec("report", path)
    assert "evil" not in r.stdout and "pid 1" not in r.stdout
    assert_good_report(r)


# -- the limits at their edges, in both decoders, and under mutation --------------------------

def _decode(payload: bytes, native: bool, max_events: int | None = None,
            budgets: tuple[int, int] | None = None) -> object:
    """What a decoder makes of a DATA payload: its samples and events, or "error". budgets:
    (stack-trie nodes, thread refs) the decoder may keep."""
    from format_helpers import _column, resolve, stacks_of
    from psrec.format import _format
    from psrec.format.reference import RefBatch, RefDecodeError, RefDecoder

    dec: Any
    if native:
        dec, batch = _format.Decoder(4000, 1000), _format.SampleBatch()
        kw = {} if max_events is None else {"max_events": max_events}
    else:
        dec, batch = RefDecoder(4000, 1000), RefBatch()
        kw = {} if max_events is None else {"max_events": max_events}
    if budgets is not None:
        kw.update(max_nodes=budgets[0], max_threads=budgets[1])
    try:
        events, summary = dec.decode_data(payload, batch, **kw)
    except (RefDecodeError, _format.DecodeError) as exc:
        return ("error", str(exc))
    parents, frames = stacks_of(dec)
    rows = list(zip(_column(batch.ts, "q"), _column(batch.thread, "I"),
                    [resolve(parents, frames, n) for n in _column(batch.node, "I")]))
    return rows, [tuple(e) for e in events], summary


def _pass_with(*entries: bytes, delta: int = INTERVAL) -> bytes:
    return pass_(delta, b"".join(entries))


def _edges() -> dict[str, bytes]:
    return {
        "stack of MAX_DEPTH in two deltas": begin()
        + _pass_with(entry(1, [1] * (C.MAX_DEPTH - 1), status=3)) + _pass_with(entry(1, [2])),
        "stack of MAX_DEPTH + 1 in two deltas": begin()
        + _pass_with(entry(1, [1] * C.MAX_DEPTH, status=3)) + _pass_with(entry(1, [2])),
        "pop then push past MAX_DEPTH": begin()
        + _pass_with(entry(1, [1] * C.MAX_DEPTH, status=3))
        + _pass_with(entry(1, [2, 3], pop=1)),
        "thread ref MAX_THREAD_REF": begin() + _pass_with(entry(C.MAX_THREAD_REF, [1], status=1)),
        "thread ref MAX_THREAD_REF + 1": begin()
        + _pass_with(entry(C.MAX_THREAD_REF + 1, [1], status=1)),
        "exit and start again in one chunk": begin()
        + _pass_with(entry(1, [1], status=3), entry(2, [2], status=3), entry(3, [3], status=1))
        + record(C.REC_THREAD_EXIT, 1, 5) + _pass_with()
        + record(C.REC_THREAD_EXIT, 3, 6) + _pass_with(entry(1, [4], status=3))
        + _pass_with(entry(3, [5], status=3)) + record(C.REC_THREAD_EXIT, 2, 9) + _pass_with(),
        "five events": begin() + record(C.REC_MARKER, 5, 1) * 5,
        "six events": begin() + record(C.REC_MARKER, 5, 1) * 6,
        # The trie holds its root and every distinct prefix: 1 + 4000 + 4207 = EDGE_NODES.
        "trie of its budget": begin() + _pass_with(entry(1, [1] * 4000, status=3))
        + _pass_with(entry(1, [2] + [1] * 4206, pop=4000)),
        "trie past its budget": begin() + _pass_with(entry(1, [1] * 4000, status=3))
        + _pass_with(entry(1, [2] + [1] * 4207, pop=4000)),
        "threads of their budget": begin()
        + _pass_with(*(entry(r, [1], status=3) for r in range(1, EDGE_THREADS + 1))),
        "threads past their budget": begin()
        + _pass_with(*(entry(r, [1], status=3) for r in range(1, EDGE_THREADS + 1)))
        + _pass_with(entry(EDGE_THREADS + 7, [1], status=3)),
    }


EDGES = ["stack of MAX_DEPTH in two deltas", "stack of MAX_DEPTH + 1 in two deltas",
         "pop then push past MAX_DEPTH", "thread ref MAX_THREAD_REF",
         "thread ref MAX_THREAD_REF + 1", "exit and start again in one chunk", "five events",
         "six events", "trie of its budget", "trie past its budget", "threads of their budget",
         "threads past their budget"]
EDGE_NODES = 8208  # the budgets of spec section 9.3, made small
EDGE_THREADS = 3


@pytest.mark.parametrize("name", EDGES)
def test_the_limits_are_the_same_in_both_decoders(name: str) -> None:
    payload = _edges()[name]
    budgets = (EDGE_NODES, EDGE_THREADS)
    native, ref = _decode(payload, True, 5, budgets), _decode(payload, False, 5, budgets)
    assert native == ref
    failed = isinstance(native, tuple) and native[0] == "error"
    assert failed == any(w in name for w in ("+ 1", "past", "six")), native
    if "budget" in name and failed:
        what = "stack-trie nodes" if "trie" in name else "thread refs"
        assert native == ("error", f"{what} {EDGE_NODES if 'trie' in name else EDGE_THREADS}")


def test_a_budget_carries_over_chunks_in_both_decoders() -> None:
    """The budgets are of the whole file: a decoder counts the trie and the thread refs of
    every chunk it decoded, a ref once however many chunks use it."""
    from psrec.format import _format
    from psrec.format.reference import RefBatch, RefDecoder

    chunk = begin() + _pass_with(entry(1, [1], status=3), entry(2, [2], status=3))
    other = begin(1) + _pass_with(entry(2, [2], status=3), entry(3, [3], status=3))
    for dec, batch in ((_format.Decoder(4000, 1000), _format.SampleBatch()),
                       (RefDecoder(4000, 1000), RefBatch())):
        dec.decode_data(chunk, batch, max_threads=3)
        dec.decode_data(chunk, batch, max_threads=3)
        assert dec.threads_seen == 2
        dec.decode_data(other, batch, max_threads=3)
        assert dec.threads_seen == 3
        with pytest.raises(Exception, match="^thread refs 3$") as info:
            dec.decode_data(begin(2) + _pass_with(entry(4, [1], status=3)), batch,
                            max_threads=3)
        assert type(info.value).__name__ in ("BudgetError", "RefBudgetError")
        with pytest.raises(Exception, match="^stack-trie nodes 4$"):
            dec.decode_data(begin(3) + _pass_with(entry(1, [1, 2], status=3)), batch,
                            max_nodes=4)


def test_a_chunk_of_exactly_max_chunk_samples_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """The native decoder at the limit itself; the reference one (slow in Python) at the
    same edge of a smaller limit."""
    threads = 1024
    passes = C.MAX_CHUNK_SAMPLES // threads
    head = begin() + _pass_with(*(entry(r, [1], status=3) for r in range(1, threads + 1)))
    at_limit = head + pass_(INTERVAL) * (passes - 1)
    rows = _decode(at_limit, True)
    assert not (isinstance(rows, tuple) and rows[0] == "error")
    assert len(rows[0]) == C.MAX_CHUNK_SAMPLES  # type: ignore[index]
    assert _decode(at_limit + pass_(INTERVAL), True)[0] == "error"  # type: ignore[index]
    from psrec.format import _constants

    monkeypatch.setattr(_constants, "MAX_CHUNK_SAMPLES", 3 * threads)
    assert len(_decode(head + pass_(INTERVAL) * 2, False)[0]) == 3 * threads  # type: ignore
    assert _decode(head + pass_(INTERVAL) * 3, False)[0] == "error"  # type: ignore[index]


def test_definitions_are_bounded_in_both_decoders() -> None:
    from psrec.format import _format
    from psrec.format.reference import RefDecodeError
    from psrec.format.reference import decode_defs as ref_decode_defs

    payload = defs_raw([1, 2])  # 3 strings, a function, a frame, 2 threads: 7 definitions
    for decode in (_format.decode_defs, ref_decode_defs):
        assert len(decode(payload, 7)[3]) == 2
        with pytest.raises((RefDecodeError, _format.DecodeError), match="size allows"):
            decode(payload, 6)
        for ref in (0, C.MAX_THREAD_REF + 1):
            bad = record(C.REC_THREAD, ref, 1, 1, 1, 0, 0)
            with pytest.raises((RefDecodeError, _format.DecodeError), match="out of range"):
                decode(bad)


def test_mutated_hostile_payloads_are_read_alike_and_within_limits() -> None:
    """The payload fuzz, on payloads at the new limits: both decoders agree on every mutation
    (what they read, or that it is malformed), with the same event budget."""
    import random

    from format_helpers import mutate

    seeds = [
        begin() + _pass_with(entry(1, [1] * (C.MAX_DEPTH - 2), status=3))
        + _pass_with(entry(1, [2, 3], pop=1)) + _pass_with(entry(2, [4], status=1)),
        _edges()["exit and start again in one chunk"],
        begin() + _pass_with(*(entry(r, [r % 3 + 1], status=3) for r in range(1, 40)))
        + pass_(INTERVAL) * 30 + record(C.REC_MARKER, 5, 1) * 8,
        begin(7) + _pass_with(entry(C.MAX_THREAD_REF, [1], status=3)) + pass_(INTERVAL) * 3,
    ]
    rng = random.Random(1313)
    outcomes = {"read": 0, "malformed": 0}
    for i in range(1500):
        payload = mutate(rng, seeds[i % len(seeds)])
        budgets = (C.MAX_DEPTH + 64, 36)  # within reach of the seeds' stacks and threads
        native, ref = _decode(payload, True, 10, budgets), _decode(payload, False, 10, budgets)
        failed = [isinstance(x, tuple) and x[0] == "error" for x in (native, ref)]
        # (Their messages for bad varints differ; what they make of a payload may not.)
        assert failed[0] == failed[1] and (failed[0] or native == ref), (
            f"case {i}: decoders disagree on {payload[:60]!r}: {str(native)[:200]} / "
            f"{str(ref)[:200]}")
        if failed[0]:
            outcomes["malformed"] += 1
            continue
        outcomes["read"] += 1
        rows, events, _ = native  # type: ignore[misc]
        assert len(events) <= 10
        assert all(len(stack) <= C.MAX_DEPTH for _, _, stack in rows)
        assert all(1 <= th <= C.MAX_THREAD_REF for _, th, _ in rows)
        assert len({th for _, th, _ in rows}) <= budgets[1]
    assert outcomes["read"] > 100 and outcomes["malformed"] > 100, outcomes
