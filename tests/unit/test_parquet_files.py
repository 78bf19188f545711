"""`psrec export --parquet` of recordings that name things badly or hold what Parquet cannot:
hostnames of every kind reach the dataset readable, unique and never hidden; values outside
Parquet's types, and a file that runs out of memory, are refused in one line that leaves
nothing behind; every hostile file (tests/unit/hostile_files.py) is written whole or refused
in words, with the samples `psrec info` counts in it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

pa = pytest.importorskip("pyarrow", reason="export --parquet needs pyarrow ('psrec[parquet]')")

import hostile_files as H  # noqa: E402
from analyzer_synth import BUSY, MAIN, Synth  # noqa: E402
from format_helpers import record, string_record, zigzag  # noqa: E402
from psrec.format import _constants as C  # noqa: E402

HOSTNAMES = ["web-1.example.com", ".hidden", "_under", "-dash", "a/b", "..", "nul\0byte",
             "ctl\x01\x1b[31m\nx", "sp ace", "x" * 300, "ü-höst", "%41", "A", "~", "", "a" * 96,
             "a" * 97]
NAME = re.compile(r"[A-Za-z0-9%~][A-Za-z0-9._%~-]*")


def test_a_name_is_readable_unique_never_hidden_and_bounded() -> None:
    from psrec.analyzer.parquet import NAME_BYTES, path_name

    names = {text: path_name(text) for text in HOSTNAMES}
    assert len(set(names.values())) == len(names), names  # two names stay two
    for text, name in names.items():
        assert NAME.fullmatch(name), (text, name)
        assert len(name.encode()) <= NAME_BYTES, (text, name)
        if "~" not in name:  # not cut: an engine reading it back gets the text
            assert unquote(name) == text, (text, name)
    assert names["web-1.example.com"] == "web-1.example.com"
    assert names["a" * 96] == "a" * 96 and names["a" * 97].startswith("a" * 87 + "~")


def _synth(path: Path, metadata: dict[str, object], passes: int = 40) -> Synth:
    s = Synth(str(path), chunk_passes=15, metadata=metadata)
    s.thread("main", 1)
    for i in range(passes):
        s.sample_pass((i + 1) * s.interval_ticks, {"main": ((MAIN,), BUSY, 0)})
    s.close()
    return s


def test_hostnames_of_every_kind_reach_the_dataset_readable(tmp_path: Path) -> None:
    """One recording a hostname (the others the same: the hostname tells them apart), and
    one without: every file name is a plain one (pyarrow and Spark would skip a hidden one),
    every sample is read by pyarrow and DuckDB, and the host column gives the hostname."""
    import pyarrow.dataset as ds
    from psrec.analyzer.parquet import LOCK, path_name, write_dataset

    paths = []
    for i, host in enumerate([*HOSTNAMES, None]):
        metadata = {"hostname": host} if host is not None else {}
        paths.append(_synth(tmp_path / f"r{i}.psr", metadata, passes=10 + i).path)
    want = sum(10 + i for i in range(len(paths)))
    out = tmp_path / "ds"
    written = write_dataset(paths, str(out))
    assert (written.recordings, written.samples) == (len(paths), want)
    for _, dirs, files in os.walk(out):
        for name in [*dirs, *files]:
            if name == LOCK:
                continue
            assert not name.startswith((".", "_")) and len(name.encode()) <= 255, name
            assert name.isprintable() and "\\" not in name, name
    samples = ds.dataset(str(out / "samples"), format="parquet", partitioning="hive")
    assert samples.count_rows() == want
    hosts = set(samples.to_table(columns=["host"])["host"].to_pylist())
    recordings = ds.dataset(str(out / "recordings")).to_table().to_pylist()
    assert len(recordings) == len(paths)
    assert sorted(map(str, (r["hostname"] for r in recordings))) == sorted(
        map(str, [*HOSTNAMES, None]))
    assert hosts == {r["host"] for r in recordings}
    for r in recordings:
        host = r["hostname"]
        if host is None:
            assert r["host"] == "unknown"
        elif "~" not in path_name(host):  # not cut: as recorded
            assert r["host"] == host, r
        else:  # cut (or empty), with a hash
            assert r["host"].startswith(host[:8]) and "~" in r["host"], r
    duckdb = pytest.importorskip("duckdb", reason="DuckDB reads the dataset when installed")
    n = duckdb.sql(f"SELECT count(*), count(DISTINCT host) FROM read_parquet("
                   f"'{out}/samples/**/*.parquet', hive_partitioning = true)").fetchall()
    assert n == [(want, len(paths))], n


def _defs(frame_line: int = 11, thread_pid: int = 4242) -> bytes:
    out = string_record(1, "app.py") + string_record(2, "work") + string_record(3, "Main")
    out += record(C.REC_FUNCTION, 1, 1, 2, 10)
    out += record(C.REC_FRAME, 1, 1, zigzag(frame_line))
    out += record(C.REC_THREAD, 1, thread_pid, 0x1001, 4243, 3, 0)
    return out


def _file(defs: bytes, metadata: dict[str, object] | None = None) -> bytes:
    import msgpack

    md = H.zchunk(C.CHUNK_METADATA, msgpack.packb({**H.DEFAULT_METADATA, **(metadata or {})}))
    return H.layout([md, H.zchunk(C.CHUNK_DEFS, defs), H.zchunk(C.CHUNK_DATA, H.good_data())])


OUTSIDE = {
    "a pid of 2^32": (_file(_defs(), {"pid": 1 << 32}), "its pid 4294967296 does not fit"),
    "a thread's pid past 32 bits": (_file(_defs(thread_pid=1 << 33)),
                                    "a thread's pid 8589934592 does not fit"),
    "a line past 32 bits": (_file(_defs(frame_line=1 << 40)),
                            "a value of its stacks table does not fit its Parquet column"),
    "times past 64-bit nanoseconds": (H.far_times(), "is outside the 64-bit nanoseconds"),
}


def _nothing_left(folder: Path, out: Path) -> None:
    assert not os.path.lexists(out), os.listdir(out)
    left = [n for n in os.listdir(folder) if n.startswith(f".{out.name}.psrec-")]
    assert not left, left


@pytest.mark.parametrize("case", OUTSIDE)
def test_values_outside_parquet_s_types_are_refused_in_one_line(case: str,
                                                                tmp_path: Path) -> None:
    data, says = OUTSIDE[case]
    path = tmp_path / "bad.psr"
    path.write_bytes(data)
    out = tmp_path / "ds"
    r = H.psrec("export", "--parquet", "-o", out, path)
    H.no_crash(r)
    assert r.returncode == 1, r.stderr
    lines = r.stderr.splitlines()
    assert lines[0].startswith(f"psrec: error: {path}: ") and says in lines[0], r.stderr
    assert "(a damaged or hand-made file)" in lines[0] and len(lines) == 2, r.stderr
    _nothing_left(tmp_path, out)


def test_a_file_that_runs_out_of_memory_is_refused_in_one_line(tmp_path: Path) -> None:
    """Within 512 MiB of address space a small recording is written, and one whose chunks
    hold MAX_CHUNK_SAMPLES samples each (100 M in all) runs out: said in one line, alone and
    beside another recording (each then exported by a worker process), nothing left behind."""
    import resource

    small = _synth(tmp_path / "small.psr", {"hostname": "h"}).path
    huge = H.write("samples_at_cap", tmp_path)
    limit = 512 << 20

    def run(*paths: object) -> subprocess.CompletedProcess[str]:
        def cap() -> None:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        return subprocess.run([sys.executable, "-m", "psrec", "export", "--parquet", "-o",
                               str(tmp_path / "ds"), *map(str, paths)], capture_output=True,
                              text=True, timeout=120, preexec_fn=cap)

    r = run(small)
    assert r.returncode == 0, r.stderr
    import shutil

    shutil.rmtree(tmp_path / "ds")
    for paths in ([huge], [small, huge]):
        r = run(*paths)
        H.no_crash(r)
        assert r.returncode == 1, r.stderr
        assert r.stderr.startswith(f"psrec: error: {huge}: ran out of memory exporting it\n"), \
            r.stderr
        _nothing_left(tmp_path, tmp_path / "ds")


# samples_at_cap (100 M samples) takes 12 s to export: the memory test above has it. These
# take 9-15 s each to make (test_format_hostile.py reads them with every command).
SLOW = {"samples_at_cap", "task_flood", "trie_churn", "many_threads"}


@pytest.mark.parametrize("name", [n for n in H.FILES if n not in SLOW])
def test_a_hostile_file_is_written_with_what_info_counts_or_refused_in_words(
        name: str, tmp_path: Path) -> None:
    import pyarrow.dataset as ds
    from psrec.analyzer.parquet import write_dataset
    from psrec.format import PsrecError, open_recording
    from psrec.format.describe import info

    path = H.write(name, tmp_path)
    with open_recording(path) as rec:
        want = info(rec)["samples"]
    out = tmp_path / "ds"
    try:
        written = write_dataset([str(path)], str(out))
    except PsrecError as exc:
        assert "a damaged or hand-made file" in exc.message, exc.message
        _nothing_left(tmp_path, out)
        return
    assert written.samples == want
    assert ds.dataset(str(out / "samples"), format="parquet").count_rows() == want
