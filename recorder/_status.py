"""The live status line `psrec record` draws on a terminal (stderr) while it records."""

from __future__ import annotations

import os
import time
from typing import Any, TextIO

__all__ = ["StatusLine"]


def _human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


class StatusLine:
    """The live status line on a terminal, redrawn in place. It is kept narrower than the
    terminal: a line that wraps leaves one more line behind at every redraw. The least useful
    fields are left out first."""

    def __init__(self, stream: TextIO, enabled: bool) -> None:
        self.stream = stream
        self.enabled = enabled
        self.last = 0.0
        self.width = 0  # the widest line drawn so far: the next one blanks out what it leaves

    def _room(self) -> int:
        """Characters a line may take: one less than the terminal's width (COLUMNS when set,
        as for shutil.get_terminal_size, else the stream's own terminal, asked at every redraw
        so that a resize is followed), so that the cursor never reaches the last column."""
        try:
            columns = int(os.environ.get("COLUMNS", ""))
        except ValueError:
            columns = 0
        if columns <= 0:
            try:
                columns = os.get_terminal_size(self.stream.fileno()).columns
            except (AttributeError, OSError, ValueError):
                columns = 0
        return max(1, (columns if columns > 0 else 80) - 1)

    def update(self, st: dict[str, Any], size: int, force: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (not force and now - self.last < 0.25):
            return
        self.last = now
        elapsed = st["elapsed_ns"] / 1e9
        rate = st["passes"] / elapsed if elapsed > 0 else 0.0
        total = st["samples"] + st["sample_errors"]
        err = 100.0 * st["sample_errors"] / total if total else 0.0
        # (usefulness, text) in the order shown; 0 is kept longest.
        fields = [
            (0, f"{elapsed:7.1f} s"),
            (1, f"{st['samples']:>10,} samples"),
            (2, f"{rate:8.1f} Hz"),
            (3, f"{err:5.2f}% errors"),
            (4, f"{st['live_threads']:>3} threads"),
            (5, _human_bytes(size)),
        ]
        room = self._room()
        line = "psrec: " + "  ".join(text for _, text in fields)
        while len(line) > room and len(fields) > 1:
            fields.remove(max(fields))
            line = "psrec: " + "  ".join(text for _, text in fields)
        line = line[:room]
        self.width = max(self.width, len(line))
        self.stream.write("\r" + line.ljust(min(self.width, room)))
        self.stream.flush()

    def clear(self) -> None:
        if self.enabled and self.width:
            self.stream.write("\r" + " " * min(self.width, self._room()) + "\r")
            self.stream.flush()
