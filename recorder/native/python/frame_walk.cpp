// The frame walker (see frame_walk.hpp).
#include "recorder/native/python/frame_walk.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace psrec::recorder {

using cpython::FrameModel;
using cpython::kAbsent;
namespace st = cpython::st;

namespace {

// 3.8-3.10: frames a walk of the guessed copy may read on its own (calls made since the guess)
// before it leaves the stack to a walk one by one.
constexpr size_t kGuessMisses = 64;
// How many stacks a frame stays in the guess after the last that held it (see guessFrames).
constexpr uint32_t kGuessAge = 32;

// The largest older chunk read ahead of a walk (larger ones are read when the walk gets there).
constexpr uint64_t kMaxOlderAhead = 4 * kChunkProbe;

}  // namespace

FrameWalker::FrameWalker(PythonProcess& proc, ReadAhead& ahead)
    : proc_(proc),
      l_(proc.layout()),
      ahead_(ahead),
      checks_(proc),
      capture_header_(captureLayout(l_).header_bytes) {
  chunk_buf_.reserve(64 * 1024);
}

void FrameWalker::noteWalk(StackHint& hint) const {
  if (walk_bottom_) hint.bottom = walk_bottom_;
  hint.entry = walk_entry_;
  hint.entry_code = walk_entry_code_;
  hint.outside_n = 0;
  for (uint64_t a : walk_outside_) {
    if (hint.outside_n == StackHint::kMaxOutside) break;
    hint.outside[hint.outside_n++] = a;
  }
  hint.older_n = 0;
  for (const LoadedChunk& c : chunks_) {
    if (!c.older || c.end - c.start > kMaxOlderAhead) continue;
    if (hint.older_n == StackHint::kMaxOlder) break;
    hint.older[hint.older_n] = c.start;
    hint.older_len[hint.older_n++] = static_cast<uint32_t>(c.end - c.start);
  }
}

bool FrameWalker::loadChunk(uint64_t addr, uint64_t used_end) {
  size_t at = chunk_buf_.size();
  ++chunk_loads_;
  if (used_end) {
    // The current chunk: its used part ends at tstate->datastack_top.
    ++stats_.chunk_reads;
    if (used_end <= addr || used_end - addr > kMaxChunkBytes) return false;
    size_t len = static_cast<size_t>(used_end - addr);
    chunk_buf_.resize(at + len);
    if (proc_.mem().read(addr, chunk_buf_.data() + at, len) != ReadStatus::kOk) {
      chunk_buf_.resize(at);
      return false;
    }
    return addChunk({addr, used_end, at, false, nullptr});
  }
  // An older chunk: its header says how much of it (chunk->top, saved when the next chunk was
  // pushed) is in use. What the pass read of it ahead is used where it lies when it covers
  // that much.
  for (size_t j = 0; j < ahead_.older_n; ++j) {
    if (ahead_.older_addr[j] != addr) continue;
    const uint8_t* ext = ahead_.older_ptr[j];
    const uint64_t used = usedOfOlder(ext, ahead_.older_len[j]);
    if (used && used <= ahead_.older_len[j]) return addChunk({addr, addr + used, 0, true, ext});
    break;
  }
  // Else read the smallest chunk size in one go, and the rest of it if more is in use.
  ++stats_.chunk_reads;
  chunk_buf_.resize(at + kChunkProbe);
  ReadStatus st;
  const size_t got = proc_.mem().readSome(addr, chunk_buf_.data() + at, kChunkProbe, &st);
  const uint64_t used = usedOfOlder(chunk_buf_.data() + at, got);
  if (!used) {
    chunk_buf_.resize(at);
    return false;
  }
  chunk_buf_.resize(at + used);
  if (used > got && proc_.mem().read(addr + got, chunk_buf_.data() + at + got, used - got) !=
                        ReadStatus::kOk) {
    chunk_buf_.resize(at);
    return false;
  }
  return addChunk({addr, addr + used, at, true, nullptr});
}

