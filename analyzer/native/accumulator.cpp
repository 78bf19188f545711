#include "analyzer/native/accumulator.hpp"

#include <algorithm>
#include <stdexcept>

#include "format/native/grouped_slot.hpp"

namespace psrec::analyzer {

using format::groupedSlot;

void Accumulator::newGeneration() const {
  used_ = 0;
  if (++gen_ == 0) {  // wrapped: forget every slot for real
    for (Slot& s : table_) s.gen = 0;
    gen_ = 1;
  }
}


void Accumulator::grow() {
  std::vector<Slot> old(std::max<size_t>(1024, table_.size() * 2));
  old.swap(table_);
  const size_t mask = table_.size() - 1;
  for (const Slot& s : old) {
    if (s.gen != gen_) continue;
    size_t i = groupedSlot(s.key) & mask;
    while (table_[i].gen == gen_) i = (i + 1) & mask;
    table_[i] = s;
  }
}

uint32_t Accumulator::cellFor(const Key& k) {
  if (k.slice != slice_) {
    if (k.slice < max_slice_) revisited_ = true;
    max_slice_ = std::max(max_slice_, k.slice);
    slice_ = k.slice;
    newGeneration();
  }
  if (2 * (used_ + 1) > table_.size()) grow();
  const uint64_t key = static_cast<uint64_t>(k.thread) << 32 | k.node;
  const size_t mask = table_.size() - 1;
  for (size_t i = groupedSlot(key) & mask;;
       i = (i + 1) & mask) {
    Slot& s = table_[i];
    if (s.gen != gen_) {
      s.key = key;
      s.gen = gen_;
      s.cell = static_cast<uint32_t>(cells_.size());
      cells_.push_back({k, AccumulatorCell()});
      ++used_;
      if (revisited_) repeats_ = true;
      return s.cell;
    }
    if (s.key == key) return s.cell;
  }
}

const Accumulator::CellList& Accumulator::cells() const {
  if (repeats_) {
    std::unordered_map<Key, size_t, KeyHash> index;
    CellList merged;
    for (const auto& [k, a] : cells_) {
      auto [it, added] = index.emplace(k, merged.size());
      if (added) {
        merged.push_back({k, a});
        continue;
      }
      AccumulatorCell& c = merged[it->second].second;
      c.count += a.count;
      c.weight += a.weight;
      c.cpu += a.cpu;
      c.gil += a.gil;
      c.on_cpu += a.on_cpu;
    }
    cells_.swap(merged);
    repeats_ = false;
    // Cell positions moved: the table and the per-thread cache start afresh.
    newGeneration();
    last_.clear();
  }
  return cells_;
}

const CellColumns& Accumulator::columns() const {
  if (columns_built_) return columns_;
  const CellList& cells = this->cells();
  CellColumns& c = columns_;
  const size_t n = cells.size();
  for (auto* v : {&c.thread, &c.node}) v->reserve(n);
  for (auto* v : {&c.slice, &c.count, &c.weight, &c.cpu, &c.gil, &c.on_cpu}) v->reserve(n);
  for (const auto& [k, a] : cells) {
    c.slice.push_back(slice_base_ + k.slice);
    c.thread.push_back(k.thread);
    c.node.push_back(k.node);
    c.count.push_back(a.count);
    c.weight.push_back(a.weight);
    c.cpu.push_back(a.cpu);
    c.gil.push_back(a.gil);
    c.on_cpu.push_back(a.on_cpu);
  }
  columns_built_ = true;
  return columns_;
}

uint32_t Accumulator::sliceOf(int64_t ts) {
  // The 64-bit index (a time before the origin, which no sound file has, goes to slice 0),
  // kept relative to a base 2^31 slices before the first sample's.
  const uint64_t ticks = static_cast<uint64_t>(q_.slice_ticks);
  const bool after = ts >= q_.slice_origin;
  const uint64_t offset =
      after ? static_cast<uint64_t>(ts) - static_cast<uint64_t>(q_.slice_origin) : 0;
  const uint64_t index = offset / ticks;
  if (!have_base_) {
    slice_base_ = index > (1u << 31) ? index - (1u << 31) : 0;
    have_base_ = true;
  }
  if (index < slice_base_ || index - slice_base_ > UINT32_MAX) {
    slice_overflow_ = true;
    span_lo_ = span_hi_ = 0;
    return index < slice_base_ ? 0 : UINT32_MAX;
  }
  span_slice_ = static_cast<uint32_t>(index - slice_base_);
  // The times of this slice, [lo, hi), where they are int64 values; else none is cached.
  const uint64_t lo = static_cast<uint64_t>(q_.slice_origin) + (offset - offset % ticks);
  if (after && offset - offset % ticks <= static_cast<uint64_t>(INT64_MAX) &&
      static_cast<int64_t>(lo) <= INT64_MAX - q_.slice_ticks) {
    span_lo_ = static_cast<int64_t>(lo);
    span_hi_ = span_lo_ + q_.slice_ticks;
  } else {
    span_lo_ = span_hi_ = 0;
  }
  return span_slice_;
}

void Accumulator::add(const SampleColumns& c) {
  // Views of the columns may be held: they stay valid because nothing is added after them.
  if (columns_built_) throw std::logic_error("the accumulator's columns were taken: it is done");
  const size_t n = c.size();
  for (size_t i = 0; i < n; ++i) {
    const int64_t ts = c.ts[i];
    const uint32_t th = c.thread[i];
    const uint8_t st = c.status[i];
    LastCell& lc = last_[th];
    const auto f = q_.fate(ts, th, c.task[i], st, c.cpu[i], lc.on_cpu);
    if (!f.selected) {
      lc.on_cpu = lc.kept = false;
      continue;
    }
    if (f.cpu == AccumulatorQuery::Cpu::kPrevious && lc.kept)
      cells_[lc.cell].second.cpu += c.cpu[i];
    lc.on_cpu = AccumulatorQuery::onCpu(st);
    lc.kept = false;
    if (!f.counted && f.cpu != AccumulatorQuery::Cpu::kOwn) continue;
    const bool counted = f.counted;
    uint32_t slice = 0;
    if (q_.slice_ticks > 0) {
      // Samples come in time order: most fall in the slice of the sample before.
      if (ts >= span_lo_ && ts < span_hi_) {
        slice = span_slice_;
      } else {
        slice = sliceOf(ts);
      }
    }
    // A thread's next sample often has the stack of its previous one: remember each thread's
    // last cell.
    const Key key{slice, th, q_.by_node ? c.node[i] : 0u};
    if (lc.cell == UINT32_MAX || !(lc.key == key)) {
      lc.key = key;
      lc.cell = cellFor(key);
    }
    lc.kept = counted;
    AccumulatorCell& cell = cells_[lc.cell].second;
    if (f.cpu == AccumulatorQuery::Cpu::kOwn) cell.cpu += c.cpu[i];
    if (!counted) continue;
    ++cell.count;
    cell.weight += c.weight[i];
    cell.gil += (st & kStatusGilHeld) ? 1 : 0;
    cell.on_cpu += (st & kStatusOnCpu) ? 1 : 0;
    ++selected_;
    if (first_ < 0) first_ = ts;
    last_ts_ = ts;
  }
}

}  // namespace psrec::analyzer
