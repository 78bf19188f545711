"""`psrec export --parquet` of the files a fleet leaves: windows (`--window`), snapshots
(`psrec snapshot`, SIGUSR1), flight recordings (`--keep`) and folders of them, recorded from
live targets. Every sample of every file is in the dataset once, whatever mix of files of one
recording is given, at once or over several exports; the export says what it left out. The
dataset changes whole or not at all: an exporter killed (SIGKILL) at any instant leaves it as
it was (or, past its last step, as it would be), a reader sees one or the other, and two
exports at once both land or one is refused in one line. Errors of the file system are one
line that leaves nothing behind.

What a mix must give is worked out from the files alone: each file's samples as `psrec info
--json` counts them, and the samples themselves (time and thread) read with psrec.format, put
together by recording (spec psr-format.md section 11, rule 1)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from rec_live import TARGETS, Sample, load, one_python, psrec

pytestmark = [pytest.mark.live, pytest.mark.timeout(300)]

pa_ds = pytest.importorskip("pyarrow.dataset", reason="export --parquet needs pyarrow")
try:
    import duckdb
except ImportError:  # the counts are then pyarrow's alone
    duckdb = None

Key = tuple[int, int, object, object]  # created wall, created mono, hostname, pid


@dataclass(frozen=True)
class Files:
    folder: Path
    windows: list[Path]
    window_snapshot: Path  # psrec snapshot of the second window
    plain: Path
    plain_snapshot: Path  # psrec snapshot of plain while it was written
    plain_cut: Path  # plain cut short after its next to last chunk: no index (a killed recorder)
    flight: Path  # --keep 2s
    flight_snapshot: Path  # its SIGUSR1 snapshot

    @property
    def every(self) -> list[Path]:
        return sorted(self.folder.glob("*.psr"))


def _recorder(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "psrec", "record", "-q", *args],
                            cwd=str(TARGETS), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _ok(r: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert r.returncode == 0, r.stderr
    return r


def _holds(path: Path, enough: Callable[[list[Sample]], bool], what: str) -> None:
    """Waits until the recording being written at `path` holds what `enough` asks for (every
    complete chunk of a file being written can be read)."""
    deadline = time.monotonic() + 60
    size = -1
    while True:
        if path.exists() and path.stat().st_size != size:
            size = path.stat().st_size
            if size > 200 and enough(load(path)):
                return
        assert time.monotonic() < deadline, f"{what}: not in {path} within 60 s"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Files:
    """Three recordings of tests/targets/per_second.py (which names its thread "phases"), made
    at once: one in 3 s windows over 7 s, with a snapshot of its second window once it held
    samples (while it was written, but for a busy host); one plain over 4 s, with a snapshot of
    it while it was written; a flight recording (--keep 2s) over 7 s, with the snapshot SIGUSR1
    made once it had dropped its first chunks."""
    folder = tmp_path_factory.mktemp("fleet-files")
    python = one_python()[0].values[0]  # type: ignore[attr-defined]
    script = str(TARGETS / "per_second.py")
    windows = _recorder("-r", "1000", "--window", "3s", "-o", str(folder / "w-{n}.psr"), "--",
                        python, script, "7")
    plain = _recorder("-r", "1000", "-o", str(folder / "plain.psr"), "--", python, script, "4")
    flight = _recorder("-r", "1000", "--keep", "2s", "-o", str(folder / "fr.psr"), "--",
                       python, script, "7")
    procs = [windows, plain, flight]
    try:
        _holds(folder / "plain.psr", lambda s: len(s) >= 300, "plain's first chunk")
        _ok(psrec("snapshot", str(folder / "plain.psr"), "-o", str(folder / "plain.snap.psr")))
        _holds(folder / "w-1.psr", lambda s: len(s) > 0, "the second window's first chunk")
        _ok(psrec("snapshot", str(folder / "w-1.psr"), "-o", str(folder / "snap-of-w-1.psr")))
        # Dropped chunks: its first sample is a second or more after it began.
        _holds(folder / "fr.psr", lambda s: bool(s) and s[0].ts >= 10**6,
               "the flight recording's first rewrite")
        assert flight.poll() is None, "the flight recorder exited before its snapshot"
        flight.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 30
        while not list(folder.glob("fr.snapshot-*.psr")):
            assert time.monotonic() < deadline, os.listdir(folder)
            time.sleep(0.05)
        for p in procs:
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    windows_found = sorted(folder.glob("w-[0-9]*.psr"), key=lambda p: int(p.stem[2:]))
    assert len(windows_found) >= 3, windows_found  # 7 s: 0-3, 3-6, 6-
    (snap,) = folder.glob("fr.snapshot-*.psr")
    from psrec.format import open_recording

    with open_recording(folder / "plain.psr") as rec:
        end = rec.data_chunks()[-2].end
    cut = folder / "plain-cut.psr"
    cut.write_bytes((folder / "plain.psr").read_bytes()[:end])
    return Files(folder, windows_found, folder / "snap-of-w-1.psr", folder / "plain.psr",
                 folder / "plain.snap.psr", cut, folder / "fr.psr", snap)


# -- what the files hold --------------------------------------------------------------------

_KEYS: dict[Path, tuple[Key, set[tuple[int, int]]]] = {}


def _read(path: Path) -> tuple[Key, set[tuple[int, int]]]:
    """The file's recording and its samples as (time, thread ref)."""
    if path not in _KEYS:
        from psrec.format import open_recording

        with open_recording(path) as rec:
            md = rec.metadata
            key = (rec.header.created_wall_ns, rec.header.created_mono_ns, md.get("hostname"),
                   md.get("pid"))
            got: list[tuple[int, int]] = []
            for batch in rec.stream():
                got += zip(list(memoryview(batch.ts).cast("B").cast("q")),
                           list(memoryview(batch.thread).cast("B").cast("I")))
        assert len(set(got)) == len(got), f"{path} holds a sample twice"
        _KEYS[path] = (key, set(got))
    return _KEYS[path]