uint64_t FrameWalker::usedOfOlder(const uint8_t* head, size_t len) const {
  if (len < static_cast<size_t>(l_.chunk_data)) return 0;
  StructView<st::Chunk> h(head, len);
  const uint64_t size = h.ptr(l_.chunk_size);
  const uint64_t top = h.ptr(l_.chunk_top);
  const uint64_t used = static_cast<uint64_t>(l_.chunk_data) + top * 8;
  return used > size || size > kMaxChunkBytes || top > kMaxChunkBytes ? 0 : used;
}

bool FrameWalker::addChunk(const LoadedChunk& c) {
  next_chunk_ = StructView<st::Chunk>(bytesOf(c), c.end - c.start).ptr(l_.chunk_previous);
  chunks_.push_back(c);
  return true;
}

const uint8_t* FrameWalker::frameBytesElsewhere(uint64_t addr) {
  const uint64_t size = static_cast<uint64_t>(l_.iframe_size);
  for (;;) {
    for (size_t i = 0; i < chunks_.size(); ++i) {
      const auto& c = chunks_[i];
      if (c.holds(addr, size)) {
        last_chunk_ = i;
        return bytesOf(c) + (addr - c.start);
      }
    }
    // Not in what we have: older chunks hold outer frames; frames outside every chunk
    // (generators, C-stack entry frames) are read on their own.
    if (!next_chunk_ || chunk_loads_ >= 256 || !loadChunk(next_chunk_, 0)) break;
  }
  walk_outside_.push_back(addr);
  for (size_t j = 0; j < ahead_.outside_n; ++j)
    if (ahead_.outside_addr[j] == addr) return ahead_.outside_ptr[j];
  ++stats_.frame_reads;
  if (size > sizeof scratch_ || proc_.mem().read(addr, scratch_, size) != ReadStatus::kOk)
    return nullptr;
  checks_.note(addr, scratch_, size, false);
  return scratch_;
}

WalkResult FrameWalker::walk(const ThreadHead& t, std::vector<RawFrame>& out, size_t max_depth,
                             uint64_t bottom, bool guess, bool last_try, uint64_t stop) {
  out.clear();
  verify_tstate_ = 0;
  walk_outside_.clear();
  cut_ = false;
  if (l_.frame_model == FrameModel::kFrameObject)
    return walkFrameObjects(t, out, max_depth, bottom, guess, last_try);
  return walkInterpreterFrames(t, out, max_depth, bottom, stop);
}

