// One checked walk of a thread list (see thread_list.hpp).
#include "recorder/native/python/thread_list.hpp"

#include <algorithm>

namespace psrec::recorder {

void ThreadListWalk::begin(uint64_t interp, const PassHead& head) {
  interp_ = interp;
  list_unchanged_ = head.list_unchanged;
  tstate_ = first_ = head.threads_head;
  prev_ = 0;
  count_ = 0;
  restarts_ = 0;
  whole_ = true;
  check_met_ = !list_unchanged_;
  if (check_met_) forgetMet();
}

void ThreadListWalk::forgetMet() {
  if (met_count_) std::fill(met_.begin(), met_.end(), 0);
  met_count_ = 0;
}

bool ThreadListWalk::readChecked(ThreadHead& out, const StackHint* hint) {
  if (count_ >= kMaxThreadStates || pass_.readThread(tstate_, out, hint) != ReadStatus::kOk ||
      out.prev != prev_ || out.interp != interp_ || out.native_tid > kMaxKernelTid ||
      (check_met_ && met(tstate_)))
    return false;
  ++count_;
  prev_ = tstate_;
  tstate_ = out.next;
  return true;
}

// The end of the list, unless the walk met a state being made or reset (its links not set
// yet, or cleared: a short list that ends early). When the list changed since the last pass,
// the head and the last state's link are read again to confirm.
bool ThreadListWalk::endConfirmed() {
  return (list_unchanged_ && !restarts_) || !prev_ || pass_.listEnds(first_, prev_);
}

// Begins the walk again from the head, read now and without read-ahead; false (and the list
// not whole) once it has begun again too often.
bool ThreadListWalk::restart() {
  PassHead again;
  if (restarts_ >= kListRestarts || pass_.readPass(again, {}) != ReadStatus::kOk) {
    whole_ = false;
    return false;
  }
  ++restarts_;
  tstate_ = first_ = again.threads_head;
  prev_ = 0;
  count_ = 0;
  check_met_ = true;
  forgetMet();
  return true;
}

bool ThreadListWalk::met(uint64_t tstate) {
  if (2 * (met_count_ + 1) > met_.size()) {
    std::vector<uint64_t> old(std::max<size_t>(64, 2 * met_.size()), 0);
    old.swap(met_);
    met_count_ = 0;
    for (uint64_t a : old)
      if (a) met(a);
  }
  const size_t mask = met_.size() - 1;
  for (size_t i = (tstate >> 4) & mask;; i = (i + 1) & mask) {
    if (met_[i] == tstate) return true;
    if (!met_[i]) {
      met_[i] = tstate;
      ++met_count_;
      return false;
    }
  }
}

}  // namespace psrec::recorder
