// The Sampler's methods for the processes it follows (each a Target, target.hpp): a target's
// segment opened and ended, threading's names, exec and exit seen by the watch every 100 ms,
// and with --subprocesses the children found and followed.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "recorder/native/errors.hpp"
#include "recorder/native/sampler/sampler.hpp"

namespace psrec::recorder {

// A recorded target that exec'd a program that is not Python, without --subprocesses: the
// recording ends once that has held this long (a shell that execs Python again is followed).
constexpr uint64_t kNotPythonSettleNs = 1000000000;

namespace {

// Children of a process, from /proc/PID/task/TID/children of each of its threads.
std::vector<pid_t> childrenOf(pid_t pid) {
  std::vector<pid_t> out;
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::string path = dir + "/" + e->d_name + "/children";
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = '\0';
    char* p = buf;
    while (*p) {
      char* end;
      long v = std::strtol(p, &end, 10);
      if (end == p) break;
      out.push_back(static_cast<pid_t>(v));
      p = end;
      while (*p == ' ' || *p == '\n') ++p;
    }
  }
  closedir(d);
  return out;
}

}  // namespace

void Sampler::openTarget(Target& t, uint64_t ts, pid_t ppid) {
  t.openReaders();
  if (config_.tasks)
    t.tasks = std::make_unique<TaskTracker>(*t.proc, *t.codes, encoder_,
                                            static_cast<uint64_t>(t.pid),
                                            config_.created_mono_ns, config_.interval_ns,
                                            config_.task_interval_ns);
  t.reader->setFrameCache(config_.frame_cache);
  if (!config_.blocking) {
    // The kernel's copies of the running threads' Python frames (not needed where every pass
    // stops the process).
    const CaptureLayout layout = FrameWalker::captureLayout(t.proc->layout());
    if (layout.header_bytes)
      t.capture = FrameCapture::open(layout, kMaxCapturedThreads, &t.capture_refusal);
    else
      t.capture_refusal = "this Python's frames are not laid out for the kernel to copy";
    if (!t.capture && capture_refusal_.empty()) capture_refusal_ = t.capture_refusal;
  }
  if (config_.native) {
    t.native = std::make_unique<NativeSampling>(t.pid, t.proc->info().runtime_addr,
                                                t.proc->mem(), perfPeriod(config_.interval_ns),
                                                t.proc->layout().version_hex < 0x030B0000,
                                                t.proc->layout().iframe_is_entry !=
                                                        cpython::kAbsent
                                                    ? int64_t{t.proc->layout().code_adaptive}
                                                    : -1,
                                                t.capture.get());
  }
  // Threads already running get threading's names in their first record.
  t.names->read(t.py_names, true);
  t.names_ts = ts ? ts : 1;
  encoder_.processStart(ts, static_cast<uint64_t>(t.pid), static_cast<uint64_t>(ppid),
                        processCommandLine(t.pid));
  t.recorded = true;
  bump(st_.processes, 1);
  std::lock_guard<std::mutex> lock(mu_);
  if (!first_info_) first_info_ = t.proc->info();
}

// Thread names come from threading (Thread.name), read after the pass: every second for
// renames, and every 20 ms while a thread seen in the last second has no name from it yet
// (threading registers a thread only once it runs). Until then a thread has the kernel's name.
void Sampler::readNames(Target& t, uint64_t ts) {
  constexpr uint64_t kRenameTicks = 1000000, kNewThreadTicks = 20000;  // 1 us ticks
  const uint64_t since = ts - t.names_ts;
  const bool fresh = !t.names_ts || since >= kRenameTicks;
  if (!fresh && !(t.names_wanted && since >= kNewThreadTicks)) return;
  t.names_ts = ts ? ts : 1;
  t.names_wanted = false;
  t.names->read(t.py_names, fresh);
  for (auto& [addr, th] : t.threads) {
    auto it = t.py_names.find(th.thread_id);
    if (it == t.py_names.end()) {
      if (!th.python_named && ts - th.first_ts < kRenameTicks) t.names_wanted = true;
      continue;
    }
    th.python_named = true;
    if (it->second == th.name) continue;
    th.name = it->second;
    encoder_.threadRename(th.ref, ts, th.name);
  }
}

