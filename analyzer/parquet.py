"""`psrec export --parquet DIR RECORDING...`: recordings as one Parquet dataset (spec
parquet.md), for engines made for many of them: DuckDB on one machine, Dask or Spark on many.

Every recording adds one file to each table, named by its recording id (HOST-PID-CREATED-SEQ:
SEQ tells the windows of one recording apart): its samples under
samples/host=HOST/date=YYYY-MM-DD/ (hive partitions: the engines read them as columns), its
stacks, threads and description beside them. A sample carries the time it stands for and the
CPU time psrec's reports give it (the CPU used between two samples of a thread goes to the
earlier when this one is off a CPU and that one was on a CPU: spec section 5), so that summing
them answers as `psrec report` does.

Needs pyarrow (`pip install 'psrec[parquet]'`).
"""

from __future__ import annotations

import datetime as dt
import os
from typing import TYPE_CHECKING, Any

from psrec.format import PsrecError, open_recording, recordings_in
from psrec.format import _constants as C
from psrec.format._layout import SAMPLE_COLUMNS

from .model import NO_STACK

if TYPE_CHECKING:
    from psrec.format.reader import Recording
from .registry import Option, Reporter, register

__all__ = ["ParquetExporter", "SCHEMA_VERSION", "TABLES", "write_dataset"]

SCHEMA_VERSION = 2
TABLES = ("samples", "stacks", "threads", "recordings")
# The samples' row groups: engines read and skip a row group at a time.
ROW_GROUP = 1 << 20
# Columns of few values, dictionary-encoded; those whose statistics let an engine skip row
# groups (a time window, a process, a thread). The rest is written as it is, which is cheaper.
DICTIONARY = ["recording", "pid", "thread", "stack_id", "task"]
STATISTICS = ["ts", "pid", "thread"]


def _arrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise PsrecError("export --parquet needs pyarrow, which is not installed",
                         help="pip install 'psrec[parquet]'") from None
    return pa, pq


def _schemas(pa: Any) -> dict[str, Any]:
    """The tables' columns (spec/parquet.md says what each holds)."""
    return {
        "samples": pa.schema([
            ("recording", pa.dictionary(pa.int32(), pa.string())),
            ("pid", pa.uint32()),
            ("thread", pa.uint32()),
            ("ts", pa.timestamp("ns", tz="UTC")),
            ("wall_ns", pa.int64()),
            ("cpu_ns", pa.int64()),
            ("gil_held", pa.bool_()),
            ("on_cpu", pa.bool_()),
            ("gil_wait", pa.bool_()),
            ("stack_id", pa.uint32()),
            ("task", pa.uint32()),
        ]),
        "stacks": pa.schema([
            ("recording", pa.string()),
            ("stack_id", pa.uint32()),
            ("depth", pa.uint16()),
            ("leaf", pa.bool_()),
            ("function", pa.string()),
            ("file", pa.string()),
            ("first_line", pa.int32()),
            ("line", pa.int32()),
            ("native", pa.bool_()),
            ("outermost", pa.bool_()),
        ]),
        "threads": pa.schema([
            ("recording", pa.string()),
            ("thread", pa.uint32()),
            ("pid", pa.uint32()),
            ("os_tid", pa.uint32()),
            ("python_tid", pa.uint64()),
            ("name", pa.string()),
        ]),
        "recordings": pa.schema([
            ("recording", pa.string()),
            ("host", pa.string()),
            ("pid", pa.uint32()),
            ("command", pa.string()),
            ("python_version", pa.string()),
            ("created", pa.timestamp("ns", tz="UTC")),
            ("rate_hz", pa.float64()),
            ("file", pa.string()),
            ("schema_version", pa.uint16()),
        ]),
    }


