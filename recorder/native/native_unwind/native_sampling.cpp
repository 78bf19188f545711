#include "recorder/native/native_unwind/native_sampling.hpp"

#include <time.h>

namespace psrec::recorder {

namespace {

uint64_t monotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// The maps are read again for a pc in no known binary (a library loaded since) at most this often.
constexpr uint64_t kRefreshNs = 100000000;

}  // namespace

NativeSampling::NativeSampling(pid_t pid, uint64_t runtime_addr, RemoteMemory& mem,
                               uint64_t period_ns, bool one_frame_per_loop, int64_t entry_flag_code,
                               FrameCapture* capture)
    : pid_(pid),
      mem_(mem),
      period_ns_(period_ns),
      one_frame_per_loop_(one_frame_per_loop),
      entry_flag_code_(entry_flag_code),
      modules_(pid),
      walker_(modules_, mem),
      capture_(capture) {
  modules_.findEvalLoop(runtime_addr);
}

void NativeSampling::prepare(NativeThread& th, pid_t tid, uint64_t tstate) {
  if (th.perf_error >= 0) return;
  th.perf_error = th.perf.open(tid, period_ns_, kNativeStackCopy);
  if (th.perf_error) {
    refusal_ = perfRefusal(th.perf_error);
    return;
  }
  if (capture_) th.watch.watch(*capture_, tid, tstate, th.perf.sampleFd());
}

bool NativeSampling::captured(NativeThread& th, uint64_t now_ns, Capture& out) {
  if (!th.watch.active()) return false;
  th.perf.latest(th.latest);
  const uint64_t t = th.latest.time_ns;
  if (t > 1) th.perf.settle();
  if (t <= 1 || now_ns - t > kCaptureAgePeriods * period_ns_ + kCaptureSlackNs) return false;
  // Switched out since its last capture (preempted on a busy host): its stack is still that
  // of the switch, which its Python frames read from the process pair with (mix).
  if (th.latest.switched_out) return false;
  return th.watch.at(t, out);
}

bool NativeSampling::mixCaptured(NativeThread& th, const std::vector<uint32_t>& py_ids,
                                 const std::vector<RawFrame>& frames, format::Encoder& enc,
                                 std::vector<uint32_t>& out) {
  if (th.latest.time_ns != th.walked_ns) {
    walkNative(th, th.latest.regs, &th.latest.stack, enc);
    th.walked_ns = th.latest.time_ns;
  }
  if (th.ids.empty() || !interleave(th, py_ids, frames, out, true)) return false;
  ++counts_.mixed;
  ++counts_.captured;
  return true;
}

bool NativeSampling::mix(NativeThread& th, pid_t tid, const std::vector<uint32_t>& py_ids,
                         const std::vector<RawFrame>& frames, format::Encoder& enc,
                         std::vector<uint32_t>& out, bool unmoved) {
  const bool sees_waits = th.perf.isOpen() && th.perf.seesWaits();
  if (th.perf.isOpen()) th.perf.latest(th.latest);
  if (th.latest.time_ns > 1) th.perf.settle();
  if (sees_waits && !th.latest.time_ns && !th.interrupted) {
    // Not on a CPU since its events were opened: blocked since before. Read once; it stays
    // true until the thread runs, which its events then see.
    th.interrupted = true;
    if (interruptedThreadRegisters(tid, mem_, kNativeStackCopy, th.latest.regs,
                                   th.latest.stack)) {
      th.latest.time_ns = 1;  // older than any sample the kernel takes
      ++counts_.interrupted;
    }
  }
  NativeRegisters regs;
  const std::vector<uint8_t>* copy = nullptr;
  bool walk = false, read_proc = false;
  if (!sees_waits && unmoved && th.from_proc) {
    ++counts_.from_proc;  // where it waited at its last read, and still waits
  } else if (!sees_waits && th.syscall.blockedRegisters(pid_, tid, regs)) {
    // Events that do not see a thread leave its CPU would give a waiting thread the stack it
    // last ran, and without events a stack read once would never be known to change: a
    // thread blocked in a system call is read from /proc, where it waits, each pass it may
    // have run since the last.
    ++counts_.from_proc;
    walk = read_proc = true;
    th.walked_ns = 0;
  } else if (!th.latest.time_ns) {
    ++counts_.unread;
    return false;
  } else if (th.latest.time_ns != th.walked_ns) {
    regs = th.latest.regs;
    copy = &th.latest.stack;
    walk = true;
    th.walked_ns = th.latest.time_ns;
  }
  if (walk) walkNative(th, regs, copy, enc);
  if (read_proc) th.from_proc = true;
  if (th.ids.empty()) {
    ++counts_.unread;
    return false;
  }
  if (!interleave(th, py_ids, frames, out, false)) {
    ++counts_.unpaired;
    return false;
  }
  ++counts_.mixed;
  return true;
}

bool NativeSampling::mixStopped(NativeThread& th, pid_t tid, const std::vector<uint32_t>& py_ids,
                                const std::vector<RawFrame>& frames, format::Encoder& enc,
                                std::vector<uint32_t>& out) {
  NativeRegisters regs;
  if (!stoppedThreadStack(tid, mem_, kNativeStackCopy, regs, stopped_stack_)) return false;
  walkNative(th, regs, &stopped_stack_, enc);
  // The perf sample the stop itself made (the thread left its CPU) is of this same instant,
  // and a later one will be newer: the walk above stands for the stack until then.
  if (th.perf.isOpen()) th.perf.latest(th.latest);
  th.walked_ns = th.latest.time_ns;
  if (th.ids.empty() || !interleave(th, py_ids, frames, out, true)) return false;
  ++counts_.mixed;
  ++counts_.stopped;
  return true;
}

void NativeSampling::walkNative(NativeThread& th, const NativeRegisters& regs,
                                const std::vector<uint8_t>* copy, format::Encoder& enc) {
  th.from_proc = false;
  walker_.walk(regs, kMaxNativeFrames, walk_, copy);
  // A pc in no binary known: one loaded since the maps were read.
  bool unknown = false;
  for (const NativeFrame& f : walk_) unknown |= f.module < 0;
  const uint64_t now = unknown ? monotonicNs() : 0;
  if (unknown && now - refreshed_ns_ >= kRefreshNs) {
    refreshed_ns_ = now;
    modules_.refresh();
    walker_.walk(regs, kMaxNativeFrames, walk_, copy);
  }
  // As frame ids, root first, named once per pc.
  th.ids.clear();
  th.is_eval.clear();
  th.loops = 0;
  for (size_t k = walk_.size(); k-- > 0;) {
    const bool eval = modules_.inEvalLoop(walk_[k].module, walk_[k].callSite());
    th.ids.push_back(frameId(walk_[k], eval, enc));
    th.is_eval.push_back(eval);
    th.loops += eval;
  }
}

// Runs of Python frames, root first: each begins at a frame entered from C.
void NativeSampling::findRuns(const std::vector<uint32_t>& py_ids,
                              const std::vector<RawFrame>& frames) {
  runs_.clear();
  for (size_t i = 0; i < py_ids.size(); ++i)
    if (i == 0 || one_frame_per_loop_ || (i < frames.size() && frames[i].entered))
      runs_.push_back(i);
}

bool NativeSampling::interleave(const NativeThread& th, const std::vector<uint32_t>& py_ids,
                                const std::vector<RawFrame>& frames, std::vector<uint32_t>& out,
                                bool one_instant) {
  findRuns(py_ids, frames);
  // Read at one instant, the innermost loop may have no run: a call of the loop that has not
  // linked its frame yet, or has unlinked it already (its first and last instructions), runs
  // no Python frame at that moment. Between two instants the same counts are a stack that
  // changed: not paired.
  bool unlinked_top = false;
  if (one_instant && th.loops == runs_.size() + 1) {
    unlinked_top = true;
    // Where the entry is a flag the loop sets on the frame (3.11), a frame the loop has
    // linked before setting its flag reads as its caller's callee. It has not started yet
    // (and a callee pushed by its caller's loop has only once it runs its first
    // instruction): such an innermost frame is the innermost loop's run.
    const size_t top = py_ids.size() - 1;
    if (entry_flag_code_ >= 0 && !py_ids.empty() && frames.size() == py_ids.size() &&
        !frames[top].entered && runs_.back() != top &&
        frames[top].instr < frames[top].code + static_cast<uint64_t>(entry_flag_code_)) {
      runs_.push_back(top);
      unlinked_top = false;
    }
  }
  if (th.loops != runs_.size() && !unlinked_top) return false;
  out.clear();
  size_t run = 0;
  for (size_t k = 0; k < th.ids.size(); ++k) {
    out.push_back(th.ids[k]);
    if (!th.is_eval[k] || run == runs_.size()) continue;
    const size_t from = runs_[run], to = run + 1 < runs_.size() ? runs_[run + 1] : py_ids.size();
    out.insert(out.end(), py_ids.begin() + static_cast<ptrdiff_t>(from),
               py_ids.begin() + static_cast<ptrdiff_t>(to));
    ++run;
  }
  return true;
}

void NativeSampling::mark(const std::vector<uint32_t>& py_ids,
                          const std::vector<RawFrame>& frames, format::Encoder& enc,
                          std::vector<uint32_t>& out) {
  if (!marker_)
    marker_ = enc.internFrame(
        enc.internNativeFunction(enc.internString("<psrec>"),
                                 enc.internString("[native frames not captured]"),
                                 format::kFunctionNativeMissing, 0, 0),
        0);
  findRuns(py_ids, frames);
  out.clear();
  size_t run = 0;
  for (size_t i = 0; i < py_ids.size(); ++i) {
    if (run < runs_.size() && runs_[run] == i) {
      out.push_back(marker_);  // under each run: the frames that called into it
      ++run;
    }
    out.push_back(py_ids[i]);
  }
  out.push_back(marker_);  // above the innermost Python frame: what it was running
  ++counts_.marked;
}

uint32_t NativeSampling::frameId(const NativeFrame& f, bool eval, format::Encoder& enc) {
  const uint64_t key = f.pc << 1 | (f.exact ? 1u : 0u);
  auto it = frame_ids_.find(key);
  if (it != frame_ids_.end()) return it->second;
  const uint32_t kind = eval ? format::kFunctionEvalLoop : format::kFunctionNative;
  uint32_t function;
  int64_t line;
  if (f.module < 0) {
    // Code no file holds (generated at run time): one function for all of it, the pc lost.
    function = enc.internNativeFunction(enc.internString("[anonymous]"), 0, kind, 0, 0);
    line = 0;
  } else {
    const NativeModule& m = modules_.modules()[static_cast<size_t>(f.module)];
    const uint32_t path = enc.internString(m.path);
    const uint32_t build = m.build_id.empty() ? 0 : enc.internString(m.build_id);
    const uint64_t link_pc = f.pc - m.bias;
    std::string name;
    uint64_t offset = 0;
    if (modules_.symbolize(f.module, f.callSite(), &name, &offset)) {
      const uint64_t start = f.callSite() - m.bias - offset;
      function = enc.internNativeFunction(path, enc.internString(name), kind, build, start);
      line = static_cast<int64_t>(link_pc - start);
    } else {
      const uint32_t unnamed = modules_.isInterpreter(f.module) && !eval
                                   ? format::kFunctionInterpreterUnnamed : kind;
      function = enc.internNativeFunction(path, 0, unnamed, build, 0);
      line = static_cast<int64_t>(link_pc);
    }
  }
  const uint32_t id = enc.internFrame(function, line);
  frame_ids_.emplace(key, id);
  return id;
}

}  // namespace psrec::recorder
