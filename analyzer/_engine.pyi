"""Types of the analyzer's native engine (analyzer/bindings/module.cpp), for type checkers.

Buffer arguments take anything with the buffer protocol (bytes, array.array, memoryview)
holding one-dimensional columns of the element type named. Batches are the codec's
(psrec.format._format.SampleBatch).
"""

from collections.abc import Sequence

from psrec.format._format import SampleBatch
from typing_extensions import Buffer

class Accumulator:
    def __init__(
        self,
        from_ts: int = -9223372036854775808,
        to_ts: int = 9223372036854775807,
        threads: Sequence[int] | None = None,
        status_mask: int = 0,
        status_value: int = 0,
        slice_origin: int = 0,
        slice_ticks: int = 0,
        cpu_view: bool = False,
        by_node: bool = True,
        tasks: Sequence[int] | None = None,
    ) -> None: ...
    def add(self, arg: SampleBatch, /) -> None: ...
    @property
    def selected(self) -> int: ...
    @property
    def first_ts(self) -> int: ...
    @property
    def last_ts(self) -> int: ...
    @property
    def slice_overflow(self) -> bool: ...
    def cells(self) -> list[tuple[int, int, int, int, int, int, int, int]]: ...
    def columns(
        self,
    ) -> tuple[
        memoryview, memoryview, memoryview, memoryview, memoryview, memoryview, memoryview,
        memoryview,
    ]: ...

class Timeline:
    def __init__(
        self,
        from_ts: int = -9223372036854775808,
        to_ts: int = 9223372036854775807,
        threads: Sequence[int] | None = None,
        status_mask: int = 0,
        status_value: int = 0,
        cpu_view: bool = False,
        split_at_gaps: bool = False,
        split_mask: int = 0,
        tasks: Sequence[int] | None = None,
    ) -> None: ...
    def add(self, arg: SampleBatch, /) -> None: ...
    @property
    def selected(self) -> int: ...
    def threads(self) -> list[int]: ...
    def runs(self, arg: int, /) -> tuple[bytes, bytes, bytes, bytes, bytes, bytes]: ...
    def runs_view(
        self, arg: int, /
    ) -> tuple[memoryview, memoryview, memoryview, memoryview, memoryview, memoryview]: ...

class StackKeys:
    def __init__(
        self, parents: Buffer, frames: Buffer, frame_key: Buffer, empty_key: int
    ) -> None: ...
    @property
    def key_count(self) -> int: ...
    def keys(self, arg: int, /) -> list[int]: ...

def key_totals(
    keys: StackKeys,
    node: Buffer,
    count: Buffer,
    value: Buffer,
    value_scale: int = 1,
    thread: Buffer | None = None,
    only: int = 0,
) -> tuple[bytes, bytes, bytes, bytes]: ...
def key_edges(
    keys: StackKeys,
    node: Buffer,
    count: Buffer,
    value: Buffer,
    value_scale: int = 1,
    thread: Buffer | None = None,
    only: int = 0,
) -> tuple[bytes, bytes, bytes, bytes, bytes]: ...
def slice_sums(
    arg0: StackKeys,
    arg1: Buffer,
    arg2: Buffer,
    arg3: Buffer,
    arg4: Buffer,
    arg5: Buffer,
    arg6: Buffer,
    arg7: Buffer,
    arg8: int,
    /,
) -> tuple[bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes]: ...

def group_sums(
    sources: Sequence[tuple[Buffer, Buffer, Buffer, Buffer]],
    factor: int = 1,
    by_node: bool = True,
) -> tuple[bytes, bytes, bytes, bytes]: ...
class SpeedscopeText:
    def __init__(self, arg: StackKeys, /) -> None: ...
    def set_thread(
        self,
        node: Buffer,
        count: Buffer,
        weight: Buffer,
        cpu: Buffer,
        first_ts: Buffer,
        value: str,
        count_mult: int,
        scale: int,
    ) -> None: ...
    def keys_in_order(self) -> list[int]: ...
    @property
    def kept(self) -> int: ...
    @property
    def total(self) -> int: ...
    @property
    def samples(self) -> int: ...
    @property
    def start(self) -> int: ...
    def samples_chunk(self, arg: int, /) -> str: ...
    def weights_chunk(self, arg: int, /) -> str: ...