def write_dataset(paths: list[str], out_dir: str, force: bool = False) -> tuple[int, int]:
    """Writes the recordings at `paths` into the dataset at out_dir (created; with force, an
    existing one is added to; a recording already in it is replaced). Returns the
    recordings and thread-samples written."""
    pa, pq = _arrow()
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise PsrecError(f"{out_dir} is a file: --parquet writes a folder",
                         help="give a folder name with -o")
    if os.path.isdir(out_dir) and os.listdir(out_dir) and not force:
        if not os.path.isdir(os.path.join(out_dir, "samples")):
            raise PsrecError(f"{out_dir} exists and is not a psrec dataset",
                             help="give a new folder with -o")
        raise PsrecError(f"{out_dir} exists", help="pass --force to add the recordings to it")
    _check_version(pq, out_dir)
    paths = list(dict.fromkeys(os.path.realpath(p) for p in paths))
    os.makedirs(out_dir, exist_ok=True)
    workers = min(len(paths), os.cpu_count() or 1)
    if workers <= 1:
        schemas = _schemas(pa)
        return len(paths), sum(_write_one(pa, pq, schemas, path, out_dir) for path in paths)
    # One recording a process, as many at once as there are CPUs: pyarrow writes a file on
    # one thread, and the recordings are independent.
    from concurrent.futures import ProcessPoolExecutor

    total = 0
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for written, error in pool.map(_write_path, paths, [out_dir] * len(paths)):
            if error is not None:
                raise PsrecError(error[0], help=error[1])
            total += written
    return len(paths), total


def _check_version(pq: Any, out_dir: str) -> None:
    """A dataset of another schema version is not added to: its tables' files would not read
    as one table."""
    folder = os.path.join(out_dir, "recordings")
    names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    for name in names[:1]:
        try:
            found = pq.read_table(os.path.join(folder, name),
                                  columns=["schema_version"])["schema_version"][0].as_py()
        except Exception:  # noqa: BLE001 - a file that does not read says nothing here
            return
        if found != SCHEMA_VERSION:
            raise PsrecError(f"{out_dir} is a dataset of schema version {found}; this psrec "
                             f"writes version {SCHEMA_VERSION}, whose tables differ",
                             help="write a new dataset with -o (export its recordings again)")


def _write_path(path: str, out_dir: str) -> tuple[int, tuple[str, str | None] | None]:
    """_write_one in a worker process: its error as (message, help), which pickles."""
    pa, pq = _arrow()
    try:
        return _write_one(pa, pq, _schemas(pa), path, out_dir), None
    except PsrecError as exc:
        return 0, (str(exc), exc.help)


