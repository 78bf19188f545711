"""Synthetic recordings made with the native encoder, and the figures measured on them:
the format's own (size per thread-sample, decode speed, writer throughput) and the analyzer's
(report, --collapsed and export --speedscope on 1 and 10 million samples).
Over 400 lines and kept whole: the recordings and the figures measured on them are made
together, so a figure always says which recording it read.
"""

from __future__ import annotations

import os
import random
import socket
import statistics
import time
from dataclasses import dataclass
from typing import Any

from . import _proc
from ._figures import Ctx
from ._proc import BenchTimeout
from ._report import Row, summarize

GIL, ON_CPU = 0x01, 0x02
GENERATOR_VERSION = 2


def _native() -> Any:
    from psrec.format import _format

    return _format


@dataclass
class Program:
    """A made-up program: a pool of functions and frames, and stacks built from them."""

    frames: list[int]
    stacks: list[list[int]]


def _program(enc: Any, rng: random.Random, n_files: int = 40, n_funcs: int = 600,
             n_stacks: int = 4000) -> Program:
    files = [enc.intern_string(f"/srv/app/pkg{i % 7}/module_{i}.py") for i in range(n_files)]
    funcs = []
    for i in range(n_funcs):
        name = enc.intern_string(f"Handler{i % 23}.method_{i}")
        funcs.append(enc.intern_function(files[i % n_files], name, 10 + i))
    frames = [enc.intern_frame(funcs[i % n_funcs], 12 + (i * 7) % 300) for i in range(n_funcs * 3)]
    # Stacks share prefixes the way real ones do: a few roots, a few hundred mid-level paths,
    # many leaves.
    roots = [frames[rng.randrange(50)] for _ in range(5)]
    mids: list[list[int]] = []
    for _ in range(300):
        depth = rng.randint(4, 30)
        mids.append([rng.choice(roots)] + [rng.choice(frames) for _ in range(depth)])
    stacks = []
    for _ in range(n_stacks):
        base = rng.choice(mids)
        stacks.append(base + [rng.choice(frames) for _ in range(rng.randint(0, 4))])
    return Program(frames, stacks)


def _with_native_frames(enc: Any, rng: random.Random, prog: Program) -> Program:
    """The program's stacks as a `record --native` recording has them (spec section 10): the
    thread's native root, an evaluation-loop frame and call machinery under each run of
    Python frames, and native frames (a C extension, libc) at the leaf of most."""
    def binary(path: str, build: str) -> tuple[int, int]:
        return enc.intern_string(path), enc.intern_string(build)

    exe = binary("/usr/bin/python3.11", "5f" * 20)
    libc = binary("/usr/lib/x86_64-linux-gnu/libc.so.6", "a1" * 20)
    ext = binary("/srv/app/_speedups.cpython-311-x86_64-linux-gnu.so", "c3" * 20)

    def frame(where: tuple[int, int], name: str, address: int, kind: int = 1) -> int:
        f = enc.intern_native_function(where[0], enc.intern_string(name), kind, where[1],
                                       address)
        return int(enc.intern_frame(f, rng.randrange(16, 400)))

    root = [frame(libc, "clone3", 0x11f8d0), frame(libc, "start_thread", 0x8f8c0),
            frame(exe, "thread_run", 0x2a1b40)]
    loop = frame(exe, "_PyEval_EvalFrameDefault", 0x16e5a0, kind=2)
    calls = [frame(exe, n, 0x1a0000 + 64 * i) for i, n in enumerate(
        ("_PyFunction_Vectorcall", "PyObject_Vectorcall", "_PyObject_MakeTpCall"))]
    leaves = [[frame(ext, f"speedup_{i}", 0x4000 + 0x100 * i),
               frame(libc, ("memcpy", "__memmove_avx_unaligned_erms", "malloc")[i % 3],
                     0x9a000 + 0x40 * i)] for i in range(40)]
    stacks = []
    for st in prog.stacks:
        out = list(root)
        # A run of Python frames begins every few frames (entered from C).
        for i, f in enumerate(st):
            if i % 5 == 0:
                out += [rng.choice(calls), loop]
            out.append(f)
        if rng.random() < 0.6:
            out += rng.choice(leaves)[: rng.randint(1, 2)]
        stacks.append(out)
    return Program(prog.frames, stacks)


