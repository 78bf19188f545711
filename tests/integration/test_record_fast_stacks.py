"""Stacks that change faster than they can be read, recorded on every interpreter found: the
samples are kept (read from the kernel's copy of the frames at the thread's latest perf
sample where BPF is permitted, else again, else with the thread held still: spec section 10,
rule 7), and none is a stack the program cannot have."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import psrec
import pytest
from rec_live import psrec as run_psrec
from rec_live import python_params, record, target

pytestmark = [pytest.mark.live, pytest.mark.timeout(300)]


def stats(path: Path) -> dict[str, Any]:
    r = run_psrec("info", "--json", str(path))
    assert r.returncode == 0, r.stderr
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc["stats"]


@pytest.mark.parametrize("python", python_params())
def test_a_recursion_that_changes_at_every_call_keeps_its_samples(python: str,
                                                                  tmp_path: Path) -> None:
    """rec_recursive.py: a recursion to a random depth of 1 to 20, in a tight loop, on the
    main thread. At 1 kHz at least 99 % of the passes' samples are kept, and every stack is
    <module>, main, then up to 20 descend frames (or a call of the random generator)."""
    path = tmp_path / "recursive.psr"
    with target(python, "rec_recursive.py") as t:
        record(path, t.pid, "-r", "1000", duration=2.0)
    st = stats(path)
    assert st["sample_errors"] <= 0.01 * (st["samples"] + st["sample_errors"]), st
    run = psrec.load(str(path))
    bad: Counter[tuple[str, ...]] = Counter()
    for sid in run.samples.stack:
        names = [f.function.name for f in run.stack(sid)]
        descend = [n for n in names if n == "descend"]
        if names[:2] != ["<module>", "main"] or len(descend) > 20 or (
                descend and names[2:] != descend):
            bad[tuple(names)] += 1
    assert not bad, bad.most_common(3)
