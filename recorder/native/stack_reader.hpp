// One consistent stack of one thread: the walk, the checks that the copy was not torn (the
// thread ran on while it was read), the reads again when it was, and the code objects of its
// frames. The sampler reads every sample through it, and psrec dump every thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "recorder/native/code_cache.hpp"
#include "recorder/native/unwinder.hpp"

namespace psrec::recorder {

// What a reader keeps of a thread from one read to the next: the checks compare a new copy
// with the last good one, and frames that did not change are not resolved again.
struct ThreadStack {
  std::vector<RawFrame> raw;  // root first, as last read well
  StackHint hint;             // where the thread's frames were (see PassReader::readPass)
};

enum class StackRead {
  kOk,     // frames() holds the stack
  kTorn,   // every copy was torn: the thread's last stack is kept as it was
  kEnded,  // the thread ended while it was read (its state left the list or was reused)
};

class StackReader {
 public:
  StackReader(PythonProcess& proc, Unwinder& unwinder, CodeCache& codes)
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

  const std::vector<RawFrame>& frames() const { return *frames_; }
  size_t same() const { return same_; }
  // The stack went deeper than the maximum depth: frames() holds its innermost frames only.
  bool truncated() const { return truncated_; }
  CodeInfo* info(size_t i) const { return infos_[i]; }
  // The most frames a read keeps (the outermost beyond it are left out).
  void setMaxDepth(size_t depth) { max_depth_ = depth; }

 private:
  // One copy and its checks; false when it was torn.
  // guess, last_try: see FrameWalker::walk.
  bool readOnce(const ThreadHead& head, ThreadStack& last, uint64_t pass, bool guess,
                bool last_try);

  PythonProcess& proc_;
  Unwinder& unwinder_;
  CodeCache& codes_;
  size_t max_depth_ = 0;
  size_t same_ = 0;
  bool truncated_ = false;
  std::vector<RawFrame> walk_;   // as walked: innermost first
  std::vector<RawFrame> stack_;  // root first; swapped into the thread's last stack when good
  const std::vector<RawFrame>* frames_ = &stack_;  // the stack of the last good read
  std::vector<uint64_t> code_addrs_;
  std::vector<size_t> callers_;   // frames whose callee changed function in place
  std::vector<CodeInfo*> infos_;  // per frame of stack_ resolved in this read
};

}  // namespace psrec::recorder
