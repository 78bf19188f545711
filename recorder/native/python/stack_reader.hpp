// One consistent stack of one thread: the walk, the checks that the copy was not torn (the
// thread ran on while it was read), the reads again when it was, and the code objects of its
// frames. The sampler reads every sample through it, and psrec dump every thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "recorder/native/python/code_cache.hpp"
#include "recorder/native/python/python_unwinder.hpp"

namespace psrec::recorder {

// 3.15+ frame cache. Each thread state has a frame pointer kept for profilers
// (last_profiled_frame): when the frame it names returns, the interpreter moves it to that
// frame's caller and counts the move (last_profiled_frame_seq). A reader that writes there a
// frame of the stack it just read finds, at its next read, the pointer at the one frame of
// that stack under which nothing has returned since, `seq` moves further down: it reads the
// thread's frames from the current one down to that frame and kAnchorCallers more, which must
// read exactly as they did, and takes the rest from the last stack.
struct FrameAnchor {
  uint64_t addr = 0;  // the frame the pointer named when `seq` was read (0: no anchor)
  size_t index = 0;   // its place in ThreadStack::raw, root first
  uint64_t seq = 0;   // last_profiled_frame_seq then
};

// What a reader keeps of a thread from one read to the next: the checks compare a new copy
// with the last good one, and frames that did not change are not resolved again.
struct ThreadStack {
  std::vector<RawFrame> raw;  // root first, as last read well
  StackHint hint;             // where the thread's frames were (see PassReader::readPass)
  FrameAnchor anchor;         // 3.15+, with the frame cache on
};

enum class StackRead {
  kOk,     // frames() holds the stack
  kTorn,   // every copy was torn: the thread's last stack is kept as it was
  kEnded,  // the thread ended while it was read (its state left the list or was reused)
};

class StackReader {
 public:
  StackReader(PythonProcess& proc, PythonUnwinder& unwinder, CodeCache& codes)
      : proc_(proc), unwinder_(unwinder), codes_(codes) {}
  StackReader(const StackReader&) = delete;
  StackReader& operator=(const StackReader&) = delete;

  // Reads the stack of the thread whose state `head` was just read from the list (of the
  // interpreter at `interp`); `pass` names this read for the code cache. A torn copy is read
  // again, up to `retries` times, with its state read anew: `head` is then that last read.
  // On kOk, frames() and info() hold the stack and last.raw is replaced by it; `same` frames
  // from the root are as in last.raw before (their code was not looked up again: info() is
  // null there). `read_again` counts the reads again.
  StackRead read(ThreadHead& head, ThreadStack& last, uint64_t interp, uint64_t pass,
                 int retries, uint64_t* read_again);

  // The stack of the thread whose state `head` was read, from a capture of its frames (the
  // chain the kernel copied at one perf sample: FrameCapture), nothing read again: kOk as
  // read() gives it, or kTorn when the capture holds no whole stack (the caller reads the
  // thread instead).
  StackRead readCaptured(const ThreadHead& head, const Capture& c, ThreadStack& last,
                         uint64_t pass);

  const std::vector<RawFrame>& frames() const { return *frames_; }
  size_t same() const { return same_; }
  // The stack went deeper than the maximum depth: frames() holds its innermost frames only.
  bool truncated() const { return truncated_; }
  CodeInfo* info(size_t i) const { return infos_[i]; }
  // The most frames a read keeps (the outermost beyond it are left out).
  void setMaxDepth(size_t depth) { max_depth_ = depth; }
  // Whether reads use the frame cache (see FrameAnchor) where the target has one: repeated
  // reads of the same threads (a recording), not a dump. Off for good once a write fails.
  void setFrameCache(bool on) {
    frame_cache_ = on && proc_.layout().tstate_last_profiled_frame_seq != cpython::kAbsent;
  }
  // Of the last read: whether its outer frames came from the frame cache, and whether it
  // wrote an anchor into the target.
  bool cached() const { return cached_; }
  bool wroteAnchor() const { return wrote_anchor_; }

 private:
  // One copy and its checks; false when it was torn.
  // guess, last_try: see FrameWalker::walk.
  bool readOnce(const ThreadHead& head, ThreadStack& last, uint64_t pass, bool guess,
                bool last_try);
  // After a walk into walk_: the stack it read made the thread's last (see adopt), read again
  // where the checks say so.
  bool adoptWalk(const ThreadHead& head, ThreadStack& last, uint64_t pass, size_t keep,
                 WalkResult r, bool guess, bool last_try);
  // walk_ (innermost first, `keep` frames under it from the frame cache) as the thread's
  // stack, root first, with the code of its new frames looked up. With verify, the frames a
  // torn copy may have left stale are read again, and a frame whose callee the interpreter
  // pushed must stand at a call (a capture, copied at one instant, needs neither).
  enum class Adopted { kGood, kTorn, kWalkAlone, kAgain };
  // taken_ns: a copy the kernel made then (0: one read now), whose code objects must have
  // been known as they are now since before it.
  Adopted adopt(ThreadStack& last, uint64_t pass, size_t keep, WalkResult r, bool verify,
                uint64_t taken_ns = 0);
  // adopt's steps. stack_ from walk_ over the `keep` cached frames; returns how many frames
  // from the root are the last stack's (address, code, instruction).
  size_t assemble(const ThreadStack& last, size_t keep);
  // callers_: the frames a torn copy may have left stale, to read again.
  void suspectCallers(const std::vector<RawFrame>& raw, size_t same);
  // infos_: the code of the frames from `same` on (kTorn: not of a whole stack; kAgain: the
  // walk must run again).
  Adopted resolveCodes(const std::vector<RawFrame>& raw, size_t same, uint64_t pass,
                       uint64_t taken_ns);
  // Whether each frame whose callee the interpreter pushed stands at a call.
  bool atCalls(size_t same);
  // stack_ as the thread's last stack.
  void commit(ThreadStack& last, size_t keep, size_t same, WalkResult r);
  // The frame-cache anchor as this read finds it in the thread's last stack (0: none usable),
  // and at *index its place there.
  uint64_t anchorStop(const ThreadHead& head, const ThreadStack& last, size_t* index) const;
  // Whether the frames a walk cut at the anchor read last (its callers) are as the last
  // stack holds them from `keep` on.
  bool fitsCache(const std::vector<RawFrame>& raw, size_t keep) const;
  // After a good read: the anchor for the next one, written into the target if it moved.
  void setAnchor(const ThreadHead& head, ThreadStack& last);

  PythonProcess& proc_;
  PythonUnwinder& unwinder_;
  CodeCache& codes_;
  size_t max_depth_ = 0;
  size_t same_ = 0;
  bool truncated_ = false;
  bool frame_cache_ = false;
  bool cached_ = false;
  bool wrote_anchor_ = false;
  size_t cut_index_ = 0;  // the anchor's place in the stack when cached_
  std::vector<RawFrame> walk_;   // as walked: innermost first
  std::vector<RawFrame> stack_;  // root first; swapped into the thread's last stack when good
  const std::vector<RawFrame>* frames_ = &stack_;  // the stack of the last good read
  std::vector<uint64_t> code_addrs_;
  std::vector<size_t> callers_;   // frames whose callee changed function in place
  std::vector<CodeInfo*> infos_;  // per frame of stack_ resolved in this read
};

}  // namespace psrec::recorder
