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
    from psrec.recorder.cli import _task_rate
    from psrec.recorder.errors import RecorderUsageError

    with pytest.raises(RecorderUsageError) as exc:
        _task_rate(text)
    assert str(exc.value) == f"--task-rate {text!r} is not a rate"
    assert "--task-rate 1k" in (exc.value.help or "")


def test_task_rate_defaults_to_the_sampling_rate_at_most_1_khz() -> None:
    from psrec.recorder._options import RecordOptions
    from psrec.recorder.cli import _task_rate

    assert RecordOptions(output="x", rate_hz=100.0).task_rate == 100.0
    assert RecordOptions(output="x", rate_hz=10_000.0).task_rate == 1000.0
    assert RecordOptions(output="x", rate_hz=10_000.0, task_rate_hz=5.0).task_rate == 5.0
    assert _task_rate("2k") == 2000.0
