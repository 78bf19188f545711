// Walks a target's main interpreter: its thread states, the GIL, and each thread's frames.
// Every read may fail or be torn (the target keeps running): failures are reported to the
// caller, never thrown, and a walk never follows more than max_depth frames.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <unordered_set>
#include <vector>

#include "recorder/native/code_cache.hpp"
#include "recorder/native/python_process.hpp"
#include "recorder/native/remote_memory.hpp"

namespace psrec::recorder {

// _PyInterpreterFrame.owner values (Include/internal/pycore_frame.h, 3.11+); those of frames
// that run no Python code differ by version (Layout::owner_shim).
constexpr uint8_t kOwnedByGenerator = 1;  // FRAME_OWNED_BY_GENERATOR

// Data-stack chunks (3.11+): the smallest one (DATA_STACK_CHUNK_SIZE), which is what a walk
// reads of a chunk it knows nothing of, and the largest psrec accepts.
constexpr size_t kChunkProbe = 16 * 1024;
constexpr uint64_t kMaxChunkBytes = 16u << 20;

struct RawFrame {
  uint64_t addr = 0;   // the frame (PyFrameObject or _PyInterpreterFrame)
  uint64_t code = 0;   // its code object
  uint64_t instr = 0;  // f_lasti (3.8-3.10) or the instruction pointer (3.11+)
  uint64_t prev = 0;   // the link to the caller as read (not part of the comparison)
  bool entered = false;  // 3.11+: entered from C (an entry frame), not pushed by its caller
  uint8_t owner = 0;     // 3.11+: FRAME_OWNED_BY_THREAD (0) or _GENERATOR (1)
  int32_t tlbc = 0;      // free-threaded 3.14+: the copy of the bytecode instr points into
  bool outside = false;  // 3.11+: read apart from the data-stack chunk it was walked from
  bool operator==(const RawFrame& o) const {
    return addr == o.addr && code == o.code && instr == o.instr;
  }
};

struct ThreadHead {
  uint64_t tstate = 0;
  uint64_t prev = 0;        // the list's links: checked, as a state is freed or reused while
  uint64_t next = 0;        // the list is read when threads come and go
  uint64_t interp = 0;      // its interpreter
  uint64_t thread_id = 0;   // threading.get_ident(): the pthread_t
  uint64_t native_tid = 0;  // OS thread id (0 unknown)
  uint64_t frame = 0;       // PyFrameObject* (3.8-3.10), _PyCFrame* (3.11-3.12), frame (3.13+)
  uint64_t datastack_chunk = 0;
  uint64_t datastack_top = 0;
  int32_t state = -1;          // 3.13+: _Py_THREAD_ATTACHED (1), DETACHED or SUSPENDED
  int32_t holds_gil = -1;      // 3.14+ (-1: the layout has no such field)
  int32_t gil_requested = -1;  // 3.15+
  uint64_t base_frame = 0;     // 3.15+: where a whole stack ends
};

// A thread's relation to the GIL at one sample.
struct GilStatus {
  bool known = false;  // held is meaningful
  bool held = false;   // on a free-threaded target: attached to the interpreter (no GIL)
  bool requested_known = false;
  bool requested = false;
};

struct PassHead {
  uint64_t threads_head = 0;
  // The thread states read ahead still form the list of the last pass (none came or went).
  bool list_unchanged = false;
  bool gil_known = false;
  bool gil_locked = false;
  uint64_t gil_holder = 0;
};

enum class WalkResult { kOk, kTruncated, kError };

// Where a thread's stack was at its previous sample (3.11+). Reading a thread state with a
// hint also reads, in the same system call, the _PyCFrame and the used part of the data-stack
// chunk it pointed at then; the walk uses them when the thread state confirms they are current.
struct StackHint {
  uint64_t cframe = 0;
  uint64_t chunk = 0;
  uint64_t used = 0;
  // Frames outside the data stack that the last walk met (3.12+ entry frames on the C
  // stack, generator frames): read ahead in the same system call as the chunk.
  static constexpr size_t kMaxOutside = 4;
  uint64_t outside[kMaxOutside] = {};
  uint8_t outside_n = 0;
  // 3.11: the frame the thread's current run of the interpreter loop began with (the last
  // walk's innermost is_entry frame), when it lies in the data-stack chunk, and its code.
  // While the thread state still points at the same _PyCFrame, the current frame is then the
  // frame that ends at datastack_top (see Unwinder::topFrame), and the _PyCFrame is not read.
  uint64_t entry = 0;
  uint64_t entry_code = 0;
  // 3.12+: where the last whole walk ended (the frame whose `previous` is NULL).
  uint64_t bottom = 0;
};

// A thread seen in the previous pass, to read ahead with the next pass head.
struct PrefetchThread {
  uint64_t tstate = 0;
  uint64_t thread_id = 0;
  StackHint hint;
};

struct UnwinderStats {
  uint64_t chunk_reads = 0;
  uint64_t frame_reads = 0;  // frames read one by one (not from a bulk chunk read)
};

// A byte buffer whose resize leaves new bytes uninitialised: the walk reads remote memory into
// them at once, and zero-filling 16 KiB per chunk showed up in profiles of deep stacks.
class RawBuffer {
 public:
  size_t size() const { return size_; }
  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  void clear() { size_ = 0; }
  void reserve(size_t n) {
    if (n > cap_) grow(n);
  }
  void resize(size_t n) {
    reserve(n);
    size_ = n;
  }
  void assign(const uint8_t* begin, const uint8_t* end) {
    resize(static_cast<size_t>(end - begin));
    if (size_) std::memcpy(data_.get(), begin, size_);
  }

