"""Recording sessions: attach or launch, sample natively, write chunks on a writer thread."""

from __future__ import annotations

import errno
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
from psrec.format.version import psrec_version
from psrec.format.writer import check_link, is_stream

from ._children import Guard, end_marked, end_with_parent
from .errors import (
    CommandNotFoundError,
    NativeRecorderMissingError,
    RecorderError,
    RecorderUsageError,
)

__all__ = ["RecordOptions", "RecordResult", "record", "dump_process", "parse_rate"]

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(k)?\s*(hz)?\s*$", re.IGNORECASE)


# The sampler's figures that the trailer (STATS chunk) names otherwise (spec section 2).
_TRAILER_NAMES = {"elapsed_ns": "duration_ns", "sampling_cpu_ns": "sampler_cpu_ns"}
MAX_RATE_HZ = 1_000_000.0  # "max": passes back to back, no sleeping (the sampler's floor)


def parse_rate(text: str | float | int) -> float:
    """'1000', '10k', '10khz', '250hz', '1.5k' -> samples per second; 'max' -> as fast as
    possible. A rate it cannot take is wrong usage (RecorderUsageError, exit status 2)."""
    if isinstance(text, str) and text.strip().lower() == "max":
        return MAX_RATE_HZ
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        m = _RATE.match(text)
        if not m:
            raise RecorderUsageError(
                f"invalid rate {text!r}",
                help="give samples per second (1000, 10k or 10khz), or -r max to sample as fast "
                     "as possible",
            )
        value = float(m.group(1)) * (1000 if m.group(2) else 1)
    if not (0 < value <= 100_000) and value != MAX_RATE_HZ:
        raise RecorderUsageError(
            f"rate {value:g} Hz is out of range",
            help="choose a rate between 1 Hz and 100 kHz, or -r max to sample as fast as possible",
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
    stopped_by: str = ""  # "exit", "duration", "interrupt", "terminate", "exec", ...


def _to_stdout(path: str) -> bool:
    """The recording goes to psrec's standard output ('-', /dev/stdout, the same pipe)."""
    if path == "-":
        return True
    try:
        a, b = os.stat(path), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError):
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _check_output(path: str, force: bool) -> None:
    """Fails before anything is started if the output cannot be written."""
    if is_stream(path):
        # '-', a device or a pipe: written in place, nothing to overwrite. A terminal cannot
        # take a binary recording.
        if _to_stdout(path) and sys.stdout.isatty():
            raise PsrecError("the recording is binary and stdout is a terminal",
                             help="give a file name with -o, or redirect stdout")
        return
    if not force:
        check_link(path)  # dangling or not: never created or written through
    if os.path.isdir(path) and not os.path.islink(path):
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


def _test_limits() -> dict[str, int]:
    """Limits lowered for tests of what happens at them (PSREC_TEST_MAX_THREADS: the threads a
    recording names, 2^24 otherwise, which a test cannot reach)."""
    value = os.environ.get("PSREC_TEST_MAX_THREADS")
    return {"max_threads": int(value)} if value else {}


