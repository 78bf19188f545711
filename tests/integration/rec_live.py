"""Helpers for the recorder's live tests: interpreters, targets, psrec runs, recordings, and
the bounds a timing test derives from what its run measured.

Over 400 lines and kept whole: it is the one module every live test imports (the recorder's,
dump's, top's and the end-to-end tests), in sections that each build on the ones above:
interpreters, then targets and psrec runs, then recordings, then bounds over a recording."""

from __future__ import annotations

import math
import os
import select
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from psrec.recorder.supported import Supported, supported

TARGETS = Path(__file__).resolve().parent.parent / "targets"
# Every version the built recorder supports (psrec.recorder.supported, from the native code),
# and the first free-threaded one: pyenv has 3.8-3.13 here; tests/interpreters/provision gives
# Debian sid's 3.14 and 3.15 (run in a sid root, as in a container) and a free-threaded 3.14
# built from Debian's source package. A version added to the recorder is missing (and the run
# under PSREC_REQUIRE_PYTHONS fails) until one of them provides it.
def _versions() -> Supported:
    s = supported()
    if s is None:
        raise RuntimeError("psrec's native recorder is not built: make dev (or make test)")
    return s


_VERSIONS = _versions()
SUPPORTED = (*_VERSIONS.minors(), f"3.{_VERSIONS.free_threaded_from_minor}t")
SUPPORTED_RANGE = _VERSIONS.range  # "3.8 to 3.15", as psrec's messages say it
PROVISIONED = Path(os.environ.get("PSREC_INTERPRETERS", "/var/cache/psrec-interpreters"))
# The root each provisioned interpreter runs in (its files, headers included, are there).
ROOTS: dict[str, Path] = {}


def pyenv_command() -> str | None:
    """pyenv, on PATH or where its installer puts it ($PYENV_ROOT/bin, ~/.pyenv/bin)."""
    path = shutil.which("pyenv") or os.path.join(
        os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv"), "bin", "pyenv")
    return path if os.access(path, os.X_OK) else None


def _pyenv_pythons() -> dict[str, str]:
    found: dict[str, str] = {}
    pyenv = pyenv_command()
    if pyenv is None:
        return found
    out = subprocess.run([pyenv, "versions", "--bare"], capture_output=True, text=True).stdout
    for version in out.split():
        minor = ".".join(version.split(".")[:2])
        if not version[0].isdigit() or minor in found:
            continue
        prefix = subprocess.run([pyenv, "prefix", version], capture_output=True, text=True)
        exe = Path(prefix.stdout.strip()) / "bin" / f"python{minor}"
        if prefix.returncode == 0 and exe.exists():
            found[minor] = str(exe)
    return found


def _provisioned() -> tuple[dict[str, str], dict[str, str]]:
    """Interpreters tests/interpreters/provision made, by version, and why others are missing."""
    found: dict[str, str] = {}
    listing = PROVISIONED / "interpreters.tsv"
    if listing.exists():
        for line in listing.read_text().splitlines():
            parts = line.split("\t")
            if len(parts) == 3 and os.access(parts[1], os.X_OK):
                found[parts[0]] = parts[1]
                ROOTS[parts[1]] = Path(parts[2])
    failed = PROVISIONED / "failed"
    why = {f.name: f.read_text().strip() for f in failed.iterdir()} if failed.is_dir() else {}
    return found, why


# What each interpreter found says it is when run: its (major, minor) version and whether it
# is free-threaded. One run each, at collection; the tests ask minor_of and is_free_threaded.
_RUNS_AS: dict[str, tuple[tuple[int, int], bool]] = {}
# Interpreters found that do not run, by id, with how they failed (test_interpreters_found
# fails on them; the other tests go on without them).
BROKEN: dict[str, str] = {}
_PROBE = ("import sys, sysconfig; "
          "print(*sys.version_info[:2], bool(sysconfig.get_config_var('Py_GIL_DISABLED')))")


def _probe(python: str) -> str | None:
    """Runs python once to learn what it is; None when it runs, else how it failed."""
    try:
        r = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=60,
                           cwd=str(TARGETS))
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{python} does not run: {exc}"
    out = r.stdout.split()
    if r.returncode != 0 or len(out) != 3:
        return f"{python} does not run (exit {r.returncode}): {r.stderr.strip()[-300:]}"
    _RUNS_AS[python] = (int(out[0]), int(out[1])), out[2] == "True"
    return None


