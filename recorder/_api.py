"""Recording sessions: attach or launch, sample natively, write chunks on a writer thread."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from types import FrameType, ModuleType
from typing import Any, TextIO

from psrec.format import PsrWriter
from psrec.format.errors import OutputExistsError, PsrecError

from .errors import (
    CommandNotFoundError,
    NativeRecorderMissingError,
    NoSuchProcessError,
    NotPythonError,
    RecorderError,
)

__all__ = ["RecordOptions", "RecordResult", "record", "dump_process", "parse_rate"]

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(k)?\s*(hz)?\s*$", re.IGNORECASE)


MAX_RATE_HZ = 1_000_000.0  # "max": passes back to back, no sleeping (the sampler's floor)


def parse_rate(text: str | float | int) -> float:
    """'1000', '10k', '10khz', '250hz', '1.5k' -> samples per second; 'max' -> as fast as
    possible."""
    if isinstance(text, str) and text.strip().lower() == "max":
        return MAX_RATE_HZ
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        m = _RATE.match(text)
        if not m:
            raise RecorderError(
                f"invalid rate {text!r}", help="give samples per second, e.g. 1000, 10k or 10khz"
            )
        value = float(m.group(1)) * (1000 if m.group(2) else 1)
    if not (0 < value <= 100_000) and value != MAX_RATE_HZ:
        raise RecorderError(
            f"rate {value:g} Hz is out of range", help="choose a rate between 1 Hz and 100 kHz"
        )
    return value


def native() -> ModuleType:
    try:
        from . import _recorder
    except ImportError as exc:
        raise NativeRecorderMissingError(f"the native recorder cannot be loaded: {exc}") from None
    return _recorder


@dataclass(frozen=True)
class RecordOptions:
    output: str
    pid: int | None = None
    command: tuple[str, ...] = ()
    rate_hz: float = 1000.0
    duration: float | None = None
    subprocesses: bool = False
    blocking: bool = False
    force: bool = False
    quiet: bool = False
    realtime: bool = False  # SCHED_FIFO for the sampling thread where permitted
    cpu_source: str = "auto"  # "auto": context switches where permitted, else /proc; "procfs"
    attach_timeout: float = 10.0


@dataclass(frozen=True)
class RecordResult:
    output: str
    pid: int
    exit_code: int | None  # the launched program's exit status (None when attached)
    stats: dict[str, Any] = field(default_factory=dict)
    bytes_written: int = 0
    stopped_by: str = ""  # "exit", "duration", "interrupt", "terminate"


def _check_output(path: str, force: bool) -> None:
    """Fails before anything is started if the output cannot be written."""
    if os.path.isdir(path):
        raise PsrecError(f"{path} is a directory", help="give a file name with -o")
    if os.path.exists(path) and not force:
        raise OutputExistsError(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise PsrecError(
            f"cannot create {path}: folder {folder} does not exist",
            help="create the folder first or choose another path with -o",
        )
    try:  # access() says yes to root everywhere: try for real, before anything starts
        fd, probe = tempfile.mkstemp(prefix=".psrec-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError:
        raise PsrecError(
            f"cannot create {path}: folder {folder} is not writable",
            help="choose a folder you can write to with -o",
        ) from None


def _resolve_command(command: tuple[str, ...]) -> list[str]:
    if not command:
        raise RecorderError("no command given after --",
                            help="psrec record -o out.psr -- python app.py")
    exe = command[0]
    if os.sep in exe:
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            raise CommandNotFoundError(f"command not found: {exe}")
        return list(command)
    found = shutil.which(exe)
    if not found:
        raise CommandNotFoundError(f"command not found: {exe}")
    return [exe, *command[1:]]


def _exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def _wait_for_python(rec: ModuleType, proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Polls a launched program until its interpreter is initialised (or it is not Python).

    Right after exec the child passes through states that look wrong from outside: its
    credentials are being switched (reads are refused), the loader has mapped libpython only
    in part, the runtime is not initialised yet. Every error is taken as "not ready" while it
    keeps changing; one that persists for ``settle`` seconds, or until the timeout, is final.
    """
    settle = min(1.0, timeout)
    start = time.monotonic()
    deadline = start + timeout
    last: Exception | None = None
    last_since = start
    while True:
        now = time.monotonic()
        if proc.poll() is not None:
            raise RecorderError(
                f"{proc.args[0]} exited with status {_exit_status(proc.returncode)} before psrec "
                "could attach to it",
                help="nothing was recorded; check that the command runs on its own",
            )
        if now >= deadline or (last is not None and now - last_since >= settle
                               and not isinstance(last, (NotPythonError, NoSuchProcessError))):
            break
        try:
            if rec.inspect(proc.pid)["initialized"]:
                return
            last = None
        except RecorderError as exc:
            if last is None or type(exc) is not type(last) or str(exc) != str(last):
                last_since = now
            last = exc
        time.sleep(0.002)
    proc.terminate()
    try:
        proc.wait(2)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if isinstance(last, NotPythonError):
        raise NotPythonError(
            f"{proc.args[0]} did not start a CPython interpreter within {timeout:g} s")
    if last is not None and not isinstance(last, NoSuchProcessError):
        raise last
    raise RecorderError(f"{proc.args[0]} did not initialise Python within {timeout:g} s")


