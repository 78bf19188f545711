"""The analyzer's shared types, which import nothing else of it: report keys (FrameKey), the
cells a profile sums its samples into, a thread's runs in time order, the samples a view
selects once resolved against a recording (Selection), and what the walks over stacks read of
a profile (Stacks).

The engine (engine.py), the walks (walks.py), the loading and the Profile model all use these:
they live here so that none of those imports another to name them.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, Union

if TYPE_CHECKING:
    from psrec.format.reader import Definitions

__all__ = [
    "CELL_COLUMNS",
    "CELL_KEYS",
    "CELL_SUMS",
    "NO_STACK",
    "TRUNCATED_KEY",
    "Cell",
    "CellColumn",
    "CellColumns",
    "Column",
    "FrameKey",
    "Names",
    "Runs",
    "Selection",
    "Stacks",
]


class FrameKey(NamedTuple):
    """What a report groups by: a function (line = its first line) or a line of a function."""

    filename: str
    line: int
    name: str
    native: bool = False  # a native recording's C/C++/Rust function (filename: its binary)


NO_STACK = FrameKey("<psrec>", 0, "[no Python stack]")
TRUNCATED_KEY = FrameKey("<psrec>", 0, "[truncated stack]")


class CellColumn(NamedTuple):
    """One column of the cells a profile sums its samples into."""

    name: str
    typecode: str  # of the array that holds it
    help: str


# The cells' columns, declared once: what a cell is summed by (CELL_KEYS), then what it sums
# (CELL_SUMS), in the order the engines give them (the Python twin of the native
# Accumulator's columns, analyzer/native/accumulator.hpp). Cell and CellColumns name them,
# in this order (tests/unit/test_cell_columns.py checks).
# Slices are 64-bit: a recording's timestamps span up to 2^63 ticks.
CELL_KEYS: tuple[CellColumn, ...] = (
    CellColumn("slice", "Q", "the time slice (0: the view is not sliced)"),
    CellColumn("thread", "I", "the thread's ref"),
    CellColumn("node", "I", "the stack's node in the trie"),
)
CELL_SUMS: tuple[CellColumn, ...] = (
    CellColumn("samples", "Q", "samples counted"),
    CellColumn("weight", "Q", "the ticks they stand for"),
    CellColumn("cpu", "Q", "CPU ticks (spec section 5: those a filter keeps go to a sample)"),
    CellColumn("gil", "Q", "samples holding the GIL"),
    CellColumn("on_cpu", "Q", "samples on a CPU"),
)
CELL_COLUMNS = CELL_KEYS + CELL_SUMS


class Cell(NamedTuple):
    """One cell (CELL_COLUMNS)."""

    slice: int
    thread: int
    node: int
    samples: int
    weight: int  # ticks
    cpu: int  # CPU ticks
    gil: int  # samples holding the GIL
    on_cpu: int  # samples on a CPU


# A column of integers: an array, or a read-only view of the native engine's own memory.
Column = Union["array[int]", memoryview]


@dataclass
class CellColumns:
    """The cells as columns (CELL_COLUMNS), for native aggregation over many cells (one per
    slice). From the native engine they are views of its memory, not copies."""

    slice: Column
    thread: Column
    node: Column
    samples: Column
    weight: Column
    cpu: Column
    gil: Column
    on_cpu: Column

    TYPES = tuple(c.typecode for c in CELL_COLUMNS)

    @classmethod
    def from_cells(cls, cells: list[tuple[int, ...]]) -> CellColumns:
        columns = list(zip(*cells)) or [()] * len(cls.TYPES)
        return cls(*(array(t, values) for t, values in zip(cls.TYPES, columns)))

    def columns(self) -> tuple[Column, ...]:
        """Every column, in CELL_COLUMNS' order."""
        return tuple(getattr(self, c.name) for c in CELL_COLUMNS)

    def __len__(self) -> int:
        return len(self.node)

    def cells(self) -> list[Cell]:
        return list(map(Cell._make, zip(*self.columns())))


@dataclass
class Runs:
    """One thread's selected samples in time order, consecutive equal stacks merged.

    Columns are arrays, or read-only memoryviews of the native timeline's own (no copy).
    """

    node: array[int] | memoryview
    count: array[int] | memoryview
    weight: array[int] | memoryview
    cpu: array[int] | memoryview
    first_ts: array[int] | memoryview
    # each run's status bits under the query's split_mask (a run ends where they change);
    # None: not kept (every run in one state)
    state: array[int] | memoryview | None = None

    def __len__(self) -> int:
        return len(self.node)


# A window's bounds where the view gives none: timestamps are 64-bit, and the window's end is
# exclusive (as the native engine's AccumulatorQuery has them).
FIRST_TS, END_TS = -(1 << 63), (1 << 63) - 1