def _write_one(pa: Any, pq: Any, schemas: dict[str, Any], path: str, out_dir: str) -> int:
    import numpy as np

    with open_recording(path) as rec:
        md = rec.metadata
        defs = rec.definitions()
        host = str(md.get("hostname") or "unknown").replace("/", "_") or "unknown"
        created = rec.header.created_wall_ns
        rid = f"{host}-{md.get('pid', 0)}-{created}-{_first_seq(rec)}"
        tick = rec.tick_ns
        day = dt.datetime.fromtimestamp(created / 1e9, dt.timezone.utc).strftime("%Y-%m-%d")
        part = os.path.join(out_dir, "samples", f"host={host}", f"date={day}")
        for table in ("samples",):
            _remove_old(out_dir, table, rid)
        os.makedirs(part, exist_ok=True)
        stream = rec.stream()
        pending: dict[str, Any] | None = None
        # thread ref -> (its last sample's on-CPU state, where it is: (batch columns, row))
        last: dict[int, tuple[bool, dict[str, Any], int]] = {}
        pids = {ref: t.pid for ref, t in defs.threads.items()}
        used: set[int] = set()
        written = 0
        samples_file = os.path.join(part, f"{rid}.parquet")
        group: list[Any] = []  # tables of the row group being gathered
        with pq.ParquetWriter(samples_file + ".part", schemas["samples"],
                              use_dictionary=DICTIONARY, write_statistics=STATISTICS) as writer:
            def add(cols: dict[str, Any], last_one: bool = False) -> None:
                table = _table(pa, schemas, cols, rid, created, tick, pids)
                if table is not None:
                    group.append(table)
                if group and (last_one or sum(len(t) for t in group) >= ROW_GROUP):
                    writer.write_table(pa.concat_tables(group))
                    group.clear()

            for batch in stream:
                cols = _columns(np, batch, tick)
                _attribute_cpu(np, cols, last)
                used.update(np.unique(cols["node"]).tolist())
                written += len(cols["ts"])
                if pending is not None:
                    add(pending)  # its CPU times are final once the next batch is seen
                pending = cols
            if pending is not None:
                add(pending, last_one=True)
        os.replace(samples_file + ".part", samples_file)
        defs.apply_renames(list(stream.events) + stream.outside_renames)
        parents, frames = stream.decoder.trie_parents(), stream.decoder.trie_frames()
        _write_table(pa, pq, schemas, out_dir, "stacks", rid,
                     _stack_rows(pa, defs, parents, frames, used, rid))
        _write_table(pa, pq, schemas, out_dir, "threads", rid, {
            "recording": [rid] * len(defs.threads),
            "thread": list(defs.threads),
            "pid": [t.pid for t in defs.threads.values()],
            "os_tid": [t.os_tid for t in defs.threads.values()],
            "python_tid": [t.python_tid for t in defs.threads.values()],
            "name": [t.name for t in defs.threads.values()],
        })
        _write_table(pa, pq, schemas, out_dir, "recordings", rid, {
            "recording": [rid], "host": [host], "pid": [int(md.get("pid") or 0)],
            "command": [" ".join(md.get("command") or [])],
            "python_version": [str(md.get("python_version") or "")],
            "created": [created], "rate_hz": [float(md.get("rate_hz") or 0.0)],
            "file": [os.path.abspath(path)], "schema_version": [SCHEMA_VERSION],
        })
        return written


def _first_seq(rec: Recording) -> int:
    """The sequence number of a file's first DATA chunk: the windows of one recording (and
    flight recordings of it taken at other times) begin at others."""
    from psrec.format._codec import chunk_seq

    for info in rec.data_chunks():
        payload = rec.payload(info)
        seq = chunk_seq(payload) if payload is not None else None
        if seq is not None:
            return int(seq)
    return 0


def _remove_old(out_dir: str, table: str, rid: str) -> None:
    """A recording written again replaces its own files (its samples may sit under another
    date than before only if its header changed, which makes it another recording)."""
    root = os.path.join(out_dir, table)
    if not os.path.isdir(root):
        return
    for folder, _, files in os.walk(root):
        for name in files:
            if name == f"{rid}.parquet":
                os.remove(os.path.join(folder, name))


def _columns(np: Any, batch: Any, tick: int) -> dict[str, Any]:
    """The batch's sample columns as numpy arrays (copied: the batch is refilled)."""
    out = {}
    for column in SAMPLE_COLUMNS:  # spec 8.1: each column's array typecode
        src = np.frombuffer(memoryview(getattr(batch, column.name)).cast("B"),
                            dtype=np.dtype(column.typecode))
        out[column.name] = src.astype(np.int64 if column.name in ("cpu", "weight", "ts")
                                      else src.dtype, copy=True)
    out["cpu_owned"] = out["cpu"].copy()
    return out


