// Stacks of a trie seen as sequences of report keys (a function, or a line of a function).
//
// The analyzer groups frames by key: every frame of one function is one key when it reports by
// function. Its aggregated views (totals per function, pstats' caller edges, the functions on
// top in each time slice) and the speedscope text walk every distinct stack; these do the walks
// here, over the trie, so that Python sees one row per key or per edge, never per frame.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "analyzer/native/timeline.hpp"

namespace psrec::analyzer {

constexpr uint32_t kSkipKey = 0xFFFFFFFF;

class StackKeys {
 public:
  // parents and frames: the decoder's trie, n nodes, read in place (the caller keeps them
  // alive and unchanged while this lives). frame_key[frame id] is the key of that frame (ids
  // past its end take key 0), kSkipKey for a frame the view leaves out (a native recording's:
  // its stacks are seen without it); empty_key is the key of the empty stack (node 0).
  StackKeys(const uint32_t* parents, const uint32_t* frames, size_t n,
            std::vector<uint32_t> frame_key, uint32_t empty_key);

  size_t nodes() const { return n_; }
  uint32_t keyCount() const { return key_count_; }
  // Keys of a node's stack, root first (the empty stack: {empty_key}).
  void keys(uint32_t node, std::vector<uint32_t>& out) const;
  // Key of a node's innermost frame (the empty stack: empty_key).
  uint32_t leaf(uint32_t node) const { return node < n_ ? leaf_[shown_[node]] : empty_key_; }

 private:
  // A node's parent; a parent must precede its child (the decoder's trie is built that way):
  // anything else would make a walk loop, so such a node hangs from the root.
  uint32_t up(uint32_t node) const {
    const uint32_t p = parents_[node];
    return p < node ? p : 0;
  }
  const uint32_t* parents_;
  // shown_[n]: the nearest of n and its ancestors whose frame the view shows (0: none).
  std::vector<uint32_t> shown_;
  size_t n_;
  std::vector<uint32_t> leaf_;  // by node: the key of its innermost frame
  uint32_t empty_key_;
  uint32_t key_count_;
};

// Rows of (node, count, value): the engine's cells, or a thread's runs. value is multiplied
// by value_scale; with `thread`, only the rows whose thread is `only` count.
struct NodeRows {
  const uint32_t* node;
  const uint64_t* count;
  const uint64_t* value;
  uint64_t value_scale = 1;
  const uint32_t* thread = nullptr;
  uint32_t only = 0;
  size_t n;
};

// Own and cumulative sums per key over rows of (node, count, value). A key that occurs more
// than once in a stack (recursion) counts once towards that stack's cumulative sums.
struct KeyTotals {
  std::vector<uint64_t> own_count, own, total_count, total;  // indexed by key
};

// Caller -> callee edges, pstats' way: every distinct edge of a stack gets the stack's value as
// cumulative time; the innermost edge also gets its count and value as own.
struct KeyEdges {
  std::vector<uint32_t> caller, callee;
  std::vector<uint64_t> count, own, cum;
};

KeyTotals keyTotals(const StackKeys& sk, const NodeRows& rows);
KeyEdges keyEdges(const StackKeys& sk, const NodeRows& rows);

// The time-sliced report's sums: per (slice, thread) samples, GIL-held and on-CPU samples; per
// (slice, leaf key) value. Rows come out sorted by slice, then thread or key.
struct SliceSums {
  std::vector<uint64_t> thread_slice;
  std::vector<uint32_t> thread;
  std::vector<uint64_t> count, gil, on_cpu;
  std::vector<uint64_t> key_slice;
  std::vector<uint32_t> key;
  std::vector<uint64_t> value;
};

struct CellColumnsView {
  const uint64_t* slice;  // 64-bit, as Accumulator numbers them
  const uint32_t *thread, *node;
  const uint64_t *count, *gil, *on_cpu;
  const uint64_t* value;  // the view's value column (count, weight or CPU ticks)
  uint64_t value_scale;   // multiplies value (the interval, for count weights)
  size_t n;
};

SliceSums sliceSums(const StackKeys& sk, const CellColumnsView& cells);

// One speedscope document's per-thread arrays as JSON text. Frames are numbered in the order
// their keys are first used, across the threads in the order they are given. Consecutive runs
// whose stacks render alike (same keys) merge; runs that stand for no time are left out.
class SpeedscopeText {
 public:
  enum class Value { kCount, kCpu, kWeight };
  explicit SpeedscopeText(const StackKeys& sk) : sk_(sk), frame_of_key_(sk.keyCount(), -1) {}

  // Starts a thread: numbers new frames, merges runs. value_mult multiplies each run's value
  // (count runs: the interval; scale to the output unit for every kind).
  void setThread(const RunsView& runs, Value kind, uint64_t count_mult, uint64_t scale);
  // Keys numbered so far, in frame order (frame i is key keysInOrder()[i]).
  const std::vector<uint32_t>& keysInOrder() const { return keys_in_order_; }
  // Of the current thread: runs written, their total value, samples merged into the runs,
  // and the start of the time the first run stands for (before scaling to zero).
  uint64_t kept() const { return kept_; }
  uint64_t total() const { return total_; }
  uint64_t samples() const { return samples_; }
  int64_t start() const { return start_; }
  // Next piece of the samples (then the weights) array text, comma-separated without
  // brackets, of about max_bytes; empty when done.
  std::string samplesChunk(size_t max_bytes);
  std::string weightsChunk(size_t max_bytes);

 private:
  const StackKeys& sk_;
  std::vector<int64_t> frame_of_key_;
  std::vector<uint32_t> keys_in_order_;
  // Per trie node seen: the offset and length of its "[i,j,...]" text in texts_ (-1: unseen).
  std::vector<int64_t> text_at_;
  std::vector<uint32_t> text_len_;
  std::string texts_;
  TimelineRuns runs_;
  std::vector<uint64_t> values_;
  uint64_t kept_ = 0, total_ = 0, samples_ = 0;
  int64_t start_ = 0;
  size_t sample_pos_ = 0, weight_pos_ = 0;
  bool sample_first_ = true, weight_first_ = true;
};

}  // namespace psrec::analyzer
