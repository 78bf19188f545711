"""`psrec diff BASE NEW`: which functions (or lines) took a larger or smaller share of the time
in one recording than in another, under the same view.

Shares, not times, are compared by default: two runs seldom last as long, and a share is what a
reader of either report sees. Each function's share of its own recording's total (own: on top
of the stack; total: anywhere on it) is taken from the engine's walks
(``Profile.walks.totals``), and the change comes with a two-proportion z score from the sample
counts, as a guide to whether the change is larger than sampling alone would make it.

With ``absolute`` (``--absolute``), seconds are compared instead: where one function got
slower and the others did not, shares make the others look as if they shrank, and seconds do
not. Their z compares the two sample counts as Poisson counts, which holds for runs sampled
at the same rate over comparable work.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from psrec.format.text import printable
from psrec.format.version import psrec_version

from .common import LIMIT, SCHEMA_URL, SPEEDSCOPE_UNITS, location, render, speedscope_frame
from .profile import FrameKey, Profile
from .registry import Option, Reporter, register
from .walks import Totals

__all__ = ["DiffHtmlReporter", "DiffReporter", "DiffRow", "DiffSpeedscopeReporter", "diff_rows",
           "diff_tree"]

SORTS = ("own", "total", "z")


@dataclass
class DiffRow:
    key: FrameKey
    base: Totals
    new: Totals
    base_own: float  # share of the base recording's total value, 0..1 (absolute: seconds)
    new_own: float
    base_total: float
    new_total: float
    z: float  # of the measure the rows are sorted by (own samples, or total with --sort total)

    @property
    def own_change(self) -> float:
        return self.new_own - self.base_own

    @property
    def total_change(self) -> float:
        return self.new_total - self.base_total


def _z(count_a: int, n_a: int, count_b: int, n_b: int) -> float:
    """Two-proportion z score of count_b/n_b against count_a/n_a (0 where it is undefined)."""
    if n_a <= 0 or n_b <= 0:
        return 0.0
    pooled = (count_a + count_b) / (n_a + n_b)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n_a + 1 / n_b))
    return (count_b / n_b - count_a / n_a) / se if se > 0 else 0.0


def _z_counts(count_a: int, count_b: int) -> float:
    """z of count_b against count_a, both Poisson counts over the same rate (0 when both are
    0)."""
    return (count_b - count_a) / math.sqrt(count_a + count_b) if count_a + count_b else 0.0


def diff_rows(base: Profile, new: Profile, sort: str = "own",
              absolute: bool = False) -> list[DiffRow]:
    """A row per function (or line) either recording has, largest change first: changes of
    share, or with `absolute` of seconds."""
    if sort not in SORTS:
        raise ValueError(f"sort must be one of {', '.join(SORTS)}")
    a, b = base.walks.totals(), new.walks.totals()
    if absolute:  # each recording's ticks to seconds
        value_a, value_b = 1e9 / base.tick_ns, 1e9 / new.tick_ns
    else:
        value_a, value_b = base.total_value or 1, new.total_value or 1
    rows = []
    for key in dict.fromkeys([*a, *b]):
        ta, tb = a.get(key, Totals()), b.get(key, Totals())
        counts = (ta.total_count, tb.total_count) if sort == "total" else \
            (ta.own_count, tb.own_count)
        z = _z_counts(*counts) if absolute else \
            _z(counts[0], base.selected, counts[1], new.selected)
        rows.append(DiffRow(key, ta, tb, ta.own / value_a, tb.own / value_b,
                            ta.total / value_a, tb.total / value_b, z))
    if sort == "own":
        rows.sort(key=lambda r: (-abs(r.own_change), -abs(r.total_change), r.key))
    elif sort == "total":
        rows.sort(key=lambda r: (-abs(r.total_change), -abs(r.own_change), r.key))
    else:
        rows.sort(key=lambda r: (-abs(r.z), -abs(r.own_change), r.key))
    return rows


def _pct(share: float) -> str:
    return f"{100 * share:.2f}"


def _change(share: float) -> str:
    return f"{100 * share:+.2f}"


def _secs(seconds: float) -> str:
    return f"{seconds:.3f}"


def _secs_change(seconds: float) -> str:
    return f"{seconds:+.3f}"


# Options of `psrec diff` these outputs read.
SORT = Option(("--sort",), choices=("own", "total", "z"), default="own",
              help="Order: largest change of own share, of total share, or largest |z|.")
ABSOLUTE = Option(("--absolute",),
                  refusal=("--absolute does not apply to {spelled} (each profile keeps its own "
                           "times)", "leave out --absolute"),
                  help="Compare seconds, not shares of each recording's total (the table and, "
                       "with --html, the colours): a function that did not change stays "
                       "unchanged when another grew.")


@register
class DiffReporter(Reporter):
    """The diff table of the base recording's Profile and the new one's; options: sort, limit
    and absolute (seconds, not shares)."""

    name = "diff"
    description = "functions whose share of the time changed most between two recordings"
    command = "diff"
    reads = (SORT, LIMIT, ABSOLUTE)
    compares = True

    def compare(self, base: Profile, profile: Profile, out: IO[Any]) -> str | None:
        sort = self.options.get("sort", "own")
        limit = int(self.options.get("limit", 25))
        absolute = bool(self.options.get("absolute"))
        rows = diff_rows(base, profile, sort, absolute)
        w = out.write
        w(f"psrec diff\n  base: {printable(base.describe())}\n"
          f"  new:  {printable(profile.describe())}\n")
        if absolute:
            w("Times are in seconds (thread-seconds: every selected thread's time added up); "
              "changes are new minus base.\nz compares sample counts (own, or total with "
              "--sort total) as counts at one rate: beyond about 3 it is\nunlikely to be "
              "sampling alone, though samples close in time are not independent, so read it "
              "as a guide.\n\n")
            pct: Callable[[float], str] = _secs
            change: Callable[[float], str] = _secs_change
            unit = "s"
        else:
            w("Shares are of each recording's own total; changes are in percentage points (new "
              "minus base).\nz compares sample counts (own, or total with --sort total): "
              "beyond about 3 it is unlikely to be sampling alone,\nthough samples close in "
              "time are not independent, so read it as a guide.\n\n")
            pct, change, unit = _pct, _change, "%"
        w(f"{'own ' + unit:>22} {'total ' + unit:>22} {'own samples':>19} {'z':>7}\n")
        w(f"{'base':>7}{'new':>7}{'change':>8} {'base':>7}{'new':>7}{'change':>8} "
          f"{'base':>9}{'new':>10} {'':>7}  file:line(function)\n")
        shown = rows if limit <= 0 else rows[:limit]
        for r in shown:
            w(f"{pct(r.base_own):>7}{pct(r.new_own):>7}{change(r.own_change):>8} "
              f"{pct(r.base_total):>7}{pct(r.new_total):>7}{change(r.total_change):>8} "
              f"{r.base.own_count:>9,}{r.new.own_count:>10,} {r.z:>7.1f}  {location(r.key)}\n")
        if len(rows) > len(shown):
            w(f"... {len(rows) - len(shown)} more (use -l 0 to show all)\n")
        return f"{len(rows):,} functions compared"


def node_values(p: Profile) -> dict[int, int]:
    """Each stack's value under the view (in ticks), every thread and slice together."""
    col, mult = p.value_column()
    out: dict[int, int] = {}
    for node, v in zip(p.columns.node, col):
        out[node] = out.get(node, 0) + v * mult
    return out


