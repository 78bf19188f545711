// What the unwinder's parts hand each other: a thread state and a pass head as read, the frames
// of a walk, the hints that carry a thread's stack from one pass to the next, and the stack
// bytes a pass read ahead for the walk that follows.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>

#include "recorder/native/memory/remote_memory.hpp"

namespace psrec::recorder {

// _PyInterpreterFrame.owner values (Include/internal/pycore_frame.h, 3.11+); those of frames
// that run no Python code differ by version (Layout::owner_shim).
constexpr uint8_t kOwnedByGenerator = 1;  // FRAME_OWNED_BY_GENERATOR

// Data-stack chunks (3.11+): the smallest one (DATA_STACK_CHUNK_SIZE), which is what a walk
// reads of a chunk it knows nothing of, and the largest psrec accepts.
constexpr size_t kChunkProbe = 16 * 1024;
constexpr uint64_t kMaxChunkBytes = 16u << 20;

// 3.15+ frame cache (see FrameAnchor): the callers of the anchor read again with the frames
// above it, which must read as the cached ones do, and the fewest cached frames worth a cut.
constexpr size_t kAnchorCallers = 2;
constexpr size_t kMinCached = 16;

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
  // 3.15+: the frame-cache anchor (last_profiled_frame) and how often it moved (its _seq).
  uint64_t anchor = 0;
  uint64_t anchor_seq = 0;
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
  // frame that ends at datastack_top (see PassReader::topFrame), and the _PyCFrame is not read.
  uint64_t entry = 0;
  uint64_t entry_code = 0;
  // 3.8-3.10 and 3.12+: where the last whole walk ended (the frame whose link back is NULL).
  uint64_t bottom = 0;
  // 3.11+: the older data-stack chunks the last walk read (a deep stack's outer frames), with
  // the length of each in use: read ahead in the same system call as the current chunk.
  static constexpr size_t kMaxOlder = 16;
  uint64_t older[kMaxOlder] = {};
  uint32_t older_len[kMaxOlder] = {};
  uint8_t older_n = 0;
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

// What a pass read ahead of one thread's walk (PassReader::readThread with a hint): the used
// part of its data-stack chunk, its current frame where the _PyCFrame was read or inferred, and
// frames outside the chunk that its last walk met. The frame walker uses them when the thread
// state confirms they are current, and reads afresh otherwise.
struct ReadAhead {
  uint64_t cframe = 0;     // the _PyCFrame whose current frame is `frame` (0: none)
  uint64_t frame = 0;
  uint64_t chunk = 0;      // the chunk whose first `len` bytes are at `data` (0: none)
  size_t len = 0;
  const uint8_t* data = nullptr;
  std::vector<uint8_t> buf;  // the bytes of a read ahead made by readThread itself
  uint64_t outside_addr[StackHint::kMaxOutside] = {};
  const uint8_t* outside_ptr[StackHint::kMaxOutside] = {};
  size_t outside_n = 0;
  uint64_t older_addr[StackHint::kMaxOlder] = {};
  const uint8_t* older_ptr[StackHint::kMaxOlder] = {};
  size_t older_len[StackHint::kMaxOlder] = {};
  size_t older_n = 0;
  void clear() {
    cframe = chunk = 0;
    outside_n = older_n = 0;
  }
};

}  // namespace psrec::recorder
