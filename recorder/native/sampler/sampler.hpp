// The sampling loop: a native thread (no GIL) that wakes on absolute deadlines, reads every
// thread of the target (and of its Python children with --subprocesses), feeds the encoder
// and hands sealed chunks to a queue that a writer thread drains. Nothing in the loop is fatal
// and nothing in it compresses or writes files.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "format/native/chunk_queue.hpp"
#include "format/native/encoder.hpp"
#include "recorder/native/python/code_cache.hpp"
#include "recorder/native/errors.hpp"
#include "recorder/native/python/python_process.hpp"
#include "recorder/native/python/stack_reader.hpp"
#include "recorder/native/sampler/target.hpp"
#include "recorder/native/python/thread_names.hpp"
#include "recorder/native/python/thread_list.hpp"
#include "recorder/native/sampler/thread_stats.hpp"
#include "recorder/native/python/python_unwinder.hpp"

namespace psrec::recorder {

struct SamplerConfig {
  pid_t pid = 0;
  uint64_t interval_ns = 1000000;
  uint64_t created_mono_ns = 0;  // CLOCK_MONOTONIC reading that timestamps count from
  bool blocking = false;
  bool subprocesses = false;
  bool realtime = false;  // try SCHED_FIFO for the sampling thread (see Sampler::setRealtime)
  bool cpu_switches = true;  // CPU state from context switches where permitted (SwitchRing)
  // A launched program: it may not run Python yet (a launcher, a shell, a program between fork
  // and exec). The sampler watches it until it does; with subprocesses, it follows the Python
  // processes it starts for as long as it runs. Without this the target must be Python.
  bool launched = false;
  // Native frames interleaved with the Python ones (NativeSampling), read without stopping.
  bool native = false;
  // 3.15+: read deep stacks through the frame cache CPython keeps for profilers, which the
  // sampler writes one pointer of per thread (StackReader::setFrameCache).
  bool frame_cache = true;
  bool tasks = true;  // record the asyncio task each thread runs (once asyncio is imported)
  // And every task's state (spec 4.3), read at most this often (0: at every pass), and with
  // at most a tenth of a CPU: a snapshot that took d of CPU time waits 10 d for the next.
  uint64_t task_interval_ns = 0;
  size_t chunk_bytes = 1 << 20;
  uint64_t max_span_ticks = 1000000;
  // --window: no chunk spans a multiple of this many ticks (0: none), so that every window's
  // file ends at its edge (Encoder::setBoundary).
  uint64_t window_ticks = 0;
  // The most threads one recording names (a file's limit; fewer only in tests): a thread
  // past it ends the recording, with every sample so far kept.
  uint32_t max_threads = format::kMaxThreadRef;
};

// The sampler's running figures, named once: SamplerStats, the sampler's atomic copy of
// them and their conversion to Python all follow this list (X(name, type, what)).
#define PSREC_SAMPLER_STATS(X)                                                               \
  X(passes, uint64_t, "passes taken")                                                        \
  X(samples, uint64_t, "thread-samples recorded")                                            \
  X(sample_errors, uint64_t, "thread-samples that could not be read")                        \
  X(pass_errors, uint64_t, "passes where a whole process could not be read")                 \
  X(missed_deadlines, uint64_t, "pass deadlines skipped because a pass ran late")            \
  X(late_passes, uint64_t, "passes begun more than a quarter interval late")                 \
  X(lateness_ns_total, uint64_t, "sum of the passes' lateness")                              \
  X(lateness_ns_max, uint64_t, "largest lateness of a pass")                                 \
  X(sampling_ns_total, uint64_t, "wall time spent inside passes")                            \
  X(sampling_cpu_ns, uint64_t, "CPU time of the sampling thread")                            \
  X(live_threads, uint64_t, "threads known at the last pass")                                \
  X(threads_seen, uint64_t, "threads ever recorded")                                         \
  X(processes, uint64_t, "processes ever recorded")                                          \
  X(chunks, uint64_t, "chunks sealed")                                                       \
  X(truncated_stacks, uint64_t, "thread-samples deeper than the stack cap")                  \
  X(code_objects, uint64_t, "code objects resolved")                                         \
  X(syscalls, uint64_t, "system calls made by the passes")                                   \
  X(elapsed_ns, uint64_t, "time from the first pass to the last")                            \
  X(retries, uint64_t, "threads read again in a pass after a torn read")                     \
  X(cached_stacks, uint64_t, "thread-samples whose outer frames came from the frame cache")  \
  X(captured_stacks, uint64_t, "thread-samples whose frames the kernel copied at a sample")   \
  X(capture_resumes, uint64_t, "copies started again as a thread took the GIL (Python-only)") \
  X(anchor_writes, uint64_t, "frame-cache anchors written into the target (3.15+)")          \
  X(ended_in_pass, uint64_t, "threads that ended while a pass read them (not errors)")       \
  X(stat_reads, uint64_t, "/proc/.../stat reads (other CPU states came from schedstat)")     \
  X(switch_samples, uint64_t, "thread-samples whose CPU state came from context switches")   \
  X(native_mixed, uint64_t, "thread-samples recorded with their native frames")              \
  X(native_unpaired, uint64_t, "native stacks read that did not pair off with the Python one")\
  X(native_unread, uint64_t, "thread-samples whose native stack could not be read")          \
  X(native_from_proc, uint64_t, "native stacks read from /proc (blocked, unseen by events)") \
  X(native_interrupted, uint64_t, "threads blocked since before the recording, stopped once")  \
  X(native_stopped, uint64_t, "of native_mixed: paired by stopping the thread while read")  \
  X(native_captured, uint64_t, "of native_mixed: Python frames the kernel copied with them")  \
  X(native_marked, uint64_t, "thread-samples marked: native frames not of their instant")    \
  X(torn_dropped, uint64_t, "thread-samples lost because every read of them was torn")      \
  X(torn_stopped, uint64_t, "torn reads read again with the thread stopped")                \
  X(stopped_ns, uint64_t, "time threads were held stopped for one read (not --blocking)")    \
  X(tasks_defined, uint64_t, "asyncio tasks named (TASK definitions)")                      \
  X(task_errors, uint64_t, "passes or samples whose running asyncio task could not be read") \
  X(task_off_stack, uint64_t, "samples whose running task began or ended as they were read") \
  X(task_snapshots, uint64_t, "readings of every asyncio task's state (TASK_SNAPSHOT)")     \
  X(task_snapshot_errors, uint64_t, "readings of the asyncio tasks that failed")            \
  X(task_snapshot_ns, uint64_t, "CPU time spent reading the asyncio tasks' states")         \
  X(target_exited, bool, "the target exited while recorded")                                 \
  X(realtime, bool, "the sampling thread ran (or runs) with SCHED_FIFO")

struct SamplerStats {
#define PSREC_STAT_FIELD(name, type, what) type name{};
  PSREC_SAMPLER_STATS(PSREC_STAT_FIELD)
#undef PSREC_STAT_FIELD
  bool finished = false;  // finish() has sealed the last chunk