def _attribute_cpu(np: Any, cols: dict[str, Any],
                   last: dict[int, tuple[bool, dict[str, Any], int]]) -> None:
    """Moves the CPU time of each sample off a CPU whose thread's previous sample was on one
    to that previous sample (spec section 5), also across batches (the previous batch is
    written only after this one is seen)."""
    status, cpu, thread = cols["status"], cols["cpu"], cols["thread"]
    cpu_bits = status & (C.STATUS_ON_CPU | C.STATUS_CPU_UNKNOWN)
    on = cpu_bits == C.STATUS_ON_CPU
    off = cpu_bits == 0
    n = len(thread)
    if not n:
        return
    # A stable sort of 16-bit keys is a radix sort: refs past 65,535 (a file names up to
    # 2^24 threads) are ranked first.
    keys = thread if int(thread.max()) <= 0xFFFF else np.unique(thread, return_inverse=True)[1]
    order = np.argsort(keys.astype(np.uint16) if int(keys.max()) <= 0xFFFF else keys,
                       kind="stable")
    t_sorted = thread[order]
    first_of_thread = np.ones(n, dtype=bool)
    first_of_thread[1:] = t_sorted[1:] != t_sorted[:-1]
    prev = np.full(n, -1, dtype=np.int64)
    prev[order[1:][~first_of_thread[1:]]] = order[:-1][~first_of_thread[1:]]
    owned = cols["cpu_owned"]
    inside = (prev >= 0) & (cpu > 0) & off
    inside_move = inside.copy()
    inside_move[inside] = on[prev[inside]]
    if inside_move.any():
        np.add.at(owned, prev[inside_move], cpu[inside_move])
        owned[inside_move] = 0
    # Each thread's first sample here: its previous one is the last of an earlier batch.
    for i in order[first_of_thread].tolist():
        ref = int(thread[i])
        before = last.get(ref)
        if before is not None and cpu[i] > 0 and off[i] and before[0]:
            before[1]["cpu_owned"][before[2]] += cpu[i]
            owned[i] = 0
    # Each thread's last sample here, for the next batch.
    last_of_thread = np.ones(n, dtype=bool)
    last_of_thread[:-1] = t_sorted[:-1] != t_sorted[1:]
    for i in order[last_of_thread].tolist():
        last[int(thread[i])] = (bool(on[i]), cols, i)


def _table(pa: Any, schemas: dict[str, Any], cols: dict[str, Any], rid: str, created: int,
           tick: int, pids: dict[int, int]) -> Any:
    """A batch's samples as a table of the samples schema (None for none)."""
    import numpy as np

    n = len(cols["ts"])
    if not n:
        return None
    status = cols["status"]
    thread = cols["thread"]
    pid_of = np.zeros(max(pids, default=0) + 1, dtype=np.uint32)
    for ref, pid in pids.items():
        pid_of[ref] = pid
    return pa.table({
        "recording": pa.DictionaryArray.from_arrays(np.zeros(n, np.int32), [rid]),
        "pid": pid_of[np.minimum(thread, len(pid_of) - 1)],
        "thread": thread,
        "ts": pa.array(created + cols["ts"] * tick, pa.timestamp("ns", tz="UTC")),
        "wall_ns": cols["weight"] * tick,
        "cpu_ns": cols["cpu_owned"] * tick,
        "gil_held": (status & C.STATUS_GIL_HELD) != 0,
        "on_cpu": (status & (C.STATUS_ON_CPU | C.STATUS_CPU_UNKNOWN)) == C.STATUS_ON_CPU,
        "gil_wait": (status & (C.STATUS_GIL_REQUESTED | C.STATUS_GIL_REQUESTED_KNOWN))
        == (C.STATUS_GIL_REQUESTED | C.STATUS_GIL_REQUESTED_KNOWN),
        "stack_id": cols["node"],
        "task": cols["task"],
    }, schema=schemas["samples"])