WalkResult FrameWalker::walkFrameObjects(const ThreadHead& t, std::vector<RawFrame>& out,
                                         size_t max_depth, uint64_t bottom, bool guess,
                                         bool last_try) {
  {
    // The guessed copy also reads the thread's current frame: a walk one by one after it
    // starts from there (the thread state read at the pass's start is older).
    uint64_t start = t.frame;
    walk_bottom_ = 0;
    bool torn = false;
    if (guess && bottom && guess_tstate_ == t.tstate &&
        walkGuessed(t, out, max_depth, bottom, &start, &torn))
      return WalkResult::kOk;
    // A copy whose chain ends elsewhere, runs in a cycle or meets a frame with no code is most
    // often torn (a frame freed while it was copied leads into the free list). A deep stack
    // is copied again (the reader's next try), far faster than a walk one by one and more
    // likely to hold; its last try walks one by one. A shallow one is walked one by one now:
    // a thread that resumes generators from C tears copies again and again.
    if (torn && copyAgainFirst(last_try)) return WalkResult::kError;
    // One by one, each frame's link read before the next: slow enough for a thread that calls
    // and returns fast to change under the walk, so every frame is checked afterwards. The
    // frames read join the guess for a walk again.
    uint8_t buf[256];
    size_t len = static_cast<size_t>(l_.frame_size);
    uint64_t addr = start;
    checks_.clear();
    out.clear();
    WalkResult result = WalkResult::kOk;
    while (addr) {
      if (out.size() >= max_depth) {
        result = WalkResult::kTruncated;
        break;
      }
      ++stats_.frame_reads;
      if (proc_.mem().read(addr, buf, len) != ReadStatus::kOk) {
        result = WalkResult::kError;
        break;
      }
      checks_.note(addr, buf, len, out.empty());
      StructView<st::FrameObject> v(buf, len);
      RawFrame& f = out.emplace_back();
      f.addr = addr;
      f.code = v.ptr(l_.frame_code);
      f.instr = static_cast<uint64_t>(static_cast<uint32_t>(v.get<int32_t>(l_.frame_lasti)));
      f.prev = v.ptr(l_.frame_back);
      if (!f.code) {
        out.pop_back();
        result = WalkResult::kError;
        break;
      }
      addr = f.prev;
      if (!addr) {
        // See walkGuessed. And a generator's frame that ends a stack the thread did not end
        // there last time is, but for a thread that resumes generators from C with no Python
        // frame under them, a copy that caught it just before a resume: its `f_back` copied
        // while still cleared, its state (further on in the struct) after the resume set it
        // running again. The check's own read can catch it so too. Only the last read again
        // believes it.
        if (!running(v) || (!last_try && bottom && f.addr != bottom && v.ptr(l_.frame_gen))) {
          result = WalkResult::kError;
          break;
        }
        walk_bottom_ = f.addr;
      }
    }
    addGuess(t.tstate, out);
    checks_.resetVerifiedLeaf();
    if (result == WalkResult::kOk &&
        !checks_.verify(len, l_.frame_lasti, 4, t.tstate + static_cast<uint64_t>(l_.tstate_frame),
                    start)) {
      // A thread whose Python code ended meanwhile (a thread finishing) was seen without a
      // Python frame, in the check's own read: that is its sample.
      walk_bottom_ = 0;
      if (!checks_.verifiedLeaf()) {
        out.clear();
        return WalkResult::kOk;
      }
      result = WalkResult::kError;
    }
    return result;
  }
}

WalkResult FrameWalker::walkInterpreterFrames(const ThreadHead& t, std::vector<RawFrame>& out,
                                              size_t max_depth, uint64_t bottom,
                                              uint64_t stop) {
  walk_entry_ = walk_entry_code_ = walk_bottom_ = 0;
  IWalk w;
  w.stop = stop;
  uint64_t addr = t.frame;
  if (!startWalk(t, addr)) return WalkResult::kError;
  while (addr) {
    if (addr == t.base_frame) {
      // 3.15+: the thread's base frame, inside its thread state, is where every stack of it
      // ends (owned by the interpreter, no `previous`): nothing in it to read.
      if (!out.empty()) out.back().entered = true;
      walk_bottom_ = addr;
      break;
    }
    if (out.size() >= max_depth) return WalkResult::kTruncated;
    const size_t outside_before = walk_outside_.size();
    const uint8_t* p = frameBytes(addr);
    if (!p) return WalkResult::kError;
    StructView<st::IFrame> v(p, static_cast<size_t>(l_.iframe_size));
    uint8_t owner = v.get<uint8_t>(l_.iframe_owner);
    uint64_t prev = v.ptr(l_.iframe_previous);
    if (owner > l_.owner_max) return WalkResult::kError;  // not a frame: a torn read
    // A generator drops its frame's `previous` link when it suspends: a suspended frame on a
    // running stack means the copy caught the generator between a yield and a resume.
    if (owner == kOwnedByGenerator && !prev) return WalkResult::kError;
    if (owner >= l_.owner_shim) {
      // Shim frames owned by the C stack or the interpreter (3.12+) run no Python code: never
      // report them. The frame above one was entered from C.
      if (!out.empty()) out.back().entered = true;
    } else if (!takeFrame(t, v, addr, prev, owner, outside_before, out, w)) {
      return WalkResult::kError;
    }
    if (!linkHolds(t, addr, prev, owner, out)) return WalkResult::kError;
    if (!prev && owner >= l_.owner_shim && addr != bottom &&
        walk_outside_.size() != outside_before) {
      // The walk ends at an entry frame on the C stack other than the one the thread's last
      // walk ended at: either the thread's stack is new, or the copy caught an entry frame
      // that a re-entry from C was still setting up, its `previous` not yet linked, and the
      // stack looks whole while its outer frames are missing. Read it again, with the
      // thread's current frame, before believing it.
      if (checks_.empty() || checks_.lastAddr() != addr)
        checks_.note(addr, p, static_cast<size_t>(l_.iframe_size), false);
      w.check_current = l_.tstate_current_frame != kAbsent;
    }
    if (!prev) walk_bottom_ = addr;
    if (w.cut_at && out.size() == w.cut_at && prev) {
      // The frames under these are the frame cache's (StackReader::readOnce checks the fit).
      cut_ = true;
      break;
    }
    addr = prev;
  }
  return verifyWalk(t, out, w.check_current);
}

