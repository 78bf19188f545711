// The sampler's life and loop: attaching, the thread that wakes on absolute deadlines and takes
// a pass over every recorded target, the figures it publishes, and the end of the recording.
// One target's pass is in sampler_pass.cpp; how targets come and go (attach, exec, exit,
// children) in sampler_targets.cpp and target.cpp.
#include "recorder/native/sampler/sampler.hpp"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "format/native/constants.hpp"
#include "recorder/native/errors.hpp"
#include "recorder/native/memory/process_pause.hpp"

namespace psrec::recorder {

namespace fmt = psrec::format;


Sampler::Sampler(const SamplerConfig& config)
    : config_(config), encoder_(config.chunk_bytes, config.max_span_ticks, config.max_threads) {
  if (config_.interval_ns < 1000) config_.interval_ns = 1000;
  encoder_.setBoundary(config_.window_ticks);
  if (config_.cpu_switches) prepareSwitchEvents();
  auto t = Target::first(config.pid, config.launched, monotonicNs());
  if (t->proc) first_info_ = t->proc->info();
  if (config.blocking && t->proc) {
    ProcessPause probe(config.pid);
    int e = probe.stop();
    if (e == EPERM)
      throw RecorderError(ErrorCode::kPermissionDenied,
                          "permission denied pausing process " + std::to_string(config.pid) +
                              " (--blocking uses ptrace)");
  }
  targets_.push_back(std::move(t));
  publish();
}

Sampler::~Sampler() {
  stop();
}

std::optional<TargetInfo> Sampler::targetInfo() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_info_;
}

SamplerState Sampler::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return published_;
}

void Sampler::publish(const std::string& stop_reason) {
  const Target& root = *targets_.front();
  std::lock_guard<std::mutex> lock(mu_);
  published_.python = first_info_.has_value();
  published_.root_python = root.proc != nullptr;
  published_.root_error = root.proc ? std::string() : root.why;
  published_.root_error_code = root.why_code;
  if (!stop_reason.empty()) published_.stop_reason = stop_reason;
  published_.threads_full = threads_full_;
  published_.native_refusal = native_refusal_;
  published_.capture_refusal = capture_refusal_;
  published_.native_replaced = native_replaced_;
}

uint64_t Sampler::ticks(uint64_t mono_ns) const {
  return mono_ns > config_.created_mono_ns ? (mono_ns - config_.created_mono_ns) / 1000 : 0;
}

void Sampler::start() {
  if (thread_.joinable() || done_) return;
  thread_ = std::thread([this] { run(); });
}

bool Sampler::wait(double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  return done_cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return done_; });
}

void Sampler::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

bool Sampler::setRealtime(bool on) {
  // SCHED_FIFO at the lowest priority: the sampler wakes on time however busy the machine is
  // (on a loaded 2-core machine, CFS wake-up latency alone misses several % of 10 kHz
  // deadlines). Needs CAP_SYS_NICE (or an RLIMIT_RTPRIO); without it nothing changes.
  struct sched_param p;
  p.sched_priority = on ? 1 : 0;
  return pthread_setschedparam(pthread_self(), on ? SCHED_FIFO : SCHED_OTHER, &p) == 0;
}

void Sampler::run() {
  // Wake-ups to the microsecond: the default 50 us timer slack would make 10 kHz drift late.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  const uint64_t interval = config_.interval_ns;
  // Free-running ("as fast as possible"): passes back to back, no sleeping, no deadlines.
  const bool free_running = interval <= kFreeRunningNs;
  start_ns_ = monotonicNs();
  for (auto& t : targets_) {
    if (t->root && t->proc && !t->unwinder) openTarget(*t, ticks(start_ns_), 0);
  }
  // Real-time priority only with a low duty cycle: a free-running loop must not own a CPU.
  bool realtime = config_.realtime && !free_running && setRealtime(true);
  st_.realtime.store(realtime, std::memory_order_relaxed);
  uint64_t deadline = start_ns_;
  const uint64_t cpu0 = threadCpuNs();
  // The thread's CPU time costs a system call: read it once per window, not per pass.
  uint64_t window_ns = start_ns_, window_cpu = cpu0;
  int busy_windows = 0;
  // Free-running, a pass begins when the previous one ends: its end time is reused unless
  // something else (sealing a chunk, a scan, the CPU window) ran in between.
  uint64_t carried = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    uint64_t t0 = carried ? carried : monotonicNs();
    carried = 0;
    if (!free_running && t0 < deadline) {
      struct timespec ts;
      ts.tv_sec = static_cast<time_t>(deadline / 1000000000ull);
      ts.tv_nsec = static_cast<long>(deadline % 1000000000ull);
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
      }
      if (stop_.load(std::memory_order_relaxed)) break;
      t0 = monotonicNs();
    }
    if (free_running) deadline = t0;
    pass_ns_ = t0;
    const uint64_t now_ticks = ticks(t0);
    // A window ends before this pass (sealed before the pass's figures are counted).
    if (encoder_.crossesBoundary(now_ticks)) sealChunk();
    const uint64_t late = t0 > deadline ? t0 - deadline : 0;
    bump(st_.lateness_ns_total, late);
    atomicMax(st_.lateness_ns_max, late);
    if (late > interval / 4) bump(st_.late_passes, 1);

    uint64_t errors = 0;
    const bool passed = samplePass(now_ticks, &errors);
    if (threads_full_) {
      publish("the recording has named " + std::to_string(encoder_.maxThreads()) +
              " threads, the most one file can hold: recording stopped (every sample so far is "
              "kept; record again into a new file to go on)");
      break;
    }

    const uint64_t t1 = monotonicNs();
    bump(st_.sampling_ns_total, t1 - t0);
    // Absolute deadlines: the schedule never drifts. Deadlines that already passed are
    // missed (counted), except the one just due, which runs at once.
    deadline += interval;
    uint64_t missed = 0;
    if (!free_running && t1 > deadline + interval) {
      missed = (t1 - deadline) / interval;
      deadline += missed * interval;
    }
    if (passed && (errors || missed)) encoder_.passErrors(now_ticks, errors, missed);
    bump(st_.missed_deadlines, missed);
    bool idle = free_running;
    if (encoder_.chunkDue(ticks(t1)) ||
        (seal_asked_.exchange(false, std::memory_order_relaxed) && !encoder_.empty())) {
      sealChunk();
      idle = false;
    }
    if (t1 >= next_watch_ns_) {
      idle = false;
      if (!watch(t1)) break;
    }
    if (passed && !first_pass_ns_) first_pass_ns_ = t0;
    if (first_pass_ns_) st_.elapsed_ns.store(t1 - first_pass_ns_, std::memory_order_relaxed);
    if (t1 - window_ns >= 100000000ull) {
      idle = false;
      const uint64_t cpu = threadCpuNs();
      st_.sampling_cpu_ns.store(cpu - cpu0, std::memory_order_relaxed);
      // A real-time thread busy more than 3/4 of the time (passes grew longer than planned)
      // would starve the target on a small machine: after three such windows in a row (the
      // first passes, which resolve every code object, are slower) back to normal scheduling
      // for good.
      busy_windows = (cpu - window_cpu) * 4 > (t1 - window_ns) * 3 ? busy_windows + 1 : 0;
      if (realtime && busy_windows >= 3) {
        setRealtime(false);
        realtime = false;
        st_.realtime.store(false, std::memory_order_relaxed);
      }
      window_ns = t1;
      window_cpu = cpu;
    }
    if (!targets_.front()->alive) {
      st_.target_exited = true;
      break;
    }
    if (idle) carried = t1;
  }
  // Recording time counts from the first pass (a launched program may run Python later).
  if (first_pass_ns_)
    st_.elapsed_ns.store(monotonicNs() - first_pass_ns_, std::memory_order_relaxed);
  st_.sampling_cpu_ns.store(threadCpuNs() - cpu0, std::memory_order_relaxed);
  if (realtime) setRealtime(false);
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  done_cv_.notify_all();
}

