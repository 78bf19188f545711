// One walk of an interpreter's thread list, with the checks that make it trustworthy while
// threads come and go: every state links back to the one before it and to its interpreter,
// has a plausible kernel thread id and is met once; a state that fails a check was freed or
// reused while the list was read, and the walk begins again from the head, read anew. The
// sampler's passes and psrec dump both walk the list through it.
#pragma once

#include <cstdint>
#include <vector>

#include "recorder/native/python/pass_reader.hpp"
#include "recorder/native/python/unwind_types.hpp"

namespace psrec::recorder {

// The most thread states one walk follows from the head: a longer list is taken as a cycle
// that the link checks missed (a torn read), and read again.
constexpr int kMaxThreadStates = 4096;
// How often one walk begins again after a torn read before the states not reached are given
// up (the sampler counts them as errors).
constexpr int kListRestarts = 3;
// Kernel thread ids are below PID_MAX_LIMIT (2^22): a larger one is a torn read.
constexpr uint64_t kMaxKernelTid = uint64_t{1} << 22;

class ThreadListWalk {
 public:
  explicit ThreadListWalk(PassReader& pass) : pass_(pass) {}
  ThreadListWalk(const ThreadListWalk&) = delete;
  ThreadListWalk& operator=(const ThreadListWalk&) = delete;

  // Begins a walk of the list of the interpreter at `interp`, from the pass head just read
  // (PassReader::readPass or readPassHead). One object serves every pass of a process.
  void begin(uint64_t interp, const PassHead& head);

  // Reads the next state of the list into `out`, checked as above. hint_of(tstate) gives the
  // stack hint of a state the caller knows (or null), for the read-ahead. False at the end of
  // the list: whole() then says whether its end was confirmed.
  template <class HintOf>
  bool next(ThreadHead& out, HintOf&& hint_of) {
    for (;;) {
      if (!tstate_) {
        if (endConfirmed() || !restart()) return false;
        continue;
      }
      if (readChecked(out, hint_of(tstate_))) return true;
      if (!restart()) return false;
    }
  }
  // The list was read to its end, as it stands (no state of it was given up).
  bool whole() const { return whole_; }

 private:
  bool readChecked(ThreadHead& out, const StackHint* hint);
  bool endConfirmed();
  bool restart();
  // Whether the state was met before in this walk (and notes it).
  bool met(uint64_t tstate);
  void forgetMet();

  PassReader& pass_;
  uint64_t interp_ = 0;
  bool list_unchanged_ = false;
  uint64_t tstate_ = 0, prev_ = 0, first_ = 0;
  int count_ = 0;
  int restarts_ = 0;
  bool whole_ = true;
  // Whether states met twice are looked for: not in a pass whose read-ahead showed the list
  // unchanged (every state's links were checked in one copy, which holds no cycle).
  bool check_met_ = true;
  std::vector<uint64_t> met_;  // open addressing by address; 0 is empty
  size_t met_count_ = 0;
};

}  // namespace psrec::recorder
