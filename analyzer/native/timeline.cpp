#include "analyzer/native/timeline.hpp"

#include <algorithm>

namespace psrec::analyzer {

const TimelineRuns Timeline::kEmpty{};

void Timeline::add(const SampleColumns& c) {
  const size_t n = c.size();
  for (size_t i = 0; i < n; ++i) {
    const int64_t ts = c.ts[i];
    const uint32_t th = c.thread[i];
    ThreadRuns& tr = threads_[th];
    TimelineRuns& r = tr.runs;
    const auto f = q_.fate(ts, th, c.task[i], c.status[i], c.cpu[i], tr.on_cpu);
    const bool previous_kept = tr.kept && r.size() != 0;
    tr.on_cpu = f.selected && AccumulatorQuery::onCpu(c.status[i]);
    tr.kept = false;
    if (f.cpu == AccumulatorQuery::Cpu::kPrevious && previous_kept) r.cpu.back() += c.cpu[i];
    if (!f.counted && f.cpu != AccumulatorQuery::Cpu::kOwn) {
      tr.gap = q_.split_at_gaps;
      continue;
    }
    const bool counted = f.counted;  // else its CPU time only
    const uint32_t cpu = f.cpu == AccumulatorQuery::Cpu::kOwn ? c.cpu[i] : 0;
    const uint32_t node = c.node[i];
    const uint8_t state = c.status[i] & q_.split_mask;
    if (r.size() == 0 || r.node.back() != node || r.count.back() == UINT32_MAX || tr.gap ||
        r.state.back() != state) {
      tr.gap = false;
      r.node.push_back(node);
      r.state.push_back(state);
      r.count.push_back(counted ? 1 : 0);
      r.weight.push_back(counted ? c.weight[i] : 0);
      r.cpu.push_back(cpu);
      r.first_ts.push_back(ts);
    } else {
      r.count.back() += counted ? 1 : 0;
      r.weight.back() += counted ? c.weight[i] : 0;
      r.cpu.back() += cpu;
    }
    tr.kept = counted;
    if (counted) ++selected_;
  }
}

std::vector<uint32_t> Timeline::threads() const {
  std::vector<uint32_t> out;
  threads_.forEach([&](uint32_t ref, const ThreadRuns& tr) {
    if (tr.runs.size()) out.push_back(ref);
  });
  std::sort(out.begin(), out.end());
  return out;
}

const TimelineRuns& Timeline::runs(uint32_t ref) const {
  const ThreadRuns* tr = threads_.find(ref);
  return tr != nullptr ? tr->runs : kEmpty;
}

TimelineRuns mergeRuns(const RunsView& r, const std::vector<uint32_t>& canon) {
  TimelineRuns out;
  uint32_t prev = 0;
  for (size_t i = 0; i < r.n; ++i) {
    const uint32_t node = r.node[i];
    const uint32_t c = node < canon.size() ? canon[node] : node;
    const uint8_t state = r.state != nullptr ? r.state[i] : 0;
    if (out.size() != 0 && c == prev && out.state.back() == state &&
        static_cast<uint64_t>(out.count.back()) + r.count[i] <= UINT32_MAX) {
      out.count.back() += r.count[i];
      out.weight.back() += r.weight[i];
      out.cpu.back() += r.cpu[i];
      continue;
    }
    out.node.push_back(node);
    out.count.push_back(r.count[i]);
    out.weight.push_back(r.weight[i]);
    out.cpu.push_back(r.cpu[i]);
    out.first_ts.push_back(r.first_ts[i]);
    out.state.push_back(state);
    prev = c;
  }
  return out;
}

}  // namespace psrec::analyzer
