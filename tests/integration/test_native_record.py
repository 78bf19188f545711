"""`psrec record --native` on live targets, for every interpreter found: native frames
interleaved with Python frames in every sample, read without stopping the target, checked
against what the target does (tests/targets/rec_native.py and its C extension), and read back
with the target's binaries gone."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema
import native_ext
import psrec
import pytest
from native_ext import CALLBACK, CHAIN, WAITS, waits_for_the_gil
from rec_live import TARGETS, is_free_threaded, one_python, python_params, record, target
from rec_live import psrec as run_psrec

pytestmark = [pytest.mark.live, pytest.mark.timeout(300)]
PYTHONS = python_params()


def stacks(path: Path, thread: str, **view: Any) -> list[list[tuple[str, bool]]]:
    """Each sample's stack of the thread, innermost first, as (function, native) pairs."""
    run = psrec.load(str(path), threads=thread, **view)
    s = run.samples
    cache: dict[int, list[tuple[str, bool]]] = {}
    out = []
    for sid in s.stack:
        if sid not in cache:
            cache[sid] = [(f.function.name, f.function.kind != 0)
                          for f in reversed(run.stack(sid))]
        out.append(cache[sid])
    assert out, f"no samples of {thread}"
    return out


def stats(path: Path) -> dict[str, Any]:
    r = run_psrec("info", "--json", str(path))
    assert r.returncode == 0, r.stderr
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc["stats"]


def waits_shown(path: Path) -> None:
    """Each blocked thread of rec_native.py shows the native frame it waits in, under its
    Python caller, in at least 95 % of its samples."""
    for thread, (caller, wait) in WAITS.items():
        samples = stacks(path, thread)
        ok = 0
        for s in samples:
            py = next((i for i, (_, nat) in enumerate(s) if not nat), None)
            if py is not None and s[py][0] == caller and any(
                    wait.search(n) for n, nat in s[:py] if nat):
                ok += 1
        assert ok >= 0.95 * len(samples), (thread, Counter(tuple(s) for s in samples[:3]))


def record_native(python: str, tmp_path: Path, *args: str) -> tuple[Path, Path]:
    """A 2-second native recording of rec_native.py; the recording and the folder of the
    extension it loaded."""
    ext = native_ext.build(python)
    path = tmp_path / "native.psr"
    with target(python, "rec_native.py", str(ext), *args) as t:
        record(path, t.pid, "--native", duration=2.0)
    return path, ext


@pytest.mark.timing
@pytest.mark.parametrize("python", PYTHONS)
def test_native_frames_interleave_in_every_sample(python: str, tmp_path: Path) -> None:
    path, ext = record_native(python, tmp_path)
    st = stats(path)
    # Read without stopping, and nearly every thread-sample with its native frames.
    assert st["native_mixed"] >= 0.99 * st["samples"], st

    spinner = stacks(path, "c-spinner")
    chain = sum(1 for s in spinner if [n for n, _ in s[:5]] == CHAIN)
    assert chain >= 0.95 * len(spinner), Counter(tuple(n for n, _ in s[:6]) for s in spinner)

    # Python -> C -> Python: in every sample taken in the callback, the callback's frame
    # under the C frames under the Python caller, no other Python frame between them. The
    # thread crosses between Python and C every few microseconds: the kernel copies its
    # Python frames with its native ones, or psrec stops it to read both; a sample left
    # without either carries the marker where its native frames belong (spec 10, rule 7).
    called = [s for s in stacks(path, "c-callback") if ("py_callback", False) in s]
    exact = sum(1 for s in called
                if [n for n, nat in s if not nat or n in CALLBACK][:5] == CALLBACK)
    marked = sum(1 for s in called if ("[native frames not captured]", True) in s)
    assert called and exact + marked == len(called), Counter(tuple(n for n, _ in s)
                                                             for s in called)
    assert exact >= 0.97 * len(called), Counter(tuple(n for n, _ in s) for s in called)

    waits_shown(path)

    # --native-frames python: the recording as a Python-only one reads; all: the evaluation
    # loop's frames are there too.
    assert all(not nat for s in stacks(path, "c-spinner", native_frames="python") for _, nat in s)
    every = stacks(path, "c-spinner", native_frames="all")
    assert sum(len(s) for s in every) > sum(len(s) for s in spinner)

    # Read where the target's binaries are not: the names are in the recording.
    shutil.rmtree(ext)
    try:
        again = stacks(path, "c-spinner")
        assert again == spinner
        r = run_psrec("report", "--collapsed", "-o", "-", str(path))
        assert r.returncode == 0 and re.search(r"c_middle \([^)]*\);c_inner \(", r.stdout), r.stderr
    finally:
        native_ext.forget(python)