_INFO: dict[Path, int] = {}


def _info_samples(path: Path) -> int:
    if path not in _INFO:
        r = _ok(psrec("info", "--json", str(path)))
        _INFO[path] = int(json.loads(r.stdout)["samples"])
    return _INFO[path]


@dataclass(frozen=True)
class Expected:
    rows: int  # samples of the files, each once
    given: int  # the files' samples as psrec info counts them
    recordings: int

    @property
    def twice(self) -> int:
        return self.given - self.rows


def _expected(paths: list[Path]) -> Expected:
    by_key: dict[Key, set[tuple[int, int]]] = {}
    given = 0
    for p in paths:
        key, samples = _read(p)
        by_key.setdefault(key, set()).update(samples)
        info = _info_samples(p)
        assert info == len(samples), (p, info, len(samples))
        given += info
    return Expected(sum(map(len, by_key.values())), given, len(by_key))


def _psr_files(given: list[Path]) -> list[Path]:
    """The files given: files, and the .psr files of folders."""
    return [f for g in given for f in (sorted(g.glob("*.psr")) if g.is_dir() else [g])]


# -- what the dataset holds -----------------------------------------------------------------

def _counts(out: Path) -> list[int]:
    """The dataset's samples as pyarrow counts them, and DuckDB (when installed)."""
    n = [pa_ds.dataset(str(out / "samples"), format="parquet", partitioning="hive"
                       ).count_rows()]
    if duckdb is not None:
        n += duckdb.sql(f"SELECT count(*) FROM read_parquet('{out}/samples/**/*.parquet', "
                        "hive_partitioning = true)").fetchall()[0]
    return [int(x) for x in n]


def _rows(out: Path) -> int:
    """The dataset's samples, as pyarrow and DuckDB agree."""
    n = _counts(out)
    assert len(set(n)) == 1, n
    return n[0]


