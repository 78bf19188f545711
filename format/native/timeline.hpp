// Per-thread timelines of samples in time order, run-length encoded by stack.
//
// The aggregated views sum samples by stack (Accumulator); a timeline view (speedscope's
// sampled profiles) needs each thread's samples in order instead. Consecutive selected samples
// of one thread with the same stack node merge into one run, so memory grows with the number
// of stack changes, not of samples.
#pragma once

#include <cstdint>
#include <vector>

#include "format/native/decoder.hpp"

namespace psrec::format {

struct TimelineRuns {
  std::vector<uint32_t> node;
  std::vector<uint32_t> count;    // samples merged into the run
  std::vector<uint64_t> weight;   // sum of their weights (ticks)
  std::vector<uint64_t> cpu;      // sum of their CPU ticks
  std::vector<int64_t> first_ts;  // timestamp of the run's first sample
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
  static RunsView of(const TimelineRuns& r) {
    return {r.node.data(), r.count.data(), r.weight.data(), r.cpu.data(), r.first_ts.data(),
            r.size()};
  }
};

// Merges consecutive runs whose nodes map to the same value of canon (indexed by node; nodes
// past its end map to themselves), e.g. stacks that render alike when grouped by function.
// A merged run keeps its first node and first_ts and sums count, weight and cpu.
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
  AccumulatorQuery q_;
  std::vector<TimelineRuns> runs_;  // by thread ref
  uint64_t selected_ = 0;
  static const TimelineRuns kEmpty;
};

}  // namespace psrec::format
