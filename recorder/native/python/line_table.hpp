// Line numbers from a code object's line table, decoded per version. Each takes the table's
// bytes, co_firstlineno and the byte offset of the current instruction (negative: the frame has
// not started, which maps to co_firstlineno as CPython does). 0 means "no line".
#pragma once

#include <cstdint>
#include <string_view>

#include "recorder/native/cpython/layout.hpp"

namespace psrec::recorder {

// 3.8-3.9 co_lnotab (Objects/lnotab_notes.txt): pairs of (unsigned byte offset delta,
// signed line delta).
int lineFromLnotab(std::string_view table, int firstlineno, int byte_offset);
// 3.10 co_linetable (Objects/lnotab_notes.txt of 3.10): pairs of (unsigned byte length of the
// range, signed line delta, -128 meaning no line).
int lineFromLinetable(std::string_view table, int firstlineno, int byte_offset);
// 3.11+ location table (Objects/locations.md): entries of a header byte 1CCCCLLL (code, length
// in code units - 1) followed by code-specific varints.
int lineFromLocations(std::string_view table, int firstlineno, int byte_offset);

int lineFor(cpython::LineTable kind, std::string_view table, int firstlineno, int byte_offset);

}  // namespace psrec::recorder
