// Stops of a target for the duration of one read, with PTRACE_SEIZE + PTRACE_INTERRUPT, let go
// again with PTRACE_DETACH (a signal that came meanwhile handed back): every thread of a process
// (ProcessPause, --blocking) or one thread (ThreadStop: a read that must describe one instant).
// Must be used from one thread: ptrace requests come from the thread that attached.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace psrec::recorder {

class ProcessPause {
 public:
  explicit ProcessPause(pid_t pid) : pid_(pid) {}
  ~ProcessPause() { resume(); }
  ProcessPause(const ProcessPause&) = delete;
  ProcessPause& operator=(const ProcessPause&) = delete;

  // Stops all threads; returns 0 or an errno (EPERM: not allowed; ESRCH: process gone).
  int stop();
  void resume();

 private:
  pid_t pid_;
  std::vector<std::pair<pid_t, int>> stopped_;  // tid, signal to re-deliver on detach
};

// How long the sampler may keep one thread stopped (ThreadStop): 1/kStopShareDivisor of the
// time since it first asked, and kStopAllowanceNs more, so that the stops slow the thread by
// about 1 % at most.
struct StopBudget {
  static constexpr uint64_t kStopShareDivisor = 100;
  static constexpr uint64_t kStopAllowanceNs = 5000000;
  uint64_t first_ns = 0;
  uint64_t stopped_ns = 0;
  bool allows(uint64_t now_ns) {
    if (!first_ns) first_ns = now_ns;
    return stopped_ns <= kStopAllowanceNs + (now_ns - first_ns) / kStopShareDivisor;
  }
};

// One thread stopped from construction to destruction. A stop costs the thread about 30-45 us
// on a 2-CPU VM (the interrupt, the wake-up of the waiting tracer, the detach): the sampler
// keeps its stops within a budget (spec section 10, rule 7).
class ThreadStop {
 public:
  explicit ThreadStop(pid_t tid);
  ~ThreadStop();
  ThreadStop(const ThreadStop&) = delete;
  ThreadStop& operator=(const ThreadStop&) = delete;

  // 0 when the thread is stopped, else the errno (EPERM: not allowed; ESRCH: it is gone).
  int error() const { return error_; }
  bool stopped() const { return error_ == 0; }

 private:
  pid_t tid_;
  int error_ = 0;
  int signal_ = 0;  // to hand back on detach
  bool seized_ = false;
};

}  // namespace psrec::recorder