 private:
  void grow(size_t n) {
    size_t cap = cap_ * 2 > n ? cap_ * 2 : n;
    std::unique_ptr<uint8_t[]> p(new uint8_t[cap]);
    if (size_) std::memcpy(p.get(), data_.get(), size_);
    data_ = std::move(p);
    cap_ = cap;
  }
  std::unique_ptr<uint8_t[]> data_;
  size_t size_ = 0, cap_ = 0;
};

class Unwinder {
 public:
  explicit Unwinder(PythonProcess& proc);
  Unwinder(const Unwinder&) = delete;
  Unwinder& operator=(const Unwinder&) = delete;

  // The head of the thread list and the GIL state, in one read. Status kOk or why not.
  ReadStatus readPassHead(PassHead& out);
  // The pass head and, in the same system call, the thread states of the threads seen in the
  // previous pass, with their stacks' read-ahead (3.11+) and OS thread ids (3.8-3.10). A
  // request that fails (an exited thread, a freed chunk) ends the kernel's transfer: the rest
  // is read again from the request after it, and what stays unread is read thread by thread.
  // The list head is read only when the thread states' links show the list changed.
  ReadStatus readPass(PassHead& out, const std::vector<PrefetchThread>& known);
  // One thread state. On 3.8-3.10 also reads the OS thread id from the pthread structure.
  // With a hint, uses what readPass read for this thread; without one, reads afresh.
  ReadStatus readThread(uint64_t tstate, ThreadHead& out, const StackHint* hint = nullptr);
  static void updateHint(const ThreadHead& t, StackHint& hint);
  // After a walk: the frames it found outside the data stack, and its loop's entry frame,
  // for the next pass's hint.
  void noteWalk(StackHint& hint) const;
  // Whether the thread held the GIL: its own fields where the version has them (3.15
  // holds_gil, gil_requested; a free-threaded build's attached state), else the pass's GIL
  // holder.
  GilStatus gilStatus(const ThreadHead& t, const PassHead& ph) const;
  // Code objects' frame sizes, for finding the current frame from the data stack's top.
  void setCodeCache(const CodeCache* codes) { codes_ = codes; }
  // Frames innermost first. kTruncated when max_depth frames were read and more follow.
  // bottom: where the thread's last whole walk ended (StackHint::bottom; 0 if unknown).
  WalkResult walk(const ThreadHead& t, std::vector<RawFrame>& out, size_t max_depth,
                  uint64_t bottom = 0);
  // Whether a thread's kernel id is known (read from its state, or from its pthread once the
  // offset is found): a thread without one then is one not started or already gone.
  bool nativeTidKnown() const {
    return l_.tstate_native_thread_id != cpython::kAbsent || pthread_tid_offset_ >= 0;
  }
  // Whether, read now, the list still begins at `first` and ends at `last` (its next is null).
  bool listEnds(uint64_t first, uint64_t last);
  // Whether the thread state at `tstate` is in the list now: the state before it (or the
  // interpreter, for the first) links to it. False also when that cannot be read.
  bool linked(uint64_t tstate);
  // 3.8-3.10: where the next walk of the thread at `tstate` may find its frames (its last
  // sample's). A walk that fails leaves its own frames as the guess for a walk again.
  void guessFrames(uint64_t tstate, const std::vector<RawFrame>& frames);
  // 3.11+: whether the callers frames[which[..]] of frames walked from one bulk copy still
  // read the same (see the .cpp).
  bool verifyCallers(const std::vector<RawFrame>& frames, const size_t* which, size_t count);

  // A code object whose frames are interpreter trampolines, not Python code (3.13+'s
  // _Py_InitCleanup, under __init__ calls): the walk leaves them out.
  void setShimCode(uint64_t code) { shim_code_ = code; }
  uint64_t shimCode() const { return shim_code_; }

  const UnwinderStats& stats() const { return stats_; }

