"""The view modes, declared once: each is one record saying which samples it keeps, how they
are weighed, its words (in a report's header, the HTML page, `--mode`'s help), its key in
`psrec top`, the Pythons that can answer it, and which outputs take it. The `--mode` options,
their help, the status filters (view.STATES) and every check of a mode are made from MODE_TABLE.
"""

from __future__ import annotations

from dataclasses import dataclass

from psrec.format import constants as C

__all__ = ["CPU", "GIL", "GIL_WAIT", "GROUPINGS", "IDLE", "MODES", "MODE_TABLE", "WALL",
           "WEIGHTS", "Mode"]


@dataclass(frozen=True)
class Mode:
    """One view mode."""

    name: str  # as --mode spells it
    # Which samples: a sample is kept where status & status_mask == status_value. Samples
    # whose CPU or GIL state could not be read are left out of the modes that need it.
    status_mask: int
    status_value: int
    # What the view holds, in a report's header and the HTML page's legend.
    help: str
    # What --mode's help says of it (with `since`, where it is given).
    option_help: str
    key: str  # the key that switches `psrec top` to it
    # Which weight: the CPU time used between samples, where it was recorded (spec section
    # 5), rather than the wall time each sample stands for.
    weighs_cpu: bool = False
    # The header's words where the target is free-threaded (no GIL), when they differ.
    free_threaded_help: str | None = None
    # The oldest CPython whose recordings can answer it (None: every one psrec records).
    since: tuple[int, int] | None = None
    # The outputs that take it: a view that keeps every sample's GIL state (all samples, or
    # those on a CPU) leaves it for the output to say. pprof labels every sample by it and
    # takes only these modes; the Firefox export marks the GIL over them.
    keeps_gil_state: bool = False

    @property
    def option_words(self) -> str:
        """`--mode`'s words for it: 'name: what it keeps (recorded on CPython 3.15 and
        later)'."""
        since = "" if self.since is None else (
            f" (recorded on CPython {self.since[0]}.{self.since[1]} and later)")
        return f"{self.name}: {self.option_help}{since}"

    @property
    def every_sample(self) -> bool:
        """The mode keeps every sample: its time is wall time."""
        return self.status_mask == 0


WALL = Mode("wall", 0, 0, "every sample", "every sample", "w", keeps_gil_state=True)
CPU = Mode("cpu", C.STATUS_ON_CPU | C.STATUS_CPU_UNKNOWN, C.STATUS_ON_CPU,
           "samples on a CPU and the CPU time used between samples, weighted by CPU time",
           "samples on a CPU, weighted by the CPU time they consumed where it was recorded",
           "c", weighs_cpu=True, keeps_gil_state=True)
GIL = Mode("gil", C.STATUS_GIL_HELD | C.STATUS_GIL_UNKNOWN, C.STATUS_GIL_HELD,
           "samples holding the GIL", "samples holding the GIL", "g",
           free_threaded_help=("the GIL does not apply: a free-threaded target; samples "
                               "attached to the interpreter"))
IDLE = Mode("idle", C.STATUS_ON_CPU | C.STATUS_CPU_UNKNOWN, 0, "samples off CPU",
            "samples off CPU", "i")
# Waiting to take the GIL: known where the target says so (3.15+ with a GIL; spec 4.1,
# GIL_REQUESTED_KNOWN), whether or not the waiting thread was on a CPU at that moment.
GIL_WAIT = Mode("gil-wait",
                C.STATUS_GIL_REQUESTED | C.STATUS_GIL_REQUESTED_KNOWN | C.STATUS_GIL_HELD
                | C.STATUS_GIL_UNKNOWN,
                C.STATUS_GIL_REQUESTED | C.STATUS_GIL_REQUESTED_KNOWN,
                "samples of threads waiting to take the GIL",
                "samples of threads waiting to take the GIL", "G", since=(3, 15))

# In the order --mode lists them; the first is the default.
MODE_TABLE: tuple[Mode, ...] = (WALL, CPU, GIL, IDLE, GIL_WAIT)
MODES: dict[str, Mode] = {m.name: m for m in MODE_TABLE}

# What a sample weighs besides its mode's rule (--weights; the first is the default): the time
# it stands for, or one sample. And what a report groups frames by (--by).
WEIGHTS = ("time", "count")
GROUPINGS = ("function", "line")
