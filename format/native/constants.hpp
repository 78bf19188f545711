// Constants of the .psr format. spec/psr-format.md is normative; tests/unit/test_spec_sync.py
// checks that every value here matches the spec's tables and format/_constants.py.
#pragma once

#include <cstdint>

namespace psrec::format {

constexpr uint16_t kFormatMajor = 1;
constexpr uint16_t kFormatMinor = 5;

constexpr uint32_t kHeaderSize = 64;
constexpr uint32_t kChunkHeaderSize = 24;
constexpr uint32_t kTrailerSize = 24;
constexpr uint32_t kChunkSync = 0x4B4E4843;  // "CHNK" little-endian

// Chunk types.
constexpr uint8_t kChunkMetadata = 1;
constexpr uint8_t kChunkDefs = 2;
constexpr uint8_t kChunkData = 3;
constexpr uint8_t kChunkStats = 4;
constexpr uint8_t kChunkIndex = 5;

// Chunk flags.
constexpr uint8_t kChunkFlagZstd = 0x01;

// Definition records (in DEFS chunks).
constexpr uint8_t kRecString = 0x01;
constexpr uint8_t kRecFunction = 0x02;
constexpr uint8_t kRecFrame = 0x03;
constexpr uint8_t kRecThread = 0x04;
constexpr uint8_t kRecProcess = 0x05;
constexpr uint8_t kRecTask = 0x06;

// Data records (in DATA chunks).
constexpr uint8_t kRecBegin = 0x10;
constexpr uint8_t kRecPass = 0x11;
constexpr uint8_t kRecThreadStart = 0x20;
constexpr uint8_t kRecThreadExit = 0x21;
constexpr uint8_t kRecThreadRename = 0x22;
constexpr uint8_t kRecProcessStart = 0x23;
constexpr uint8_t kRecProcessExit = 0x24;
constexpr uint8_t kRecPassErrors = 0x25;
constexpr uint8_t kRecMarker = 0x26;
constexpr uint8_t kRecPassTasks = 0x27;
constexpr uint8_t kRecTaskSnapshot = 0x28;
constexpr uint8_t kRecTaskState = 0x29;
constexpr uint8_t kRecTaskAwaits = 0x2A;

// A TASK_STATE's states (spec section 4).
constexpr uint32_t kTaskEnded = 0;
constexpr uint32_t kTaskSuspended = 1;
constexpr uint32_t kTaskReady = 2;
constexpr uint32_t kTaskRunning = 3;

// Flags in the low bits of a PASS entry's head varint (head = thread_ref << 3 | flags).
constexpr uint32_t kEntryStack = 0x1;
constexpr uint32_t kEntryStatus = 0x2;
constexpr uint32_t kEntryCpu = 0x4;
constexpr uint32_t kEntryFlagBits = 3;

// Thread status bits.
constexpr uint8_t kStatusGilHeld = 0x01;
constexpr uint8_t kStatusOnCpu = 0x02;
constexpr uint8_t kStatusGilRequested = 0x04;
constexpr uint8_t kStatusGilUnknown = 0x10;
constexpr uint8_t kStatusCpuUnknown = 0x20;
constexpr uint8_t kStatusGilRequestedKnown = 0x40;

// Frame id 0 is never defined: it marks a truncated stack (it stands as the root frame).
constexpr uint32_t kTruncatedFrame = 0;
// Deepest stack recorded: deeper stacks keep their innermost kMaxDepth - 1 frames.
constexpr uint32_t kMaxDepth = 8192;
// A sample stands for the time since the previous pass, capped at this many sampling intervals.
constexpr uint32_t kWeightCapIntervals = 4;

// Limits a reader enforces (spec section 9), so that no count, id or depth read from a file
// can make it allocate or loop beyond what the file's size and these constants allow.
// Thread refs run from 1 to kMaxThreadRef.
constexpr uint32_t kMaxThreadRef = 16777216;
// Thread-samples one DATA chunk may yield, and passes it may hold; an encoder seals a chunk
// well before either.
constexpr uint32_t kMaxChunkSamples = 4194304;
constexpr uint32_t kMaxChunkPasses = 1048576;
// The limits that depend on a file's size (definitions, events) are worked out by the reader
// (format/reader.py) and given to the decoder with each chunk.

}  // namespace psrec::format
