#include "recorder/native/remote_memory.hpp"

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

bool ReadPlan::run(RemoteMemory& mem, int skips) {
  const size_t n = reqs_.size();
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
