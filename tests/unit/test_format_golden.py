"""The golden recordings in tests/data/ decode to the content committed next to them.

A failure here means the reader (or the format) changed how committed files read. If that is
deliberate, regenerate with `python tests/data/make_golden.py` and review the diff; the test
never regenerates them.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from format_helpers import read_file
from psrec.format import _constants as C
from psrec.format import native_available

DATA = Path(__file__).resolve().parent.parent / "data"
NAMES = ["two_threads", "deep_stack", "no_trailer"]

pytestmark = pytest.mark.skipif(
    not native_available(), reason="the native codec (psrec.format._format) is not built"
)


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("make_golden", DATA / "make_golden.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", NAMES)
def test_golden_file_decodes_to_committed_content(name: str) -> None:
    path = DATA / f"{name}.psr"
    want = json.loads((DATA / f"{name}.json").read_text())
    got = json.loads(json.dumps(_generator().expected(path)))
    assert got == want


@pytest.mark.parametrize("name", NAMES)
def test_golden_file_reads_the_same_with_the_reference_decoder(name: str) -> None:
    path = DATA / f"{name}.psr"
    assert read_file(path, native=True)["samples"] == read_file(path, native=False)["samples"]


def test_golden_facts() -> None:
    """A few facts about the golden files, stated by hand rather than by the generator."""
    two = read_file(DATA / "two_threads.psr")
    assert two["clean"] and not two["warnings"]
    assert len(two["samples"]) == 10  # 6 passes x main thread + 4 worker (1 error, exited)
    assert {t.name for t in two["defs"].threads.values()} == {"MainThread", "Thread-1"}
    # The pass after a 6 ms gap weighs the 4-interval cap; the first pass weighs one interval.
    assert sorted({s[5] for s in two["samples"]}) == [1000, 4000]

    deep = read_file(DATA / "deep_stack.psr")
    first = deep["samples"][0][2]
    assert len(first) == C.MAX_DEPTH and first[0] == C.TRUNCATED_FRAME
    assert len(deep["samples"][1][2]) == 2

    cut = read_file(DATA / "no_trailer.psr")
    assert not cut["clean"] and any("truncated" in w for w in cut["warnings"])
    assert [s[0] for s in cut["samples"]] == [1000, 2000]