  // Calls f(name, value) for every figure, in the list's order, then for `finished`.
  template <class F>
  void forEach(F&& f) const {
#define PSREC_STAT_VISIT(name, type, what) f(#name, name);
    PSREC_SAMPLER_STATS(PSREC_STAT_VISIT)
#undef PSREC_STAT_VISIT
    f("finished", finished);
  }
};

// Intervals at or below this run passes back to back ("as fast as possible").
constexpr uint64_t kFreeRunningNs = 1000;

// What the sampler knows of the target while it runs (Sampler::state).
struct SamplerState {
  bool python = false;       // a Python process has been recorded (targetInfo() has one)
  bool root_python = false;  // the target runs Python now
  // The last reason the target could not be recorded while it does not run Python, with its
  // kind; empty when it runs Python.
  std::string root_error;
  ErrorCode root_error_code = ErrorCode::kInternal;
  // Why the loop ended early (the target exec'd a program that is not Python, or one psrec
  // cannot record, or a thread came after max_threads); empty otherwise.
  std::string stop_reason;
  bool threads_full = false;  // it ended because a thread came after max_threads
  // record --native: why perf events could not be opened for a thread ("" when they could).
  std::string native_refusal;
  // Why the kernel could not copy the Python frames with the native ones ("" when it could).
  std::string capture_refusal;
  std::vector<std::string> native_replaced;  // binaries replaced on disk while mapped
};

class Sampler {
 public:
  // Attaches to the target (throws RecorderError); does not start sampling.
  explicit Sampler(const SamplerConfig& config);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // The first Python process recorded (the target, or with `launched` the first of its
  // processes to run Python); nullopt until there is one.
  std::optional<TargetInfo> targetInfo() const;
  SamplerState state() const;
  void start();
  // Waits up to timeout_s for the loop to end (target exited); true when it has.
  bool wait(double timeout_s);
  // Asks the loop to end and joins it.
  void stop();
  // After stop: records the target's exit, seals the last chunk and closes the queue.
  void finish(std::optional<int64_t> exit_code);
  SamplerStats stats() const;