bool FrameWalker::startWalk(const ThreadHead& t, uint64_t& addr) {
  const uint64_t ahead_cframe = std::exchange(ahead_.cframe, 0);
  const uint64_t ahead_chunk = std::exchange(ahead_.chunk, 0);
  if (l_.tstate_cframe != kAbsent) {
    // 3.11-3.12: tstate->cframe->current_frame.
    if (!addr) return true;
    if (ahead_cframe && ahead_cframe == addr) {
      addr = ahead_.frame;
    } else if (!proc_.mem().readValue(addr + static_cast<uint64_t>(l_.cframe_current_frame),
                                      addr)) {
      return false;
    }
  }
  chunk_buf_.clear();
  chunks_.clear();
  last_chunk_ = 0;
  checks_.clear();
  next_chunk_ = 0;
  chunk_loads_ = 0;
  if (addr && t.datastack_chunk && t.datastack_top > t.datastack_chunk) {
    const uint64_t used = t.datastack_top - t.datastack_chunk;
    if (ahead_chunk == t.datastack_chunk && used <= ahead_.len &&
        used >= static_cast<uint64_t>(l_.chunk_data)) {
      // Read ahead with the thread state: no further system call.
      addChunk({t.datastack_chunk, t.datastack_top, 0, false, ahead_.data});
    } else {
      // One bulk read of the current chunk's used part instead of one read per frame.
      loadChunk(t.datastack_chunk, t.datastack_top);
    }
  }
  return true;
}

bool FrameWalker::takeFrame(const ThreadHead& t, const StructView<st::IFrame>& v, uint64_t addr,
                            uint64_t prev, uint8_t owner, size_t outside_before,
                            std::vector<RawFrame>& out, IWalk& w) {
  // Filled in place: a frame built aside and copied in costs more than the walk's reads.
  RawFrame& f = out.emplace_back();
  f.addr = addr;
  f.prev = prev;
  f.code = v.ptr(l_.iframe_code) & ~l_.code_tag_bits;
  f.instr = v.ptr(l_.iframe_instr);
  if (l_.iframe_tlbc_index != kAbsent) f.tlbc = v.get<int32_t>(l_.iframe_tlbc_index);
  f.owner = owner;
  f.outside = walk_outside_.size() != outside_before;
  if (l_.iframe_is_entry != kAbsent) f.entered = v.get<uint8_t>(l_.iframe_is_entry) != 0;
  if (!f.code) return false;
  if (f.entered && !w.entry_seen) {
    // The current loop's entry frame; noted for the next pass only when it is in the
    // current chunk.
    w.entry_seen = true;
    if (!f.outside && addr >= t.datastack_chunk && addr < t.datastack_top) {
      walk_entry_ = addr;
      walk_entry_code_ = f.code;
    }
  }
  if (f.code == shim_code_ && shim_code_) out.pop_back();
  if (w.stop && addr == w.stop && !w.cut_at) w.cut_at = out.size() + kAnchorCallers;
  return true;
}

