"""`psrec diff BASE NEW`: which functions (or lines) took a larger or smaller share of the time
in one recording than in another, under the same view.

Shares, not times, are compared: two runs seldom last as long, and a share is what a reader of
either report sees. Each function's share of its own recording's total (own: on top of the
stack; total: anywhere on it) is taken from the engine's walks (``Profile.walks.totals``), and
the change comes with a two-proportion z score from the sample counts, as a guide to whether
the change is larger than sampling alone would make it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import IO, Any

from .profile import FrameKey, Profile
from .registry import Reporter, register
from .reporters import location, printable
from .walks import Totals

__all__ = ["DiffReporter", "DiffRow", "diff_rows"]

SORTS = ("own", "total", "z")


@dataclass
class DiffRow:
    key: FrameKey
    base: Totals
    new: Totals
    base_own: float  # share of the base recording's total value, 0..1
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


def diff_rows(base: Profile, new: Profile, sort: str = "own") -> list[DiffRow]:
    """A row per function (or line) either recording has, largest change first."""
    if sort not in SORTS:
        raise ValueError(f"sort must be one of {', '.join(SORTS)}")
    a, b = base.walks.totals(), new.walks.totals()
    value_a, value_b = base.total_value or 1, new.total_value or 1
    rows = []
    for key in dict.fromkeys([*a, *b]):
        ta, tb = a.get(key, Totals()), b.get(key, Totals())
        if sort == "total":
            z = _z(ta.total_count, base.selected, tb.total_count, new.selected)
        else:
            z = _z(ta.own_count, base.selected, tb.own_count, new.selected)
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


@register
class DiffReporter(Reporter):
    """The diff table. Written for the new recording's Profile; options: base (the base
    recording's Profile), sort and limit."""

    name = "diff"
    description = "functions whose share of the time changed most between two recordings"
    command = "diff"

    def write(self, profile: Profile, out: IO[Any]) -> str | None:
        base: Profile = self.options["base"]
        sort = self.options.get("sort", "own")
        limit = int(self.options.get("limit", 25))
        rows = diff_rows(base, profile, sort)
        w = out.write
        w(f"psrec diff\n  base: {printable(base.describe())}\n"
          f"  new:  {printable(profile.describe())}\n")
        w("Shares are of each recording's own total; changes are in percentage points (new "
          "minus base).\nz compares sample counts (own, or total with --sort total): beyond "
          "about 3 it is unlikely to be sampling alone,\nthough samples close in time are not "
          "independent, so read it as a guide.\n\n")
        w(f"{'own %':>22} {'total %':>22} {'own samples':>19} {'z':>7}\n")
        w(f"{'base':>7}{'new':>7}{'change':>8} {'base':>7}{'new':>7}{'change':>8} "
          f"{'base':>9}{'new':>10} {'':>7}  file:line(function)\n")
        shown = rows if limit <= 0 else rows[:limit]
        for r in shown:
            w(f"{_pct(r.base_own):>7}{_pct(r.new_own):>7}{_change(r.own_change):>8} "
              f"{_pct(r.base_total):>7}{_pct(r.new_total):>7}{_change(r.total_change):>8} "
              f"{r.base.own_count:>9,}{r.new.own_count:>10,} {r.z:>7.1f}  {location(r.key)}\n")
        if len(rows) > len(shown):
            w(f"... {len(rows) - len(shown)} more (use -l 0 to show all)\n")
        return f"{len(rows):,} functions compared"