@dataclass(frozen=True)
class Selection:
    """The samples a view selects, as a Profile resolved its words against the recording: a
    window in ticks (from_ts inclusive, to_ts exclusive; None: open), the threads by ref (None:
    every thread), and a status filter (a sample counts where status & status_mask ==
    status_value; cpu_view: the CPU view's rule for the CPU time of samples it does not count,
    spec section 5). Every read of the profile's samples selects by it: the engine's sums and
    timelines (``query()``), and the API's rows (``selects``)."""

    from_ts: int | None = None
    to_ts: int | None = None
    threads: tuple[int, ...] | None = None
    status_mask: int = 0
    status_value: int = 0
    cpu_view: bool = False
    # asyncio tasks (TASK ids): only samples of threads running one of them (None: any)
    tasks: tuple[int, ...] | None = None
    # the window with its open ends closed, and the threads as a set: what selects() reads
    _lo: int = field(default=FIRST_TS, init=False, repr=False, compare=False)
    _hi: int = field(default=END_TS, init=False, repr=False, compare=False)
    _refs: frozenset[int] | None = field(default=None, init=False, repr=False, compare=False)
    _tasks: frozenset[int] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.from_ts is not None:
            object.__setattr__(self, "_lo", self.from_ts)
        if self.to_ts is not None:
            object.__setattr__(self, "_hi", self.to_ts)
        if self.threads is not None:
            object.__setattr__(self, "threads", tuple(self.threads))
            object.__setattr__(self, "_refs", frozenset(self.threads))
        if self.tasks is not None:
            object.__setattr__(self, "tasks", tuple(self.tasks))
            object.__setattr__(self, "_tasks", frozenset(self.tasks))

    def selects(self, ts: int, thread: int, task: int = 0) -> bool:
        """The window, thread and task rule (native: AccumulatorQuery::fate's first tests): a
        sample is in the selection, whatever its status, where its time is in the window, its
        thread is one of the selection's and, where the selection names tasks, the thread was
        running one of them."""
        return (self._lo <= ts < self._hi and (self._refs is None or thread in self._refs)
                and (self._tasks is None or task in self._tasks))

    def counts(self, status: int) -> bool:
        """The status filter: a selected sample with this status is counted."""
        return status & self.status_mask == self.status_value

    def under(self, status_mask: int = 0, status_value: int = 0,
              cpu_view: bool = False) -> Selection:
        """The same window and threads under another status filter (none given: every
        sample)."""
        return replace(self, status_mask=status_mask, status_value=status_value,
                       cpu_view=cpu_view)

    def query(self) -> dict[str, Any]:
        """The native Accumulator's and Timeline's query fields (window, threads, filter)."""
        q: dict[str, Any] = {
            "threads": None if self.threads is None else list(self.threads),
            "tasks": None if self.tasks is None else list(self.tasks),
            "status_mask": self.status_mask, "status_value": self.status_value,
            "cpu_view": self.cpu_view}
        if self.from_ts is not None:
            q["from_ts"] = self.from_ts
        if self.to_ts is not None:
            q["to_ts"] = self.to_ts
        return q


def batch_columns(batch: Any, *names: str) -> list[Any]:
    """Sample columns of a decoded batch by name (spec section 8.1), each as an array: the
    native batch gives their bytes, the reference one arrays."""
    from psrec.format import SAMPLE_COLUMNS

    codes = {c.name: c.typecode for c in SAMPLE_COLUMNS}
    out = []
    for name in names:
        col = getattr(batch, name)
        if isinstance(col, (bytes, bytearray)):
            a = array(codes[name])
            a.frombytes(col)
            col = a
        out.append(col)
    return out


class Names(Protocol):
    """How stacks are named (stack_names.StackNames): a frame's report key, whether the view
    leaves it out, and a stack's keys and innermost key."""

    def key(self, frame_id: int) -> FrameKey: ...

    def hidden(self, frame_id: int) -> bool: ...

    def keys(self, node: int) -> tuple[FrameKey, ...]: ...

    def leaf(self, node: int) -> FrameKey: ...


class Stacks(Protocol):
    """What the walks over stacks by report key read of a profile (Profile has it all): its
    stack trie, its cells and their values under the view, and its stacks' names."""

    defs: Definitions
    parents: Column  # the stack trie: a node's parent and innermost frame, by node
    frames: Column
    columns: CellColumns

    @property
    def cells(self) -> list[Cell]: ...

    def cell_value(self, c: Cell) -> int: ...

    def value_column(self) -> tuple[Column, int]: ...

    @property
    def names(self) -> Names: ...
