"""What the outputs share, taken from the model: how a length of time and a frame are written,
the options several outputs read (--limit, --waits) and the view --waits needs, the parts of
a speedscope document (written by `export --speedscope` and `diff --speedscope`), and the
page every HTML output is rendered into (`report --html`, `diff --html`).

An output takes these from here, never from another output: each output module imports the
model, the registry and this module, and no other output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NoReturn

from psrec.format.text import printable

from .model import FrameKey
from .profile import Profile
from .registry import Option
from .view import SelectionError, ViewUsageError

__all__ = ["ASSETS", "LIMIT", "SCHEMA_URL", "SPEEDSCOPE_UNITS", "WAITS", "check_waits",
           "format_seconds", "location", "raise_no_waits", "render", "speedscope_frame"]


def format_seconds(s: float) -> str:
    if s >= 100:
        return f"{s:,.1f}s"
    if s >= 1:
        return f"{s:.3f}s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f}ms"
    return f"{s * 1e6:.0f}us"


def location(k: FrameKey) -> str:
    shown: str = printable(f"{k.filename}:{k.line}({k.name})")
    return shown


# Options several outputs read.
LIMIT = Option(("-l", "--limit"), minimum=0, default=25, help="Rows to show (0: all).")

WAITS = Option(("--waits",),
               help="Where the asyncio tasks waited (the task snapshots): each task's wall "
                    "time suspended at an await (or ready for its loop) under its --logical "
                    "stack, its coroutines down to the await, then what it awaited (`awaits "
                    "Future (<await>:0)`). Collapsed: these stacks instead of the samples, in "
                    "microseconds. speedscope: one more profile of them. pprof: samples of "
                    "wall time more, labelled task and task_state (suspended, ready). "
                    "Firefox: one more track, each wait at its time.")


def check_waits(profile: Profile) -> None:
    """--waits' view: wall time (ViewUsageError otherwise)."""
    if not profile.view.mode_record.every_sample:
        raise ViewUsageError(f"--waits: waiting is wall time, not --mode {profile.view.mode}'s",
                             help="leave out --mode, or give --mode wall")


def raise_no_waits(profile: Profile) -> NoReturn:
    raise SelectionError(
        f"--waits: no asyncio task of {profile.path} waited in the view (it has no task "
        "snapshots, or its tasks did not wait)",
        help="psrec report --tasks shows its tasks; leave out --waits for where they ran")


SCHEMA_URL = "https://www.speedscope.app/file-format-schema.json"

# speedscope's units of time, by the recording's tick in nanoseconds (other ticks: nanoseconds)
SPEEDSCOPE_UNITS = {1: "nanoseconds", 1000: "microseconds", 1_000_000: "milliseconds",
                    1_000_000_000: "seconds"}


def speedscope_frame(k: FrameKey) -> dict[str, Any]:
    """A report key as an entry of a speedscope document's frame table."""
    f: dict[str, Any] = {"name": k.name, "file": k.filename}
    if k.line > 0:
        f["line"] = k.line
    return f


# The HTML pages' templates, style and scripts.
ASSETS = Path(__file__).resolve().parent / "assets"
_SCRIPT_SAFE = {ord(c): f"\\u{ord(c):04x}" for c in "<>&\u2028\u2029"}


def render(data: dict[str, Any], template: str = "report.html",
           script: str = "report.js") -> str:
    """A page: an HTML template with the shared style and scripts, its own script and its data
    inline (no network at view time)."""
    page = (ASSETS / template).read_text(encoding="utf-8")
    # Names come from the profiled program: "</script" would end the element early and
    # "<!--<script" would make the parser swallow the rest of the page. With <, > and & written
    # as JSON escapes no name can change how the page parses, and each parses back the same.
    # (U+2028 and U+2029 too, which some JavaScript parsers take for line ends.)
    blob = json.dumps(data, separators=(",", ":")).translate(_SCRIPT_SAFE)
    title = data["title"].replace("&", "&amp;").replace("<", "&lt;")
    code = "\n".join((ASSETS / name).read_text(encoding="utf-8") for name in ("common.js", script))
    # The data goes in last, so that nothing in it is taken for a placeholder.
    return (page.replace("<!--TITLE-->", title)
            .replace("/*STYLE*/", (ASSETS / "report.css").read_text(encoding="utf-8"))
            .replace("/*SCRIPT*/", code)
            .replace("/*DATA*/", blob))

