// The native half of a sample, taken without stopping the thread: its user registers and the
// top of its user stack, as the kernel copies them (perf events, PERF_SAMPLE_REGS_USER and
// PERF_SAMPLE_STACK_USER) each time the thread has run for one sampling period (a task-clock
// event) and each time it leaves a CPU (the sched:sched_switch tracepoint). The latest of them
// is the thread's native stack now, but for what it ran since, less than one period. A thread
// blocked since before its events were opened has neither: its registers are then those that
// /proc/PID/task/TID/syscall gives (stack and instruction pointers).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "recorder/native/native_unwind/call_frame_info.hpp"

namespace psrec::recorder {

struct NativeSnapshot {
  uint64_t time_ns = 0;      // CLOCK_MONOTONIC
  // Taken as the thread left its CPU (to wait, or preempted): its stack until it runs again.
  bool switched_out = false;
  NativeRegisters regs;
  std::vector<uint8_t> stack;  // the stack's bytes from regs' rsp up
};

class PerfThread {
 public:
  PerfThread() = default;
  ~PerfThread();
  PerfThread(const PerfThread&) = delete;
  PerfThread& operator=(const PerfThread&) = delete;

  // Opens the events for thread tid (an id of this pid namespace): 0, or the errno of the
  // first that failed (EACCES or EPERM: perf_event_paranoid, a seccomp profile; ENOENT: no
  // tracepoint; ESRCH: the thread is gone).
  int open(pid_t tid, uint64_t period_ns, uint32_t stack_bytes);
  // Only the task-clock event, writing nowhere: for a program attached to it (a capture of
  // the thread's Python frames at each period of its CPU time). 0 or an errno.
  int openClock(pid_t tid, uint64_t period_ns);
  bool isOpen() const { return fd_ >= 0; }
  // The task-clock event's fd (a capture's program is attached to it).
  int sampleFd() const { return fd_; }
  // The first sample comes after kFirstPeriodNs of the thread's CPU time, so that a thread is
  // captured from its first passes on; settle() then sets the period asked for (once).
  static constexpr uint64_t kFirstPeriodNs = 100000;
  void settle();
  // Stops or starts the event's samples (a stopped event costs its thread nothing).
  void enable(bool on);
  // Whether a sample is also taken each time the thread leaves a CPU to wait (the
  // sched_switch tracepoint, which needs tracefs and CAP_PERFMON or perf_event_paranoid 1).
  // Without it the newest sample is from the thread's last time on a CPU.
  bool seesWaits() const { return switch_fd_ >= 0; }
  // Reads what the kernel wrote since the last call; true when out now holds a sample newer
  // than the one it held (the latest of them).
  bool latest(NativeSnapshot& out);
  uint64_t lost() const { return lost_; }

 private:
  void close();
  int fd_ = -1;         // the task-clock event, which owns the ring buffer
  uint64_t period_ns_ = 0;  // the period asked for, until settle() sets it (0: set)
  int switch_fd_ = -1;  // the sched_switch tracepoint, writing into the same buffer
  uint64_t switch_id_ = UINT64_MAX;  // its samples' PERF_SAMPLE_IDENTIFIER
  uint8_t* ring_ = nullptr;
  size_t ring_len_ = 0;  // data pages only
  size_t map_len_ = 0;
  uint64_t lost_ = 0;
  std::vector<uint8_t> record_;
};

// A thread's /proc/PID/task/TID/syscall, opened at its first read and read again at each.
class SyscallFile {
 public:
  SyscallFile() = default;
  ~SyscallFile();
  SyscallFile(const SyscallFile&) = delete;
  SyscallFile& operator=(const SyscallFile&) = delete;
  // The stack and instruction pointers of the thread blocked in a system call, and the
  // registers of its arguments; false when it is running or they cannot be read.
  bool blockedRegisters(pid_t pid, pid_t tid, NativeRegisters& regs);

 private:
  int fd_ = -1;
};

// Why perf events cannot be used for a thread, from open()'s errno, with what to do.
std::string perfRefusal(int err);

}  // namespace psrec::recorder