def write_synthetic(path: str, samples: int, *, threads: int = 8, rate_hz: int = 10000,
                    seed: int = 1, native: bool = False, host: str | None = None,
                    pid: int = 4242) -> dict[str, Any]:
    """A recording of `samples` thread-samples: one busy thread whose leaf changes most passes,
    two workers whose stacks change now and then, the others idle (unchanged stacks). With
    native, every stack has native frames interleaved with the Python ones."""
    F = _native()
    from psrec.format import PsrWriter

    rng = random.Random(seed)
    enc = F.Encoder()
    prog = _program(enc, rng)
    if native:
        prog = _with_native_frames(enc, rng, prog)
    interval = 1_000_000 // rate_hz  # 1 µs ticks
    w = PsrWriter(path, metadata={
        "psrec_version": "bench-synthetic", "pid": pid, "command": ["python", "app.py"],
        "python_version": "3.11.7", "hostname": host or socket.gethostname(),
        "interval_ns": interval * 1000, "rate_hz": rate_hz, "synthetic": True,
    }, created_wall_ns=time.time_ns(), created_mono_ns=time.monotonic_ns(), force=True)
    refs = [enc.add_thread(4242, 0x7F0000 + i, 5000 + i,
                           "MainThread" if i == 0 else f"worker-{i}", 0)
            for i in range(threads)]
    ts = 1000
    # Each thread's latest sample: a chunk's first pass has every thread whole (an idle
    # thread's unchanged stack is implied only within a chunk, as the recorder writes it).
    last = [(rng.choice(prog.stacks), GIL | ON_CPU if i < 3 else 0, interval if i < 3 else 0)
            for i in range(threads)]
    passes = samples // threads
    n_st = len(prog.stacks)
    pick = [rng.randrange(n_st) for _ in range(8192)]
    change = [rng.random() for _ in range(8192)]
    jitter = [rng.randint(-3, 3) for _ in range(8192)]
    stacks = prog.stacks
    k = 0
    whole = True
    for p in range(passes):
        if p:
            ts += interval + jitter[p & 8191]
        enc.begin_pass(ts)
        k = (k + 1) & 8191
        c = change[k]
        if c < 0.7:
            last[0] = (stacks[pick[k]], GIL | ON_CPU if c < 0.5 else ON_CPU, interval - 5)
        if c < 0.3:
            last[1] = (stacks[pick[(k + 77) & 8191]], ON_CPU, interval // 2)
        elif c > 0.9:
            last[2] = (stacks[pick[(k + 901) & 8191]], GIL | ON_CPU, interval)
        if whole:
            for ref, (st, status, cpu) in zip(refs, last):
                enc.sample(ref, st, status, cpu)
            whole = False
        else:
            if c < 0.7:
                enc.sample(refs[0], *last[0])
            if c < 0.3:
                enc.sample(refs[1], *last[1])
            elif c > 0.9:
                enc.sample(refs[2], *last[2])
        enc.end_pass()
        if enc.chunk_due(ts):
            w.write_sealed(*enc.seal())
            whole = True
    if not enc.empty():
        w.write_sealed(*enc.seal())
    stats = dict(enc.stats)
    w.close({"samples": stats["samples"], "passes": stats["passes"], "sample_errors": 0})
    return stats


def _cached_synthetic(ctx: Ctx, cache: str, samples: int, native: bool = False,
                      rate_hz: int = 10000) -> str:
    os.makedirs(cache, exist_ok=True)
    kind = "synth-native" if native else "synth"
    rate = "" if rate_hz == 10000 else f"-{rate_hz}hz"
    path = os.path.join(cache, f"{kind}-v{GENERATOR_VERSION}-{samples}{rate}.psr")
    if not os.path.exists(path):
        ctx.log(f"  writing a synthetic recording of {samples:,} "
                f"{'native ' if native else ''}samples: {path}")
        t0 = time.perf_counter()
        tmp = path + ".tmp"
        write_synthetic(tmp, samples, native=native, rate_hz=rate_hz)
        os.replace(tmp, path)
        ctx.log(f"  ({time.perf_counter() - t0:.1f} s)")
    return path


# -- figure 6: analyzer throughput ----------------------------------------------------------


ANALYZER_COMMANDS = (
    ("report", lambda py, f, o: [py, "-m", "psrec", "report", f]),
    ("report --collapsed", lambda py, f, o: [py, "-m", "psrec", "report", f, "--collapsed",
                                             "-o", o]),
    ("export --speedscope", lambda py, f, o: [py, "-m", "psrec", "export", "--speedscope", f,
                                              "-o", o]),
    ("report --html", lambda py, f, o: [py, "-m", "psrec", "report", "--html", f, "-o", o]),
    ("export --pprof", lambda py, f, o: [py, "-m", "psrec", "export", "--pprof", f, "-o", o]),
    ("export --firefox", lambda py, f, o: [py, "-m", "psrec", "export", "--firefox", f,
                                           "-o", o]),
)


def _timed_runs(ctx: Ctx, name: str, make: Any, path: str, n: int,
                reps: int) -> tuple[list[float], list[float]]:
    """Wall times and peak RSS (MiB) of `reps` runs of one analyzer command on a recording."""
    times: list[float] = []
    rss: list[float] = []
    for _ in range(reps):
        out = os.path.join(ctx.workdir, f"analyzer-out-{n}")
        if os.path.exists(out):
            os.remove(out)
        p = _proc.start(make(ctx.tc.python, path, out), f"psrec {name}")
        try:
            ex = p.wait(timeout=300, poll_memory_every=0.02)
        except BenchTimeout as exc:
            ctx.log(f"  {exc}")
            break
        finally:
            if p.exited is None:
                p.kill()
        if ex.returncode != 0:
            ctx.log(f"  psrec {name} on {n:,} samples: exit status {ex.returncode}")
            break
        times.append(ex.wall_s)
        rss.append(p.hwm_kb / 1024)
        if os.path.exists(out):
            os.remove(out)
    return times, rss


def fig_analyzer(ctx: Ctx, cache: str) -> None:
    sizes = (1_000_000,) if ctx.quick else (1_000_000, 10_000_000)
    reps = 1 if ctx.quick else 3
    have = ctx.tc.psrec_analyzer
    avail = {"report": have.get("report"), "report --collapsed": have.get("collapsed"),
             "export --speedscope": have.get("export"), "report --html": have.get("html"),
             "export --pprof": have.get("pprof"), "export --firefox": have.get("firefox")}
    ctx.log(f"[6] analyzer on synthetic recordings of {', '.join(f'{s:,}' for s in sizes)} "
            f"samples ({reps} runs each)")
    raw: dict[str, Any] = {}
    files = {n: _cached_synthetic(ctx, cache, n) for n in sizes}
    for name, make in ANALYZER_COMMANDS:
        if not avail[name]:
            ctx.add(Row("6", f"psrec {name}", "s", "none", {}, "≤ 3 s at 10M", None,
                        note="not available yet"))
            continue
        for n, path in files.items():
            times, rss = _timed_runs(ctx, name, make, path, n, reps)
            raw[f"{name} {n}"] = {"wall_s": times, "maxrss_mib": rss}
            label = f"{n / 1e6:g}M"
            tgt = "≤ 3 s" if n >= 10_000_000 else ""
            ctx.add(Row("6", f"psrec {name}, {label} samples", "s", "none",
                        {"psrec": summarize(times)}, tgt,
                        (lambda p, b: p.median <= 3.0) if tgt else None))
            if n >= 10_000_000 or ctx.quick:
                ctx.add(Row("6", f"psrec {name}, {label} samples: samples per second",
                            "samples/s", "none", {"psrec": summarize([n / t for t in times])},
                            "≥ 5M/s" if n >= 10_000_000 else "",
                            (lambda p, b: p.median >= 5e6) if n >= 10_000_000 else None))
        if len(sizes) > 1 and name == "report --html":
            rss = raw.get(f"{name} {sizes[1]}", {}).get("maxrss_mib") or []
            if rss:
                ctx.add(Row("6", f"psrec {name}: peak RSS at {sizes[1] / 1e6:g}M samples", "MiB",
                            "none", {"psrec": summarize(rss)}, "", None,
                            note="each mode summed by (slice, thread, stack) before merging"))
        if len(sizes) > 1 and name in ("report", "report --collapsed", "export --pprof"):
            r1 = raw.get(f"{name} {sizes[0]}", {}).get("maxrss_mib") or []
            r2 = raw.get(f"{name} {sizes[1]}", {}).get("maxrss_mib") or []
            if r1 and r2:
                ratio = summarize([b / a for a in r1 for b in r2])
                ctx.add(Row("6", f"psrec {name}: peak RSS 10M ÷ 1M samples", "×", "none",
                            {"psrec": ratio}, "grows with stacks, not samples (≤ 1.5×)",
                            lambda p, b: p.median <= 1.5))
    # A `record --native` recording: native frames interleaved with the Python ones, the
    # evaluation loop's and the call machinery's frames left out by the report.
    n = sizes[-1]
    native_file = _cached_synthetic(ctx, cache, n, native=True)
    for name, make in ANALYZER_COMMANDS[:2]:
        times, rss = _timed_runs(ctx, name, make, native_file, n, reps)
        raw[f"{name} native {n}"] = {"wall_s": times, "maxrss_mib": rss}
        tgt = "≤ 3 s" if n >= 10_000_000 else ""
        ctx.add(Row("6", f"psrec {name}, {n / 1e6:g}M native thread-samples (mixed stacks)",
                    "s", "none", {"psrec": summarize(times)}, tgt,
                    (lambda p, b: p.median <= 3.0) if tgt else None,
                    note="stacks of about 50 frames: native root, evaluation loop and call "
                         "machinery under each run of Python frames, C at the leaf"))
    if avail["report --html"]:
        _browser_rows(ctx, files, reps, raw)
    # The same work in-process: native decode plus aggregation, no CLI start-up or output.
    for n, path in files.items():
        rates = []
        for _ in range(reps):
            rates.append(n / _decode_accumulate(path))
        ctx.add(Row("6", f"native decode + aggregation in-process, {n / 1e6:g}M samples",
                    "samples/s", "none", {"psrec": summarize(rates)}, "≥ 5M/s",
                    lambda p, b: p.median >= 5e6))
        raw[f"in-process decode+accumulate {n}"] = rates
    ctx.raw["analyzer"] = raw


def _browser_rows(ctx: Ctx, files: dict[int, str], reps: int, raw: dict[str, Any]) -> None:
    """The HTML page of each recording, drawn by headless Chromium: the page's own drawing
    time (its script reports it) and the whole load (starting Chromium included)."""
    import re
    import shutil
    import subprocess
    import sys
    import tempfile

    browser = shutil.which("chromium") or shutil.which("google-chrome")
    if browser is None:
        ctx.add(Row("6", "HTML page drawn in Chromium", "s", "none", {}, "≤ 3 s at 10M", None,
                    note="no Chromium on this machine"))
        return
    for n, path in files.items():
        page = os.path.join(ctx.workdir, f"page-{n}.html")
        subprocess.run([sys.executable, "-m", "psrec", "report", "--html", path, "-o", page,
                        "--force"], check=True, capture_output=True)
        draws, loads = [], []
        for _ in range(reps):
            with tempfile.TemporaryDirectory(prefix="psrec-bench-chromium-") as profile:
                t0 = time.perf_counter()
                r = subprocess.run(
                    [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update",
                     "--disable-sync", f"--user-data-dir={profile}", "--dump-dom",
                     "file://" + os.path.abspath(page)], capture_output=True, text=True,
                    timeout=300, check=False)
                loads.append(time.perf_counter() - t0)
            m = re.search(r"drawn in (\d+) ms", r.stdout)
            if m:
                draws.append(int(m.group(1)) / 1e3)
        label = f"{n / 1e6:g}M"
        size = os.path.getsize(page) / 1e6
        raw[f"html page {n}"] = {"draw_s": draws, "load_s": loads, "page_mb": size}
        sizes = [raw[f"html page {m}"]["page_mb"] for m in files if f"html page {m}" in raw]
        if len(sizes) == 2:
            ctx.add(Row("6", "HTML page size, 10M ÷ 1M samples", "×", "none",
                        {"psrec": summarize([sizes[1] / sizes[0]])},
                        "grows with stacks and slices, not samples (≤ 2× for 10× samples)",
                        lambda p, b: p.median <= 2.0))
        ctx.add(Row("6", f"HTML page of {label} samples ({size:.1f} MB): drawn by its script",
                    "s", "none", {"psrec": summarize(draws)} if draws else {},
                    "≤ 3 s" if n >= 10_000_000 else "",
                    (lambda p, b: p.median <= 3.0) if n >= 10_000_000 and draws else None))
        ctx.add(Row("6", f"HTML page of {label} samples: Chromium start, load and draw", "s",
                    "none", {"psrec": summarize(loads)}, "≤ 3 s" if n >= 10_000_000 else "",
                    (lambda p, b: p.median <= 3.0) if n >= 10_000_000 else None))


def _payloads(path: str) -> tuple[list[bytes], int, int]:
    from psrec.format import constants as C
    from psrec.format import open_recording

    with open_recording(path) as rec:
        payloads = [p for _, p in rec.payloads(C.CHUNK_DATA)]
        cap = rec.interval_ticks * C.WEIGHT_CAP_INTERVALS
        return payloads, cap, rec.interval_ticks


def _decode_accumulate(path: str) -> float:
    from psrec.analyzer.engine import engine_for
    from psrec.analyzer.model import Selection
    from psrec.format import open_recording

    engine = engine_for(None)
    with open_recording(path) as rec:
        t0 = time.perf_counter()
        stream = engine.stream(rec)
        acc = engine.accumulator(Selection())
        for batch in stream:
            acc.add(batch)
        return time.perf_counter() - t0


# -- the format's figures ---------------------------------------------------------------------


def _size_case(path: str, kind: str, passes: int, threads: int, jitter: int,
               keep: bool = False) -> float:
    """Bytes per thread-sample (DATA and DEFS chunks, compressed, as `psrec info` counts them)
    of a recording at 1 kHz with 1 µs ticks: every thread's 20-frame stack unchanged, or its
    leaf changed every sample among 64 functions. jitter: the sampler's wake-up error, ± µs."""
    F = _native()
    from psrec.format import PsrWriter, open_recording
    from psrec.format.describe import info

    rng = random.Random(7)
    enc = F.Encoder()
    fname = enc.intern_string("/srv/app/module.py")
    frames = [enc.intern_frame(enc.intern_function(fname, enc.intern_string(f"f{i}"), 10 * i),
                               10 * i + 3) for i in range(20 + 64)]
    base, leaves = frames[:20], frames[20:]
    w = PsrWriter(path, metadata={"interval_ns": 1_000_000, "rate_hz": 1000},
                  created_wall_ns=time.time_ns(), created_mono_ns=time.monotonic_ns(),
                  force=True)
    refs = [enc.add_thread(1, 0x1000 + i, 100 + i, f"t{i}", 0) for i in range(threads)]
    ts = 0
    leaf = 0
    for _ in range(passes):
        ts += 1000 + (rng.randint(-jitter, jitter) if jitter else 0)
        enc.begin_pass(ts)
        for ref in refs:
            if kind == "unchanged":
                enc.sample(ref, base, 0, None)
            else:
                leaf = (leaf + rng.randrange(1, 64)) % 64
                enc.sample(ref, base + [leaves[leaf]], GIL | ON_CPU, 950 + rng.randint(0, 50))
        enc.end_pass()
        if enc.chunk_due(ts):
            w.write_sealed(*enc.seal())
    w.write_sealed(*enc.seal())
    w.close({"samples": enc.stats["samples"]})
    with open_recording(path) as rec:
        bps = info(rec)["bytes_per_sample"]
    if not keep:
        os.remove(path)
    return float(bps)


def _decode_speeds(path: str, runs: int) -> list[float]:
    """Samples per second of Decoder.decode_data over a recording's payloads already in
    memory, each run with a new decoder (its stack trie built from nothing)."""
    payloads, cap, first = _payloads(path)
    F = _native()
    speeds = []
    for _ in range(runs):
        dec = F.Decoder(cap, first)
        batch = F.SampleBatch()
        n = 0
        t0 = time.perf_counter()
        for p in payloads:
            batch.clear()
            dec.decode_data(p, batch)
            n += len(batch)
        speeds.append(n / (time.perf_counter() - t0))
    return speeds


def fig_format(ctx: Ctx, cache: str) -> None:
    reps = 1 if ctx.quick else 3
    passes = 20_000 if ctx.quick else 100_000
    ctx.log("[F] format: bytes per thread-sample, decode speed, writer throughput")
    raw: dict[str, Any] = {}
    cases = (("unchanged stack, 1 thread, exact period", "unchanged", 1, 0, 0.5),
             ("unchanged stack, 1 thread, ±20 µs jitter", "unchanged", 1, 20, 0.5),
             ("unchanged stacks, 10 threads, ±20 µs jitter", "unchanged", 10, 20, 0.5),
             ("leaf changes every sample, 1 thread, exact period", "leaf", 1, 0, 4.0),
             ("leaf changes every sample, 1 thread, ±20 µs jitter", "leaf", 1, 20, 4.0))
    for label, kind, threads, jitter, limit in cases:
        vals = [_size_case(os.path.join(ctx.workdir, "size-case.psr"), kind,
                           passes // threads, threads, jitter) for _ in range(reps)]
        raw[label] = vals
        ctx.add(Row("F", f"bytes per thread-sample, {label} (1 µs ticks, 1 kHz)", "B", "none",
                    {"psrec": summarize(vals)}, f"≤ {limit:g} B",
                    lambda p, b, lim=limit: p.median <= lim))
    # Decode speed into the in-memory columns, over payloads already in memory: a stream whose
    # leaf changes every sample (4 threads), and the analyzer benchmark's harsh synthetic stream,
    # where about 20 frames change per sample.
    leaf_path = os.path.join(ctx.workdir, "decode-leaf.psr")
    _size_case(leaf_path, "leaf", passes * 5 // 4, 4, 20, keep=True)
    speeds = _decode_speeds(leaf_path, max(3, reps * 2))
    os.remove(leaf_path)
    raw["decode_leaf_samples_per_s"] = speeds
    ctx.add(Row("F", "native decode into sample columns, leaf changes every sample (4 threads)",
                "samples/s", "none", {"psrec": summarize(speeds)}, "≥ 20M/s",
                lambda p, b: p.median >= 20e6))
    speeds = _decode_speeds(_cached_synthetic(ctx, cache, 1_000_000), max(3, reps * 2))
    raw["decode_samples_per_s"] = speeds
    ctx.add(Row("F", "native decode into sample columns, ~20 frames change per sample "
                "(harsh synthetic)", "samples/s", "none", {"psrec": summarize(speeds)},
                "≥ 20M/s", lambda p, b: p.median >= 20e6))
    _writer_figure(ctx, raw, reps)
    ctx.raw["format"] = raw


def _writer_figure(ctx: Ctx, raw: dict[str, Any], reps: int) -> None:
    """Encoder cost per sample and the writer's compress+write time per chunk at 100k
    thread-samples/s (10 threads at 10 kHz). Sealing a chunk only hands buffers over; the
    compression and the write are the writer's (another thread in the recorder)."""
    F = _native()
    from psrec.format import PsrWriter

    total = 300_000 if ctx.quick else 1_000_000
    threads, interval = 10, 100  # ticks of 1 µs: 10 kHz passes, 100k thread-samples/s
    enc_us, seal_ms, seal_max_ms, write_ms, capacity, busy = [], [], [], [], [], []
    for rep in range(reps):
        rng = random.Random(rep)
        enc = F.Encoder()
        prog = _program(enc, rng)
        path = os.path.join(ctx.workdir, "writer-case.psr")
        w = PsrWriter(path, metadata={"interval_ns": interval * 1000, "rate_hz": 10000},
                      created_wall_ns=time.time_ns(), created_mono_ns=time.monotonic_ns(),
                      force=True)
        refs = [enc.add_thread(1, 0x1000 + i, 100 + i, f"t{i}", 0) for i in range(threads)]
        pick = [rng.randrange(len(prog.stacks)) for _ in range(4096)]
        stacks = prog.stacks
        ts = 0
        t_enc = 0.0
        seals: list[float] = []
        writes: list[tuple[float, int, int]] = []
        t_start = time.perf_counter()
        for p in range(total // threads):
            ts += interval
            enc.begin_pass(ts)
            k = p & 4095
            enc.sample(refs[0], stacks[pick[k]], GIL | ON_CPU, interval)
            enc.sample(refs[1], stacks[pick[(k * 3) & 4095]], ON_CPU, interval // 2)
            if p % 10 == 0:
                enc.sample(refs[2], stacks[pick[(k * 5) & 4095]], ON_CPU, interval)
            enc.end_pass()
            if enc.chunk_due(ts):
                t0 = time.perf_counter()
                sealed = enc.seal()
                t1 = time.perf_counter()
                w.write_sealed(*sealed)
                t2 = time.perf_counter()
                seals.append(t1 - t0)
                writes.append((t2 - t1, sealed[5], sealed[3] - sealed[2]))
                t_enc -= t2 - t0
        t_enc += time.perf_counter() - t_start
        w.close()
        os.remove(path)
        samples = total
        enc_us.append(1e6 * t_enc / samples)
        seal_ms.append(1e3 * statistics.median(seals) if seals else 0.0)
        seal_max_ms.append(1e3 * max(seals) if seals else 0.0)
        wt = sum(x[0] for x in writes)
        ws = sum(x[1] for x in writes)
        span = sum(x[2] for x in writes) / 1e6
        write_ms.append(1e3 * wt / max(1, len(writes)))
        capacity.append(ws / wt if wt else 0.0)
        busy.append(100.0 * wt / span if span else 0.0)
        raw.setdefault("writer_runs", []).append(
            {"chunks": len(writes), "seal_s": seals, "write_s_samples_span_ticks": writes,
             "encode_s": t_enc, "samples": samples})
    ctx.add(Row("F", "encoder per thread-sample, driven from Python (an upper bound)", "µs",
                "none", {"psrec": summarize(enc_us)}))
    ctx.add(Row("F", "sampler side: seal() hand-over per chunk (incl. the copy into Python "
                "bytes)", "ms", "none", {"psrec": summarize(seal_ms)}))
    ctx.add(Row("F", "sampler side: slowest seal() of a run", "ms", "none",
                {"psrec": summarize(seal_max_ms)}))
    ctx.add(Row("F", "writer side: compress + write per chunk", "ms", "none",
                {"psrec": summarize(write_ms)}))
    ctx.add(Row("F", "writer capacity (thread-samples per second of writer time)", "samples/s",
                "none", {"psrec": summarize(capacity)}, "≥ 100k/s",
                lambda p, b: p.median >= 1e5))
    ctx.add(Row("F", "writer busy share at 100k thread-samples/s", "%", "none",
                {"psrec": summarize(busy)}, "< 100 % (keeps up)", lambda p, b: p.median < 100))