def _check_whole(out: Path) -> None:
    """Each sample once (a recording's time and thread), with its stack and its thread; each
    part's row in the recordings table counts its samples."""
    if duckdb is None:
        pytest.skip("duckdb is not installed: the joins are checked with it")
    s = f"read_parquet('{out}/samples/**/*.parquet', hive_partitioning = true)"
    k, t, r = (f"read_parquet('{out}/{table}/*.parquet')"
               for table in ("stacks", "threads", "recordings"))
    twice = duckdb.sql(f"""SELECT count(*) FROM (SELECT r.created, r.created_mono_ns,
        r.hostname, r.pid, s.ts, s.thread FROM {s} s JOIN {r} r USING (recording)
        GROUP BY ALL HAVING count(*) > 1)""").fetchall()[0][0]
    assert twice == 0
    lost = duckdb.sql(f"""SELECT count(*) FROM {s} s WHERE NOT EXISTS (SELECT 1 FROM {k} k
        WHERE k.recording = s.recording AND k.stack_id = s.stack_id) OR NOT EXISTS (SELECT 1
        FROM {t} t WHERE t.recording = s.recording AND t.thread = s.thread)""").fetchall()
    assert lost == [(0,)], lost
    counts = duckdb.sql(f"""SELECT r.recording, r.samples, count(s.recording) FROM {r} r
        LEFT JOIN {s} s USING (recording) GROUP BY ALL""").fetchall()
    assert all(want == got for _, want, got in counts), counts
    names = duckdb.sql(f"SELECT DISTINCT name FROM {t}").fetchall()
    assert ("phases",) in names, names


def _state(out: Path) -> tuple[tuple[str, ...], tuple[tuple[str, int], ...]]:
    """What a reader of the dataset finds: its files (hidden ones aside), and its samples by
    part."""
    found = []
    for folder, _, names in os.walk(out):
        for name in names:
            if not name.startswith("."):
                found.append(os.path.relpath(os.path.join(folder, name), out))
    table = pa_ds.dataset(str(out / "samples"), format="parquet",
                          partitioning="hive").to_table(columns=["recording"])
    by_part = Counter(table["recording"].to_pylist())
    return tuple(sorted(found)), tuple(sorted(by_part.items()))


def _export(out: Path, given: list[Path], *extra: str) -> str:
    r = _ok(psrec("export", "--parquet", "-o", str(out), *extra, *map(str, given)))
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("psrec: wrote ")]
    return line


def _no_staging(out: Path) -> None:
    left = [n for n in os.listdir(out.parent) if n.startswith(f".{out.name}.psrec-")]
    assert not left, left


# -- every sample of every mix, once --------------------------------------------------------

MIXES = {
    "windows": lambda f: f.windows,
    "windows and a snapshot of one": lambda f: [*f.windows, f.window_snapshot],
    "a recording and its snapshot": lambda f: [f.plain, f.plain_snapshot],
    "a recording cut short, its snapshot and the whole": lambda f: [f.plain_cut,
                                                                    f.plain_snapshot, f.plain],
    "a flight recording and its SIGUSR1 snapshot": lambda f: [f.flight, f.flight_snapshot],
    "a folder of them all": lambda f: [f.folder],
}


@pytest.mark.parametrize("mix", MIXES)
def test_every_sample_of_a_mix_is_written_once(files: Files, mix: str,
                                               tmp_path: Path) -> None:
    given = MIXES[mix](files)
    want = _expected(_psr_files(given))
    if mix != "windows" and "flight" not in mix:  # (a flight snapshot may share no chunk)
        assert want.twice > 0, "the snapshot holds none of the recording's samples"
    out = tmp_path / "fleet"
    line = _export(out, given)
    n = want.recordings
    said = f"psrec: wrote {out} ({want.rows:,} samples of {n} recording{'s' if n > 1 else ''}"
    assert line.startswith(said), (line, said)
    assert (f"; {want.twice:,} samples given twice counted once" in line) == (want.twice > 0), \
        line
    assert _rows(out) == want.rows
    _check_whole(out)
    parts = pa_ds.dataset(str(out / "recordings")).count_rows()
    assert parts == n  # one part a recording: its files' chunks, each once
    _no_staging(out)


