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

ThreadCpu ThreadStatFiles::read() {
  ThreadCpu out;
  if (stat_fd_ < 0) return out;
  char buf[512];
  ssize_t n = pread(stat_fd_, buf, sizeof buf - 1, 0);
  if (n <= 0) return out;  // the thread exited
  buf[n] = '\0';
  char state = stateFromStat(buf, static_cast<size_t>(n));
  if (!state) return out;
  out.ok = true;
  out.running = state == 'R';
  if (schedstat_fd_ >= 0) {
    // "<ns on cpu> <ns waiting on a runqueue> <timeslices>"
    ssize_t m = pread(schedstat_fd_, buf, sizeof buf - 1, 0);
    if (m > 0) {
      buf[m] = '\0';
      char* end = nullptr;
      unsigned long long ns = std::strtoull(buf, &end, 10);
      if (end != buf) {
        out.cpu_known = true;
        out.cpu_ns = ns;
      }
    }
  }
  return out;
}

ThreadCpu ThreadStatFiles::readSince(uint64_t last_cpu_ns, bool have_last, bool was_running) {
  if (schedstat_fd_ < 0 || !have_last || was_running) return read();
  ThreadCpu out;
  char buf[128];
  ssize_t m = pread(schedstat_fd_, buf, sizeof buf - 1, 0);
  if (m <= 0) return out;  // the thread exited
  buf[m] = '\0';
  char* end = nullptr;
  unsigned long long ns = std::strtoull(buf, &end, 10);
  if (end == buf) return read();
  if (ns <= last_cpu_ns) {
    out.ok = true;
    out.running = false;
    out.cpu_known = true;
    out.cpu_ns = ns;
    return out;
  }
  out = read();
  if (out.cpu_known && out.cpu_ns < ns) out.cpu_ns = ns;
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
