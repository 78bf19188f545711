// The reads of a pass over one interpreter: the GIL, the head of the thread list and each
// thread's state, planned as one batch per pass with what each thread's last walk used of its
// stack (the read-ahead), and the checks that make a pass's thread list trustworthy (links,
// kernel thread ids). Every read may fail or be torn (the target keeps running): failures are
// reported to the caller, never thrown.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "recorder/native/python/code_cache.hpp"
#include "recorder/native/python/python_process.hpp"
#include "recorder/native/memory/remote_memory.hpp"
#include "recorder/native/python/unwind_types.hpp"

namespace psrec::recorder {

// Frame sizes by code address in front of the code cache's map (a lookup there per frame
// showed in profiles); emptied whenever the code cache replaces an entry.
class FrameSizes {
 public:
  void setCodeCache(const CodeCache* codes) { codes_ = codes; }
  bool known() const { return codes_ != nullptr; }
  // The bytes a frame of the code object takes on the data stack (0: not known).
  uint64_t of(uint64_t code);

 private:
  struct Slot {
    uint64_t code = 0;
    uint64_t bytes = 0;
  };
  const CodeCache* codes_ = nullptr;
  Slot slots_[64];
  uint64_t generation_ = 0;
};

class PassReader {
 public:
  // ahead: where readThread leaves what it read ahead for the walk that follows.
  PassReader(PythonProcess& proc, ReadAhead& ahead);
  PassReader(const PassReader&) = delete;
  PassReader& operator=(const PassReader&) = delete;

  // The head of the thread list and the GIL state, in one read. Status kOk or why not.
  ReadStatus readPassHead(PassHead& out);
  // After a pass that could not be read: the interpreter and its GIL are looked up again.
  void forgetHead() {
    gil_addr_ = 0;
    proc_.forgetInterpreter();
  }
  // The pass head and, in the same system call, the thread states of the threads seen in the
  // previous pass, with their stacks' read-ahead (3.11+) and OS thread ids (3.8-3.10). A
  // request that fails (an exited thread, a freed chunk) ends the kernel's transfer: the rest
  // is read again from the request after it, and what stays unread is read thread by thread.
  // The list head is read only when the thread states' links show the list changed.
  ReadStatus readPass(PassHead& out, const std::vector<PrefetchThread>& known);
  // One thread state. On 3.8-3.10 also reads the OS thread id from the pthread structure.
  // With a hint, uses what readPass read for this thread; without one, reads afresh. `fresh`
  // with a hint: reads afresh, and the stack's read-ahead with it, in one system call.
  ReadStatus readThread(uint64_t tstate, ThreadHead& out, const StackHint* hint = nullptr,
                        bool fresh = false);
  static void updateHint(const ThreadHead& t, StackHint& hint);
  // Whether the thread held the GIL: its own fields where the version has them (3.15
  // holds_gil, gil_requested; a free-threaded build's attached state), else the pass's GIL
  // holder.
  GilStatus gilStatus(const ThreadHead& t, const PassHead& ph) const;
  // Whether a thread's kernel id is known (read from its state, or from its pthread once the
  // offset is found): a thread without one then is one not started or already gone.
  bool nativeTidKnown() const {
    return l_.tstate_native_thread_id != cpython::kAbsent || pthread_tid_offset_ >= 0;
  }
  // A state in the list whose thread has not started yet (no ids, or no kernel id where one
  // is known for every started thread): no thread of the process to sample.
  // While the pthread offset is still being looked for, a thread whose id could not be read
  // is passed over: it is one ending (its tid cleared), and recording it would give it none.
  bool notStarted(const ThreadHead& t) const {
    return (!t.thread_id && !t.native_tid) ||
           (!t.native_tid && (nativeTidKnown() || pthreadTidPending()));
  }
  // Whether, read now, the list still begins at `first` and ends at `last` (its next is null).
  bool listEnds(uint64_t first, uint64_t last);
  // Whether the thread state at `tstate` is in the list now: the state before it (or the
  // interpreter, for the first) links to it. False also when that cannot be read.
  bool linked(uint64_t tstate);
  // Code objects' frame sizes, for finding the current frame from the data stack's top.
  void setCodeCache(const CodeCache* codes) { sizes_.setCodeCache(codes); }

 private:
  PythonProcess& proc_;
  const cpython::Layout& l_;
  ReadAhead& ahead_;
  uint64_t gil_addr_ = 0;  // struct _gil_runtime_state in the target
  int32_t gil_lo_ = 0, gil_hi_ = 0;
  void parseGil(const uint8_t* gil, size_t gil_len, PassHead& out) const;
  void resolveGil();
  // 3.8-3.10: offset of the kernel tid inside glibc's struct pthread (found at run time).
  int32_t pthread_tid_offset_ = -1;
  bool pthread_calibrated_ = false;
  // A thread caught ending has its tid cleared: the search is tried again on the next threads
  // read, up to kPthreadTries, before the ids are left unknown.
  static constexpr int kPthreadTries = 32;
  int pthread_tries_ = 0;
  bool pthreadTidPending() const {
    return l_.tstate_native_thread_id == cpython::kAbsent && !pthread_calibrated_;
  }
  bool calibratePthreadTid(uint64_t thread_id);

  // What readPass read for each thread (offsets into pf_buf_), in the previous pass's order.
  struct Prefetched {
    uint64_t tstate = 0;
    size_t ts_off = 0;
    bool ts_ok = false;
    uint64_t chunk = 0;
    size_t chunk_off = 0, chunk_len = 0;
    bool chunk_ok = false;
    uint64_t cframe = 0;
    uint64_t frame = 0;
    bool cframe_ok = false;
    uint64_t top_cframe = 0;  // not read: the current frame comes from the stack's top
    uint64_t entry = 0, entry_code = 0;
    uint64_t thread_id = 0;
    int32_t tid = 0;
    bool tid_ok = false;
    uint64_t outside[StackHint::kMaxOutside] = {};
    size_t outside_off[StackHint::kMaxOutside] = {};
    bool outside_ok[StackHint::kMaxOutside] = {};
    uint8_t outside_n = 0;
    uint32_t older_from = 0;  // its older chunks: pf_older_[older_from, + older_n)
    uint8_t older_n = 0;
  };
  struct OlderChunk {
    uint64_t addr;
    size_t len, off;  // off: into pf_buf_
    bool ok;
  };
  std::vector<Prefetched> pf_;
  std::vector<OlderChunk> pf_older_;
  std::vector<uint8_t> pf_buf_;
  ReadPlan plan_;         // the pass read (readPass)
  std::vector<std::pair<uint32_t, uint8_t>> pf_owner_;  // per request of plan_: thread, what
  size_t pf_cursor_ = 0;
  void parseThread(uint64_t tstate, const uint8_t* buf, size_t len, ThreadHead& out,
                   const Prefetched* pf);
  // readPass's steps: which threads' states and stacks it reads ahead (pf_, pf_older_, the
  // buffer's layout; returns how many of the known threads), the requests for them and for the
  // GIL (null: not read) into plan_, and what the run of the plan read.
  size_t planThreads(const std::vector<PrefetchThread>& known);
  void planRequests(uint8_t* gil, size_t gil_len);
  void markRead();
  bool listUnchanged() const;
  // 3.11: the current frame inferred from the data stack's top (see the .cpp).
  bool topFrame(const Prefetched& p, const ThreadHead& t, uint64_t* frame);
  FrameSizes sizes_;
};

}  // namespace psrec::recorder