def test_exports_into_one_dataset_hold_each_sample_once(files: Files, tmp_path: Path) -> None:
    """Files of the recordings exported over several runs (--force), in an order that has
    each case: a snapshot, then the windows that hold it (its part is replaced); the snapshot
    again (nothing new); a flight recording's snapshot, then the recording (a part kept, the
    rest added); then everything, twice. After each, the dataset holds every sample exported
    so far once, and the export says what it left out."""
    out = tmp_path / "fleet"
    so_far: list[Path] = []
    steps: list[tuple[list[Path], str]] = [
        ([files.window_snapshot], "new"),
        (files.windows, "replaces the snapshot's part"),
        ([files.window_snapshot], "holds it already"),
        ([files.flight_snapshot], "new"),
        ([files.flight], "adds to the snapshot's part"),
        ([files.folder], "replaces"),
        ([files.folder], "replaces every part"),
    ]
    for n, (given, case) in enumerate(steps):
        line = _export(out, given, *(["--force"] if n else []))
        so_far += _psr_files(given)
        want = _expected(so_far)
        assert _rows(out) == want.rows, (n, line)
        if case.startswith("replaces"):
            assert " replaced)" in line, (n, line)
        if case == "replaces the snapshot's part":
            assert line.endswith("; 1 part of it replaced)"), line
        if case == "holds it already":
            n_snap = _info_samples(files.window_snapshot)
            assert line == (f"psrec: wrote {out} (0 samples of 1 recording; {n_snap:,} samples "
                            f"{out} held already left as they were)"), line
        if case == "replaces every part":
            assert pa_ds.dataset(str(out / "recordings")).count_rows() == want.recordings
        _check_whole(out)
    _no_staging(out)


# -- all or nothing -------------------------------------------------------------------------

def _exporter(out: Path, given: list[Path], *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "psrec", "export", "--parquet", "-o",
                             str(out), *extra, *map(str, given)], cwd=str(TARGETS),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def test_a_killed_export_leaves_the_dataset_as_it_was(files: Files, tmp_path: Path) -> None:
    """A dataset of the plain recording; an export adding the folder of them all (--force:
    it replaces that part) is killed (SIGKILL) at instants spread over its run. After each, the
    dataset reads, and is what it was before, or what the export makes whole; the next export
    removes what a killed one left beside it."""
    pristine, out, after = tmp_path / "pristine", tmp_path / "fleet", tmp_path / "after"
    _export(pristine, [files.plain])
    shutil.copytree(pristine, after)
    start = time.monotonic()
    _export(after, [files.folder], "--force")
    took = time.monotonic() - start
    before_state, after_state = _state(pristine), _state(after)
    assert before_state != after_state
    seen = []
    trials = 10
    for i in range(trials):
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(pristine, out)
        proc = _exporter(out, [files.folder], "--force")
        try:
            proc.wait(took * (i + 0.5) / trials)  # the instant it is killed at
        except subprocess.TimeoutExpired:
            proc.kill()
        proc.wait(30)
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # its worker processes, if any are left
        except ProcessLookupError:
            pass
        state = _state(out)
        assert state in (before_state, after_state), (i, state)
        seen.append("before" if state == before_state else "after")
        if duckdb is not None:
            _rows(out)
    assert "before" in seen, seen
    _export(out, [files.folder], "--force")
    assert _state(out) == after_state
    _no_staging(out)


def test_a_staging_killed_before_it_was_locked_is_removed_by_the_next_export(
        files: Files, tmp_path: Path) -> None:
    """An export killed between making its hidden folder and locking it leaves a folder with no
    lock (a window of microseconds, which the kills above seldom hit): the next export removes
    it at once when the process its name gives has ended, and keeps one whose process runs
    (an export at work, an instant before it locks)."""
    out = tmp_path / "fleet"
    _export(out, [files.plain])
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    dead = tmp_path / f".fleet.psrec-{ended.pid}-abcdefgh"
    (dead / "samples").mkdir(parents=True)
    live = tmp_path / f".fleet.psrec-{os.getpid()}-ijklmnop"
    live.mkdir()
    _export(out, [files.folder], "--force")
    assert not dead.exists()
    assert live.exists()
    live.rmdir()
    _no_staging(out)