  // The oldest chunk sealed and not taken yet, and the sampler's figures as they stood when
  // it was sealed (so that a file's STATS count what its chunks hold: a window's).
  std::optional<format::SealedChunk> popChunk(int timeout_ms, SamplerStats* at_seal);
  bool chunksDone() { return queue_.closedAndDrained(); }
  // Any thread: the chunks sealed from now on begin a new epoch of definitions (a flight
  // recording asks so when it may drop the older ones; format::Encoder::newEpoch).
  void newEpoch() { epoch_asked_.store(true, std::memory_order_relaxed); }
  // Any thread: the chunk in progress is sealed after the next pass, whatever its size (a
  // snapshot asked for takes the samples up to now).
  void sealSoon() { seal_asked_.store(true, std::memory_order_relaxed); }

 private:
  using Thread = SampledThread;

  void run();
  static bool setRealtime(bool on);
  uint64_t ticks(uint64_t mono_ns) const;
  // False when no process runs Python: no pass is taken.
  bool samplePass(uint64_t ts, uint64_t* errors);
  void sampleTarget(Target& t, uint64_t ts, uint64_t* errors);
  struct PassPause;
  bool pauseTarget(PassPause& p, uint64_t ts);
  void passFailed(Target& t, ReadStatus st, uint64_t ts, uint64_t* errors);
  void sampleThread(Target& t, ThreadHead& th_head, Thread* known, const PassHead& head,
                    uint64_t interp, uint64_t ts, bool walked = true);
  void sampleNewThreads(Target& t, const PassHead& head, uint64_t interp, uint64_t ts);
  void settleUnmet(Target& t, bool list_ok, uint64_t interp, uint64_t ts, uint64_t* errors);
  void settleNative(Target& t);
  // Records the sample the target's reader holds for the thread, with its GIL and CPU state.
  void record(Target& t, Thread& th, const ThreadHead& head, const PassHead& ph,
              uint64_t interp);
  // th.ids from the frames the target's reader just read.
  void pythonIds(Target& t, Thread& th);
  // --native: th.mixed from th.ids and th's native frames of the same instant, or marked
  // where they are missing (NativeSampling::mark).
  void nativeStack(Target& t, Thread& th, const ThreadHead& head, uint64_t interp);
  // th's CPU state for this pass, read now (before_pause; once a pass).
  void cpuFirst(Thread& th);
  // Whether capture_ now holds the kernel's newest copy of th's Python frames, to be read
  // instead of the process: th is running, and the copy recent (spec section 10, rule 7).
  // Opens th's events first (NativeSampling::prepare, or th.clock).
  bool captured(Target& t, Thread& th, const GilStatus& gil);
  // Python-only: stops th's event while th goes without the GIL; false while it is stopped.
  bool gate(Thread::Clock& clock, const GilStatus& gil);
  // Whether capture_ is recent enough to stand for th's frames now.
  bool fresh(const Thread::Clock& clock, uint64_t now) const;
  // Whether capture_ now holds th's copy before the one it holds, as recent (Python-only).
  bool olderCapture(Thread& th);
  // Whether the sampler may stop th alone now (its StopBudget, ptrace not refused); if so its
  // CPU state is read first (before_pause).
  bool mayStop(Target& t, Thread& th, uint64_t now_ns);
  // After a stop that began at t0_ns, with ThreadStop's error.
  void stopEnded(Target& t, Thread& th, int error, uint64_t t0_ns);
  // The thread at head.tstate; known: its entry found by the caller (or null).
  Thread& track(Target& t, const ThreadHead& head, uint64_t ts, Thread* known);
  bool unstarted(const Target& t, uint64_t tstate, const ThreadHead& head) const;
  // Whether a thread the walk did not meet still has its state in the list, under its ids.
  bool stillListed(Target& t, uint64_t tstate, const Thread& th, uint64_t interp);
  void readNames(Target& t, uint64_t ts);
  // Its TaskTracker's pass (the threads sampled in it), and what it counted.
  void recordTasks(Target& t, uint64_t ts);
  void openTarget(Target& t, uint64_t ts, pid_t ppid);
  void endTarget(Target& t, uint64_t ts, int64_t exit_code);
  // Every 100 ms: exec, liveness and attach attempts of every target; children with
  // subprocesses. False when the recording must end.
  bool watch(uint64_t now_ns);
  void tryAttach(Target& t, uint64_t now_ns);
  // The target runs another program since `image` was read: its segment ends.
  void execed(Target& t, uint64_t now_ns, uint64_t image);
  void scanChildren(uint64_t now_ns);
  void publish(const std::string& stop_reason = {});

