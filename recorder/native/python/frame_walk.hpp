// The frame walk of one thread: from its current frame to its first, over the frames' bytes as
// read (a data-stack chunk copied whole where it can be, other frames one by one, and on
// 3.8-3.10 the frames of the last stack in one copy), with the code objects each frame runs
// and the records a later pass starts from. A change to how a CPython version lays out its
// frames touches this walk and that version's layout (cpython/), nothing else. A walk never
// follows more than max_depth frames.
#pragma once

#include <cstdint>
#include <vector>

#include "recorder/native/capture/frame_capture.hpp"
#include "recorder/native/python/python_process.hpp"
#include "recorder/native/memory/remote_memory.hpp"
#include "recorder/native/python/torn_checks.hpp"
#include "recorder/native/python/unwind_types.hpp"

namespace psrec::recorder {

class FrameWalker {
 public:
  // ahead: what the pass reader read ahead for the thread walked next.
  FrameWalker(PythonProcess& proc, ReadAhead& ahead);
  FrameWalker(const FrameWalker&) = delete;
  FrameWalker& operator=(const FrameWalker&) = delete;

  // Frames innermost first. kTruncated when max_depth frames were read and more follow.
  // bottom: where the thread's last whole walk ended (StackHint::bottom; 0 if unknown).
  // guess: 3.8-3.10, whether the walk may start from one copy of the thread's last frames
  // (false: one by one, as a read again after a torn copy does). last_try: the reader will
  // not read the thread again in this pass (see walkFrameObjects).
  // stop (3.15+): a frame the walk ends at, kAnchorCallers frames past it, rather than at the
  // stack's first frame (the frame-cache anchor; 0: none). cut() then says it did.
  WalkResult walk(const ThreadHead& t, std::vector<RawFrame>& out, size_t max_depth,
                  uint64_t bottom = 0, bool guess = true, bool last_try = true,
                  uint64_t stop = 0);
  bool cut() const { return cut_; }
  // The frames of a capture (the chain the kernel copied at one perf sample, innermost first),
  // as walk() gives them from the same bytes, nothing read from the process: kError when it
  // holds no whole stack (cut short, a read failed, or its chain is one no stack has, as a
  // frame caught while it was being pushed), kTruncated past max_depth.
  WalkResult fromCapture(const ThreadHead& t, const Capture& c, std::vector<RawFrame>& out,
                         size_t max_depth);
  // Past the last frame of a capture cut short (Capture::truncated): its callers read from
  // the process, at most kMaxContinuedFrames of them, accepted while that frame still reads
  // as it was copied.
  static constexpr size_t kMaxContinuedFrames = 96;
  // One frame of a capture (its copied bytes, or a read past the copy), as the walk takes it:
  // appended to out (a shim frame marks its callee entered from C instead), *prev its link.
  // kError where the bytes read as no frame of a whole stack can.
  WalkResult takeFrame(const ThreadHead& t, uint64_t addr, const uint8_t* bytes,
                       std::vector<RawFrame>& out, uint64_t* prev);
  WalkResult continueCapture(const ThreadHead& t, const Capture& c, std::vector<RawFrame>& out,
                             size_t max_depth);
  // How a capture finds a thread's frames in this target's layout (CaptureLayout).
  static CaptureLayout captureLayout(const cpython::Layout& l);
  // 3.8-3.10: whether a torn copy of the thread's stack is copied again (the reader's next
  // try) before it is walked one frame at a time: when its last good stack (guessFrames) is
  // more than kWalkAloneDepth frames deep (a walk one by one takes a system call a frame),
  // until the last try.
  bool copyAgainFirst(bool last_try) const { return !last_try && guess_depth_ > kWalkAloneDepth; }
  static constexpr size_t kWalkAloneDepth = 32;
  // After a walk: the frames it found outside the data stack, and its loop's entry frame,
  // for the next pass's hint.
  void noteWalk(StackHint& hint) const;
  // 3.8-3.10: where the next walk of the thread at `tstate` may find its frames (those of its
  // recent samples): frames, its last good stack, join the guess. A walk adds its own frames
  // (addGuess), a walk that fails too, for a walk again.
  void guessFrames(uint64_t tstate, const std::vector<RawFrame>& frames);
  // Whether the callers frames[which[..]] of frames walked from one copy still read the same.
  bool verifyCallers(const std::vector<RawFrame>& frames, const size_t* which, size_t count) {
    return checks_.verifyCallers(frames, which, count);
  }
  // 3.8-3.10, after a walk from one copy of guessed frames: reads its `innermost` frames (in
  // walk order) again, with the thread's current frame, and requires them unchanged (see
  // TornChecks::verify). The reader passes the frames that differ from the thread's last good
  // stack and the caller of the outermost of them: the frames under that caller are as they
  // were then and are not read again. True when the walk left nothing to check.
  bool verifyNewer(size_t innermost);
  // A code object whose frames are interpreter trampolines, not Python code (3.13+'s
  // _Py_InitCleanup, under __init__ calls): the walk leaves them out.
  void setShimCode(uint64_t code) { shim_code_ = code; }
  uint64_t shimCode() const { return shim_code_; }
  const UnwinderStats& stats() const { return stats_; }

