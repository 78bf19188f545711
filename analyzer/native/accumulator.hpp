// The aggregated views' engine: decoded samples summed by (time slice, thread, stack node).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "format/native/constants.hpp"
#include "format/native/decoder.hpp"

namespace psrec::analyzer {

using format::kMaxThreadRef;
using format::kStatusCpuUnknown;
using format::kStatusGilHeld;
using format::kStatusOnCpu;
using format::RefTable;
using format::SampleColumns;

// Sums samples by (slice, thread, stack node), after a time window, thread and status filter.
// Slices are numbered from slice_origin in 64 bits: a recording's timestamps span up to 2^63
// ticks, and a 32-bit slice index wrapped (slice 2^32 + 5 was shown as slice 5).
struct AccumulatorQuery {
  int64_t from_ts = INT64_MIN;  // inclusive
  int64_t to_ts = INT64_MAX;    // exclusive
  std::vector<uint8_t> threads;  // by ref; empty = all threads
  uint8_t status_mask = 0;       // keep samples where (status & mask) == value
  uint8_t status_value = 0;
  int64_t slice_origin = 0;
  int64_t slice_ticks = 0;  // 0: no slicing
  // The CPU view: a sample that the status filter drops (off a CPU) but that carries CPU time
  // still brings that time in, so that every nanosecond the recorder saw a thread use lands
  // on a sample of it (spec/psr-format.md, section 5).
  bool cpu_view = false;
  // Timelines only: a sample of a thread that the filter leaves out ends the thread's run, so
  // that runs of the samples kept never span time the thread spent otherwise (for intervals
  // such as "holding the GIL"); without it, runs join across what was left out.
  bool split_at_gaps = false;
  // Timelines only: a run also ends where the status bits under this mask change, and each run
  // keeps those bits of its samples (its state): runs then say, for example, whether their
  // samples were on a CPU (ON_CPU | CPU_UNKNOWN), at no cost when the mask is 0.
  uint8_t split_mask = 0;
  // Accumulators only: false sums by (slice, thread), every stack together (node 0), for
  // per-thread states over time at a cost that does not grow with stacks.
  bool by_node = true;

  // asyncio tasks (the sample's TASK id): with select_tasks, only samples running one of
  // `tasks` (sorted), a sample of a thread running none of them being outside the view as a
  // sample of another thread is.
  bool select_tasks = false;
  std::vector<uint32_t> tasks;
  void selectTasks(std::vector<uint32_t> ids) {
    select_tasks = true;
    std::sort(ids.begin(), ids.end());
    tasks = std::move(ids);
  }
  bool taskSelected(uint32_t task) const {
    return !select_tasks || std::binary_search(tasks.begin(), tasks.end(), task);
  }

