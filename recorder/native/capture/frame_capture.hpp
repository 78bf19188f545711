// A thread's chain of Python frames as the kernel copies it at the instant of each perf
// sample, rather than as read from outside some microseconds later (when the thread has
// moved on). A BPF program (BPF_PROG_TYPE_PERF_EVENT) attached to the thread's task-clock
// sampling event runs in the thread's context at each overflow, before perf writes the
// sample; it follows the thread state to the current frame and from there the links to the
// callers, copying each frame's address and first bytes into a slot of a memory-mapped BPF
// array, and lets perf write its sample as usual. User space pairs a sample with the capture
// of the same overflow by their times, reading the slot through the mapping under a seqlock:
// no system call per sample.
//
// Needs CAP_BPF and CAP_PERFMON (or root) and Linux 5.5+ (bpf_probe_read_user, mmapable
// arrays); maps are charged to the memory cgroup (5.11+), not to RLIMIT_MEMLOCK. A frame on
// a page that is not resident ends the capture as a failed read: the program runs with
// interrupts off and cannot fault pages in.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "recorder/native/capture/bpf.hpp"

namespace psrec::recorder {

// Where a thread's current Python frame is and how its frames link, from the target's layout.
struct CaptureLayout {
  // Offset in the thread state of the first pointer: the frame (3.8-3.10 PyFrameObject*,
  // 3.13+ current_frame) or, 3.11-3.12, the _PyCFrame*.
  int32_t tstate_frame = -1;
  int32_t cframe_current = -1;  // 3.11-3.12: offset of current_frame in _PyCFrame; -1: one hop
  int32_t frame_previous = -1;  // offset in a frame of the link to its caller's frame
  // Bytes copied of each frame from its start (at most kMaxCapturedHeader).
  uint32_t header_bytes = 0;
};
constexpr uint32_t kMaxCapturedHeader = 160;
constexpr size_t kMaxCapturedFrames = 128;
// Captures kept per thread, newest overwriting oldest: a sample's capture is gone once the
// thread has been sampled kSlotsPerThread more times.
constexpr size_t kSlotsPerThread = 4;
// How far a capture's time may be from its sample's. The kernel stamps the sample just before
// the program runs (since Linux 6.3; just after it before then): a capture is 0.2-2 us after
// its sample, but an interrupt, or the host of a virtual machine taking its CPU, can stretch
// that to tens of microseconds (50 us seen in a VM). The nearest capture in the window is the
// sample's, so the window may exceed a high rate's period.
constexpr uint64_t kMatchAfterNs = 100000;
constexpr uint64_t kMatchBeforeNs = 100000;

// A thread's frame chain as the kernel copied it at one perf sample.
struct Capture {
  uint64_t seq = 0;        // the thread's count of captures (1 for its first)
  uint64_t time_ns = 0;    // CLOCK_MONOTONIC, when it was taken (bpf_ktime_get_ns)
  uint64_t first_hop = 0;  // the pointer read at tstate + tstate_frame
  // The chain ended at a null link within kMaxCapturedFrames, and every read succeeded.
  bool complete = false;
  // kMaxCapturedFrames frames copied, every read succeeded, and more follow.
  bool truncated = false;
  size_t frames = 0;       // frames copied
  std::vector<uint64_t> addr;   // frame i's address, innermost first
  std::vector<uint8_t> bytes;   // frame i's header at bytes[i * header_bytes]
  const uint8_t* header(size_t i, uint32_t header_bytes) const {
    return bytes.data() + i * header_bytes;
  }
};

// One program and its maps for the threads of one target. Not thread-safe: watch(), forget()
// and the readers are called from one thread at a time.
class FrameCapture {
 public:
  // Loads the program and its maps for threads of one target (at most max_threads at once);
  // null, with *why saying why in one line, where it cannot (not permitted, an old kernel,
  // the verifier's refusal, a layout it cannot follow).
  //
  // Memory: each thread has kSlotsPerThread slots of 48 + kMaxCapturedFrames * (8 +
  // header_bytes rounded up to 8) bytes of locked (never swapped) kernel memory: max_threads 128
  // costs 5.3 MB with 72-byte headers (3.11+), 8.4 MB with 120 (3.8-3.10's PyFrameObject),
  // 11 MB with the largest, 160.
  static std::unique_ptr<FrameCapture> open(const CaptureLayout& layout, size_t max_threads,
                                            std::string* why);
  ~FrameCapture();
  FrameCapture(const FrameCapture&) = delete;
  FrameCapture& operator=(const FrameCapture&) = delete;