def diff_tree(base: Profile, new: Profile) -> dict[str, Any]:
    """Both recordings' stacks merged by report key into one tree: each node's own value in
    either (in ticks, under the view), its parent and its key; parents come before children."""
    keys: dict[FrameKey, int] = {}
    index: dict[tuple[int, int], int] = {}
    parent: list[int] = []
    key: list[int] = []
    own: list[list[int]] = [[], []]
    for side, p in enumerate((base, new)):
        for node, v in node_values(p).items():
            at = -1
            for k in p.names.keys(node):
                ki = keys.setdefault(k, len(keys))
                nxt = index.get((at, ki))
                if nxt is None:
                    nxt = index[(at, ki)] = len(parent)
                    parent.append(at)
                    key.append(ki)
                    own[0].append(0)
                    own[1].append(0)
                at = nxt
            own[side][at] += v
    return {"keys": [[k.name, k.filename, k.line] for k in keys], "parent": parent,
            "key": key, "own_base": own[0], "own_new": own[1]}


@register
class DiffHtmlReporter(Reporter):
    """A differential flame graph: the merged stacks of both recordings, each frame coloured by
    how its share of the time (or, compared in seconds, its time) changed (red: grew, blue:
    shrank), and the diff table. The page switches between shares and seconds: each row
    carries both."""

    name = "diff-html"
    description = "a differential flame graph and the diff table, as one HTML page"
    command = "diff"
    flag = Option(("--html",), help="Write a differential flame graph with the table as one "
                                    "HTML page (default NEW.diff.html): frames coloured by how "
                                    "their share changed.")
    reads = (SORT, LIMIT, ABSOLUTE)
    compares = True
    suffix = ".diff.html"

    def compare(self, base: Profile, profile: Profile, out: IO[Any]) -> str | None:
        from pathlib import Path

        sort = self.options.get("sort", "own")
        absolute = bool(self.options.get("absolute"))
        rows = diff_rows(base, profile, sort)
        seconds = {r.key: r for r in diff_rows(base, profile, sort, absolute=True)}
        limit = int(self.options.get("limit", 25)) or len(rows)
        # The rows either measure puts first: the page orders and cuts them by the one shown.
        keys = dict.fromkeys([*(r.key for r in rows[:limit]), *list(seconds)[:limit]])
        share = {r.key: r for r in rows}
        data = {
            "psrec": psrec_version(),
            "title": f"{Path(base.path).name} → {Path(profile.path).name}",
            "base": base.describe(), "new": profile.describe(), "mode": profile.view.mode,
            "tick_s": profile.tick_ns / 1e9,
            **diff_tree(base, profile),
            "absolute": absolute,
            "limit": limit,
            "sort": sort,
            # name, file, line; shares: base own, new own, base total, new total, z; the same
            # in seconds
            "rows": [[k.name, k.filename, k.line,
                      *(_row_values(share[k]) if k in share else [0.0] * 5),
                      *_row_values(seconds[k])] for k in keys],
        }
        page = render(data, "diff.html", "diff.js")
        out.write(page)
        return f"{len(data['parent']):,} merged stack nodes, {len(rows):,} functions compared"


