"""Hostile .psr files, made at test time (none is checked in): each is small on disk and was
built to make a reader spend far more memory or time than its size warrants, or to make it
count something twice. test_format_hostile.py runs the real `psrec` on each. Over 400 lines
and kept whole: the files share one writer of raw chunks, and each is a few lines of it.

Every file is valid where it is not hostile: header, chunk headers and checksums are right,
so the reader takes each chunk at its word. Most also hold a small good recording (one
thread, 10 samples of `work`), so that a hostile chunk can be seen to be skipped while the
rest of the file is read.

Run as a script, it writes every file to a folder, to try them by hand:

    python tests/unit/hostile_files.py /tmp/hostile
"""

from __future__ import annotations

import os
import resource
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

import msgpack
import zstandard
from format_helpers import (
    DEFAULT_METADATA,
    header,
    pack_trailer,
    record,
    string_record,
    varint,
    zigzag,
)
from psrec.format import _constants as C  # noqa: E402
from psrec.format._layout import ChunkHeader, Header  # noqa: E402

TICKS_PER_S = 1_000_000  # the files' tick is 1 µs
INTERVAL = 1000  # ticks (the metadata's 1 ms)
GOOD_SAMPLES = 10


# -- framing --------------------------------------------------------------------------------

def framed(ctype: int, stored: bytes, raw_length: int, flags: int = C.CHUNK_FLAG_ZSTD) -> bytes:
    """A chunk with a valid header around whatever payload is given."""
    head = ChunkHeader(ctype, flags, len(stored), raw_length, zlib.crc32(stored))
    return head.pack() + stored


def zchunk(ctype: int, raw: bytes, level: int = 3) -> bytes:
    """A chunk holding raw, compressed as the writer does (the frame names its size)."""
    stored = zstandard.ZstdCompressor(level=level, write_content_size=True).compress(raw)
    return framed(ctype, stored, len(raw))


def layout(chunks: list[bytes], *, index: bool = True, index_chunk: bytes | None = None) -> bytes:
    """Header, the chunks, then (index=True) an INDEX chunk listing them and the trailer."""
    out = bytearray(header())
    entries = []
    for c in chunks:
        ctype = c[4]
        entries.append([len(out), ctype, 0, 0, 0, 0])
        out += c
    if index:
        off = len(out)
        out += index_chunk if index_chunk is not None else zchunk(
            C.CHUNK_INDEX, msgpack.packb({"chunks": entries}))
        out += pack_trailer(off, sum(1 for e in entries if e[1] == C.CHUNK_DATA))
    return bytes(out)


def metadata_chunk() -> bytes:
    return zchunk(C.CHUNK_METADATA, msgpack.packb(DEFAULT_METADATA, use_bin_type=True))


# -- a zstandard frame made by hand (RFC 8878) ----------------------------------------------

ZSTD_MAGIC = struct.pack("<I", 0xFD2FB528)
BLOCK_MAX = 128 << 10


def zstd_frame(blocks: list[bytes], content_size: int | None, window_log: int = 20) -> bytes:
    """A frame with the given blocks; content_size, when given, is written in its header
    (8 bytes) whatever the blocks hold."""
    if content_size is None:
        descriptor = 0x00  # no content size, no checksum; a window descriptor follows
        fields = bytes([(window_log - 10) << 3])
    else:
        descriptor = 0xC0  # 8-byte content size; a window descriptor follows
        fields = bytes([(window_log - 10) << 3]) + struct.pack("<Q", content_size)
    return ZSTD_MAGIC + bytes([descriptor]) + fields + b"".join(blocks)


def rle_block(byte: int, size: int, last: bool) -> bytes:
    """A block that stands for `size` copies of one byte, in 4 bytes."""
    head = int(last) | (1 << 1) | (size << 3)  # block type 1: RLE
    return struct.pack("<I", head)[:3] + bytes([byte])