  // Captures the chain of thread tid (an id of psrec's own pid namespace, as perf_event_open
  // takes), whose thread state is at tstate, at each sample of perf_fd (a sampling perf
  // event of that thread: the program is attached with PERF_EVENT_IOC_SET_BPF and stays
  // attached until the event is closed). False when no slot is left or the kernel refuses
  // (then nothing is attached). A tid already watched is re-pointed (a new tstate, or a new
  // event), its earlier captures dropped.
  //
  // The program finds its thread by the id the kernel gives it (bpf_get_current_pid_tgid),
  // which is the id in the initial pid namespace: psrec runs there, where it is tid.
  bool watch(pid_t tid, uint64_t tstate, int perf_fd);
  // Stops using tid's slot (call before its perf event is closed or when the thread is gone).
  // The program stays attached to the event until it is closed, but finds no thread to
  // capture.
  void forget(pid_t tid);
  // The capture taken in the same overflow as the perf sample of time sample_ns (the sample's
  // own PERF_SAMPLE_TIME with use_clockid CLOCK_MONOTONIC): of the captures at most
  // kMatchAfterNs after sample_ns and at most kMatchBeforeNs before it, the nearest, unless
  // that may be the next sample's because the sample's own was overwritten. False when none
  // is (overwritten: the thread ran kSlotsPerThread or more periods since; or never taken).
  bool at(pid_t tid, uint64_t sample_ns, Capture& out) const;
  // Its newest capture (of those before the capture of sequence number before_seq).
  bool newest(pid_t tid, Capture& out, uint64_t before_seq = UINT64_MAX) const;
  const CaptureLayout& layout() const { return layout_; }

 private:
  struct Watch {
    uint32_t group = 0;     // its slots are group * kSlotsPerThread onwards
    uint32_t watch_id = 0;  // in the top bits of each of its captures' sequence numbers
    int perf_fd = -1;
    BpfFd link;  // the attachment to perf_fd; none where made by PERF_EVENT_IOC_SET_BPF
  };

  FrameCapture() = default;
  const uint8_t* slot(uint32_t index) const { return slots_ + size_t{index} * slot_bytes_; }
  ptrdiff_t genEnd() const { return static_cast<ptrdiff_t>(slot_bytes_) - 8; }
  // Attaches the program to perf_fd: a link where the kernel has them, else the ioctl.
  bool attach(int perf_fd, BpfFd& link);
  // Copies the capture of sequence number gen from a slot, under its seqlock.
  bool readSlot(const uint8_t* s, uint64_t gen, Capture& out) const;
  struct SlotSeen {
    const uint8_t* slot;
    uint64_t gen;
    uint64_t time;
  };
  // The captures in w's slots that are whole now, by their sequence numbers and times.
  size_t scan(const Watch& w, SlotSeen* seen) const;

  CaptureLayout layout_;
  uint32_t header_stride_ = 0;  // header_bytes rounded up to 8
  uint32_t slot_bytes_ = 0;
  BpfFd config_;
  BpfFd slots_map_;
  BpfFd program_;
  uint8_t* slots_ = nullptr;  // the slots' mapping, read-only
  size_t slots_len_ = 0;
  std::unordered_map<pid_t, Watch> watches_;
  std::deque<uint32_t> free_groups_;  // oldest freed first: a late write of a gone thread
                                      // lands where no new thread is yet
  uint32_t next_watch_id_ = 1;
};

// One thread's place in a FrameCapture (watch), given up when it goes (forget). The capture
// must outlive it.
class CaptureWatch {
 public:
  CaptureWatch() = default;
  ~CaptureWatch() { reset(); }
  CaptureWatch(const CaptureWatch&) = delete;
  CaptureWatch& operator=(const CaptureWatch&) = delete;

  // FrameCapture::watch; false (and nothing watched) where it refuses.
  bool watch(FrameCapture& capture, pid_t tid, uint64_t tstate, int perf_fd) {
    reset();
    if (!capture.watch(tid, tstate, perf_fd)) return false;
    capture_ = &capture;
    tid_ = tid;
    return true;
  }
  void reset() {
    if (capture_) capture_->forget(tid_);
    capture_ = nullptr;
  }
  bool active() const { return capture_ != nullptr; }
  bool at(uint64_t sample_ns, Capture& out) const {
    return capture_ && capture_->at(tid_, sample_ns, out);
  }
  bool newest(Capture& out, uint64_t before_seq = UINT64_MAX) const {
    return capture_ && capture_->newest(tid_, out, before_seq);
  }

 private:
  FrameCapture* capture_ = nullptr;
  pid_t tid_ = 0;
};

}  // namespace psrec::recorder
