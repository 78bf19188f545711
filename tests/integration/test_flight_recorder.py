"""Flight recordings (--keep, --max-size), snapshots (psrec snapshot, SIGUSR1) and windows
(--window), on live targets: tests/targets/per_second.py works in one function a second and
prints which, so what a file keeps can be checked against what the target did."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from psrec.format import open_recording
from rec_live import TARGETS, Sample, collapsed, load, one_python, psrec, target

pytestmark = [pytest.mark.live, pytest.mark.timeout(300)]

SECOND = 1_000_000_000
CHUNK = SECOND  # a DATA chunk spans at most one second (spec section 7)


def _recorder(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "psrec", "record", "-q", *args],
                            cwd=str(TARGETS), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _mono(path: Path) -> tuple[list[Sample], int, int]:
    """The samples of a file, and how to turn their ts into CLOCK_MONOTONIC ns."""
    with open_recording(path) as rec:
        base, tick = rec.header.created_mono_ns, rec.tick_ns
    return load(path), base, tick


def _seconds_match(samples: list[Sample], base: int, tick: int,
                   printed: list[dict[str, object]]) -> int:
    """Checks that each second the target printed, inside the samples' span, is spent in
    the function it names (90 % of its samples, its edges aside); returns how many it
    checked."""
    if not samples:
        return 0
    lo, hi = base + samples[0].ts * tick, base + samples[-1].ts * tick
    checked = 0
    for line in printed:
        start, end = int(line["start"]) + SECOND // 20, int(line["end"]) - SECOND // 20
        if start < lo or end > hi:
            continue
        inside = [s for s in samples if start <= base + s.ts * tick <= end]
        phase = str(line["phase"])
        hits = sum(1 for s in inside if phase in s.functions)
        assert inside and hits >= 0.9 * len(inside), (line, collapsed(inside))
        checked += 1
    return checked


@pytest.mark.timeout(180)
@pytest.mark.parametrize("python", one_python())
def test_keep_holds_the_last_seconds_of_what_the_target_did(python: str,
                                                             tmp_path: Path) -> None:
    """--keep 20s over a 60 s run (at the flight recorder's own rate, 100 Hz): the file
    covers the last 20 s, give or take a chunk (and the 1 s a file may run past its bound
    before it is written anew: Retention.SLACK), and each of those seconds holds what the
    target said it did in it; its thread has the name it was last given."""
    out = tmp_path / "last.psr"
    r = psrec("record", "-q", "-o", str(out), "--keep", "20s", "--", python,
              str(TARGETS / "per_second.py"), "60", "45", timeout=150)
    assert r.returncode == 0, r.stderr
    printed = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    assert len(printed) == 60
    samples, base, tick = _mono(out)
    with open_recording(out) as rec:
        assert rec.clean and rec.metadata["rate_hz"] == 100.0
        st = rec.stats
        assert st is not None and st["dropped_samples"] > 0
        assert st["samples"] - st["dropped_samples"] == len(samples)
    # Named at the start (in a dropped chunk), renamed at 45 s (in the window): the names
    # carried into each file begun anew do not hold its oldest chunks back.
    assert {s.thread for s in samples} == {"phases-2"}
    end = int(printed[-1]["end"])
    first = base + samples[0].ts * tick
    covered = end - first
    assert 20 * SECOND - CHUNK - SECOND // 5 <= covered <= 21 * SECOND + CHUNK + SECOND // 5, \
        covered / SECOND
    assert _seconds_match(samples, base, tick, printed) >= 17
    info = psrec("info", str(out))
    assert f"dropped {st['dropped_samples']:,} older samples" in info.stdout, info.stdout


@pytest.mark.timeout(120)
@pytest.mark.parametrize("python", one_python())
def test_max_size_is_never_passed_and_a_killed_recorder_leaves_a_readable_file(
        python: str, tmp_path: Path) -> None:
    """--max-size 64K at 10 kHz: the file, watched every few ms, always exists and never
    passes 64 KiB (it is written anew beside its name and renamed over it); the recorder
    killed (SIGKILL) at three random moments leaves each time a file that reads whole, of at
    most the bound, with the last seconds (--keep 2s: at most 2 s, a slack and a chunk)."""
    bound = 64 << 10
    rng = random.Random()
    with target(python, "per_second.py") as t:
        for n in range(3):
            out = tmp_path / f"fr-{n}.psr"
            # What a recorder killed while it wrote its file anew leaves: removed by the next.
            stale = tmp_path / f".fr-{n}.psr.x1y2z3.keep"
            stale.write_bytes(b"\0" * 100)
            proc = _recorder("-o", str(out), "-r", "10k", "--max-size", "64K", "--keep", "2s",
                             str(t.pid))
            kill_at = time.monotonic() + rng.uniform(3.0, 6.0)
            sizes = []
            try:
                while time.monotonic() < kill_at:
                    if sizes or out.exists():
                        sizes.append(out.stat().st_size)  # raises if the name were missing
                    time.sleep(0.003)
            finally:
                proc.kill()
                proc.wait(10)
            assert sizes and max(sizes) <= bound, max(sizes)
            assert not stale.exists()
            assert out.stat().st_size <= bound
            with open_recording(out) as rec:
                batches = sum(len(b) for b in rec.stream())
                assert rec.corrupt_chunks == 0, rec.warnings
            samples, _, tick = _mono(out)
            assert batches == len(samples) > 1000
            assert {s.thread for s in samples} == {"phases"}  # renamed in a dropped chunk
            span = (samples[-1].ts - samples[0].ts) * tick
            assert span <= 2 * SECOND + SECOND // 10 + 2 * CHUNK, span / SECOND


@pytest.mark.timeout(120)
@pytest.mark.parametrize("python", one_python())
def test_a_server_that_names_new_tasks_without_end_keeps_its_file_within_bounds(
        python: str, tmp_path: Path) -> None:
    """An asyncio echo server (about 2,000 tasks a second, each named anew) recorded with
    --keep 3s for 16 s: the file defines the tasks of its last seconds only, not every task the
    server made (its definitions would grow without end: spec 7.1, epochs), and still names
    every task its samples ran and its task states give, each one a task of the program whose
    life holds the samples."""
    from psrec.analyzer.model import batch_columns
    from psrec.format import _constants as C

    out, truth_file = tmp_path / "echo.psr", tmp_path / "echo.json"
    proc = _recorder("-o", str(out), "--keep", "3s", "-r", "1k", "--", python,
                     str(TARGETS / "async_echo.py"), "16", str(truth_file))
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    lives = {name: (created, done)
             for name, created, done, _ in json.loads(truth_file.read_text())["tasks"]}
    assert len(lives) > 5000, len(lives)
    with open_recording(out) as rec:
        assert rec.corrupt_chunks == 0, rec.warnings
        defs = rec.definitions()
        mono0, tick = rec.header.created_mono_ns, rec.header.tick_ns
        stream = rec.stream()
        rows = [row for batch in stream for row in zip(*batch_columns(batch, "ts", "task"))]
        events = list(stream.events)
    program = [t for t in defs.tasks.values() if t.name in lives]
    # The tasks of at most two epochs of about 3 s each (with the slack and a chunk), out of
    # 16 s of them.
    assert 100 < len(program) < 0.6 * len(lives), (len(program), len(lives))
    ran = {task for _, task in rows if task}
    assert ran and ran <= set(defs.tasks)
    late = 0
    for ts, task in rows:
        name = defs.tasks[task].name if task else ""
        if name in lives:
            created, done = lives[name]
            # a pass's sample is read within 50 ms of its stamp, even on a busy host
            late += not (created - 50_000_000 <= mono0 + ts * tick <= done + 50_000_000)
    assert late <= 0.01 * len(rows), late
    states = [e for e in events if e[0] == C.REC_TASK_STATE]
    assert states and all(e[2] in defs.tasks for e in states)
    assert all(e[3] >> 2 in defs.strings for e in states if e[3] >> 2)
    strangers = {defs.tasks[e[2]].name for e in states} - set(lives) - {"server"}
    assert not {n for n in strangers if not n.startswith("Task-")}, sorted(strangers)[:5]


def _key(samples: list[Sample]) -> list[tuple[int, str, tuple[tuple[str, str, int], ...]]]:
    return [(s.ts, s.thread, s.stack) for s in samples]


@pytest.mark.parametrize("keep", [None, "2s"])
@pytest.mark.parametrize("python", one_python())
def test_a_snapshot_reads_exactly_what_the_running_file_held(python: str, keep: str | None,
                                                             tmp_path: Path) -> None:
    """`psrec snapshot` of a recording being written (plain, and a flight recording being
    written anew under it) is a closed file whose samples are those of the running file's
    whole chunks at that moment: no fewer than a copy taken just before, no more than one
    taken just after, and the same samples as the file they came from."""
    out, snap = tmp_path / "run.psr", tmp_path / "now.psr"
    with target(python, "per_second.py") as t:
        proc = _recorder("-o", str(out), "-r", "1000", *(["--keep", keep] if keep else []),
                         str(t.pid))
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and (not out.exists()
                                                   or out.stat().st_size < 10000):
                time.sleep(0.05)
            time.sleep(3.5 if keep else 1.5)  # a flight recording past its first rewrite
            before = tmp_path / "before.psr"
            shutil.copyfile(out, before)
            r = psrec("snapshot", str(out), "-o", str(snap))
            after = tmp_path / "after.psr"
            shutil.copyfile(out, after)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(30)
    assert r.returncode == 0, r.stderr
    with open_recording(snap) as rec:
        assert rec.clean and not rec.warnings, rec.warnings
    got, was, then = _key(load(snap)), _key(load(before)), _key(load(after))
    assert len(got) > 500
    # Every sample it has was in the file then, in the same order, at the same times.
    assert set(got) <= set(was) | set(then)
    assert got == sorted(got, key=lambda k: k[0])
    if keep is None:
        final = _key(load(out))
        assert final[:len(got)] == got
        assert len(was) <= len(got) <= len(then)
    else:
        assert was[-1][0] <= got[-1][0] <= then[-1][0]
        assert was[0][0] <= got[0][0] <= then[0][0]


@pytest.mark.parametrize("python", one_python())
def test_sigusr1_writes_a_snapshot_beside_the_recording(python: str, tmp_path: Path) -> None:
    out = tmp_path / "fr.psr"
    with target(python, "per_second.py") as t:
        proc = _recorder("-o", str(out), "--keep", "5s", "-r", "1000", str(t.pid))
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and (not out.exists()
                                                   or out.stat().st_size < 4000):
                time.sleep(0.05)
            proc.send_signal(signal.SIGUSR1)
            found: list[Path] = []
            while time.monotonic() < deadline and not found:
                found = list(tmp_path.glob("fr.snapshot-*.psr"))
                time.sleep(0.05)
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert len(found) == 1, os.listdir(tmp_path)
    assert f"psrec: wrote the snapshot {found[0]}" in err
    with open_recording(found[0]) as rec:
        assert rec.clean and not rec.warnings
    assert len(load(found[0])) > 100


@pytest.mark.parametrize("python", one_python())
def test_windows_each_read_alone_and_together_hold_the_run(python: str,
                                                           tmp_path: Path) -> None:
    """--window 2s over 7 s: four files, each closed and readable alone (its definitions
    with it, and the name its thread was given in the first window), each holding the
    samples of its own window and no other, one window after the other, together every
    second the target worked, each spent where it said."""
    pattern = str(tmp_path / "w-{n}.psr")
    r = psrec("record", "-q", "-r", "1000", "-o", pattern, "--window", "2s", "--", python,
              str(TARGETS / "per_second.py"), "7")
    assert r.returncode == 0, r.stderr
    printed = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    files = sorted(tmp_path.glob("w-*.psr"), key=lambda p: int(p.stem[2:]))
    assert [p.name for p in files] == [f"w-{n}.psr" for n in range(len(files))]
    assert len(files) in (4, 5), files  # the last second may reach a fifth window
    every: list[Sample] = []
    last_ts = -1
    for n, path in enumerate(files):
        with open_recording(path) as rec:
            assert rec.clean and not rec.warnings, rec.warnings
            st = rec.stats
            assert st is not None and st["stopped_by"] == ("window" if n < len(files) - 1
                                                           else "exit")
        samples, base, tick = _mono(path)
        assert samples and samples[0].ts > last_ts
        assert st["samples"] == len(samples)
        # Exactly its window's samples: the sampler sealed its chunk at the window's edge.
        window = 2 * SECOND // tick
        assert samples[0].ts // window == samples[-1].ts // window, (n, samples[0].ts,
                                                                     samples[-1].ts)
        if n:
            assert samples[0].ts // window == last_ts // window + 1
        assert {s.thread for s in samples} == {"phases"}  # a name the first file learnt
        last_ts = samples[-1].ts
        every += samples
    assert _seconds_match(every, base, tick, printed) >= 5