def rle_frame(total: int, content_size: int | None) -> bytes:
    """total zero bytes as RLE blocks: about 32,000 times smaller than what it inflates to."""
    n, rest = divmod(total, BLOCK_MAX)
    sizes = [BLOCK_MAX] * n + ([rest] if rest else [])
    blocks = [rle_block(0, s, i == len(sizes) - 1) for i, s in enumerate(sizes)]
    return zstd_frame(blocks, content_size)


# -- records --------------------------------------------------------------------------------

def defs_raw(threads: list[int] = [1], extra_frames: int = 0) -> bytes:  # noqa: B006
    """Strings, the function `work` (frame 1) and, for each ref, a THREAD."""
    out = string_record(1, "app.py") + string_record(2, "work") + string_record(3, "MainThread")
    out += record(C.REC_FUNCTION, 1, 1, 2, 10)
    out += record(C.REC_FRAME, 1, 1, zigzag(11))
    for i in range(extra_frames):
        out += string_record(10 + i, f"fn_{i}")
        out += record(C.REC_FUNCTION, 2 + i, 1, 10 + i, 100 + 10 * i)
        out += record(C.REC_FRAME, 2 + i, 2 + i, zigzag(101 + 10 * i))
    for ref in threads:
        out += record(C.REC_THREAD, ref, 4242, 0x1000 + ref % 1000, 4242 + ref % 1000, 3, 0)
    return out


def begin(seq: int = 0, base: int = 0, prev: int = 0) -> bytes:
    return record(C.REC_BEGIN, seq, base, prev)


def pass_(delta: int, entries: bytes = b"") -> bytes:
    return record(C.REC_PASS, body=varint(delta) + entries)


def entry(ref: int, frames: list[int] | None = None, pop: int = 0, status: int | None = None,
          ) -> bytes:
    flags = (C.ENTRY_STACK if frames is not None else 0) | (
        C.ENTRY_STATUS if status is not None else 0)
    out = varint(ref << C.ENTRY_FLAG_BITS | flags)
    if frames is not None:
        out += varint(pop) + varint(len(frames)) + b"".join(varint(f) for f in frames)
    if status is not None:
        out += bytes([status])
    return out


def good_data(seq: int = 0, base: int = 1000, ref: int = 1) -> bytes:
    """GOOD_SAMPLES passes 1 ms apart of one thread in `work`, on a CPU with the GIL."""
    raw = begin(seq, base) + pass_(0, entry(ref, [1], status=0x03))
    for _ in range(GOOD_SAMPLES - 1):
        raw += pass_(INTERVAL)
    return raw


def good_chunks() -> list[bytes]:
    return [metadata_chunk(), zchunk(C.CHUNK_DEFS, defs_raw()), zchunk(C.CHUNK_DATA, good_data())]


# -- the files ------------------------------------------------------------------------------
# Each returns the file's bytes. The numbers in the comments are what psrec 0.1 did with them.

BOMB_BYTES = 1_600_000_000
BOMB_DECLARED = 1 << 20


def bomb_inflate() -> bytes:
    """A 49 KB DATA chunk whose frame really inflates to 1.6 GB (RLE blocks of zeros: unknown
    records), while its chunk header says 1 MiB (the reader allocated 1.6 GB)."""
    return layout([*good_chunks(),
                   framed(C.CHUNK_DATA, rle_frame(BOMB_BYTES, BOMB_BYTES), BOMB_DECLARED)])


def bomb_inflate_unsized() -> bytes:
    """The same frame without a content size in its header: only decompressing tells."""
    return layout([*good_chunks(),
                   framed(C.CHUNK_DATA, rle_frame(BOMB_BYTES, None), BOMB_DECLARED)])


TIB = 1 << 40


def bomb_tib() -> bytes:
    """A 325-byte file whose only DATA chunk's frame claims 1 TiB ("internal error:
    MemoryError")."""
    frame = zstd_frame([rle_block(0, 4096, True)], TIB)
    return layout([metadata_chunk(), framed(C.CHUNK_DATA, frame, 4096)], index=False)


