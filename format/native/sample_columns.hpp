// The columns a decoded chunk gives for each thread-sample: the one C++ statement of them.
// spec/psr-format.md section 8.1 says what each holds; format/_layout.py's SAMPLE_COLUMNS is
// the Python twin; tests/unit/test_spec_sync.py keeps the three in step. A new per-sample value
// is a row here and there, the encoder's and both decoders' lines for it, and its readers.
#pragma once

#include <cstdint>
#include <vector>

namespace psrec::format {

// X(name, C++ type, Python array typecode), in order.
#define PSREC_SAMPLE_COLUMNS(X) \
  X(ts, int64_t, "q")           \
  X(thread, uint32_t, "I")      \
  X(node, uint32_t, "I")        \
  X(status, uint8_t, "B")       \
  X(cpu, uint32_t, "I")         \
  X(weight, uint32_t, "I")       \
  X(task, uint32_t, "I")

// Samples in time order, one row per thread-sample.
struct SampleColumns {
#define PSREC_COLUMN_FIELD(name, type, typecode) std::vector<type> name;
  PSREC_SAMPLE_COLUMNS(PSREC_COLUMN_FIELD)
#undef PSREC_COLUMN_FIELD

  void clear() {
#define PSREC_COLUMN_CLEAR(name, type, typecode) name.clear();
    PSREC_SAMPLE_COLUMNS(PSREC_COLUMN_CLEAR)
#undef PSREC_COLUMN_CLEAR
  }
  size_t size() const { return ts.size(); }

  // Moves the samples onto the timeline and ids of several recordings read as one
  // (psrec.format.merged): times later by ts_delta ticks, thread refs and tasks past those of
  // the recordings before (task 0, no task, stays), and each stack node n to node_map[n], its
  // node in the merged trie. False, and nothing changed, if a node is past the map.
  bool shift(int64_t ts_delta, uint32_t thread_offset, const uint32_t* node_map,
             size_t map_size, uint32_t task_offset) {
    for (auto n : node)
      if (n >= map_size) return false;
    for (auto& t : ts) t += ts_delta;
    for (auto& r : thread) r += thread_offset;
    for (auto& n : node) n = node_map[n];
    for (auto& k : task) k = k ? k + task_offset : 0;
    return true;
  }
};

}  // namespace psrec::format
