"""SampleStream: a recording's DATA chunks decoded one at a time into sample batches, within
a time window and the file's budgets (spec section 9.3), each chunk's samples counted once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from . import _constants as C
from ._budgets import BUDGET_ENV, Budgets
from ._codec import HAVE_NATIVE, BudgetError, DecodeError, chunk_seq, over_budget
from ._model import ChunkInfo, where
from .errors import FormatError
from .reference import RefBatch, RefDecodeError, RefDecoder

if HAVE_NATIVE:
    from . import _format as native_codec

__all__ = ["SampleStream", "StreamSource"]


class StreamSource(Protocol):
    """What a SampleStream reads of its recording (reader.Recording has it all): the chunks,
    the file's budgets, and where a stream says what it skipped. Declared here so that this
    module needs nothing of the reader, which makes the streams."""

    file_size: int
    renamed: set[int] | None
    budgets: Budgets
    budget_stop: str | None
    spans: dict[int, tuple[int, int, int]]

    @property
    def interval_ticks(self) -> int: ...

    @property
    def max_records(self) -> int: ...

    def data_chunks(self, from_ts: int | None = None,
                    to_ts: int | None = None) -> list[ChunkInfo]: ...

    def payload(self, info: ChunkInfo) -> bytes | None: ...

    def _skipped(self, info: ChunkInfo, msg: str) -> None: ...

    def _warn(self, msg: str, always: bool = False) -> None: ...

    def _chunk_renames(self, info: ChunkInfo, native: bool
                       ) -> tuple[int | None, list[tuple[int, int, int, int, int]]] | None: ...


class SampleStream:
    """Decodes a recording's data chunks one at a time into sample batches.

    Iterating yields the same batch object, refilled for each chunk: use it before the next.
    Events of every decoded chunk accumulate in ``events``; the stack trie in the decoder.
    """

    def __init__(
        self, rec: StreamSource, from_ts: int | None, to_ts: int | None, native: bool | None
    ) -> None:
        self.rec = rec
        self.from_ts, self.to_ts = from_ts, to_ts
        use_native = HAVE_NATIVE if native is None else native
        if use_native and not HAVE_NATIVE:
            raise FormatError("the native codec is not available")
        self.native = use_native
        cap = rec.interval_ticks * C.WEIGHT_CAP_INTERVALS
        if use_native:
            self.decoder: Any = native_codec.Decoder(cap, rec.interval_ticks)
            self.batch: Any = native_codec.SampleBatch()
        else:
            self.decoder = RefDecoder(cap, rec.interval_ticks)
            self.batch = RefBatch()
        self.events: list[tuple[int, int, int, int, int]] = []
        # THREAD_RENAME events of the data chunks a window skips: a thread's name can arrive
        # in a chunk before the window (threading names a thread after it starts), and every
        # window must show the names the whole recording gives. Found without decoding the
        # skipped chunks' samples.
        self.outside_renames: list[tuple[int, int, int, int, int]] = []
        self.summaries: list[dict[str, int]] = []
        self.errors = 0
        self.duplicates = 0  # data chunks skipped: their sequence number came before
        self._seqs: dict[int, int] = {}  # sequence number -> offset of its chunk
        # Read with other files of its recording (format.merged): the sequence numbers of the
        # chunks of samples they gave, and the chunks and samples of this file skipped as
        # theirs (a snapshot and the recording it was taken from, a window and the whole).
        self.shared_seqs: set[int] | None = None
        self.given_twice = self.given_twice_samples = 0
        self.current: ChunkInfo | None = None  # the chunk of the batch yielded last

    def __iter__(self) -> Iterator[Any]:
        first_duplicate: tuple[int, int, int] | None = None
        inside = {c.offset for c in self.rec.data_chunks(self.from_ts, self.to_ts)}
        outside_seqs: set[int] = set()
        every = self.rec.data_chunks()
        budgets = self.rec.budgets
        raw = 0  # uncompressed bytes of the DATA chunks read
        renamed = self.rec.renamed
        for n, info in enumerate(every):
            if info.offset not in inside and renamed is not None and info.offset not in renamed:
                continue  # outside the window, and the index says it renames no thread
            # The whole file's budgets (spec section 9.3): reading stops at the chunk that
            # would go past one, before it is decompressed when its header tells.
            raw += info.raw_length
            if raw > budgets.data_raw:
                self._stop(info, n, len(every), "uncompressed bytes of DATA chunks",
                           budgets.data_raw)
                break
            if info.offset not in inside:
                self._renames_outside(info, outside_seqs)
                continue
            payload = self.rec.payload(info)
            if payload is None:
                continue
            # A chunk whose sequence number an earlier chunk had is that chunk written twice
            # (its checksums hold): its samples are counted once.
            seq = chunk_seq(payload)
            if seq is not None and seq in self._seqs:
                self.duplicates += 1
                if first_duplicate is None:
                    first_duplicate = (info.offset, seq, self._seqs[seq])
                continue
            self.batch.clear()
            try:
                events, summary = self.decoder.decode_data(
                    payload, self.batch, max(0, self.rec.max_records - len(self.events)),
                    budgets.nodes, budgets.threads)
            except BudgetError as exc:
                self.batch.clear()
                self._stop(info, n, len(every), *over_budget(exc))
                break
            except (DecodeError, RefDecodeError) as exc:
                self.rec._skipped(info, f"{where(info)} is malformed ({exc}); skipped")
                self.batch.clear()
                continue
            if seq is not None:
                self._seqs[seq] = info.offset
                if self.shared_seqs is not None and summary["passes"]:
                    if seq in self.shared_seqs:
                        self.given_twice += 1
                        self.given_twice_samples += len(self.batch)
                        self.batch.clear()
                        continue
                    self.shared_seqs.add(seq)
            self.events.extend(events)
            self.summaries.append(summary)
            self.errors += summary["errors"]
            self.rec.spans[info.offset] = (summary["first_ts"], summary["last_ts"],
                                           summary["passes"])
            self.current = info
            yield self.batch
        if first_duplicate is not None:
            off, seq, earlier = first_duplicate
            n = self.duplicates
            msg = (f"{n} DATA chunk{'s' if n > 1 else ''} repeat{'' if n > 1 else 's'} the "
                   f"sequence number of an earlier one (first: the chunk at byte {off}, "
                   f"sequence number {seq}, as the chunk at byte {earlier}); each sequence "
                   "number was counted once")
            self.rec._warn(msg)

    def _stop(self, info: ChunkInfo, n: int, total: int, what: str, budget: int) -> None:
        """Says, once for the file, that reading stopped at a budget, and how to lift it."""
        msg = (f"reading stopped at the {where(info)}: it would take the file past its budget "
               f"of {budget:,} {what} (a file of {self.rec.file_size:,} bytes, "
               f"spec section 9.3); {n:,} of {total:,} data chunks were read. For a file you "
               f"trust, {BUDGET_ENV}=10 raises the budgets tenfold, {BUDGET_ENV}=unlimited "
               "lifts them")
        self.rec.budget_stop = msg
        self.rec._warn(msg, always=True)

    def _renames_outside(self, info: ChunkInfo, seqs: set[int]) -> None:
        """The renames of a data chunk the window skips, into outside_renames. A chunk that
        cannot be read is left out without a word, as Recording.thread_renames does: it holds
        no sample of the window."""
        found = self.rec._chunk_renames(info, self.native)
        if found is None:
            return
        seq, renames = found
        if seq is not None:
            if seq in seqs:
                return
            seqs.add(seq)
        if len(renames) <= self.rec.max_records - len(self.events) - len(self.outside_renames):
            self.outside_renames.extend(renames)