DEEP_PASSES = 2000


def depth_growth() -> bytes:
    """Each pass pushes MAX_DEPTH more frames on the same thread without popping: every push
    is within the per-entry limit, but the stack grows without end (16M trie nodes from a
    few KB; 3.3 GB and std::bad_alloc)."""
    raw = begin(1) + pass_(INTERVAL, entry(1, [1] * C.MAX_DEPTH, status=3)) * DEEP_PASSES
    return layout([*good_chunks(), zchunk(C.CHUNK_DATA, raw)])


HUGE_FRAME = (1 << 32) - 1


def huge_frame_id() -> bytes:
    """A stack whose frame id is 2^32 - 1, a frame no record defines (the native walks
    allocated 16 GiB to map frame ids to keys)."""
    raw = begin() + pass_(0, entry(1, [1, HUGE_FRAME], status=3))
    for _ in range(GOOD_SAMPLES - 1):
        raw += pass_(INTERVAL)
    return layout([metadata_chunk(), zchunk(C.CHUNK_DEFS, defs_raw()),
                   zchunk(C.CHUNK_DATA, raw)])


DEEP_THREADS = 4
DEEP_LEAVES = 2


def collapsed_deep() -> bytes:
    """A valid recording of DEEP_THREADS threads, each recursing in a function of its own
    deeper than MAX_DEPTH (so cut, with the truncation marker at the root), its innermost
    frame alternating between DEEP_LEAVES leaf functions (--collapsed held every prefix of
    every stack: 270 MB per thread)."""
    nf = DEEP_THREADS * (1 + DEEP_LEAVES)
    raw = begin()
    body = b""
    for t in range(DEEP_THREADS):
        rec_frame = 2 + t * (1 + DEEP_LEAVES)
        stack = [C.TRUNCATED_FRAME] + [rec_frame] * (C.MAX_DEPTH - 2) + [rec_frame + 1]
        body += entry(t + 1, stack, status=3)
    raw += pass_(0, body)
    for i in range(1, 20):
        body = b""
        for t in range(DEEP_THREADS):
            leaf = 2 + t * (1 + DEEP_LEAVES) + 1 + i % DEEP_LEAVES
            body += entry(t + 1, [leaf], pop=1)
        raw += pass_(INTERVAL, body)
    return layout([metadata_chunk(),
                   zchunk(C.CHUNK_DEFS, defs_raw(list(range(1, DEEP_THREADS + 1)), nf)),
                   zchunk(C.CHUNK_DATA, raw)])


BIG_REF = 1 << 24
BIG_REF_CHUNKS = 1000


def thread_ref_2_24() -> bytes:
    """A thread whose ref is 2^24, the largest the format allows, sampled in many small
    chunks (every command ran > 60 s: per-thread state by ref, reset for every chunk)."""
    chunks = [metadata_chunk(), zchunk(C.CHUNK_DEFS, defs_raw([BIG_REF]))]
    for seq in range(BIG_REF_CHUNKS):
        raw = begin(seq, 1000 + seq * 2 * INTERVAL, 1000 + seq * 2 * INTERVAL - INTERVAL + 1
                    if seq else 0)
        raw += pass_(0, entry(BIG_REF, [1], status=3)) + pass_(INTERVAL)
        chunks.append(zchunk(C.CHUNK_DATA, raw))
    return layout(chunks)


INDEX_ENTRIES = 1_000_000


def index_1m() -> bytes:
    """A closed file whose 1 KB INDEX lists 1M chunks (20 s and 360 MB to read it)."""
    chunks = good_chunks()
    offset = len(header()) + len(chunks[0]) + len(chunks[1])  # the good DATA chunk
    index = msgpack.packb({"chunks": [[offset, C.CHUNK_DATA, 0, 0, 0, 0]] * INDEX_ENTRIES})
    return layout(chunks, index_chunk=zchunk(C.CHUNK_INDEX, index, level=19))


