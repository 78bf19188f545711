// One pass over one target: its thread list walked (ThreadListWalk), each thread's stack read
// through the target's StackReader, thread tracking, the samples handed to the encoder, and
// the rules of a thread's life within a pass (started, ended while read, reused state,
// paused with --blocking).
#include <errno.h>

#include <algorithm>
#include <optional>

#include "format/native/constants.hpp"
#include "recorder/native/memory/process_pause.hpp"
#include "recorder/native/sampler/sampler.hpp"

namespace psrec::recorder {

namespace fmt = psrec::format;

// Reads of a thread after a torn one, within the same pass: a thread resuming a generator
// from C tears nearly half its reads on 3.12+ (spec/cpython-layouts.md), and each read again
// is a fresh draw.
constexpr int kTornRetries = 8;
// Python-only: how long a thread goes without the GIL before its copies are stopped (Sampler::
// gate); longer than the waits of threads that take turns with it (5 ms each, sys.
// getswitchinterval()), so that those keep theirs.
constexpr uint64_t kGilFreeNs = 20000000;

Sampler::Thread& Sampler::track(Target& t, const ThreadHead& head, uint64_t ts, Thread* known) {
  if (known) {
    if (known->thread_id == head.thread_id && known->native_tid == head.native_tid) return *known;
    // The address now holds another thread's state: the old thread is gone.
    encoder_.threadExit(known->ref, ts);
    t.threads.erase(head.tstate);
  }
  Thread th;
  th.tstate = head.tstate;
  th.thread_id = head.thread_id;
  th.native_tid = head.native_tid;
  th.first_ts = ts;
  // Thread idents (pthread_t values) are reused. A thread state first seen after the first
  // pass is newer than the names read so far, and a name cached for its ident belonged to a
  // thread that has exited since: read its own (threading registers it once it runs).
  if (t.sampled) t.py_names.erase(head.thread_id);
  auto named = t.py_names.find(head.thread_id);
  if (named != t.py_names.end()) {
    th.name = named->second;
    th.python_named = true;
  } else {
    t.names_wanted = true;
  }
  if (head.native_tid) {
    pid_t tid = static_cast<pid_t>(head.native_tid);
    th.files = ThreadStatFiles(t.pid, tid, config_.cpu_switches);
    if (!th.python_named) th.name = threadComm(t.pid, tid);
  }
  th.ref = encoder_.addThread(static_cast<uint64_t>(t.pid), head.thread_id, head.native_tid,
                              th.name, ts);
  bump(st_.threads_seen, 1);
  return t.threads.emplace(head.tstate, std::move(th)).first->second;
}

// A thread state that no thread runs yet (or any more), so there is nothing to sample: the
// thread starting a new one creates it, and until the new thread binds it, it carries no ids
// (3.12+) or the creating thread's (3.8-3.11). The new thread binds it in two steps (the Python
// thread id, then the kernel's): read between them it carries its own Python id with the
// creating thread's kernel id (3.11) or none (3.12+). On 3.8-3.10 the kernel id comes from the
// pthread, which reads 0 once the thread has exited. An id that another thread seen in this or
// the last pass holds is one of those (ids are unique among live threads; a reused one is
// taken once its old holder is gone, a pass later).
bool Sampler::unstarted(const Target& t, uint64_t tstate, const ThreadHead& head) const {
  if (t.unwinder->pass.notStarted(head)) return true;
  for (const auto& [addr, other] : t.threads)
    if (addr != tstate && other.seen_pass + 1 >= pass_ &&
        (other.thread_id == head.thread_id ||
         (head.native_tid && other.native_tid == head.native_tid)))
      return true;
  return false;
}

// A walk can end early without a sign: the list changed under it in a way the checks of its
// links did not catch. A thread ends by unlinking its state (then clears its ids, or frees the
// memory), so a state still linked that still carries the thread's ids is the thread's: it was
// missed (an error), not ended. Read afresh, only for the threads a pass did not meet. The
// ids are read again once the link is confirmed: a freed state is often given at once to the
// next new thread, which links it with ids of its own (none yet), so a thread that ended just
// before shows its old ids, then a link that is already the new thread's.
bool Sampler::stillListed(Target& t, uint64_t tstate, const Thread& th, uint64_t interp) {
  auto carries_ids = [&] {
    ThreadHead now;
    return t.unwinder->pass.readThread(tstate, now, nullptr) == ReadStatus::kOk &&
           now.interp == interp && now.thread_id == th.thread_id &&
           now.native_tid == th.native_tid;
  };
  return carries_ids() && t.unwinder->pass.linked(tstate) && carries_ids();
}

// --blocking: stops the target for the pass, after reading each thread's CPU state (a
// stopped thread is off its CPU because psrec stopped it). Once the pause has ended (it is
// destroyed before this), each thread that was running is told so: psrec's own stop is no
// sleep (ThreadStatFiles::resumed). False when the target is gone (its segment has ended).
struct Sampler::PassPause {
  Target& t;
  std::optional<ProcessPause> pause;
  explicit PassPause(Target& target) : t(target) {}
  PassPause(const PassPause&) = delete;
  PassPause& operator=(const PassPause&) = delete;
  ~PassPause() {
    if (!pause) return;
    pause.reset();
    for (auto& [addr, th] : t.threads)
      if (th.before_pause.ok) th.files.resumed(th.before_pause.running);
  }
};

bool Sampler::pauseTarget(PassPause& p, uint64_t ts) {
  Target& t = p.t;
  for (auto& [addr, th] : t.threads) {
    const uint64_t stat_reads = th.files.statReads();
    th.before_pause = th.files.sample(pass_ns_);
    pass_stat_reads_ += th.files.statReads() - stat_reads;
    th.paused = true;
  }
  p.pause.emplace(t.pid);
  if (p.pause->stop() == ESRCH) {
    char state = processState(t.pid);
    if (state == 0 || state == 'Z' || state == 'X') {
      endTarget(t, ts, -1);
      return false;
    }
  }
  return true;
}

// A pass head that could not be read: the target ended, ran another program, or this pass of
// it is an error for every thread.
void Sampler::passFailed(Target& t, ReadStatus st, uint64_t ts, uint64_t* errors) {
  char state = processState(t.pid);
  if (st == ReadStatus::kNoProcess || gone(state)) {
    endTarget(t, ts, -1);
    return;
  }
  // Every read fails once the process runs another program.
  const uint64_t image = processImage(t.pid);
  if (image && t.image && image != t.image) {
    execed(t, pass_ns_, image);
    return;
  }
  for (auto& [addr, th] : t.threads) encoder_.sampleError(th.ref);
  *errors += t.threads.size();
  bump(st_.pass_errors, 1);
  t.unwinder->pass.forgetHead();
}

void Sampler::sampleTarget(Target& t, uint64_t ts, uint64_t* errors) {
  PassPause pause(t);
  if (config_.blocking && !pauseTarget(pause, ts)) return;
  PassHead head;
  // One system call for the pass head and every thread seen last time (see
  // PassReader::readPass).
  ReadStatus st = t.unwinder->pass.readPass(head, t.order);
  t.order.clear();
  if (st != ReadStatus::kOk) {
    passFailed(t, st, ts, errors);
    return;
  }
  const uint64_t interp = t.proc->mainInterpreter();
  ThreadListWalk& list = *t.list;
  list.begin(interp, head);
  ThreadHead th_head;
  // The walk asks for the hint of each state just before it reads it: the thread found for
  // the last one asked is the state next() returns.
  Thread* known = nullptr;
  auto hint_of = [&](uint64_t tstate) -> const StackHint* {
    auto it = t.threads.find(tstate);
    known = it != t.threads.end() ? &it->second : nullptr;
    return known ? &known->stack.hint : nullptr;
  };
  new_.clear();
  while (list.next(th_head, hint_of)) sampleThread(t, th_head, known, head, interp, ts);
  const bool list_ok = list.whole();
  sampleNewThreads(t, head, interp, ts);
  // Threads that ended while read have their THREAD_EXIT already.
  if (!ended_.empty()) {
    for (auto it = t.threads.begin(); it != t.threads.end();) {
      if (std::find(ended_.begin(), ended_.end(), it->second.ref) != ended_.end())
        it = t.threads.erase(it);
      else
        ++it;
    }
    ended_.clear();
  }
  if (!failed_.empty() || !list_ok) {
    // A thread read that failed may be the first sign of an exec (its memory is gone).
    const uint64_t image = processImage(t.pid);
    if (image && t.image && image != t.image) {
      failed_.clear();
      if (t.native) settleNative(t);  // before the old program's state is dropped
      execed(t, pass_ns_, image);
      return;
    }
    for (uint32_t ref : failed_) encoder_.sampleError(ref);
    *errors += failed_.size();
    failed_.clear();
  }
  t.sampled = true;
  settleUnmet(t, list_ok, interp, ts, errors);
  if (t.native) settleNative(t);
  recordTasks(t, ts);
}

// The threads sampled in this pass to the target's task tracker, and what it counted to the
// sampler's figures.
void Sampler::recordTasks(Target& t, uint64_t ts) {
  if (!t.tasks) return;
  task_refs_.clear();
  for (auto& [addr, th] : t.threads)
    if (th.seen_pass == pass_)
      task_refs_.push_back({th.tstate, th.thread_id, th.ref, &th.stack.raw});
  t.tasks->afterPass(task_refs_, pass_, ts);
  const TaskCounts& now = t.tasks->counts();
  TaskCounts& was = t.tasks_counted;
  bump(st_.tasks_defined, now.defined - was.defined);
  bump(st_.task_errors, now.errors - was.errors);
  bump(st_.task_off_stack, now.off_stack - was.off_stack);
  bump(st_.task_snapshots, now.snapshots - was.snapshots);
  bump(st_.task_snapshot_errors, now.snapshot_errors - was.snapshot_errors);
  bump(st_.task_snapshot_ns, now.snapshot_ns - was.snapshot_ns);
  was = now;
}

// What the pass's native stacks came to, counted once per pass: the counters, and what the
// recording must say (perf events refused, a binary replaced on disk).
void Sampler::settleNative(Target& t) {
  const NativeCounts& now = t.native->counts();
  NativeCounts& was = t.native_counted;
  bump(st_.native_mixed, now.mixed - was.mixed);
  bump(st_.native_unpaired, now.unpaired - was.unpaired);
  bump(st_.native_unread, now.unread - was.unread);
  bump(st_.native_from_proc, now.from_proc - was.from_proc);
  bump(st_.native_interrupted, now.interrupted - was.interrupted);
  bump(st_.native_stopped, now.stopped - was.stopped);
  bump(st_.native_captured, now.captured - was.captured);
  bump(st_.native_marked, now.marked - was.marked);
  was = now;
  bool changed = false;
  if (native_refusal_.empty() && !t.native->refusal().empty()) {
    native_refusal_ = t.native->refusal();
    changed = true;
  }
  for (const std::string& r : t.native->replaced()) {
    if (std::find(native_replaced_.begin(), native_replaced_.end(), r) != native_replaced_.end())
      continue;
    native_replaced_.push_back(r);
    changed = true;
  }
  if (changed) publish();
}

// One thread state the list walk met: a thread known already or a new one, sampled unless it
// was sampled before the walk began again, has not started, or has no ref left for it.
void Sampler::sampleThread(Target& t, ThreadHead& th_head, Thread* known,
                           const PassHead& head, uint64_t interp, uint64_t ts, bool walked) {
  const uint64_t tstate = th_head.tstate;
  // (Also where a known thread's state now holds other ids: its memory was reused. A thread
  // ending unbinds its state one id at a time: one id gone and the other its own is still
  // the same thread.)
  const bool same =
      known && (th_head.thread_id || th_head.native_tid) &&
      (known->thread_id == th_head.thread_id || !th_head.thread_id) &&
      (known->native_tid == th_head.native_tid || !th_head.native_tid);
  if (same) {
    th_head.thread_id = known->thread_id;
    th_head.native_tid = known->native_tid;
  }
  if (same && known->seen_pass == pass_) return;  // sampled before the walk began again
  if (!same && walked) {
    new_.push_back(th_head);  // sampled after the walk: sampleNewThreads
    return;
  }
  if (!same && unstarted(t, tstate, th_head)) return;
  if (!same && encoder_.threadsFull()) {  // no ref left for it: the recording ends here
    threads_full_ = true;
    return;
  }
  Thread& th = track(t, th_head, ts, known);
  PassReader::updateHint(th_head, th.stack.hint);
  th.seen_pass = pass_;
  uint64_t read_again = 0;
  // --native: the Python frames the kernel copied with the thread's newest perf sample, where
  // it does, so that both halves of the sample are of one instant (spec section 10, rule 7).
  th.from_capture = false;
  StackRead got = StackRead::kTorn;
  if (captured(t, th, t.unwinder->pass.gilStatus(th_head, head))) {
    got = t.reader->readCaptured(th_head, capture_, th.stack, pass_);
    // A copy caught as a frame was being pushed or popped holds no whole stack: without
    // --native (whose copy must be its perf sample's), the copy before it, one period older.
    for (int older = 0; got != StackRead::kOk && !t.native && older < 2 &&
                        olderCapture(th);
         ++older)
      got = t.reader->readCaptured(th_head, capture_, th.stack, pass_);
    th.from_capture = got == StackRead::kOk;
    if (th.from_capture) bump(st_.captured_stacks, 1);
  }
  bool ran = false;  // switched onto a CPU while it was read from the process
  if (!th.from_capture) {
    const uint64_t off = th.files.offCpuMark();
    got = t.reader->read(th_head, th.stack, interp, pass_, kTornRetries, &read_again);
    ran = got == StackRead::kOk && off && !th.files.stillOff(off);
    // (The ids of what the reader holds now: a read again keeps those of the frames that did
    // not change since, as of this read.)
    if (ran) pythonIds(t, th);
  }
  if ((got == StackRead::kTorn || ran) && mayStop(t, th, monotonicNs())) {
    // The stack changes faster than it can be copied, or the thread, off its CPU when its
    // read began, ran during it: read it once more with the thread held still for the read
    // (spec section 10, rule 7). (Past the budget, a read that passed its checks is kept.)
    const uint64_t t0 = monotonicNs();
    int error;
    {
      ThreadStop stop(static_cast<pid_t>(th.native_tid));
      error = stop.error();
      if (stop.stopped()) {
        got = t.reader->read(th_head, th.stack, interp, pass_, 2, &read_again);
        bump(st_.torn_stopped, 1);
      }
    }
    stopEnded(t, th, error, t0);
  }
  if (read_again) bump(st_.retries, read_again);
  if (t.reader->cached()) bump(st_.cached_stacks, 1);
  if (t.reader->wroteAnchor()) bump(st_.anchor_writes, 1);
  if (got == StackRead::kOk) {
    record(t, th, th_head, head, interp);
  } else if (got == StackRead::kEnded) {
    // Not an error: the thread has exited (before this pass: it has no sample in it).
    encoder_.threadExit(th.ref, ts);
    ended_.push_back(th.ref);
    bump(st_.ended_in_pass, 1);
  } else {
    if (got == StackRead::kTorn) bump(st_.torn_dropped, 1);
    th.paused = false;  // the CPU state read before a stop goes with no sample
    failed_.push_back(th.ref);
  }
  t.order.push_back({tstate, th_head.thread_id, th.stack.hint});
}

// The states the walk met that are not a known thread's, sampled once the list has been walked,
// oldest first. A state a thread creates for the one it starts is newer than its own (the
// list is newest first) and may carry its ids (Sampler::unstarted): met first, it would be
// taken for a thread, and the creator for the state not started. Each is read again (the walk
// has read others since), and left for the next pass if it no longer holds the ids it had.
void Sampler::sampleNewThreads(Target& t, const PassHead& head, uint64_t interp, uint64_t ts) {
  new_met_.clear();
  for (auto walked = new_.rbegin(); walked != new_.rend(); ++walked) {
    const uint64_t tstate = walked->tstate;
    if (!new_met_.insert(tstate).second) continue;  // met twice (the walk began again)
    ThreadHead now;
    if (t.unwinder->pass.readThread(tstate, now, nullptr) != ReadStatus::kOk ||
        now.interp != interp || now.thread_id != walked->thread_id ||
        now.native_tid != walked->native_tid)
      continue;
    auto it = t.threads.find(tstate);
    sampleThread(t, now, it != t.threads.end() ? &it->second : nullptr, head, interp, ts, false);
  }
  new_.clear();
}

// The known threads the walk did not meet: ended (their state left the list) where the list
// was read whole, else errors of this pass.
void Sampler::settleUnmet(Target& t, bool list_ok, uint64_t interp, uint64_t ts,
                          uint64_t* errors) {
  for (auto it = t.threads.begin(); it != t.threads.end();) {
    if (it->second.seen_pass == pass_) {
      ++it;
    } else if (list_ok && !stillListed(t, it->first, it->second, interp)) {
      encoder_.threadExit(it->second.ref, ts);
      it = t.threads.erase(it);
    } else {
      encoder_.sampleError(it->second.ref);
      ++*errors;
      ++it;
    }
  }
}

void Sampler::pythonIds(Target& t, Thread& th) {
  // The stack the reader holds, as frame ids: those of the frames that did not change are
  // kept, the others interned (once per code object and instruction).
  const StackReader& reader = *t.reader;
  const std::vector<RawFrame>& frames = reader.frames();
  const auto kind = t.proc->layout().line_table;
  CodeCache& codes = *t.codes;
  th.ids.resize(reader.same());
  for (size_t i = reader.same(); i < frames.size(); ++i) {
    const RawFrame& f = frames[i];
    CodeInfo* info = reader.info(i);
    const int off = codes.byteOffset(*info, f.instr, f.tlbc);
    auto it = info->frame_ids.find(off);
    uint32_t id;
    if (it != info->frame_ids.end()) {
      id = it->second;
    } else {
      id = encoder_.internFrame(functionId(encoder_, *info), info->lineAt(kind, off));
      info->frame_ids.emplace(off, id);
    }
    th.ids.push_back(id);
  }
}

void Sampler::cpuFirst(Thread& th) {
  if (th.paused) return;
  const uint64_t stat_reads = th.files.statReads();
  th.before_pause = th.files.sample(pass_ns_);
  pass_stat_reads_ += th.files.statReads() - stat_reads;
  th.paused = true;
}

bool Sampler::captured(Target& t, Thread& th, const GilStatus& gil) {
  // Once asyncio runs, each sample also names the task its thread runs, read after the
  // stacks and checked against them: a stack copied up to a few periods before would not
  // hold the task running now. Its threads are read from the process.
  if (!t.capture || !th.native_tid || (t.tasks && t.tasks->asyncio())) return false;
  const pid_t tid = static_cast<pid_t>(th.native_tid);
  const uint64_t period = perfPeriod(config_.interval_ns);
  if (t.native) {
    if (!th.native) th.native = std::make_unique<NativeThread>();
    t.native->prepare(*th.native, tid, th.tstate);
    if (!th.native->watch.active()) return false;
  } else {
    if (!th.clock_tried) {
      th.clock_tried = true;
      auto clock = std::make_unique<Thread::Clock>();
      if (clock->perf.openClock(tid, period) == 0 &&
          clock->watch.watch(*t.capture, tid, th.tstate, clock->perf.sampleFd()))
        th.clock = std::move(clock);
    }
    if (!th.clock || !gate(*th.clock, gil)) return false;
  }
  // A thread that waits has not moved since it left its CPU: it is read from the process,
  // where it waits (its newest capture is of before it began to wait).
  cpuFirst(th);
  if (!th.before_pause.ok) return false;
  if (!th.before_pause.running) {
    // Its context switches may lag: the stat file says, once for each stretch off its CPU.
    // (A state read from the files is theirs already.)
    if (!th.files.fromSwitches()) return false;
    if (th.off_mark && th.files.stillOff(th.off_mark)) return false;
    const uint64_t stat_reads = th.files.statReads();
    const bool runnable = th.files.runnableNow();
    pass_stat_reads_ += th.files.statReads() - stat_reads;
    if (!runnable) {
      th.off_mark = th.files.offCpuMark();
      return false;
    }
    th.before_pause.running = true;
  }
  th.off_mark = 0;
  const uint64_t now = monotonicNs();
  if (t.native) return t.native->captured(*th.native, now, capture_);
  if (!th.clock->watch.newest(capture_)) return false;
  th.clock->perf.settle();
  return fresh(*th.clock, now);
}

bool Sampler::olderCapture(Thread& th) {
  return th.clock && th.clock->watch.newest(capture_, capture_.seq) &&
         fresh(*th.clock, monotonicNs());
}

bool Sampler::fresh(const Thread::Clock& clock, uint64_t now) const {
  // (A copy from before the event was last started is of before the thread took the GIL.)
  return capture_.time_ns <= now && capture_.time_ns >= clock.on_since_ns &&
         now - capture_.time_ns <=
             kCaptureAgePeriods * perfPeriod(config_.interval_ns) + kCaptureSlackNs;
}

// Without --native a thread's copies matter only while it may change its Python frames: while
// it holds the GIL (on a free-threaded build, while it is attached to its interpreter). Each
// costs it an interrupt a period of its CPU time, which on a thread in C code that released
// the GIL buys nothing: its frames do not move, and read from the process they are of the
// pass's instant. So a thread seen without the GIL for kGilFreeNs has its event stopped,
// and started again at the first pass that sees it hold the GIL (that pass reads it from the
// process; its copies count from then on). False while the event is stopped.
bool Sampler::gate(Thread::Clock& clock, const GilStatus& gil) {
  if (!gil.known || gil.held) {
    clock.gil_free_since_ns = 0;
    if (!clock.on) {
      clock.perf.enable(true);
      clock.on = true;
      clock.on_since_ns = pass_ns_;
      bump(st_.capture_resumes, 1);
    }
    return true;
  }
  if (!clock.gil_free_since_ns) clock.gil_free_since_ns = pass_ns_;
  if (clock.on && pass_ns_ - clock.gil_free_since_ns >= kGilFreeNs) {
    clock.perf.enable(false);
    clock.on = false;
  }
  return clock.on;
}

bool Sampler::mayStop(Target& t, Thread& th, uint64_t now_ns) {
  if (t.stops_refused || !th.native_tid || (th.paused && config_.blocking) ||
      !th.stops.allows(now_ns))
    return false;
  cpuFirst(th);
  return true;
}

void Sampler::stopEnded(Target& t, Thread& th, int error, uint64_t t0_ns) {
  const uint64_t ns = monotonicNs() - t0_ns;
  th.stops.stopped_ns += ns;
  bump(st_.stopped_ns, ns);
  if (error == EPERM || error == EACCES) t.stops_refused = true;
  // Its context switches told the stop as a sleep (ThreadStatFiles::resumed).
  if (!error && th.before_pause.ok) th.files.resumed(th.before_pause.running);
}

void Sampler::nativeStack(Target& t, Thread& th, const ThreadHead& head, uint64_t interp) {
  NativeSampling& native = *t.native;
  if (!th.native) th.native = std::make_unique<NativeThread>();
  NativeThread& nt = *th.native;
  const pid_t tid = static_cast<pid_t>(th.native_tid);
  native.prepare(nt, tid, th.tstate);
  if (th.from_capture) {
    if (native.mixCaptured(nt, th.ids, t.reader->frames(), encoder_, th.mixed)) return;
  } else if (config_.blocking && th.paused) {
    // Stopped with the whole process for this pass: its registers are of this instant.
    if (native.mixStopped(nt, tid, th.ids, t.reader->frames(), encoder_, th.mixed)) return;
  } else {
    // Without events that see it leave its CPU, a thread read from /proc where it waits is
    // not read again until it has run (its context switches, marked before the read, say).
    const bool from_proc = !(nt.perf.isOpen() && nt.perf.seesWaits());
    const bool unmoved =
        from_proc && nt.from_proc && nt.proc_mark && th.files.stillOff(nt.proc_mark);
    const uint64_t mark = from_proc && !unmoved ? th.files.offCpuMark() : 0;
    const bool paired = native.mix(nt, tid, th.ids, t.reader->frames(), encoder_, th.mixed,
                                   unmoved);
    if (!nt.from_proc) nt.proc_mark = 0;
    else if (!unmoved) nt.proc_mark = mark;
    if (paired) return;
  }
  // The latest native snapshot is not of the Python stack's instant: both are read again with
  // the thread stopped, within its budget, else the sample is marked.
  frames_kept_ = t.reader->frames();
  const uint64_t t0 = monotonicNs();
  if (mayStop(t, th, t0)) {
    int error;
    bool paired = false;
    {
      ThreadStop stop(tid);
      error = stop.error();
      ThreadHead again = head;
      uint64_t read_again = 0;
      if (stop.stopped() &&
          t.reader->read(again, th.stack, interp, pass_, 2, &read_again) == StackRead::kOk) {
        pythonIds(t, th);
        frames_kept_ = t.reader->frames();
        paired = native.mixStopped(nt, tid, th.ids, frames_kept_, encoder_, th.mixed);
      }
    }
    stopEnded(t, th, error, t0);
    if (paired) return;
  }
  native.mark(th.ids, frames_kept_, encoder_, th.mixed);
}

void Sampler::record(Target& t, Thread& th, const ThreadHead& head, const PassHead& ph,
                     uint64_t interp) {
  pythonIds(t, th);
  const uint32_t* ids = th.ids.data();
  size_t depth = th.ids.size();
  if (t.native && th.native_tid) {
    nativeStack(t, th, head, interp);
    ids = th.mixed.data();
    depth = th.mixed.size();
  }

  uint8_t status = 0;
  const GilStatus gil = t.unwinder->pass.gilStatus(head, ph);
  if (!gil.known) status |= fmt::kStatusGilUnknown;
  if (gil.held) status |= fmt::kStatusGilHeld;
  if (gil.requested_known) status |= fmt::kStatusGilRequestedKnown;
  if (gil.requested) status |= fmt::kStatusGilRequested;
  bool has_cpu = false;
  uint64_t cpu_ticks = 0;
  ThreadCpu cpu;
  if (th.paused) {
    cpu = th.before_pause;
    th.paused = false;
  } else {
    const uint64_t stat_reads = th.files.statReads();
    cpu = th.files.sample(pass_ns_);
    pass_stat_reads_ += th.files.statReads() - stat_reads;
  }
  if (th.files.fromSwitches()) ++pass_switch_samples_;
  if (cpu.ok) {
    if (cpu.running) status |= fmt::kStatusOnCpu;
    if (cpu.cpu_known) {
      if (th.has_cpu && cpu.cpu_ns > th.cpu_reported_ns) {
        cpu_ticks = (cpu.cpu_ns - th.cpu_reported_ns) / 1000;
        th.cpu_reported_ns += cpu_ticks * 1000;  // keep the remainder for the next sample
        has_cpu = cpu_ticks > 0;
      } else if (!th.has_cpu) {
        th.cpu_reported_ns = cpu.cpu_ns;
        th.has_cpu = true;
      }
    }
  } else {
    status |= fmt::kStatusCpuUnknown;
  }
  encoder_.sample(th.ref, ids, depth, status, has_cpu, cpu_ticks);
}

}  // namespace psrec::recorder
