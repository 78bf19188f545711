"""The psrec command as psrec.cli puts it together: the output formats come from the registry
(--format, with the older flags as aliases), and every command handles errors alike."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from psrec.analyzer.outputs import get, names
from psrec.cli import COMMANDS, main

DATA = Path(__file__).resolve().parents[1] / "data"
GOLDEN = str(DATA / "two_threads.psr")


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_every_registered_format_is_offered_with_its_description() -> None:
    for command in ("report", "export"):
        code, out, _ = run(command, "--help")
        assert code == 0
        flat = " ".join(out.split())
        for name in names():
            if get(name).command == command:
                assert name in flat and " ".join(get(name).description.split()) in flat, name


@pytest.mark.parametrize(("fmt", "alias"), [
    ("pstats", ["--pstats"]), ("collapsed", ["--collapsed"]), ("slices", ["--slices", "1s"]),
])
def test_format_and_its_flag_give_the_same_output(tmp_path: Path, fmt: str,
                                                  alias: list[str]) -> None:
    by_format, by_flag = tmp_path / "a", tmp_path / "b"
    extra = ["--slices", "1s"] if fmt == "slices" else []
    assert run("report", GOLDEN, "--format", fmt, *extra, "-o", str(by_format))[0] == 0
    assert run("report", GOLDEN, *alias, "-o", str(by_flag))[0] == 0
    assert by_format.read_bytes() == by_flag.read_bytes()


def test_default_formats() -> None:
    code, table, _ = run("report", GOLDEN)
    assert code == 0 and run("report", GOLDEN, "--format", "table")[1] == table
    code, out, _ = run("export", GOLDEN, "--format", "speedscope", "-o", "-")
    assert code == 0 and out == run("export", GOLDEN, "--speedscope", "-o", "-")[1]
    assert out == run("export", GOLDEN, "-o", "-")[1]


@pytest.mark.parametrize(("args", "named"), [
    (["--format", "pstats", "--collapsed"], "--format pstats and --collapsed"),
    (["--format", "table", "--slices", "1s"], "--format table and --slices"),
    (["--pstats", "--collapsed", "--slices", "1s"], "--pstats, --collapsed and --slices"),
])
def test_two_formats_are_wrong_usage(tmp_path: Path, args: list[str], named: str) -> None:
    code, out, err = run("report", GOLDEN, *args, "-o", str(tmp_path / "out"))
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"psrec: error: {named} cannot be given together: choose one output"], err
    assert not (tmp_path / "out").exists()


def test_one_format_named_twice_is_one_format(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run("report", GOLDEN, "--format", "pstats", "--pstats", "-o", str(out))[0] == 0
    assert out.exists()


def test_unknown_format_is_wrong_usage() -> None:
    code, _, err = run("report", GOLDEN, "--format", "bogus")
    assert code == 2 and "'bogus' is not one of" in err and "table" in err


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "ten"])
def test_a_duration_that_is_no_number_of_seconds_is_one_line(tmp_path: Path, value: str) -> None:
    out = tmp_path / "x.psr"
    r = subprocess.run([sys.executable, "-m", "psrec", "record", "-q", "-o", str(out), "-d",
                        value, "--", sys.executable, "-c", "pass"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        f"psrec: error: --duration: {value!r} is not a number of seconds above 0"], r.stderr
    assert not out.exists()


def test_errors_are_one_line_and_a_traceback_only_with_v(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.psr")
    code, _, err = run("info", missing)
    assert code == 1 and err.startswith("psrec: error: ") and "Traceback" not in err
    r = CliRunner().invoke(main, ["-v", "info", missing])
    assert r.exit_code == 1 and r.exception is not None and not isinstance(r.exception,
                                                                           SystemExit)


# -- options the chosen output would leave unread -----------------------------------------------

@pytest.mark.parametrize(("args", "said"), [
    (["report", "--pstats", "--sort", "name"], "--sort does nothing with --pstats"),
    (["report", "--collapsed", "--limit", "3"], "--limit does nothing with --collapsed"),
    (["report", "--slices", "1s", "-l", "0"], "--limit does nothing with --slices"),
    (["report", "--format", "html", "--sort", "total"], "--sort does nothing with --format html"),
    (["report", "--slices", "1s", "--per-thread"], "--per-thread does nothing with --slices"),
    (["report", "--html", "--per-thread"], "--per-thread does nothing with --html"),
    (["export", "--pprof", "--by", "line"], "--by does nothing with --pprof"),
    (["export", "--firefox", "--by", "line"], "--by does nothing with --firefox"),
    (["export", "--pprof", "--weights", "count"], "--weights does nothing with --pprof"),
    (["export", "--firefox", "--weights", "time"], "--weights does nothing with --firefox"),
    (["report", "--force"], "--force does nothing here: the default format (table) goes to "
                            "stdout"),
    (["report", "--collapsed", "-o", "-", "--force"], "--force does nothing here"),
])
def test_an_option_the_output_does_not_read_is_wrong_usage(tmp_path: Path, args: list[str],
                                                           said: str) -> None:
    out = tmp_path / "out"
    where = [] if "-o" in args or args[1:] == ["--force"] else ["-o", str(out)]
    code, stdout, err = run(args[0], GOLDEN, *args[1:], *where)
    assert code == 2 and stdout == "", (code, err)
    lines = err.splitlines()
    assert lines[0].startswith(f"psrec: error: {said}"), err
    assert len(lines) == 2 and lines[1].startswith("psrec: leave out "), err
    assert not out.exists()


@pytest.mark.parametrize("args", [
    ["report", "--sort", "name", "-l", "3"],  # the table reads both
    ["report", "--collapsed", "--per-thread", "-o", "-"],
    ["report", "--pstats", "--per-thread"],  # pstats keeps threads apart with it
    ["report", "--collapsed", "--by", "line", "--weights", "time", "-o", "-"],
    ["report", "--slices", "1s", "--by", "line", "--weights", "count"],
    ["export", "--speedscope", "--by", "line", "--weights", "count"],
    ["export", "--pprof", "--window", "1s", "--mode", "cpu"],
    ["report", "--pstats", "--force"],
])
def test_options_the_output_reads_are_taken(tmp_path: Path, args: list[str]) -> None:
    where = [] if "-o" in args else ["-o", str(tmp_path / "out")]
    code, _, err = run(args[0], GOLDEN, *args[1:], *where)
    assert code == 0, err


@pytest.mark.parametrize(("args", "longest"), [
    (["report", "--slices", "1e300"], "9.21e+12 s"),
    (["report", "--slices", "1e19"], "9.21e+12 s"),
    (["report", "--slices", "9.3e12"], "9.21e+12 s"),
    (["export", "--pprof", "--window", "1e300"], "9.21e+09 s"),
    (["export", "--pprof", "--window", "1e10"], "9.21e+09 s"),
])
def test_a_length_past_the_64_bit_counts_is_wrong_usage_that_names_the_longest(
        tmp_path: Path, args: list[str], longest: str) -> None:
    code, _, err = run(args[0], GOLDEN, *args[1:], "-o", str(tmp_path / "out"))
    assert code == 2 and "internal error" not in err, err
    assert f"give a length of at most {longest}" in err, err


@pytest.mark.parametrize("args", [["report", "--slices", "9.21e12", "-o", "-"],
                                  ["export", "--pprof", "--window", "9.21e9"]])
def test_the_longest_length_named_works(tmp_path: Path, args: list[str]) -> None:
    where = [] if "-o" in args else ["-o", str(tmp_path / "out.pb.gz")]
    code, _, err = run(args[0], GOLDEN, *args[1:], *where)
    assert code == 0, err


def test_the_command_list_gives_each_command_one_line_that_fits() -> None:
    """psrec --help at 80 columns: every command's summary whole (click cuts a long one with
    "..."), dump's leading with its common form."""
    out = CliRunner().invoke(main, ["--help"], terminal_width=80, prog_name="psrec").output
    listed = out.split("Commands:\n", 1)[1].splitlines()
    names = [line.split()[0] for line in listed if line.strip()]
    assert names == list(COMMANDS), listed
    for line in listed:
        assert len(line) <= 80 and not line.rstrip().endswith("..."), line
    assert next(line for line in listed if line.split()[0] == "dump").split(None, 1)[1].startswith(
        "dump PID")


