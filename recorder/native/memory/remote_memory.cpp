#include "recorder/native/memory/remote_memory.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>

namespace psrec::recorder {

namespace {

ReadStatus classify(int err) {
  switch (err) {
    case EFAULT:
    case EIO:
    case EINVAL:
      return ReadStatus::kUnmapped;
    case ESRCH:
      return ReadStatus::kNoProcess;
    case EPERM:
    case EACCES:
      return ReadStatus::kPermission;
    default:
      return ReadStatus::kOther;
  }
}

}  // namespace

RemoteMemory::RemoteMemory(pid_t pid) : pid_(pid) {}

RemoteMemory::~RemoteMemory() {
  if (mem_fd_ >= 0) close(mem_fd_);
}

ReadStatus RemoteMemory::readProcMem(uint64_t addr, void* dst, size_t len, size_t* got) {
  *got = 0;
  if (mem_fd_ < 0) {
    std::string path = "/proc/" + std::to_string(pid_) + "/mem";
    mem_fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (mem_fd_ < 0) return errno == ENOENT ? ReadStatus::kNoProcess : classify(errno);
  }
  ++syscalls_;
  ssize_t n = pread(mem_fd_, dst, len, static_cast<off_t>(addr));
  if (n < 0) return classify(errno);
  *got = static_cast<size_t>(n);
  if (n == 0) return ReadStatus::kNoProcess;  // an exited process reads as empty
  return *got == len ? ReadStatus::kOk : ReadStatus::kPartial;
}

size_t RemoteMemory::readSome(uint64_t addr, void* dst, size_t len, ReadStatus* status) {
  if (len == 0) {
    *status = ReadStatus::kOk;
    return 0;
  }
  if (addr == 0) {
    *status = ReadStatus::kUnmapped;
    return 0;
  }
  if (use_vm_readv_) {
    struct iovec local = {dst, len};
    struct iovec remote = {reinterpret_cast<void*>(addr), len};
    ++syscalls_;
    ssize_t n = process_vm_readv(pid_, &local, 1, &remote, 1, 0);
    if (n >= 0) {
      *status = static_cast<size_t>(n) == len ? ReadStatus::kOk : ReadStatus::kPartial;
      return static_cast<size_t>(n);
    }
    if (errno == ENOSYS) {
      use_vm_readv_ = false;  // kernel without it: use /proc/PID/mem from now on
    } else {
      *status = classify(errno);
      return 0;
    }
  }
  size_t got = 0;
  *status = readProcMem(addr, dst, len, &got);
  return got;
}

ReadStatus RemoteMemory::read(uint64_t addr, void* dst, size_t len) {
  ReadStatus st;
  readSome(addr, dst, len, &st);
  return st == ReadStatus::kPartial ? ReadStatus::kUnmapped : st;
}

ReadStatus RemoteMemory::write(uint64_t addr, const void* src, size_t len) {
  if (addr == 0) return ReadStatus::kUnmapped;
  struct iovec local = {const_cast<void*>(src), len};
  struct iovec remote = {reinterpret_cast<void*>(addr), len};
  ++syscalls_;
  const ssize_t put = process_vm_writev(pid_, &local, 1, &remote, 1, 0);
  if (put == static_cast<ssize_t>(len)) return ReadStatus::kOk;
  return put >= 0 ? ReadStatus::kPartial : classify(errno);
}

ReadStatus RemoteMemory::readMany(const ReadRequest* reqs, size_t n) {
  if (n == 0) return ReadStatus::kOk;
  if (!use_vm_readv_ || n > 1024) {
    for (size_t i = 0; i < n; ++i) {
      ReadStatus st = read(reqs[i].addr, reqs[i].dst, reqs[i].len);
      if (st != ReadStatus::kOk) return st;
    }
    return ReadStatus::kOk;
  }
  struct iovec local[1024];
  struct iovec remote[1024];
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    if (reqs[i].addr == 0) return ReadStatus::kUnmapped;
    local[i] = {reqs[i].dst, reqs[i].len};
    remote[i] = {reinterpret_cast<void*>(reqs[i].addr), reqs[i].len};
    total += reqs[i].len;
  }
  ++syscalls_;
  ssize_t got = process_vm_readv(pid_, local, n, remote, n, 0);
  if (got < 0) {
    if (errno == ENOSYS) {
      use_vm_readv_ = false;
      return readMany(reqs, n);
    }
    return classify(errno);
  }
  return static_cast<size_t>(got) == total ? ReadStatus::kOk : ReadStatus::kUnmapped;
}

