// record --native: a target's native stacks, each thread's taken without stopping it
// (PerfThread), unwound (NativeWalker), interleaved with the thread's Python frames as spec
// section 10 says, and given frame ids of native functions (spec 3.1, format 1.3).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "format/native/encoder.hpp"
#include "recorder/native/capture/frame_capture.hpp"
#include "recorder/native/native_unwind/native_stack.hpp"
#include "recorder/native/native_unwind/perf_capture.hpp"
#include "recorder/native/python/unwind_types.hpp"

namespace psrec::recorder {

// Bytes of a thread's stack the kernel copies with each sample (frames beyond are read from
// the process when the walk needs them).
constexpr uint32_t kNativeStackCopy = 8 * 1024;
// Native frames of one sample at most.
constexpr size_t kMaxNativeFrames = 4096;
// Threads of one target whose Python frames the kernel copies at once.
constexpr size_t kMaxCapturedThreads = 128;
// A capture stands for a running thread's stack for this many perf periods after it was
// taken, and kCaptureSlackNs more. The period is one of the thread's CPU time, so that its
// newest capture is always of its last period on a CPU; on a busy host that can be several
// periods of wall time before. Older, the thread woke after a long wait with no capture since
// (it has not run a period yet): it is read from the process.
constexpr uint64_t kCaptureAgePeriods = 4;
constexpr uint64_t kCaptureSlackNs = 20000000;
// The perf period of a recording of this interval: 10 kHz at most, which -r max does not raise.
inline uint64_t perfPeriod(uint64_t interval_ns) {
  return interval_ns > 100000 ? interval_ns : 100000;
}


// One thread's capture.
struct NativeThread {
  PerfThread perf;
  // Its Python frames copied with each perf sample, where the kernel allows it (declared
  // after perf: given up before its event is closed).
  CaptureWatch watch;
  NativeSnapshot latest;
  int perf_error = -1;  // -1: not opened yet; 0: open; else errno
  bool interrupted = false;  // its registers were read once by stopping it (a blocked thread)
  SyscallFile syscall;       // where it waits, without events that see it leave its CPU
  bool from_proc = false;    // ids are of its last read from syscall
  uint64_t proc_mark = 0;    // the caller's mark of its switches before that read (0: none)
  // The native stack of `latest` as frame ids, root first, with which of them are the
  // evaluation loop's: while no newer snapshot comes the thread has not run, and its stack is
  // the same (0: not walked, or walked from /proc, which is read again each time).
  uint64_t walked_ns = 0;
  std::vector<uint32_t> ids;
  std::vector<uint8_t> is_eval;
  size_t loops = 0;
};

struct NativeCounts {
  uint64_t mixed = 0;     // thread-samples recorded with their native frames
  uint64_t unpaired = 0;  // latest snapshot read, but not pairing off with the Python stack
  uint64_t unread = 0;    // no native stack could be read from a snapshot
  uint64_t stopped = 0;   // of mixed: paired by stopping the thread while both were read
  uint64_t captured = 0;  // of mixed: Python frames from the capture of their perf sample
  uint64_t marked = 0;    // recorded with markers where their native frames belong
  uint64_t from_proc = 0;  // registers from /proc/PID/task/TID/syscall (a blocked thread)
  uint64_t interrupted = 0;  // threads stopped once to read their registers (blocked)
};

class NativeSampling {
 public:
  // one_frame_per_loop: the interpreter runs each Python frame in a loop call of its own
  // (before 3.11).
  // entry_flag_code: where a frame entered from C says so in a flag of its own (3.11), the
  // offset of the first code unit in a code object (a frame's instruction pointer below it:
  // the frame has not started); else -1. capture: the target's copies of Python frames by
  // the kernel (null: none).
  NativeSampling(pid_t pid, uint64_t runtime_addr, RemoteMemory& mem, uint64_t period_ns,
                 bool one_frame_per_loop, int64_t entry_flag_code, FrameCapture* capture);
  // The registers of a thread blocked since before its events were opened come from
  // stopping it once (interruptedThreadRegisters); where ptrace is refused, from /proc (stack
  // and instruction pointers only: a frame that finds its caller from rbp ends the walk).