def _exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def _metadata(rec: ModuleType, info: dict[str, Any], opts: RecordOptions, pid: int,
              command: list[str], interval_ns: int) -> dict[str, Any]:
    return {
        "psrec_version": psrec_version(),
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
    """The live status line on a terminal, redrawn in place. It is kept narrower than the
    terminal: a line that wraps leaves one more line behind at every redraw. The least useful
    fields are left out first."""

    def __init__(self, stream: TextIO, enabled: bool) -> None:
        self.stream = stream
        self.enabled = enabled
        self.last = 0.0
        self.width = 0  # the widest line drawn so far: the next one blanks out what it leaves

    def _room(self) -> int:
        """Characters a line may take: one less than the terminal's width (COLUMNS when set,
        as for shutil.get_terminal_size, else the stream's own terminal, asked at every redraw
        so that a resize is followed), so that the cursor never reaches the last column."""
        try:
            columns = int(os.environ.get("COLUMNS", ""))
        except ValueError:
            columns = 0
        if columns <= 0:
            try:
                columns = os.get_terminal_size(self.stream.fileno()).columns
            except (AttributeError, OSError, ValueError):
                columns = 0
        return max(1, (columns if columns > 0 else 80) - 1)

    def update(self, st: dict[str, Any], size: int, force: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (not force and now - self.last < 0.25):
            return
        self.last = now
        elapsed = st["elapsed_ns"] / 1e9
        rate = st["passes"] / elapsed if elapsed > 0 else 0.0
        total = st["samples"] + st["sample_errors"]
        err = 100.0 * st["sample_errors"] / total if total else 0.0
        # (usefulness, text) in the order shown; 0 is kept longest.
        fields = [
            (0, f"{elapsed:7.1f} s"),
            (1, f"{st['samples']:>10,} samples"),
            (2, f"{rate:8.1f} Hz"),
            (3, f"{err:5.2f}% errors"),
            (4, f"{st['live_threads']:>3} threads"),
            (5, _human_bytes(size)),
        ]
        room = self._room()
        line = "psrec: " + "  ".join(text for _, text in fields)
        while len(line) > room and len(fields) > 1:
            fields.remove(max(fields))
            line = "psrec: " + "  ".join(text for _, text in fields)
        line = line[:room]
        self.width = max(self.width, len(line))
        self.stream.write("\r" + line.ljust(min(self.width, room)))
        self.stream.flush()

    def clear(self) -> None:
        if self.enabled and self.width:
            self.stream.write("\r" + " " * min(self.width, self._room()) + "\r")
            self.stream.flush()


class _Terminate(Exception):
    pass


def _why(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)) or \
        type(exc).__name__


def _write_help(exc: BaseException) -> str | None:
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "free some space, or record to another disk with -o"
    return None


def _stop_child(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(2)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _native_error(state: dict[str, Any]) -> RecorderError:
    from . import errors

    cls = getattr(errors, state["root_error_class"], RecorderError)
    err: RecorderError = cls(state["root_error"])
    return err


class _Waiting:
    """A launched program that does not run Python (yet): what to say, and when to stop
    waiting. With --subprocesses the program may be a launcher (a shell, make, tox): its Python
    processes are recorded for as long as it runs. Without, it may exec Python within
    ``timeout`` seconds. A failure other than "not Python (yet)" that persists for a second
    (an unsupported version, no access) is final."""

    SAY_AFTER = 1.0
    SETTLE = 1.0

    def __init__(self, opts: RecordOptions, child: subprocess.Popen[bytes], stream: TextIO,
                 name: str) -> None:
        self.opts, self.child, self.stream, self.name = opts, child, stream, name
        self.start = time.monotonic()
        self.said = False
        self.last: tuple[str, str] | None = None
        self.last_since = self.start

    def check(self, state: dict[str, Any]) -> bool:
        """False when waiting is over: nothing will be recorded."""
        now = time.monotonic()
        waited = now - self.start
        error = (state["root_error_class"], state["root_error"])
        if error != self.last:
            self.last, self.last_since = error, now
        if (error[0] not in ("NotPythonError", "TargetReadError", "NoSuchProcessError")
                and now - self.last_since >= self.SETTLE):
            raise _native_error(state)
        if not self.said and waited >= self.SAY_AFTER:
            self.said = True
            what = f"{self.name} (pid {self.child.pid}) is not a Python process"
            if self.opts.subprocesses:
                print(f"psrec: {what}: recording the Python processes it starts",
                      file=self.stream)
            else:
                print(f"psrec: {what} (yet): waiting up to {self.opts.attach_timeout:g} s "
                      "for it to start Python (--subprocesses records the Python processes "
                      "it starts)", file=self.stream)
        if not self.opts.subprocesses and waited >= self.opts.attach_timeout:
            print(f"psrec: {self.name} did not start Python within "
                  f"{self.opts.attach_timeout:g} s: nothing recorded; waiting for it to exit "
                  "(Ctrl-C stops it)", file=self.stream)
            return False
        return True


def record(opts: RecordOptions, *, stream: TextIO | None = None) -> RecordResult:
    """Records a process (opts.pid) or a launched command (opts.command) into opts.output.

    A launched program is recorded once it runs Python; until then (and after it execs a
    program that is not Python) it is watched. When no Python process was recorded there is
    no file, and the result says so (``stopped_by`` "not_python")."""
    stream = stream or sys.stderr
    rec = native()
    interval_ns = max(1000, int(round(1e9 / opts.rate_hz)))
    _check_output(opts.output, opts.force)

    child: subprocess.Popen[bytes] | None = None
    guard: Guard | None = None
    if opts.command:
        # What costs time once is done before the program starts, so that psrec is quiet while
        # the program's first milliseconds are recorded: the package's version (for the file's
        # metadata) and the kernel's context-switch hooks.
        psrec_version()
        if opts.cpu_source != "procfs":
            rec.prepare_switch_events()
        argv = _resolve_command(opts.command)
        # A recording written to standard output must not be mixed with the program's own
        # output: the program's goes to standard error then.
        child_stdout = sys.stderr.fileno() if _to_stdout(opts.output) else None
        # The program ends with psrec however psrec ends, and so do the processes it starts
        # (a shell's, a launcher's): marked, and ended by a guard if psrec dies.
        guard = Guard()
        try:
            child = subprocess.Popen(argv, preexec_fn=end_with_parent(), stdout=child_stdout,
                                     env=guard.env())
        except FileNotFoundError:
            guard.release()
            raise CommandNotFoundError(f"command not found: {argv[0]}") from None
        except PermissionError:
            guard.release()
            raise CommandNotFoundError(
                f"cannot run {argv[0]}: permission denied", help="check the file's execute bit"
            ) from None
        pid = child.pid
        command = argv
    else:
        assert opts.pid is not None
        pid = opts.pid
        command = []

    created_wall_ns = time.time_ns()
    created_mono_ns = time.monotonic_ns()
    try:
        sampler = rec.Sampler(pid, interval_ns, created_mono_ns, opts.blocking, opts.subprocesses,
                              opts.realtime, opts.cpu_source != "procfs",
                              launched=child is not None, **_test_limits())
    except BaseException:
        if child is not None:
            _stop_child(child)
        raise
    # SIGTERM is handled from before the output exists: a recording interrupted at any point
    # from here on is closed cleanly. Until the loop below runs, the handler only notes it.
    # SIGHUP (the terminal psrec ran in was closed) is a request to end like SIGTERM: the
    # default would kill psrec and leave the file unclosed, its last second lost.
    terminated = [False]
    in_loop = [False]

    def on_term(signum: int, frame: FrameType | None) -> None:
        terminated[0] = True
        if in_loop[0]:
            raise _Terminate()

    old_term: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            # Under nohup (SIGHUP ignored) a closed terminal must not end the recording.
            if signal.getsignal(sig) is not signal.SIG_IGN:
                old_term[sig] = signal.signal(sig, on_term)
    if not command:
        command = rec.command_line(pid).split()

    writer: PsrWriter | None = None
    write_error: list[BaseException] = []

    def write_loop() -> None:
        assert writer is not None
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

    def open_writer(info: dict[str, Any]) -> PsrWriter:
        if info["layout_warning"]:
            print(f"psrec: warning: {info['layout_warning']}", file=stream)
        try:
            return PsrWriter(
                opts.output,
                metadata=_metadata(rec, info, opts, pid, command, interval_ns),
                created_wall_ns=created_wall_ns,
                created_mono_ns=created_mono_ns,
                force=True,  # checked above, before anything started
            )
        except OSError as exc:
            raise RecorderError(f"cannot write {opts.output}: {exc.strerror or exc}",
                                help=_write_help(exc)) from None

    waiting = (_Waiting(opts, child, stream, os.path.basename(command[0]))
               if child is not None else None)
    status = _StatusLine(stream, stream.isatty() and not opts.quiet)
    stopped_by = "exit"
    start = time.monotonic()
    sampler.start()
    try:
        in_loop[0] = True
        if terminated[0]:
            raise _Terminate()
        while True:
            if writer is None:
                info = sampler.target_info()
                if info is not None:
                    writer = open_writer(info)
                    writer_thread.start()
                elif waiting is not None and not waiting.check(sampler.state()):
                    stopped_by = "not_python"
                    break
            if sampler.wait(0.1 if writer is not None else 0.02):
                break
            if write_error:
                stopped_by = "write_error"
                break
            if opts.duration is not None and time.monotonic() - start >= opts.duration:
                stopped_by = "duration"
                break
            if writer is not None:
                status.update(sampler.stats(), writer.bytes_written)
        if write_error and child is not None and child.poll() is None:
            print(f"psrec: writing {opts.output} failed ({_why(write_error[0])}): recording "
                  f"stopped; waiting for {os.path.basename(command[0])} to exit (Ctrl-C stops "
                  "it)", file=stream)
        state = sampler.state()
        if state["stop_reason"]:
            stopped_by = "thread_limit" if state["threads_full"] else "exec"
            print(f"psrec: {state['stop_reason']}", file=stream)
    except KeyboardInterrupt:
        stopped_by = "interrupt"
    except _Terminate:
        stopped_by = "terminate"
        if child is not None and child.poll() is None:
            child.terminate()
        if guard is not None:  # and what it started, as if psrec had died
            end_marked(guard.token)
    except BaseException:
        sampler.stop()
        if child is not None:
            _stop_child(child)
        for sig, handler in old_term.items():
            signal.signal(sig, handler)
        raise
    finally:
        in_loop[0] = False
    try:
        sampler.stop()
        if writer is None:
            info = sampler.target_info()  # a Python process found in the last moments
            if info is not None:
                writer = open_writer(info)
                writer_thread.start()
    finally:
        for sig, handler in old_term.items():
            signal.signal(sig, handler)
    exit_code: int | None = None
    if child is not None:
        # After Ctrl-C the program got the SIGINT too (same process group) and should be
        # ending; after --duration it keeps running and is waited for once the file is
        # closed; a program that is not Python, or that exec'd one, runs on, as does one whose
        # recording reached the most threads a file holds.
        if stopped_by not in ("duration", "not_python", "exec", "write_error", "thread_limit"):
            try:
                child.wait(10 if stopped_by != "exit" else None)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            exit_code = _exit_status(child.returncode)
    sampler.finish(exit_code)
    final_stats: dict[str, Any] = {}
    if writer is not None:
        if writer_thread.ident is None:  # stopped between opening the file and starting it
            writer_thread.start()
        writer_thread.join()
        st = sampler.stats()
        status.clear()
        # Every figure the sampler keeps (one list: PSREC_SAMPLER_STATS in
        # recorder/native/sampler.hpp), two under the names the spec gives them, and means.
        final_stats = {_TRAILER_NAMES.get(k, k): v for k, v in st.items() if k != "finished"}
        final_stats["lateness_ns_mean"] = st["lateness_ns_total"] // max(1, st["passes"])
        final_stats["sampling_ns_per_pass"] = st["sampling_ns_total"] // max(1, st["passes"])
        final_stats["stopped_by"] = stopped_by
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
        if child is not None:
            _exit_status(child.wait())
        raise RecorderError(
            f"writing {opts.output} failed: {_why(err)}; the file keeps every chunk written "
            "whole", help=_write_help(err)) from err
    if child is not None and exit_code is None:
        if stopped_by == "duration" and child.poll() is None:
            # The program was launched to be recorded, not to be cut short: it runs on, and
            # psrec returns its exit status. Said, so that a server does not look hung.
            print(f"psrec: --duration {opts.duration:g} s reached: recording stopped; waiting "
                  f"for {os.path.basename(command[0])} to exit (Ctrl-C stops it)", file=stream)
        exit_code = _exit_status(child.wait())
    if writer is None and stopped_by == "exit" and child is not None:
        print(f"psrec: {os.path.basename(command[0])} exited with status {exit_code} before "
              "psrec found Python in it"
              + (" or its children" if opts.subprocesses else "") + ": nothing recorded",
              file=stream)
        stopped_by = "not_python"
    if guard is not None:
        guard.release()
    return RecordResult(
        output=opts.output,
        pid=pid,
        exit_code=exit_code,
        stats=final_stats,
        bytes_written=writer.bytes_written if writer is not None else 0,
        stopped_by=stopped_by,
    )


def dump_process(pid: int, blocking: bool = False) -> dict[str, Any]:
    """Every thread's current stack, GIL and CPU state, read once."""
    result: dict[str, Any] = native().dump(pid, blocking)
    return result

