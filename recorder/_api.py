"""Recording sessions: attach or launch, sample natively, write chunks on a writer thread.

record() runs a Session (_session.py) through its steps; the options and result are in
_options.py, the checks on the output in _output.py, the launched program in _launch.py and
the status line in _status.py. The names other parts import are all here.
"""

from __future__ import annotations

import sys
import time
from types import ModuleType
from typing import Any, TextIO

from ._options import MAX_RATE_HZ as MAX_RATE_HZ  # the fastest rate, for psrec.recorder.cli
from ._options import RecordOptions, RecordResult, parse_rate, window_name
from ._output import check_output
from ._session import Session
from .errors import NativeRecorderMissingError

__all__ = ["RecordOptions", "RecordResult", "record", "dump_process", "parse_rate"]


def native() -> ModuleType:
    try:
        from . import _recorder
    except ImportError as exc:
        raise NativeRecorderMissingError(f"the native recorder cannot be loaded: {exc}") from None
    return _recorder


def record(opts: RecordOptions, *, stream: TextIO | None = None) -> RecordResult:
    """Records a process (opts.pid) or a launched command (opts.command) into opts.output.

    A launched program is recorded once it runs Python; until then (and after it execs a
    program that is not Python) it is watched. When no Python process was recorded there is
    no file, and the result says so (``stopped_by`` "not_python")."""
    stream = stream or sys.stderr
    rec = native()
    first = opts.output
    if opts.window_s is not None:
        first = window_name(opts.output, 0, time.time_ns())
    bounded = opts.window_s is not None or opts.keep_s is not None or opts.max_bytes is not None
    check_output(first, opts.force, needs_file=bounded)  # before anything is started
    session = Session(opts, stream, rec)
    session.start_target()
    session.start_sampler()
    session.catch_signals()
    session.name_target()
    session.sample()
    session.stop_sampling()
    session.wait_program()
    stats = session.close_file()
    return session.result(stats)


def dump_process(pid: int, blocking: bool = False) -> dict[str, Any]:
    """Every thread's current stack, GIL and CPU state, read once."""
    result: dict[str, Any] = native().dump(pid, blocking)
    return result
