// The checks of a walk's copy (torn-copy checks): whether the frames a walk read one by one
// (or from one copy of guessed addresses) were all live at one moment, from the instruction
// each caller stands at (a call to the frame above it), and the re-reads of callers whose
// callee changed in place. See spec/cpython-layouts.md for the facts each check rests on.
#pragma once

#include <cstdint>
#include <vector>

#include "recorder/native/python/python_process.hpp"
#include "recorder/native/memory/remote_memory.hpp"
#include "recorder/native/python/unwind_types.hpp"

namespace psrec::recorder {

class TornChecks {
 public:
  explicit TornChecks(PythonProcess& proc) : proc_(proc), l_(proc.layout()) {}

  // Forgets the frames noted by the last walk.
  void clear() {
    solo_.clear();
    solo_buf_.clear();
  }
  // Notes a frame read on its own (not part of one bulk copy), to check after the walk.
  // leaf: the walk's innermost frame, whose own instruction may move.
  void note(uint64_t addr, const uint8_t* bytes, size_t len, bool leaf);
  // The same for bytes that stay in place until verify() (a copy the walker keeps): noted
  // without copying them.
  void noteKept(uint64_t addr, const uint8_t* bytes, bool leaf) {
    // Field by field in place: a whole struct built aside and copied in stalls on its own
    // stores, once per frame of a deep walk.
    SoloFrame& f = solo_.emplace_back();
    f.addr = addr;
    f.offset = 0;
    f.kept = bytes;
    f.leaf = leaf;
  }
  // Forgets all but the first `count` frames noted (the innermost of a walk).
  void keepInnermost(size_t count) {
    if (solo_.size() > count) solo_.resize(count);
  }
  bool empty() const { return solo_.empty(); }
  uint64_t firstAddr() const { return solo_.front().addr; }
  uint64_t lastAddr() const { return solo_.back().addr; }
  void markFirstLeaf() { solo_.front().leaf = true; }
  // Re-reads every noted frame at once and requires them unchanged (links, code, owner and
  // every caller's instruction). leaf_ptr/leaf: where the thread state points at its
  // innermost frame, and the frame the walk started from; checked in the same read (0: no
  // check). instr_offset/instr_width: the instruction field of the frame struct of length len.
  bool verify(size_t len, int32_t instr_offset, size_t instr_width, uint64_t leaf_ptr = 0,
              uint64_t leaf = 0);
  // The innermost frame as verify's read found it (1 before any read; 0: the thread has no
  // current frame any more).
  uint64_t verifiedLeaf() const { return verified_leaf_; }
  void resetVerifiedLeaf() { verified_leaf_ = 1; }
  // 3.11+ (and 3.8-3.10 copies of guessed frames): whether the callers frames[which[..]] of
  // frames walked from one bulk copy still read the same.
  bool verifyCallers(const std::vector<RawFrame>& frames, const size_t* which, size_t count);

 private:
  // Whether the frame at `now` was called (within a few frames) from `leaf` (3.8-3.10).
  bool calledFrom(uint64_t now, uint64_t leaf);
  bool selfRecursiveLeaf() const;
  bool selfCall(size_t i) const;

  PythonProcess& proc_;
  const cpython::Layout& l_;
  ReadPlan plan_;  // the reads again of the checks
  struct SoloFrame {
    uint64_t addr;
    size_t offset;         // of its copy in solo_buf_ (note)
    const uint8_t* kept;   // or its bytes where the walker keeps them (noteKept)
    bool leaf;
  };
  const uint8_t* copyOf(const SoloFrame& f) const {
    return f.kept ? f.kept : solo_buf_.data() + f.offset;
  }
  std::vector<SoloFrame> solo_;
  std::vector<uint8_t> solo_buf_;
  std::vector<uint8_t> verify_buf_;
  uint64_t verified_leaf_ = 0;
};

}  // namespace psrec::recorder
