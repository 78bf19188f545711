// Per-thread timelines of samples in time order, run-length encoded by stack.
//
// The aggregated views sum samples by stack (Accumulator); a timeline view (speedscope's
// sampled profiles) needs each thread's samples in order instead. Consecutive selected samples
// of one thread with the same stack node merge into one run, so memory grows with the number
// of stack changes, not of samples.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "analyzer/native/accumulator.hpp"

namespace psrec::analyzer {

// A growing column of plain values kept in malloc'd memory: growing it is a realloc, which
// moves a large block by remapping its pages instead of copying them (a timeline's columns
// reach tens of megabytes, and std::vector would copy them at every doubling).
template <typename T>
class RunColumn {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  using value_type = T;
  RunColumn() = default;
  RunColumn(const RunColumn& o) { *this = o; }
  RunColumn(RunColumn&& o) noexcept { swap(o); }
  RunColumn& operator=(const RunColumn& o) {
    if (this != &o) {
      resize(o.size_);
      if (o.size_) std::memcpy(data_, o.data_, o.size_ * sizeof(T));
    }
    return *this;
  }
  RunColumn& operator=(RunColumn&& o) noexcept {
    swap(o);
    return *this;
  }
  ~RunColumn() { std::free(data_); }

  void push_back(T v) {
    // Small at first: a recording of many short-lived threads has as many timelines, most
    // of a run or two (256 values a column made 8 KiB a thread).
    if (size_ == cap_) reserve(cap_ ? cap_ * 2 : 4);
    data_[size_++] = v;
  }
  void reserve(size_t n) {
    if (n <= cap_) return;
    T* p = static_cast<T*>(std::realloc(data_, n * sizeof(T)));
    if (p == nullptr) throw std::bad_alloc();
    data_ = p;
    cap_ = n;
  }
  void resize(size_t n) {  // new values are left uninitialised
    reserve(n);
    size_ = n;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }

 private:
  void swap(RunColumn& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(cap_, o.cap_);
  }
  T* data_ = nullptr;
  size_t size_ = 0, cap_ = 0;
};

struct TimelineRuns {
  RunColumn<uint32_t> node;
  RunColumn<uint32_t> count;    // samples merged into the run
  RunColumn<uint64_t> weight;   // sum of their weights (ticks)
  RunColumn<uint64_t> cpu;      // sum of their CPU ticks
  RunColumn<int64_t> first_ts;  // timestamp of the run's first sample
  RunColumn<uint8_t> state;     // its samples' status bits under the query's split_mask
  size_t size() const { return node.size(); }
};

// Runs held elsewhere (another TimelineRuns, or columns owned by Python), read in place.
struct RunsView {
  const uint32_t* node;
  const uint32_t* count;
  const uint64_t* weight;
  const uint64_t* cpu;
  const int64_t* first_ts;
  size_t n;
  const uint8_t* state = nullptr;  // none: every run in the same state
  static RunsView of(const TimelineRuns& r) {
    return {r.node.data(), r.count.data(), r.weight.data(), r.cpu.data(), r.first_ts.data(),
            r.size(), r.state.data()};
  }
};

// Merges consecutive runs whose nodes map to the same value of canon (indexed by node; nodes
// past its end map to themselves), e.g. stacks that render alike when grouped by function.
// A merged run keeps its first node and first_ts and sums count, weight and cpu; runs in
// different states are not merged.
TimelineRuns mergeRuns(const RunsView& runs, const std::vector<uint32_t>& canon);
inline TimelineRuns mergeRuns(const TimelineRuns& runs, const std::vector<uint32_t>& canon) {
  return mergeRuns(RunsView::of(runs), canon);
}

class Timeline {
 public:
  // The query selects samples exactly as Accumulator does; slicing fields are ignored.
  explicit Timeline(AccumulatorQuery q) : q_(std::move(q)) {}
  void add(const SampleColumns& cols);
  // Thread refs that have at least one run, ascending.
  std::vector<uint32_t> threads() const;
  // Runs of one thread (empty when it has none).
  const TimelineRuns& runs(uint32_t ref) const;
  uint64_t selected() const { return selected_; }

 private:
  struct ThreadRuns {
    TimelineRuns runs;
    bool on_cpu = false;  // the thread's previous selected sample was on a CPU
    bool kept = false;    // and counted, in the last run
    bool gap = false;     // a sample was left out since the last run began (split_at_gaps)
  };
  AccumulatorQuery q_;
  RefTable<ThreadRuns> threads_;
  uint64_t selected_ = 0;
  static const TimelineRuns kEmpty;
};

}  // namespace psrec::analyzer
