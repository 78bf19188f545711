// The pass reader (see pass_reader.hpp), its single reads: the GIL, the pass head, the list
// checks (listEnds, linked) and the kernel thread id of 3.8-3.10 threads. The planned batch
// of a pass is in pass_plan.cpp.
#include "recorder/native/python/pass_reader.hpp"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <utility>

namespace psrec::recorder {

using cpython::FrameModel;
using cpython::kAbsent;
namespace st = cpython::st;

namespace {

std::set<int32_t> taskIds(pid_t pid) {
  std::set<int32_t> out;
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] >= '0' && e->d_name[0] <= '9') out.insert(std::atoi(e->d_name));
    }
    closedir(d);
  }
  return out;
}

}  // namespace


PassReader::PassReader(PythonProcess& proc, ReadAhead& ahead)
    : proc_(proc), l_(proc.layout()), ahead_(ahead) {
  const uint64_t runtime = proc.info().runtime_addr;
  if (l_.runtime_gil_locked != kAbsent) {
    // 3.8-3.11: one GIL in _PyRuntime.ceval.gil.
    gil_addr_ = runtime;
    gil_lo_ = std::min(l_.runtime_gil_locked, l_.runtime_gil_last_holder);
    gil_hi_ = std::max(l_.runtime_gil_locked, l_.runtime_gil_last_holder) + 8;
  } else {
    resolveGil();
  }
}

// 3.12+: interp->ceval.gil points at the GIL this interpreter uses. It is null until the
// interpreter has created its GIL, which a launched target may not have done when psrec
// attaches, so the pass reads call this again until it is set; once set it does not change.
// Not read at all where each thread state says whether it holds the GIL (3.14+), or where a
// thread's status is whether it is attached (free-threaded): one range fewer in every pass.
void PassReader::resolveGil() {
  if (gil_addr_ || l_.interp_ceval_gil == kAbsent || l_.tstate_holds_gil != kAbsent ||
      l_.free_threaded)
    return;
  uint64_t interp = proc_.mainInterpreter();
  uint64_t gil = 0;
  if (interp &&
      proc_.mem().readValue(interp + static_cast<uint64_t>(l_.interp_ceval_gil), gil) && gil) {
    gil_addr_ = gil;
    gil_lo_ = std::min(l_.gil_locked, l_.gil_last_holder);
    gil_hi_ = std::max(l_.gil_locked, l_.gil_last_holder) + 8;
  }
}

GilStatus PassReader::gilStatus(const ThreadHead& t, const PassHead& ph) const {
  GilStatus g;
  if (l_.free_threaded) {
    // No GIL (or one re-enabled at run time, which an attached thread then holds): a thread
    // is "attached" while it may run Python code, as a GIL holder is (pycore_pystate.h).
    g.known = t.state >= 0;
    g.held = t.state == 1;  // _Py_THREAD_ATTACHED
  } else if (t.holds_gil >= 0) {
    g.known = true;
    g.held = t.holds_gil != 0;
    g.requested_known = t.gil_requested >= 0;
    g.requested = t.gil_requested > 0;
  } else if (ph.gil_known) {
    g.known = true;
    g.held = ph.gil_locked && ph.gil_holder == t.tstate;
  }
  return g;
}

// The GIL's state from the bytes [gil_lo_, gil_hi_) of its struct; gil is null when unread.
void PassReader::parseGil(const uint8_t* gil, size_t gil_len, PassHead& out) const {
  out.gil_known = gil != nullptr;
  if (!gil) return;
  int32_t locked_off = (l_.runtime_gil_locked != kAbsent ? l_.runtime_gil_locked : l_.gil_locked);
  int32_t holder_off =
      (l_.runtime_gil_locked != kAbsent ? l_.runtime_gil_last_holder : l_.gil_last_holder);
  StructView<st::Gil> v(gil, gil_len);
  out.gil_locked = v.at<int32_t>(locked_off - gil_lo_) != 0;
  out.gil_holder = v.at<uint64_t>(holder_off - gil_lo_);
}

bool PassReader::listEnds(uint64_t first, uint64_t last) {
  uint64_t head = 0, next = 0;
  ReadRequest reqs[2] = {
      {proc_.mainInterpreter() + static_cast<uint64_t>(l_.interp_threads_head), &head, 8},
      {last + static_cast<uint64_t>(l_.tstate_next), &next, 8}};
  return proc_.mem().readMany(reqs, 2) == ReadStatus::kOk && head == first && next == 0;
}

bool PassReader::linked(uint64_t tstate) {
  // Its neighbour may come or go between the two reads: a state that stays in the list
  // shows a consistent pair within a few tries, one that left it never does (CPython leaves
  // an unlinked state's own links as they were, or the allocator overwrites them).
  for (int attempt = 0; attempt < 4; ++attempt) {
    uint64_t prev = 0, link = 0;
    if (proc_.mem().read(tstate + static_cast<uint64_t>(l_.tstate_prev), &prev, 8) !=
        ReadStatus::kOk)
      return false;
    const uint64_t at =
        prev ? prev + static_cast<uint64_t>(l_.tstate_next)
             : proc_.mainInterpreter() + static_cast<uint64_t>(l_.interp_threads_head);
    if (proc_.mem().read(at, &link, 8) == ReadStatus::kOk && link == tstate) return true;
  }
  return false;
}

ReadStatus PassReader::readPassHead(PassHead& out) {
  uint64_t interp = proc_.mainInterpreter();
  if (!interp) return ReadStatus::kUnmapped;
  resolveGil();
  uint8_t gil[64];
  ReadRequest reqs[2];
  size_t n = 0;
  reqs[n++] = {interp + static_cast<uint64_t>(l_.interp_threads_head), &out.threads_head, 8};
  size_t gil_len = static_cast<size_t>(gil_hi_ - gil_lo_);
  bool with_gil = gil_addr_ && gil_len <= sizeof gil;
  if (with_gil) reqs[n++] = {gil_addr_ + static_cast<uint64_t>(gil_lo_), gil, gil_len};
  ReadStatus st = proc_.mem().readMany(reqs, n);
  if (st != ReadStatus::kOk) return st;
  parseGil(with_gil ? gil : nullptr, gil_len, out);
  return ReadStatus::kOk;
}

bool PassReader::calibratePthreadTid(uint64_t thread_id) {
  // glibc keeps the kernel thread id in struct pthread (pthread_t points at it); its offset
  // depends on the glibc build. Find the int32 equal to one of the process's task ids,
  // preferring the offset current x86-64 glibc uses. A thread that has ended has none (the
  // kernel clears it): then the next thread read tries again.
  pthread_calibrated_ = ++pthread_tries_ >= kPthreadTries;
  std::set<int32_t> tids = taskIds(proc_.pid());
  uint8_t buf[2048];
  if (proc_.mem().read(thread_id, buf, sizeof buf) != ReadStatus::kOk) return false;
  std::vector<int32_t> hits;
  for (size_t off = 0; off + 4 <= sizeof buf; off += 4) {
    int32_t v;
    std::memcpy(&v, buf + off, 4);
    if (v > 0 && tids.count(v)) hits.push_back(static_cast<int32_t>(off));
  }
  if (hits.empty()) return false;
  pthread_calibrated_ = true;
  pthread_tid_offset_ = std::find(hits.begin(), hits.end(), 0x2d0) != hits.end() ? 0x2d0 : hits[0];
  return true;
}

}  // namespace psrec::recorder
