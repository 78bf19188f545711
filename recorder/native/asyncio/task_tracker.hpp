// The asyncio tasks of one recorded process as the recording holds them (spec section 4.3):
// the task each thread sampled in a pass runs (PASS_TASKS), a TASK definition for each task
// when first seen, and snapshots of every task's state (TASK_SNAPSHOT), read over passes so
// that a hundred thousand tasks do not hold up the samples. Reads through AsyncioTasks,
// writes through the encoder; the sampler calls it once a pass, after the threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "format/native/encoder.hpp"
#include "recorder/native/asyncio/asyncio_tasks.hpp"
#include "recorder/native/python/code_cache.hpp"
#include "recorder/native/python/python_process.hpp"
#include "recorder/native/python/unwind_types.hpp"

namespace psrec::recorder {

// What the tracker did, counted since it was made (the sampler adds what is new to its
// figures once a pass).
struct TaskCounts {
  uint64_t defined = 0;          // TASK definitions
  uint64_t errors = 0;           // running tasks that could not be read whole
  uint64_t off_stack = 0;        // running tasks not on the stack read for their thread
  uint64_t snapshots = 0;        // TASK_SNAPSHOTs written
  uint64_t snapshot_errors = 0;  // readings of every task that failed
  uint64_t snapshot_ns = 0;      // CPU time spent reading the tasks' states
};

// A thread sampled in this pass, as the tracker needs it.
struct SampledRef {
  uint64_t tstate = 0;
  uint64_t thread_id = 0;
  uint32_t ref = 0;                          // its THREAD ref
  const std::vector<RawFrame>* raw = nullptr;  // its Python frames as read in this pass
};

class TaskTracker {
 public:
  // interval_ns: the recording's; snapshot_interval_ns: the least time between two readings
  // of every task's state (0: a reading at every pass, as its cost allows).
  // created_mono_ns: the recording's time 0 (its ticks are microseconds from it).
  TaskTracker(PythonProcess& proc, CodeCache& codes, format::Encoder& enc, uint64_t pid,
              uint64_t created_mono_ns, uint64_t interval_ns, uint64_t snapshot_interval_ns);
  TaskTracker(const TaskTracker&) = delete;
  TaskTracker& operator=(const TaskTracker&) = delete;

  // Once a pass, after its threads were sampled (pass: the sampler's pass number, ts its
  // time in the recording's ticks). Until asyncio is imported, nothing is read but the size
  // of sys.modules, every 10 ms.
  void afterPass(const std::vector<SampledRef>& sampled, uint64_t pass, uint64_t ts);
  // Whether the process runs asyncio (its threads' Python frames are then read from the
  // process, not from a capture: a task read after the stacks must be on the stack read).
  bool asyncio() const { return asyncio_; }
  // The process ended or exec'd: its last snapshot closes, its tasks are forgotten.
  void end();
  const TaskCounts& counts() const { return counts_; }

 private:
  // The task each sampled thread runs (AsyncioTasks::running), a task of a loop that does not
  // say its thread given to the thread whose stack holds its coroutine's frame.
  bool runningTasks(std::vector<uint64_t>& out);
  uint32_t taskId(size_t i, uint64_t ts);
  // Every task's state, when a snapshot is due.
  void snapshotTasks(uint64_t ts);
  uint32_t snapshotTaskId(const TaskRecord& rec, uint64_t ts);
  // The TASK id of the task at task if it is known with this coroutine and name (0: not);
  // newTask defines it (a TASK record) and knows it from then on.
  uint32_t knownTask(uint64_t task, uint64_t coro, const std::string& name, uint64_t ts);
  uint32_t newTask(uint64_t task, uint64_t coro, const std::string& name, uint32_t function,
                   uint64_t ts);
  void forget();
  uint64_t ticks(uint64_t mono_ns) const;

  // An asyncio task seen, under its TASK id: a task created later at its address has another
  // coroutine or another name (taskId).
  struct KnownTask {
    uint32_t id = 0;
    uint64_t coro = 0;
    std::string name;
    uint64_t seen_ts = 0;
  };

  PythonProcess& proc_;
  CodeCache& codes_;
  format::Encoder& enc_;
  AsyncioTasks tasks_;
  const uint64_t pid_;
  const uint64_t created_mono_ns_;
  const uint64_t interval_ns_;
  const uint64_t snapshot_interval_ns_;
  TaskCounts counts_;
  uint64_t pass_ = 0;
  bool asyncio_ = false;
  uint64_t asyncio_check_ts_ = 0;
  std::unordered_map<uint64_t, KnownTask> known_;  // by task address
  uint64_t pruned_ts_ = 0;
  const std::vector<SampledRef>* sampled_ = nullptr;  // afterPass's
  std::vector<ThreadRef> threads_;                    // sampled_'s, as AsyncioTasks takes them
  std::vector<uint64_t> running_, running_again_;
  std::string task_name_, name_again_;  // scratch: the name of the task being identified
  uint64_t next_snapshot_ns_ = 0;       // when the tasks' states are read next
  uint64_t snapshot_cpu_ns_ = 0;        // the CPU time of the reading in progress so far
  std::unordered_map<uint64_t, uint32_t> snapshot_ids_;  // scratch: task address -> TASK id
  std::vector<uint32_t> task_frames_, task_awaits_;     // scratch
  std::unordered_set<uint64_t> ran_since_;  // tasks seen running since the last snapshot
};

}  // namespace psrec::recorder
