"""A flight recording's definitions stay within its bound (spec 7.1, epochs): a target that
starts tasks and threads without end, with names never seen before, recorded with --keep,
keeps a file whose definitions do not grow, and that still names everything it holds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from format_helpers import new_writer, read_samples
from psrec.format import _constants as C
from psrec.format import native_available, open_recording
from psrec.format.writer import Retention

pytestmark = pytest.mark.skipif(
    not native_available(), reason="the native codec (psrec.format._format) is not built"
)

PID = 4242
PASS_TICKS = 10_000  # 10 ms
KEEP_S = 2.0


def run(path: Path, seconds: int, epochs: bool,
        at_second: Callable[[int], None] | None = None) -> dict[int, Any]:
    """Feeds the encoder a server: one main thread running a new task each pass (each named
    anew, each waiting on a future of its own name), a worker thread a second that is renamed
    and exits, a marker every 5 s. Returns, by pass time, what that pass sampled: the main
    thread's task name and stack, and each worker's name and stack."""
    from psrec.format import _format

    enc = _format.Encoder()
    w = new_writer(path, retention=Retention(seconds=KEEP_S),
                   new_epoch=enc.new_epoch if epochs else None)
    fn = enc.intern_string("server.py")
    funcs = {name: enc.intern_function(fn, enc.intern_string(name), line)
             for line, name in enumerate(("main", "serve", "handle", "idle", "work"), 1)}
    frame = {name: enc.intern_frame(f, 10) for name, f in funcs.items()}
    main = enc.add_thread(PID, 1, 1, "MainThread", 0)
    workers: dict[int, tuple[int, str]] = {}  # ref -> (started at pass, name)
    tasks: dict[int, tuple[int, str]] = {}  # task id -> (pass defined, name)
    truth: dict[int, Any] = {}
    passes = seconds * 100
    for i in range(passes):
        ts = PASS_TICKS * (i + 1)
        if i % 100 == 0:
            k = i // 100
            workers[enc.add_thread(PID, 1000 + k, 1000 + k, f"worker-{k}", ts)] = (i, f"worker-{k}")
            if k % 5 == 0:
                enc.marker(ts, f"second {k}")
        for ref, (began, name) in list(workers.items()):
            if i - began == 50:
                workers[ref] = (began, name.replace("worker", "busy"))
                enc.thread_rename(ref, ts, workers[ref][1])
            elif i - began == 150:
                enc.thread_exit(ref, ts)
                del workers[ref]
        name = f"Task-{i}"
        task = enc.define_task(PID, 0x1000 + 0x40 * i, name, funcs["handle"], ts)
        tasks[task] = (i, name)
        enc.begin_pass(ts)
        stack = ["main", "serve", "handle" if i % 2 else "idle"]
        enc.sample(main, [frame[f] for f in stack], 1)
        enc.sample_task(main, task)
        for ref in workers:
            enc.sample(ref, [frame["work"]], 1)
        enc.end_pass()
        enc.begin_task_snapshot(PID, ts)
        for tid, (began, tname) in tasks.items():
            if i - began < 3:
                enc.task_state(tid, C.TASK_SUSPENDED, f"future of {tname}", [frame["handle"]],
                               [])
        enc.end_task_snapshot()
        for tid, (began, _) in list(tasks.items()):
            if i - began >= 5:  # the recorder forgets a task some time after its end
                enc.forget_task(tid)
                del tasks[tid]
        truth[ts] = {main: (name, tuple(stack)),
                     **{ref: (wname, ("work",)) for ref, (_, wname) in workers.items()}}
        if i % 10 == 9:
            w.write_sealed(*enc.seal())
            if at_second is not None and (i + 1) % 100 == 0:
                at_second((i + 1) // 100)
    w.write_sealed(*enc.seal())
    w.close({})
    return truth


def defs_bytes(path: Path) -> int:
    with open_recording(path) as rec:
        return sum(c.raw_length for c in rec.chunks if c.type == C.CHUNK_DEFS)


@pytest.mark.parametrize("epochs", [True, False], ids=["epochs", "no-epochs"])
def test_definitions_of_a_flight_recording_stay_bounded(tmp_path: Path, epochs: bool) -> None:
    path = tmp_path / "server.psr"
    sizes: dict[int, int] = {}
    run(path, 40, epochs, lambda s: sizes.__setitem__(s, defs_bytes(path)))
    # Four times the kept span into the run, and ten: the definitions of a file that keeps
    # 2 s of a target making a new name each pass.
    early, late = sizes[8], sizes[40]
    if epochs:
        assert late < 1.3 * early, sizes
    else:  # every DEFS chunk kept: they grow with the run (what the epochs are for)
        assert late > 3 * early, sizes


def test_a_file_that_dropped_old_definitions_names_everything_it_holds(tmp_path: Path) -> None:
    path = tmp_path / "server.psr"
    truth = run(path, 12, True)
    with open_recording(path) as rec:
        assert not rec.warnings, rec.warnings
        defs = rec.definitions()
        samples, stream = read_samples(rec, native=True, tasks=True)
        events = list(stream.events)
    strings = defs.strings
    renames = sorted((e[1], e[2], strings[e[3]]) for e in events
                     if e[0] == C.REC_THREAD_RENAME)

    def name_at(ref: int, ts: int) -> str:
        named = [name for t, r, name in renames if r == ref and t <= ts]
        return named[-1] if named else defs.threads[ref].name

    kept = {ts for ts, *_ in samples}
    # The file holds the last 2 s (to 2 s + a twentieth + a chunk), and every pass in them.
    assert KEEP_S * 1e6 <= max(kept) - min(kept) + PASS_TICKS <= (KEEP_S * 1.05 + 0.1) * 1e6
    assert kept == {ts for ts in truth if ts >= min(kept)}
    seen: set[str] = set()
    for ts, thread, stack, _status, _cpu, _w, task in samples:
        name, frames = truth[ts][thread]
        assert tuple(defs.frame(f).function.name for f in stack) == frames, (ts, thread)
        if thread == 1:
            assert defs.threads[thread].name == "MainThread"
            assert task in defs.tasks, (ts, task)
            assert defs.tasks[task].name == name
            assert defs.tasks[task].coroutine is not None
            assert defs.tasks[task].coroutine.name == "handle"
        else:
            assert name_at(thread, ts) == name, (ts, thread)
            seen.add(name)
    assert any(n.startswith("busy") for n in seen) and any(n.startswith("worker") for n in seen)
    # The file holds the definitions of at most two epochs (an epoch lasts about the kept
    # span): no thread, task or string last used long before the data kept is defined.
    last = max(truth)
    recent = {ref for ts, seen_then in truth.items() if last - ts < 2.3 * KEEP_S * 1e6
              for ref in seen_then}
    assert {thread for _, thread, *_ in samples} <= set(defs.threads) <= recent
    assert len(defs.threads) < len({ref for seen_then in truth.values() for ref in seen_then})
    assert {task for *_, task in samples} - {0} <= set(defs.tasks)  # 0: no task (workers)
    assert all(last - defs.tasks[t].start_ts < 2.3 * KEEP_S * 1e6 for t in defs.tasks)
    states = [e for e in events if e[0] == C.REC_TASK_STATE]
    assert states and all(e[2] in defs.tasks for e in states)
    assert all(strings[e[3] >> 2].startswith("future of Task-") for e in states
               if e[3] & 3 == C.TASK_SUSPENDED)
    assert len([s for s in strings.values() if s.startswith("future of ")]) < 2 * 300
    markers = [e for e in events if e[0] == C.REC_MARKER]
    assert all(e[2] in strings for e in markers), markers


def test_a_rewrite_that_cannot_be_made_keeps_the_file_whole_and_the_recording_going(
        tmp_path: Path) -> None:
    """On a file system that can create no file for a while (a tmpfs with no inode left,
    the same ENOSPC a full disk gives), the rewrites of a flight recording cannot be made:
    the file stays whole and goes on past its bound, and once files can be created again the
    next rewrite brings it back to its bound. Nothing is lost, and no copy is left."""
    import errno
    import subprocess

    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,nr_inodes=64", "tmpfs",
                              str(disk)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"a small tmpfs cannot be mounted here (needs CAP_SYS_ADMIN): "
                    f"{mounted.stderr.strip()}")
    try:
        path = disk / "server.psr"
        fillers: list[Path] = []
        spans: dict[int, float] = {}

        def at_second(s: int) -> None:
            with open_recording(path) as rec:
                samples, _ = read_samples(rec, native=True)
            spans[s] = (max(t for t, *_ in samples) - min(t for t, *_ in samples)) / 1e6
            if s == 3:  # no file can be created from now on
                while True:
                    f = disk / f"filler-{len(fillers)}"
                    try:
                        f.touch()
                    except OSError as exc:
                        assert exc.errno == errno.ENOSPC, exc
                        break
                    fillers.append(f)
            elif s == 7:
                for f in fillers:
                    f.unlink()

        truth = run(path, 10, True, at_second)
        # Kept 2 s (to 2.2 s) before, more while no copy could be made, 2 s again after.
        assert spans[3] < KEEP_S * 1.2, spans
        assert spans[6] > KEEP_S * 1.5, spans
        assert spans[9] < KEEP_S * 1.2, spans
        with open_recording(path) as rec:
            assert rec.clean and not rec.warnings, rec.warnings
            samples, _ = read_samples(rec, native=True)
        kept = {ts for ts, *_ in samples}
        assert kept == {ts for ts in truth if ts >= min(kept)}
        assert sorted(p.name for p in disk.iterdir()) == ["server.psr"]
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
