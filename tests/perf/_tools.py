"""The three profilers under test: how to install, run and read each one. Over 400 lines and
kept whole: each tool's install, command line and reading of its output sit side by side, so
that they are counted the same way.

Sample counting, per each tool's own definition:
- psrec: a *pass* visits every thread once; each thread visited is a *thread-sample*
  (`psrec info`'s "samples"). Errors are the sample errors recorded in the file.
- py-spy: "Samples: N" on its stderr counts thread-samples (one per thread per pass, with
  --idle); its speedscope output has one profile per thread, so the main thread's sample count
  is its number of passes. "Errors: M" counts passes that failed.
- Austin: one output line (text) or stack event (MOJO) per thread per pass; "Error rate: x/N"
  on its stderr counts invalid thread-samples x out of N thread-samples. The main thread's line
  count is its number of passes.
- Tachyon (CPython 3.15's `python -m profiling.sampling`, on 3.15 targets only): its collapsed
  output counts thread-samples (one per thread per pass, `-a`); "Captured N samples" on its
  standard output counts passes, and "Error rate: x" the share of them (in %) that failed. It
  runs in the target's own root (`nsenter -t PID -m -r` when attaching), as it must read the
  target's files.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import venv
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TOOLS", "ToolResult", "Toolchain", "ensure_tools", "read_output", "record_argv"]

TOOLS = ("psrec", "py-spy", "austin", "tachyon")
AUSTIN_CANDIDATES = (None, "3.7.0")  # None: the newest on PyPI; then the newest known to run
_ANSI = re.compile(rb"\x1b\[[0-9;]*m")


@dataclass
class Toolchain:
    python: str  # the interpreter that runs psrec itself (this one)
    target_python: str  # CPython 3.11 that runs the workloads
    target_version: str
    py_spy: str | None
    py_spy_version: str | None
    austin: str | None
    austin_version: str | None
    psrec_version: str | None
    psrec_record: bool  # whether `psrec record` exists yet
    psrec_max_rate: str  # "max" where `psrec record -r max` exists, else its highest rate
    psrec_analyzer: dict[str, bool]
    notes: list[str] = field(default_factory=list)
    # The target's version where it has its own sampler (3.15 and later), else None.
    tachyon_version: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _run(argv: list[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, check=False, capture_output=True, text=True, timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def _version(argv: list[str]) -> str | None:
    try:
        r = _run(argv, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    m = re.search(r"(\d+\.\d+(\.\d+)?)", r.stdout + r.stderr)
    return m.group(1) if m else None


def target_pythons(ids: list[str]) -> dict[str, str]:
    """The interpreters the workloads run on, by id: "3.11" is pyenv's 3.11.7 (or
    PSREC_BENCH_PYTHON); "3.14", "3.15" and "3.14t" are those tests/interpreters/provision made
    (sid's, run inside a sid root, and the free-threaded build)."""
    out: dict[str, str] = {}
    listing = os.path.join(os.environ.get("PSREC_INTERPRETERS", "/var/cache/psrec-interpreters"),
                           "interpreters.tsv")
    provisioned: dict[str, str] = {}
    if os.path.exists(listing):
        with open(listing) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 3:
                    provisioned[parts[0]] = parts[1]
    for ident in ids:
        if ident == "3.11":
            out[ident] = _target_python()
        elif ident in provisioned:
            out[ident] = provisioned[ident]
        elif _pyenv_python(ident):
            out[ident] = _pyenv_python(ident) or ""
        else:
            raise SystemExit(f"bench: no CPython {ident} (run tests/interpreters/provision; "
                             f"found {', '.join(['3.11', *provisioned]) or 'none'})")
    return out


def _pyenv_python(minor: str) -> str | None:
    """pyenv's newest CPython of a minor version ("3.9"), if it has one."""
    try:
        r = _run(["pyenv", "versions", "--bare"], timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = [v for v in r.stdout.split() if v.startswith(minor + ".") and
             v[len(minor) + 1:].isdigit()]
    if r.returncode != 0 or not found:
        return None
    newest = max(found, key=lambda v: int(v.rsplit(".", 1)[1]))
    p = _run(["pyenv", "prefix", newest], timeout=30)
    cand = os.path.join(p.stdout.strip(), "bin", f"python{minor}")
    return cand if p.returncode == 0 and os.path.exists(cand) else None


def _target_python() -> str:
    env = os.environ.get("PSREC_BENCH_PYTHON")
    if env:
        return env
    try:
        r = _run(["pyenv", "prefix", "3.11.7"], timeout=30)
        if r.returncode == 0 and r.stdout.strip():
            cand = os.path.join(r.stdout.strip(), "bin", "python3.11")
            if os.path.exists(cand):
                return cand
    except (OSError, subprocess.TimeoutExpired):
        pass
    for cand in ("python3.11",):
        path = _which(cand)
        if path:
            return path
    raise SystemExit(
        "bench: CPython 3.11 not found (pyenv prefix 3.11.7, python3.11 on PATH, or set "
        "PSREC_BENCH_PYTHON)"
    )


def _which(name: str) -> str | None:
    for d in os.environ.get("PATH", "").split(os.pathsep):
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def _pip(venv_dir: str, *args: str) -> subprocess.CompletedProcess[str]:
    return _run([os.path.join(venv_dir, "bin", "python"), "-m", "pip", "install", "-q", *args])


def ensure_tools(venv_dir: str, log: Any) -> Toolchain:
    """Creates venv_dir with py-spy and austin-dist when they are missing there.

    austin-dist: the newest release is tried first; if its binary does not run here (4.0's
    needs glibc 2.38), the newest release known to run (3.7.0) is installed instead. The outcome
    is kept in the venv so that later runs do not download again.
    """
    notes: list[str] = []
    bindir = os.path.join(venv_dir, "bin")
    state_path = os.path.join(venv_dir, "psrec-bench-tools.json")
    state: dict[str, Any] = {}
    if os.path.exists(state_path):
        with open(state_path) as f:
            state = json.load(f)
    if not os.path.exists(os.path.join(bindir, "python")):
        log(f"creating {venv_dir}")
        venv.EnvBuilder(with_pip=True, clear=False).create(venv_dir)
        state = {}
    py_spy = os.path.join(bindir, "py-spy")
    if _version([py_spy, "--version"]) is None:
        log("installing py-spy from PyPI")
        r = _pip(venv_dir, "py-spy")
        if r.returncode != 0:
            notes.append(f"py-spy could not be installed: {r.stderr.strip()[-300:]}")
    austin = os.path.join(bindir, "austin")
    if _version([austin, "--version"]) is None:
        tried: list[str] = []
        for cand in AUSTIN_CANDIDATES:
            spec = "austin-dist" if cand is None else f"austin-dist=={cand}"
            log(f"installing {spec} from PyPI")
            r = _pip(venv_dir, "--force-reinstall", spec)
            v = _version([austin, "--version"])
            if r.returncode == 0 and v is not None:
                state["austin_tried"] = tried
                break
            why = (r.stderr.strip() or "binary does not run on this machine")[-200:]
            if r.returncode == 0:
                try:
                    rr = _run([austin, "--version"], timeout=30)
                    why = (rr.stderr.strip() or rr.stdout.strip() or why)[-200:]
                except OSError as exc:
                    why = str(exc)
            tried.append(f"{spec}: {why}")
        with open(state_path, "w") as f:
            json.dump(state, f)
    for t in state.get("austin_tried", []):
        notes.append(f"austin: tried and skipped: {t}")

    py_spy_v = _version([py_spy, "--version"])
    austin_v = _version([austin, "--version"])
    target = _target_python()
    target_v = _version([target, "--version"]) or "?"
    psrec_v = _version([sys.executable, "-m", "psrec", "--version"])
    help_text = ""
    try:
        help_text = _run([sys.executable, "-m", "psrec", "--help"], timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        pass
    commands = set(re.findall(r"^\s{2}(\w[\w-]*)\s", help_text.split("Commands:")[-1],
                              re.MULTILINE))
    analyzer = {"report": "report" in commands, "export": "export" in commands}
    max_rate = "100000"
    if "record" in commands:
        rec_help = _run([sys.executable, "-m", "psrec", "record", "--help"], timeout=60).stdout
        if re.search(r"\bmax\b", rec_help):
            max_rate = "max"
    if "report" in commands:
        rh = _run([sys.executable, "-m", "psrec", "report", "--help"], timeout=60).stdout
        analyzer["collapsed"] = "--collapsed" in rh
        analyzer["html"] = "--html" in rh
    else:
        analyzer["collapsed"] = analyzer["html"] = False
    if "export" in commands:
        eh = _run([sys.executable, "-m", "psrec", "export", "--help"], timeout=60).stdout
        analyzer["export"] = "--speedscope" in eh
        analyzer["pprof"] = "--pprof" in eh
        analyzer["firefox"] = "--firefox" in eh
    return Toolchain(
        python=sys.executable,
        target_python=target,
        target_version=target_v,
        py_spy=py_spy if py_spy_v else None,
        py_spy_version=py_spy_v,
        austin=austin if austin_v else None,
        austin_version=austin_v,
        psrec_version=psrec_v,
        psrec_record="record" in commands,
        psrec_max_rate=max_rate,
        psrec_analyzer=analyzer,
        notes=notes,
    )


# -- command lines -------------------------------------------------------------------------

# "As fast as it can": psrec -r max (passes back to back; where it lacks that, its ceiling,
# 100 kHz), py-spy --rate 1 MHz (it sleeps only when ahead of its schedule), Austin -i 1 µs,
# Tachyon -r 1000000 (as py-spy: it sleeps only when ahead).
# 0 stands for psrec's own "max".
MAX_RATE_HZ = {"psrec": 0, "py-spy": 1_000_000, "austin": 1_000_000, "tachyon": 1_000_000}


def record_argv(
    tc: Toolchain,
    tool: str,
    *,
    out: str,
    fmt: str,
    rate_hz: int,
    pid: int | None = None,
    command: list[str] | None = None,
    blocking: bool = False,
    native: bool = False,
    extra: tuple[str, ...] = (),
) -> list[str]:
    """The command that records pid (attach) or runs command (launch) until stopped/exited.
    extra: more of the tool's own options (psrec --no-tasks, Tachyon --async-aware).

    No tool is given a duration: py-spy's --duration counts samples (rate x seconds), not time,
    so every recording is ended by the benchmark with SIGINT at the end of its window.

    native: native frames too (psrec --native; py-spy --native, which stops the target for
    each sample whatever blocking says: it refuses --nonblocking with --native). Austin's
    native mode (austinp) is not run.
    """
    assert (pid is None) != (command is None)
    if tool == "psrec":
        rate = tc.psrec_max_rate if rate_hz == 0 else str(rate_hz)
        argv = [tc.python, "-m", "psrec", "record", "-q", "-o", out, "-r", rate]
        if blocking:
            argv.append("--blocking")
        if native:
            argv.append("--native")
        argv += extra
        return argv + ([str(pid)] if pid is not None else ["--", *command])  # type: ignore[misc]
    if tool == "py-spy":
        assert tc.py_spy
        argv = [tc.py_spy, "record", "-r", str(rate_hz), "--idle", "-f", fmt, "-o", out]
        if native:
            argv.append("--native")
        elif not blocking:
            argv.append("--nonblocking")
        return argv + (["-p", str(pid)] if pid is not None else ["--", *command])  # type: ignore[misc]
    if tool == "austin":
        assert tc.austin
        if native:
            raise ValueError("the benchmark does not run Austin's native mode (austinp)")
        interval_us = max(1, round(1e6 / rate_hz))
        argv = [tc.austin, "-i", str(interval_us), "-o", out]
        if fmt == "mojo":
            argv.append("-b")
        return argv + (["-p", str(pid)] if pid is not None else list(command))  # type: ignore[arg-type]
    if tool == "tachyon":
        assert tc.tachyon_version and not native
        # -a (every thread) and --async-aware (task stacks) exclude each other.
        every_thread = [] if "--async-aware" in extra else ["-a"]
        opts = ["-r", str(rate_hz), *every_thread,
                "--binary" if fmt == "binary" else "--collapsed", "-o", out]
        if blocking:
            opts.append("--blocking")
        opts += extra
        if pid is not None:
            # Inside the target's mount namespace and root: it reads the target's binaries by
            # the paths the target sees.
            return ["nsenter", "-t", str(pid), "-m", "-r", "python3.15", "-m",
                    "profiling.sampling", "attach", *opts, str(pid)]
        assert command is not None
        return [command[0], "-m", "profiling.sampling", "run", *opts, *command[1:]]
    raise ValueError(tool)


def tachyon_version(target_python: str, target_version: str) -> str | None:
    """The target's version where its interpreter has its own sampler (profiling.sampling, new
    in 3.15), else None."""
    m = re.match(r"(\d+)\.(\d+)", target_version)
    if not m or (int(m.group(1)), int(m.group(2))) < (3, 15):
        return None
    try:
        r = _run([target_python, "-c", "import profiling.sampling"], timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return target_version if r.returncode == 0 else None


# -- reading outputs -----------------------------------------------------------------------


@dataclass
class ToolResult:
    """What one recording holds, counted per the tool's own definition (module docstring)."""

    tool: str
    fmt: str
    thread_samples: int
    passes: int  # main-thread samples (psrec: passes)
    errors: int
    error_share: float
    duration_s: float | None  # the tool's own sampling duration, when it reports one
    out_bytes: int
    # attribution (only when asked): samples inside main(), and of them inside fibonacci
    main_n: int = 0
    fib_n: int = 0
    main_w: float = 0.0
    fib_w: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def parse_stderr_counts(tool: str, stderr: bytes) -> tuple[int | None, int | None]:
    """(thread-samples, errors) as the tool reports them on stderr."""
    text = _ANSI.sub(b"", stderr).decode("utf-8", "replace")
    if tool == "py-spy":
        found = re.findall(r"Samples:\s*(\d+)\s+Errors:\s*(\d+)", text)
        return (int(found[-1][0]), int(found[-1][1])) if found else (None, None)
    if tool == "austin":
        found = re.findall(r"Error rate\s*:\s*(\d+)/(\d+)", text)
        return (int(found[-1][1]), int(found[-1][0])) if found else (None, None)
    return None, None


def _stack_flags(names: Iterable[tuple[str, str]], fib: str, main_file: str) -> tuple[bool, bool]:
    in_main = in_fib = False
    for func, filename in names:
        if filename.endswith(main_file):
            if func == "main":
                in_main = True
            elif func == fib:
                in_fib = True
    return in_main, in_fib


def read_output(
    tool: str,
    fmt: str,
    path: str,
    stderr: bytes,
    *,
    target_pid: int | None,
    attribution: bool = False,
) -> ToolResult:
    size = os.path.getsize(path) if os.path.exists(path) else 0
    if size == 0:
        raise RuntimeError(f"{tool} wrote no output ({path}); stderr: {_tail(stderr)}")
    if tool == "psrec":
        return _read_psr(path, size, attribution)
    if tool == "py-spy":
        return _read_pyspy(fmt, path, size, stderr, attribution)
    if tool == "austin":
        return _read_austin(fmt, path, size, stderr, target_pid, attribution)
    if tool == "tachyon":
        return _read_tachyon(fmt, path, size, stderr, attribution)
    raise ValueError(tool)


def _read_tachyon(fmt: str, path: str, size: int, output: bytes, attribution: bool) -> ToolResult:
    """Tachyon's collapsed output ("tid:N;file.py:function:line;... count") and what it printed
    (output: its standard output and error together)."""
    text = _ANSI.sub(b"", output).decode("utf-8", "replace")
    r = ToolResult("tachyon", fmt, 0, 0, 0, 0.0, None, size)
    captured = re.findall(r"Captured ([\d,]+) samples? in ([\d.]+) seconds", text)
    failed = re.findall(r"Error rate: ([\d.]+)", text)
    if captured:
        r.passes = int(captured[-1][0].replace(",", ""))
        r.duration_s = float(captured[-1][1])
    if failed and r.passes:
        r.errors = round(float(failed[-1]) / 100 * r.passes)
    if fmt != "binary":  # (a binary one's thread-samples are counted by its replay)
        r.thread_samples = collapsed_samples(path, attribution, r)
        r.passes = r.passes or r.thread_samples
    r.error_share = r.errors / max(1, r.passes)
    return r


def collapsed_samples(path: str, attribution: bool = False, r: ToolResult | None = None) -> int:
    """The thread-samples of Tachyon's collapsed stacks; with attribution, those in main() and
    in fibonacci added to r."""
    total = 0
    for stack, n in _collapsed_lines(path):
        total += n
        if attribution:
            names = []
            for part in stack.split(";")[1:]:
                file, _, rest = part.partition(":")
                names.append((rest.rpartition(":")[0], file))
            in_main, in_fib = _stack_flags(names, "fibonacci", "fixed_work.py")
            if in_main and r is not None:
                r.main_n += n
                r.main_w += n
                if in_fib:
                    r.fib_n += n
                    r.fib_w += n
    return total


def _collapsed_lines(path: str) -> Iterator[tuple[str, int]]:
    """(stack, count) of each line of a collapsed-stacks file ("a;b;c count")."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if count.isdigit():
                yield stack, int(count)


def tachyon_replay(target_python: str, binary: str, out: str) -> list[str]:
    """The command that turns Tachyon's binary recording into collapsed stacks (run by the
    target's own interpreter, in its root)."""
    return [target_python, "-m", "profiling.sampling", "replay", "--collapsed", "-o", out, binary]


def _tail(b: bytes, n: int = 400) -> str:
    return _ANSI.sub(b"", b).decode("utf-8", "replace").strip()[-n:]


def _read_psr(path: str, size: int, attribution: bool) -> ToolResult:
    from psrec.format import open_recording
    from psrec.format.describe import info

    with open_recording(path) as rec:
        d = info(rec)
        r = ToolResult(
            "psrec", "psr", d["samples"], d["passes"], d["sample_errors"],
            d["sample_errors"] / max(1, d["samples"] + d["sample_errors"]),
            d["duration_s"], size,
            extra={"missed_deadlines": d["missed_deadlines"], "closed_cleanly": d["closed_cleanly"],
                   "threads": d["threads"], "achieved_rate_hz": d["achieved_rate_hz"],
                   # the sampling thread's own CPU, and its time inside passes
                   "sampler_cpu_ns": d["stats"].get("sampler_cpu_ns"),
                   "sampling_ns_total": d["stats"].get("sampling_ns_total"),
                   # how each sample's halves were read (spec 10, rule 7)
                   **{k: d["stats"].get(k) for k in (
                       "captured_stacks", "native_mixed", "native_captured", "native_stopped",
                       "native_marked", "torn_stopped", "torn_dropped", "retries",
                       "stopped_ns")}},
        )
        if attribution:
            _psr_attribution(rec, r)
    return r


def _psr_attribution(rec: Any, r: ToolResult) -> None:
    from psrec.analyzer.engine import engine_for
    from psrec.analyzer.model import CellColumns, Selection

    defs = rec.definitions()
    engine = engine_for(None)
    stream = engine.stream(rec)
    acc = engine.accumulator(Selection())
    for batch in stream:
        acc.add(batch)
    trie = stream.decoder
    parents = trie.trie_parents()
    frames = trie.trie_frames()
    flags: dict[int, tuple[bool, bool]] = {0: (False, False)}

    def node_flags(node: int) -> tuple[bool, bool]:
        path = []
        n = node
        while n not in flags:
            path.append(n)
            n = parents[n]
        m, f = flags[n]
        for n in reversed(path):
            fr = defs.frame(frames[n])
            fm, ff = _stack_flags([(fr.function.name, fr.function.filename)], "fibonacci",
                                  "fixed_work.py")
            m, f = m or fm, f or ff
            flags[n] = (m, f)
        return flags[node]

    tick_s = rec.tick_ns / 1e9
    for _slice, _thread, node, count, weight, _cpu, _gil, _on in CellColumns(
            *acc.columns()).cells():
        m, f = node_flags(node)
        if m:
            r.main_n += count
            r.main_w += weight * tick_s
            if f:
                r.fib_n += count
                r.fib_w += weight * tick_s


def _read_pyspy(fmt: str, path: str, size: int, stderr: bytes, attribution: bool) -> ToolResult:
    n, errors = parse_stderr_counts("py-spy", stderr)
    passes = 0
    r = ToolResult("py-spy", fmt, n or 0, 0, errors or 0, 0.0, None, size)
    if fmt == "speedscope":
        with open(path) as f:
            doc = json.load(f)
        frames = doc["shared"]["frames"]
        total = 0
        flags = [
            _stack_flags([(fr.get("name", ""), fr.get("file", ""))], "fibonacci", "fixed_work.py")
            for fr in frames
        ]
        for prof in doc["profiles"]:
            total += len(prof["samples"])
            if "MainThread" in prof.get("name", ""):
                passes = max(passes, len(prof["samples"]))
            if attribution:
                for stack, w in zip(prof["samples"], prof["weights"]):
                    m = any(flags[i][0] for i in stack)
                    if m:
                        f = any(flags[i][1] for i in stack)
                        r.main_n += 1
                        r.main_w += w
                        if f:
                            r.fib_n += 1
                            r.fib_w += w
        r.extra["samples_in_file"] = total
        if n is None:
            r.thread_samples = total
    elif fmt == "raw":
        total = 0
        for stack, count in _collapsed_lines(path):
            total += count
            # The main thread's stacks start at the workload's <module>; threads started
            # with threading start at _bootstrap.
            if stack.startswith("<module> ("):
                passes += count
        r.extra["samples_in_file"] = total
        if n is None:
            r.thread_samples = total
    r.passes = passes or r.thread_samples
    r.error_share = r.errors / max(1, r.passes + r.errors)
    return r


def _read_austin(
    fmt: str, path: str, size: int, stderr: bytes, pid: int | None, attribution: bool
) -> ToolResult:
    n, errors = parse_stderr_counts("austin", stderr)
    r = ToolResult("austin", fmt, n or 0, 0, errors or 0, 0.0, None, size)
    if fmt == "text":
        total = passes = 0
        main_tid = f":{pid};" if pid else None
        threads: dict[str, int] = {}
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("# duration:"):
                    r.duration_s = int(line.split(":")[1]) / 1e6
                    continue
                if not line.startswith("P"):
                    continue
                total += 1
                head, _, metric = line.rstrip("\n").rpartition(" ")
                parts = head.split(";")
                tid = parts[1] if len(parts) > 1 else ""
                threads[tid] = threads.get(tid, 0) + 1
                if attribution:
                    in_main = in_fib = False
                    for fr in parts[2:]:
                        fields = fr.rsplit(":", 2)
                        if len(fields) == 3 and fields[0].endswith("fixed_work.py"):
                            if fields[1] == "main":
                                in_main = True
                            elif fields[1] == "fibonacci":
                                in_fib = True
                    if in_main:
                        w = int(metric) / 1e6 if metric.isdigit() else 0.0
                        r.main_n += 1
                        r.main_w += w
                        if in_fib:
                            r.fib_n += 1
                            r.fib_w += w
        if main_tid is not None:
            passes = sum(c for t, c in threads.items() if (t + ";").endswith(main_tid))
        if not passes and threads:
            passes = max(threads.values())
        r.passes = passes
        r.extra["samples_in_file"] = total
        r.extra["threads"] = len(threads)
        if n is None:
            r.thread_samples = total
    else:
        r.passes = r.thread_samples  # MOJO is not parsed; used for its size only
    r.error_share = r.errors / max(1, r.thread_samples)
    return r
