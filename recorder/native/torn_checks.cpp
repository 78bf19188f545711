// The unwinder's checks of a walk's copy (torn-copy checks): whether the frames it read
// were all live at one moment, from the instruction each caller stands at (a call to the
// frame above it), and the 3.11 top-frame inference where a thread's current frame is not
// published. See spec/cpython-layouts.md for the facts each check rests on.
#include <algorithm>
#include <cstring>
#include <utility>

#include "recorder/native/unwinder.hpp"

namespace psrec::recorder {

using cpython::FrameModel;
using cpython::kAbsent;
namespace st = cpython::st;

void Unwinder::noteSolo(uint64_t addr, const uint8_t* bytes, size_t len, bool leaf) {
  size_t at = solo_buf_.size();
  solo_buf_.insert(solo_buf_.end(), bytes, bytes + len);
  solo_.push_back({addr, at, leaf});
}

bool Unwinder::verifySolo(size_t len, int32_t instr_offset, size_t instr_width,
                          uint64_t leaf_ptr, uint64_t leaf) {
  // A frame read on its own is not part of one bulk copy: re-read all of them at once and
  // require them unchanged (links, code, and the caller's instruction: a caller that moved on
  // means the callee we read belongs to another call). The leaf's own instruction may move.
  if (solo_.empty()) return true;
  verify_buf_.resize(solo_buf_.size());
  uint64_t leaf_now = 0;
  verify_plan_.clear();
  // The innermost frame must still be the thread's current one: a frame that returned keeps
  // its contents (a zombie frame on 3.8-3.10), and its caller, read after it, may already be
  // at its next call.
  if (leaf_ptr) verify_plan_.add(leaf_ptr, &leaf_now, 8);
  for (const SoloFrame& f : solo_) verify_plan_.add(f.addr, verify_buf_.data() + f.offset, len);
  if (!verify_plan_.run(proc_.mem(), 0)) return false;
  verified_leaf_ = leaf_now;
  if (leaf_ptr && leaf_now != leaf && !calledFrom(leaf_now, leaf) && !selfRecursiveLeaf())
    return false;
  // The fields a walk uses must be unchanged: code, link, owner, and the instruction of
  // every frame but the leaf. Not the whole struct: a running leaf moves its own stack
  // pointer all the time, which says nothing of the copy.
  const bool objects = l_.frame_model == FrameModel::kFrameObject;
  // (Offsets into copies of either struct: compared byte for byte, not read as fields.)
  const int32_t fields[3] = {objects ? int32_t{l_.frame_code} : int32_t{l_.iframe_code},
                             objects ? int32_t{l_.frame_back} : int32_t{l_.iframe_previous},
                             objects ? kAbsent : int32_t{l_.iframe_owner}};
  const size_t widths[3] = {8, 8, 1};
  auto same = [&](const uint8_t* a, const uint8_t* b, int32_t off, size_t width) {
    return off == kAbsent || (static_cast<size_t>(off) + width <= len &&
                              std::memcmp(a + off, b + off, width) == 0);
  };
  for (size_t i = 0; i < solo_.size(); ++i) {
    const SoloFrame& f = solo_[i];
    const uint8_t* a = solo_buf_.data() + f.offset;
    const uint8_t* b = verify_buf_.data() + f.offset;
    // (A frame called by its own function that returned may already be reused at another
    // depth of the recursion: its link is not compared either.)
    for (int k = 0; k < 3; ++k)
      if (!same(a, b, fields[k], widths[k]) && !(k == 1 && selfCall(i + 1)))
        return false;
    if (!f.leaf && !same(a, b, instr_offset, instr_width) && !selfCall(i)) return false;
  }
  return true;
}

bool Unwinder::selfCall(size_t i) const {
  // 3.8-3.10 (frames in walk order, innermost first): solo frame i calls a frame of its own
  // function. Such a caller moves between its recursive calls faster than a re-read can
  // confirm, and shows the same function at any of them (as on 3.11+, see StackReader).
  if (l_.frame_model != FrameModel::kFrameObject || i == 0 || i >= solo_.size()) return false;
  const size_t len = static_cast<size_t>(l_.frame_size);
  const uint64_t code = StructView<st::FrameObject>(solo_buf_.data() + solo_[i].offset, len).ptr(l_.frame_code);
  const uint64_t callee =
      StructView<st::FrameObject>(solo_buf_.data() + solo_[i - 1].offset, len).ptr(l_.frame_code);
  return code && code == callee;
}

void Unwinder::guessFrames(uint64_t tstate, const std::vector<RawFrame>& frames) {
  guess_tstate_ = tstate;
  guess_.clear();
  for (const RawFrame& f : frames) guess_.push_back(f.addr);
  std::sort(guess_.begin(), guess_.end());
}

bool Unwinder::walkGuessed(const ThreadHead& t, std::vector<RawFrame>& out, size_t max_depth,
                           uint64_t* current_frame) {
  // The thread's current frame and every guessed frame in one copy: when the chain from the
  // current frame runs through guessed frames to its end, the stack is that copy (as
  // consistent as a 3.11+ data-stack chunk, and checked as those are: StackReader re-reads
  // callers whose callee changed in place).
  const size_t len = static_cast<size_t>(l_.frame_size);
  const size_t n = std::min<size_t>(guess_.size(), 1000);
  if (!n) return false;
  guess_buf_.resize(n * len);
  uint64_t current = 0;
  verify_plan_.clear();
  verify_plan_.add(t.tstate + static_cast<uint64_t>(l_.tstate_frame), &current, 8);
  for (size_t i = 0; i < n; ++i) verify_plan_.add(guess_[i], guess_buf_.data() + i * len, len);
  ++stats_.frame_reads;
  if (!verify_plan_.run(proc_.mem(), 0)) return false;
  *current_frame = current;
  out.clear();
  solo_.clear();
  solo_buf_.clear();
  uint64_t addr = current;
  while (addr) {
    if (out.size() >= max_depth || out.size() >= n) return false;
    auto it = std::lower_bound(guess_.begin(), guess_.begin() + static_cast<long>(n), addr);
    if (it == guess_.begin() + static_cast<long>(n) || *it != addr) return false;
    StructView<st::FrameObject> v(guess_buf_.data() + static_cast<size_t>(it - guess_.begin()) * len, len);
    RawFrame f;
    f.addr = addr;
    f.code = v.ptr(l_.frame_code);
    f.instr = static_cast<uint64_t>(static_cast<uint32_t>(v.get<int32_t>(l_.frame_lasti)));
    f.prev = v.ptr(l_.frame_back);
    if (!f.code) return false;
    noteSolo(addr, guess_buf_.data() + static_cast<size_t>(it - guess_.begin()) * len, len,
             out.empty());
    out.push_back(f);
    addr = f.prev;
  }
  // One copy is not one instant (the kernel copies the frames one after the other, in
  // address order): read them all again, with the current frame, and require them unchanged,
  // as a walk one by one is.
  return verifySolo(len, l_.frame_lasti, 4, t.tstate + static_cast<uint64_t>(l_.tstate_frame),
                    current);
}

bool Unwinder::selfRecursiveLeaf() const {
  // 3.8-3.10: a leaf that returned while the walk read it, called by the same function. Fast
  // recursion returns and calls again faster than any re-read can confirm a leaf, and the
  // functions its stack shows are right either way: as in a self-recursion on 3.11+, the
  // stack is kept rather than counted as an error, which would drop nearly every sample of it.
  return !solo_.empty() && solo_[0].leaf && selfCall(1);
}

bool Unwinder::calledFrom(uint64_t now, uint64_t leaf) {
  // 3.8-3.10: the thread's current frame moved since the walk began. When it is a callee of
  // the frame the walk took as innermost (the leaf called on, as fast-calling code does all
  // the time), that frame is still live and the stack read is the thread's stack as it was:
  // only a leaf that returned makes the stack read stale. A few frames are followed.
  if (l_.frame_model != FrameModel::kFrameObject || !now || !leaf) return false;
  for (int i = 0; i < 4 && now; ++i) {
    uint64_t back = 0;
    if (!proc_.mem().readValue(now + static_cast<uint64_t>(l_.frame_back), back)) return false;
    if (back == leaf) return true;
    now = back;
  }
  return false;
}

bool Unwinder::verifyCallers(const std::vector<RawFrame>& frames, const size_t* which,
                             size_t count) {
  // One bulk copy is not one snapshot: it runs from low to high addresses while the target
  // runs, so a caller can be copied before its callee returned and the callee after another
  // function took its place (the same address, the caller at its next line). Re-read such
  // callers at once and require each one's code, link and instruction unchanged.
  if (count == 0) return true;
  if (l_.frame_model == FrameModel::kFrameObject) {
    // 3.8-3.10: the same for a walk copied in one read (walkGuessed).
    const size_t flen = static_cast<size_t>(l_.frame_size);
    verify_buf_.resize(count * flen);
    verify_plan_.clear();
    for (size_t k = 0; k < count; ++k)
      verify_plan_.add(frames[which[k]].addr, verify_buf_.data() + k * flen, flen);
    if (!verify_plan_.run(proc_.mem(), 0)) return false;
    for (size_t k = 0; k < count; ++k) {
      StructView<st::FrameObject> v(verify_buf_.data() + k * flen, flen);
      const RawFrame& f = frames[which[k]];
      if (v.ptr(l_.frame_code) != f.code || v.ptr(l_.frame_back) != f.prev ||
          static_cast<uint64_t>(static_cast<uint32_t>(v.get<int32_t>(l_.frame_lasti))) != f.instr)
        return false;
    }
    return true;
  }
  if (l_.frame_model != FrameModel::kInterpreterFrame) return true;
  const size_t len = static_cast<size_t>(l_.iframe_size);
  verify_buf_.resize(count * len);
  verify_plan_.clear();
  for (size_t k = 0; k < count; ++k)
    verify_plan_.add(frames[which[k]].addr, verify_buf_.data() + k * len, len);
  if (!verify_plan_.run(proc_.mem(), 0)) return false;
  for (size_t k = 0; k < count; ++k) {
    StructView<st::IFrame> v(verify_buf_.data() + k * len, len);
    const RawFrame& f = frames[which[k]];
    if ((v.ptr(l_.iframe_code) & ~l_.code_tag_bits) != f.code ||
        v.ptr(l_.iframe_previous) != f.prev || v.ptr(l_.iframe_instr) != f.instr)
      return false;
  }
  return true;
}

}  // namespace psrec::recorder
