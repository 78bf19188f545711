// Encodes definitions, sampling passes and events into .psr record streams.
//
// The encoder is used by one thread (the sampler). It never compresses and never does I/O:
// it appends records to two in-memory buffers (definitions and data) and, when a chunk is due,
// hands both over as a SealedChunk. Compression and writing happen on another thread.
#pragma once

#include <cstdint>
#include <utility>
#include <string>
#include <string_view>
#include <map>
#include <unordered_map>
#include <vector>

#include "format/native/constants.hpp"
#include "format/native/varint.hpp"

namespace psrec::format {

// A FUNCTION's kind (spec 3.1): Python (written without the native fields), native, the
// interpreter's evaluation loop, the interpreter's code that no symbol names, or the marker of
// native frames not captured with a sample's Python frames.
constexpr uint32_t kFunctionPython = 0;
constexpr uint32_t kFunctionNative = 1;
constexpr uint32_t kFunctionEvalLoop = 2;
constexpr uint32_t kFunctionInterpreterUnnamed = 3;
constexpr uint32_t kFunctionNativeMissing = 4;

struct SealedChunk {
  std::string defs;  // records for a DEFS chunk (may be empty)
  std::string data;  // records for a DATA chunk (starts with BEGIN)
  uint64_t first_ts = 0;
  uint64_t last_ts = 0;
  uint64_t passes = 0;
  uint64_t samples = 0;  // thread-samples: one per live thread per pass, errors excluded
  uint32_t epoch = 0;    // the definitions' epoch the chunk belongs to (see newEpoch)
};

struct EncoderStats {
  uint64_t passes = 0;
  uint64_t samples = 0;
  uint64_t sample_errors = 0;
  uint64_t chunks = 0;
  uint64_t truncated_stacks = 0;
};

class Encoder {
 public:
  // A chunk is sealed when its data reaches chunk_bytes or spans max_span_ticks (or holds
  // half the thread-samples or passes a reader accepts in one chunk).
  // max_threads: the most threads it names (refs 1 to it; at most kMaxThreadRef, a file's
  // limit; fewer only to test what happens at the limit).
  explicit Encoder(size_t chunk_bytes = 1 << 20, uint64_t max_span_ticks = 1000000,
                   uint32_t max_threads = kMaxThreadRef);

  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;

  // Definitions: content-interned; each is emitted once, before its first use.
  uint32_t internString(std::string_view s);
  uint32_t internFunction(uint32_t filename_id, uint32_t name_id, uint32_t first_line);
  // A native function (spec 3.1, format 1.3): kind kFunctionNative or kFunctionEvalLoop, its
  // binary's path as filename, its symbol as name (0: the whole binary), its binary's build id
  // and its link-time address.
  uint32_t internNativeFunction(uint32_t filename_id, uint32_t name_id, uint32_t kind,
                                uint32_t build_id, uint64_t address);
  uint32_t internFrame(uint32_t function_id, int64_t line);

  // Threads. A thread is live from addThread until threadExit. Refs are never given twice: once
  // max_threads have been named, threadsFull() and addThread throws std::length_error.
  bool threadsFull() const { return threads_.size() >= max_threads_; }
  uint32_t maxThreads() const { return max_threads_; }
  uint32_t addThread(uint64_t pid, uint64_t python_tid, uint64_t os_tid, std::string_view name,
                     uint64_t ts);
  void threadExit(uint32_t ref, uint64_t ts);
  void threadRename(uint32_t ref, uint64_t ts, std::string_view name);

  // One sampling pass: beginPass, then sample() or sampleError() for live threads, endPass.
  // A live thread given neither in a pass is recorded as sampled with nothing changed.
  // Timestamps never decrease: a pass earlier than the previous pass or than the chunk's
  // first record is moved to that time (and so weighs 0).
  // frames: root first. Frames beyond kMaxDepth are cut at the root and marked (frame 0).
  void beginPass(uint64_t ts);
  void sample(uint32_t ref, const uint32_t* frames, size_t depth, uint8_t status,
              bool has_cpu, uint64_t cpu_ticks);
  void sampleError(uint32_t ref);
  // The asyncio task (a defineTask id; 0: none) the thread runs in this pass, given after its
  // sample(): written only when it changed since the thread's previous sample in the chunk.
  void sampleTask(uint32_t ref, uint32_t task);
  void endPass();
  // asyncio tasks (format 1.4): a TASK definition, one per task (the caller keeps the id).
  uint32_t defineTask(uint64_t pid, uint64_t address, std::string_view name,
                      uint32_t coroutine, uint64_t start_ts);