def _row_values(r: DiffRow) -> list[float]:
    return [r.base_own, r.new_own, r.base_total, r.new_total, r.z]


@register
class DiffSpeedscopeReporter(Reporter):
    """Both recordings as two profiles of one speedscope file (base, then new), over one frame
    table: speedscope shows one at a time, and switching between them keeps the view, so a
    change reads as the difference between two pictures. Each profile holds every stack of
    its recording (all threads) once, weighted by its value under the view."""

    name = "diff-speedscope"
    description = "both recordings as two profiles of one speedscope file"
    command = "diff"
    flag = Option(("--speedscope",), help="Write both recordings as two profiles of one "
                                          "speedscope file (default NEW.diff.speedscope.json), "
                                          "to switch between in speedscope.")
    compares = True
    suffix = ".diff.speedscope.json"

    def compare(self, base: Profile, profile: Profile, out: IO[Any]) -> str | None:
        import json

        frames: dict[FrameKey, int] = {}
        profiles = []
        for label, p in (("base", base), ("new", profile)):
            unit = SPEEDSCOPE_UNITS.get(p.tick_ns, "nanoseconds")
            scale = 1 if p.tick_ns in SPEEDSCOPE_UNITS else p.tick_ns
            samples, weights = [], []
            for node, v in sorted(node_values(p).items()):
                if v:
                    samples.append([frames.setdefault(k, len(frames)) for k in p.names.keys(node)])
                    weights.append(v * scale)
            profiles.append({"type": "sampled", "name": f"{label}: {p.path}", "unit": unit,
                             "startValue": 0, "endValue": sum(weights), "samples": samples,
                             "weights": weights})
        doc = {"$schema": SCHEMA_URL, "name": f"psrec diff {base.path} {profile.path}",
               "activeProfileIndex": 1, "exporter": f"psrec {psrec_version()}",
               "profiles": profiles, "shared": {"frames": [speedscope_frame(k) for k in frames]}}
        json.dump(doc, out)
        out.write("\n")
        return f"2 profiles, {len(frames):,} frames"
