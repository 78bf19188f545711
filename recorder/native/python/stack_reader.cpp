#include "recorder/native/python/stack_reader.hpp"

#include <algorithm>

namespace psrec::recorder {

StackRead StackReader::read(ThreadHead& head, ThreadStack& last, uint64_t interp, uint64_t pass,
                            int retries, uint64_t* read_again) {
  // 3.8-3.10: a thread's frames are read in one copy where its last stack says they are.
  if (proc_.layout().frame_model == cpython::FrameModel::kFrameObject)
    unwinder_.frames.guessFrames(head.tstate, last.raw);
  cached_ = wrote_anchor_ = false;
  bool ok = readOnce(head, last, pass, true, retries == 0);
  unwinder_.frames.noteWalk(last.hint);
  // A torn copy: the thread changed its stack while we copied it. Read it again, at once (its
  // state and its chunk afresh, in one system call, as the pass reads them: a state read a
  // call before its chunk is older than the chunk by that call, long enough for a
  // fast-calling thread to leave the frame the state names), still compared with its last
  // good stack; only when every attempt fails is the read torn. Giving up early would bias a
  // profile against code that calls and returns fast (torn copies are most frequent there). A
  // state whose ids or interpreter changed since, or that left the list, is no longer this
  // thread's (it may be freed memory that still holds the ids): nothing more is read from it.
  for (int attempt = 0; !ok && attempt < retries; ++attempt) {
    ThreadHead again;
    if (unwinder_.pass.readThread(head.tstate, again, &last.hint, true) != ReadStatus::kOk ||
        again.thread_id != head.thread_id || again.native_tid != head.native_tid ||
        again.interp != interp || (again.prev != head.prev && !unwinder_.pass.linked(head.tstate)))
      return StackRead::kEnded;
    ++*read_again;
    head = again;
    PassReader::updateHint(head, last.hint);
    ok = readOnce(head, last, pass, true, attempt + 1 == retries);
    unwinder_.frames.noteWalk(last.hint);
  }
  if (ok) {
    if (frame_cache_) setAnchor(head, last);
    return StackRead::kOk;
  }
  // A thread that ends unlinks its state, then frees its frames' memory: a copy torn because
  // the thread ended while it was read is no torn copy of a live thread.
  return unwinder_.pass.linked(head.tstate) ? StackRead::kTorn : StackRead::kEnded;
}

uint64_t StackReader::anchorStop(const ThreadHead& head, const ThreadStack& last,
                                 size_t* index) const {
  const FrameAnchor& a = last.anchor;
  if (!a.addr || !head.anchor || a.index >= last.raw.size()) return 0;
  // Each move took the pointer one frame down the stack it was set in; more moves than that
  // (the pointer moved before it was set, or was set by someone else) leave nothing known.
  const uint64_t moved = head.anchor_seq - a.seq;
  if (moved > a.index) return 0;
  const size_t at = a.index - static_cast<size_t>(moved);
  const RawFrame& f = last.raw[at];
  // A generator's frame leaves the stack at a yield without returning, the pointer left on
  // it: the frames under it when it is resumed again may be others.
  if (f.addr != head.anchor || f.owner == kOwnedByGenerator || at < kMinCached + kAnchorCallers)
    return 0;
  *index = at;
  return f.addr;
}

void StackReader::setAnchor(const ThreadHead& head, ThreadStack& last) {
  // The innermost frame that did not change since the last read (the leaf of a stack that
  // did not move), and is no generator's: the frames under it are the ones least likely to
  // return before the next read, and the most of them are cached.
  FrameAnchor& a = last.anchor;
  const std::vector<RawFrame>& s = last.raw;
  size_t at = same_;
  while (at > 0 && s[at - 1].owner == kOwnedByGenerator) --at;
  if (truncated_ || at <= kMinCached + kAnchorCallers) {
    a = {};
    return;
  }
  --at;
  if (cached_ && cut_index_ == at) {
    // The pointer names it already, its moves counted from the seq just read.
    a = {s[at].addr, at, head.anchor_seq};
    return;
  }
  // Written after the read: a frame returned between the two either moved a pointer that
  // named one of its callers (the count then disagrees with where the pointer is) or is the
  // frame now named, whose new occupant must read as it did, with its callers (anchorStop).
  const uint64_t addr = s[at].addr;
  const auto& l = proc_.layout();
  if (proc_.mem().write(head.tstate + static_cast<uint64_t>(l.tstate_last_profiled_frame), &addr,
                        sizeof addr) != ReadStatus::kOk) {
    frame_cache_ = false;
    a = {};
    return;
  }
  wrote_anchor_ = true;
  a = {addr, at, head.anchor_seq};
}

bool StackReader::fitsCache(const std::vector<RawFrame>& raw, size_t keep) const {
  // walk_ ends with the anchor's kAnchorCallers callers, outermost last: they still stand at
  // the calls they made, their links as before; the anchor is the same function there.
  const size_t m = walk_.size();
  if (m <= kAnchorCallers || keep + kAnchorCallers >= raw.size()) return false;
  for (size_t q = 0; q <= kAnchorCallers; ++q) {
    const RawFrame& f = walk_[m - 1 - q];
    const RawFrame& c = raw[keep + q];
    if (f.addr != c.addr || f.code != c.code || f.owner != c.owner || f.prev != c.prev ||
        (q < kAnchorCallers && f.instr != c.instr))
      return false;
  }
  return true;
}

bool StackReader::readOnce(const ThreadHead& head, ThreadStack& last, uint64_t pass,
                           bool guess, bool last_try) {
  // 3.15+: frames under the frame-cache anchor are taken from the last stack (see FrameAnchor).
  size_t at = 0;
  const uint64_t stop = frame_cache_ ? anchorStop(head, last, &at) : 0;
  size_t keep = stop ? at - kAnchorCallers : 0;
  WalkResult r = unwinder_.frames.walk(head, walk_, max_depth_ - keep, last.hint.bottom, guess,
                                       last_try, stop);
  if (stop && !(unwinder_.frames.cut() && fitsCache(last.raw, keep))) {
    // The walk met no anchor (it read the whole stack), or what it read past the anchor is
    // not what the cache holds: the stack is read whole.
    if (unwinder_.frames.cut() || r == WalkResult::kTruncated)
      r = unwinder_.frames.walk(head, walk_, max_depth_, last.hint.bottom, guess, last_try);
    keep = 0;
  }
  cached_ = keep != 0;
  cut_index_ = at;
  if (r == WalkResult::kError) return false;
  if (r == WalkResult::kTruncated) {
    // A cycle (torn read) also fills the cap: real frames have distinct addresses.
    code_addrs_.clear();
    for (const auto& f : walk_) code_addrs_.push_back(f.addr);
    std::sort(code_addrs_.begin(), code_addrs_.end());
    if (std::adjacent_find(code_addrs_.begin(), code_addrs_.end()) != code_addrs_.end())
      return false;
  }
  return adoptWalk(head, last, pass, keep, r, guess, last_try);
}

bool StackReader::adoptWalk(const ThreadHead& head, ThreadStack& last, uint64_t pass, size_t keep,
                            WalkResult r, bool guess, bool last_try) {
  switch (adopt(last, pass, keep, r, true)) {
    case Adopted::kGood: return true;
    case Adopted::kWalkAlone:
      return guess && !unwinder_.frames.copyAgainFirst(last_try) &&
             readOnce(head, last, pass, false, last_try);
    case Adopted::kAgain: return readOnce(head, last, pass, guess, last_try);
    case Adopted::kTorn: break;
  }
  return false;
}

StackRead StackReader::readCaptured(const ThreadHead& head, const Capture& c, ThreadStack& last,
                                    uint64_t pass) {
  cached_ = wrote_anchor_ = false;
  // A stack deeper than a capture and the frames read after it: read from the process.
  if (c.truncated &&
      last.raw.size() > kMaxCapturedFrames + FrameWalker::kMaxContinuedFrames + 16)
    return StackRead::kTorn;
  for (int again = 0; again < 2; ++again) {
    const WalkResult r = unwinder_.frames.fromCapture(head, c, walk_, max_depth_);
    if (r == WalkResult::kError) return StackRead::kTorn;
    const Adopted got = adopt(last, pass, 0, r, false, c.time_ns ? c.time_ns : 1);
    if (got == Adopted::kGood) return StackRead::kOk;
    if (got != Adopted::kAgain) break;
  }
  return StackRead::kTorn;
}

StackReader::Adopted StackReader::adopt(ThreadStack& last, uint64_t pass, size_t keep,
                                         WalkResult r, bool verify, uint64_t taken_ns) {
  const size_t same = assemble(last, keep);
  const size_t n = stack_.size();
  suspectCallers(last.raw, same);
  if (verify && !unwinder_.frames.verifyCallers(stack_, callers_.data(), callers_.size()))
    return Adopted::kTorn;
  if (verify && !unwinder_.frames.verifyNewer(n - (same ? same - 1 : 0))) {
    // 3.8-3.10: a copy of the guessed frames found torn is walked again one frame at a time.
    // A thread that resumes a generator from C many times a millisecond tears the one copy
    // again and again (the generator drops its link back at each yield, while the thread
    // state may still name it), where reads spread out in time catch it whole. But a thread
    // whose deep stack changes at every call is read whole by a copy far more often than by
    // a walk one by one, which takes a system call a frame: a deep stack is copied again (the
    // reader's next try), and walked one by one at the last.
    return Adopted::kWalkAlone;
  }
  const Adopted codes = resolveCodes(last.raw, same, pass, taken_ns);
  if (codes != Adopted::kGood) return codes;
  if (verify && !atCalls(same)) return Adopted::kTorn;
  commit(last, keep, same, r);
  return Adopted::kGood;
}

size_t StackReader::assemble(const ThreadStack& last, size_t keep) {
  // Root first, into a stack of its own that replaces the last one when the read is good (the
  // vectors are swapped, not copied; after a read through the frame cache only the frames
  // read are copied in). Frames identical (address, code, instruction) to the last stack
  // from the root keep their code; only the rest is resolved again.
  const std::vector<RawFrame>& raw = last.raw;
  const size_t n = keep + walk_.size();
  stack_.resize(n);
  // Of the cached frames only the one under the fresh ones is looked at (the checks below
  // start one frame before `same`): the rest stay where they are, in the thread's last stack.
  if (keep) stack_[keep - 1] = raw[keep - 1];
  size_t same = keep;
  bool alike = true;
  for (size_t i = keep; i < n; ++i) {
    const RawFrame& f = stack_[i] = walk_[n - 1 - i];
    if (alike && i < raw.size() && f == raw[i])
      same = i + 1;
    else
      alike = false;
  }
  // The walk stopped before it could see whether the outermost frame it read was entered from
  // C (the shim under it): the cache knows.
  if (keep) stack_[keep].entered = raw[keep].entered;
  return same;
}

void StackReader::suspectCallers(const std::vector<RawFrame>& raw, size_t same) {
  const size_t n = stack_.size();
  // A frame whose address held another function in the last stack was called since: its
  // caller, copied earlier in the same bulk read, may still show the line before that call.
  // Check those callers (one read). A slot refilled by the same function, as in a fast
  // recursion, is not checked: its caller moving on is no sign of a torn copy.
  // The same holds for a frame read apart from the chunk (a generator's, or one entered
  // from C) that is new since the last stack: it may have been read after its caller moved
  // on. (A torn read leaves the last good stack in place to compare with.) Nor is an outside
  // frame that reads as before proof when its caller moved: a generator's frame lives in its
  // generator object, and a new generator of another function often takes the address of one
  // that just finished (its caller, copied first, at the line that ran the old one).
  callers_.clear();
  // With no last stack to compare with (a thread's first read, every read of a dump), any
  // caller may have moved on after the copy passed it, its callees' dead frames still in
  // place above it, and its instruction one that could have called them (a LOAD_ATTR at the
  // next line, as at a property's): re-read every caller once, but a self-recursion's (its
  // slots are refilled faster than a re-read can confirm them, and the functions shown are
  // right either way, as below).
  if (raw.empty())
    for (size_t i = 0; i + 1 < n; ++i)
      if (stack_[i + 1].code != stack_[i].code) callers_.push_back(i);
  for (size_t i = std::max<size_t>(same, 1); i < n; ++i) {
    const bool had = i < raw.size();
    const bool moved = !had || stack_[i].addr != raw[i].addr;
    if ((had && !moved && stack_[i].code != raw[i].code) ||
        (stack_[i].outside && (moved || stack_[i].code != raw[i].code || i > same)))
      callers_.push_back(i - 1);
  }
  // A caller that moved to another instruction while its callee's frame reads exactly as
  // before: the callee cannot have run on if the caller moved, so either it returned and a
  // new call of the same function took the same place, or the copy holds the callee's dead
  // frame under a caller that has moved on. Re-read both (a callee that is not the leaf keeps
  // its instruction while its own callee runs). In a self-recursion such slots are refilled
  // faster than a re-read can confirm them, and the functions shown are right either way.
  for (size_t i = std::max<size_t>(same, 1); i + 2 < n && i + 1 < raw.size(); ++i) {
    if (stack_[i].addr == raw[i].addr && stack_[i].code == raw[i].code &&
        stack_[i].instr != raw[i].instr && stack_[i + 1] == raw[i + 1] &&
        stack_[i + 1].code != stack_[i].code) {  // not a self-recursion (see below)
      if (callers_.empty() || callers_.back() != i) callers_.push_back(i);
      callers_.push_back(i + 1);
    }
  }
  std::sort(callers_.begin(), callers_.end());
  callers_.erase(std::unique(callers_.begin(), callers_.end()), callers_.end());
}

StackReader::Adopted StackReader::resolveCodes(const std::vector<RawFrame>& raw, size_t same,
                                               uint64_t pass, uint64_t taken_ns) {
  const size_t n = stack_.size();
  code_addrs_.clear();
  // The same frame (address and code) as in the last stack, over callers that are all the
  // same frames too, is the same call: it kept its code object alive (a frame owns a
  // reference to its code), so a code checked then is still the same one and only the
  // instruction moved. A frame at the same address over other callers may be a new call
  // whose code object, made since, took the freed address of the old one (code compiled
  // and run again and again: exec, eval, templates): it is checked against the target again,
  // as is anything else.
  bool same_chain = true;
  for (size_t i = same; i < n; ++i) {
    const bool same_frame =
        i < raw.size() && stack_[i].addr == raw[i].addr && stack_[i].code == raw[i].code;
    const bool carried = same_chain && same_frame && codes_.carryOver(stack_[i].code, pass);
    same_chain = same_chain && same_frame;
    if (!carried) code_addrs_.push_back(stack_[i].code);
  }
  if (!code_addrs_.empty() && !codes_.prepare(code_addrs_.data(), code_addrs_.size(), pass))
    return Adopted::kTorn;
  // Only the frames from the one before `same` on are looked at (below, and by the sampler).
  infos_.resize(n);
  std::fill(infos_.begin() + static_cast<std::ptrdiff_t>(same ? same - 1 : 0), infos_.end(),
            nullptr);
  for (size_t i = same; i < n; ++i) {
    CodeInfo* info = codes_.get(stack_[i].code, pass);
    if (!info) return Adopted::kTorn;
    if (info->shim && !unwinder_.frames.shimCode()) {
      // First sight of the __init__ trampoline: the walk leaves it out from now on.
      unwinder_.frames.setShimCode(stack_[i].code);
      return Adopted::kAgain;
    }
    const int off = codes_.byteOffset(*info, stack_[i].instr, stack_[i].tlbc);
    if (off < -1 || (info->key.size && off > info->key.size * 2)) return Adopted::kTorn;
    infos_[i] = info;
  }
  // A copy the kernel made earlier names code objects by address; what is read at those
  // addresses now is what the copy meant only if it was there already before the copy was
  // made: a code object made since (a program compiled and run again, exec or eval) may
  // have taken a freed one's address. Such a copy is not used (the thread is read now).
  // (The frames from the root that are the last stack's, address, code and instruction, are
  // the same calls, which hold their code objects: only those after them are looked at.)
  if (taken_ns) {
    for (size_t i = same; i < n; ++i)
      if (infos_[i]->resolved_ns > taken_ns) return Adopted::kTorn;
  }
  return Adopted::kGood;
}

bool StackReader::atCalls(size_t same) {
  const size_t n = stack_.size();
  // A frame whose callee the interpreter pushed directly must be at an instruction that
  // pushes that kind of frame (a function's, or a resumed generator's). One elsewhere has
  // moved on: its callee returned after the copy began and what lies above it is stale, or
  // the link to it was. Frames in the unchanged prefix were checked in an earlier read.
  if (proc_.layout().call_sites.known()) {
    for (size_t i = same ? same - 1 : 0; i + 1 < n; ++i) {
      // A recursion's frames look alike whichever of its calls they came from: a copy that
      // caught one between two calls still shows the right functions, and rejecting it would
      // bias the profile against fast recursive calls.
      if (stack_[i + 1].entered || stack_[i + 1].code == stack_[i].code) continue;
      CodeInfo* info = infos_[i] ? infos_[i] : codes_.peek(stack_[i].code);
      const uint8_t need = stack_[i + 1].owner == kOwnedByGenerator ? 2 : 1;
      if (!info || !(codes_.pushes(*info, stack_[i].instr, stack_[i].tlbc) & need))
        return false;
    }
  }
  return true;
}

void StackReader::commit(ThreadStack& last, size_t keep, size_t same, WalkResult r) {
  const size_t n = stack_.size();
  same_ = same;
  truncated_ = r == WalkResult::kTruncated;
  if (keep) {
    // The cached frames are the last stack's: only the fresh ones are copied in.
    last.raw.resize(n);
    std::copy(stack_.begin() + static_cast<std::ptrdiff_t>(keep), stack_.end(),
              last.raw.begin() + static_cast<std::ptrdiff_t>(keep));
  } else {
    last.raw.swap(stack_);
  }
  frames_ = &last.raw;
}

}  // namespace psrec::recorder
