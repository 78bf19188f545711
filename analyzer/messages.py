"""What a loaded profile tells its user when it cannot be shown: a view that selects no sample
(and what to try instead), and time slices too many to write. The words that name a view's
window are here too, for those messages and the reports' headers.

Profile.load (profile.py) raises these; the errors a view's words meet as they are resolved
against the recording are raised where that happens (view.py, loading.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .loading import round_up
from .model import Selection
from .view import MAX_SLICES, View, ViewUsageError

__all__ = ["check_slices", "nothing_help", "nothing_selected", "window_text"]


def window_text(selection: Selection, seconds: Callable[[float], float]) -> str:
    """The selection's window in seconds from the start ("start .. 2.500 s")."""
    a = "start" if selection.from_ts is None else f"{seconds(selection.from_ts):.3f} s"
    b = "end" if selection.to_ts is None else f"{seconds(selection.to_ts):.3f} s"
    return f"{a} .. {b}"


def nothing_selected(path: str, view: View, selection: Selection, extent: tuple[int, int],
                     total: int, seconds: Callable[[float], float]) -> str:
    """Why a view selected no sample of a recording that had `total` in the chunks read, and
    whose samples span `extent` (first and last times; -1: not known)."""
    windowed = selection.from_ts is not None or selection.to_ts is not None
    if total == 0 and not windowed:
        return f"{path}: the recording holds no samples"
    first, last = extent
    if first >= 0 and (
        (selection.from_ts is not None and selection.from_ts > last)
        or (selection.to_ts is not None and selection.to_ts <= first)
    ):
        return (
            f"the window {window_text(selection, seconds)} is outside the recording, whose "
            f"samples run from {seconds(first):.3f} s to {seconds(last):.3f} s"
        )
    parts = [f"mode {view.mode}"]
    if view.threads:
        parts.append("thread " + ", ".join(view.threads))
    if view.tasks:
        parts.append("task " + ", ".join(view.tasks))
    if view.pids:
        parts.append("pid " + ", ".join(map(str, view.pids)))
    if view.processes:
        parts.append("process " + ", ".join(view.processes))
    if view.hosts:
        parts.append("host " + ", ".join(view.hosts))
    if view.recordings:
        parts.append("recording " + ", ".join(view.recordings))
    if windowed:
        parts.append(f"window {window_text(selection, seconds)}")
    return f"no samples match the selection ({'; '.join(parts)}) in {path}"


def nothing_help(view: View, selection: Selection, total: int) -> str | None:
    """What to try where a view selected no sample."""
    if total == 0 and selection.from_ts is None and selection.to_ts is None:
        return "record for longer, or check that the target ran Python code"
    if not view.mode_record.every_sample:
        return "try --mode wall, or widen the window or the thread selection"
    return "widen the window or the thread selection (psrec info shows what the file holds)"


def check_slices(slices: Any, slice_ticks: int, seconds: Callable[[float], float],
                 overflow: bool) -> None:
    """The time-sliced views write a row for every slice from the earliest sample's to the
    latest's: their number is bounded by the samples' extent, and refused beyond
    MAX_SLICES (two samples years apart in a file of a few hundred bytes made 8M rows).
    slices: the cells' slice column; overflow: the accumulator found samples more than 2^31
    slices apart."""
    if not slices:
        return
    first, last = min(slices), max(slices)
    n = last - first + 1
    if n <= MAX_SLICES and not overflow:
        return
    span = seconds((last - first) * slice_ticks)
    least = round_up(span / (MAX_SLICES - 1))
    rows = f"more than {2**31:,}" if overflow else f"{n:,}"
    raise ViewUsageError(
        f"--slices: slices of {seconds(slice_ticks):g} s would make {rows} rows "
        f"over the {span:,.3f} s the samples span, more than {MAX_SLICES:,}",
        help=f"give slices of at least {least:g} s, or a window with --from and --to",
    )