FLOOD_THREADS = 4096
FLOOD_PASSES = 16384


def sample_flood() -> bytes:
    """FLOOD_THREADS threads, then FLOOD_PASSES empty passes: every pass yields a sample of
    every thread, 67M samples from 60 KB of records (1.7 GB of sample columns)."""
    refs = list(range(1, FLOOD_THREADS + 1))
    raw = begin(1) + pass_(0, b"".join(entry(r, [1], status=3) for r in refs))
    raw += pass_(INTERVAL) * FLOOD_PASSES
    return layout([metadata_chunk(), zchunk(C.CHUNK_DEFS, defs_raw([1, *refs[1:]])),
                   zchunk(C.CHUNK_DATA, good_data()), zchunk(C.CHUNK_DATA, raw, level=19)])


PASS_FLOOD = 16 << 20


def pass_flood() -> bytes:
    """16M passes over no thread (3 bytes each, 48 MB from 5 KB): no sample, but `psrec dump`
    printed a line for each."""
    raw = begin(1) + pass_(INTERVAL) * PASS_FLOOD
    return layout([*good_chunks(), zchunk(C.CHUNK_DATA, raw)])


EVENT_FLOOD = 4_000_000


def event_flood() -> bytes:
    """Two DATA chunks of 4M MARKER records each (every event was kept: 1.2 GB)."""
    marker = record(C.REC_MARKER, 5000, 1)
    return layout([*good_chunks(),
                   zchunk(C.CHUNK_DATA, begin(1) + marker * EVENT_FLOOD, level=19),
                   zchunk(C.CHUNK_DATA, begin(2) + marker * EVENT_FLOOD, level=19)])


FAR_S = 8_000_000  # seconds between the two samples


def slices_far() -> bytes:
    """Two samples FAR_S seconds apart in a 432 B file (--slices 1s wrote 147 MB)."""
    raw = begin() + pass_(0, entry(1, [1], status=3)) + pass_(FAR_S * TICKS_PER_S)
    return layout([metadata_chunk(), zchunk(C.CHUNK_DEFS, defs_raw()),
                   zchunk(C.CHUNK_DATA, raw)], index=False)


def slices_jumbled() -> bytes:
    """Three chunks whose times go back and forth: the first and last samples are 1 s apart,
    the earliest and latest FAR_S seconds."""
    far = FAR_S * TICKS_PER_S
    chunks = [metadata_chunk(), zchunk(C.CHUNK_DEFS, defs_raw())]
    for seq, base in enumerate((far, 0, far + TICKS_PER_S)):
        chunks.append(zchunk(C.CHUNK_DATA, begin(seq, base) + pass_(0, entry(1, [1], status=3))))
    return layout(chunks, index=False)


WRAP_S = (1 << 32) + 5  # a slice index past 2^32 at 1 s slices


def slice_wrap() -> bytes:
    """Samples 2^32 + 5 s after the start, one second apart (with --slices 1s, slice
    4,294,967,301 was shown as slice 5)."""
    base = WRAP_S * TICKS_PER_S
    raw = begin(0, base) + pass_(0, entry(1, [1], status=3)) + pass_(TICKS_PER_S)
    return layout([metadata_chunk(), zchunk(C.CHUNK_DEFS, defs_raw()),
                   zchunk(C.CHUNK_DATA, raw)])


BAD_METADATA = {**DEFAULT_METADATA, "command": 5, "hostname": ["x"], "pid": "4242",
                "python_build": [1], "rate_hz": "fast"}
BAD_STATS = {"passes": "ten", "samples": [1], "truncated_stacks": "many", "stopped_by": 0}


def wrong_types() -> bytes:
    """An int where the command line belongs, a list for the host name, a string for the
    pid...; a STATS chunk likewise (`psrec info`: "internal error: TypeError")."""
    chunks = good_chunks()
    chunks[0] = zchunk(C.CHUNK_METADATA, msgpack.packb(BAD_METADATA))
    return layout([*chunks, zchunk(C.CHUNK_STATS, msgpack.packb(BAD_STATS))])