  // asyncio tasks (spec section 4.3): one reading of process pid's tasks at ts is
  // beginTaskSnapshot, taskState for each task found, endTaskSnapshot. Only the tasks whose
  // state changed since the process's previous snapshot are written, every one at its first
  // snapshot in a chunk; a task of the previous snapshot that is not given has ended.
  // frames: outermost first; awaits: the TASK ids it waits on.
  void beginTaskSnapshot(uint64_t pid, uint64_t ts);
  void taskState(uint32_t task, uint32_t state, std::string_view waits, const uint32_t* frames,
                 size_t depth, const uint32_t* awaits, size_t n_awaits);
  void endTaskSnapshot();
  // The process's tasks are no longer read (it exited or exec'd): its last snapshot closes
  // its chunk, and its next snapshot, if any, is full.
  void endTasks(uint64_t pid);

  // Events.
  void passErrors(uint64_t ts, uint64_t errors, uint64_t missed_deadlines);
  void marker(uint64_t ts, std::string_view label);
  void processStart(uint64_t ts, uint64_t pid, uint64_t parent_pid, std::string_view command);
  void processExit(uint64_t ts, uint64_t pid, int64_t exit_code);

  // Whether a chunk is due: the data buffer is full, spans too long a time or holds many
  // thread-samples.
  bool chunkDue(uint64_t now_ts) const;
  // Chunks that never span a multiple of every_ticks (0: no such bound): a recording cut into
  // windows of that length (--window) then cuts between two chunks, at the window's edge.
  void setBoundary(uint64_t every_ticks) { boundary_ticks_ = every_ticks; }
  // Whether a pass at now_ts would put the open chunk across a boundary: it is sealed first.
  bool crossesBoundary(uint64_t now_ts) const {
    return boundary_ticks_ && in_chunk_ &&
           now_ts / boundary_ticks_ != chunk_first_ts_ / boundary_ticks_;
  }
  bool empty() const { return data_.empty() && defs_.empty(); }
  // Hands over the current chunk and starts a new one (ending an open pass first). Every live thread's next sample is
  // then written whole, so each data chunk decodes without the ones before it.
  SealedChunk seal();

  // Epochs (spec 7.1), for a recording that drops its oldest chunks: from the next chunk on,
  // a chunk's definitions hold again every definition its data uses that was last written
  // before the epoch began, so that the chunks of an epoch need the DEFS of no other epoch.
  // Strings that no chunk used for a whole epoch, and that no kept definition names, are
  // then forgotten (the same text later gets a new id), so that names of short-lived tasks
  // do not pile up.
  void newEpoch() { epoch_pending_ = true; }
  uint32_t epoch() const { return epoch_; }
  // A TASK id its caller will not give again: its definition is no longer kept.
  void forgetTask(uint32_t id);

  const EncoderStats& stats() const { return stats_; }
  uint64_t lastPassTs() const { return last_pass_ts_; }

 private:
  struct ThreadState {
    // Its definition, to write again in a later epoch (its names' strings are pinned while
    // it is live).
    uint64_t pid = 0, python_tid = 0, os_tid = 0, start_ts = 0;
    uint32_t name = 0;          // as first defined
    uint32_t current_name = 0;  // as last renamed
    uint32_t def_epoch = 0;
    bool live = false;
    bool status_known = false;
    uint8_t status = 0;
    std::vector<uint32_t> stack;  // as last written in this chunk
    uint32_t task = 0;            // the running task, as last written in this chunk
    uint64_t pass_seen = 0;
  };

  struct TaskState {
    uint32_t state = 0;
    uint32_t waits = 0;
    std::vector<uint32_t> frames;
    std::vector<uint32_t> awaits;
    uint64_t snapshot = 0;  // the process's snapshot that last gave it
  };
  struct ProcessTasks {
    std::unordered_map<uint32_t, TaskState> tasks;  // by TASK id, as last written
    uint64_t snapshots = 0;
    uint64_t chunk = UINT64_MAX;  // the chunk of its last full snapshot
    uint64_t taken_ts = 0;        // its last snapshot's time
    uint64_t since = 0;           // and the time from the one before it
    bool written = true;          // that snapshot is in the data (or there was none)
    bool full = false;            // the snapshot being taken names every task
  };
  void closeTaskSnapshots();  // a TASK_SNAPSHOT for each process whose last one is not written
  void writeTaskSnapshot(uint64_t pid, ProcessTasks& p);
  void writeTaskState(uint32_t task, uint32_t state, uint32_t waits, const uint32_t* frames,
                      size_t depth);

  void beginChunkIfNeeded(uint64_t ts);
  void record(uint8_t type, const std::string& body);
  void writeDef(uint8_t type, const std::string& body);