  // Keeps only these thread refs (an empty list keeps none). Refs beyond kMaxThreadRef have
  // no samples, and are left out rather than allocated for.
  void selectThreads(const std::vector<uint32_t>& refs) {
    uint32_t top = 0;
    for (uint32_t t : refs)
      if (t <= kMaxThreadRef) top = std::max(top, t);
    threads.assign(static_cast<size_t>(top) + 1, 0);
    for (uint32_t t : refs)
      if (t <= kMaxThreadRef) threads[t] = 1;
  }
  // Where the CPU time a sample carries goes: nowhere in this view, to the sample's own stack,
  // or to the thread's previous sample (where this view kept it).
  enum class Cpu : uint8_t { kNone, kOwn, kPrevious };
  struct Fate {
    bool selected;  // in the window and the threads: it is the thread's next previous sample
    bool counted;   // the status filter keeps it as a sample
    Cpu cpu;
  };
  static bool onCpu(uint8_t status) {
    return (status & (kStatusOnCpu | kStatusCpuUnknown)) == kStatusOnCpu;
  }
  // What becomes of a sample: the window, thread and status filter, and where its CPU time
  // goes. That time ran between the thread's previous sample and this one. One rule for every
  // view and output (spec/psr-format.md, section 5): it goes to the previous sample when this
  // one is off a CPU and that one was on a CPU (the thread ran on in what it showed, then went
  // off the CPU), else to this sample. A view keeps the time where it keeps the sample the
  // time goes to; the CPU view also keeps the time of a sample it does not count (off a CPU
  // after a sample off a CPU: the time ran in code no sample caught; or its CPU state unknown)
  // on that sample's stack, so that every CPU tick of a selected thread lands on a sample.
  // previous_on_cpu: the thread's previous selected sample was known to be on a CPU.
  Fate fate(int64_t ts, uint32_t thread, uint32_t task, uint8_t status, uint32_t cpu,
            bool previous_on_cpu) const {
    if (ts < from_ts || ts >= to_ts) return {false, false, Cpu::kNone};
    if (!threads.empty() && (thread >= threads.size() || !threads[thread]))
      return {false, false, Cpu::kNone};
    if (!taskSelected(task)) return {false, false, Cpu::kNone};
    const bool counted = (status & status_mask) == status_value;
    const bool off_cpu = (status & (kStatusOnCpu | kStatusCpuUnknown)) == 0;
    if (cpu != 0 && off_cpu && previous_on_cpu) return {true, counted, Cpu::kPrevious};
    if (counted) return {true, true, Cpu::kOwn};
    if (cpu_view && cpu != 0) return {true, false, Cpu::kOwn};
    return {true, false, Cpu::kNone};
  }
};

struct AccumulatorCell {
  uint64_t count = 0;
  uint64_t weight = 0;
  uint64_t cpu = 0;
  uint64_t gil = 0;     // samples holding the GIL
  uint64_t on_cpu = 0;  // samples on a CPU
};

// The cells as columns, in the order cells() gives them: what the engine's walks read and
// what Python sees of them (read-only views, no copy).
struct CellColumns {
  std::vector<uint64_t> slice;  // 64-bit: sliceBase() + the key's slice
  std::vector<uint32_t> thread, node;
  std::vector<uint64_t> count, weight, cpu, gil, on_cpu;
};

class Accumulator {
 public:
  explicit Accumulator(AccumulatorQuery q) : q_(std::move(q)) {}
  void add(const SampleColumns& cols);
  // slice: the slice index relative to sliceBase(), so that the key stays 12 bytes (the
  // accumulator's hot loop compares and copies one per sample).
  struct Key {
    uint32_t slice, thread, node;
    bool operator==(const Key& o) const {
      return slice == o.slice && thread == o.thread && node == o.node;
    }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      uint64_t h = (static_cast<uint64_t>(k.node) << 32) ^ (static_cast<uint64_t>(k.thread) << 20) ^ k.slice;
      return static_cast<size_t>(h * 0x9E3779B97F4A7C15ULL >> 7);
    }
  };
  using CellList = std::vector<std::pair<Key, AccumulatorCell>>;
  // Every (slice, thread, node) once, in order of first appearance.
  const CellList& cells() const;
  // The same as columns, built once after the last add().
  const CellColumns& columns() const;
  // Slice indices are 64-bit (from slice_origin): a key's slice is relative to this base,
  // set from the first sample so that 2^31 slices either side of it fit.
  uint64_t sliceBase() const { return slice_base_; }
  // Whether a sample fell more than 2^31 slices from the first (its slice index was clamped):
  // a view of more slices than that is refused anyway.
  bool sliceOverflow() const { return slice_overflow_; }
  uint64_t selected() const { return selected_; }
  int64_t firstTs() const { return first_; }
  int64_t lastTs() const { return last_ts_; }

 private:
  // The cells of the slice being summed are found through an open-addressing table keyed by
  // (thread, node). Samples come in time order, so when the slice changes the table is emptied
  // at once by moving to a new generation: a slot of an older one counts as free. A slice seen
  // again later (samples out of order) gets cells of its own, merged by cells().
  struct Slot {
    uint64_t key = 0;  // thread << 32 | node
    uint32_t gen = 0;
    uint32_t cell = 0;
  };
  struct LastCell {
    Key key{0, 0, 0};
    uint32_t cell = UINT32_MAX;
    bool on_cpu = false;  // the thread's previous selected sample was on a CPU
    bool kept = false;    // and counted here, in `cell`
  };
  uint32_t cellFor(const Key& k);
  uint32_t sliceOf(int64_t ts);
  void grow();
  void newGeneration() const;
  AccumulatorQuery q_;
  mutable CellList cells_;
  mutable CellColumns columns_;
  mutable bool columns_built_ = false;
  mutable std::vector<Slot> table_;
  mutable uint32_t gen_ = 1;
  mutable size_t used_ = 0;  // slots of the current generation
  uint32_t slice_ = 0, max_slice_ = 0;
  uint64_t slice_base_ = 0;
  bool have_base_ = false;
  bool slice_overflow_ = false;
  int64_t span_lo_ = 0, span_hi_ = 0;  // the times of slice span_slice_ (empty: none)
  uint32_t span_slice_ = 0;
  bool revisited_ = false;      // a slice came back after a later one
  mutable bool repeats_ = false;  // cells_ may hold a key twice
  mutable RefTable<LastCell> last_;  // by thread ref: its last cell
  uint64_t selected_ = 0;
  int64_t first_ = -1, last_ts_ = -1;
};

}  // namespace psrec::analyzer
