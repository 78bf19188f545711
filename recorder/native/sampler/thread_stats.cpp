#include "recorder/native/sampler/thread_stats.hpp"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
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

constexpr size_t kSwitchRingPages = 8;

// A perf event that records the thread's context switches (PERF_RECORD_SWITCH) into a ring of
// kSwitchRingPages pages, with CLOCK_MONOTONIC times; -1 where the kernel refuses.
int openSwitchEvent(pid_t tid, bool disabled) {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_DUMMY;
  attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
  attr.sample_id_all = 1;
  attr.context_switch = 1;
  attr.disabled = disabled ? 1 : 0;
  attr.use_clockid = 1;
  attr.clockid = CLOCK_MONOTONIC;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.watermark = 1;  // never wake a reader: nobody polls the ring
  attr.wakeup_watermark = static_cast<uint32_t>(kSwitchRingPages * sysconf(_SC_PAGESIZE));
  return static_cast<int>(syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
}

}  // namespace

void prepareSwitchEvents() {
  // The kernel turns its context-switch hooks on when the first such event exists, and
  // doing so takes it 10-20 ms (it patches the scheduler's code), during which the thread
  // opening the event is stuck: in a sampling pass, that is 10-20 ms without samples. One
  // disabled event on psrec's own thread, opened before sampling starts and kept, keeps the
  // hooks on; the events of target threads are then cheap to open.
  static const int held = openSwitchEvent(0, true);
  (void)held;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

// A thread's context switches, as the kernel writes them into a perf event ring buffer
// (PERF_RECORD_SWITCH, perf_event_open(2)): each switch in and out with its CLOCK_MONOTONIC
// time, and whether a switch out was a preemption (the thread stays runnable). Reading the
// ring is a few loads from shared memory, so a sample needs no system call for the thread's
// state and CPU time. The state at the start comes from the files; only switches after that
// are applied. Lost records (a full ring) make the owner resync from the files.
class SwitchRing {
 public:
  static constexpr size_t kDataPages = kSwitchRingPages;

  static std::unique_ptr<SwitchRing> open(pid_t tid) {
    int fd = openSwitchEvent(tid, false);
    if (fd < 0) return nullptr;
    const size_t len = (1 + kDataPages) * pageSize();
    void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      return nullptr;
    }
    auto r = std::unique_ptr<SwitchRing>(new SwitchRing);
    r->fd_ = Fd(fd);
    r->map_ = static_cast<uint8_t*>(m);
    r->len_ = len;
    return r;
  }
  ~SwitchRing() {
    if (map_) munmap(map_, len_);
  }

  // Drops the switches written so far, and returns the time from which the next start()
  // applies them: a time taken before the files are read, so that a switch after it, which
  // the files may not show, is applied. (Taken after the read, a thread that the files showed
  // running and that left its CPU before that time stayed on it for the ring until its next
  // switch: a thread that went to sleep as it was first sampled counted each period as CPU
  // time, 3 ms in its first three samples at 1 kHz.)
  uint64_t begin() {
    skip();
    return monotonicNs();
  }
  // The state seen in the files, read after begin() returned from_ns: the switches timed
  // before from_ns are in it, those after are applied to it. The files' `R` is a thread on a
  // CPU or one waiting for a CPU: which, the ring's first switch tells (unsure() until then).
  // (Taken as on a CPU, a thread that waited under load counted each period of its wait as
  // CPU time until it was switched in: 1-5 ms at 1 kHz.)
  void start(bool running, uint64_t cpu_ns, uint64_t from_ns) {
    have_base_ = false;
    on_cpu_ = false;
    unsure_ = running;
    runnable_ = running;
    since_ns_ = from_ns;
    start_ns_ = from_ns;
    cpu_ns_ = cpu_ns;
  }
  // Applies the switches since the last call; false when some were lost.
  bool update() {
    auto* page = reinterpret_cast<perf_event_mmap_page*>(map_);
    const uint64_t head = __atomic_load_n(&page->data_head, __ATOMIC_ACQUIRE);
    const uint64_t size = page->data_size ? page->data_size : kDataPages * pageSize();
    const uint8_t* data = map_ + (page->data_offset ? page->data_offset : pageSize());
    bool ok = true;
    uint64_t tail = tail_;
    while (tail + sizeof(perf_event_header) <= head) {
      perf_event_header h;
      copyOut(data, size, tail, &h, sizeof h);
      if (h.size < sizeof h || tail + h.size > head) break;
      if (h.type == PERF_RECORD_LOST) {
        ok = false;
      } else if (h.type == PERF_RECORD_SWITCH && h.size >= sizeof h + 16) {
        uint64_t t = 0;
        copyOut(data, size, tail + sizeof h + 8, &t, 8);  // after {pid, tid}
        apply((h.misc & PERF_RECORD_MISC_SWITCH_OUT) != 0,
              (h.misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) != 0, t);
      }
      tail += h.size;
    }
    tail_ = tail;
    __atomic_store_n(&page->data_tail, tail, __ATOMIC_RELEASE);
    return ok;
  }
  bool running() const { return on_cpu_ || runnable_; }
  bool onCpu() const { return on_cpu_ || unsure_; }
  // Runnable as the files said at the start, on a CPU or not: no switch applied since.
  bool unsure() const { return unsure_; }
  uint64_t switchesIn() const { return ins_; }
  // Off a CPU but runnable (ThreadStatFiles::resumed).
  void markRunnable() {
    if (!on_cpu_) runnable_ = true;
  }
  uint64_t cpuNs(uint64_t now_ns) const {
    return cpu_ns_ + (on_cpu_ && now_ns > since_ns_ ? now_ns - since_ns_ : 0);
  }
  // Whether the thread is off a CPU now, having been switched out since its count was last
  // taken from schedstat. Asked at each sample until a read matches (a switch in between the
  // ring's update and the read makes one miss), at most kResyncTries times per switch out:
  // a thread that stays asleep after a missed read would keep the ring's count for good.
  bool wantsResync() {
    if (!switched_out_ || on_cpu_) return false;
    if (++tries_ > kResyncTries) {
      switched_out_ = false;
      return false;
    }
    return true;
  }
  // The kernel's own count of the thread's CPU time and of the times it was switched in
  // (schedstat), read while it is off a CPU. Taken only when that count of switches matches
  // the switches in applied from the ring since the previous such read: a switch the ring
  // has not shown yet would otherwise be in the time and then be added again from the ring.
  // Taken whether it is above or below the ring's: the ring's intervals leave out the
  // kernel's work around each switch, and on a virtual machine they take in the time the
  // host ran something else (steal), which the kernel's count leaves out (a thread bursting
  // at 50 % read 3-7 % high where steal was a few %). The sampler reports only increases, so
  // a count set lower is made up by the samples that follow.
  // Where the counts differ, and the ring showed no switch in between its update before the
  // read (`ins`: the switches in applied then) and one after it, both counts start again from
  // this read: one switch in that only one of them counted would otherwise keep every later
  // read from matching for the rest of the recording, and the ring's shortfall would stay
  // (a thread of 0.1 ms bursts at 10 kHz ended 14 us a switch low, 16 % of its CPU time).
  void resync(uint64_t cpu_ns, uint64_t switched_in, uint64_t ins) {
    if (on_cpu_) return;
    const bool matches = have_base_ && switched_in - base_in_ == ins_ - base_ins_;
    if (matches) {
      cpu_ns_ = cpu_ns;
      switched_out_ = false;
    }
    if (matches || !have_base_ || ins == ins_) {
      have_base_ = true;
      base_in_ = switched_in;
      base_ins_ = ins_;
    }
  }

 private:
  static size_t pageSize() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }
  static void copyOut(const uint8_t* data, uint64_t size, uint64_t pos, void* dst, size_t n) {
    auto* d = static_cast<uint8_t*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = data[(pos + i) % size];
  }
  void skip() {
    auto* page = reinterpret_cast<perf_event_mmap_page*>(map_);
    tail_ = __atomic_load_n(&page->data_head, __ATOMIC_ACQUIRE);
    __atomic_store_n(&page->data_tail, tail_, __ATOMIC_RELEASE);
  }
  void apply(bool out, bool preempted, uint64_t t) {
    if (t < start_ns_) return;  // already in the state read from the files
    if (unsure_) {  // a switch out: it was on a CPU since the start; a switch in: waiting
      unsure_ = false;
      on_cpu_ = out;
    }
    if (out) {
      if (on_cpu_ && t > since_ns_) cpu_ns_ += t - since_ns_;
      on_cpu_ = false;
      runnable_ = preempted;
      switched_out_ = true;
      tries_ = 0;
    } else {
      on_cpu_ = true;
      runnable_ = true;
      ++ins_;
    }
    since_ns_ = t;
  }

  Fd fd_;
  uint8_t* map_ = nullptr;
  size_t len_ = 0;
  uint64_t tail_ = 0;
  bool on_cpu_ = false, runnable_ = false, switched_out_ = false, unsure_ = false;
  uint64_t since_ns_ = 0, start_ns_ = 0, cpu_ns_ = 0;
  static constexpr int kResyncTries = 8;
  int tries_ = 0;     // schedstat reads since the last switch out
  uint64_t ins_ = 0;  // switches in applied
  bool have_base_ = false;
  uint64_t base_in_ = 0, base_ins_ = 0;  // schedstat's and the ring's counts at the last match
};