@pytest.mark.parametrize("python", PYTHONS)
def test_a_thread_waiting_for_the_gil_shows_it(python: str, tmp_path: Path) -> None:
    if is_free_threaded(python):
        pytest.skip("a free-threaded build has no GIL to wait for")
    path, _ = record_native(python, tmp_path, "gil")
    waiting = 0
    samples = stacks(path, "gil-waiter")
    for s in samples:
        if waits_for_the_gil([n for n, _ in s[:next(i for i, (_, nat) in enumerate(s)
                                                     if not nat)]]):
            waiting += 1
    # The hog holds the GIL 5 ms at a time; the waiter's sleeps are 0.1 ms.
    assert waiting >= 0.5 * len(samples), Counter(tuple(n for n, _ in s[:6]) for s in samples)


# Where the kernel allows psrec less, as in many containers.
LIMITS = {
    # No CAP_PERFMON nor CAP_SYS_ADMIN: with kernel.perf_event_paranoid 2, events of the
    # threads' user time only, none when a thread leaves its CPU; above 2, no perf events.
    "no-perfmon": lambda: ["setpriv", "--bounding-set", "-perfmon,-sys_admin"],
    # perf_event_open refused by a seccomp profile, as container runtimes' defaults do.
    "seccomp": lambda: [str(native_ext.deny_perf())],
}


@pytest.mark.parametrize("python", one_python())
@pytest.mark.parametrize("limit", sorted(LIMITS))
def test_native_frames_where_the_kernel_allows_less(limit: str, python: str,
                                                    tmp_path: Path) -> None:
    """Without perf events psrec says why and what to do, and still records every thread's
    Python frames and, read from /proc, the native frames each blocked thread waits in; with
    events of user time only, the running threads' native frames too."""
    ext = native_ext.build(python)
    path = tmp_path / "limited.psr"
    with target(python, "rec_native.py", str(ext)) as t:
        r = subprocess.run([*LIMITS[limit](), sys.executable, "-m", "psrec", "record",
                            "--native", "-o", str(path), "-d", "2", str(t.pid)],
                           capture_output=True, text=True, timeout=120, cwd=str(TARGETS))
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    capture = [line for line in lines if "cannot copy the Python frames" in line]
    said = [line for line in lines if "--native" in line and "not captured" not in line
            and line not in capture]
    marked = [line for line in lines if "--native" in line and "not captured" in line]
    paranoid = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    if limit == "seccomp":
        assert len(said) == 1 and "perf_event_open is refused by a seccomp profile" in said[0] \
            and "CAP_PERFMON" in said[0], r.stderr
        # The running threads' native frames come only from stops, within their budget: the
        # rest are marked, and the summary says how many.
        assert len(marked) == 1 and "-r 100" in marked[0], r.stderr
    elif paranoid > 2:
        assert len(said) == 1 and f"perf_event_paranoid is {paranoid}" in said[0], r.stderr
    else:
        assert not said, r.stderr
        # Without CAP_BPF the kernel copies no Python frames: psrec says so once.
        assert limit != "no-perfmon" or (len(capture) == 1 and "CAP_BPF" in capture[0]), \
            r.stderr
        spinner = stacks(path, "c-spinner")
        chain = sum(1 for s in spinner if [n for n, _ in s[:5]] == CHAIN)
        assert chain >= 0.95 * len(spinner), Counter(tuple(n for n, _ in s[:6])
                                                     for s in spinner)
    assert stats(path)["native_from_proc"] > 0
    waits_shown(path)
    # No thread's samples lost: each has its Python frames.
    assert all(any(not nat for _, nat in s) for s in stacks(path, "c-spinner"))


SPEEDSCOPE_SCHEMAS = [
    Path(__file__).resolve().parents[3] / "shared" / "speedscope" / "file-format-schema.json",
    Path(os.environ.get("PSREC_E2E_CACHE", "/tmp/psrec-e2e-cache"))
    / "node_modules/speedscope/dist/release/file-format-schema.json",
]


