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