  SamplerConfig config_;
  format::Encoder encoder_;
  format::ChunkQueue queue_;
  std::mutex sealed_mu_;
  std::deque<SamplerStats> sealed_stats_;  // one per chunk in queue_, in its order
  std::vector<std::unique_ptr<Target>> targets_;
  std::optional<TargetInfo> first_info_;  // guarded by mu_
  SamplerState published_;                // guarded by mu_
  uint64_t pass_ = 0;
  std::string native_refusal_;  // the first NativeSampling::refusal() met
  std::string capture_refusal_;  // the first NativeSampling::captureRefusal() met
  std::vector<std::string> native_replaced_;  // every NativeSampling::replaced() met
  uint64_t pass_ns_ = 0;  // CLOCK_MONOTONIC time the current pass began
  // Counted per sample, published once per pass.
  uint64_t pass_stat_reads_ = 0, pass_switch_samples_ = 0;
  uint64_t last_watch_ns_ = 0, next_watch_ns_ = 0;
  bool threads_full_ = false;  // a thread was seen after max_threads had been named
  std::vector<uint32_t> failed_;  // threads of the current target whose sample failed
  std::vector<uint32_t> ended_;   // threads of the current target that ended while read
  std::vector<ThreadHead> new_;   // states met by the walk not as a known thread's, in its order
  std::vector<RawFrame> frames_kept_;  // nativeStack: the Python frames it marks
  Capture capture_;                    // sampleThread: the capture being read
  std::unordered_set<uint64_t> new_met_;  // sampleNewThreads: those of new_ taken already
  std::vector<SampledRef> task_refs_;     // recordTasks: the threads sampled in the pass

  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> epoch_asked_{false};
  std::atomic<bool> seal_asked_{false};
  void sealChunk();  // hands the encoder's chunk to the writer
  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
  bool finished_ = false;

  struct AtomicStats {
#define PSREC_STAT_ATOMIC(name, type, what) std::atomic<type> name{};
    PSREC_SAMPLER_STATS(PSREC_STAT_ATOMIC)
#undef PSREC_STAT_ATOMIC
  } st_;
  // The counters have one writer at a time (the sampling thread, then finish() after it has
  // stopped); other threads only load them. A plain load and store then suffices, and saves
  // the locked read-modify-write that every pass would otherwise pay several times.
  static void bump(std::atomic<uint64_t>& a, uint64_t v) {
    a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
  }
  static void atomicMax(std::atomic<uint64_t>& a, uint64_t v) {
    if (v > a.load(std::memory_order_relaxed)) a.store(v, std::memory_order_relaxed);
  }
  uint64_t start_ns_ = 0;
  uint64_t first_pass_ns_ = 0;  // when the first pass was taken (0: none yet)
};

}  // namespace psrec::recorder