bool FrameWalker::linkHolds(const ThreadHead& t, uint64_t addr, uint64_t prev, uint8_t owner,
                            const std::vector<RawFrame>& out) const {
  if (prev == addr) return false;
  if (!prev && l_.iframe_is_entry != kAbsent && owner < l_.owner_shim && !out.empty() &&
      !out.back().entered) {
    // 3.11 marks a thread's first frame as entered from C: a stack ending at a frame not so
    // marked was caught while a frame was being linked in (its `previous` not set yet).
    return false;
  }
  if (!prev && l_.owner_shim != cpython::Layout::kNoShim && owner < l_.owner_shim) {
    // 3.12+ runs every frame under the entry frame of its run of the interpreter loop: a
    // Python frame with no `previous` was pushed and not yet linked to its entry frame
    // (_PyEval_Vector pushes it unlinked; _PyEval_EvalFrameDefault links it), and the copy
    // caught the thread's current frame pointing at it already.
    return false;
  }
  if (!prev && t.base_frame && addr != t.base_frame) {
    // 3.15+: every whole stack ends at the thread's base frame; one that ends elsewhere
    // was copied while an entry frame was being linked in (its `previous` not yet set).
    return false;
  }
  return true;
}

WalkResult FrameWalker::verifyWalk(const ThreadHead& t, std::vector<RawFrame>& out,
                                   bool check_current) {
  if (!checks_.empty()) {
    // The innermost frame's instruction pointer may move; mark it so if it was read alone.
    if (!out.empty() && checks_.firstAddr() == out.front().addr) checks_.markFirstLeaf();
    const uint64_t current =
        check_current ? t.tstate + static_cast<uint64_t>(l_.tstate_current_frame) : 0;
    checks_.resetVerifiedLeaf();
    if (!checks_.verify(static_cast<size_t>(l_.iframe_size), l_.iframe_instr, 8, current, t.frame)) {
      walk_bottom_ = 0;
      // As on 3.8-3.10: a thread seen with no current frame in the check's own read has left
      // Python code (it is ending); that is its sample.
      if (current && !checks_.verifiedLeaf()) {
        out.clear();
        return WalkResult::kOk;
      }
      return WalkResult::kError;
    }
  }
  return WalkResult::kOk;
}

void FrameWalker::guessFrames(uint64_t tstate, const std::vector<RawFrame>& frames) {
  guess_depth_ = frames.size();
  if (!frames.empty()) addGuess(tstate, frames);
}

void FrameWalker::addGuess(uint64_t tstate, const std::vector<RawFrame>& frames) {
  // The frames of the thread's recent stacks, not only its last: a loop that calls
  // recursions to depths that change at every call takes its frame objects from the same few
  // (each code object's spare frame, the free list), so that the frames of one stack are
  // nearly all among those of the stacks just before it, at whatever depth it is. A frame no
  // stack has held for kGuessAge stacks leaves the guess.
  if (guess_tstate_ != tstate) {
    guess_tstate_ = tstate;
    guess_.clear();
    guess_seen_.clear();
  }
  ++guess_age_;
  guess_new_.clear();
  for (const RawFrame& f : frames) {
    const auto it = std::lower_bound(guess_.begin(), guess_.end(), f.addr);
    if (it != guess_.end() && *it == f.addr)
      guess_seen_[static_cast<size_t>(it - guess_.begin())] = guess_age_;
    else
      guess_new_.push_back(f.addr);
  }
  bool old = false;
  for (uint32_t seen : guess_seen_) old |= guess_age_ - seen > kGuessAge;
  if (guess_new_.empty() && !old) return;
  guess_merge_.clear();
  for (size_t i = 0; i < guess_.size(); ++i)
    if (guess_age_ - guess_seen_[i] <= kGuessAge) guess_merge_.emplace_back(guess_[i], guess_seen_[i]);
  for (uint64_t a : guess_new_) guess_merge_.emplace_back(a, guess_age_);
  std::sort(guess_merge_.begin(), guess_merge_.end());
  guess_.clear();
  guess_seen_.clear();
  for (const auto& [a, seen] : guess_merge_) {
    if (!guess_.empty() && guess_.back() == a) continue;
    guess_.push_back(a);
    guess_seen_.push_back(seen);
  }
}

