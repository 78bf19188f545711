// Stops every thread of a process for the duration of one sample (--blocking), with
// PTRACE_SEIZE + PTRACE_INTERRUPT, and lets them go again with PTRACE_DETACH. Must be used from
// one thread: ptrace requests come from the thread that attached.
#pragma once

#include <sys/types.h>

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

}  // namespace psrec::recorder
