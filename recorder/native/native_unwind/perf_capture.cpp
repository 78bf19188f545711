#include "recorder/native/native_unwind/perf_capture.hpp"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>

namespace psrec::recorder {

namespace {

// The user registers asked of the kernel (arch/x86/include/uapi/asm/perf_regs.h): ax, bx, cx,
// dx, si, di, bp, sp, ip (bits 0-8) and r8-r15 (bits 16-23); they come in bit order.
constexpr uint64_t kRegsMask = 0x1ffull | (0xffull << 16);
// Where each comes in the sample, as DWARF numbers (rax 0, rdx 1, rcx 2, rbx 3, ... rip 16).
constexpr int kDwarfOf[17] = {0, 3, 2, 1, 4, 5, 6, 7, kDwarfReturn,
                              8, 9, 10, 11, 12, 13, 14, 15};
// Ring buffer: 2^kPages data pages.
constexpr size_t kPages = 32;

long perfEventOpen(perf_event_attr* attr, pid_t pid) {
  return syscall(SYS_perf_event_open, attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

int switchTracepoint() {
  for (const char* path : {"/sys/kernel/tracing/events/sched/sched_switch/id",
                           "/sys/kernel/debug/tracing/events/sched/sched_switch/id"}) {
    std::ifstream in(path);
    int id = -1;
    if (in >> id) return id;
  }
  return -1;
}

void fill(perf_event_attr& a, uint32_t stack_bytes) {
  a.size = sizeof a;
  // (The identifier first in every sample: which of the thread's events took it.)
  a.sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TIME | PERF_SAMPLE_REGS_USER |
                  PERF_SAMPLE_STACK_USER;
  a.sample_regs_user = kRegsMask;
  a.sample_stack_user = stack_bytes;
  a.exclude_hv = 1;
  a.use_clockid = 1;
  a.clockid = CLOCK_MONOTONIC;
  // Read by polling at each pass: no wake-ups.
  a.watermark = 1;
  a.wakeup_watermark = 1u << 30;
}

}  // namespace

PerfThread::~PerfThread() { close(); }

void PerfThread::settle() {
  if (!period_ns_ || fd_ < 0) return;
  uint64_t period = period_ns_;
  ioctl(fd_, PERF_EVENT_IOC_PERIOD, &period);
  period_ns_ = 0;
}

void PerfThread::enable(bool on) {
  if (fd_ >= 0) ioctl(fd_, on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
}

int PerfThread::openClock(pid_t tid, uint64_t period_ns) {
  close();
  perf_event_attr clock{};
  clock.type = PERF_TYPE_SOFTWARE;
  clock.config = PERF_COUNT_SW_TASK_CLOCK;
  period_ns_ = period_ns ? period_ns : 1000000;
  clock.sample_period = std::min(period_ns_, kFirstPeriodNs);
  clock.size = sizeof clock;
  clock.sample_type = PERF_SAMPLE_TIME;
  clock.exclude_hv = 1;
  clock.use_clockid = 1;
  clock.clockid = CLOCK_MONOTONIC;
  const long fd = perfEventOpen(&clock, tid);
  if (fd < 0) return errno;
  fd_ = static_cast<int>(fd);
  return 0;
}

void PerfThread::close() {
  if (ring_) munmap(ring_ - (map_len_ - ring_len_), map_len_);
  ring_ = nullptr;
  if (switch_fd_ >= 0) ::close(switch_fd_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = switch_fd_ = -1;
  switch_id_ = UINT64_MAX;
}

int PerfThread::open(pid_t tid, uint64_t period_ns, uint32_t stack_bytes) {
  close();
  stack_bytes &= ~7u;
  perf_event_attr clock{};
  clock.type = PERF_TYPE_SOFTWARE;
  clock.config = PERF_COUNT_SW_TASK_CLOCK;
  period_ns_ = period_ns ? period_ns : 1000000;
  clock.sample_period = std::min(period_ns_, kFirstPeriodNs);
  fill(clock, stack_bytes);
  long fd = perfEventOpen(&clock, tid);
  if (fd < 0 && (errno == EACCES || errno == EPERM)) {
    // Without CAP_PERFMON, kernel.perf_event_paranoid 2 allows only events that leave the
    // kernel's own time out: a sample is then taken only when the thread is in user code,
    // which is all a user stack needs.
    clock.exclude_kernel = 1;
    fd = perfEventOpen(&clock, tid);
  }
  if (fd < 0) return errno;
  fd_ = static_cast<int>(fd);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  map_len_ = (1 + kPages) * page;
  void* m = mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (m == MAP_FAILED) {
    const int err = errno;
    close();
    return err;
  }
  ring_ = static_cast<uint8_t*>(m) + page;
  ring_len_ = kPages * page;
  // The switches happen in the kernel: events excluding it would never fire.
  const int tp = clock.exclude_kernel ? -1 : switchTracepoint();
  if (tp < 0) return 0;  // sampled on a CPU only: blocked threads are read from /proc
  perf_event_attr sw{};
  sw.type = PERF_TYPE_TRACEPOINT;
  sw.config = static_cast<uint64_t>(tp);
  sw.sample_period = 1;
  fill(sw, stack_bytes);
  const long sfd = perfEventOpen(&sw, tid);
  if (sfd >= 0) {
    switch_fd_ = static_cast<int>(sfd);
    // Every switch out, to wait or preempted: a thread kept off its CPU (a busy host) has
    // the stack of that moment until it runs again, which the task-clock event cannot see.
    if (ioctl(switch_fd_, PERF_EVENT_IOC_SET_OUTPUT, fd_) != 0 ||
        ioctl(switch_fd_, PERF_EVENT_IOC_ID, &switch_id_) != 0) {
      ::close(switch_fd_);
      switch_fd_ = -1;
      switch_id_ = UINT64_MAX;
    }
  }
  return 0;
}

bool PerfThread::latest(NativeSnapshot& out) {
  if (!ring_) return false;
  auto* meta = reinterpret_cast<perf_event_mmap_page*>(ring_ - (map_len_ - ring_len_));
  const uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = meta->data_tail;
  uint64_t last = 0;
  bool found = false;
  auto copy = [&](uint64_t at, void* dst, size_t len) {
    const size_t off = static_cast<size_t>(at % ring_len_);
    const size_t first = std::min(len, ring_len_ - off);
    std::memcpy(dst, ring_ + off, first);
    if (first < len) std::memcpy(static_cast<uint8_t*>(dst) + first, ring_, len - first);
  };
  while (tail + sizeof(perf_event_header) <= head) {
    perf_event_header h;
    copy(tail, &h, sizeof h);
    if (h.size < sizeof h || tail + h.size > head) break;
    if (h.type == PERF_RECORD_SAMPLE) {
      last = tail;
      found = true;
    } else if (h.type == PERF_RECORD_LOST) {
      ++lost_;
    }
    tail += h.size;
  }
  bool fresh = false;
  if (found) {
    perf_event_header h;
    copy(last, &h, sizeof h);
    record_.resize(h.size);
    copy(last, record_.data(), h.size);
    // identifier, time, abi, regs (if abi), stack size, stack bytes, dynamic size.
    const uint8_t* p = record_.data() + sizeof h;
    const uint8_t* end = record_.data() + record_.size();
    auto u64 = [&](uint64_t* v) {
      if (end - p < 8) return false;
      std::memcpy(v, p, 8);
      p += 8;
      return true;
    };
    uint64_t id = 0, time = 0, abi = 0;
    NativeSnapshot s;
    bool ok = u64(&id) && u64(&time) && u64(&abi) && abi != 0;
    s.switched_out = id == switch_id_;
    for (int i = 0; ok && i < 17; ++i) {
      uint64_t v;
      ok = u64(&v);
      if (ok) s.regs.set(kDwarfOf[i], v);
    }
    uint64_t size = 0;
    ok = ok && u64(&size) && static_cast<uint64_t>(end - p) >= size + (size ? 8 : 0);
    if (ok && time > out.time_ns) {
      uint64_t dyn = 0;
      std::memcpy(&dyn, p + size, size ? 8 : 0);
      s.time_ns = time;
      s.stack.assign(p, p + std::min(size, dyn));
      out = std::move(s);
      fresh = true;
    }
  }
  __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
  return fresh;
}

SyscallFile::~SyscallFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool SyscallFile::blockedRegisters(pid_t pid, pid_t tid, NativeRegisters& regs) {
  if (fd_ < 0) {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", static_cast<int>(pid),
                  static_cast<int>(tid));
    fd_ = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return false;
  }
  char buf[256];
  const ssize_t got = pread(fd_, buf, sizeof buf - 1, 0);
  if (got <= 0) return false;
  buf[got] = 0;
  if (std::strncmp(buf, "running", 7) == 0) return false;
  // "nr arg1 ... arg6 sp pc", or "-1 sp pc" when blocked outside a system call.
  unsigned long long v[9];
  int n = 0;
  const char* s = buf;
  char* end = nullptr;
  while (n < 9) {
    const unsigned long long x = std::strtoull(s, &end, 0);
    if (end == s) break;
    v[n++] = x;
    s = end;
  }
  if (n != 9 && n != 3) return false;
  regs = NativeRegisters();
  regs.set(kDwarfRsp, v[n - 2]);
  regs.set(kDwarfReturn, v[n - 1]);
  // In a system call its arguments are the registers that carry them, as they are while it
  // waits: a frame may keep its return address in one (vfork keeps it in rdi).
  if (n == 9) {
    static constexpr int kArgRegisters[6] = {5, 4, 1, 10, 8, 9};  // rdi rsi rdx r10 r8 r9
    for (int i = 0; i < 6; ++i) regs.set(kArgRegisters[i], v[1 + i]);
  }
  return v[n - 1] != 0;
}

namespace {

// Whether this process may open any perf event (CAP_PERFMON, or CAP_SYS_ADMIN before it).
bool perfmonCapable() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, 7, "CapEff:") != 0) continue;
    const unsigned long long caps = std::strtoull(line.c_str() + 7, nullptr, 16);
    return (caps >> 38 & 1) || (caps >> 21 & 1);
  }
  return false;
}

}  // namespace

std::string perfRefusal(int err) {
  switch (err) {
    case EACCES:
    case EPERM: {
      // Without CAP_PERFMON, paranoid 2 and less allow what psrec asks (events of the
      // thread's user time); above 2 nothing.
      int paranoid = 2;
      std::ifstream("/proc/sys/kernel/perf_event_paranoid") >> paranoid;
      if (paranoid > 2 && !perfmonCapable())
        return "perf events are not allowed: kernel.perf_event_paranoid is " +
               std::to_string(paranoid) +
               "; set it to 2 (sysctl kernel.perf_event_paranoid=2) or run psrec with "
               "CAP_PERFMON";
      return "perf_event_open is refused by a seccomp profile or security module (a "
             "container's default profile refuses it): allow perf_event_open, or give the "
             "container CAP_PERFMON (docker run --cap-add PERFMON)";
    }
    case ENOSYS:
    case ENOENT:
    case EOPNOTSUPP:
      return "this kernel has no perf events for user stacks";
    default:
      return std::string("perf_event_open failed: ") + std::strerror(err);
  }
}

}  // namespace psrec::recorder