bool FrameWalker::walkGuessed(const ThreadHead& t, std::vector<RawFrame>& out, size_t max_depth,
                              uint64_t bottom, uint64_t* current_frame, bool* torn) {
  // The thread's current frame and every guessed frame in one plan (frames close together
  // read as one span: a deep recursion's frames lie in a few runs): when the chain from the
  // current frame runs through guessed frames to its end, the stack is that copy (as
  // consistent as a 3.11+ data-stack chunk, and checked as those are: StackReader re-reads
  // callers whose callee changed in place). A few frames the guess lacks (calls made since)
  // are read on their own and the guess is taken again from this walk.
  const size_t len = static_cast<size_t>(l_.frame_size);
  const size_t n = guess_.size();
  if (!n) return false;
  uint64_t current = 0;
  guess_plan_.clear();
  guess_plan_.add(t.tstate + static_cast<uint64_t>(l_.tstate_frame), &current, 8);
  for (size_t i = 0; i < n; ++i) guess_plan_.addView(guess_[i], len);
  ++stats_.frame_reads;
  if (!guess_plan_.run(proc_.mem(), 0)) return false;
  *current_frame = current;
  out.clear();
  checks_.clear();
  size_t missed = 0;
  size_t at = 0;  // where the last frame was in guess_: its caller is usually beside it
  bool root_running = false;
  uint64_t addr = current;
  while (addr) {
    if (out.size() >= max_depth) {
      *torn = true;  // (a cycle)
      return false;
    }
    if (at + 1 < n && guess_[at + 1] == addr)
      ++at;
    else if (at > 0 && guess_[at - 1] == addr)
      --at;
    else
      at = static_cast<size_t>(std::lower_bound(guess_.begin(), guess_.end(), addr) -
                               guess_.begin());
    const bool kept = at < n && guess_[at] == addr;
    const uint8_t* bytes;
    if (kept) {
      bytes = guess_plan_.view(1 + at);
    } else {
      if (++missed > kGuessMisses || len > sizeof scratch_) return false;
      ++stats_.frame_reads;
      if (proc_.mem().read(addr, scratch_, len) != ReadStatus::kOk) return false;
      bytes = scratch_;
      at = 0;
    }
    StructView<st::FrameObject> v(bytes, len);
    if (kept)
      checks_.noteKept(addr, bytes, out.empty());
    else
      checks_.note(addr, bytes, len, out.empty());
    RawFrame& f = out.emplace_back();  // filled in place (see walkInterpreterFrames)
    f.addr = addr;
    f.code = v.ptr(l_.frame_code);
    f.instr = static_cast<uint64_t>(static_cast<uint32_t>(v.get<int32_t>(l_.frame_lasti)));
    f.prev = v.ptr(l_.frame_back);
    if (!f.code) {
      *torn = true;
      return false;
    }
    addr = f.prev;
    if (!addr) root_running = running(v);
  }
  // A stack keeps its first frame while the thread stays in Python code: a copy that ends
  // elsewhere either caught a generator between a yield and a resume (the thread state names
  // it, its frame has dropped its link already) or shows a thread that left Python and came
  // back. Either way the walk one by one decides. A stack's first frame runs for as long as
  // the stack lives: one that does not (it yielded or returned while the copy was made) ends
  // no stack, whichever walk read it.
  if (out.empty() || out.back().addr != bottom || !root_running) {
    *torn = true;
    return false;
  }
  walk_bottom_ = bottom;
  // One copy is not one instant (the kernel copies the frames one after the other, in
  // address order): the frames that changed since the thread's last good stack are read
  // again, with the current frame, once the reader knows which they are (verifyNewer).
  verify_tstate_ = t.tstate;
  verify_leaf_ = current;
  if (missed) addGuess(t.tstate, out);
  return true;
}