size_t RemoteMemory::readLeading(const ReadRequest* reqs, size_t n, ReadStatus* status) {
  *status = ReadStatus::kOk;
  if (n == 0) return 0;
  if (!use_vm_readv_ || n > 1024) {
    for (size_t i = 0; i < n; ++i) {
      ReadStatus st = read(reqs[i].addr, reqs[i].dst, reqs[i].len);
      if (st != ReadStatus::kOk) {
        *status = st;
        return i;
      }
    }
    return n;
  }
  struct iovec local[1024];
  struct iovec remote[1024];
  for (size_t i = 0; i < n; ++i) {
    local[i] = {reqs[i].dst, reqs[i].len};
    remote[i] = {reinterpret_cast<void*>(reqs[i].addr), reqs[i].len};
  }
  ++syscalls_;
  ssize_t got = process_vm_readv(pid_, local, n, remote, n, 0);
  if (got < 0) {
    if (errno == ENOSYS) {
      use_vm_readv_ = false;
      return readLeading(reqs, n, status);
    }
    *status = classify(errno);
    return 0;
  }
  size_t whole = 0, sum = 0;
  while (whole < n && sum + reqs[whole].len <= static_cast<size_t>(got)) sum += reqs[whole++].len;
  if (whole < n) *status = ReadStatus::kUnmapped;
  return whole;
}

namespace {

// Plans of fewer requests are read as they are.
constexpr size_t kMergeFrom = 8;
// Requests less than a page apart are read as one span: no page lies between them that could
// be unmapped (each end's page holds a request), so the span reads whenever they do.
constexpr uint64_t kMergeGap = 4095;
// Plans of more runs in address order than this are sorted.
constexpr size_t kMergeRuns = 8;
// A merged plan copies no more than this.
constexpr size_t kMergeMaxBytes = size_t{8} << 20;

}  // namespace

