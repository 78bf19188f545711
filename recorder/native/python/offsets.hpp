// Chooses the field table for a target: built-in tables for 3.8-3.12, and for 3.13+ the
// offsets the target itself publishes in _Py_DebugOffsets (at the start of _PyRuntime).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "recorder/native/cpython/layout.hpp"

namespace psrec::recorder {

// The CPython versions psrec records: 3.kOldestMinor to 3.kNewestMinor, free-threaded builds
// from 3.kFreeThreadedFromMinor. Named here only: the recorder's messages, the Python package
// (psrec.recorder.supported) and the tests read them from the built module. A later version
// is tried from its _Py_DebugOffsets with the newest table.
constexpr uint32_t kOldestMinor = 8;
constexpr uint32_t kNewestMinor = 15;
constexpr uint32_t kFreeThreadedFromMinor = 14;
// "3.8 to 3.15", as messages say it.
std::string supportedRange();

// How much of _PyRuntime to read for its _Py_DebugOffsets: more than any shape psrec knows
// (3.15's has 148 uint64 fields).
constexpr size_t kDebugOffsetsSize = 256 * 8;
constexpr char kDebugCookie[8] = {'x', 'd', 'e', 'b', 'u', 'g', 'p', 'y'};

// Built-in table for a minor version (micro ignored); nullopt when we have none.
std::optional<cpython::Layout> builtinLayout(uint32_t version_hex);

// Parses a _Py_DebugOffsets copied from the target (3.13+), taking what the block lacks from
// the version's table. Returns nullopt (and why) when the cookie is wrong or a field psrec
// needs is missing or out of its struct; sets warning for a version newer than psrec knows.
std::optional<cpython::Layout> layoutFromDebugOffsets(const uint8_t* data, size_t size,
                                                      std::string* why, std::string* warning);

// The version a _Py_DebugOffsets block states (0 if the cookie does not match).
uint32_t debugOffsetsVersion(const uint8_t* data, size_t size);

}  // namespace psrec::recorder
