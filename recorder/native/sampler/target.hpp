// A process the sampler follows, with the readers of its memory and the threads of it the
// sampler knows: how it is attached (and tried again while a launched program is not yet
// Python), and what it becomes when it execs. What it records goes through the Sampler, which
// owns the encoder (sampler_targets.cpp).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "recorder/native/asyncio/task_tracker.hpp"
#include "recorder/native/python/code_cache.hpp"
#include "recorder/native/errors.hpp"
#include "recorder/native/native_unwind/native_sampling.hpp"
#include "recorder/native/memory/process_pause.hpp"
#include "recorder/native/python/python_process.hpp"
#include "recorder/native/python/stack_reader.hpp"
#include "recorder/native/python/thread_list.hpp"
#include "recorder/native/python/thread_names.hpp"
#include "recorder/native/sampler/thread_stats.hpp"
#include "recorder/native/python/python_unwinder.hpp"

namespace psrec::recorder {

// Exec, liveness and children are looked at this often.
constexpr uint64_t kWatchNs = 100000000;

// A thread of a target, as the sampler last recorded it.
struct SampledThread {
  uint64_t tstate = 0;
  uint64_t thread_id = 0;
  uint64_t native_tid = 0;
  uint32_t ref = 0;
  std::string name;           // as last recorded
  bool python_named = false;  // name is threading's, not the kernel's
  uint64_t first_ts = 0;
  ThreadStatFiles files;
  bool has_cpu = false;
  uint64_t cpu_reported_ns = 0;
  // --blocking: the CPU state read before the pass paused the process (a stopped thread is
  // off its CPU because psrec stopped it); used by the pass's sample.
  // Also when the sampler stopped the thread alone (StopBudget, spec section 10, rule 7).
  ThreadCpu before_pause;
  bool paused = false;
  // Off its CPU as its stat file confirmed: the mark of that (ThreadStatFiles::offCpuMark),
  // kept while its switches show it has not run since, so that it is not read again.
  uint64_t off_mark = 0;
  StopBudget stops;
  uint64_t seen_pass = 0;
  ThreadStack stack;          // as last sampled
  std::vector<uint32_t> ids;  // its frame ids, root first
  // record --native: its capture, and its stack with its native frames, root first.
  std::unique_ptr<NativeThread> native;
  std::vector<uint32_t> mixed;
  // Without --native: its task-clock event, to which the capture of its Python frames is
  // attached (declared before it: given up first).
  struct Clock {
    PerfThread perf;
    CaptureWatch watch;
    // Its samples are stopped while the thread goes without the GIL (Sampler::gate).
    bool on = true;
    uint64_t gil_free_since_ns = 0;  // since when it has been seen without the GIL; 0: not
    uint64_t on_since_ns = 0;        // when its samples were last started again
  };
  std::unique_ptr<Clock> clock;
  bool clock_tried = false;
  bool from_capture = false;  // this pass's Python frames came from its capture
};

// With `proc` it runs Python and is sampled (a segment of the recording, opened by
// PROCESS_START); without, it is watched: it may exec Python later, and with subprocesses its
// children are followed.
struct Target {
  pid_t pid = 0;
  pid_t ppid = 0;
  bool root = false;
  bool alive = true;
  uint64_t image = 0;          // processImage() of the program it runs (0: not read)
  uint64_t watch_ns = 0;       // when it was last seen to start a program without Python
  uint64_t next_try_ns = 0;    // when to try to attach next
  bool attach_over = false;    // no more attempts to attach until it execs again
  bool recorded = false;       // a segment of it was recorded
  std::string why;             // why the last attempt to attach failed
  ErrorCode why_code = ErrorCode::kInternal;
  std::unique_ptr<PythonProcess> proc;
  std::unique_ptr<PythonUnwinder> unwinder;
  std::unique_ptr<CodeCache> codes;
  std::unique_ptr<StackReader> reader;
  std::unique_ptr<ThreadListWalk> list;
  std::unique_ptr<ThreadNames> names;
  // The kernel's copies of its threads' Python frames, where permitted (spec 10, rule 7);
  // declared before native and threads, which use it.
  std::unique_ptr<FrameCapture> capture;
  std::string capture_refusal;             // why there is none
  std::unique_ptr<NativeSampling> native;  // record --native
  bool stops_refused = false;              // ptrace refused a stop of one of its threads
  NativeCounts native_counted;             // its counts already in the sampler's stats
  std::unordered_map<uint64_t, std::string> py_names;  // threading's names by Python thread id
  uint64_t names_ts = 0;       // when py_names was last read (0: never)
  bool names_wanted = false;   // a thread seen recently has no Python name yet
  bool sampled = false;        // a pass has read its thread list
  std::unordered_map<uint64_t, SampledThread> threads;  // by tstate address
  std::vector<PrefetchThread> order;                     // the threads of the last pass, in order
  // Its asyncio tasks in the recording (record without --no-tasks).
  std::unique_ptr<TaskTracker> tasks;
  TaskCounts tasks_counted;  // tasks' counts already in the sampler's figures

  // The process psrec was given, attached now. A launched program that does not run Python
  // yet (or whose runtime is not initialised) is watched instead; anything else that stops
  // the attach throws RecorderError, as does a process psrec cannot see at all.
  static std::unique_ptr<Target> first(pid_t pid, bool launched, uint64_t now);
  // A child of a followed process, found running: watched, to be tried at once (next_try_ns)
  // unless it still runs its parent's program (a fork about to exec): then after a grace
  // period.
  static std::unique_ptr<Target> child(pid_t pid, pid_t parent, uint64_t now);
  // The readers of the Python process just attached (proc), for its first pass.
  void openReaders();
  // One attempt to attach while watched: true when it now runs an initialised Python (its
  // readers are open). Otherwise why says why, and after a while attempts stop until it execs.
  bool tryAttach(uint64_t now);
  // It runs another program (image) since `now`: everything of the old one is dropped, and it
  // is watched for Python again.
  void execedInto(uint64_t image, uint64_t now);
};

}  // namespace psrec::recorder