def _metadata(rec: ModuleType, info: dict[str, Any], opts: RecordOptions, pid: int,
              command: list[str], interval_ns: int) -> dict[str, Any]:
    from psrec import __version__

    return {
        "psrec_version": __version__,
        "pid": pid,
        "command": command,
        "python_version": info["version"],
        "python_build": {
            "source": info["version_source"],
            "layout": info["layout_source"],
            "binary": info["binary"],
            "executable": info["executable"],
            "libpython": info["shared_libpython"],
            "version_hex": info["version_hex"],
            # No GIL: the GIL_HELD bit records whether a thread was attached to the
            # interpreter (spec/psr-format.md, the thread status byte).
            "free_threaded": info["free_threaded"],
        },
        "hostname": socket.gethostname(),
        "interval_ns": interval_ns,
        "rate_hz": opts.rate_hz,
        "options": {
            "blocking": opts.blocking,
            "subprocesses": opts.subprocesses,
            "duration": opts.duration,
            "mode": "launch" if opts.command else "attach",
            # threading's names (Thread.name); the kernel's (/proc/PID/task/TID/comm) for
            # threads threading does not know
            "thread_names": "python",
            "cpu_source": opts.cpu_source,
            # GIL_REQUESTED is known where the thread state says it (3.15+ with a GIL)
            "gil_requested": info["version_hex"] >= 0x030F0000 and not info["free_threaded"],
        },
    }


def _human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


