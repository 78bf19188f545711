"""speedscope export: schema validation, the checks the schema cannot make, time order, weights."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from analyzer_synth import BUSY, F_A, F_B, MAIN, Synth, two_thread_recording
from click.testing import CliRunner
from psrec.analyzer.speedscope import check_consistency
from psrec.cli import main

REPO = Path(__file__).resolve().parents[2]
SCHEMA_CANDIDATES = [
    REPO.parent / "shared" / "speedscope" / "file-format-schema.json",
    Path(os.environ.get("PSREC_SPEEDSCOPE_DIR", "/nonexistent"))
    / "dist/release/file-format-schema.json",
    Path(os.environ.get("PSREC_E2E_CACHE", "/tmp/psrec-e2e-cache"))
    / "node_modules/speedscope/dist/release/file-format-schema.json",
]


def load_schema() -> dict[str, Any]:
    for p in SCHEMA_CANDIDATES:
        if p.is_file():
            return json.loads(p.read_text())  # type: ignore[no-any-return]
    pytest.skip("speedscope's file-format-schema.json is neither in ../shared/speedscope nor in "
                "an npm install of speedscope@1.25.0 (set PSREC_E2E_CACHE to its folder)")


def export(path: str, *args: str) -> dict[str, Any]:
    out = path + f".{abs(hash(args))}.speedscope.json"
    r = CliRunner().invoke(main, ["export", "--speedscope", path, "-o", out, "--force", *args])
    assert r.exit_code == 0, r.stderr
    return json.loads(Path(out).read_text())  # type: ignore[no-any-return]


def validate(doc: dict[str, Any]) -> None:
    import jsonschema

    jsonschema.validate(doc, load_schema())
    assert check_consistency(doc) == []


@pytest.fixture(scope="module")
def rec(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return two_thread_recording(str(tmp_path_factory.mktemp("ss") / "run.psr"))


def expand(doc: dict[str, Any], profile: dict[str, Any]) -> list[tuple[str, ...]]:
    frames = doc["shared"]["frames"]
    return [tuple(frames[i]["name"] for i in s) for s in profile["samples"]]


def test_schema_and_consistency(rec: Synth) -> None:
    doc = export(rec.path)
    validate(doc)
    assert [p["name"] for p in doc["profiles"]] == ["MainThread (tid 100)", "worker (tid 101)"]
    assert all(p["unit"] == "microseconds" for p in doc["profiles"])
    frames = doc["shared"]["frames"]
    assert {"name": "parse2", "file": "lib.py", "line": 30} in frames


def test_weights_per_thread_sum_to_recorded_time(rec: Synth) -> None:
    doc = export(rec.path)
    for p in doc["profiles"]:
        thread = p["name"].split(" ")[0]
        assert sum(p["weights"]) == sum(x.weight for x in rec.samples if x.thread == thread)


def test_samples_are_in_time_order(rec: Synth) -> None:
    doc = export(rec.path, "--by", "line")
    main_profile = doc["profiles"][0]
    want: list[tuple[str, ...]] = []
    want_w: list[int] = []
    for x in rec.samples:  # merge consecutive equal stacks, as the exporter may
        if x.thread != "MainThread":
            continue
        stack = tuple(f[1] for f in x.stack)
        line = x.stack[-1][2]
        if want and want[-1] == (stack, line):  # type: ignore[comparison-overlap]
            want_w[-1] += x.weight
        else:
            want.append((stack, line))  # type: ignore[arg-type]
            want_w.append(x.weight)
    frames = doc["shared"]["frames"]
    got = [(tuple(frames[i]["name"] for i in s), frames[s[-1]]["line"])
           for s in main_profile["samples"]]
    assert got == want
    assert main_profile["weights"] == want_w


def test_views_apply_to_export(tmp_path: Path) -> None:
    s = Synth(str(tmp_path / "v.psr"))
    s.thread("busy", 1)
    s.thread("sleepy", 2)
    for i in range(1, 501):
        s.sample_pass(i * 1000, {"busy": ((MAIN, F_A if i % 3 else F_B), BUSY, 700),
                                 "sleepy": ((MAIN, ("t.py", "sleep", 5)), 0, 0)})
    s.close()
    wall = export(s.path)
    validate(wall)
    assert len(wall["profiles"]) == 2
    cpu = export(s.path, "--mode", "cpu")
    validate(cpu)
    assert [p["name"] for p in cpu["profiles"]] == ["busy (tid 1)"]
    assert sum(cpu["profiles"][0]["weights"]) == 500 * 700  # CPU time, not wall time
    window = export(s.path, "--from", "0.1", "--to", "0.2", "--thread", "sleepy")
    validate(window)
    assert sum(window["profiles"][0]["weights"]) == 100 * 1000


def test_truncated_and_empty_stacks_render(tmp_path: Path) -> None:
    s = Synth(str(tmp_path / "t.psr"))
    s.thread("MainThread", 1)
    deep = tuple(("deep.py", "recurse", 10 + i % 3) for i in range(9000))  # beyond MAX_DEPTH
    for i in range(1, 11):
        s.sample_pass(i * 1000, {"MainThread": (deep if i % 2 else (), BUSY, 0)})
    s.close()
    doc = export(s.path)
    validate(doc)
    names = {f["name"] for f in doc["shared"]["frames"]}
    assert "[truncated stack]" in names and "[no Python stack]" in names
    depth = max(len(x) for x in doc["profiles"][0]["samples"])
    assert depth == 8192


def test_consistency_check_catches_problems() -> None:
    doc = {"shared": {"frames": [{"name": "a"}]},
           "profiles": [{"type": "sampled", "name": "t", "unit": "none", "startValue": 0,
                         "endValue": 3, "samples": [[0], [1]], "weights": [1]}]}
    problems = check_consistency(doc)
    assert any("samples but" in p for p in problems)
    assert any("out of range" in p for p in problems)
    assert any("endValue" in p for p in problems)


def test_pure_python_path_exports_the_same(tmp_path: Path) -> None:
    import io

    from psrec.analyzer.profile import Profile, View
    from psrec.analyzer.speedscope import SpeedscopeExporter

    s = two_thread_recording(str(tmp_path / "p.psr"), passes=300)
    docs = []
    for native in (True, False):
        p = Profile.load(s.path, View(), timelines=True, native=native)
        buf = io.StringIO()
        SpeedscopeExporter().write(p, buf)
        docs.append(json.loads(buf.getvalue()))
    assert docs[0] == docs[1]
    validate(docs[1])




def expected_function_runs(rec: Synth, thread: str) -> tuple[list[tuple[str, ...]], list[int]]:
    stacks: list[tuple[str, ...]] = []
    weights: list[int] = []
    for x in rec.samples:
        if x.thread != thread:
            continue
        names = tuple(f[1] for f in x.stack)
        if stacks and stacks[-1] == names:
            weights[-1] += x.weight
        else:
            stacks.append(names)
            weights.append(x.weight)
    return stacks, weights


def test_by_function_merges_runs_of_the_same_function(rec: Synth) -> None:
    doc = export(rec.path, "--thread", "MainThread")
    validate(doc)
    want_stacks, want_weights = expected_function_runs(rec, "MainThread")
    profile = doc["profiles"][0]
    assert expand(doc, profile) == want_stacks  # compute's two lines are one stack
    assert profile["weights"] == want_weights
