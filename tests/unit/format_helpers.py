"""Helpers for the .psr format tests: writing small recordings, reading them back as plain
tuples, and crafting chunks and records by hand.

Run as a script, it is the worker of the payload fuzz test (test_format_corruption.py): it
feeds mutated decompressed payloads to the native decoder in a process of its own, so that a
native crash fails the test instead of killing pytest.
"""

from __future__ import annotations

import os
import random
import struct
import sys
import zlib
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

import zstandard
from psrec.format import _constants as C
from psrec.format import open_recording
from psrec.format._layout import ChunkHeader, Header, pack_trailer
from psrec.format.writer import PsrWriter

# Fixed clocks, so that files written by the tests and by tests/data/make_golden.py are
# byte-for-byte reproducible.
WALL_NS = 1_700_000_000_000_000_000
MONO_NS = 5_000_000_000
INTERVAL_NS = 1_000_000  # 1 ms, i.e. 1000 ticks of 1 µs

DEFAULT_METADATA: dict[str, Any] = {
    "psrec_version": "test",
    "pid": 4242,
    "command": ["python", "app.py"],
    "python_version": "3.12.1",
    "hostname": "testhost",
    "interval_ns": INTERVAL_NS,
    "rate_hz": 1000.0,
}


def new_writer(path: str | os.PathLike[str], metadata: dict[str, Any] | None = None,
               **kw: Any) -> PsrWriter:
    return PsrWriter(
        path,
        metadata=DEFAULT_METADATA if metadata is None else metadata,
        created_wall_ns=WALL_NS,
        created_mono_ns=MONO_NS,
        force=True,
        **kw,
    )


# -- reading back -------------------------------------------------------------------------

def _column(col: Any, code: str) -> list[int]:
    if isinstance(col, (bytes, bytearray)):
        a = array(code)
        a.frombytes(col)
        return a.tolist()
    return list(col)


def stacks_of(decoder: Any) -> tuple[list[int], list[int]]:
    """The decoder's stack trie as (parents, frames) lists."""
    return _column(decoder.trie_parents(), "I"), _column(decoder.trie_frames(), "I")


def resolve(parents: list[int], frames: list[int], node: int) -> tuple[int, ...]:
    """The frame ids of a trie node, root first."""
    out = []
    while node:
        out.append(frames[node])
        node = parents[node]
    return tuple(reversed(out))


def read_samples(rec: Any, native: bool, tasks: bool = False,
                 **window: Any) -> tuple[list[tuple[Any, ...]], Any]:
    """Every sample of an open recording as (ts, thread, stack root-first, status, cpu, weight),
    with tasks (ts, ..., weight, task), and the stream (for its events and summaries)."""
    stream = rec.stream(native=native, **window)
    rows: list[tuple[int, ...]] = []
    for batch in stream:
        cols = [
            _column(batch.ts, "q"),
            _column(batch.thread, "I"),
            _column(batch.node, "I"),
            _column(batch.status, "B"),
            _column(batch.cpu, "I"),
            _column(batch.weight, "I"),
        ]
        if tasks:
            cols.append(_column(batch.task, "I"))
        rows.extend(zip(*cols))
    parents, frames = stacks_of(stream.decoder)
    cache: dict[int, tuple[int, ...]] = {}
    out = []
    for ts, th, node, st, cpu, w, *task in rows:
        stack = cache.get(node)
        if stack is None:
            stack = cache[node] = resolve(parents, frames, node)
        out.append((ts, th, stack, st, cpu, w, *task))
    return out, stream


def read_file(path: str | os.PathLike[str], native: bool = True) -> dict[str, Any]:
    """Opens a recording and returns its samples, events, definitions and warnings."""
    with open_recording(path) as rec:
        samples, stream = read_samples(rec, native)
        defs = rec.definitions()
        return {
            "samples": samples,
            "events": [tuple(e) for e in stream.events],
            "defs": defs,
            "warnings": list(rec.warnings),
            "clean": rec.clean,
            "chunks": list(rec.chunks),
            "metadata": rec.metadata,
            "stats": rec.stats,
        }


# -- crafting bytes by hand ---------------------------------------------------------------

def varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def record(rtype: int, *fields: int, body: bytes | None = None) -> bytes:
    """One record: type, length, body (varint fields, or the given raw body)."""
    if body is None:
        body = b"".join(varint(f) for f in fields)
    return bytes([rtype]) + varint(len(body)) + body


def string_record(sid: int, value: str) -> bytes:
    raw = value.encode()
    return record(C.REC_STRING, body=varint(sid) + varint(len(raw)) + raw)


