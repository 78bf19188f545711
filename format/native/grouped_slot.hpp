// One hash for the open-addressing tables keyed by two 32-bit halves: the decoder's stack trie
// and the analyzer's accumulator.
#pragma once

#include <cstddef>
#include <cstdint>

namespace psrec::format {

// Where a key of two 32-bit halves starts probing in a table of a power-of-two size (at
// least 8). Keys that differ only in the low three bits go to neighbouring slots (trie nodes
// made one after another, frames of one function, are often used together, and then share
// cache lines); groups of eight are spread by a hash of the rest, so that runs of consecutive
// keys (one thread's nodes 0..n) never pile up into long probe sequences.
inline size_t groupedSlot(uint64_t key) {
  uint64_t g = key >> 3;  // every bit of the group moves the low bits the mask keeps
  g ^= g >> 33;
  g *= 0xFF51AFD7ED558CCDULL;
  g ^= g >> 33;
  return static_cast<size_t>(g << 3 | (key & 7));
}

}  // namespace psrec::format