 private:
  // 3.8-3.10: PyFrameObjects linked by f_back.
  // bottom: where the last whole walk ended (0: unknown, and no guessed copy).
  WalkResult walkFrameObjects(const ThreadHead& t, std::vector<RawFrame>& out, size_t max_depth,
                              uint64_t bottom, bool guess, bool last_try);
  // 3.11+: _PyInterpreterFrames in data-stack chunks (and a few outside them).
  WalkResult walkInterpreterFrames(const ThreadHead& t, std::vector<RawFrame>& out,
                                   size_t max_depth, uint64_t bottom, uint64_t stop);
  // What walkInterpreterFrames carries from one frame to the next.
  struct IWalk {
    uint64_t stop = 0;          // the frame-cache anchor to cut at (0: none)
    size_t cut_at = 0;          // the frame count at which the walk ends past `stop` (0: not met)
    bool entry_seen = false;    // the current loop's entry frame was met
    bool check_current = false; // the checks re-read the thread's current frame
  };
  // Its steps: the first frame (addr, from the thread state's) and the chunk read ahead; false
  // when a read failed.
  bool startWalk(const ThreadHead& t, uint64_t& addr);
  // A Python frame into out; false for a torn read.
  bool takeFrame(const ThreadHead& t, const StructView<cpython::st::IFrame>& v, uint64_t addr,
                 uint64_t prev, uint8_t owner, size_t outside_before, std::vector<RawFrame>& out,
                 IWalk& w);
  // Whether the frame's link to its caller (prev) is one a whole stack can have.
  bool linkHolds(const ThreadHead& t, uint64_t addr, uint64_t prev, uint8_t owner,
                 const std::vector<RawFrame>& out) const;
  // The frames read on their own, read again.
  WalkResult verifyWalk(const ThreadHead& t, std::vector<RawFrame>& out, bool check_current);
  // 3.8-3.10: the walk in one copy of the guessed frames (see guessFrames); false when the
  // copy does not hold the whole stack (kGuessMisses frames it lacks are read on their own)
  // or the stack it holds does not end at `bottom`, where the last whole walk ended.
  // current_frame: the thread's current frame as read.
  // torn: set when the copy's chain ends, but not at `bottom` (or at a frame not running),
  // runs past max_depth or meets a frame with no code.
  bool walkGuessed(const ThreadHead& t, std::vector<RawFrame>& out, size_t max_depth,
                   uint64_t bottom, uint64_t* current_frame, bool* torn);
  void addGuess(uint64_t tstate, const std::vector<RawFrame>& frames);
  // A frame's bytes (3.11+): in the chunk the previous frame was in, as most are, or else
  // (frameBytesElsewhere) in another chunk, loaded if need be, or read alone.
  const uint8_t* frameBytes(uint64_t addr) {
    if (last_chunk_ < chunks_.size()) {
      const auto& c = chunks_[last_chunk_];
      if (c.holds(addr, static_cast<uint64_t>(l_.iframe_size)))
        return bytesOf(c) + (addr - c.start);
    }
    return frameBytesElsewhere(addr);
  }
  const uint8_t* frameBytesElsewhere(uint64_t addr);
  // 3.8-3.10: whether a frame object's copy shows it running (f_executing / f_state).
  bool running(const StructView<cpython::st::FrameObject>& v) const {
    return l_.frame_state == cpython::kAbsent ||
           v.get<int8_t>(l_.frame_state) == l_.frame_state_running;
  }
  bool loadChunk(uint64_t addr, uint64_t used_end);

  PythonProcess& proc_;
  const cpython::Layout& l_;
  ReadAhead& ahead_;
  TornChecks checks_;
  UnwinderStats stats_;
  uint64_t shim_code_ = 0;
  uint32_t capture_header_ = 0;  // a capture's bytes of each frame (captureLayout)

  // Data-stack chunks of the thread being walked (3.11+).
  struct LoadedChunk {
    uint64_t start;
    uint64_t end;
    size_t offset;  // into chunk_buf_, unless ext
    bool older;     // not the thread's current chunk
    const uint8_t* ext;  // its bytes as the pass read them ahead (valid until the next pass)
    // Whether [addr, addr + size) lies in it; written so that a torn pointer near 2^64
    // cannot wrap around into range.
    bool holds(uint64_t addr, uint64_t size) const {
      return addr >= start && end - start >= size && addr - start <= end - start - size;
    }
  };
  const uint8_t* bytesOf(const LoadedChunk& c) const {
    return c.ext ? c.ext : chunk_buf_.data() + c.offset;
  }
  bool addChunk(const LoadedChunk& c);
  // An older chunk's length in use, from its header (0 when the header is not one).
  uint64_t usedOfOlder(const uint8_t* head, size_t len) const;
  RawBuffer chunk_buf_;
  std::vector<LoadedChunk> chunks_;
  size_t last_chunk_ = 0;  // where the previous frame was: the next one is usually there too
  uint64_t next_chunk_ = 0;
  int chunk_loads_ = 0;
  uint8_t scratch_[256];
  std::vector<uint64_t> walk_outside_;  // frames the walk read outside every chunk
  uint64_t walk_entry_ = 0, walk_entry_code_ = 0;
  uint64_t walk_bottom_ = 0;  // where this walk ended (see walk())
  bool cut_ = false;          // this walk ended past its stop frame (see walk())

  // 3.8-3.10: the frames of the thread's recent stacks (guessFrames), sorted, and the plan
  // that copies them (its views).
  std::vector<uint64_t> guess_;
  size_t guess_depth_ = 0;            // frames in the last good stack (guessFrames)
  std::vector<uint32_t> guess_seen_;  // by guess_: the last stack that held the frame
  uint32_t guess_age_ = 0;            // stacks given to guessFrames
  std::vector<uint64_t> guess_new_;
  std::vector<std::pair<uint64_t, uint32_t>> guess_merge_;
  uint64_t guess_tstate_ = 0;
  uint64_t verify_tstate_ = 0;  // the thread of a guessed walk not yet checked (verifyNewer)
  uint64_t verify_leaf_ = 0;    // and the current frame its copy read
  ReadPlan guess_plan_;
};

}  // namespace psrec::recorder