class _StatusLine:
    def __init__(self, stream: TextIO, enabled: bool) -> None:
        self.stream = stream
        self.enabled = enabled
        self.last = 0.0
        self.width = 0

    def update(self, st: dict[str, Any], size: int, force: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (not force and now - self.last < 0.25):
            return
        self.last = now
        elapsed = st["elapsed_ns"] / 1e9
        rate = st["passes"] / elapsed if elapsed > 0 else 0.0
        total = st["samples"] + st["sample_errors"]
        err = 100.0 * st["sample_errors"] / total if total else 0.0
        line = (
            f"psrec: {elapsed:7.1f} s  {st['samples']:>10,} samples  {rate:8.1f} Hz  "
            f"{err:5.2f}% errors  {st['live_threads']:>3} threads  {_human_bytes(size)}"
        )
        self.width = max(self.width, len(line))
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()

    def clear(self) -> None:
        if self.enabled and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()


class _Terminate(Exception):
    pass


def record(opts: RecordOptions, *, stream: TextIO | None = None) -> RecordResult:
    """Records a process (opts.pid) or a launched command (opts.command) into opts.output."""
    stream = stream or sys.stderr
    rec = native()
    interval_ns = max(1000, int(round(1e9 / opts.rate_hz)))
    _check_output(opts.output, opts.force)

    child: subprocess.Popen[bytes] | None = None
    if opts.command:
        argv = _resolve_command(opts.command)
        try:
            child = subprocess.Popen(argv)
        except FileNotFoundError:
            raise CommandNotFoundError(f"command not found: {argv[0]}") from None
        except PermissionError:
            raise CommandNotFoundError(
                f"cannot run {argv[0]}: permission denied", help="check the file's execute bit"
            ) from None
        pid = child.pid
        try:
            _wait_for_python(rec, child, opts.attach_timeout)
        except BaseException:
            if child.poll() is None:
                child.kill()
                child.wait()
            raise
        command = argv
    else:
        assert opts.pid is not None
        pid = opts.pid
        command = []

    created_wall_ns = time.time_ns()
    created_mono_ns = time.monotonic_ns()
    try:
        sampler = rec.Sampler(pid, interval_ns, created_mono_ns, opts.blocking, opts.subprocesses,
                              opts.realtime, opts.cpu_source != "procfs")
    except BaseException:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait()
        raise
    # SIGTERM is handled from before the output exists: a recording interrupted at any point
    # from here on is closed cleanly. Until the loop below runs, the handler only notes it.
    terminated = [False]
    in_loop = [False]

    def on_term(signum: int, frame: FrameType | None) -> None:
        terminated[0] = True
        if in_loop[0]:
            raise _Terminate()

    old_term: Any = None
    if threading.current_thread() is threading.main_thread():
        old_term = signal.signal(signal.SIGTERM, on_term)
    info = sampler.target_info()
    if info["layout_warning"]:
        print(f"psrec: warning: {info['layout_warning']}", file=stream)
    if not command:
        command = rec.command_line(pid).split()
    try:
        writer = PsrWriter(
            opts.output,
            metadata=_metadata(rec, info, opts, pid, command, interval_ns),
            created_wall_ns=created_wall_ns,
            created_mono_ns=created_mono_ns,
            force=True,  # checked above, before anything started
        )
    except BaseException:
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
        raise

    write_error: list[BaseException] = []

    def write_loop() -> None:
        try:
            while True:
                chunk = sampler.pop_chunk(200)
                if chunk is not None:
                    writer.write_sealed(*chunk)
                elif sampler.chunks_done():
                    return
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            write_error.append(exc)

    writer_thread = threading.Thread(target=write_loop, name="psrec-writer", daemon=True)

    status = _StatusLine(stream, stream.isatty() and not opts.quiet)
    stopped_by = "exit"
    start = time.monotonic()
    sampler.start()
    writer_thread.start()
    try:
        in_loop[0] = True
        if terminated[0]:
            raise _Terminate()
        while not sampler.wait(0.1):
            if write_error:
                break
            if opts.duration is not None and time.monotonic() - start >= opts.duration:
                stopped_by = "duration"
                break
            status.update(sampler.stats(), writer.bytes_written)
    except KeyboardInterrupt:
        stopped_by = "interrupt"
    except _Terminate:
        stopped_by = "terminate"
        if child is not None and child.poll() is None:
            child.terminate()
    finally:
        sampler.stop()
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
        exit_code: int | None = None
        if child is not None:
            # After Ctrl-C the program got the SIGINT too (same process group) and should be
            # ending; after --duration it keeps running and is waited for once the file is
            # closed.
            if stopped_by != "duration":
                try:
                    child.wait(10 if stopped_by != "exit" else None)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
                exit_code = _exit_status(child.returncode)
        sampler.finish(exit_code)
        writer_thread.join()
        st = sampler.stats()
        status.clear()
        final_stats = {
            "passes": st["passes"],
            "samples": st["samples"],
            "sample_errors": st["sample_errors"],
            "missed_deadlines": st["missed_deadlines"],
            "duration_ns": st["elapsed_ns"],
            "late_passes": st["late_passes"],
            "lateness_ns_max": st["lateness_ns_max"],
            "lateness_ns_mean": st["lateness_ns_total"] // max(1, st["passes"]),
            "sampling_ns_per_pass": st["sampling_ns_total"] // max(1, st["passes"]),
            "sampler_cpu_ns": st["sampling_cpu_ns"],
            "threads_seen": st["threads_seen"],
            "processes": st["processes"],
            "truncated_stacks": st["truncated_stacks"],
            "code_objects": st["code_objects"],
            "stopped_by": stopped_by,
            "realtime": st["realtime"],
            "retries": st["retries"],
            "stat_reads": st["stat_reads"],
            "switch_samples": st["switch_samples"],
        }
        if exit_code is not None:
            final_stats["exit_code"] = exit_code
        if write_error:
            writer.abandon()
        else:
            writer.close(final_stats)
    if write_error:
        err = write_error[0]
        if isinstance(err, PsrecError):
            raise err
        raise RecorderError(f"writing {opts.output} failed: {err}") from err
    if stopped_by == "duration" and child is not None:
        exit_code = _exit_status(child.wait())
    return RecordResult(
        output=opts.output,
        pid=pid,
        exit_code=exit_code,
        stats=final_stats,
        bytes_written=writer.bytes_written,
        stopped_by=stopped_by,
    )


def dump_process(pid: int, blocking: bool = False) -> dict[str, Any]:
    """Every thread's current stack, GIL and CPU state, read once."""
    result: dict[str, Any] = native().dump(pid, blocking)
    return result