  // Opens the thread's perf events once, with the capture of its Python frames where the
  // kernel allows it (tstate: its thread state).
  void prepare(NativeThread& th, pid_t tid, uint64_t tstate);
  // The capture of the thread's Python frames taken with its newest perf sample, when that
  // sample is recent (kCaptureAgePeriods periods and kCaptureSlackNs before now_ns at most):
  // both halves of one instant (spec section 10, rule 7). False when there is none.
  bool captured(NativeThread& th, uint64_t now_ns, Capture& out);
  // The stack, root first, from the newest perf sample's native frames and py_ids, the Python
  // frames of its capture (captured() just said so); false when they do not pair off.
  bool mixCaptured(NativeThread& th, const std::vector<uint32_t>& py_ids,
                   const std::vector<RawFrame>& frames, format::Encoder& enc,
                   std::vector<uint32_t>& out);

  // The thread's stack, root first, with its native frames from its latest snapshot, into
  // out: py_ids are its Python frame ids, root first, and frames[i].entered whether frame i was
  // entered from C. False (out untouched) when its native stack could not be read or does not
  // pair off. unmoved: the thread has not been on a CPU since its stack was last read from
  // /proc (its context switches say so), which therefore holds.
  bool mix(NativeThread& th, pid_t tid, const std::vector<uint32_t>& py_ids,
           const std::vector<RawFrame>& frames, format::Encoder& enc, std::vector<uint32_t>& out,
           bool unmoved = false);
  // The same from the registers and stack of thread tid, which ptrace holds stopped since
  // before its Python frames were read: both of one instant.
  bool mixStopped(NativeThread& th, pid_t tid, const std::vector<uint32_t>& py_ids,
                  const std::vector<RawFrame>& frames, format::Encoder& enc,
                  std::vector<uint32_t>& out);
  // The Python frames, root first, with a marker frame (FUNCTION kind 4, spec 3.1) wherever
  // native frames belong: under the outermost, under each frame entered from C, and above the
  // innermost. For a sample whose native frames are not of its Python frames' instant.
  void mark(const std::vector<uint32_t>& py_ids, const std::vector<RawFrame>& frames,
            format::Encoder& enc, std::vector<uint32_t>& out);

  const NativeCounts& counts() const { return counts_; }
  // Why perf events could not be opened for the last thread that failed ("" if none did).
  const std::string& refusal() const { return refusal_; }
  // The binaries replaced on disk while mapped (NativeModules::replaced).
  const std::vector<std::string>& replaced() const { return modules_.replaced(); }

 private:
  uint32_t frameId(const NativeFrame& f, bool eval, format::Encoder& enc);
  // Walks the native stack from regs (and the copy of its top, if any) into th's frame ids.
  void walkNative(NativeThread& th, const NativeRegisters& regs,
                  const std::vector<uint8_t>* copy, format::Encoder& enc);
  void findRuns(const std::vector<uint32_t>& py_ids, const std::vector<RawFrame>& frames);
  // th's native frames with each evaluation-loop frame followed by its run of py_ids; false
  // when the loops and the runs do not pair off. one_instant: both were read at one instant.
  bool interleave(const NativeThread& th, const std::vector<uint32_t>& py_ids,
                  const std::vector<RawFrame>& frames, std::vector<uint32_t>& out,
                  bool one_instant);

  pid_t pid_;
  RemoteMemory& mem_;
  uint64_t period_ns_;
  bool one_frame_per_loop_;
  int64_t entry_flag_code_;
  NativeModules modules_;
  NativeWalker walker_;
  uint64_t refreshed_ns_ = 0;
  std::vector<NativeFrame> walk_;
  std::vector<size_t> runs_;
  std::unordered_map<uint64_t, uint32_t> frame_ids_;  // (pc << 1 | exact) -> frame id
  NativeCounts counts_;
  std::string refusal_;
  uint32_t marker_ = 0;  // the frame id of the marker (0: not defined yet)
  std::vector<uint8_t> stopped_stack_;
  FrameCapture* capture_;
};

}  // namespace psrec::recorder
