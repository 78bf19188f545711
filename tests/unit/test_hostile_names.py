"""Names from the profiled program are untrusted: a function, file or thread name may hold
HTML that would end the page's data early, terminal escapes, line breaks that forge a
collapsed stack, or bidi controls that reorder a table. The HTML pages keep every name as
data that cannot change how the page parses; the text outputs show such characters escaped
(\\xNN, \\uNNNN) and keep one line per stack; pprof and the JSON outputs carry names verbatim
and stay valid."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from analyzer_synth import BUSY, MAIN, Synth
from click.testing import CliRunner
from psrec.cli import main
from psrec.format.text import printable

# Each breaks or drives a different consumer: an HTML parser, a terminal, a line reader.
HTML_NAMES = ("<!--<script>", "</script>", "<!--", "-->")
TERMINAL_NAMES = ("esc\x1b]0;pwned\x07", "bs\x08del\x7f", "c1\x9b31m", "nl\nforged 999",
                  "rlo\u202egnp.exe", "isolate\u2066x\u2069", "mark\u200e\u200f", "cr\rx")
# Characters none of the text outputs may print raw.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e"
                 "\u2066-\u2069]")


def _recording(path: Path, names: tuple[str, ...], command: tuple[str, ...] = ()) -> Synth:
    """One thread per name, each named after it, running a function of that name in a file
    of that name (with a frame above it that holds them all)."""
    s = Synth(str(path), metadata={"command": list(command)} if command else {})
    for i, name in enumerate(names):
        s.thread(name, 100 + i)
    for p in range(200):
        s.sample_pass((p + 1) * 1000, {
            name: ((MAIN, (name + ".py", name, 10 + i), (name, "inner " + name, 20)), BUSY, 900)
            for i, name in enumerate(names)})
    s.close()
    return s


def _run(*args: str) -> str:
    r = CliRunner().invoke(main, list(args))
    assert r.exit_code == 0, r.output
    return r.output


def _page_blob(page: str) -> str:
    m = re.search(r'<script id="psrec-data" type="application/json">(.*?)</script>', page,
                  re.DOTALL)
    assert m, page[:2000]
    return m.group(1)


def _strings(value: object) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*map(_strings, value.values()), *map(_strings, value.keys()))
    if isinstance(value, list):
        return set().union(set(), *map(_strings, value))
    return set()


def test_html_pages_keep_hostile_names_as_data(tmp_path: Path) -> None:
    """The report and the diff page: the data between the psrec-data script tags holds no
    '<' at all (nothing in it can end the element or open a comment), and parses back to
    exactly the names that went in."""
    s = _recording(tmp_path / "a.psr", HTML_NAMES)
    b = _recording(tmp_path / "b.psr", HTML_NAMES)
    _run("report", "--html", s.path, "-o", str(tmp_path / "a.html"))
    _run("diff", "--html", s.path, b.path, "-o", str(tmp_path / "d.html"))
    for page in ("a.html", "d.html"):
        text = (tmp_path / page).read_text(encoding="utf-8")
        blob = _page_blob(text)
        assert "<" not in blob and ">" not in blob and "&" not in blob, blob[:2000]
        strings = _strings(json.loads(blob))
        for name in HTML_NAMES:
            assert name in strings and name + ".py" in strings, (page, name)
            assert "inner " + name in strings, (page, name)
        if page == "a.html":  # the report labels its threads; the diff page has none
            labels = [t["label"] for t in json.loads(blob)["threads"]]
            assert labels == [f"{n} (tid {100 + i})" for i, n in enumerate(HTML_NAMES)]


@pytest.mark.parametrize("args", [
    (), ("--per-thread",), ("--collapsed", "-o", "-"), ("--collapsed", "--per-thread", "-o", "-"),
    ("--slices", "50ms"), ("--by", "line", "--limit", "0")],
    ids=["table", "per-thread", "collapsed", "collapsed-per-thread", "slices", "lines"])
def test_text_reports_show_control_and_bidi_characters_escaped(tmp_path: Path,
                                                               args: tuple[str, ...]) -> None:
    """No terminal escape, bell, backspace, DEL, C1, carriage return, bidi control or line
    break of a name reaches a text report raw; each shows as \\xNN or \\uNNNN."""
    s = _recording(tmp_path / "t.psr", TERMINAL_NAMES)
    out = _run("report", s.path, *args)
    assert not RAW.search(out), repr(RAW.findall(out))
    assert "esc\\x1b]0:pwned\\x07" in out or "esc\\x1b]0;pwned\\x07" in out, out
    if "--slices" not in args:  # the slices name threads and the top function of each slice
        assert "rlo\\u202egnp.exe" in out, out


@pytest.mark.parametrize("per_thread", [False, True], ids=["all", "per-thread"])
def test_collapsed_stacks_hold_one_line_per_stack(tmp_path: Path, per_thread: bool) -> None:
    """A line break in a function, file or thread name cannot split a stack line and forge
    another: every line is one stack, `frames count`, and the counts add up."""
    s = _recording(tmp_path / "c.psr", TERMINAL_NAMES)
    out = tmp_path / "c.collapsed"
    _run("report", "--collapsed", s.path, "-o", str(out), *(["--per-thread"] if per_thread else []))
    text = out.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(text.split("\n")) == len(lines) + 1  # nothing else Python takes for a line end
    assert not RAW.search(text), repr(RAW.findall(text))
    # the names' threads all run one stack each: one line per name (per thread as well)
    assert len(lines) == len(TERMINAL_NAMES), lines
    assert all(re.fullmatch(r"[^ ].* \d+", line) for line in lines), lines
    assert sum(int(line.rsplit(" ", 1)[1]) for line in lines) == len(s.samples)
    if per_thread:
        roots = {line.split(";", 1)[0] for line in lines}
        assert len(roots) == len(TERMINAL_NAMES), roots
        assert {"thread nl\\x0aforged 999 (tid 103)", "thread cr\\x0dx (tid 107)",
                "thread rlo\\u202egnp.exe (tid 104)"} <= roots, roots


def test_info_shows_thread_names_escaped(tmp_path: Path) -> None:
    s = _recording(tmp_path / "i.psr", TERMINAL_NAMES)
    out = _run("info", s.path)
    assert not RAW.search(out), repr(RAW.findall(out))
    assert "nl\\x0aforged 999" in out and "rlo\\u202egnp.exe" in out, out


@pytest.mark.parametrize("name", ["bad\x1b]0;x\x07.psr", "two\nlines.psr", "rlo\u202ersp.psr"],
                         ids=["title-escape", "newline", "rlo"])
@pytest.mark.parametrize("exists", [True, False], ids=["garbage", "missing"])
def test_error_messages_show_file_names_escaped(tmp_path: Path, name: str, exists: bool) -> None:
    """The one-line error about a recording whose name holds a terminal escape, a line break
    or a bidi override: one line (and its help), exit status 1, the name escaped."""
    path = tmp_path / name
    if exists:
        path.write_bytes(b"not a recording")
    r = subprocess.run([sys.executable, "-m", "psrec", "report", str(path)], capture_output=True,
                       text=True, timeout=60, check=False)
    assert r.returncode == 1, r.stderr
    assert r.stdout == "" and len(r.stderr.splitlines()) <= 2, r.stderr
    assert r.stderr.startswith("psrec: error: ") and "Traceback" not in r.stderr, r.stderr
    assert not RAW.search(r.stderr), repr(r.stderr)
    assert printable(str(path)) in r.stderr.splitlines()[0], r.stderr


ALL_NAMES = HTML_NAMES + TERMINAL_NAMES


def test_pprof_and_json_outputs_carry_names_verbatim(tmp_path: Path) -> None:
    """speedscope, Firefox Profiler, `info --json` and pprof keep every name exactly as the
    target wrote it (their consumers escape for themselves) and stay valid JSON and protobuf."""
    command = ("python", "-c", "<!--<script>", "esc\x1b]0;x\x07", "nl\nx")
    s = _recording(tmp_path / "v.psr", ALL_NAMES, command)
    for flag, out in (("--speedscope", "v.speedscope.json"), ("--firefox", "v.firefox.json")):
        _run("export", flag, s.path, "-o", str(tmp_path / out))
        doc = json.loads((tmp_path / out).read_text(encoding="utf-8"))
        strings = _strings(doc)
        for name in ALL_NAMES:
            assert {name, "inner " + name} <= strings, (flag, name)
            if flag == "--speedscope":  # the Firefox format keeps function names only
                assert {name + ".py"} <= strings, (flag, name)
        if flag == "--speedscope":  # a profile per thread, named after it and its id
            threads = [p["name"] for p in doc["profiles"]]
        else:
            threads = [t["name"] for t in doc["threads"]]
        assert threads == ([f"{n} (tid {100 + i})" for i, n in enumerate(ALL_NAMES)]
                           if flag == "--speedscope" else list(ALL_NAMES)), (flag, threads)

    info = json.loads(_run("info", "--json", s.path))
    assert sorted(info["thread_names"]) == sorted(ALL_NAMES)
    assert tuple(info["metadata"]["command"]) == command

    pb = pytest.importorskip("psrec.analyzer.proto.profile_pb2",
                             reason="the protobuf package (>= 7.35, Python 3.10+) is not installed")
    _run("export", "--pprof", s.path, "-o", str(tmp_path / "v.pb.gz"))
    prof = pb.Profile()
    prof.ParseFromString(gzip.decompress((tmp_path / "v.pb.gz").read_bytes()))
    table = list(prof.string_table)
    names = {table[f.name] for f in prof.function}
    files = {table[f.filename] for f in prof.function}
    labels = {table[lb.str] for x in prof.sample for lb in x.label
              if table[lb.key] == "thread"}
    for name in ALL_NAMES:
        assert {name, "inner " + name} <= names and {name, name + ".py"} <= files, name
    assert labels == set(ALL_NAMES), labels


# A live target whose thread, function and file carry the hostile names; it says "ready" from
# the function so named, then waits there for its stdin to close.
_TARGET = """
import sys, threading
names = sys.argv[1:]
ns = {"sys": sys}
src = "def f():\\n    print('ready', flush=True)\\n    sys.stdin.read()\\n"
exec(compile(src, names[1], "exec"), ns)
f = ns["f"]
f.__code__ = f.__code__.replace(co_name=names[0], co_qualname=names[0])
threading.current_thread().name = names[2]
f()
"""


def test_dump_json_of_a_process_carries_names_verbatim(tmp_path: Path) -> None:
    """`psrec dump PID --json`: the thread's name, and its frame's function and file, exactly
    as the target has them, in valid JSON."""
    pytest.importorskip("psrec.recorder._recorder", reason="the native recorder is not built")
    name, file, thread = "nl\nrlo\u202e<!--<script>", "esc\x1b]0;x\x07\n</script>.py", \
        "t\x1b[31m\n\u202e</script>"
    script = tmp_path / "target.py"
    script.write_text(_TARGET)
    proc = subprocess.Popen([sys.executable, str(script), name, file, thread],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        r = subprocess.run([sys.executable, "-m", "psrec", "dump", str(proc.pid), "--json"],
                           capture_output=True, text=True, timeout=60, check=False)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    if r.returncode != 0 and "permission" in r.stderr.lower():
        pytest.skip(f"cannot read the target: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    [main_thread] = [t for t in doc["threads"] if t["native_tid"] == proc.pid]
    assert main_thread["name"] == thread
    assert (main_thread["frames"][0]["function"], main_thread["frames"][0]["file"]) == (name, file)
