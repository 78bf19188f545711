// Decodes .psr record streams (the uncompressed payloads of DEFS and DATA chunks).
//
// Stacks are interned in a trie shared by all chunks a Decoder reads: a sample refers to one
// trie node, so memory grows with the number of distinct stacks, not of samples.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "format/native/constants.hpp"
#include "format/native/sample_columns.hpp"
#include "format/native/varint.hpp"

namespace psrec::format {

struct DefString {
  uint32_t id;
  std::string value;
};
struct DefFunction {
  uint32_t id, filename, name, first_line;
  uint32_t kind = 0, build_id = 0;  // format 1.3: a native function's (spec 3.1)
  uint64_t address = 0;
};
struct DefFrame {
  uint32_t id, function;
  int64_t line;
};
struct DefThread {
  uint32_t ref;
  uint64_t pid, python_tid, os_tid;
  uint32_t name;
  uint64_t start_ts;
};

struct DefProcess {
  uint64_t pid, parent_pid;
  uint32_t command;
  uint64_t start_ts;
};

struct DefTask {
  uint32_t id;
  uint64_t pid, address;
  uint32_t name, coroutine;
  uint64_t start_ts;
};
struct Definitions {
  std::vector<DefString> strings;
  std::vector<DefFunction> functions;
  std::vector<DefFrame> frames;
  std::vector<DefThread> threads;
  std::vector<DefProcess> processes;
  std::vector<DefTask> tasks;
  uint64_t unknown_records = 0;
};

// One event: its record type, time and up to three integer fields (see the spec).
struct Event {
  uint8_t type;
  uint64_t ts;
  int64_t a, b, c;
};

struct ChunkSummary {
  uint64_t seq = 0;
  uint64_t passes = 0;
  uint64_t samples = 0;
  uint64_t errors = 0;
  uint64_t unknown_records = 0;
  int64_t first_ts = -1;
  int64_t last_ts = -1;
};

class DecodeError : public std::exception {
 public:
  explicit DecodeError(std::string m) : msg_(std::move(m)) {}
  const char* what() const noexcept override { return msg_.c_str(); }

 private:
  std::string msg_;
};

// A chunk that would take the whole file past one of its budgets (spec section 9.3): the
// stack-trie nodes or the thread refs a reader keeps for all its chunks. The chunk is as
// well-formed as the file may be; the reader stops reading there.
class BudgetError : public DecodeError {
 public:
  using DecodeError::DecodeError;
};

// What a reader may keep for a whole file, in all (spec section 9.3): decodeData throws
// BudgetError when a chunk would take the trie past max_nodes nodes, or the decoder past
// max_threads thread refs.
struct Budgets {
  uint64_t max_nodes = UINT64_MAX;
  uint64_t max_threads = UINT64_MAX;
};

// Per-thread state by thread ref (1 .. kMaxThreadRef). Refs below kDense, which is what real
// files use, index a vector; larger ones go to a hash map. So per-thread state costs memory for
// the threads a file uses, not for its largest ref (one ref of 2^24 made every reader allocate,
// and clear for every chunk, hundreds of megabytes).
template <typename T>
class RefTable {
 public:
  static constexpr uint32_t kDense = 1 << 16;
  // The entry of ref, made (value-initialised) if new. Valid until the next call that makes one.
  T& operator[](uint32_t ref) {
    if (ref < n_) return dense_[ref];  // the decoder's and accumulator's hot path: keep it short
    return make(ref);
  }
  // The entry of ref, or nullptr if it has none.
  const T* find(uint32_t ref) const {
    if (ref < n_) return &dense_[ref];
    auto it = far_.find(ref);
    return it == far_.end() ? nullptr : &it->second;
  }
  // Calls f(ref, entry) for every entry, refs below kDense in order, then the others.
  template <typename F>
  void forEach(F&& f) const {
    for (size_t r = 0; r < dense_.size(); ++r) f(static_cast<uint32_t>(r), dense_[r]);
    for (const auto& [r, v] : far_) f(r, v);
  }
  void clear() {
    dense_.clear();
    far_.clear();
    n_ = 0;
  }

 private:
#if defined(__GNUC__)
  __attribute__((noinline))
#endif
  T& make(uint32_t ref) {
    if (ref < kDense) {
      dense_.resize(std::min<size_t>(kDense, std::max<size_t>(static_cast<size_t>(ref) + 1,
                                                              2 * dense_.size())));
      n_ = dense_.size();
      return dense_[ref];
    }
    return far_[ref];
  }
  std::vector<T> dense_;
  size_t n_ = 0;  // dense_.size(), kept so that a lookup needs no division
  std::unordered_map<uint32_t, T> far_;
};

class StackTrie {
 public:
  StackTrie();
  uint32_t child(uint32_t parent, uint32_t frame);
  uint32_t parent(uint32_t node) const { return parent_[node]; }
  uint32_t frame(uint32_t node) const { return frame_[node]; }
  uint32_t depth(uint32_t node) const { return depth_[node]; }
  size_t size() const { return parent_.size(); }
  const std::vector<uint32_t>& parents() const { return parent_; }
  const std::vector<uint32_t>& frames() const { return frame_; }

