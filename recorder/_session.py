"""One recording from start to end: the target launched or attached to, sampled natively while
a writer thread writes the sealed chunks, stopped by the target's end, a limit or a signal, and
the file closed with its statistics.

record() (in _api.py) runs a Session's steps in order; each step is a method here. Ctrl-C,
SIGTERM and SIGHUP are caught from before the output exists and only noted, so that a recording
ended at any point is closed cleanly; a recorder killed outright leaves chunks a reader recovers.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import threading
import time
from types import FrameType, ModuleType
from typing import Any, TextIO

from psrec.format import PsrWriter
from psrec.format.errors import PsrecError
from psrec.format.version import psrec_version
from psrec.format.writer import Retention

from ._children import Guard, end_marked
from ._launch import Waiting, exit_status, launch, stop_child
from ._options import RecordOptions, RecordResult, window_name
from ._output import to_stdout
from ._status import StatusLine
from .errors import RecorderError

__all__ = ["Session"]

# The sampler's figures that the trailer (STATS chunk) names otherwise (spec section 2).
_TRAILER_NAMES = {"elapsed_ns": "duration_ns", "sampling_cpu_ns": "sampler_cpu_ns"}
# How a recording that stopped on its own leaves a launched program: running on (a program
# that is not Python, or exec'd one, or whose recording reached the most threads a file
# holds; after --duration until the file is closed), rather than waited for at once.
_RUNS_ON = ("duration", "not_python", "exec", "write_error", "thread_limit")

# The sampler's timestamps count microseconds (Sampler::ticks): the files' tick_ns.
SAMPLER_TICK_NS = 1000


class Session:
    """A recording of one target into opts.output, run step by step by record()."""

    def __init__(self, opts: RecordOptions, stream: TextIO, rec: ModuleType) -> None:
        self.opts = opts
        self.stream = stream  # where messages and the status line go
        self.rec = rec  # the native recorder
        self.interval_ns = max(1000, int(round(1e9 / opts.rate_hz)))
        # the target
        self.child: subprocess.Popen[bytes] | None = None  # a launched program
        self.guard: Guard | None = None  # ends what the launched program started
        self.pid = 0
        self.command: list[str] = []
        self.exit_code: int | None = None
        # the recording
        self.sampler: Any = None
        self.created_wall_ns = self.created_mono_ns = 0
        self.writer: PsrWriter | None = None
        # the files written: one, or with --window one a window (the current one last)
        self.files: list[str] = [opts.output]
        self.window_end: float | None = None  # in ticks, once the first chunk came
        # --window: the windows (numbers) whose passes the current file holds, first and last
        # (more than one where the next window's file could not be created), and the window
        # whose file is due but not created yet (its number and name), tried at each chunk.
        self.held: list[int] = [0, 0]
        self.window_due: tuple[int, str] | None = None
        self.window_said = -1  # the last window whose file was said not to be created
        self.rewrite_said = False  # a flight recording's failed rewrite was said (until one works)
        self.stats_before: dict[str, Any] = {}  # the sampler's figures when the file began
        # the sampler's figures when the last chunk written was sealed (a window's end)
        self.sealed_stats: dict[str, Any] = {}
        self.write_error: list[BaseException] = []
        self.writer_thread = threading.Thread(target=self._write_loop, name="psrec-writer",
                                              daemon=True)
        self.status = StatusLine(stream, stream.isatty() and not opts.quiet)
        self.stopped_by = "exit"
        # signals: "interrupt" or "terminate" once one asked the recording to end
        self.stop_request: str | None = None
        self.stop_signal = ""  # the name of the signal that asked it
        self.old_handlers: dict[int, Any] = {}
        self.snapshots_asked = self.snapshots_taken = 0  # SIGUSR1
        self.snapshot_asked_ns = 0  # CLOCK_MONOTONIC of the last SIGUSR1
        self.written_ts = -1  # the last pass of the chunks written so far (ticks)
        self.metadata: dict[str, Any] = {}  # the recording's METADATA (a window's adds `part`)

    # -- the target ----------------------------------------------------------------------
    def start_target(self) -> None:
        """Launches opts.command, or takes opts.pid."""
        opts = self.opts
        if not opts.command:
            assert opts.pid is not None
            self.pid = opts.pid
            return
        # What costs time once is done before the program starts, so that psrec is quiet while
        # the program's first milliseconds are recorded: the package's version (for the file's
        # metadata) and the kernel's context-switch hooks.
        psrec_version()
        if opts.cpu_source != "procfs":
            self.rec.prepare_switch_events()
        self.child, self.guard, self.command = launch(opts.command, to_stdout(opts.output))
        self.pid = self.child.pid

    def start_sampler(self) -> None:
        """The native sampler on the target (not sampling yet); a launched program is stopped
        when it cannot be made."""
        opts = self.opts
        self.created_wall_ns = time.time_ns()
        self.created_mono_ns = time.monotonic_ns()
        try:
            self.sampler = self.rec.Sampler(
                self.pid, self.interval_ns, self.created_mono_ns,
                launched=self.child is not None, window_ticks=self._window_ticks(),
                **opts.sampler_config(), **_test_limits())
        except BaseException:
            if self.child is not None:
                stop_child(self.child)
            raise

    def name_target(self) -> None:
        """The command line of a process attached to (a launched one has its own)."""
        if not self.command:
            self.command = self.rec.command_line(self.pid).split()

    @property
    def _name(self) -> str:
        return os.path.basename(self.command[0])

    # -- signals -------------------------------------------------------------------------
    def catch_signals(self) -> None:
        """Ctrl-C, SIGTERM and SIGHUP are handled from before the output exists, and each only
        notes the request: the sampling loop ends at its next turn (within 0.1 s). Nothing is
        interrupted half done, so a recording ended at any point, even while its file is being
        opened, is closed cleanly. SIGHUP (the terminal psrec ran in was closed) is a request
        to end like SIGTERM: the default would kill psrec and leave the file unclosed, its last
        second lost."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            current = signal.getsignal(sig)
            # Under nohup (SIGHUP ignored) a closed terminal must not end the recording; a
            # caller's own Ctrl-C handler is left to the caller.
            if current is signal.SIG_IGN or (sig == signal.SIGINT
                                             and current is not signal.default_int_handler):
                continue
            self.old_handlers[sig] = signal.signal(sig, self._on_signal)
        # SIGUSR1: a snapshot of the file as it stands, beside it (see _snapshot). SIGUSR2:
        # the chunk being filled is sealed now (psrec snapshot asks so: spec section 7.3).
        for sig in (signal.SIGUSR1, signal.SIGUSR2):
            self.old_handlers[sig] = signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if signum in (signal.SIGUSR1, signal.SIGUSR2):
            if signum == signal.SIGUSR1:
                self.snapshots_asked += 1
                self.snapshot_asked_ns = time.monotonic_ns()
            if self.sampler is not None:
                self.sampler.seal_soon()
        elif self.stop_request is None:
            self.stop_request = "interrupt" if signum == signal.SIGINT else "terminate"
            self.stop_signal = signal.Signals(signum).name

    def _stopped(self) -> str | None:
        """Why an output being waited for (a FIFO no process reads yet) is given up: a signal
        asked the recording to end (None: none did). The wait tries again every 50 ms, so
        SIGINT, SIGTERM and SIGHUP end psrec then too."""
        return f"stopped by {self.stop_signal}" if self.stop_request is not None else None

    def _say(self, message: str) -> None:
        print(f"psrec: {message}", file=self.stream, flush=True)

    def restore_signals(self) -> None:
        for sig, handler in self.old_handlers.items():
            signal.signal(sig, handler)

    # -- the file ------------------------------------------------------------------------
    def _write_loop(self) -> None:
        """The writer thread: writes the chunks the sampler seals until it has no more; with
        --window, goes on in the next file at the first chunk of each window."""
        assert self.writer is not None
        try:
            while True:
                chunk = self.sampler.pop_chunk(200)
                if chunk is not None:
                    if self.opts.window_s is not None and chunk[1]:
                        self._next_window(chunk[2], chunk[6])
                    self.writer.write_sealed(*chunk[:7])
                    self._say_rewrites()
                    self.sealed_stats = chunk[7]
                    if chunk[5]:
                        self.written_ts = chunk[3]
                elif self.sampler.chunks_done():
                    return
                if self.snapshots_taken < self.snapshots_asked and self._snapshot_due():
                    self.snapshots_taken = self.snapshots_asked
                    self._snapshot()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.write_error.append(exc)

    def _say_rewrites(self) -> None:
        """A flight recording whose oldest chunks could not be dropped (its copy without them
        could not be made: the folder made unwritable, the disk full) grows past its bounds
        until a copy can be made, tried again at each chunk: said once in one line, and once
        more when it is back within them."""
        assert self.writer is not None
        failing = self.writer.rewrite_error is not None
        if failing and not self.rewrite_said:
            self.rewrite_said = True
            self._say(f"cannot drop the oldest chunks of {self.files[-1]} "
                      f"({self.writer.rewrite_error}): it grows past --keep/--max-size until "
                      "it can (psrec tries again at each chunk; free space or make the folder "
                      "writable)")
        elif self.rewrite_said and not failing:
            self.rewrite_said = False
            self._say(f"{self.files[-1]} is within --keep/--max-size again")

    def _snapshot_due(self) -> bool:
        """A snapshot asked for is taken once the chunk sealed after the request is written
        (it holds the samples up to the request), or after a second without one."""
        written_ns = self.created_mono_ns + self.written_ts * SAMPLER_TICK_NS
        return (self.written_ts >= 0 and written_ns + self.interval_ns >= self.snapshot_asked_ns) \
            or time.monotonic_ns() - self.snapshot_asked_ns > 1_000_000_000

    def _snapshot(self) -> None:
        """SIGUSR1: a closed copy of the file as it stands (psrec snapshot), written beside it
        as NAME.snapshot-TIME.psr (UTC), taken between two chunks; the recording goes on. The
        name is created new: one anything holds already (a file, a link, a FIFO) is said in
        one line, and no snapshot is written."""
        from psrec.format.writer import snapshot

        stem = self.files[-1][:-4] if self.files[-1].endswith(".psr") else self.files[-1]
        path = f"{stem}.snapshot-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.psr"
        try:
            chunks, samples = snapshot(self.files[-1], path, running=True, generated=True)
        except PsrecError as exc:  # the copy failed: the recording itself goes on
            print(f"psrec: snapshot not written: {exc}", file=self.stream)
            return
        print(f"psrec: wrote the snapshot {path} ({samples:,} samples)", file=self.stream)

    def _window_ticks(self) -> int:
        """--window's length in the sampler's ticks (0: no windows)."""
        if self.opts.window_s is None:
            return 0
        return max(1, round(self.opts.window_s * 1e9 / SAMPLER_TICK_NS))

    def _next_window(self, first_ts: int, epoch: int) -> None:
        """Closes the window's file and opens the next one's, once a chunk begins past its end
        (windows are counted from the recording's start; the sampler seals its chunk at each
        window's edge, so each file holds its window's samples exactly).

        A window's file that cannot be created (its folder not writable, its name taken by
        anything, the disk full) is said once, in one line, and the window goes on in the
        current file, which stays open: nothing recorded is lost. Its creation is tried again
        at each chunk, and at the next window's edge the next window's file is due instead.
        The STATS of a file give the windows it holds (spec 7.2)."""
        assert self.writer is not None and self.opts.window_s is not None
        window_ticks = self._window_ticks()
        number = first_ts // window_ticks
        if self.window_end is None:
            self.window_end = window_ticks * (number + 1)
            self.held = [number, number]
            return
        if first_ts >= self.window_end:
            self.window_end = window_ticks * (number + 1)
            self.window_due = (number, window_name(
                self.opts.output, number,
                self.created_wall_ns + int(first_ts * self.writer.header.tick_ns)))
        if self.window_due is None:
            return
        due, path = self.window_due
        before = self.stats_before
        try:
            self.writer.rotate(path, self._file_stats("window")[0], force=self.opts.force,
                               metadata=self._window_metadata(len(self.files), first_ts),
                               epoch=epoch)
        except PsrecError as exc:  # not created: nothing changed, the current file goes on
            self.stats_before = before
            self.held[1] = number
            if self.window_said != due:
                self.window_said = due
                self._say(f"{exc}; window {due}'s samples go on in {self.files[-1]} "
                          "(psrec tries again at each chunk)")
            return
        self.window_due = None
        self.held = [number, number]
        self.files.append(path)

    def _window_metadata(self, index: int, first_ts: int) -> dict[str, Any]:
        """The METADATA of window file `index`, whose first chunk begins at first_ts: the
        recording's, with `part` saying which window it holds (spec sections 2 and 7.2)."""
        assert self.opts.window_s is not None
        window_ticks = self._window_ticks()
        number = first_ts // window_ticks
        return {**self.metadata, "part": {
            "kind": "window", "file": index, "window": number, "of": self.opts.output,
            "from_s": number * window_ticks * SAMPLER_TICK_NS / 1e9,
            "to_s": (number + 1) * window_ticks * SAMPLER_TICK_NS / 1e9}}

    def _file_stats(self, stopped_by: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The STATS of the file being closed (the sampler's figures since the file began, with
        --window), and the recording's so far; both say why it ended."""
        def with_means(st: dict[str, Any]) -> dict[str, Any]:
            st["lateness_ns_mean"] = st["lateness_ns_total"] // max(1, st["passes"])
            st["sampling_ns_per_pass"] = st["sampling_ns_total"] // max(1, st["passes"])
            return st

        def named(st: dict[str, Any]) -> dict[str, Any]:
            return {_TRAILER_NAMES.get(k, k): v for k, v in st.items() if k != "finished"}

        now = named(self.sampler.stats())
        stats = dict(now)
        if self.opts.window_s is not None:
            # A window closed as the next one's first chunk comes counts up to the seal of its
            # own last chunk: what the sampler counted since belongs to the chunks after it.
            upto = named(self.sealed_stats) if stopped_by == "window" and self.sealed_stats \
                else now
            for k, v in upto.items():
                stats[k] = v
                if isinstance(v, int) and not isinstance(v, bool) and k in self.stats_before:
                    stats[k] = v - self.stats_before[k]
            self.stats_before = dict(upto)
            assert self.writer is not None
            stats["passes"], stats["samples"] = self.writer.passes, self.writer.samples
            stats["windows"] = list(self.held)
        with_means(now)
        with_means(stats)
        if self.writer is not None and self.writer.rewrite_failures:
            stats["rewrite_failures"] = now["rewrite_failures"] = self.writer.rewrite_failures
        if self.writer is not None and self.writer.dropped_chunks:
            stats["dropped_chunks"] = self.writer.dropped_chunks
            stats["dropped_samples"] = self.writer.dropped_samples
            now.update(dropped_chunks=self.writer.dropped_chunks,
                       dropped_samples=self.writer.dropped_samples)
        stats["stopped_by"] = now["stopped_by"] = stopped_by
        return stats, now

    def _open_file(self, info: dict[str, Any]) -> None:
        """Opens the output, once the target runs Python (info: what the sampler found in
        it), and starts the writer thread."""
        if info["layout_warning"]:
            print(f"psrec: warning: {info['layout_warning']}", file=self.stream)
        try:
            if self.opts.window_s is not None:
                self.files[0] = window_name(self.opts.output, 0, self.created_wall_ns)
            self.metadata = _metadata(info, self.opts, self.pid, self.command, self.interval_ns)
            self.writer = PsrWriter(
                self.files[0],
                # (the first window: the one sampling begins in, now)
                metadata=(self._window_metadata(0, (time.monotonic_ns() - self.created_mono_ns)
                                                // SAMPLER_TICK_NS)
                          if self.opts.window_s is not None else self.metadata),
                created_wall_ns=self.created_wall_ns,
                created_mono_ns=self.created_mono_ns,
                tick_ns=SAMPLER_TICK_NS,
                # checked before anything started; created new now (open_output), so that
                # nothing put at the name meanwhile is written to or, without --force, replaced
                force=self.opts.force,
                generated=self.opts.window_s is not None,
                stopped=self._stopped,
                waiting=self._say,
                retention=(Retention(self.opts.keep_s, self.opts.max_bytes)
                           if self.opts.keep_s is not None or self.opts.max_bytes is not None
                           else None),
                new_epoch=self.sampler.new_epoch,
            )
        except PsrecError:
            raise  # said already (some are OSErrors too: OutputExistsError)
        except OSError as exc:
            raise RecorderError(f"cannot write {self.files[-1]}: {exc.strerror or exc}",
                                help=_write_help(exc)) from None
        self.writer_thread.start()

    # -- sampling ------------------------------------------------------------------------
    def sample(self) -> None:
        """Samples until the target ends, a limit is reached, or Ctrl-C, SIGTERM or SIGHUP
        stops it; sets stopped_by. On an error, stops the sampler and the program, restores
        the signals and raises."""
        waiting = (Waiting(self.opts, self.child, self.stream, self._name)
                   if self.child is not None else None)
        start = time.monotonic()
        self.sampler.start()
        try:
            self.stopped_by = self._loop(waiting, start)
            if self.stopped_by == "terminate":
                if self.child is not None and self.child.poll() is None:
                    self.child.terminate()
                if self.guard is not None:  # and what it started, as if psrec had died
                    end_marked(self.guard.token)
            if self.write_error and self.child is not None and self.child.poll() is None:
                print(f"psrec: writing {self.files[-1]} failed ({_why(self.write_error[0])}): "
                      f"recording stopped; waiting for {self._name} to exit (Ctrl-C stops it)",
                      file=self.stream)
            state = self.sampler.state()
            stats = self.sampler.stats()
            if stats["pass_errors"] and stats["pass_errors"] * 100 >= stats["passes"]:
                print(f"psrec: {stats['pass_errors']:,} of {stats['passes']:,} passes could "
                      f"not read {self._name}'s interpreter or thread list: no sample was "
                      f"taken in them (psrec info shows what the file holds)",
                      file=self.stream)
            for said in state["native_replaced"]:
                print(f"psrec: --native: {said}", file=self.stream)
            if state["capture_refusal"] and not state["native_refusal"]:
                print(f"psrec: --native: the kernel cannot copy the Python frames with the "
                      f"native ones ({state['capture_refusal']}): running threads are paired "
                      f"by stopping them, within a budget, or marked", file=self.stream)
            if state["native_refusal"]:
                print(f"psrec: --native: {state['native_refusal']}; native frames were read "
                      f"only where a thread was blocked in a system call",
                      file=self.stream)
            if state["stop_reason"] and self.stopped_by not in ("interrupt", "terminate"):
                self.stopped_by = "thread_limit" if state["threads_full"] else "exec"
                print(f"psrec: {state['stop_reason']}", file=self.stream)
        except KeyboardInterrupt:  # Ctrl-C where a caller keeps its own handler
            self.stopped_by = "interrupt"
        except BaseException:
            self.sampler.stop()
            if self.child is not None:
                stop_child(self.child)
            self.restore_signals()
            raise

    def _loop(self, waiting: Waiting | None, start: float) -> str:
        """The progress loop: opens the file once the target runs Python, redraws the status
        line, and returns why it stopped."""
        opts, sampler = self.opts, self.sampler
        while True:
            if self.stop_request is not None:
                return self.stop_request
            if self.writer is None:
                info = sampler.target_info()
                if info is not None:
                    self._open_file(info)
                elif waiting is not None and not waiting.check(sampler.state()):
                    return "not_python"
            if sampler.wait(0.1 if self.writer is not None else 0.02):
                return "exit"
            if self.write_error:
                return "write_error"
            if opts.duration is not None and time.monotonic() - start >= opts.duration:
                return "duration"
            if self.writer is not None:
                self.status.update(sampler.stats(), self.writer.bytes_written)

    def stop_sampling(self) -> None:
        """Stops the sampler (a Python process found in its last moments still gets its
        file) and restores the signals."""
        try:
            self.sampler.stop()
            if self.writer is None:
                info = self.sampler.target_info()
                if info is not None:
                    self._open_file(info)
        finally:
            self.restore_signals()

    def wait_program(self) -> None:
        """A launched program's exit status, when it is ending. After Ctrl-C the program got
        the SIGINT too (same process group) and should be ending; after --duration it keeps
        running and is waited for once the file is closed; a program that is not Python, or
        that exec'd one, runs on, as does one whose recording reached the most threads a file
        holds."""
        child = self.child
        if child is None or self.stopped_by in _RUNS_ON:
            return
        try:
            child.wait(10 if self.stopped_by != "exit" else None)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        self.exit_code = exit_status(child.returncode)

    def close_file(self) -> dict[str, Any]:
        """Ends the sampler, waits for the writer thread to write every chunk, and closes the
        file with its statistics (abandons it after a write error). Returns the statistics."""
        self.sampler.finish(self.exit_code)
        writer = self.writer
        if writer is None:
            return {}
        if self.writer_thread.ident is None:  # stopped between opening the file and starting it
            self.writer_thread.start()
        self.writer_thread.join()
        self.status.clear()
        # Every figure the sampler keeps (one list: PSREC_SAMPLER_STATS in
        # recorder/native/sampler/sampler.hpp), two under the names the spec gives them, and means.
        file_stats, final_stats = self._file_stats(self.stopped_by)
        if self.exit_code is not None:
            file_stats["exit_code"] = final_stats["exit_code"] = self.exit_code
        if self.write_error:
            writer.abandon()
        else:
            writer.close(file_stats)
        return final_stats

    def result(self, stats: dict[str, Any]) -> RecordResult:
        """What the recording gave: raises a write error; waits for a launched program still
        running; releases its guard."""
        child = self.child
        if self.write_error:
            err = self.write_error[0]
            if isinstance(err, PsrecError):
                raise err
            if child is not None:
                exit_status(child.wait())
            raise RecorderError(
                f"writing {self.files[-1]} failed: {_why(err)}; the file keeps every chunk "
                "written whole", help=_write_help(err)) from err
        if child is not None and self.exit_code is None:
            if self.stopped_by == "duration" and child.poll() is None:
                # The program was launched to be recorded, not to be cut short: it runs on, and
                # psrec returns its exit status. Said, so that a server does not look hung.
                print(f"psrec: --duration {self.opts.duration:g} s reached: recording stopped; "
                      f"waiting for {self._name} to exit (Ctrl-C stops it)", file=self.stream)
            self.exit_code = exit_status(child.wait())
        if self.writer is None and self.stopped_by == "exit" and child is not None:
            print(f"psrec: {self._name} exited with status {self.exit_code} before "
                  "psrec found Python in it"
                  + (" or its children" if self.opts.subprocesses else "") + ": nothing recorded",
                  file=self.stream)
            self.stopped_by = "not_python"
        if self.guard is not None:
            self.guard.release()
        return RecordResult(
            output=self.files[-1],
            files=list(self.files),
            pid=self.pid,
            exit_code=self.exit_code,
            stats=stats,
            bytes_written=self.writer.bytes_written if self.writer is not None else 0,
            stopped_by=self.stopped_by,
        )


def _test_limits() -> dict[str, int]:
    """Limits lowered for tests of what happens at them (PSREC_TEST_MAX_THREADS: the threads a
    recording names, 2^24 otherwise, which a test cannot reach)."""
    value = os.environ.get("PSREC_TEST_MAX_THREADS")
    return {"max_threads": int(value)} if value else {}


def _metadata(info: dict[str, Any], opts: RecordOptions, pid: int, command: list[str],
              interval_ns: int) -> dict[str, Any]:
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
        # The options asked for (RECORD_OPTIONS' metadata: blocking; native, native frames in
        # the stacks, FUNCTION kind 1 and 2, spec 3.1 and 10; subprocesses; duration;
        # cpu_source; tasks, the asyncio task each thread ran, TASK and PASS_TASKS, spec 3.1
        # and 4; task_rate_hz, how often at most every task's state, TASK_SNAPSHOT, spec 4.3,
        # was read), and what the recording found.
        "options": {
            **opts.metadata(),
            "mode": "launch" if opts.command else "attach",
            # threading's names (Thread.name); the kernel's (/proc/PID/task/TID/comm) for
            # threads threading does not know
            "thread_names": "python",
            # GIL_REQUESTED is known where the target's layout has a thread's own field for it
            # (3.15+ with a GIL)
            "gil_requested": info["gil_requested_known"],
        },
    }


def _why(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)) or \
        type(exc).__name__


def _write_help(exc: BaseException) -> str | None:
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "free some space, or record to another disk with -o"
    return None