def duplicate_chunk() -> bytes:
    """The good DATA chunk twice, byte for byte: both checksums are valid (its samples were
    counted twice)."""
    chunks = good_chunks()
    return layout([*chunks, chunks[-1]])


# -- files that respect every per-chunk limit and multiply across chunks (spec 9.3) ---------

CHURN_PASSES = 6000


def trie_churn() -> bytes:
    """Every pass pops the whole MAX_DEPTH - 1 frame stack and pushes one that differs at its
    root: MAX_DEPTH - 1 new stack-trie nodes a pass, from a few bytes of zstandard (every
    reader needed 1.9-2.3 GB; `internal error: MemoryError: std::bad_alloc` under 1 GiB)."""
    depth = C.MAX_DEPTH - 1
    parts = [begin(1), pass_(INTERVAL, entry(1, [100] + [1] * (depth - 1), status=3))]
    parts += [pass_(INTERVAL, entry(1, [100 + i] + [1] * (depth - 1), pop=depth))
              for i in range(1, CHURN_PASSES)]
    return layout([*good_chunks(), zchunk(C.CHUNK_DATA, b"".join(parts))])


TASK_CHURN = 400  # each 8,191 new trie nodes: past the budget of a file this size


def task_trie_churn() -> bytes:
    """trie_churn's stacks as asyncio task states (spec 4.3): every TASK_STATE a MAX_DEPTH - 1
    frame await chain that differs at its root, MAX_DEPTH - 1 new trie nodes each."""
    depth = C.MAX_DEPTH - 1
    snapshot = record(C.REC_TASK_SNAPSHOT, 1500, 42, 1, 0)
    chain = b"".join(varint(1) for _ in range(depth - 1))
    states = [record(C.REC_TASK_STATE, body=b"".join(varint(f) for f in (
        1 + i % 50, C.TASK_SUSPENDED, 0, depth, 100 + i)) + chain) for i in range(TASK_CHURN)]
    return layout([*good_chunks(), zchunk(C.CHUNK_DATA, begin(1) + snapshot + b"".join(states))])


TASK_FLOOD = 300_000


def task_flood() -> bytes:
    """TASK_FLOOD defined tasks, each suspended one frame deep awaiting the next, in one
    snapshot a later one ends: all within the file's budgets of definitions and events (a
    thousandth of what a file this size may hold), so `report --tasks` replays them all."""
    defs = b"".join(record(C.REC_TASK, t, 42, 0x1000 + 64 * t, 0, 1, 1500)
                    for t in range(1, TASK_FLOOD + 1))
    states = b"".join(record(C.REC_TASK_STATE, t, C.TASK_SUSPENDED, 0, 1, 1)
                      + record(C.REC_TASK_AWAITS, t, t + 1) for t in range(1, TASK_FLOOD + 1))
    data = (begin(1, 1500) + record(C.REC_TASK_SNAPSHOT, 1500, 42, 1, 0) + states
            + record(C.REC_TASK_SNAPSHOT, 900_000, 42, 1, 898_500))
    return layout([*good_chunks(), zchunk(C.CHUNK_DEFS, defs, level=19),
                   zchunk(C.CHUNK_DATA, data, level=19)])


TASK_CHAIN = 20_000


