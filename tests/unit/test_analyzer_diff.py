"""`psrec diff BASE NEW`: the functions whose share of the time changed, on recordings whose
shares are known (written with the encoder), under the views the reports take."""

from __future__ import annotations

import re
from pathlib import Path

from analyzer_synth import BUSY, F_A, F_B, F_SLEEP, MAIN, Synth
from click.testing import CliRunner
from psrec.analyzer.diff import diff_rows
from psrec.analyzer.profile import Profile, View
from psrec.cli import main


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout, r.stderr


def recording(path: Path, compute_in_10: int, passes: int = 2000) -> str:
    """MainThread busy: compute_in_10 passes in 10 in compute, the others in parse2; a worker
    that sleeps throughout (only in the wall view)."""
    s = Synth(str(path))
    s.thread("MainThread", 100)
    s.thread("worker", 101)
    for i in range(passes):
        leaf = F_A if i % 10 < compute_in_10 else F_B
        s.sample_pass((i + 1) * s.interval_ticks, {"MainThread": ((MAIN, leaf), BUSY, 900),
                                                   "worker": ((MAIN, F_SLEEP), 0, 0)})
    s.close()
    return s.path


def rows_of(out: str) -> dict[str, list[str]]:
    """Table rows by function name: the numbers before the location."""
    rows = {}
    for line in out.splitlines():
        m = re.match(r"^\s*([-+\d.,\s]+?)\s+\S+:\d+\((\w+)\)$", line)
        if m:
            rows[m.group(2)] = m.group(1).split()
    return rows


def test_the_table_shows_each_change_of_share_with_its_counts(tmp_path: Path) -> None:
    base = recording(tmp_path / "base.psr", 6)  # compute 60 %, parse2 40 % of MainThread
    new = recording(tmp_path / "new.psr", 3)  # compute 30 %, parse2 70 %
    code, out, err = run("diff", base, new, "--thread", "MainThread")
    assert code == 0, err
    rows = rows_of(out)
    # own % base, new, change; total % base, new, change; own samples base, new; z
    assert rows["compute"][:8] == ["60.00", "30.00", "-30.00", "60.00", "30.00", "-30.00",
                                   "1,200", "600"]
    assert rows["parse2"][:8] == ["40.00", "70.00", "+30.00", "40.00", "70.00", "+30.00",
                                  "800", "1,400"]
    assert rows["main"][:6] == ["0.00", "0.00", "+0.00", "100.00", "100.00", "+0.00"]
    assert float(rows["compute"][8]) < -15 and float(rows["parse2"][8]) > 15
    assert float(rows["main"][8]) == 0
    # Largest change first; main, unchanged, last.
    assert list(rows) == ["compute", "parse2", "main"]
    assert "base: " + base in out and "new:  " + new in out


def test_the_view_applies_to_both_recordings(tmp_path: Path) -> None:
    base = recording(tmp_path / "base.psr", 6)
    new = recording(tmp_path / "new.psr", 6)
    # The same shares: nothing changed, in every view.
    for view in (View(), View(mode="cpu"), View(by="line"), View(start="0.5", end="1.5")):
        rows = diff_rows(Profile.load(base, view), Profile.load(new, view))
        assert rows and all(r.own_change == 0 and r.total_change == 0 for r in rows), view
    # The wall view counts the sleeping worker: compute is 30 % of all samples; the GIL view
    # leaves it out.
    wall = {r.key.name: r for r in diff_rows(Profile.load(base, View()),
                                             Profile.load(new, View()))}
    gil = {r.key.name: r for r in diff_rows(Profile.load(base, View(mode="gil")),
                                            Profile.load(new, View(mode="gil")))}
    assert round(wall["compute"].new_own, 4) == 0.3 and "wait" in wall
    assert round(gil["compute"].new_own, 4) == 0.6 and "wait" not in gil
    code, out, _ = run("diff", base, new, "--mode", "gil", "--from", "0.5", "-l", "0")
    assert code == 0 and "window" in out and "mode gil" in out


def grown(path: Path, compute_passes: int) -> str:
    """MainThread busy: compute_passes ms in compute, then 1000 ms in parse2."""
    s = Synth(str(path))
    s.thread("MainThread", 100)
    for i in range(compute_passes + 1000):
        leaf = F_A if i < compute_passes else F_B
        s.sample_pass((i + 1) * s.interval_ticks, {"MainThread": ((MAIN, leaf), BUSY, 900)})
    s.close()
    return s.path


