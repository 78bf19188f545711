"""`psrec export --pprof`: the profile.proto it writes (read back with the generated classes)
holds every sample of the view once, with its wall and CPU time, its thread, GIL and CPU
labels, its stack as lines of functions, and the recording's time span; --window splits it
into one profile per window. (go tool pprof reads it in tests/e2e/test_pprof_go.py.)"""

from __future__ import annotations

import gzip
import re
from collections import Counter
from pathlib import Path

import pytest
from analyzer_synth import BUSY, MAIN, WALL_NS, Synth, two_thread_recording
from click.testing import CliRunner
from psrec.cli import main

pb = pytest.importorskip("psrec.analyzer.proto.profile_pb2",
                         reason="the protobuf package (>= 7.35, Python 3.10+) is not installed")
PROTO = Path(__file__).resolve().parents[2] / "analyzer" / "proto" / "profile.proto"


def _export(path: str, *args: str) -> tuple[object, list[str]]:
    r = CliRunner().invoke(main, ["export", "--pprof", path, *args])
    assert r.exit_code == 0, r.output
    out = args[args.index("-o") + 1] if "-o" in args else path.removesuffix(".psr") + ".pb.gz"
    prof = pb.Profile()
    prof.ParseFromString(gzip.decompress(Path(out).read_bytes()))
    return prof, list(prof.string_table)


def _by(prof: object, st: list[str]) -> Counter[tuple[str, ...]]:
    """Sample counts by (thread, gil, cpu, innermost function, its line)."""
    funcs = {f.id: f for f in prof.function}
    locs = {loc.id: loc for loc in prof.location}
    out: Counter[tuple[str, ...]] = Counter()
    for s in prof.sample:
        labels = {st[lb.key]: st[lb.str] for lb in s.label if lb.str}
        line = locs[s.location_id[0]].line[0]
        out[(labels["thread"], labels["gil"], labels["cpu"], st[funcs[line.function_id].name],
             str(line.line))] += s.value[0]
    return out


def test_every_sample_once_with_its_times_labels_and_lines(tmp_path: Path) -> None:
    s = two_thread_recording(str(tmp_path / "two.psr"))
    prof, st = _export(s.path, "-o", str(tmp_path / "two.pb.gz"))
    assert [(st[t.type], st[t.unit]) for t in prof.sample_type] == [
        ("samples", "count"), ("wall", "nanoseconds"), ("cpu", "nanoseconds")]
    assert st[prof.default_sample_type] == "wall"
    assert (st[prof.period_type.type], st[prof.period_type.unit]) == ("wall", "nanoseconds")
    assert prof.period == 1_000_000  # 1 kHz
    totals = [sum(x.value[i] for x in prof.sample) for i in range(3)]
    assert totals == [len(s.samples), sum(x.weight for x in s.samples) * 1000,
                      sum(x.cpu for x in s.samples) * 1000]
    want: Counter[tuple[str, ...]] = Counter()
    for x in s.samples:
        fn, line = x.stack[-1][1], x.stack[-1][2]
        gil, cpu = ("held", "on") if x.status == BUSY else ("released", "off")
        want[(x.thread, gil, cpu, fn, str(line))] += 1
    assert _by(prof, st) == want
    # compute's two lines are two locations of one function, which starts at line 10
    funcs = {st[f.name]: f for f in prof.function}
    assert funcs["compute"].start_line == 10 and st[funcs["compute"].filename] == "app.py"
    lines = {loc.line[0].line for loc in prof.location
             if loc.line[0].function_id == funcs["compute"].id}
    assert lines == {12, 14}
    # stacks are innermost first, rooted in main
    for x in prof.sample:
        root = prof.location[x.location_id[-1] - 1].line[0]
        assert st[prof.function[root.function_id - 1].name] == "main"
    first = min(x.ts for x in s.samples)
    assert prof.time_nanos == WALL_NS + first * 1000
    last = max(x.ts for x in s.samples)
    assert prof.duration_nanos == (last - first + s.interval_ticks) * 1000
    assert any("two.psr" in st[c] for c in prof.comment)