def task_chains() -> bytes:
    """TASK_CHAIN tasks, each awaiting the next (task_flood's), and a pass for each that runs
    it: with --logical every sample's stack goes through the MAX_TASK_DEPTH tasks awaiting its
    task, a new path of twice as many nodes each, far past the budget of stack nodes."""
    defs = b"".join(record(C.REC_TASK, t, 42, 0x1000 + 64 * t, 0, 1, 1500)
                    for t in range(1, TASK_CHAIN + 1))
    states = b"".join(record(C.REC_TASK_STATE, t, C.TASK_SUSPENDED, 0, 1, 1)
                      + record(C.REC_TASK_AWAITS, t, t + 1) for t in range(1, TASK_CHAIN + 1))
    passes = b"".join(pass_(INTERVAL, entry(1, [1], status=0x03) if t == 1 else b"")
                      + record(C.REC_PASS_TASKS, 1, t) for t in range(1, TASK_CHAIN + 1))
    data = (begin(1, 1500) + record(C.REC_TASK_SNAPSHOT, 1500, 42, 1, 0) + states + passes
            + record(C.REC_TASK_SNAPSHOT, 1500 + INTERVAL * (TASK_CHAIN + 1), 42, 0,
                     INTERVAL * (TASK_CHAIN + 1)))
    return layout([*good_chunks(), zchunk(C.CHUNK_DEFS, defs, level=19),
                   zchunk(C.CHUNK_DATA, data, level=19)])


UNKNOWN_CHUNKS = 4
UNKNOWN_RECORD = bytes([0x7F, 0])  # a record of a type no reader knows, with an empty body


