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
};

}  // namespace psrec::format
