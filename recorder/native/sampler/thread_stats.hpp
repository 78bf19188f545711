// Per-thread scheduler state from /proc/PID/task/TID/{stat,schedstat}, with both files kept
// open so that each sample costs one pread per file and no open/close.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

namespace psrec::recorder {

struct ThreadCpu {
  bool ok = false;
  bool running = false;  // state R: on a CPU or runnable
  bool cpu_known = false;
  uint64_t cpu_ns = 0;   // total CPU time consumed by the thread
};

// A file descriptor closed with its owner.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset();

 private:
  int fd_ = -1;
};

class SwitchRing;

class ThreadStatFiles {
 public:
  ThreadStatFiles();
  // With switches, the thread's state and CPU time come from its context switches where the
  // kernel reports them (see SwitchRing), and the files are read only to start and to resync.
  ThreadStatFiles(pid_t pid, pid_t tid, bool switches = true);
  ~ThreadStatFiles();
  ThreadStatFiles(ThreadStatFiles&& o) noexcept;
  ThreadStatFiles& operator=(ThreadStatFiles&& o) noexcept;
  ThreadStatFiles(const ThreadStatFiles&) = delete;
  ThreadStatFiles& operator=(const ThreadStatFiles&) = delete;

  bool open() const { return stat_fd_.get() >= 0; }
  // Reads both files.
  ThreadCpu read();
  // The state and CPU time for one sample. From the context-switch ring when there is one: no
  // system call at all. Otherwise from the files, reading stat (3 us) only when the state may
  // have changed. schedstat (1 us) is read every time: when its three counters (time on a
  // CPU, time waiting on a runqueue, times scheduled) are all as at the previous call, the
  // thread has not been switched in or out since, so its state is the one seen then (at worst
  // it was woken this instant and has not reached a CPU yet). Otherwise stat says. The
  // reasoning is in spec/cpython-layouts.md ("CPU"). now_ns: the pass's CLOCK_MONOTONIC time,
  // which the ring's CPU time of a running thread counts up to.
  ThreadCpu sample(uint64_t now_ns);
  uint64_t statReads() const { return stat_reads_; }
  // Whether the thread is runnable now, as its stat file says (one read): for a sample that
  // must know it (Sampler::captured), where the context switches may not have arrived yet.
  bool runnableNow();
  // psrec paused the thread (--blocking) and has resumed it. The pause switched it out, which
  // its context switches tell as a thread gone to sleep, and a thread woken again makes no
  // switch until it reaches a CPU: behind another program on its CPU it stayed "asleep" for up
  // to a time slice (a thread busy 100 % of the time showed on a CPU in 70 % of samples). A
  // thread that was running or runnable before the pause is runnable again.
  void resumed(bool was_running);
  // Whether sample() takes the state from context switches.
  bool fromSwitches() const { return ring_ != nullptr; }
  // A thread off its CPU does not move until it is switched in again. offCpuMark() marks the
  // switches so far of a thread that is off its CPU now (0: on a CPU, or not known without
  // the context-switch ring); stillOff(mark) says whether it has not been switched in since.
  // No system call: a memory read became a consistent one when the thread stayed off.
  uint64_t offCpuMark();
  bool stillOff(uint64_t mark);

 private:
  ThreadCpu sampleFiles();
  ThreadCpu startRing();
  Fd stat_fd_;
  Fd schedstat_fd_;
  std::unique_ptr<SwitchRing> ring_;
  // The previous sample: schedstat's counters and whether the thread was runnable.
  bool have_last_ = false;
  bool last_running_ = true;
  uint64_t last_[3] = {0, 0, 0};
  uint64_t stat_reads_ = 0;
};

// Makes the first context-switch event of a recording cheap to open (once per process; see
// thread_stats.cpp). Call before sampling starts.
void prepareSwitchEvents();

// CLOCK_MONOTONIC in nanoseconds (the clock of sampling deadlines and of switch records).
uint64_t monotonicNs();
// The calling thread's CPU time in nanoseconds (CLOCK_THREAD_CPUTIME_ID).
uint64_t threadCpuNs();

// The thread's name as the kernel knows it (/proc/PID/task/TID/comm).
std::string threadComm(pid_t pid, pid_t tid);

// One-letter process state from /proc/PID/stat ('Z' zombie, 'X' dead); 0 if it is gone.
char processState(pid_t pid);
// Whether a processState() says the process has ended (gone, a zombie or dead).
inline bool gone(char state) { return state == 0 || state == 'Z' || state == 'X'; }

}  // namespace psrec::recorder