def test_the_cpu_view_is_the_default_sample_type_and_other_views_are_labels(
        tmp_path: Path) -> None:
    s = two_thread_recording(str(tmp_path / "two.psr"))
    prof, st = _export(s.path, "--mode", "cpu", "-o", str(tmp_path / "cpu.pb.gz"))
    assert st[prof.default_sample_type] == "cpu"
    assert sum(x.value[0] for x in prof.sample) == len(s.samples)  # still every sample
    r = CliRunner().invoke(main, ["export", "--pprof", s.path, "--mode", "gil"])
    assert r.exit_code == 2
    assert "-tagfocus gil=held" in r.output and "Traceback" not in r.output


def test_threads_and_window_select_the_samples(tmp_path: Path) -> None:
    s = two_thread_recording(str(tmp_path / "two.psr"), jitter=False)
    prof, st = _export(s.path, "--thread", "worker", "--from", "1s",
                       "-o", str(tmp_path / "w.pb.gz"))
    assert {k[0] for k in _by(prof, st)} == {"worker"}
    assert sum(x.value[0] for x in prof.sample) == sum(
        1 for x in s.samples if x.thread == "worker" and x.ts >= 1_000_000)


def test_window_writes_one_profile_per_window(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    s = Synth(str(tmp_path / "win.psr"))
    s.thread("MainThread", 7)
    for i in range(3500):  # 3.5 s at 1 kHz
        s.sample_pass(i * 1000, {"MainThread": ((MAIN, ("app.py", "step", 12)), BUSY, 1000)})
    s.close()
    r = CliRunner().invoke(main, ["export", "--pprof", "--window", "1s", s.path,
                                  "-o", str(tmp_path / "out.pb.gz")])
    assert r.exit_code == 0, r.output
    files = sorted(tmp_path.glob("out.*.pb.gz"), key=lambda p: int(p.name.split(".")[1]))
    assert [f.name for f in files] == [f"out.{i}.pb.gz" for i in range(4)], r.output
    counts, starts = [], []
    for f in files:
        prof = pb.Profile()
        prof.ParseFromString(gzip.decompress(f.read_bytes()))
        counts.append(sum(x.value[0] for x in prof.sample))
        starts.append(prof.time_nanos)
        assert prof.duration_nanos == 1_000_000_000
    assert counts == [1000, 1000, 1000, 500]
    assert [b - a for a, b in zip(starts, starts[1:])] == [1_000_000_000] * 3
    assert starts[0] == WALL_NS
    bad = CliRunner().invoke(main, ["export", "--window", "1s", s.path])
    assert bad.exit_code == 2 and "--pprof" in bad.output
    # One file per window: standard output cannot take them (nor a file named "-.0.pb.gz").
    monkeypatch.chdir(tmp_path)
    stream = CliRunner().invoke(main, ["export", "--pprof", "--window", "1s", s.path, "-o", "-"])
    assert stream.exit_code == 2 and "base name" in stream.output, stream.output
    assert not list(tmp_path.glob("-*"))


def test_generated_classes_match_the_proto_file() -> None:
    """profile_pb2.py was generated from profile.proto: every message and field (name,
    number, repeated or not, type) of the one is in the other."""
    text = re.sub(r"//[^\n]*", "", PROTO.read_text())
    scalar = {"int64": 3, "uint64": 4, "bool": 8, "string": 9}
    in_proto = {}
    for name, body in re.findall(r"message (\w+) \{(.*?)\}", text, re.DOTALL):
        for rep, typ, field, num in re.findall(r"(repeated )?(\w+) (\w+) = (\d+);", body):
            in_proto[(name, field)] = (int(num), bool(rep), scalar.get(typ, typ))
    in_code = {}
    for msg in pb.DESCRIPTOR.message_types_by_name.values():
        for f in msg.fields:
            typ = f.message_type.name if f.message_type else f.type
            in_code[(msg.name, f.name)] = (f.number, f.is_repeated, typ)
    assert in_proto == in_code
    assert pb.DESCRIPTOR.package == "perftools.profiles"