CaptureLayout FrameWalker::captureLayout(const cpython::Layout& l) {
  CaptureLayout c;
  if (l.frame_model == FrameModel::kFrameObject) {
    c.tstate_frame = l.tstate_frame;
    c.frame_previous = l.frame_back;
    c.header_bytes = static_cast<uint32_t>(l.frame_size);
  } else {
    if (l.tstate_cframe != kAbsent) {
      c.tstate_frame = l.tstate_cframe;
      c.cframe_current = l.cframe_current_frame;
    } else {
      c.tstate_frame = l.tstate_current_frame;
    }
    c.frame_previous = l.iframe_previous;
    c.header_bytes = static_cast<uint32_t>(l.iframe_size);
  }
  if (c.tstate_frame == kAbsent || c.frame_previous == kAbsent || !c.header_bytes ||
      c.header_bytes > kMaxCapturedHeader || c.frame_previous + 8 > static_cast<int32_t>(c.header_bytes))
    c.header_bytes = 0;  // no capture for this layout
  return c;
}

WalkResult FrameWalker::takeFrame(const ThreadHead& t, uint64_t addr, const uint8_t* bytes,
                                  std::vector<RawFrame>& out, uint64_t* prev) {
  const uint32_t hb = capture_header_;
  if (l_.frame_model == FrameModel::kFrameObject) {
    StructView<st::FrameObject> v(bytes, hb);
    RawFrame& f = out.emplace_back();
    f.addr = addr;
    f.code = v.ptr(l_.frame_code);
    f.instr = static_cast<uint64_t>(static_cast<uint32_t>(v.get<int32_t>(l_.frame_lasti)));
    f.prev = *prev = v.ptr(l_.frame_back);
    if (!f.code) return WalkResult::kError;
  } else {
    StructView<st::IFrame> v(bytes, hb);
    const uint8_t owner = v.get<uint8_t>(l_.iframe_owner);
    *prev = v.ptr(l_.iframe_previous);
    // The structural checks of walkInterpreterFrames: a frame being pushed or popped as it
    // was copied reads as these do.
    if (owner > l_.owner_max || *prev == addr) return WalkResult::kError;
    if (owner == kOwnedByGenerator && !*prev) return WalkResult::kError;
    if (owner >= l_.owner_shim) {
      if (!out.empty()) out.back().entered = true;
    } else {
      RawFrame& f = out.emplace_back();
      f.addr = addr;
      f.prev = *prev;
      f.code = v.ptr(l_.iframe_code) & ~l_.code_tag_bits;
      f.instr = v.ptr(l_.iframe_instr);
      if (l_.iframe_tlbc_index != kAbsent) f.tlbc = v.get<int32_t>(l_.iframe_tlbc_index);
      f.owner = owner;
      if (l_.iframe_is_entry != kAbsent) f.entered = v.get<uint8_t>(l_.iframe_is_entry) != 0;
      if (!f.code) return WalkResult::kError;
      if (f.code == shim_code_ && shim_code_) out.pop_back();
    }
    if (!*prev && l_.iframe_is_entry != kAbsent && owner < l_.owner_shim && !out.empty() &&
        !out.back().entered)
      return WalkResult::kError;  // 3.11: see walkInterpreterFrames
    if (!*prev && l_.owner_shim != cpython::Layout::kNoShim && owner < l_.owner_shim)
      return WalkResult::kError;
    if (!*prev && t.base_frame && addr != t.base_frame) return WalkResult::kError;
  }
  if (!*prev) walk_bottom_ = addr;
  return WalkResult::kOk;
}

