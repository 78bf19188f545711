#include "recorder/native/memory/process_pause.hpp"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>

namespace psrec::recorder {

int ProcessPause::stop() {
  std::string dir = "/proc/" + std::to_string(pid_) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d) return ESRCH;
  std::vector<pid_t> tids;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9') tids.push_back(std::atoi(e->d_name));
  }
  closedir(d);
  int first_error = 0;
  std::vector<pid_t> seized;
  for (pid_t tid : tids) {
    if (ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) {
      if (errno == EPERM && !first_error) first_error = EPERM;
      continue;  // ESRCH: the thread just exited
    }
    seized.push_back(tid);
    ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr);
  }
  for (pid_t tid : seized) {
    int status = 0;
    for (;;) {
      pid_t r = waitpid(tid, &status, __WALL);
      if (r < 0 && errno == EINTR) continue;
      break;
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) continue;
    int sig = 0;
    // A signal that arrived first is held in signal-delivery-stop: hand it back on detach.
    if (WIFSTOPPED(status) && (status >> 16) != PTRACE_EVENT_STOP && WSTOPSIG(status) != SIGTRAP)
      sig = WSTOPSIG(status);
    stopped_.emplace_back(tid, sig);
  }
  if (stopped_.empty()) return first_error ? first_error : ESRCH;
  return 0;
}

void ProcessPause::resume() {
  for (const auto& [tid, sig] : stopped_)
    ptrace(PTRACE_DETACH, tid, nullptr, reinterpret_cast<void*>(static_cast<long>(sig)));
  stopped_.clear();
}

ThreadStop::ThreadStop(pid_t tid) : tid_(tid) {
  if (ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) {
    error_ = errno;
    return;
  }
  seized_ = true;
  if (ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0) {
    error_ = errno;
    return;
  }
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(tid, &status, __WALL);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) error_ = errno;
    break;
  }
  if (error_) return;
  if (WIFEXITED(status) || WIFSIGNALED(status)) {
    error_ = ESRCH;
    seized_ = false;
    return;
  }
  // A signal that arrived first is held in signal-delivery-stop: hand it back on detach.
  if (WIFSTOPPED(status) && (status >> 16) != PTRACE_EVENT_STOP && WSTOPSIG(status) != SIGTRAP)
    signal_ = WSTOPSIG(status);
}

ThreadStop::~ThreadStop() {
  if (seized_)
    ptrace(PTRACE_DETACH, tid_, nullptr, reinterpret_cast<void*>(static_cast<long>(signal_)));
}

}  // namespace psrec::recorder