 private:
  // -- the pass: GIL, thread list, thread states (unwinder.cpp) --
  PythonProcess& proc_;
  const cpython::Layout& l_;
  uint64_t gil_addr_ = 0;  // struct _gil_runtime_state in the target
  int32_t gil_lo_ = 0, gil_hi_ = 0;
  void parseGil(const uint8_t* gil, size_t gil_len, PassHead& out) const;
  void resolveGil();
  // 3.8-3.10: offset of the kernel tid inside glibc's struct pthread (found at run time).
  int32_t pthread_tid_offset_ = -1;
  bool pthread_calibrated_ = false;
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
  };
  std::vector<Prefetched> pf_;
  std::vector<uint8_t> pf_buf_;
  ReadPlan plan_;         // the pass read (readPass)
  std::vector<std::pair<uint32_t, uint8_t>> pf_owner_;  // per request of plan_: thread, what
  size_t pf_cursor_ = 0;
  void parseThread(uint64_t tstate, const uint8_t* buf, size_t len, ThreadHead& out,
                   const Prefetched* pf);
  bool listUnchanged() const;
  // Read ahead by readThread from a hint, for the walk that follows.
  uint64_t spec_cframe_ = 0;
  uint64_t spec_frame_ = 0;
  uint64_t spec_chunk_ = 0;
  size_t spec_len_ = 0;
  std::vector<uint8_t> spec_buf_;
  const uint8_t* spec_data_ = nullptr;
  // Outside frames read ahead for the thread being walked, and those the walk met.
  uint64_t spec_out_addr_[StackHint::kMaxOutside] = {};
  const uint8_t* spec_out_ptr_[StackHint::kMaxOutside] = {};
  size_t spec_out_n_ = 0;

  // -- the walk over a thread's frames (frame_walk.cpp) --
  struct LoadedChunk {
    uint64_t start;
    uint64_t end;
    size_t offset;  // into chunk_buf_
  };
  const uint8_t* frameBytes(uint64_t addr);
  bool loadChunk(uint64_t addr, uint64_t used_end);
  // Data-stack chunks of the thread being walked (3.11+).
  RawBuffer chunk_buf_;
  std::vector<LoadedChunk> chunks_;
  size_t last_chunk_ = 0;  // where the previous frame was: the next one is usually there too
  uint64_t next_chunk_ = 0;
  int chunk_loads_ = 0;
  uint8_t scratch_[256];
  std::vector<uint64_t> walk_outside_;
  bool topFrame(const Prefetched& p, const ThreadHead& t, uint64_t* frame);
  uint64_t frameBytesOf(uint64_t code);
  const CodeCache* codes_ = nullptr;
  // Frame sizes by code address in front of the code cache's map (a lookup there per frame
  // showed in profiles); emptied whenever the code cache replaces an entry.
  struct SizeSlot {
    uint64_t code = 0;
    uint64_t bytes = 0;
  };
  SizeSlot sizes_[64];
  uint64_t sizes_gen_ = 0;
  uint64_t walk_entry_ = 0, walk_entry_code_ = 0;
  uint64_t walk_bottom_ = 0;  // where this walk ended (see walk())

  // -- the checks of a walk's copy (torn_checks.cpp) --
  ReadPlan verify_plan_;  // the reads again of the checks (verifySolo, verifyCallers)
  // Frames read one by one during a walk (every frame on 3.8-3.10; generator and C-stack
  // frames on 3.11+), kept to check after the walk that they did not change under us.
  struct SoloFrame {
    uint64_t addr;
    size_t offset;
    bool leaf;
  };
  std::vector<SoloFrame> solo_;
  std::vector<uint8_t> solo_buf_;
  std::vector<uint8_t> verify_buf_;
  void noteSolo(uint64_t addr, const uint8_t* bytes, size_t len, bool leaf);
  // Whether the frame at `now` was called (within a few frames) from `leaf` (3.8-3.10).
  bool calledFrom(uint64_t now, uint64_t leaf);
  // 3.8-3.10: the walk in one copy of the guessed frames (see guessFrames); false when the
  // copy does not hold the whole stack. current_frame: the thread's current frame as read.
  bool walkGuessed(const ThreadHead& t, std::vector<RawFrame>& out, size_t max_depth,
                   uint64_t* current_frame);
  std::vector<uint64_t> guess_;  // sorted frame addresses
  uint64_t guess_tstate_ = 0;
  std::vector<uint8_t> guess_buf_;
  uint64_t verified_leaf_ = 0;  // the innermost frame as verifySolo's read found it
  // leaf_ptr/leaf: where the thread state points at its innermost frame, and the frame the
  // walk started from; checked in the same read (0: no check).
  bool verifySolo(size_t len, int32_t instr_offset, size_t instr_width, uint64_t leaf_ptr = 0,
                  uint64_t leaf = 0);
  bool selfRecursiveLeaf() const;
  bool selfCall(size_t i) const;

  UnwinderStats stats_;
  uint64_t shim_code_ = 0;
};

}  // namespace psrec::recorder