def discover() -> tuple[list[tuple[str, str]], dict[str, str], dict[str, str]]:
    """Supported interpreters that run, as (id, path), unsupported ones by minor version, and
    why supported versions are missing."""
    pyenv = _pyenv_pythons()
    provisioned, failed = _provisioned()
    have = {**pyenv, **provisioned}
    supported = [(f"python={m}", have[m]) for m in SUPPORTED if m in have]
    # Debian's /usr/bin/python3, a statically linked executable, as python=3.X-debian-static.
    system = "/usr/bin/python3"
    if os.path.exists(system):
        if _probe(system) is None:
            major, minor = _RUNS_AS[system][0]
            supported.append((f"python={major}.{minor}-debian-static", system))
        else:
            BROKEN["python=debian-static"] = f"{system} does not run"
    unsupported = {m: p for m, p in pyenv.items() if m not in SUPPORTED}
    missing = {m: failed.get(m, "not installed (pyenv, or run tests/interpreters/provision)")
               for m in SUPPORTED if m not in have}
    wanted = os.environ.get("PSREC_TEST_PYTHONS")
    if wanted:
        keys = {w.strip() for w in wanted.split(",") if w.strip()}
        supported = [(i, p) for i, p in supported if i.split("=", 1)[1] in keys]
        missing = {m: why for m, why in missing.items() if m in keys}
    running = []
    for ident, path in supported:
        why = None if path in _RUNS_AS else _probe(path)
        if why is None:
            running.append((ident, path))
        else:
            BROKEN[ident] = why
    return running, unsupported, missing


PYTHONS, UNSUPPORTED, MISSING = discover()


def python_params() -> list[object]:
    """Every supported interpreter found, and, skipped with the reason, every one missing or
    found but not running (test_interpreters_found fails on those unless provisioning said
    why)."""
    params: list[object] = [pytest.param(path, id=ident) for ident, path in PYTHONS]
    params += [pytest.param(None, id=f"python={m}", marks=pytest.mark.skip(reason=why))
               for m, why in MISSING.items()]
    params += [pytest.param(None, id=ident, marks=pytest.mark.skip(reason=why))
               for ident, why in BROKEN.items()]
    if not params:
        params = [pytest.param(None, marks=pytest.mark.skip(
            reason="PSREC_TEST_PYTHONS selected no interpreter"))]
    return params


def python_rate_params(rates: tuple[str, ...] = ("100", "1000", "10000"),
                       every: str = "1000") -> list[object]:
    """(python, rate) for a test at several sampling rates: each interpreter at `every`, and
    the other rates on two of them, the newest found with a GIL and the free-threaded one (or
    another with a GIL). How a thread's time is counted between samples is the recorder's and
    the kernel's, the same for every version; what a version changes (its GIL, its layouts)
    shows at any rate. A missing interpreter is skipped once, saying why."""
    found = sorted(PYTHONS, key=lambda p: _runs_as(p[1])[0])
    free = [p for p in found if _runs_as(p[1])[1]]
    gil = [p for p in found if not _runs_as(p[1])[1] and "static" not in p[0]]
    wide = {p[0] for p in (gil[-1:] + (free[-1:] or gil[-2:-1]))}
    params: list[object] = []
    for ident, path in PYTHONS:
        for rate in rates:
            if rate == every or ident in wide:
                params.append(pytest.param(path, rate, id=f"{ident}-rate={rate}"))
    params += [pytest.param(None, every, id=f"{p.id}-rate={every}", marks=p.marks)
               for p in python_params()[len(PYTHONS):]]
    return params


def one_python() -> list[object]:
    """One interpreter, for tests that need only one: the last one found that runs (Debian's
    when it is there), whatever is missing; skipped, saying why, only when none runs."""
    found = python_params()[:len(PYTHONS)]
    return found[-1:] if found else python_params()[:1]


def _runs_as(python: str) -> tuple[tuple[int, int], bool]:
    if python not in _RUNS_AS:
        why = _probe(python)
        assert why is None, why
    return _RUNS_AS[python]


def is_free_threaded(python: str) -> bool:
    return _runs_as(python)[1]


def minor_of(python: str) -> tuple[int, int]:
    return _runs_as(python)[0]