def test_absolute_compares_seconds(tmp_path: Path) -> None:
    """compute grows from 1 s to 3 s and parse2 stays at 1 s: in shares parse2 shrank (50 % to
    25 %); in seconds it is unchanged."""
    base, new = grown(tmp_path / "base.psr", 1000), grown(tmp_path / "new.psr", 3000)
    code, out, err = run("diff", base, new)
    assert code == 0, err
    assert rows_of(out)["parse2"][:3] == ["50.00", "25.00", "-25.00"]
    code, out, err = run("diff", base, new, "--absolute")
    assert code == 0, err
    rows = rows_of(out)
    # own s base, new, change; total s base, new, change; own samples base, new; z
    assert rows["compute"][:8] == ["1.000", "3.000", "+2.000", "1.000", "3.000", "+2.000",
                                   "1,000", "3,000"]
    assert rows["parse2"][:8] == ["1.000", "1.000", "+0.000", "1.000", "1.000", "+0.000",
                                  "1,000", "1,000"]
    assert float(rows["parse2"][8]) == 0 and float(rows["compute"][8]) > 15
    assert rows["main"][3:6] == ["2.000", "4.000", "+2.000"]
    assert "Times are in seconds" in out and "own s" in out
    by_seconds = diff_rows(Profile.load(base), Profile.load(new), absolute=True)
    assert [r.key.name for r in by_seconds][:1] == ["compute"]
    code, _, err = run("diff", base, new, "--absolute", "--speedscope")
    assert code == 2 and "--absolute does not apply to --speedscope" in err


def test_sorting_limits_and_outputs(tmp_path: Path) -> None:
    base = recording(tmp_path / "base.psr", 6)
    new = recording(tmp_path / "new.psr", 5)
    code, out, _ = run("diff", base, new, "-l", "1")
    assert code == 0 and len(rows_of(out)) == 1 and "more (use -l 0 to show all)" in out
    by_z = diff_rows(Profile.load(base), Profile.load(new), sort="z")
    assert abs(by_z[0].z) >= abs(by_z[-1].z)
    target = tmp_path / "diff.txt"
    code, out, err = run("diff", base, new, "-o", str(target))
    assert code == 0 and out == "" and "compute" in target.read_text()
    code, _, err = run("diff", base, new, "-o", str(target))
    assert code == 1 and "exists" in err  # outputs are never overwritten without --force


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    base = recording(tmp_path / "base.psr", 6)
    code, out, err = run("diff", base, str(tmp_path / "missing.psr"))
    assert code == 1 and out == "" and "missing.psr: no such file" in err
    assert "Traceback" not in err
    code, _, err = run("diff", base, base, "--thread", "nosuch")
    assert code == 1 and "no thread named or numbered 'nosuch'" in err
    code, _, err = run("diff", base, base, "-o", base, "--force")
    assert code == 1 and "is the base recording itself" in err
    code, _, err = run("diff", base)
    assert code == 2 and "Missing argument" in err


def test_speedscope_holds_both_recordings_as_two_profiles(tmp_path: Path) -> None:
    """Checked against speedscope's own schema: base then new, each stack once with its
    time, over one frame table; the new one opens first."""
    import json

    import jsonschema
    from psrec.analyzer.speedscope import check_consistency
    from test_analyzer_speedscope import load_schema

    base = recording(tmp_path / "base.psr", 6)
    new = recording(tmp_path / "new.psr", 3)
    out = tmp_path / "d.json"
    code, _, err = run("diff", base, new, "--speedscope", "--thread", "MainThread", "-o",
                       str(out))
    assert code == 0, err
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, load_schema())
    assert check_consistency(doc) == []
    assert doc["activeProfileIndex"] == 1
    assert [p["name"].split(":")[0] for p in doc["profiles"]] == ["base", "new"]
    names = [f["name"] for f in doc["shared"]["frames"]]
    for p, compute_share in zip(doc["profiles"], (0.6, 0.3)):
        total = sum(p["weights"])
        compute = sum(w for s, w in zip(p["samples"], p["weights"])
                      if names[s[-1]] == "compute")
        assert compute / total == compute_share
        assert p["unit"] == "microseconds" and total == 2000 * 1000  # 2 s at 1 kHz
    code, _, err = run("diff", base, new, "--speedscope", "--html")
    assert code == 2 and "cannot be given together" in err