def test_two_exports_at_once_both_land_or_one_is_refused_in_one_line(
        files: Files, tmp_path: Path) -> None:
    """Into a dataset, two exports at once (the windows; the flight recording and its
    snapshot), while a reader counts its samples without pause: each export lands whole or
    is refused in one line, the reader never fails and finds only whole states. Then two
    exports that each make a new dataset at once: one makes it, the other is refused."""
    out = tmp_path / "fleet"
    _export(out, [files.plain])
    a, b = files.windows, [files.flight, files.flight_snapshot]
    base, rows_a, rows_b = (_expected(x).rows for x in ([files.plain], a, b))
    whole = {base, base + rows_a, base + rows_b, base + rows_a + rows_b}
    counts: list[int] = []
    errors: list[str] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            try:
                counts.extend(_counts(out))  # (each engine at its instant)
            except Exception as exc:  # noqa: BLE001 - what the test looks for
                errors.append(repr(exc))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        procs = [_exporter(out, a, "--force"), _exporter(out, b, "--force")]
        results = [p.communicate(timeout=120) for p in procs]
    finally:
        done.set()
        reader.join()
    landed = 0
    for p, (_, err) in zip(procs, results):
        if p.returncode == 0:
            landed += 1
        else:
            assert err.startswith(f"psrec: error: {out} is being written by another export"), \
                err
            assert len(err.splitlines()) == 2, err
    assert landed >= 1
    assert not errors, errors[:3]
    assert counts and set(counts) <= whole, (set(counts), whole)
    assert _rows(out) in whole and _rows(out) > base
    _check_whole(out)

    new = tmp_path / "new"
    procs = [_exporter(new, a), _exporter(new, b)]
    results = [p.communicate(timeout=120) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 1], results
    refused = next(err for p, (_, err) in zip(procs, results) if p.returncode)
    assert refused.startswith((f"psrec: error: {new} was made by another export",
                               f"psrec: error: {new} exists",
                               f"psrec: error: {new} is being written")), refused
    assert _rows(new) in (rows_a, rows_b)
    _no_staging(new)


# -- errors of the file system --------------------------------------------------------------

def _refused(r: subprocess.CompletedProcess[str], says: str) -> None:
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    assert r.returncode == 1, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("psrec: error: ") and says in lines[0], \
        r.stderr


def _without_dac() -> tuple[str, ...]:
    """What runs psrec where file permissions bind: as root, without the capabilities that
    pass them by."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed: root passes file permissions by")
    return ("setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner", "--")


def test_permission_denied_is_one_line_that_leaves_nothing_behind(files: Files,
                                                                  tmp_path: Path) -> None:
    prefix = _without_dac()
    locked = tmp_path / "locked"
    locked.mkdir()
    dataset = tmp_path / "ds"
    _export(dataset, [files.plain])
    before = _state(dataset)
    os.chmod(locked, 0o555)
    os.chmod(dataset, 0o555)
    try:
        for out, extra, says in ((locked / "fleet", (), f"permission denied in {locked}"),
                                 (dataset, ("--force",), "permission denied")):
            r = subprocess.run([*prefix, sys.executable, "-m", "psrec", "export", "--parquet",
                                "-o", str(out), *extra, str(files.plain_snapshot)],
                               capture_output=True, text=True, timeout=60)
            _refused(r, says)
        assert os.listdir(locked) == []
        assert _state(dataset) == before
        _no_staging(dataset)
    finally:
        os.chmod(locked, 0o755)
        os.chmod(dataset, 0o755)


def test_o_naming_a_link_or_an_empty_folder_writes_there_and_a_file_is_refused(
        files: Files, tmp_path: Path) -> None:
    dangling = tmp_path / "link"
    dangling.symlink_to(tmp_path / "there")
    _export(dangling, [files.plain])
    assert dangling.is_symlink() and (tmp_path / "there" / "recordings").is_dir()
    assert _rows(dangling) == _expected([files.plain]).rows
    nowhere = tmp_path / "nowhere"
    nowhere.symlink_to(tmp_path / "missing" / "deeper")
    r = psrec("export", "--parquet", "-o", str(nowhere), str(files.plain))
    _refused(r, f"cannot write {nowhere}: {tmp_path / 'missing'} is not a folder")
    afile = tmp_path / "afile"
    afile.write_text("x")
    _refused(psrec("export", "--parquet", "-o", str(afile), str(files.plain)),
             f"{afile} is a file: --parquet writes a folder")
    empty = tmp_path / "empty"
    empty.mkdir()
    _export(empty, [files.plain])  # an empty folder is written, as a new one
    assert _rows(empty) == _expected([files.plain]).rows
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("x")
    _refused(psrec("export", "--parquet", "--force", "-o", str(other), str(files.plain)),
             f"{other} exists and is not a psrec dataset")
    assert os.listdir(other) == ["notes.txt"]


MOUNT_SCRIPT = r"""
import json, os, subprocess, sys
mnt, size, ro, out, force, *given = sys.argv[1:]
subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", mnt], check=True)
first = json.loads(os.environ["PSREC_FIRST"])
if first:
    subprocess.run([sys.executable, "-m", "psrec", "export", "--parquet", "-o", out, *first],
                   check=True, capture_output=True)