ThreadStatFiles::ThreadStatFiles() = default;

ThreadStatFiles::ThreadStatFiles(pid_t pid, pid_t tid, bool switches)
    : stat_fd_(openProc(pid, tid, "stat")), schedstat_fd_(openProc(pid, tid, "schedstat")) {
  if (switches && open()) {
    ring_ = SwitchRing::open(tid);
    if (ring_) startRing();
  }
}

ThreadStatFiles::~ThreadStatFiles() = default;
ThreadStatFiles::ThreadStatFiles(ThreadStatFiles&& o) noexcept = default;
ThreadStatFiles& ThreadStatFiles::operator=(ThreadStatFiles&& o) noexcept = default;

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

uint64_t monotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t threadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

ThreadCpu ThreadStatFiles::startRing() {
  const uint64_t from_ns = ring_->begin();
  ThreadCpu c = read();
  if (c.ok && c.cpu_known)
    ring_->start(c.running, c.cpu_ns, from_ns);
  else
    ring_.reset();
  return c;
}

ThreadCpu ThreadStatFiles::read() {
  ThreadCpu out;
  if (stat_fd_.get() < 0) return out;
  ++stat_reads_;
  if (!statRunning(stat_fd_.get(), &out.running)) return out;
  out.ok = true;
  if (schedstat_fd_.get() >= 0) {
    char buf[128];
    ssize_t m = pread(schedstat_fd_.get(), buf, sizeof buf - 1, 0);
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

ThreadCpu ThreadStatFiles::sample(uint64_t now_ns) {
  if (ring_) {
    if (ring_->update()) {
      // Time between a switch in and out leaves out the kernel's own work around each switch
      // (about 10 us a burst here: a thread running 0.1 ms at a time showed 89 % of its CPU
      // time). A thread off the CPU that switched since the last sample has its exact count
      // in schedstat, which one read brings in; one that never switches costs nothing.
      if (ring_->wantsResync() && schedstat_fd_.get() >= 0) {
        const uint64_t ins = ring_->switchesIn();
        char buf[128];
        const ssize_t m = pread(schedstat_fd_.get(), buf, sizeof buf - 1, 0);
        uint64_t v[3];
        if (m > 0) {
          buf[m] = '\0';
          if (!ring_->update()) return startRing();  // switches were lost
          if (parseSchedstat(buf, v)) ring_->resync(v[0], v[2], ins);
        }
      }
      // A thread still as the files showed it, runnable, is read from them until its first
      // switch: its count grows there at each tick while it runs, and not while it waits.
      if (ring_->unsure()) return sampleFiles();
      ThreadCpu out;
      out.ok = out.cpu_known = true;
      out.running = ring_->running();
      out.cpu_ns = ring_->cpuNs(now_ns);
      return out;
    }
    return startRing();  // switches were lost: start again from the files
  }
  return sampleFiles();
}

bool ThreadStatFiles::runnableNow() {
  bool running = false;
  ++stat_reads_;
  return stat_fd_.get() >= 0 && statRunning(stat_fd_.get(), &running) && running;
}

uint64_t ThreadStatFiles::offCpuMark() {
  if (!ring_) return 0;
  if (!ring_->update()) {
    startRing();  // switches were lost: nothing can be told of this read
    return 0;
  }
  return ring_->onCpu() ? 0 : ring_->switchesIn() + 1;
}

bool ThreadStatFiles::stillOff(uint64_t mark) {
  if (!ring_ || !mark) return false;
  if (!ring_->update()) {
    startRing();
    return false;
  }
  return !ring_->onCpu() && ring_->switchesIn() + 1 == mark;
}

void ThreadStatFiles::resumed(bool was_running) {
  if (was_running && ring_ && ring_->update()) ring_->markRunnable();
}

ThreadCpu ThreadStatFiles::sampleFiles() {
  if (schedstat_fd_.get() < 0) return read();
  ThreadCpu out;
  char buf[128];
  ssize_t m = pread(schedstat_fd_.get(), buf, sizeof buf - 1, 0);
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
    out.ok = stat_fd_.get() >= 0 && statRunning(stat_fd_.get(), &out.running);
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