bool ReadPlan::runMerged(RemoteMemory& mem) {
  const size_t n = reqs_.size();
  order_.resize(n);
  bool sorted = true;
  for (size_t i = 0; i < n; ++i) {
    if (!reqs_[i].addr || reqs_[i].addr + reqs_[i].len < reqs_[i].addr) return false;
    order_[i] = static_cast<uint32_t>(i);
    sorted = sorted && (i == 0 || reqs_[i - 1].addr <= reqs_[i].addr);
  }
  if (!sorted) {
    // Plans are mostly a few runs in address order, rising or falling (a field or two, then
    // a stack's frames from the innermost): each falling run turned round, then each run
    // merged into those before it; sorted whole when there are many runs.
    const auto by_addr = [this](uint32_t a, uint32_t b) { return reqs_[a].addr < reqs_[b].addr; };
    const auto at = [this](size_t i) { return reqs_[i].addr; };
    run_ends_.clear();
    for (size_t from = 0; from < n && run_ends_.size() <= kMergeRuns;) {
      size_t to = from + 1;
      if (to < n && at(to) < at(from)) {
        while (to < n && at(to) <= at(to - 1)) ++to;
        std::reverse(order_.begin() + static_cast<ptrdiff_t>(from),
                     order_.begin() + static_cast<ptrdiff_t>(to));
      } else {
        while (to < n && at(to) >= at(to - 1)) ++to;
      }
      run_ends_.push_back(to);
      from = to;
    }
    if (run_ends_.size() > kMergeRuns) {
      for (size_t i = 0; i < n; ++i) order_[i] = static_cast<uint32_t>(i);
      std::sort(order_.begin(), order_.end(), by_addr);
    } else {
      for (size_t k = 1; k < run_ends_.size(); ++k)
        std::inplace_merge(order_.begin(), order_.begin() + static_cast<ptrdiff_t>(run_ends_[k - 1]),
                           order_.begin() + static_cast<ptrdiff_t>(run_ends_[k]), by_addr);
    }
  }
  spans_.clear();
  offset_.resize(n);
  size_t total = 0;  // bytes of the spans closed
  uint64_t lo = 0, hi = 0;
  for (const uint32_t i : order_) {
    const ReadRequest& r = reqs_[i];
    if (spans_.empty() || r.addr > hi + kMergeGap) {
      if (!spans_.empty()) total += spans_.back().len = static_cast<size_t>(hi - lo);
      lo = r.addr;
      hi = r.addr;
      spans_.push_back({lo, nullptr, 0});
    }
    offset_[i] = total + static_cast<size_t>(r.addr - lo);
    hi = std::max<uint64_t>(hi, r.addr + r.len);
    if (total + (hi - lo) > kMergeMaxBytes) return false;
  }
  total += spans_.back().len = static_cast<size_t>(hi - lo);
  if (spans_.size() * 2 > n) return false;  // little to merge
  merged_.resize(total);
  size_t at = 0;
  for (ReadRequest& span : spans_) {
    span.dst = merged_.data() + at;
    at += span.len;
  }
  for (size_t k = 0; k < spans_.size(); k += 1024) {
    const size_t m = std::min<size_t>(spans_.size() - k, 1024);
    ReadStatus st = ReadStatus::kOk;
    if (mem.readLeading(spans_.data() + k, m, &st) != m) return false;
  }
  for (size_t i = 0; i < n; ++i)
    if (!is_view_[i]) std::memcpy(reqs_[i].dst, merged_.data() + offset_[i], reqs_[i].len);
  merged_run_ = true;
  ok_.assign(n, 1);
  status_ = ReadStatus::kOk;
  return true;
}

bool ReadPlan::run(RemoteMemory& mem, int skips) {
  const size_t n = reqs_.size();
  merged_run_ = false;
  if (skips == 0 && n >= kMergeFrom && runMerged(mem)) return true;
  if (views_) {
    // Read request by request: each view's bytes in own_.
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) total += is_view_[i] ? reqs_[i].len : 0;
    own_.resize(total);
    size_t at = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!is_view_[i]) continue;
      reqs_[i].dst = own_.data() + at;
      at += reqs_[i].len;
    }
  }
  ok_.assign(n, 0);
  status_ = ReadStatus::kOk;
  size_t at = 0;
  while (at < n) {
    const size_t m = std::min<size_t>(n - at, 1024);
    // A null address (a torn pointer) fails without a call.
    size_t valid = 0;
    while (valid < m && reqs_[at + valid].addr) ++valid;
    ReadStatus st = ReadStatus::kUnmapped;
    const size_t got = valid ? mem.readLeading(reqs_.data() + at, valid, &st) : 0;
    std::fill(ok_.begin() + static_cast<ptrdiff_t>(at),
              ok_.begin() + static_cast<ptrdiff_t>(at + got), 1);
    at += got;
    if (got == m) continue;
    if (status_ == ReadStatus::kOk) status_ = st == ReadStatus::kOk ? ReadStatus::kUnmapped : st;
    if (required_[at] || skips-- <= 0 || st == ReadStatus::kNoProcess ||
        st == ReadStatus::kPermission)
      return false;
    ++at;  // skip the request that failed
  }
  return status_ == ReadStatus::kOk;
}

ReadStatus RemoteMemory::probe(uint64_t addr) {
  uint8_t b;
  return read(addr, &b, 1);
}

}  // namespace psrec::recorder