@pytest.mark.parametrize("command", ["report", "export", "diff"])
def test_output_commands_group_their_options_under_headings(command: str) -> None:
    """report, export and diff list their options under Output, View and Selection headings,
    each view option under its own."""
    from psrec.analyzer.cli_options import VIEW_OPTIONS

    out = CliRunner().invoke(main, [command, "--help"], terminal_width=80,
                             prog_name="psrec").output
    headings = [line for line in out.splitlines() if line.endswith("options:")]
    assert headings == ["Output options:", "View options:", "Selection options:"], headings
    for opt in VIEW_OPTIONS:
        title = "Selection options:" if opt.heading == "selection" else "View options:"
        body = out.split(title, 1)[1].split("\n\n", 1)[0]
        assert f"  {opt.flags[0]}" in body, (opt.flags, title)
    output = out.split("Output options:", 1)[1].split("View options:", 1)[0]
    assert "-o, --output" in output and "--force" in output


def test_min_share_leaves_out_the_noise_and_keeps_the_shares() -> None:
    """--min-share PCT leaves out the functions whose own and total shares are both under
    PCT, says how many, and changes no share of those it keeps; it is the table's alone."""
    def rows(out: str) -> dict[str, tuple[float, float]]:
        found = {}
        for line in out.splitlines():
            m = re.match(r"\s*[\d,]+\s+[\d,]+\s+([\d.]+)%\s+\S+\s+([\d.]+)%\s+\S+\s+(.*)$", line)
            if m:
                found[m.group(3)] = (float(m.group(1)), float(m.group(2)))
        return found

    code, every, err = run("report", GOLDEN, "-l", "0")
    assert code == 0, err
    code, kept, err = run("report", GOLDEN, "-l", "0", "--min-share", "20")
    assert code == 0, err
    all_rows, kept_rows = rows(every), rows(kept)
    assert kept_rows and len(kept_rows) < len(all_rows), kept
    assert all(all_rows[k] == v for k, v in kept_rows.items())
    assert all(max(v) >= 20 for v in kept_rows.values())
    assert all(max(v) < 20 for k, v in all_rows.items() if k not in kept_rows)
    assert f"... {len(all_rows) - len(kept_rows)} under 20 % of the time left out" in kept
    code, _, err = run("report", GOLDEN, "--collapsed", "--min-share", "20", "-o", "-")
    assert code == 2 and "--min-share" in err, err
