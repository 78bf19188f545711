"""psrec's Python API, for notebooks and scripts: a recording read under a view.

    import psrec

    run = psrec.load("run.psr", mode="cpu", start="2s", end="5s")
    run.threads                    # the recording's threads by ref (names, ids, process)
    run.totals()                   # own and total per function, as `psrec report` shows them
    s = run.samples                # one row per thread-sample in the window and threads
    run.stack(s.stack[0])          # that sample's frames, root first
    run.to_pandas()                # the samples as a pandas DataFrame (pandas installed)

The view's window, threads and processes select the samples; its mode (wall, cpu, gil, idle),
weights and grouping apply to ``totals()`` and to ``profile``, as they do to the reports. The
samples carry each thread-sample's own GIL and CPU state: select on those as you need.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Any

from psrec.format import Frame, PsrecError, ThreadInfo, open_recording
from psrec.format import constants as C

from .profile import FrameKey, Profile
from .view import View
from .walks import Totals

__all__ = ["Run", "Samples", "load"]


@dataclass
class Samples:
    """Columns of equal length, one row per thread-sample, in time order per chunk.

    time: seconds from the start of the recording; thread: the thread's ref (``Run.threads``);
    stack: the stack's id (``Run.stack``; 0: no Python stack); gil and on_cpu: 1 held / on a
    CPU, 0 not, -1 not known; cpu_ns: CPU time the thread used since its previous sample
    (where recorded); weight_ns: the wall time the sample stands for.
    """

    time: array[float]
    thread: array[int]
    stack: array[int]
    gil: array[int]
    on_cpu: array[int]
    cpu_ns: array[int]
    weight_ns: array[int]

    def __len__(self) -> int:
        return len(self.time)


def _state(status: int, bit: int, unknown: int) -> int:
    return -1 if status & unknown else int(bool(status & bit))


class Run:
    """A recording under a view (see ``load``)."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self._samples: Samples | None = None
        self._parents: Any = None
        self._frames: Any = None

    @property
    def path(self) -> str:
        return self.profile.path

    @property
    def metadata(self) -> dict[str, Any]:
        """What the recorder wrote of the target and the recording (spec, section 2)."""
        return self.profile.metadata

    @property
    def threads(self) -> dict[int, ThreadInfo]:
        """Every thread of the recording, by ref (the samples' ``thread`` column)."""
        return self.profile.threads

    def totals(self, thread: int | None = None) -> dict[FrameKey, Totals]:
        """Own and total samples and time (in ticks: ``seconds()``) per function or line, of
        the view, for one thread (a ref) or all: the numbers of ``psrec report``'s table."""
        return self.profile.walks.totals(thread)

    def seconds(self, ticks: float) -> float:
        return self.profile.seconds(ticks)

    @property
    def samples(self) -> Samples:
        """The thread-samples of the view's window, threads and processes (read on first
        use; one more pass over the file)."""
        if self._samples is None:
            self._samples = self._read_samples()
        return self._samples

    def stack(self, stack_id: int) -> list[Frame]:
        """The frames of a sample's stack, root first (empty for 0, no Python stack)."""
        self.samples  # noqa: B018  (the ids are those of the pass that read the samples)
        defs = self.profile.defs
        out = []
        node = stack_id if 0 <= stack_id < len(self._parents) else 0
        while node:
            out.append(defs.frame(self._frames[node]))
            parent = self._parents[node]
            node = parent if parent < node else 0
        out.reverse()
        return out

    def to_pandas(self) -> Any:
        """The samples as a pandas DataFrame, with each thread's name beside its ref."""
        try:
            import pandas as pd
        except ImportError:
            raise PsrecError("to_pandas() needs pandas, which is not installed",
                             help="pip install pandas") from None
        s = self.samples
        names = {ref: t.label for ref, t in self.threads.items()}
        return pd.DataFrame({
            "time": s.time, "thread": s.thread,
            "thread_name": [names.get(r, f"thread ref {r}") for r in s.thread],
            "stack": s.stack, "gil": s.gil, "on_cpu": s.on_cpu, "cpu_ns": s.cpu_ns,
            "weight_ns": s.weight_ns,
        })

    def _read_samples(self) -> Samples:
        p = self.profile
        wanted = None if p.selected_threads is None else set(p.selected_threads)
        lo = p.from_ts if p.from_ts is not None else -(1 << 63)
        hi = p.to_ts if p.to_ts is not None else 1 << 63
        tick_ns = p.tick_ns
        out = Samples(array("d"), array("I"), array("I"), array("b"), array("b"), array("Q"),
                      array("Q"))
        with open_recording(p.path) as rec:
            stream = rec.stream(p.from_ts, p.to_ts, native=p.native)
            for batch in stream:
                cols = []
                for name, code in (("ts", "q"), ("thread", "I"), ("node", "I"),
                                   ("status", "B"), ("cpu", "I"), ("weight", "I")):
                    col = getattr(batch, name)
                    if isinstance(col, (bytes, bytearray)):
                        a = array(code)
                        a.frombytes(col)
                        col = a
                    cols.append(col)
                for ts, ref, node, status, cpu, weight in zip(*cols):
                    if not lo <= ts < hi or (wanted is not None and ref not in wanted):
                        continue
                    out.time.append(ts * tick_ns / 1e9)
                    out.thread.append(ref)
                    out.stack.append(node)
                    out.gil.append(_state(status, C.STATUS_GIL_HELD, C.STATUS_GIL_UNKNOWN))
                    out.on_cpu.append(_state(status, C.STATUS_ON_CPU, C.STATUS_CPU_UNKNOWN))
                    out.cpu_ns.append(cpu * tick_ns)
                    out.weight_ns.append(weight * tick_ns)
            self._parents = array("I", stream.decoder.trie_parents())
            self._frames = array("I", stream.decoder.trie_frames())
        return out


def load(path: str, mode: str = "wall", *, threads: tuple[str, ...] = (),
         pids: tuple[int, ...] = (), processes: tuple[str, ...] = (), start: str | None = None,
         end: str | None = None, weights: str = "time", by: str = "function",
         native: bool | None = None) -> Run:
    """Reads a recording under a view: the options of ``psrec report`` (mode; threads by id or
    name; pids; processes by command-line text; start and end as seconds from the start or
    wall-clock times; weights time or count; by function or line). Raises PsrecError (with a
    message that says what to do) for a file or a view it cannot read."""
    view = View(mode=mode, threads=tuple(threads), pids=tuple(pids),
                processes=tuple(processes), start=start, end=end, weights=weights, by=by)
    return Run(Profile.load(path, view, native=native))