@pytest.mark.parametrize("python", one_python())
def test_every_output_shows_native_frames(python: str, tmp_path: Path) -> None:
    """The outputs of one native recording: each has the C chain, as its format says a
    native frame (speedscope's file is the binary; Firefox's category is Native; the page
    marks the key native; pprof has a mapping per binary with its build id)."""
    path, _ = record_native(python, tmp_path)

    out = tmp_path / "s.json"
    r = run_psrec("export", "--speedscope", str(path), "-o", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    frames = {f["name"]: f for f in doc["shared"]["frames"]}
    assert "c_inner" in frames and frames["c_inner"]["file"].endswith(".so")
    schema = next((p for p in SPEEDSCOPE_SCHEMAS if p.is_file()), None)
    if schema is not None:
        jsonschema.validate(doc, json.loads(schema.read_text()))

    out = tmp_path / "f.json"
    r = run_psrec("export", "--firefox", str(path), "-o", str(out))
    assert r.returncode == 0, r.stderr
    ff = json.loads(out.read_text())
    cats = [c["name"] for c in ff["meta"]["categories"]]
    shared = ff["shared"]
    names, funcs, ft = shared["stringArray"], shared["funcTable"], shared["frameTable"]
    inner = next(i for i, n in enumerate(funcs["name"]) if names[n] == "c_inner")
    cat = {ft["category"][i] for i, fn in enumerate(ft["func"]) if fn == inner}
    # (its copy for samples off a CPU is in the Idle category, as every innermost frame's is)
    assert "Native" in {cats[c] for c in cat} <= {"Native", "Idle"}, cat

    out = tmp_path / "p.html"
    r = run_psrec("report", "--html", str(path), "-o", str(out))
    assert r.returncode == 0, r.stderr
    page = json.loads(re.search(r'<script id="psrec-data" type="application/json">(.*?)</script>',
                                out.read_text(), re.S).group(1))  # type: ignore[union-attr]
    keys = {k[0]: k for k in page["keys"]}
    assert keys["c_inner"][3] == 1 and keys["c_caller"][3] == 0

    out = tmp_path / "p.pb.gz"
    r = run_psrec("export", "--pprof", str(path), "-o", str(out))
    assert r.returncode == 0, r.stderr
    go = shutil.which("go")
    if go is not None:
        raw = subprocess.run([go, "tool", "pprof", "-raw", str(out)], capture_output=True,
                             text=True, timeout=120)
        assert raw.returncode == 0, raw.stderr
        mappings = raw.stdout.split("Mappings", 1)[1]
        ext = next(line for line in mappings.splitlines() if "psrec_native_ext" in line)
        assert re.search(r"\b[0-9a-f]{40}\b", ext), ext  # its GNU build id

    r = run_psrec("diff", str(path), str(path))
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("python", PYTHONS)
def test_numpy_shows_its_blas_kernels_under_the_python_line(python: str,
                                                             tmp_path: Path) -> None:
    """numpy's wheel from PyPI (its own OpenBLAS) for the target's version and ABI: the time
    of `a @ b` is in the BLAS kernels, under the Python function that multiplies."""
    site = native_ext.wheel_for(python, "numpy")
    if isinstance(site, str):
        pytest.skip(site)
    path = tmp_path / "numpy.psr"
    with target(python, "rec_numpy.py", str(site), timeout=60) as t:
        record(path, t.pid, "--native", duration=2.0)
    samples = stacks(path, "MainThread")
    blas = 0
    for s in samples:
        py = next((i for i, (_, nat) in enumerate(s) if not nat), None)
        if py is not None and s[py][0] == "multiply" and any(
                re.search(r"gemm|kernel", n, re.I) for n, nat in s[:py] if nat):
            blas += 1
    assert blas >= 0.8 * len(samples), Counter(tuple(n for n, _ in s[:5]) for s in samples)


@pytest.mark.parametrize("python", one_python())
def test_a_binary_replaced_on_disk_is_named_from_the_file_mapped(python: str,
                                                                  tmp_path: Path) -> None:
    """A library upgraded (replaced on disk) while the target has the old one loaded: its
    frames are named from the mapped file, by build id, and psrec says it was replaced."""
    ext = tmp_path / "ext"
    shutil.copytree(native_ext.build(python), ext)
    newer = native_ext.build(python, "PSREC_SHIFT")
    (so,) = ext.glob("psrec_native_ext*.so")
    path = tmp_path / "replaced.psr"
    with target(python, "rec_native.py", str(ext)) as t:
        # as a package manager installs a new version: a new file renamed over the old
        staged = ext / (so.name + ".new")
        shutil.copy(next(newer.glob("psrec_native_ext*.so")), staged)
        os.replace(staged, so)
        r = run_psrec("record", "--native", "-o", str(path), "-d", "1.5", str(t.pid))
    shutil.rmtree(newer)
    assert r.returncode == 0, r.stderr
    said = re.search(r"psrec: --native: \S*/psrec_native_ext\S* was replaced on disk while the "
                     r"target had it mapped \(an upgrade\?\): its frames are named from the "
                     r"mapped file, build id [0-9a-f]{40}", r.stderr)
    assert said, r.stderr
    spinner = stacks(path, "c-spinner")
    chain = sum(1 for s in spinner if [n for n, _ in s[:5]] == CHAIN)
    assert chain >= 0.95 * len(spinner), Counter(tuple(n for n, _ in s[:6]) for s in spinner)
