"""Constants of the .psr format, mirrored in format/native/constants.hpp.

spec/psr-format.md is normative; tests/unit/test_spec_sync.py keeps the three in step.
"""

from __future__ import annotations

FORMAT_MAJOR = 1
FORMAT_MINOR = 5

MAGIC = b"\x89PSR\r\n\x1a\n"
TRAILER_MAGIC = b"PSR-END\n"
HEADER_SIZE = 64
CHUNK_HEADER_SIZE = 24
TRAILER_SIZE = 24
CHUNK_SYNC = 0x4B4E4843  # b"CHNK" read as a little-endian u32

# Limits a reader enforces, so that a corrupt length can never make it allocate wildly.
MAX_PAYLOAD = 64 << 20
MAX_RAW = 256 << 20

# Chunk types.
CHUNK_METADATA = 1
CHUNK_DEFS = 2
CHUNK_DATA = 3
CHUNK_STATS = 4
CHUNK_INDEX = 5

CHUNK_FLAG_ZSTD = 0x01

# Definition records.
REC_STRING = 0x01
REC_FUNCTION = 0x02
REC_FRAME = 0x03
REC_THREAD = 0x04
REC_PROCESS = 0x05
REC_TASK = 0x06

# Data records.
REC_BEGIN = 0x10
REC_PASS = 0x11
REC_THREAD_START = 0x20
REC_THREAD_EXIT = 0x21
REC_THREAD_RENAME = 0x22
REC_PROCESS_START = 0x23
REC_PROCESS_EXIT = 0x24
REC_PASS_ERRORS = 0x25
REC_MARKER = 0x26
REC_PASS_TASKS = 0x27
REC_TASK_SNAPSHOT = 0x28
REC_TASK_STATE = 0x29
REC_TASK_AWAITS = 0x2A

# A TASK_STATE's states (spec section 4).
TASK_ENDED = 0
TASK_SUSPENDED = 1
TASK_READY = 2
TASK_RUNNING = 3

ENTRY_STACK = 0x1
ENTRY_STATUS = 0x2
ENTRY_CPU = 0x4
ENTRY_FLAG_BITS = 3

STATUS_GIL_HELD = 0x01
STATUS_ON_CPU = 0x02
STATUS_GIL_REQUESTED = 0x04
STATUS_GIL_UNKNOWN = 0x10
STATUS_CPU_UNKNOWN = 0x20
STATUS_GIL_REQUESTED_KNOWN = 0x40

TRUNCATED_FRAME = 0
MAX_DEPTH = 8192
WEIGHT_CAP_INTERVALS = 4

# Limits a reader enforces on what a file's chunks hold (spec section 9), so that no count, id
# or length read from a file makes it allocate or loop beyond what the file's size allows.
MAX_THREAD_REF = 1 << 24  # thread refs run from 1 to this
MAX_CHUNK_SAMPLES = 1 << 22  # thread-samples one DATA chunk may yield
MAX_CHUNK_PASSES = 1 << 20  # passes one DATA chunk may hold
MAX_MAP_RAW = 16 << 20  # uncompressed METADATA and STATS chunks (msgpack maps)
# A file of S bytes holds at most RECORDS_BASE + RECORDS_PER_BYTE * S definitions, as many
# events, and DEFS chunks of DEFS_RAW_BASE + DEFS_RAW_PER_BYTE * S bytes uncompressed in all.
RECORDS_BASE = 65536
RECORDS_PER_BYTE = 2
DEFS_RAW_BASE = 16 << 20
DEFS_RAW_PER_BYTE = 64
# What reading a whole file may cost (spec section 9.3), for a file of S bytes: DATA chunks of
# DATA_RAW_BASE + DATA_RAW_PER_BYTE * S bytes uncompressed in all, a stack trie of
# TRIE_BASE + TRIE_PER_BYTE * S nodes, and THREADS_BASE + S // THREAD_BYTES thread refs.
DATA_RAW_BASE = 64 << 20
DATA_RAW_PER_BYTE = 64
TRIE_BASE = 1 << 20
TRIE_PER_BYTE = 4
THREADS_BASE = 1 << 14
THREAD_BYTES = 8
INDEX_ENTRY_MAX = 55  # bytes of msgpack one INDEX entry takes at most (6 integers)

CHUNK_NAMES = {
    CHUNK_METADATA: "METADATA",
    CHUNK_DEFS: "DEFS",
    CHUNK_DATA: "DATA",
    CHUNK_STATS: "STATS",
    CHUNK_INDEX: "INDEX",
}
RECORD_NAMES = {
    REC_STRING: "STRING",
    REC_FUNCTION: "FUNCTION",
    REC_FRAME: "FRAME",
    REC_THREAD: "THREAD",
    REC_PROCESS: "PROCESS",
    REC_TASK: "TASK",
    REC_BEGIN: "BEGIN",
    REC_PASS: "PASS",
    REC_THREAD_START: "THREAD_START",
    REC_THREAD_EXIT: "THREAD_EXIT",
    REC_THREAD_RENAME: "THREAD_RENAME",
    REC_PROCESS_START: "PROCESS_START",
    REC_PROCESS_EXIT: "PROCESS_EXIT",
    REC_PASS_ERRORS: "PASS_ERRORS",
    REC_MARKER: "MARKER",
    REC_PASS_TASKS: "PASS_TASKS",
    REC_TASK_SNAPSHOT: "TASK_SNAPSHOT",
    REC_TASK_STATE: "TASK_STATE",
    REC_TASK_AWAITS: "TASK_AWAITS",
}
