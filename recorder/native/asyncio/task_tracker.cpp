#include "recorder/native/asyncio/task_tracker.hpp"

#include <algorithm>

#include "format/native/constants.hpp"
#include "recorder/native/sampler/thread_stats.hpp"

namespace psrec::recorder {

TaskTracker::TaskTracker(PythonProcess& proc, CodeCache& codes, format::Encoder& enc,
                         uint64_t pid, uint64_t created_mono_ns, uint64_t interval_ns,
                         uint64_t snapshot_interval_ns)
    : proc_(proc),
      codes_(codes),
      enc_(enc),
      tasks_(proc, codes),
      pid_(pid),
      created_mono_ns_(created_mono_ns),
      interval_ns_(interval_ns),
      snapshot_interval_ns_(snapshot_interval_ns) {}

uint64_t TaskTracker::ticks(uint64_t mono_ns) const {
  return mono_ns > created_mono_ns_ ? (mono_ns - created_mono_ns_) / 1000 : 0;
}

void TaskTracker::end() {
  enc_.endTasks(pid_);
  forget();
  next_snapshot_ns_ = 0;
}

void TaskTracker::forget() {
  for (const auto& [addr, k] : known_) enc_.forgetTask(k.id);
  known_.clear();
}

// The task each thread sampled in this pass runs. Until asyncio is imported, nothing is read
// but the size of sys.modules, every 10 ms (looked into when it changed).
void TaskTracker::afterPass(const std::vector<SampledRef>& sampled, uint64_t pass, uint64_t ts) {
  constexpr uint64_t kCheckTicks = 10000, kPruneTicks = 1000000;  // 10 ms, 1 s in 1 us ticks
  pass_ = pass;
  if (!asyncio_) {
    if (asyncio_check_ts_ && ts - asyncio_check_ts_ < kCheckTicks) return;
    asyncio_check_ts_ = ts ? ts : 1;
    asyncio_ = tasks_.imported();
    if (!asyncio_) return;
  }
  sampled_ = &sampled;
  threads_.clear();
  for (const SampledRef& s : sampled) threads_.push_back({s.tstate, s.thread_id});
  if (threads_.empty()) return;
  // 3.8-3.13 read a dict the loops change at every task step (and resize every few): a read
  // caught in the middle of that is read again. One that fails throughout gives its threads no
  // task for this pass (rather than the last one they had).
  bool read = false;
  for (int attempt = 0; attempt < 4 && !read; ++attempt) read = runningTasks(running_);
  if (!read) ++counts_.errors;
  for (size_t i = 0; i < running_.size(); ++i) {
    enc_.sampleTask(sampled[i].ref, running_[i] ? taskId(i, ts) : 0);
    if (running_[i]) ran_since_.insert(running_[i]);
  }
  if (read) snapshotTasks(ts);
  // Tasks not seen running for a minute are forgotten (a server makes thousands a second);
  // one that runs again after that is named again, under a new id.
  constexpr uint64_t kForgetTicks = 60000000;
  if (ts - pruned_ts_ >= kPruneTicks) {
    pruned_ts_ = ts;
    for (auto it = known_.begin(); it != known_.end();) {
      if (ts - it->second.seen_ts > kForgetTicks) {
        enc_.forgetTask(it->second.id);
        it = known_.erase(it);
      } else {
        ++it;
      }
    }
  }
}

bool TaskTracker::runningTasks(std::vector<uint64_t>& out) {
  if (!tasks_.running(threads_, out)) return false;
  tasks_.placeUnplaced(out, [&](size_t i, uint64_t frame) {
    const auto& raw = *(*sampled_)[i].raw;
    return std::any_of(raw.begin(), raw.end(),
                       [&](const RawFrame& f) { return f.addr == frame; });
  });
  return true;
}

// The TASK id of the task running_[i], which thread sampled_[i] runs, defined when first
// seen; 0 when what was read does not hold together (the sample then has no task):
// - the task (its coroutine, its name) cannot be read whole: it is being made or freed as it
//   is read (counted in task_errors);
// - its coroutine's frame is not on the stack read for th (the task is read after the stack:
//   one that began or ended in between is not the stack's; counted in task_off_stack). Before
//   3.11 the frame's code must be the coroutine's too: a frame object freed with one
//   coroutine is reused for the next.
// Its identity is checked at every sample: its coroutine object and its name's text (a task
// that finished and was replaced by one made at the same address, its coroutine at the old
// one's, differs by its name). 3.13+ turn a default name's counter into its text when the
// name is first asked for: another name object, the same text, the same task. A task not
// known yet must still be its thread's running task after it was read: the task read may have
// finished meanwhile, and a new one be in the making at its address (its name set, its
// coroutine field still the old one's).
uint32_t TaskTracker::taskId(size_t i, uint64_t ts) {
  const std::vector<RawFrame>& raw = *(*sampled_)[i].raw;
  const uint64_t task = running_[i];
  uint64_t coro = 0, name_obj = 0;
  if (!tasks_.identity(task, coro, name_obj) || !tasks_.nameOf(name_obj, task_name_)) {
    ++counts_.errors;
    return 0;
  }
  const uint64_t frame = tasks_.coroutineFrame(coro);
  auto on = std::find_if(raw.begin(), raw.end(), [&](const RawFrame& f) { return f.addr == frame; });
  if (!frame || on == raw.end() ||
      (!tasks_.framesInside() && on->code != tasks_.coroutineCode(coro))) {
    ++counts_.off_stack;
    return 0;
  }
  if (uint32_t id = knownTask(task, coro, task_name_, ts)) return id;
  uint64_t coro_again = 0, name_again = 0;
  if (!runningTasks(running_again_) || running_again_[i] != task ||
      !tasks_.identity(task, coro_again, name_again) || coro_again != coro ||
      name_again != name_obj || !tasks_.nameOf(name_obj, name_again_) ||
      name_again_ != task_name_) {
    ++counts_.off_stack;
    return 0;
  }
  uint32_t function = 0;
  if (on->code)  // the coroutine's code, as the stack has it
    if (CodeInfo* info = codes_.lookup(on->code, pass_)) function = functionId(enc_, *info);
  return newTask(task, coro, task_name_, function, ts);
}

uint32_t TaskTracker::knownTask(uint64_t task, uint64_t coro, const std::string& name,
                            uint64_t ts) {
  auto it = known_.find(task);
  if (it == known_.end() || it->second.coro != coro || it->second.name != name) return 0;
  it->second.seen_ts = ts;
  return it->second.id;
}

uint32_t TaskTracker::newTask(uint64_t task, uint64_t coro, const std::string& name,
                          uint32_t function, uint64_t ts) {
  KnownTask k;
  k.coro = coro;
  k.name = name;
  k.seen_ts = ts;
  k.id = enc_.defineTask(pid_, task, name, function, ts);
  ++counts_.defined;
  const uint32_t id = k.id;
  auto [it, added] = known_.try_emplace(task);
  if (!added) enc_.forgetTask(it->second.id);  // another task, at the same address
  it->second = std::move(k);
  return id;
}

// Every task of the target and its state (spec 4.3): read when due (a task that has not
// moved since the previous snapshot is not read again: AsyncioTasks::readChanged), and
// written where it changed. A reading that takes more than 2 ms goes on over passes, a
// tenth of the interval each, so that a hundred thousand tasks do not hold up the samples;
// the snapshot is written at the pass it ends in. A snapshot that took d of CPU time waits 10 d for the next, so
// that thousands of tasks cost the sampler at most a tenth of a CPU (the recording says how
// many were taken, and their CPU time).
void TaskTracker::snapshotTasks(uint64_t ts) {
  const uint64_t t0 = monotonicNs();
  if (!tasks_.readingTasks() && t0 < next_snapshot_ns_) return;
  const uint64_t cpu0 = threadCpuNs();
  tasks_.usePass(pass_);
  TaskList list;
  // A reading begins with up to 2 ms, which hundreds of tasks take, so that theirs is read at
  // one moment as it was; a larger one goes on a tenth of the interval a pass.
  const uint64_t budget = tasks_.readingTasks()
                              ? std::max<uint64_t>(interval_ns_ / 10, 20000)
                              : std::max<uint64_t>(interval_ns_ / 10, 2000000);
  const bool done = tasks_.readChanged(proc_.mainInterpreter(), threads_, running_,
                                         ran_since_, t0 + budget, list);
  const uint64_t step = threadCpuNs() - cpu0;
  snapshot_cpu_ns_ += step;
  counts_.snapshot_ns += step;
  if (!done) return;
  ran_since_.clear();
  if (!list.asyncio) {
    // asyncio.tasks is not imported yet: nothing to read
  } else if (!list.error.empty()) {
    ++counts_.snapshot_errors;
  } else {
    const std::vector<TaskRecord>& tasks = tasks_.tasks();
    snapshot_ids_.clear();
    for (const TaskRecord& rec : tasks)
      if (uint32_t id = snapshotTaskId(rec, ts)) snapshot_ids_[rec.id] = id;
    // Stamped with when the tasks were read (later in the pass than its threads).
    enc_.beginTaskSnapshot(pid_, std::max(ts, ticks(list.read_ns)));
    for (const TaskRecord& rec : tasks) {
      auto me = snapshot_ids_.find(rec.id);
      if (me == snapshot_ids_.end()) continue;
      uint32_t state = format::kTaskRunning;
      if (rec.state != TaskRun::kRunning)
        state = rec.state == TaskRun::kSuspended && rec.fut_waiter ? format::kTaskSuspended
                                                                  : format::kTaskReady;
      task_frames_.clear();
      for (auto f = rec.stack.rbegin(); f != rec.stack.rend(); ++f)  // outermost first
        if (f->code) task_frames_.push_back(enc_.internFrame(functionId(enc_, *f->code), f->line));
      task_awaits_.clear();
      for (uint64_t a : rec.awaits()) {
        auto it = snapshot_ids_.find(a);
        if (it != snapshot_ids_.end()) task_awaits_.push_back(it->second);
      }
      enc_.taskState(me->second, state, state == format::kTaskSuspended ? tasks_.waitsName(rec) : "",
                         task_frames_.data(), task_frames_.size(), task_awaits_.data(),
                         task_awaits_.size());
    }
    enc_.endTaskSnapshot();
    ++counts_.snapshots;
  }
  const uint64_t cost = snapshot_cpu_ns_ + (threadCpuNs() - cpu0 - step);
  counts_.snapshot_ns += threadCpuNs() - cpu0 - step;
  snapshot_cpu_ns_ = 0;
  next_snapshot_ns_ = t0 + std::max(snapshot_interval_ns_, 10 * cost);
}

// The TASK id of a task a snapshot found (defined when first seen, as taskId does for a
// running task); 0 when its name cannot be read.
uint32_t TaskTracker::snapshotTaskId(const TaskRecord& rec, uint64_t ts) {
  if (uint32_t id = knownTask(rec.id, rec.coro, rec.name, ts)) return id;
  // Read once more (where the reading did not): a task made or freed as it was read is left
  // for the next snapshot.
  uint64_t coro = rec.coro, name_obj = rec.name_obj;
  if (rec.name.empty()) return 0;
  if (!rec.checked &&
      (!tasks_.identity(rec.id, coro, name_obj) || coro != rec.coro ||
       name_obj != rec.name_obj || !tasks_.nameOf(name_obj, name_again_) ||
       name_again_ != rec.name))
    return 0;
  uint32_t function = 0;
  if (!rec.stack.empty() && rec.stack.back().code) {
    function = functionId(enc_, *rec.stack.back().code);  // its outermost coroutine
  } else if (uint64_t code = tasks_.coroutineCode(coro)) {
    if (CodeInfo* info = codes_.lookup(code, pass_)) function = functionId(enc_, *info);
  }
  return newTask(rec.id, coro, rec.name, function, ts);
}

}  // namespace psrec::recorder