@dataclass
class Target:
    proc: subprocess.Popen[str]

    @property
    def pid(self) -> int:
        return self.proc.pid


def _wait_line(proc: subprocess.Popen[str], want: str, timeout: float) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    fd = proc.stdout.fileno()
    buf = b""
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not r:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            raise AssertionError(f"target exited before printing {want!r} (status {proc.wait()})")
        buf += chunk
        if want.encode() + b"\n" in buf:
            return
    raise AssertionError(f"target did not print {want!r} within {timeout} s; got {buf[-200:]!r}")


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextmanager
def target(python: str, script: str, *args: str, ready: str = "ready",
           timeout: float = 30.0, stdin: bool = False) -> Iterator[Target]:
    """Starts tests/targets/SCRIPT and waits until it prints `ready` from its innermost frame.
    With stdin, the target's standard input is a pipe the test writes cues to."""
    proc = subprocess.Popen(
        [python, str(TARGETS / script), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, cwd=str(TARGETS), text=True,
    )
    try:
        _wait_line(proc, ready, timeout)
        yield Target(proc)
    finally:
        stop(proc)


SYSTEM_PYTHON = "/usr/bin/python3"  # an interpreter any user may run (pyenv's are root's)


@contextmanager
def target_of_nobody(script: str, *args: str, timeout: float = 30.0) -> Iterator[Target]:
    """tests/targets/SCRIPT run by the system's python3 as the user nobody, once `ready`.
    Skips, saying why, where it cannot be (not root, or no such python)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to start a target as another user")
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"{SYSTEM_PYTHON} is not installed: no interpreter nobody may run")
    if not _others_may_read(TARGETS / script):
        pytest.skip(f"{TARGETS} is not readable by other users (a clone in a private folder): "
                    "nobody cannot run its targets")
    proc = subprocess.Popen(
        [SYSTEM_PYTHON, str(TARGETS / script), *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=str(TARGETS), text=True,
        user=65534, group=65534, extra_groups=[])
    try:
        _wait_line(proc, "ready", timeout)
        yield Target(proc)
    finally:
        stop(proc)


def _others_may_read(path: Path) -> bool:
    """Whether a user other than the owner may read path (every folder above it searchable)."""
    import stat

    try:
        if not os.stat(path).st_mode & stat.S_IROTH:
            return False
        return all(os.stat(p).st_mode & stat.S_IXOTH for p in path.resolve().parents)
    except OSError:
        return False


# What psrec is run with to be root without CAP_SYS_PTRACE, as in a container by default.
WITHOUT_PTRACE = ("setpriv", "--bounding-set", "-sys_ptrace")


def dead_pid() -> int:
    """A pid no process has (one that just exited and was reaped)."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def psrec(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "psrec", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=str(TARGETS))


# What `psrec dump PID` must not import: the command line and reports (click, the analyzer),
# the recording machinery, the format's reader, writer and codecs, importlib.metadata (for
# __version__), typing (which imports re: together about 10 ms, more than the dump itself).
# (It imports psrec.format.text, which escapes names, and the package's root.)
HEAVY = ("click", "psrec.analyzer", "psrec.recorder._api", "psrec.format.reader",
         "psrec.format.writer", "psrec.format._format", "msgpack", "zstandard",
         "importlib.metadata", "typing")
# Wording an error imports the error classes: still no click, analyzer, reader or
# importlib.metadata.
HEAVY_ON_ERROR = ("click", "psrec.analyzer", "psrec.recorder._api", "psrec.format.reader",
                  "importlib.metadata")


def psrec_imports(*args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """psrec run as `python -m psrec ARGS` with -X importtime: the run, with the importtime
    lines taken out of its stderr, and the modules it imported."""
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "psrec", *args],
                       capture_output=True, text=True, timeout=60, cwd=str(TARGETS))
    modules, rest = set(), []
    for line in r.stderr.splitlines(keepends=True):
        if line.startswith("import time:"):
            modules.add(line.rpartition("|")[2].strip())
        else:
            rest.append(line)
    r.stderr = "".join(rest)
    return r, modules


def assert_lean(modules: set[str], heavy: tuple[str, ...] = HEAVY) -> None:
    loaded = sorted(m for m in modules for h in heavy if m == h or m.startswith(h + "."))
    assert not loaded, f"psrec dump PID imported {loaded}"