if ro == "ro":
    subprocess.run(["mount", "-o", "remount,ro", mnt], check=True)
else:  # fill the disk, but for a page
    free = os.statvfs(mnt).f_bavail * os.statvfs(mnt).f_frsize
    with open(os.path.join(mnt, "filler"), "wb") as f:
        f.write(b"x" * max(0, free - 4096))
def state():
    if not os.path.isdir(out):
        return None
    return sorted(os.path.relpath(os.path.join(d, n), out) for d, _, ns in os.walk(out)
                  for n in ns)
before = state()
r = subprocess.run([sys.executable, "-m", "psrec", "export", "--parquet", "-o", out,
                    *(["--force"] if force == "force" else []), *given],
                   capture_output=True, text=True)
print(json.dumps({"rc": r.returncode, "stderr": r.stderr, "before": before,
                  "after": state(), "beside": sorted(os.listdir(mnt))}))
"""


def _in_own_mount(tmp_path: Path, size: str, ro: bool, first: list[Path],
                  given: list[Path]) -> dict[str, object]:
    """An export into a tmpfs of `size` mounted for it alone (a mount namespace of its own,
    gone with it): with `first` exported into it first, then the disk made read-only (ro) or
    filled but for a page."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to mount a file system of its own")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    probe = subprocess.run(["unshare", "-m", "mount", "-t", "tmpfs", "tmpfs", str(mnt)],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount here (a container without CAP_SYS_ADMIN?): {probe.stderr}")
    env = {**os.environ, "PSREC_FIRST": json.dumps([str(p) for p in first])}
    r = subprocess.run(["unshare", "-m", sys.executable, "-c", MOUNT_SCRIPT, str(mnt), size,
                        "ro" if ro else "rw", str(mnt / "fleet"),
                        "force" if first else "new", *map(str, given)],
                       capture_output=True, text=True, timeout=120, env=env, cwd=str(TARGETS))
    assert r.returncode == 0, r.stderr
    return dict(json.loads(r.stdout))


@pytest.mark.parametrize("first", [False, True], ids=["new dataset", "added to"])
def test_a_full_disk_is_one_line_and_the_dataset_stays_as_it_was(files: Files, first: bool,
                                                                  tmp_path: Path) -> None:
    got = _in_own_mount(tmp_path, "4m", False, [files.plain] if first else [], files.windows)
    assert got["rc"] == 1, got
    assert str(got["stderr"]).startswith(f"psrec: error: cannot write {tmp_path}/mnt/fleet: "
                                         "no space left on its disk\n"), got["stderr"]
    assert got["after"] == got["before"], got
    assert got["beside"] == (["filler", "fleet"] if first else ["filler"]), got


def test_a_read_only_disk_is_one_line_and_the_dataset_stays_as_it_was(
        files: Files, tmp_path: Path) -> None:
    got = _in_own_mount(tmp_path, "4m", True, [files.plain], files.windows)
    assert got["rc"] == 1, got
    assert str(got["stderr"]).startswith(f"psrec: error: cannot write {tmp_path}/mnt/fleet: "
                                         "its file system is read-only\n"), got["stderr"]
    assert got["after"] == got["before"] and got["beside"] == ["fleet"], got


def test_a_mount_point_is_refused_in_one_line(files: Files, tmp_path: Path) -> None:
    """A dataset's folder is swapped for its new state: a mount point cannot be."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to mount a file system of its own")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    script = (f"mount -t tmpfs tmpfs {mnt} || exit 99; {sys.executable} -m psrec export "
              f"--parquet -o {mnt} {files.plain}; echo rc=$?; ls -A {mnt}")
    r = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True,
                       timeout=60)
    if r.returncode == 99:
        pytest.skip(f"cannot mount here (a container without CAP_SYS_ADMIN?): {r.stderr}")
    assert r.stdout == "rc=1\n", r.stdout  # and nothing left in it
    _refused(subprocess.CompletedProcess([], 1, "", r.stderr),
             f"cannot write {mnt}: it is a mount point")
