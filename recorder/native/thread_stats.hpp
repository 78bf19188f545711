// Per-thread scheduler state from /proc/PID/task/TID/{stat,schedstat}, with both files kept
// open so that each sample costs one pread per file and no open/close.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace psrec::recorder {

struct ThreadCpu {
  bool ok = false;
  bool running = false;  // state R: on a CPU or runnable
  bool cpu_known = false;
  uint64_t cpu_ns = 0;   // total CPU time consumed by the thread
};

class ThreadStatFiles {
 public:
  ThreadStatFiles() = default;
  ThreadStatFiles(pid_t pid, pid_t tid);
  ~ThreadStatFiles();
  ThreadStatFiles(ThreadStatFiles&& o) noexcept;
  ThreadStatFiles& operator=(ThreadStatFiles&& o) noexcept;
  ThreadStatFiles(const ThreadStatFiles&) = delete;
  ThreadStatFiles& operator=(const ThreadStatFiles&) = delete;

  bool open() const { return stat_fd_ >= 0; }
  // Reads both files.
  ThreadCpu read();
  // Cheaper for idle threads: reads schedstat, and stat (for the state) only when the thread
  // was runnable at the previous look or consumed CPU since then. A sleeping thread that has
  // not run since is still not running (at worst it was woken this instant).
  ThreadCpu readSince(uint64_t last_cpu_ns, bool have_last, bool was_running);

 private:
  void closeAll();
  int stat_fd_ = -1;
  int schedstat_fd_ = -1;
};

// The thread's name as the kernel knows it (/proc/PID/task/TID/comm).
std::string threadComm(pid_t pid, pid_t tid);

// One-letter process state from /proc/PID/stat ('Z' zombie, 'X' dead); 0 if it is gone.
char processState(pid_t pid);

}  // namespace psrec::recorder
