#include "recorder/native/thread_stats.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <utility>

namespace psrec::recorder {

namespace {

int openProc(pid_t pid, pid_t tid, const char* leaf) {
  std::string path = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/" + leaf;
  return ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
}

// The state letter follows the last ')' (the command name may itself contain parentheses).
char stateFromStat(const char* buf, size_t n) {
  const char* close = nullptr;
  for (size_t i = n; i > 0; --i) {
    if (buf[i - 1] == ')') {
      close = buf + i - 1;
      break;
    }
  }
  if (!close || close + 2 >= buf + n) return 0;
  return close[2];
}

}  // namespace

ThreadStatFiles::ThreadStatFiles(pid_t pid, pid_t tid) {
  stat_fd_ = openProc(pid, tid, "stat");
  schedstat_fd_ = openProc(pid, tid, "schedstat");
}

ThreadStatFiles::~ThreadStatFiles() { closeAll(); }

void ThreadStatFiles::closeAll() {
  if (stat_fd_ >= 0) ::close(stat_fd_);
  if (schedstat_fd_ >= 0) ::close(schedstat_fd_);
  stat_fd_ = schedstat_fd_ = -1;
}

ThreadStatFiles::ThreadStatFiles(ThreadStatFiles&& o) noexcept
    : stat_fd_(std::exchange(o.stat_fd_, -1)), schedstat_fd_(std::exchange(o.schedstat_fd_, -1)) {}

ThreadStatFiles& ThreadStatFiles::operator=(ThreadStatFiles&& o) noexcept {
  if (this != &o) {
    closeAll();
    stat_fd_ = std::exchange(o.stat_fd_, -1);
    schedstat_fd_ = std::exchange(o.schedstat_fd_, -1);
  }
  return *this;
}

namespace {

// "<ns on a cpu> <ns waiting on a runqueue> <times scheduled>" (kernel/sched/stats.c).
bool parseSchedstat(char* buf, uint64_t out[3]) {
  char* p = buf;
  for (int i = 0; i < 3; ++i) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(p, &end, 10);
    if (end == p) return false;
    out[i] = v;
    p = end;
  }
  return true;
}

bool statRunning(int fd, bool* running) {
  char buf[512];
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return false;  // the thread exited
  buf[n] = '\0';
  char state = stateFromStat(buf, static_cast<size_t>(n));
  if (!state) return false;
  *running = state == 'R';
  return true;
}

}  // namespace

ThreadCpu ThreadStatFiles::read() {
  ThreadCpu out;
  if (stat_fd_ < 0) return out;
  ++stat_reads_;
  if (!statRunning(stat_fd_, &out.running)) return out;
  out.ok = true;
  if (schedstat_fd_ >= 0) {
    char buf[128];
    ssize_t m = pread(schedstat_fd_, buf, sizeof buf - 1, 0);
    uint64_t v[3];
    if (m > 0) {
      buf[m] = '\0';
      if (parseSchedstat(buf, v)) {
        out.cpu_known = true;
        out.cpu_ns = v[0];
      }
    }
  }
  return out;
}

ThreadCpu ThreadStatFiles::sample() {
  if (schedstat_fd_ < 0) return read();
  ThreadCpu out;
  char buf[128];
  ssize_t m = pread(schedstat_fd_, buf, sizeof buf - 1, 0);
  if (m <= 0) return out;  // the thread exited
  buf[m] = '\0';
  uint64_t v[3];
  if (!parseSchedstat(buf, v)) {
    have_last_ = false;
    return read();
  }
  out.cpu_known = true;
  out.cpu_ns = v[0];
  // A thread's time on a CPU is brought up to date only at ticks and switches; the count of
  // times scheduled moves whenever it reaches a CPU. Without it (kernels without
  // CONFIG_SCHED_INFO show 0) an unchanged line proves nothing.
  const bool unchanged = have_last_ && v[2] != 0 && v[0] == last_[0] && v[1] == last_[1] &&
                         v[2] == last_[2];
  if (unchanged) {
    out.ok = true;
    out.running = last_running_;
  } else {
    ++stat_reads_;
    out.ok = stat_fd_ >= 0 && statRunning(stat_fd_, &out.running);
  }
  have_last_ = out.ok;
  last_running_ = out.running;
  std::memcpy(last_, v, sizeof last_);
  return out;
}

std::string threadComm(pid_t pid, pid_t tid) {
  int fd = openProc(pid, tid, "comm");
  if (fd < 0) return {};
  char buf[64];
  ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n <= 0) return {};
  std::string s(buf, static_cast<size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

char processState(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[512];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  return stateFromStat(buf, static_cast<size_t>(n));
}

}  // namespace psrec::recorder