bool Sampler::samplePass(uint64_t ts, uint64_t* errors) {
  if (std::none_of(targets_.begin(), targets_.end(),
                   [](const auto& t) { return t->alive && t->proc; }))
    return false;
  ++pass_;
  encoder_.beginPass(ts);
  uint64_t live = 0, syscalls = 0, codes = 0;
  for (auto& t : targets_) {
    if (!t->alive || !t->proc) continue;
    sampleTarget(*t, ts, errors);
    if (!t->proc) continue;  // it exec'd
    live += t->threads.size();
    syscalls += t->proc->mem().syscalls();
    codes += t->codes->size();
  }
  encoder_.endPass();
  bump(st_.stat_reads, pass_stat_reads_);
  bump(st_.switch_samples, pass_switch_samples_);
  pass_stat_reads_ = pass_switch_samples_ = 0;
  for (auto& t : targets_)
    if (t->alive && t->proc) readNames(*t, ts);
  const auto& es = encoder_.stats();
  st_.passes.store(es.passes, std::memory_order_relaxed);
  st_.samples.store(es.samples, std::memory_order_relaxed);
  st_.sample_errors.store(es.sample_errors, std::memory_order_relaxed);
  st_.truncated_stacks.store(es.truncated_stacks, std::memory_order_relaxed);
  st_.live_threads.store(live, std::memory_order_relaxed);
  st_.syscalls.store(syscalls, std::memory_order_relaxed);
  st_.code_objects.store(codes, std::memory_order_relaxed);
  return true;
}

void Sampler::finish(std::optional<int64_t> exit_code) {
  stop();
  if (finished_) return;
  finished_ = true;
  const uint64_t ts = ticks(monotonicNs());
  for (auto& t : targets_) {
    if (t->root && t->recorded) {
      if (t->alive && t->proc) {
        if (exit_code) endTarget(*t, ts, *exit_code);
      } else if (exit_code) {
        // Already recorded as exited (code unknown then); record the code now.
        encoder_.processExit(ts, static_cast<uint64_t>(t->pid), *exit_code);
      }
    }
  }
  if (!encoder_.empty()) sealChunk();
  queue_.close();
}

void Sampler::sealChunk() {
  if (epoch_asked_.exchange(false, std::memory_order_relaxed)) encoder_.newEpoch();
  format::SealedChunk chunk = encoder_.seal();
  bump(st_.chunks, 1);
  {
    std::lock_guard<std::mutex> lock(sealed_mu_);
    sealed_stats_.push_back(stats());
  }
  queue_.push(std::move(chunk));
}

std::optional<format::SealedChunk> Sampler::popChunk(int timeout_ms, SamplerStats* at_seal) {
  std::optional<format::SealedChunk> c = queue_.pop(timeout_ms);
  if (c) {
    std::lock_guard<std::mutex> lock(sealed_mu_);
    if (at_seal) *at_seal = sealed_stats_.front();
    sealed_stats_.pop_front();
  }
  return c;
}

SamplerStats Sampler::stats() const {
  SamplerStats s;
#define PSREC_STAT_LOAD(name, type, what) s.name = st_.name.load(std::memory_order_relaxed);
  PSREC_SAMPLER_STATS(PSREC_STAT_LOAD)
#undef PSREC_STAT_LOAD
  s.finished = finished_;
  return s;
}

}  // namespace psrec::recorder