def unknown_flood() -> bytes:
    """DATA chunks of MAX_RAW bytes of 2-byte records of an unknown type, 8 KB each stored
    (forty took every command 12 s; `dump` past 20 s with one)."""
    chunks = good_chunks()
    for seq in range(1, UNKNOWN_CHUNKS + 1):
        head = begin(seq, 1000 + seq)
        raw = head + UNKNOWN_RECORD * ((C.MAX_RAW - len(head)) // 2)
        chunks.append(zchunk(C.CHUNK_DATA, raw, level=1))
    return layout(chunks)


CAP_THREADS = 4096
CAP_CHUNKS = 25


def samples_at_cap() -> bytes:
    """CAP_CHUNKS chunks of MAX_CHUNK_SAMPLES samples each (CAP_THREADS threads, passes that
    change nothing): 105M samples from a 111 KB file (`report --html` failed with 6 GB)."""
    refs = list(range(1, CAP_THREADS + 1))
    passes = C.MAX_CHUNK_SAMPLES // CAP_THREADS
    chunks = [metadata_chunk(), zchunk(C.CHUNK_DEFS, defs_raw(refs))]
    first = b"".join(entry(r, [1], status=3) for r in refs)
    for seq in range(CAP_CHUNKS):
        base = 1000 + seq * passes * INTERVAL
        raw = begin(seq, base, base - INTERVAL + 1 if seq else 0) + pass_(0, first)
        raw += pass_(INTERVAL) * (passes - 1)
        chunks.append(zchunk(C.CHUNK_DATA, raw, level=19))
    return layout(chunks)


MANY_REFS = 1_000_000
REFS_PER_CHUNK = 1 << 16


def many_threads() -> bytes:
    """MANY_REFS distinct thread refs, each sampled once, in chunks of REFS_PER_CHUNK (a 4.7 MB
    file: `report` took 655 MB, `report --html` aborted, the exports passed 1 GB)."""
    chunks = [*good_chunks()]
    for seq, lo in enumerate(range(1, MANY_REFS + 1, REFS_PER_CHUNK), start=1):
        refs = range(lo, min(MANY_REFS + 1, lo + REFS_PER_CHUNK))
        base = 100_000 + seq * INTERVAL
        raw = begin(seq, base) + pass_(0, b"".join(entry(r, [1], status=3) for r in refs))
        chunks.append(zchunk(C.CHUNK_DATA, raw, level=19))
    return layout(chunks)


DAMAGED = 100_000


def damaged_chunks() -> bytes:
    """The good recording, then DAMAGED chunks whose checksums are wrong (100,001 warning
    lines, twice for `report --html`)."""
    bad = bytearray(zchunk(C.CHUNK_DATA, begin(5, 5000)))
    bad[-1] ^= 0xFF
    return layout([*good_chunks(), *[bytes(bad)] * DAMAGED], index=False)


def second_metadata() -> bytes:
    """A second METADATA chunk after the data, naming another target (it silently replaced
    the first: "pid 1: evil")."""
    evil = {**DEFAULT_METADATA, "pid": 1, "command": ["evil"]}
    return layout([*good_chunks(), zchunk(C.CHUNK_METADATA, msgpack.packb(evil))])


def far_times() -> bytes:
    """A file created 2^63 - 1 ns after the epoch whose samples span 2^62 ticks (`export
    --pprof`: ValueError)."""
    data = bytearray(layout([metadata_chunk(), zchunk(C.CHUNK_DEFS, defs_raw()),
                             zchunk(C.CHUNK_DATA, begin() + pass_(0, entry(1, [1], status=3))
                                    + pass_(1 << 62))]))
    head = Header(C.FORMAT_MAJOR, C.FORMAT_MINOR, (1 << 63) - 1, 1, 1000).pack()
    data[:len(head)] = head
    return bytes(data)


FILES: dict[str, Callable[[], bytes]] = {
    "bomb_inflate": bomb_inflate,
    "bomb_inflate_unsized": bomb_inflate_unsized,
    "bomb_tib": bomb_tib,
    "depth_growth": depth_growth,
    "huge_frame_id": huge_frame_id,
    "collapsed_deep": collapsed_deep,
    "thread_ref_2_24": thread_ref_2_24,
    "index_1m": index_1m,
    "sample_flood": sample_flood,
    "event_flood": event_flood,
    "pass_flood": pass_flood,
    "slices_far": slices_far,
    "slices_jumbled": slices_jumbled,
    "slice_wrap": slice_wrap,
    "duplicate_chunk": duplicate_chunk,
    "wrong_types": wrong_types,
    "trie_churn": trie_churn,
    "task_trie_churn": task_trie_churn,
    "task_flood": task_flood,
    "task_chains": task_chains,
    "unknown_flood": unknown_flood,
    "samples_at_cap": samples_at_cap,
    "many_threads": many_threads,
    "damaged_chunks": damaged_chunks,
    "second_metadata": second_metadata,
    "far_times": far_times,
}


# -- running the real psrec on them ------------------------------------------------------------

MEMORY = 1 << 30  # bytes of address space each command may have (as `ulimit -v 1048576`)
# Seconds each command may take. The slowest within its budgets: the Firefox export of
# many_threads (65,536 threads, about 130 us of per-thread work each), 8.3-9 s on a 2-core
# virtual machine.
SECONDS = 20


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def psrec(*args: str | os.PathLike[str], env: dict[str, str] | None = None
          ) -> subprocess.CompletedProcess[str]:
    """The real psrec, bounded in memory and time (a timeout fails the test)."""
    full = {**os.environ, "COLUMNS": "200", **(env or {})}
    full.pop("PYTHONFAULTHANDLER", None)
    return subprocess.run([sys.executable, "-m", "psrec", *map(str, args)], check=False,
                          capture_output=True, text=True, timeout=SECONDS,
                          preexec_fn=_limit_memory, env=full)


def no_crash(r: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr[-2000:]


def chunks_of(data: bytes) -> list[tuple[int, int, int]]:
    """(offset, type, uncompressed length) of each chunk of a file made here, in order."""
    out = []
    pos = len(header())
    while pos + C.CHUNK_HEADER_SIZE <= len(data) and data[pos:pos + 4] == struct.pack(
            "<I", C.CHUNK_SYNC):
        ctype = data[pos + 4]
        length, raw_length = struct.unpack_from("<II", data, pos + 8)
        out.append((pos, ctype, raw_length))
        pos += C.CHUNK_HEADER_SIZE + length
    return out


def write(name: str, folder: str | os.PathLike[str]) -> Path:
    path = Path(folder) / f"{name}.psr"
    path.write_bytes(FILES[name]())
    return path


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    for name in FILES:
        p = write(name, out)
        print(f"{p}  {p.stat().st_size:,} bytes")