def _stack_rows(pa: Any, defs: Any, parents: Any, frames: Any, used: set[int],
                rid: str) -> dict[str, Any]:
    """Each stack the samples have, root first, one row a frame (in stack and depth order).
    The trie is walked for all stacks at once, a level a step; each distinct frame is named
    once."""
    import numpy as np

    par = np.frombuffer(parents, dtype=np.uint32)
    frm = np.frombuffer(frames, dtype=np.uint32)
    nodes = np.array(sorted(used - {0}), dtype=np.int64)
    at, frame_ids, levels = [], [], []
    idx, cur, level = np.arange(len(nodes)), nodes, 0
    while len(cur):
        at.append(idx)
        frame_ids.append(frm[cur])
        levels.append(np.full(len(cur), level, dtype=np.int64))
        cur = par[cur].astype(np.int64)
        more = cur != 0
        idx, cur, level = idx[more], cur[more], level + 1
    node_i = np.concatenate(at) if at else np.zeros(0, np.int64)
    frame_id = np.concatenate(frame_ids) if at else np.zeros(0, np.uint32)
    lengths = np.bincount(node_i, minlength=len(nodes))
    depth = lengths[node_i] - 1 - (np.concatenate(levels) if at else np.zeros(0, np.int64))
    order = np.lexsort((depth, node_i))
    node_i, frame_id, depth = node_i[order], frame_id[order], depth[order]
    unique, which = np.unique(frame_id, return_inverse=True)
    named = [defs.frame(int(f)) for f in unique.tolist()]
    stack_id = nodes[node_i]
    leaf = depth == lengths[node_i] - 1
    # A function's outermost frame in each stack (rows are in stack, then depth, order):
    # the first row of each (stack, function) pair.
    keys: dict[tuple[str, str, int], int] = {}
    function_of = np.array([keys.setdefault((f.function.name, f.function.filename,
                                             f.function.first_line), len(keys))
                            for f in named], dtype=np.int64)
    pair = node_i * (len(keys) + 1) + function_of[which]
    outermost = np.zeros(len(pair), dtype=bool)
    outermost[np.unique(pair, return_index=True)[1]] = True
    names = [f.function.name for f in named]
    files = [f.function.filename for f in named]
    first_lines = [f.function.first_line for f in named]
    lines = [f.line for f in named]
    natives = [f.function.native for f in named]
    if 0 in used:  # samples with no Python frame: one frame, as the reports name it
        stack_id = np.concatenate([[0], stack_id])
        depth = np.concatenate([[0], depth])
        leaf = np.concatenate([[True], leaf])
        outermost = np.concatenate([[True], outermost])
        which = np.concatenate([[len(named)], which])
        names.append(NO_STACK.name)
        files.append(NO_STACK.filename)
        first_lines.append(NO_STACK.line)
        lines.append(0)
        natives.append(False)
    which = which.astype(np.int32)

    def strings(values: list[str]) -> Any:
        return pa.DictionaryArray.from_arrays(which, pa.array(values, pa.string())).cast(
            pa.string())

    return {
        "recording": pa.DictionaryArray.from_arrays(np.zeros(len(which), np.int32),
                                                    [rid]).cast(pa.string()),
        "stack_id": stack_id.astype(np.uint32),
        "depth": depth.astype(np.uint16),
        "leaf": leaf,
        "function": strings(names),
        "file": strings(files),
        "first_line": np.array(first_lines, dtype=np.int32)[which],
        "line": np.array(lines, dtype=np.int32)[which],
        "native": np.array(natives, dtype=bool)[which],
        "outermost": outermost,
    }


def _write_table(pa: Any, pq: Any, schemas: dict[str, Any], out_dir: str, table: str,
                 rid: str, columns: dict[str, Any]) -> None:
    folder = os.path.join(out_dir, table)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{rid}.parquet")
    pq.write_table(pa.table(columns, schema=schemas[table]), path + ".part")
    os.replace(path + ".part", path)


@register
class ParquetExporter(Reporter):
    name = "parquet"
    description = "a Parquet dataset of every sample, for DuckDB, Dask or Spark"
    command = "export"
    flag = Option(("--parquet",), help="Write every sample of the recordings (several files "
                  "or folders may be given) as a Parquet dataset (a folder, default "
                  "RECORDING.parquet; spec/parquet.md), partitioned by host and date, for "
                  "DuckDB, Dask or Spark. Needs pyarrow.")
    many = True
    binary = True

    def write_folder(self, recordings: list[str], out_dir: str, force: bool) -> str:
        n, samples = write_dataset(recordings_in(recordings), out_dir, force)
        return f"{samples:,} samples of {n} recording{'s' if n != 1 else ''}"
