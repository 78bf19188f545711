// Reads another process's memory: process_vm_readv, with /proc/PID/mem as the fallback where
// the former is unavailable (seccomp, old kernels). Nothing here throws on a failed read: the
// sampling loop must treat every read as fallible.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "recorder/native/cpython/layout.hpp"

namespace psrec::recorder {

enum class ReadStatus : uint8_t {
  kOk,
  kPartial,       // only part of the range was mapped
  kUnmapped,      // EFAULT/EIO: nothing there (freed, torn pointer)
  kNoProcess,     // ESRCH: the process is gone
  kPermission,    // EPERM/EACCES
  kOther,
};

struct ReadRequest {
  uint64_t addr;
  void* dst;
  size_t len;
};

class RemoteMemory {
 public:
  explicit RemoteMemory(pid_t pid);
  ~RemoteMemory();
  RemoteMemory(const RemoteMemory&) = delete;
  RemoteMemory& operator=(const RemoteMemory&) = delete;

  pid_t pid() const { return pid_; }

  // Reads exactly len bytes or fails.
  ReadStatus read(uint64_t addr, void* dst, size_t len);
  // Reads up to len bytes; returns how many were read (0 on failure, status in *status).
  size_t readSome(uint64_t addr, void* dst, size_t len, ReadStatus* status);
  // Several independent reads in one system call (at most 1024). kOk when all succeeded whole.
  ReadStatus readMany(const ReadRequest* reqs, size_t n);
  // Like readMany, but reports how many leading requests were read whole (a request that
  // fails ends the transfer; the kernel never splits one). Returns that count; *status is the
  // system call's error when it returned nothing.
  size_t readLeading(const ReadRequest* reqs, size_t n, ReadStatus* status);

  template <typename T>
  bool readValue(uint64_t addr, T& out) {
    return read(addr, &out, sizeof(T)) == ReadStatus::kOk;
  }

  // Writes len bytes into the process (process_vm_writev): only the frame cache's anchor, a
  // field CPython keeps for profilers to write (see FrameAnchor). kOk when all were written.
  ReadStatus write(uint64_t addr, const void* src, size_t len);

  uint64_t syscalls() const { return syscalls_; }

  // Probes whether the process can be read at all (classifies ESRCH / EPERM up front).
  ReadStatus probe(uint64_t addr);

 private:
  ReadStatus readProcMem(uint64_t addr, void* dst, size_t len, size_t* got);

  pid_t pid_;
  bool use_vm_readv_ = true;
  int mem_fd_ = -1;
  uint64_t syscalls_ = 0;
};

// Many reads planned together and made in as few system calls as the kernel allows (1024
// requests a call). Each request keeps the index add() gave it, and after run() ok(i) says
// whether it was read whole. A request that fails ends its transfer (the kernel never splits
// one): the plan skips it and reads on from the next, up to a number of times; a request
// added as required ends the run instead, as does a process that is gone or forbidden.
class ReadPlan {
 public:
  void clear() {
    reqs_.clear();
    required_.clear();
    is_view_.clear();
    views_ = 0;
  }
  size_t add(uint64_t addr, void* dst, size_t len, bool required = false) {
    ReadRequest& r = reqs_.emplace_back();  // in place, as TornChecks::noteKept
    r.addr = addr;
    r.dst = dst;
    r.len = len;
    required_.push_back(required);
    is_view_.push_back(0);
    return reqs_.size() - 1;
  }
  // A request whose bytes the plan keeps (view(i) after run(), until the next run): a plan
  // read in spans hands out its span's bytes, no copy made.
  size_t addView(uint64_t addr, size_t len) {
    ++views_;
    const size_t i = add(addr, nullptr, len);
    is_view_[i] = 1;
    return i;
  }
  size_t size() const { return reqs_.size(); }
  // True when every request was read whole; `skips`: failed requests read past at most.
  bool run(RemoteMemory& mem, int skips);
  bool ok(size_t i) const { return i < ok_.size() && ok_[i]; }
  const uint8_t* view(size_t i) const {
    return merged_run_ ? merged_.data() + offset_[i] : static_cast<const uint8_t*>(reqs_[i].dst);
  }
  // Why the first request that failed did (kOk when none did).
  ReadStatus status() const { return status_; }

 private:
  // A plan that reads nothing past a failure (skips 0), of requests lying close together (as
  // the frames of a deep stack do), read as one span per cluster; false when there is little
  // to merge or a span failed (run() then reads request by request, as without merging).
  bool runMerged(RemoteMemory& mem);

  std::vector<ReadRequest> reqs_;
  std::vector<uint8_t> required_;
  std::vector<uint8_t> ok_;
  ReadStatus status_ = ReadStatus::kOk;
  std::vector<uint32_t> order_;   // the requests by address
  std::vector<size_t> run_ends_;  // where each run of requests in address order ends
  std::vector<size_t> offset_;    // each request's place in merged_
  std::vector<ReadRequest> spans_;
  std::vector<uint8_t> merged_;
  bool merged_run_ = false;  // the last run read spans (views are in merged_)
  size_t views_ = 0;         // requests added with addView
  std::vector<uint8_t> is_view_;
  std::vector<uint8_t> own_;  // the views' bytes, when read request by request
};

// A copy of one of CPython's structs (S, a tag of cpython::st) taken out of the target once;
// fields are read with bounds checks, so a layout table that is wrong for a version yields
// zeros instead of reading out of the copy. Only S's own fields, and those of the structs it
// begins with, can be read from it: a thread state's field cannot be read from a frame's bytes
// (it does not compile). at() reads at an offset computed at run time.
template <class S>
class StructView {
 public:
  StructView() = default;
  StructView(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  template <typename T, class B>
  T get(cpython::Field<B> field) const {
    static_assert(std::is_base_of<B, S>::value, "a field of another struct");
    return at<T>(field.off);
  }
  template <class B>
  uint64_t ptr(cpython::Field<B> field) const {
    return get<uint64_t>(field);
  }
  template <typename T>
  T at(int64_t offset) const {
    T out{};
    if (offset < 0 || static_cast<uint64_t>(offset) + sizeof(T) > size_) return out;
    std::memcpy(&out, data_ + offset, sizeof(T));
    return out;
  }
  template <class B>
  bool has(cpython::Field<B> field, size_t n) const {
    static_assert(std::is_base_of<B, S>::value, "a field of another struct");
    return field.off >= 0 && static_cast<size_t>(field.off) + n <= size_;
  }
  size_t size() const { return size_; }
  const uint8_t* data() const { return data_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace psrec::recorder