WalkResult FrameWalker::fromCapture(const ThreadHead& t, const Capture& c,
                                    std::vector<RawFrame>& out, size_t max_depth) {
  out.clear();
  verify_tstate_ = 0;
  walk_outside_.clear();
  cut_ = false;
  walk_entry_ = walk_entry_code_ = walk_bottom_ = 0;
  const uint32_t hb = capture_header_;
  if ((!c.complete && !c.truncated) || !hb || !c.frames) return WalkResult::kError;
  for (size_t i = 0; i < c.frames; ++i) {
    const uint64_t addr = c.addr[i];
    if (addr == t.base_frame) {  // 3.15+: see walkInterpreterFrames
      if (!out.empty()) out.back().entered = true;
      walk_bottom_ = addr;
      return WalkResult::kOk;
    }
    if (out.size() >= max_depth) return WalkResult::kTruncated;
    uint64_t prev = 0;
    if (takeFrame(t, addr, c.header(i, hb), out, &prev) != WalkResult::kOk)
      return WalkResult::kError;
    // Each frame's link must name the next frame copied: the kernel followed it. Past the
    // last copied frame of a deeper stack, the frames are read from the process.
    if (i + 1 < c.frames ? c.addr[i + 1] != prev : (prev == 0) == c.truncated)
      return WalkResult::kError;
  }
  return c.truncated ? continueCapture(t, c, out, max_depth) : WalkResult::kOk;
}

WalkResult FrameWalker::continueCapture(const ThreadHead& t, const Capture& c,
                                        std::vector<RawFrame>& out, size_t max_depth) {
  // The outermost copied frame was suspended in a call when it was copied, and so were all
  // its callers: while it stays so, none of them can run. Its callers are read from the
  // process, one by one, and then the frame itself again: found as it was copied (its code,
  // instruction and link), it has not returned in between (but for a call of the same
  // function from the same place, at the same address), and the callers read are those of
  // the copy's instant.
  const uint32_t hb = capture_header_;
  const size_t last = c.frames - 1;
  const uint8_t* copied = c.header(last, hb);
  const bool objects = l_.frame_model == FrameModel::kFrameObject;
  const int32_t prev_at = objects ? l_.frame_back : l_.iframe_previous;
  uint64_t addr = 0;
  std::memcpy(&addr, copied + prev_at, 8);
  uint8_t buf[kMaxCapturedHeader];
  size_t read = 0;
  while (addr) {
    if (addr == t.base_frame) {
      if (!out.empty()) out.back().entered = true;
      walk_bottom_ = addr;
      break;
    }
    if (out.size() >= max_depth) return WalkResult::kTruncated;
    // A read a frame: deeper stacks are read as the process holds them (in bulk, and on
    // 3.15+ through the frame cache), not one frame a system call.
    if (++read > kMaxContinuedFrames) return WalkResult::kError;
    ++stats_.frame_reads;
    if (proc_.mem().read(addr, buf, hb) != ReadStatus::kOk) return WalkResult::kError;
    uint64_t prev = 0;
    if (takeFrame(t, addr, buf, out, &prev) != WalkResult::kOk) return WalkResult::kError;
    addr = prev;
  }
  // The outermost copied frame, again: its code, instruction and link as copied.
  ++stats_.frame_reads;
  if (proc_.mem().read(c.addr[last], buf, hb) != ReadStatus::kOk) return WalkResult::kError;
  const int32_t code_at = objects ? l_.frame_code : l_.iframe_code;
  const int32_t instr_at = objects ? l_.frame_lasti : l_.iframe_instr;
  const size_t instr_len = objects ? 4 : 8;
  const std::pair<int32_t, size_t> fields[] = {{code_at, 8}, {instr_at, instr_len}, {prev_at, 8}};
  for (const auto& [at, len] : fields)
    if (std::memcmp(buf + at, copied + at, len) != 0) return WalkResult::kError;
  return WalkResult::kOk;
}

bool FrameWalker::verifyNewer(size_t innermost) {
  if (!verify_tstate_) return true;
  const uint64_t tstate = std::exchange(verify_tstate_, 0);
  checks_.keepInnermost(innermost);
  return checks_.verify(static_cast<size_t>(l_.frame_size), l_.frame_lasti, 4,
                        tstate + static_cast<uint64_t>(l_.tstate_frame), verify_leaf_);
}

}  // namespace psrec::recorder
