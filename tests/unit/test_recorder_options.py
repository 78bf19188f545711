"""Rate parsing for `psrec record -r` (no native recorder needed)."""

from __future__ import annotations

import pytest
from psrec.recorder._api import MAX_RATE_HZ, parse_rate
from psrec.recorder.errors import RecorderError


@pytest.mark.parametrize(
    ("text", "hz"),
    [
        ("1000", 1000.0),
        ("10k", 10000.0),
        ("10khz", 10000.0),
        ("250Hz", 250.0),
        ("1.5k", 1500.0),
        ("max", MAX_RATE_HZ),
        (" MAX ", MAX_RATE_HZ),
        (100, 100.0),
    ],
)
def test_rates(text: str | int, hz: float) -> None:
    assert parse_rate(text) == hz


@pytest.mark.parametrize("text", ["0", "200k", "fast", "-5", ""])
def test_bad_rates(text: str) -> None:
    with pytest.raises(RecorderError):
        parse_rate(text)


@pytest.mark.parametrize("text", ["max", "0", "abc", "200k"])
def test_bad_task_rates_are_one_line_that_says_what_to_give(text: str) -> None:
    """`psrec record --task-rate`: a rate as -r reads one, but not `max`; the error names the
    option, not -r's words."""
    from psrec.recorder._options import parse_task_rate
    from psrec.recorder.errors import RecorderUsageError

    with pytest.raises(RecorderUsageError) as exc:
        parse_task_rate(text)
    assert str(exc.value) == f"--task-rate {text!r} is not a rate"
    assert "--task-rate 1k" in (exc.value.help or "")


def test_task_rate_defaults_to_the_sampling_rate_at_most_1_khz() -> None:
    from psrec.recorder._options import RecordOptions
    from psrec.recorder._options import parse_task_rate as _task_rate

    assert RecordOptions(output="x", rate_hz=100.0).task_rate == 100.0
    assert RecordOptions(output="x", rate_hz=10_000.0).task_rate == 1000.0
    assert RecordOptions(output="x", rate_hz=10_000.0, task_rate_hz=5.0).task_rate == 5.0
    assert _task_rate("2k") == 2000.0


@pytest.mark.parametrize(("text", "seconds"), [("90", 90.0), ("20s", 20.0), ("10m", 600.0),
                                               ("1h", 3600.0), ("1.5min", 90.0),
                                               ("1500ms", 1.5)])
def test_durations_of_keep_and_window(text: str, seconds: float) -> None:
    from psrec.recorder._options import parse_duration

    assert parse_duration("--keep", text) == seconds


@pytest.mark.parametrize(("text", "size"), [("200M", 200 << 20), ("1G", 1 << 30),
                                            ("64k", 64 << 10), ("100000", 100000)])
def test_sizes_of_max_size(text: str, size: int) -> None:
    from psrec.recorder._options import parse_size

    assert parse_size("--max-size", text) == size


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--keep", "0"], "--keep '0' is not a duration of 1 s or more"),
        (["--keep", "soon"], "--keep 'soon' is not a duration of 1 s or more"),
        (["--max-size", "1k"], "--max-size '1k' is not a size of 64 KiB or more"),
        (["--window", "10s"], "--window: the output 'run.psr' names one file"),
        (["--window", "10s", "--keep", "1m", "-o", "r-{n}.psr"],
         "--window cannot be given with --keep or --max-size"),
    ],
)
def test_bad_bounds_are_one_line_and_usage_errors(args: list[str], message: str,
                                                  tmp_path: object) -> None:
    """Wrong --keep, --max-size or --window: exit status 2 and one line that says what to
    give, before any target is looked at (pid 1 is never attached to here)."""
    import subprocess
    import sys

    argv = [sys.executable, "-m", "psrec", "record", "-o", "run.psr", *args, "1"]
    r = subprocess.run(argv, capture_output=True, text=True, cwd=str(tmp_path), timeout=60)
    assert r.returncode == 2, r.stderr
    assert f"psrec: error: {message}" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) <= 2


def test_a_flight_recording_is_a_file_not_a_stream(tmp_path: object) -> None:
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "psrec", "record", "-o", "-", "--keep", "10s",
                        "1"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert "psrec: error: - is a stream: --keep, --max-size and --window write files" \
        in r.stderr, r.stderr


def test_record_options_are_declared_once() -> None:
    """RECORD_OPTIONS is the one declaration of `psrec record`'s options: each RecordOptions
    field a user sets is set by exactly one of them, `psrec record` takes exactly those (and
    no other option), and what they hand the native Sampler are keywords it takes (its stub,
    which test_native_stubs keeps to the build)."""
    import ast
    import dataclasses
    from pathlib import Path

    import psrec.recorder
    from psrec.recorder._options import RECORD_OPTIONS, RecordOptions
    from psrec.recorder.cli import record

    fields = {f.name for f in dataclasses.fields(RecordOptions)}
    set_by = [o.field for o in RECORD_OPTIONS if o.field]
    assert len(set_by) == len(set(set_by)), set_by
    # pid and command come from TARGET; attach_timeout is the API's alone.
    assert fields - set(set_by) == {"pid", "command", "attach_timeout"}
    assert set(set_by) <= fields
    options = [p for p in record.params if isinstance(p, __import__("click").Option)]
    declared = [tuple(n for d in o.decls for n in d.split("/")) for o in RECORD_OPTIONS]
    assert [tuple(p.opts + p.secondary_opts) for p in options if p.name != "help"] == declared
    stub = Path(psrec.recorder.__file__).with_name("_recorder.pyi")
    if not stub.exists():
        pytest.skip("the native recorder's stub is not beside the package here")
    tree = ast.parse(stub.read_text())
    init = next(f for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "Sampler"
                for f in c.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    takes = {a.arg for a in init.args.args}
    given = RecordOptions(output="x").sampler_config()
    assert set(given) <= takes, set(given) - takes
    assert set(given) >= {"blocking", "subprocesses", "realtime", "cpu_switches", "native",
                          "frame_cache", "tasks", "task_interval_ns"}