def psrec_async(*args: str) -> subprocess.Popen[str]:
    """psrec running in the background (stderr piped, for the test to show on failure)."""
    return subprocess.Popen([sys.executable, "-m", "psrec", *args], stderr=subprocess.PIPE,
                            text=True, cwd=str(TARGETS))


def wait_recording(path: Path, proc: subprocess.Popen[str], timeout: float = 20.0) -> None:
    """Waits until a background `psrec record` has written its file's header and metadata."""
    deadline = time.monotonic() + timeout
    while not path.exists() or path.stat().st_size < 200:
        assert proc.poll() is None, f"psrec record exited ({proc.returncode})"
        assert time.monotonic() < deadline, f"{path} not written within {timeout} s"
        time.sleep(0.02)


def wait_samples(path: Path, proc: subprocess.Popen[str],
                 done: Callable[[list[Sample], int], bool], what: str,
                 timeout: float = 30.0) -> list[Sample]:
    """Waits until the recording a background `psrec record` is writing holds what a test
    needs: done(samples, created_mono_ns) is polled over the chunks written so far (every
    complete chunk of a file being written can be read; the recorder seals one at least every
    second). Returns those samples."""
    from psrec.format import open_recording

    wait_recording(path, proc, timeout)
    deadline = time.monotonic() + timeout
    size = 0
    while True:
        assert proc.poll() is None, f"psrec record exited ({proc.returncode}) before {what}"
        if path.stat().st_size != size:
            size = path.stat().st_size
            with open_recording(path) as rec:
                base = rec.header.created_mono_ns
            samples = load(path)
            if done(samples, base):
                return samples
        assert time.monotonic() < deadline, f"{what}: not in {path} within {timeout} s"
        time.sleep(0.05)


def record(path: Path, pid: int, *extra: str, duration: float = 1.5) -> None:
    r = psrec("record", "-q", "-o", str(path), "-d", str(duration), *extra, str(pid))
    assert r.returncode == 0, f"psrec record failed ({r.returncode}): {r.stderr}"


@dataclass(frozen=True)
class Sample:
    ts: int
    pid: int
    thread: str
    os_tid: int
    stack: tuple[tuple[str, str, int], ...]  # root first: (file, function, line)
    status: int
    cpu: int

    @property
    def functions(self) -> tuple[str, ...]:
        return tuple(f for _, f, _ in self.stack)

    @property
    def leaf(self) -> str:
        return self.stack[-1][1] if self.stack else ""


def load(path: Path) -> list[Sample]:
    from psrec.format import open_recording

    rows = []
    with open_recording(path) as rec:
        defs = rec.definitions()
        stream = rec.stream(native=False)
        for batch in stream:
            parents, frames = stream.decoder.parents, stream.decoder.frames
            for i in range(len(batch)):
                node = batch.node[i]
                stack = []
                while node:
                    f = defs.frame(frames[node])
                    stack.append((f.function.filename, f.function.name, f.line))
                    node = parents[node]
                stack.reverse()
                rows.append((batch.ts[i], batch.thread[i], tuple(stack), batch.status[i],
                             batch.cpu[i]))
        # Each sample carries its thread's last name (names read after a thread started
        # arrive as renames).
        defs.apply_renames(stream.events)
    t = defs.threads
    return [Sample(ts, t[ref].pid, t[ref].name, t[ref].os_tid, stack, status, cpu)
            for ts, ref, stack, status, cpu in rows]


def collapsed(samples: list[Sample], limit: int = 15) -> str:
    """The most common stacks, collapsed, for failure messages."""
    c = Counter(f"{s.thread}: " + ";".join(f"{f}:{ln}" for _, f, ln in s.stack) for s in samples)
    return "\n".join(f"{n:6d} {k}" for k, n in c.most_common(limit))


# Marker line in rec_traps.py's call_kinds_loop -> the Python function it reaches first.
CALL_KINDS = {
    "kind_plain": "via_plain", "kind_keywords": "via_keywords", "kind_star": "via_star",
    "kind_init": "__init__", "kind_getitem": "__getitem__", "kind_prop": "prop",
    "kind_method": "method", "kind_getattribute": "__getattribute__",
    "kind_for": "via_generator", "kind_send": "via_delegation", "kind_c": "via_c_key",
    "kind_c_gen": "via_c_generator",
}


