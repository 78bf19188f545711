"""Several recordings read as one (spec section 11): `psrec report`, `export`, `diff` and
psrec.load given several files or a folder. One live recording cut in three gives what the
whole gives, in every output; two recordings of two programs give the sums of each; the
files --window writes read as their recording."""

from __future__ import annotations

import json
import marshal
import os
import socket
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from psrec import load as load_run
from psrec.format import open_recording
from psrec.format.writer import snapshot
from rec_live import TARGETS, one_python, psrec, python_params, record, target

pytestmark = [pytest.mark.live, pytest.mark.timeout(240)]


def _cut_in_three(whole: Path, folder: Path) -> list[Path]:
    """The recording's DATA chunks in three files, each a recording that reads alone (its
    header, metadata and definitions, and a third of the chunks)."""
    with open_recording(whole) as rec:
        n = len(rec.data_chunks())
    assert n >= 3, f"{whole} has {n} data chunks: too few to cut in three"
    folder.mkdir()
    cuts = [0, n // 3, 2 * n // 3, n]
    parts = []
    for i in range(3):
        part = folder / f"part-{i}.psr"
        snapshot(whole, part, only=slice(cuts[i], cuts[i + 1]))
        parts.append(part)
    return parts


def _out(*args: str) -> str:
    r = psrec(*args)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _from_first(threads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Firefox Profiler threads' samples, their times in µs from the first sample of all."""
    first = min(t["samples"]["time"][0] for t in threads if t["samples"]["time"])
    out = []
    for t in threads:
        s = dict(t["samples"])
        s["time"] = [round((x - first) * 1000) for x in s["time"]]
        out.append(s)
    return out


def _without_first_line(text: str) -> str:
    """A report without its header (which names what was read)."""
    return text.split("\n", 1)[1]


@pytest.mark.parametrize("python", python_params())
def test_a_recording_cut_in_three_reads_as_the_whole(python: str, tmp_path: Path) -> None:
    """One recording of three threads, its chunks cut into three files: given as three files
    or as their folder, every output equals that of the whole, thread by thread: the table,
    collapsed stacks per thread, pstats, speedscope (its name aside), the Firefox profile's
    samples, psrec.load's functions, a window and a thread selected."""
    whole = tmp_path / "whole.psr"
    with target(python, "rec_threads.py") as t:
        record(whole, t.pid, "-r", "500", duration=3.5)
    parts = _cut_in_three(whole, tmp_path / "parts")
    files = [str(p) for p in parts]
    folder = str(tmp_path / "parts")
    sums = [int(json.loads(_out("info", "--json", f))["samples"]) for f in files]
    assert all(sums) and sum(sums) == json.loads(_out("info", "--json", str(whole)))["samples"]

    views = ([], ["--mode", "cpu"], ["--from", "1", "--to", "2.5"], ["--thread", "busy-worker"])
    for view in views:
        w = _out("report", *view, str(whole))
        assert _without_first_line(_out("report", *view, *files)) == _without_first_line(w)
        assert _without_first_line(_out("report", *view, folder)) == _without_first_line(w)
        assert "(3 files of one recording)" in _out("report", *view, folder).split("\n")[0]
    w = _out("report", "--collapsed", "--per-thread", "-o", "-", str(whole))
    assert _out("report", "--collapsed", "--per-thread", "-o", "-", folder) == w

    for name, src in (("w", str(whole)), ("m", folder)):
        psrec("report", "--pstats", "-o", str(tmp_path / f"{name}.pstats"), src)
        for fmt in ("speedscope", "firefox"):
            r = psrec("export", f"--{fmt}", "-o", str(tmp_path / f"{name}.{fmt}"), src)
            assert r.returncode == 0, r.stderr
    assert marshal.loads((tmp_path / "w.pstats").read_bytes()) == \
        marshal.loads((tmp_path / "m.pstats").read_bytes())
    ws, ms = (json.loads((tmp_path / f"{n}.speedscope").read_text()) for n in "wm")
    assert ws["profiles"] == ms["profiles"] and ws["shared"] == ms["shared"]
    wf, mf = (json.loads((tmp_path / f"{n}.firefox").read_text()) for n in "wm")
    # The profile's times count from its first chunk's start (the index of a copy says when
    # its first sample was): the same, measured from the first sample.
    assert _from_first(wf["threads"]) == _from_first(mf["threads"])
    assert [t["name"] for t in wf["threads"]] == [t["name"] for t in mf["threads"]]

    run = load_run(files)
    assert run.functions() == load_run(whole).functions()
    assert len(run.recordings) == 1 and run.recordings[0].paths == tuple(files)


@pytest.mark.parametrize("python", one_python())
def test_the_tasks_of_a_recording_cut_in_three_read_as_the_whole(python: str,
                                                                 tmp_path: Path) -> None:
    """asyncio tasks (their ids, snapshots and the stacks those hold) read across the three
    files as in the whole: the tasks table, the logical stacks and where the tasks waited."""
    whole = tmp_path / "whole.psr"
    with target(python, "async_work.py", "20") as t:
        record(whole, t.pid, "-r", "500", duration=3.5)
    folder = str(tmp_path / "parts")
    _cut_in_three(whole, tmp_path / "parts")
    for view in (["--tasks"], ["--logical"], ["--collapsed", "--waits", "-o", "-"]):
        w = _out("report", *view, str(whole))
        assert "heavy-0" in w, w
        got = _out("report", *view, folder)
        if view[0] == "--collapsed":
            assert got == w
        else:
            assert _without_first_line(got) == _without_first_line(w)


@pytest.mark.parametrize("python", one_python())
def test_two_programs_read_as_one_give_the_sums_of_each(python: str, tmp_path: Path) -> None:
    """Two recordings of two programs (one on each of two interpreters where there are two):
    read as one, each function's samples and times are the sums of the two; each thread is
    labelled with its recording and keeps its samples; --recording selects one, which then
    reads as it does alone; --host selects both (this machine's); the later recording's
    samples lie later on the merged timeline by the time between the two starts."""
    other = next((p.values[0] for p in python_params()
                  if p.values[0] and p.values[0] != python), python)  # type: ignore[attr-defined]
    a, b = tmp_path / "a.psr", tmp_path / "b.psr"
    with target(python, "rec_threads.py") as t:
        record(a, t.pid, "-r", "500", duration=1.5)
    with target(other, "per_second.py", "30") as t:
        record(b, t.pid, "-r", "500", duration=1.5)
    both = load_run([a, b])
    alone = [load_run(a), load_run(b)]
    want_samples: Counter[tuple[str, str, int]] = Counter()
    want_time: Counter[tuple[str, str, int]] = Counter()
    for run in alone:
        for row in run.functions():
            want_samples[(row.filename, row.name, row.line)] += row.total_samples
            want_time[(row.filename, row.name, row.line)] += row.total_s
    got = {(r.filename, r.name, r.line): r for r in both.functions()}
    assert set(got) == set(want_samples)
    for key, row in got.items():
        assert row.total_samples == want_samples[key], key
        assert abs(row.total_s - want_time[key]) < 1e-6, key

    assert [s.path for s in both.recordings] == [str(a), str(b)]
    refs = {ref for ref in both.profile.thread_refs()}
    for ref in refs:
        src = both.recording_of(ref)
        assert src is not None and both.profile.thread_label(ref).endswith(f"{src.name})")
    assert len(refs) == sum(len(r.profile.thread_refs()) for r in alone)

    with open_recording(a) as ra, open_recording(b) as rb:
        later_ns = rb.header.created_wall_ns - ra.header.created_wall_ns
        tick = ra.tick_ns
    assert later_ns > 0
    first_b = min(t for t, ref in zip(both.samples.time, both.samples.thread)
                  if both.recording_of(ref).path == str(b))  # type: ignore[union-attr]
    assert abs(first_b - (later_ns / 1e9 + min(alone[1].samples.time))) < 2 * tick / 1e9

    only_b = _out("report", "--recording", "b", str(a), str(b))
    assert _without_first_line(only_b).split("\n", 3)[3] == \
        _without_first_line(_out("report", str(b))).split("\n", 3)[3]
    host = socket.gethostname()
    assert _out("report", "--host", host, str(a), str(b)) == _out("report", str(a), str(b))
    r = psrec("report", "--host", "no-such-host", str(a), str(b))
    assert r.returncode == 1 and "no recording from host 'no-such-host'" in r.stderr
    assert "Traceback" not in r.stderr and host in r.stderr


@pytest.mark.parametrize("python", one_python())
def test_window_files_read_as_their_recording(python: str, tmp_path: Path) -> None:
    """--window 1s over a 4 s run whose thread is renamed at 2 s: the files, read as one
    (their folder), hold every sample of each file once, each thread once, under the name it
    was last given; diff takes a folder on each side."""
    runs = tmp_path / "runs"
    runs.mkdir()
    r = psrec("record", "-q", "-r", "200", "--window", "1s", "-o", str(runs / "run-{n}.psr"),
              "--", python, str(TARGETS / "per_second.py"), "4", "2", timeout=60)
    assert r.returncode == 0, r.stderr
    files = sorted(runs.iterdir())
    assert len(files) >= 3, files
    per_file = [load_run(f).profile.selected for f in files]
    run = load_run(runs)
    assert run.profile.selected == sum(per_file)
    tids = {t.os_tid for ref, t in run.threads.items() if ref in run.profile.thread_refs()}
    assert len(run.profile.thread_refs()) == len(tids)
    assert "phases-2" in {run.threads[ref].name for ref in run.profile.thread_refs()}
    d = psrec("diff", str(runs), str(runs))
    assert d.returncode == 0, d.stderr
    assert f"({len(files)} files of one recording)" in d.stdout, d.stdout


def test_a_folder_without_recordings_is_said_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("no recording here")
    r = psrec("report", str(tmp_path))
    assert r.returncode == 1
    assert r.stderr.startswith(f"psrec: error: {tmp_path}: holds no recording"), r.stderr
    assert "Traceback" not in r.stderr and os.linesep in r.stderr