 private:
  std::vector<uint32_t> parent_, frame_, depth_;
  // hint_[n]: the child of n that child() returned last (0: none). Threads mostly come back to
  // the same child, so this check spares most hash lookups when stacks change.
  std::vector<uint32_t> hint_;
  // (parent << 32 | frame) -> child, open addressing with linear probing, at most half full.
  // A slot is free when its node is 0 (the root is nobody's child).
  struct Slot {
    uint64_t key;
    uint32_t node;
  };
  std::vector<Slot> index_;
  size_t indexSlot(uint64_t key) const;
  void growIndex();
};

class Decoder {
 public:
  // weight_cap_ticks caps a sample's weight; first_weight_ticks is the weight of a recording's
  // very first pass (nothing before it to measure from).
  Decoder(uint32_t weight_cap_ticks, uint32_t first_weight_ticks);

  // Throws DecodeError on a malformed payload, or one of more than max_records definitions.
  // Unknown record types are skipped.
  static Definitions decodeDefs(const uint8_t* data, size_t size,
                                uint64_t max_records = UINT64_MAX);

  // The THREAD_RENAME events of a DATA payload, read without decoding its passes (a PASS's
  // body is skipped by its length): what finding a thread by a name it got later needs.
  // Throws DecodeError on a malformed record or more than max_events renames. exits: its
  // THREAD_EXIT events too (what a writer that carries names needs to forget them).
  static std::vector<Event> threadRenames(const uint8_t* data, size_t size,
                                          uint64_t max_events = UINT64_MAX, bool exits = false);

  // Appends the chunk's samples to out and its events to events. Throws DecodeError on a
  // malformed chunk: bad records, a thread ref out of range, a stack deeper than kMaxDepth,
  // more than kMaxChunkSamples samples or more than max_events events; BudgetError on one
  // that would take the decoder past budgets.
  ChunkSummary decodeData(const uint8_t* data, size_t size, SampleColumns& out,
                          std::vector<Event>& events, uint64_t max_events = UINT64_MAX,
                          Budgets budgets = {});

  // Thread refs the decoder has kept state for, over every chunk it decoded.
  uint64_t threadsSeen() const { return threads_seen_; }

  StackTrie& trie() { return trie_; }

 private:
  struct Thread {
    uint32_t node = 0;
    uint32_t cpu = 0;
    uint32_t live_at = 0;  // its place in live_ while live
    uint32_t task = 0;     // the asyncio task it runs (PASS_TASKS; 0: none)
    uint64_t row = 0;      // its row in the chunk's last pass (valid when row_pass == pass)
    uint64_t row_pass = 0;
    uint64_t pass = 0;     // pass number of the last entry
    uint64_t chunk = 0;    // the chunk the state belongs to (older: reset on first use)
    uint8_t status = 0;
    bool live = false;
    bool error = false;
  };
  Thread& thread(uint64_t ref);
  void compactLive();

  // One DATA payload being decoded: what decodeData carries from one record to the next.
  struct Chunk {
    SampleColumns& out;
    std::vector<Event>& events;
    uint64_t max_events;
    Budgets budgets;
    size_t rows_before;
    size_t events_before;
    ChunkSummary sum;
    int64_t last_pass = -1;  // -1: unknown
    int64_t base = 0;
    bool begun = false;
    uint64_t pass_no = 0;
    // A TASK_SNAPSHOT's TASK_STATE and TASK_AWAITS records follow it (spec section 4.3).
    bool in_snapshot = false;
    uint64_t snapshot_ts = 0;
    uint32_t state_task = 0;
    void event(const Event& e);
  };
  // Each reads the body of one record of its type.
  void readPass(ByteReader& b, Chunk& c);
  void passRows(Chunk& c, int64_t ts);  // a row for each live thread of the pass just read
  void readPassTasks(ByteReader& b, Chunk& c);
  void readTaskState(ByteReader& b, Chunk& c);
  void readThreadEvent(uint8_t type, ByteReader& b, Chunk& c);  // THREAD_START, THREAD_EXIT
  // A record that is only an event (THREAD_RENAME, PROCESS_START, ...); false for others.
  static bool readEvent(uint8_t type, ByteReader& b, Chunk& c);

  StackTrie trie_;
  uint32_t weight_cap_;
  uint32_t first_weight_;
  RefTable<Thread> threads_;
  std::vector<uint32_t> live_;   // refs of live threads in order of first entry
  bool stale_ = false;           // live_ holds threads that exited
  uint64_t chunk_ = 0;           // chunks begun
  uint64_t threads_seen_ = 0;    // refs given state, in all chunks
  uint64_t max_threads_ = UINT64_MAX;
};

}  // namespace psrec::format
