"""Summaries (median and range), the comparison with the best peer, targets, and the table."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PEERS", "Row", "Summary", "render_table", "summarize"]

PEERS = ("py-spy", "austin", "tachyon")


@dataclass
class Summary:
    median: float
    lo: float
    hi: float
    n: int

    def as_dict(self) -> dict[str, Any]:
        return {"median": self.median, "min": self.lo, "max": self.hi, "n": self.n}


def summarize(values: Sequence[float | None]) -> Summary | None:
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return None
    return Summary(statistics.median(vals), min(vals), max(vals), len(vals))


@dataclass
class Row:
    """One line of the table: a measure for psrec and its peers, and psrec's target."""

    figure: str
    measure: str
    unit: str
    better: str  # "higher" | "lower" | "closer0" (closest to zero is best) | "none"
    values: dict[str, Summary | None] = field(default_factory=dict)
    target: str = ""
    check: Callable[[Summary, Summary | None], bool] | None = None
    note: str = ""
    met: bool | None = None
    best_peer: str | None = None
    ratio: float | None = None

    def finish(self) -> Row:
        ps = self.values.get("psrec")
        peers = {k: v for k, v in self.values.items() if k != "psrec" and v is not None}
        best: tuple[str, Summary] | None = None
        if peers and self.better != "none":
            if self.better == "higher":
                best = max(peers.items(), key=lambda kv: kv[1].median)
            elif self.better == "lower":
                best = min(peers.items(), key=lambda kv: kv[1].median)
            else:
                best = min(peers.items(), key=lambda kv: abs(kv[1].median))
        if best is not None:
            self.best_peer = best[0]
            b = best[1].median
            if ps is not None and b != 0:
                if self.better == "closer0":
                    self.ratio = abs(ps.median) / abs(b)
                elif self.better == "higher" or (b > 0 and ps.median >= 0):
                    self.ratio = ps.median / b
        if self.check is not None:
            self.met = None if ps is None else bool(self.check(ps, best[1] if best else None))
        return self

    def as_dict(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "measure": self.measure,
            "unit": self.unit,
            "better": self.better,
            "values": {k: (v.as_dict() if v else None) for k, v in self.values.items()},
            "best_peer": self.best_peer,
            "ratio_psrec_to_best_peer": self.ratio,
            "target": self.target,
            "met": self.met,
            "note": self.note,
        }


def fmt_num(x: float) -> str:
    a = abs(x)
    if a == 0:
        return "0"
    if a >= 1e6:
        return f"{x / 1e6:.2f}M"
    if a >= 1e4:
        return f"{x / 1e3:.1f}k"
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def fmt_summary(s: Summary | None, missing: str = "—") -> str:
    if s is None:
        return missing
    if s.n == 1 or s.lo == s.hi:
        return fmt_num(s.median)
    return f"{fmt_num(s.median)} [{fmt_num(s.lo)}–{fmt_num(s.hi)}]"


def render_table(rows: list[Row], unavailable: dict[str, str]) -> str:
    head = ("| # | measure | unit | psrec | py-spy | Austin | Tachyon | psrec ÷ best peer "
            "| target (psrec) | met |")  # closer0 rows compare absolute values
    out = [head, "|" + "---|" * 10]
    for r in rows:
        cells = []
        for tool in ("psrec", *PEERS):
            cells.append(fmt_summary(r.values.get(tool), unavailable.get(tool, "—")
                                     if tool in r.values else "—"))
        ratio = "—"
        if r.ratio is not None and r.best_peer:
            ratio = f"{r.ratio:.2f}× ({r.best_peer})"
        met = {True: "met", False: "**not met**", None: "—" if not r.target else "n/a"}[r.met]
        measure = r.measure + (f" ({r.note})" if r.note else "")
        out.append(f"| {r.figure} | {measure} | {r.unit} | " + " | ".join(cells)
                   + f" | {ratio} | {r.target or '—'} | {met} |")
    return "\n".join(out)
