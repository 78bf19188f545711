// The checks of a walk's copy (see torn_checks.hpp).
#include "recorder/native/python/torn_checks.hpp"

#include <cstring>

namespace psrec::recorder {

using cpython::FrameModel;
using cpython::kAbsent;
namespace st = cpython::st;

void TornChecks::note(uint64_t addr, const uint8_t* bytes, size_t len, bool leaf) {
  size_t at = solo_buf_.size();
  solo_buf_.insert(solo_buf_.end(), bytes, bytes + len);
  SoloFrame& f = solo_.emplace_back();
  f.addr = addr;
  f.offset = at;
  f.kept = nullptr;
  f.leaf = leaf;
}

bool TornChecks::verify(size_t len, int32_t instr_offset, size_t instr_width,
                        uint64_t leaf_ptr, uint64_t leaf) {
  // A frame read on its own is not part of one bulk copy: re-read all of them at once and
  // require them unchanged (links, code, and the caller's instruction: a caller that moved on
  // means the callee we read belongs to another call). The leaf's own instruction may move.
  if (solo_.empty()) return true;
  uint64_t leaf_now = 0;
  plan_.clear();
  // The innermost frame must still be the thread's current one: a frame that returned keeps
  // its contents (a zombie frame on 3.8-3.10), and its caller, read after it, may already be
  // at its next call.
  if (leaf_ptr) plan_.add(leaf_ptr, &leaf_now, 8);
  const size_t first = plan_.size();
  for (const SoloFrame& f : solo_) plan_.addView(f.addr, len);
  if (!plan_.run(proc_.mem(), 0)) return false;
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
    const uint8_t* a = copyOf(f);
    const uint8_t* b = plan_.view(first + i);
    // (A frame called by its own function that returned may already be reused at another
    // depth of the recursion: its link is not compared either.)
    for (int k = 0; k < 3; ++k)
      if (!same(a, b, fields[k], widths[k]) && !(k == 1 && selfCall(i + 1)))
        return false;
    if (!f.leaf && !same(a, b, instr_offset, instr_width) && !selfCall(i)) return false;
  }
  return true;
}

bool TornChecks::selfCall(size_t i) const {
  // 3.8-3.10 (frames in walk order, innermost first): solo frame i calls a frame of its own
  // function. Such a caller moves between its recursive calls faster than a re-read can
  // confirm, and shows the same function at any of them (as on 3.11+, see StackReader).
  if (l_.frame_model != FrameModel::kFrameObject || i == 0 || i >= solo_.size()) return false;
  const size_t len = static_cast<size_t>(l_.frame_size);
  const uint64_t code = StructView<st::FrameObject>(copyOf(solo_[i]), len).ptr(l_.frame_code);
  const uint64_t callee = StructView<st::FrameObject>(copyOf(solo_[i - 1]), len).ptr(l_.frame_code);
  return code && code == callee;
}

bool TornChecks::selfRecursiveLeaf() const {
  // 3.8-3.10: a leaf that returned while the walk read it, called by the same function. Fast
  // recursion returns and calls again faster than any re-read can confirm a leaf, and the
  // functions its stack shows are right either way: as in a self-recursion on 3.11+, the
  // stack is kept rather than counted as an error, which would drop nearly every sample of it.
  return !solo_.empty() && solo_[0].leaf && selfCall(1);
}

bool TornChecks::calledFrom(uint64_t now, uint64_t leaf) {
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

bool TornChecks::verifyCallers(const std::vector<RawFrame>& frames, const size_t* which,
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
    plan_.clear();
    for (size_t k = 0; k < count; ++k)
      plan_.add(frames[which[k]].addr, verify_buf_.data() + k * flen, flen);
    if (!plan_.run(proc_.mem(), 0)) return false;
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
  plan_.clear();
  for (size_t k = 0; k < count; ++k)
    plan_.add(frames[which[k]].addr, verify_buf_.data() + k * len, len);
  if (!plan_.run(proc_.mem(), 0)) return false;
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