  size_t chunk_bytes_;
  uint64_t max_span_ticks_;
  uint64_t boundary_ticks_ = 0;  // setBoundary
  uint32_t max_threads_;
  std::string defs_;
  std::string data_;
  std::string scratch_;
  std::string pass_body_;
  std::string pass_tasks_;  // PASS_TASKS entries of the pass being built
  uint32_t next_task_ = 1;
  std::vector<std::pair<uint32_t, uint64_t>> pending_exits_;  // exits of threads in this pass

  // Definitions as written, to write again in a later epoch; each knows the epoch it was last
  // written in.
  struct StringEntry {
    uint32_t id = 0;
    uint32_t epoch = 0;
    uint32_t pins = 0;  // definitions kept that name it: never forgotten while pinned
  };
  using StringSlot = std::pair<const std::string, StringEntry>;
  std::unordered_map<std::string, StringEntry> strings_;
  std::unordered_map<uint32_t, StringSlot*> string_by_id_;
  struct FunctionDef {
    uint32_t filename, name, first_line, kind, build_id;
    uint64_t address;
    bool native;
    uint32_t epoch;
  };
  std::vector<FunctionDef> function_defs_;  // index = id - 1
  struct FrameDef {
    uint32_t function;
    int32_t line;
    uint32_t epoch;
  };
  std::vector<FrameDef> frame_defs_;  // index = id - 1
  struct ProcessDef {
    uint64_t parent_pid, start_ts;
    uint32_t command, epoch;
  };
  std::unordered_map<uint64_t, ProcessDef> processes_;  // the last PROCESS of each pid
  struct TaskDef {
    uint64_t pid, address, start_ts;
    uint32_t name, coroutine, epoch;
  };
  std::unordered_map<uint32_t, TaskDef> task_defs_;  // until forgetTask
  uint32_t epoch_ = 0;
  bool epoch_pending_ = false;

  // A definition record of varint fields.
  template <typename... Fields>
  void writeDefFields(uint8_t type, Fields... fields) {
    scratch_.clear();
    (putVarint(scratch_, static_cast<uint64_t>(fields)), ...);
    writeDef(type, scratch_);
  }
  void writeString(uint32_t id, std::string_view s);
  void writeFrame(uint32_t id, uint32_t function_id, int64_t line);
  void writeThread(uint32_t ref, const ThreadState& t);
  void writeProcess(uint64_t pid, const ProcessDef& p);
  void writeTask(uint32_t id, const TaskDef& t);
  void pinString(uint32_t id, int by);
  // Each writes the definition (and those it names) again where the epoch has not yet.
  void touchString(uint32_t id);
  void touchString(StringSlot& s);
  void touchFunction(uint32_t id);
  void touchFrame(uint32_t id) {
    if (id != 0 && id <= frame_defs_.size() && frame_defs_[id - 1].epoch != epoch_)
      rewriteFrame(id);
  }
  void rewriteFrame(uint32_t id);
  void touchThread(uint32_t ref) {
    if (threads_[ref - 1].def_epoch != epoch_) rewriteThread(ref);
  }
  void rewriteThread(uint32_t ref);
  void touchProcess(uint64_t pid);
  void touchTask(uint32_t id);
  void forgetStrings();  // at an epoch's start
  struct TripleHash {
    size_t operator()(const std::tuple<uint32_t, uint32_t, uint32_t>& t) const;
  };
  std::unordered_map<std::tuple<uint32_t, uint32_t, uint32_t>, uint32_t, TripleHash> functions_;
  std::unordered_map<uint64_t, uint32_t> frames_;  // (function << 32 | zigzag(line)) -> id
  // Native functions: (filename, name, address, kind) -> id.
  std::map<std::tuple<uint32_t, uint32_t, uint64_t, uint32_t>, uint32_t> native_functions_;
  void writeFunction(uint32_t id, uint32_t filename_id, uint32_t name_id, uint32_t first_line,
                     bool native, uint32_t kind, uint32_t build_id, uint64_t address);
  uint32_t next_string_ = 1;
  uint32_t next_function_ = 1;
  uint32_t next_frame_ = 1;

  std::unordered_map<uint64_t, ProcessTasks> task_procs_;  // by pid
  ProcessTasks* snapshot_ = nullptr;  // the process whose snapshot is being taken
  uint64_t snapshot_pid_ = 0;

  std::vector<ThreadState> threads_;  // index = ref - 1
  uint64_t live_threads_ = 0;

  bool in_chunk_ = false;
  bool in_pass_ = false;
  uint64_t chunk_seq_ = 0;
  uint64_t chunk_first_ts_ = 0;
  uint64_t chunk_passes_ = 0;
  uint64_t chunk_samples_ = 0;
  uint64_t pass_ts_ = 0;
  uint64_t last_pass_ts_ = 0;
  uint64_t pass_count_ = 0;
  uint64_t pass_errors_ = 0;
  uint64_t pass_explicit_ = 0;
  EncoderStats stats_;
};

}  // namespace psrec::format