def chunk(ctype: int, raw: bytes, compress: bool = True) -> bytes:
    """A complete chunk (header and payload) holding raw."""
    payload = zstandard.ZstdCompressor(write_content_size=True).compress(raw) if compress else raw
    flags = C.CHUNK_FLAG_ZSTD if compress else 0
    head = ChunkHeader(ctype, flags, len(payload), len(raw), zlib.crc32(payload))
    return head.pack() + payload


def header(major: int = C.FORMAT_MAJOR, minor: int = C.FORMAT_MINOR, tick_ns: int = 1000) -> bytes:
    return Header(major, minor, WALL_NS, MONO_NS, tick_ns).pack()


def assemble(chunks: Sequence[tuple[int, bytes]], trailer: bool = True,
             hdr: bytes | None = None) -> bytes:
    """A file made of the given (type, raw payload) chunks, with an index and trailer."""
    import msgpack

    out = bytearray(header() if hdr is None else hdr)
    index = []
    for ctype, raw in chunks:
        index.append([len(out), ctype, 0, 0, 0, 0])
        out += chunk(ctype, raw)
    if trailer:
        off = len(out)
        out += chunk(C.CHUNK_INDEX, msgpack.packb({"chunks": index}))
        out += pack_trailer(off, sum(1 for c in chunks if c[0] == C.CHUNK_DATA))
    return bytes(out)


def set_major(raw: bytes, major: int) -> bytes:
    """The file with its header's major version changed and the header crc fixed."""
    b = bytearray(raw)
    struct.pack_into("<H", b, 8, major)
    struct.pack_into("<I", b, C.HEADER_SIZE - 4, zlib.crc32(bytes(b[: C.HEADER_SIZE - 4])))
    return bytes(b)


def mutate(rng: random.Random, data: bytes, regions: Iterable[tuple[int, int]] = ()) -> bytes:
    """One random corruption of data: bit flips, byte overwrites, an inserted or deleted range,
    or a duplicated range. regions, if given, are (start, end) ranges to aim at."""
    b = bytearray(data)
    if not b:
        return bytes(rng.randbytes(rng.randint(1, 8)))
    spots = list(regions) or [(0, len(b))]
    lo, hi = rng.choice(spots)
    lo, hi = max(0, min(lo, len(b) - 1)), max(1, min(hi, len(b)))
    if hi <= lo:
        lo, hi = 0, len(b)
    kind = rng.randrange(6)
    pos = rng.randrange(lo, hi)
    if kind == 0:
        for _ in range(rng.randint(1, 4)):
            p = rng.randrange(lo, hi)
            b[p] ^= 1 << rng.randrange(8)
    elif kind == 1:
        n = rng.randint(1, 8)
        b[pos : pos + n] = rng.randbytes(min(n, len(b) - pos))
    elif kind == 2:
        b[pos:pos] = rng.randbytes(rng.randint(1, 32))
    elif kind == 3:
        del b[pos : pos + rng.randint(1, 32)]
    elif kind == 4:
        n = rng.randint(1, 64)
        b[pos:pos] = b[max(0, pos - n) : pos]
    else:
        b[pos] = rng.choice([0x00, 0x7F, 0x80, 0xFF])
    return bytes(b)


# -- the payload fuzz worker ----------------------------------------------------------------

def _payload_worker(corpus_path: str, seed: int, count: int) -> None:
    """Decodes count mutations of each payload in corpus_path with the native decoder.

    Prints one line per payload kind it finished. Any exception other than DecodeError
    propagates (exit status 1); a native crash kills the process (a signal)."""
    import msgpack
    from psrec.format import _format

    with open(corpus_path, "rb") as fh:
        corpus = msgpack.unpackb(fh.read())
    rng = random.Random(seed)
    decoded = failed = 0
    for i in range(count):
        kind, payload = corpus[i % len(corpus)]
        data = mutate(rng, payload)
        # Print the case before running it, so a crash can be reproduced from the output.
        print(f"case {i} seed {seed} kind {kind}", file=sys.stderr, flush=True)
        try:
            if kind == "defs":
                _format.decode_defs(data)
            else:
                dec = _format.Decoder(4000, 1000)
                batch = _format.SampleBatch()
                dec.decode_data(data, batch)
                # A trie node outside the trie would be a decoder bug.
                nodes = _column(batch.node, "I")
                if nodes and max(nodes) >= dec.trie_size():
                    raise AssertionError(f"case {i}: sample refers to trie node outside the trie")
            decoded += 1
        except _format.DecodeError:
            failed += 1
    print(f"decoded={decoded} rejected={failed}", flush=True)


if __name__ == "__main__":
    _payload_worker(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