def line_of(script: str, marker: str) -> int:
    """The line of a target script that carries the comment '# LINE <marker>'."""
    for n, text in enumerate((TARGETS / script).read_text().splitlines(), 1):
        if f"# LINE {marker}" in text:
            return n
    raise AssertionError(f"no '# LINE {marker}' in {script}")


# -- Bounds from what a run measured ------------------------------------------------------
# A timing-bound test judges one run against a bound worked out from that run: what the
# recorder does with no host steal, widened by what the run's conditions explain (the host's
# steal, gaps in the sampling) and by a few standard errors at the run's sample count. A
# recorder clearly worse than its base then fails the first time, not only when it fails twice.


def cpu_ticks() -> tuple[int, int]:
    """The machine's CPU time so far, and the part of it a hypervisor gave to others (steal),
    in ticks of /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields), fields[7] if len(fields) > 7 else 0


@dataclass
class Steal:
    """The share of the machine's CPU time the host gave to other guests (steal) while a
    `with host_steal()` block ran; 0 on bare metal. Counted in ticks of /proc/stat (10 ms of
    one CPU), so over a few seconds on 2 CPUs it reads 0, 0.2 %, 0.4 %..., give or take one
    tick."""

    share: float = 0.0


@contextmanager
def host_steal() -> Iterator[Steal]:
    """Measures the host's steal over the block: `with host_steal() as steal: ...`, then
    steal.share."""
    total0, steal0 = cpu_ticks()
    seen = Steal()
    try:
        yield seen
    finally:
        total1, steal1 = cpu_ticks()
        seen.share = (steal1 - steal0) / max(total1 - total0, 1)


# Standard errors a figure may stray by in one run of a correct recorder, where a failure by
# chance must be rarer than 1 run in 10,000: a normal variable is outside 3.9 of them, either
# side, with odds of 1 in 10,400.
K_RARE = 3.9


def share_se(p: float, weights: list[int]) -> float:
    """The standard error of a share p of the time that samples of these weights stand for,
    each sample a draw of its weight: sqrt(p (1 - p) sum w^2) / sum w, which is
    sqrt(p (1 - p) / n) for n samples of equal weight. Sampling at a fixed interval reads a
    state that lasts several intervals more closely than independent draws would (only its
    edges are in doubt): as a bound this errs wide."""
    total = sum(weights)
    if not total:
        return 1.0
    return math.sqrt(p * (1 - p) * sum(w * w for w in weights)) / total


def sampler_stopped(stats: Mapping[str, Any]) -> float:
    """The share of the time inside its passes that the recording's sampler was off its CPU
    (sampling_ns_total against sampler_cpu_ns, from its STATS): kept off by other programs on
    a loaded host, as steal keeps it off on a busy hypervisor. Taken with steal where a
    stopped read may go wrong (rate_bound). sampler_cpu_ns takes in the thread's work outside
    passes too (sealing chunks), so this errs low; 0 on a quiet host."""
    wall = stats.get("sampling_ns_total", 0)
    return max(0.0, 1.0 - stats.get("sampler_cpu_ns", 0) / wall) if wall else 0.0


def rate_bound(base: float, n: int, steal: float = 0.0, k: float = 3.0) -> float:
    """The highest share of n attempts that a correct recorder may fail in one run (sample
    errors among sample attempts, wrong stacks among a line's samples).

    base: the recorder's own rate, as measured with no host steal. steal: the share of CPU
    time the host stole during the run. An attempt goes wrong when the target moves while
    the sampler copies it, and the host's stops (milliseconds long) outlast a copy (tens of
    microseconds): the share of attempts a stop interrupts is at most the share of time the
    host stopped the CPU, so steal is added to the rate whole (an upper bound; on a quiet
    host it is 0). On top, k standard errors of a binomial at n with that rate: with k = 3 a
    recorder at its base passes all but about 1 run in 700 (normal approximation), and one at
    twice its base fails on average once n is past 9 / base (3,000 attempts at 0.3 %)."""
    p = min(1.0, base + steal)
    return min(1.0, p + k * math.sqrt(p * (1 - p) / max(n, 1)))


@dataclass(frozen=True)
class Rate:
    """A count of failed attempts in a run, judged against rate_bound; str() gives the
    figures a failure message needs."""

    what: str
    failed: int
    n: int
    base: float
    steal: float = 0.0
    k: float = 3.0

    @property
    def bound(self) -> float:
        return rate_bound(self.base, self.n, self.steal, self.k)

    @property
    def ok(self) -> bool:
        return self.failed <= self.bound * self.n

    def __str__(self) -> str:
        return (f"{self.what}: {self.failed} of {self.n} ({100 * self.failed / max(self.n, 1):.2f}"
                f" %), bound {100 * self.bound:.2f} % (base {100 * self.base:.2f} % + host "
                f"steal {100 * self.steal:.2f} % + {self.k:g} standard errors at n={self.n})")


@dataclass(frozen=True)
class Passes:
    """The passes of a recording of one process, as the times its samples carry (every pass
    samples every thread: the main thread of a target that outlives the recording marks
    every pass), with the weight each sample gets (spec section 5), in ticks."""

    ts: tuple[int, ...]
    interval: int  # the sampling interval, in ticks
    tick_ns: int

    @classmethod
    def of(cls, path: Path, samples: list[Sample]) -> Passes:
        from psrec.format import open_recording

        with open_recording(path) as rec:
            interval, tick_ns = rec.interval_ticks, rec.tick_ns
        return cls(tuple(sorted({s.ts for s in samples})), interval, tick_ns)

    @property
    def cap(self) -> int:
        from psrec.format import constants as C

        return self.interval * int(C.WEIGHT_CAP_INTERVALS)

    def weights(self) -> dict[int, int]:
        """Each pass's weight: the time since the previous pass, at most the cap; the first
        pass weighs one interval."""
        out = dict.fromkeys(self.ts[:1], self.interval)
        out.update((b, min(b - a, self.cap)) for a, b in zip(self.ts, self.ts[1:]))
        return out

    def seconds(self, ticks: float) -> float:
        return ticks * self.tick_ns / 1e9

    def time_of(self, samples: list[Sample]) -> tuple[float, float]:
        """The time samples of one thread stand for (their weights' sum, in seconds), and its
        relative standard error, each sample counted as a draw of its weight: sqrt(sum of
        w^2) / sum of w, which is 1/sqrt(n) for n samples of equal weight and grows where a
        few samples after a stop carry the gap before them. 1 for no samples."""
        weight = self.weights()
        ws = [weight[s.ts] for s in samples]
        total = sum(ws)
        return self.seconds(total), math.sqrt(sum(w * w for w in ws)) / total if total else 1.0

    def edges(self, samples: list[Sample], inside: Callable[[Sample], bool]) -> int:
        """The most a view of one thread's samples (in time order) can misplace the moments
        where `inside` turns true or false, summed over those moments, in ticks.

        A sample is stamped with its pass's start and read before the next pass starts: a
        change between two samples of the thread happened between the first one's stamp and
        the pass after the second one's, while a view (each sample standing for the time since
        the pass before it) puts it at the pass before the second one. Each change is
        misplaced by at most that span, whatever the host did (a late or stopped sampler
        widens the span it measures); the sum bounds how far the time inside can be off, on
        top of what no sample stands for (unsampled)."""
        following = dict(zip(self.ts, self.ts[1:]))
        total = 0
        for a, b in zip(samples, samples[1:]):
            if inside(a) != inside(b):
                total += following.get(b.ts, b.ts + self.cap) - a.ts
        return total

    def unsampled(self, start: int, end: int) -> tuple[float, float]:
        """What no sample's weight covers in [start, end]: the time each gap between passes
        lasted past the cap. The sampler was stopped then (by the host, or a load that kept
        it off its CPU), and a view misses what the target did in that time. Returns that
        time as a share of [start, end], and the root of the sum of the gaps' squares as the
        same share: what a thread held in those gaps has at most this standard deviation,
        relative to its time, times sqrt((1 - d) / d) at a duty cycle d (each gap held
        whole or not at all, the widest spread there is)."""
        gaps = [b - a - self.cap for a, b in zip(self.ts, self.ts[1:])
                if start <= a and b <= end and b - a > self.cap]
        span = max(end - start, 1)
        return sum(gaps) / span, math.sqrt(sum(g * g for g in gaps)) / span