void Sampler::endTarget(Target& t, uint64_t ts, int64_t exit_code) {
  for (auto& [addr, th] : t.threads) encoder_.threadExit(th.ref, ts);
  t.threads.clear();
  if (t.tasks) t.tasks->end();
  if (t.alive) encoder_.processExit(ts, static_cast<uint64_t>(t.pid), exit_code);
  t.alive = false;
}

bool Sampler::watch(uint64_t now) {
  const bool routine = now - last_watch_ns_ >= kWatchNs;
  if (routine) last_watch_ns_ = now;
  uint64_t next = last_watch_ns_ + kWatchNs;
  for (auto& tp : targets_) {
    Target& t = *tp;
    if (!t.alive) continue;
    if (t.proc) {
      if (!routine) continue;
      const uint64_t image = processImage(t.pid);
      if (image && t.image && image != t.image) {
        execed(t, now, image);
      } else {
        if (!t.image) t.image = image;
        continue;
      }
    }
    // Watched (no Python): gone, exec'd, or time to try again.
    if (routine || now >= t.next_try_ns) {
      if (gone(processState(t.pid))) {
        t.alive = false;
        continue;
      }
      const uint64_t image = processImage(t.pid);
      if (image && image != t.image) {
        t.image = image;
        t.watch_ns = t.next_try_ns = now;
        t.attach_over = false;
      }
      if (!t.attach_over && now >= t.next_try_ns) tryAttach(t, now);
    }
    if (!t.proc && !t.attach_over) next = std::min(next, t.next_try_ns);
  }
  if (config_.subprocesses && routine) {
    scanChildren(now);
    for (const auto& t : targets_)
      if (!t->proc && !t->attach_over && t->alive) next = std::min(next, t->next_try_ns);
  }
  // Processes that ended are forgotten (the target itself stays first).
  targets_.erase(std::remove_if(targets_.begin() + 1, targets_.end(),
                                [](const auto& t) { return !t->alive; }),
                 targets_.end());
  next_watch_ns_ = next;
  const Target& root = *targets_.front();
  std::string stop;
  if (root.alive && !root.proc && root.recorded && !config_.subprocesses &&
      (root.attach_over ||
       (root.why_code == ErrorCode::kNotPython && now - root.watch_ns >= kNotPythonSettleNs))) {
    std::string cmd = processCommandLine(root.pid);
    stop = "process " + std::to_string(root.pid) + " now runs " +
           (cmd.empty() ? std::string("another program") : "`" + cmd + "`") +
           (root.why_code == ErrorCode::kNotPython ? ", which is not Python"
                                                   : " (" + root.why + ")") +
           ": recording stopped";
  }
  publish(stop);
  return stop.empty();
}

void Sampler::tryAttach(Target& t, uint64_t now) {
  if (t.tryAttach(now)) openTarget(t, ticks(now), t.ppid);
}

void Sampler::execed(Target& t, uint64_t now, uint64_t image) {
  // The old program's threads end here; a PROCESS_START for the same pid opens the new
  // program's segment once it runs Python (spec/psr-format.md).
  const uint64_t ts = ticks(now);
  for (auto& [addr, th] : t.threads) encoder_.threadExit(th.ref, ts);
  if (t.tasks) t.tasks->end();
  t.execedInto(image, now);
  next_watch_ns_ = now;
}

void Sampler::scanChildren(uint64_t now) {
  std::vector<std::pair<pid_t, pid_t>> found;  // child, parent
  for (const auto& t : targets_)
    if (t->alive)
      for (pid_t child : childrenOf(t->pid)) found.emplace_back(child, t->pid);
  for (const auto& [child, parent] : found) {
    bool known = std::any_of(targets_.begin(), targets_.end(),
                             [&](const auto& t) { return t->pid == child && t->alive; });
    if (known || gone(processState(child))) continue;
    // Python or not: a launcher's (a shell's, make's) children are followed too.
    auto t = Target::child(child, parent, now);
    const bool try_now = t->next_try_ns <= now;
    Target& added = *t;
    targets_.push_back(std::move(t));
    if (try_now) tryAttach(added, now);
  }
}

}  // namespace psrec::recorder
