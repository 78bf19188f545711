// Cells of several sources summed again by (slice / factor, thread[, stack node]): coarser
// slices, and per-thread sums, for outputs that carry sums rather than samples (the HTML page).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace psrec::analyzer {

// One source's cells, as columns read in place.
struct GroupSource {
  const uint64_t* slice;
  const uint32_t* thread;
  const uint32_t* node;
  const uint64_t* value;
  size_t n;
};

// One row per group, in order of first appearance; `values` holds a row's sum from each
// source in turn (row-major: rows x sources).
struct Groups {
  std::vector<uint64_t> slice;  // slice / factor
  std::vector<uint32_t> thread;
  std::vector<uint32_t> node;  // 0 for every row when not grouped by node
  std::vector<uint64_t> values;
};

// Sums each source's values by (slice / factor, thread, node), or (slice / factor, thread)
// when by_node is false. factor 0 is taken as 1.
Groups groupSums(const std::vector<GroupSource>& sources, uint64_t factor, bool by_node);

}  // namespace psrec::analyzer
