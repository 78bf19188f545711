#include "recorder/native/sampler/snapshot.hpp"

#include <dirent.h>

#include <cerrno>

#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "format/native/constants.hpp"
#include "recorder/native/python/code_cache.hpp"
#include "recorder/native/errors.hpp"
#include "recorder/native/native_unwind/native_stack.hpp"
#include "recorder/native/memory/process_pause.hpp"
#include "recorder/native/python/stack_reader.hpp"
#include "recorder/native/python/thread_list.hpp"
#include "recorder/native/python/thread_names.hpp"
#include "recorder/native/sampler/thread_stats.hpp"
#include "recorder/native/python/python_unwinder.hpp"

namespace psrec::recorder {

namespace {
// Reads again of a torn copy before a thread's stack is given up (as many as a sample's).
constexpr int kReadAgain = 8;
// Native frames of one thread at most: deep Python recursion before 3.11 costs a few per frame.
constexpr size_t kMaxNativeFrames = 4096;

// The process's threads: their id as the process sees it (its own pid namespace, which thread
// states give) to their id here (which ptrace takes).
std::map<uint64_t, pid_t> threadIds(pid_t pid) {
  std::map<uint64_t, pid_t> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const pid_t here = std::atoi(e->d_name);
    uint64_t inner = static_cast<uint64_t>(here);
    std::ifstream status(dir + "/" + e->d_name + "/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.compare(0, 6, "NSpid:") != 0) continue;
      std::istringstream fields(line.substr(6));
      uint64_t v;
      while (fields >> v) inner = v;  // the last is the innermost namespace's
      break;
    }
    out[inner] = here;
  }
  closedir(d);
  return out;
}

const char* endName(NativeEnd end) {
  switch (end) {
    case NativeEnd::kRoot: return "root";
    case NativeEnd::kNoInfo: return "no-info";
    case NativeEnd::kFailed: return "failed";
    case NativeEnd::kTruncated: return "truncated";
  }
  return "failed";
}

// Reads and names the native stack of a stopped thread.
void readNative(ThreadDump& d, pid_t tid, NativeModules& modules, NativeWalker& walker) {
  NativeRegisters regs;
  if (!stoppedThreadRegisters(tid, regs)) {
    d.native_error = "its registers could not be read";
    return;
  }
  std::vector<NativeFrame> frames;
  d.native_end = endName(walker.walk(regs, kMaxNativeFrames, frames));
  for (const NativeFrame& f : frames) {
    NativeFrameDump nf;
    nf.pc = f.pc;
    nf.exact = f.exact;
    if (f.module >= 0) {
      const NativeModule& m = modules.modules()[static_cast<size_t>(f.module)];
      nf.module = m.path;
      nf.build_id = m.build_id;
      const uint64_t at = f.callSite();
      nf.eval = modules.inEvalLoop(f.module, at);
      if (modules.symbolize(f.module, at, &nf.function, &nf.offset)) {
        if (!f.exact) ++nf.offset;
      } else {
        nf.offset = f.pc - m.start;
      }
    }
    d.native.push_back(std::move(nf));
  }
}

// A thread's CPU state: as it was before a stop where that was read, else as it is now.
ThreadCpu cpuOf(pid_t pid, uint64_t tid, pid_t here, const CpuBefore* before) {
  if (before) {
    auto it = before->find(tid);
    if (it != before->end()) return it->second;
  }
  ThreadStatFiles files(pid, here, false);
  return files.read();
}

}  // namespace

std::vector<ThreadDump> dumpThreads(PythonProcess& proc, CodeCache& codes, ThreadsRead* read,
                                    const CpuBefore* cpu_before) {
  const bool one_frame_per_loop = proc.layout().version_hex < 0x030B0000;
  PythonUnwinder unwinder(proc);
  // Read as the sampler reads a sample: the same checks that a copy was not torn, the same
  // reads again when it was.
  StackReader reader(proc, unwinder, codes);
  reader.setMaxDepth(format::kMaxDepth);
  std::vector<ThreadDump> out;
  PassHead head;
  // A non-blocking read can be torn; retry a few times before giving up.
  ReadStatus st = ReadStatus::kOther;
  for (int attempt = 0; attempt < 5; ++attempt) {
    st = unwinder.pass.readPassHead(head);
    if (st == ReadStatus::kOk || st == ReadStatus::kNoProcess) break;
  }
  if (st == ReadStatus::kNoProcess)
    throw RecorderError(ErrorCode::kNoSuchProcess,
                        "process " + std::to_string(proc.pid()) + " exited");
  if (st != ReadStatus::kOk)
    throw RecorderError(ErrorCode::kReadFailed, "cannot read the interpreter state of process " +
                                                    std::to_string(proc.pid()));
  std::unordered_map<uint64_t, std::string> names;
  ThreadNames(proc).read(names, true);
  const uint64_t interp = proc.mainInterpreter();
  const uint64_t pass = 1;
  // The list walked as a sampler's pass walks it: the same checks of every state's links, the
  // same walks begun again when it changed under the read.
  ThreadListWalk list(unwinder.pass);
  list.begin(interp, head);
  ThreadHead t;
  auto no_hint = [](uint64_t) -> const StackHint* { return nullptr; };
  std::map<uint64_t, pid_t> tids;  // the process's threads, read when a stop needs them
  std::vector<ThreadRef> refs;
  std::vector<std::vector<uint64_t>> stacks;  // each thread's frame addresses, as refs
  while (list.next(t, no_hint)) {
    refs.push_back({t.tstate, t.thread_id});
    stacks.emplace_back();
    if (unwinder.pass.notStarted(t)) continue;
    ThreadStack stack;
    uint64_t read_again = 0;
    // Each thread is held still for the few microseconds its read takes (where ptrace is
    // allowed, and the process was not stopped as a whole): a copy of a stack that changes
    // faster than it is read can pass every check of a torn copy (spec 10, rule 7).
    std::optional<ThreadStop> still;
    if (t.native_tid) {
      if (tids.empty()) tids = threadIds(proc.pid());
      auto it = tids.find(t.native_tid);
      if (it != tids.end()) still.emplace(it->second);
    }
    StackRead got = reader.read(t, stack, interp, pass, kReadAgain, &read_again);
    still.reset();
    if (got == StackRead::kEnded) continue;  // it exited while read: no thread of the process
    ThreadDump d;
    d.python_tid = t.thread_id;
    d.native_tid = t.native_tid;
    const GilStatus gil = unwinder.pass.gilStatus(t, head);
    d.gil_known = gil.known;
    d.gil_held = gil.held;
    auto named = names.find(t.thread_id);
    if (named != names.end()) d.name = named->second;
    if (t.native_tid) {
      if (d.name.empty()) d.name = threadComm(proc.pid(), static_cast<pid_t>(t.native_tid));
      const ThreadCpu cpu =
          cpuOf(proc.pid(), t.native_tid, static_cast<pid_t>(t.native_tid), cpu_before);
      d.cpu_known = cpu.ok;
      d.on_cpu = cpu.running;
    }
    if (got == StackRead::kTorn) {
      d.error = "stack changed while being read";
    } else {
      const std::vector<RawFrame>& frames = reader.frames();
      d.truncated = reader.truncated();
      for (const RawFrame& f : frames) stacks.back().push_back(f.addr);
      // Innermost first, as a traceback's last line.
      for (size_t i = frames.size(); i-- > 0;) {
        CodeInfo* info = reader.info(i);
        if (info->shim) continue;  // the __init__ trampoline (3.13+): not Python code
        FrameDump fd;
        fd.filename = info->filename;
        fd.name = info->name;
        fd.line = info->lineAt(proc.layout().line_table,
                               codes.byteOffset(*info, frames[i].instr, frames[i].tlbc));
        fd.entry = one_frame_per_loop || frames[i].entered;
        d.frames.push_back(std::move(fd));
      }
    }
    out.push_back(std::move(d));
  }
  if (read) {
    read->refs = std::move(refs);
    read->stacks = std::move(stacks);
    read->interp = interp;
  }
  return out;
}

namespace {

void readTasks(PythonProcess& proc, CodeCache& codes, const ThreadsRead& read, TaskList& out) {
  out = AsyncioTasks(proc, codes).read(read.interp, read.refs, nullptr, &read.stacks);
}

// Each thread's native stack, the process stopped; then those of the threads that run no
// Python.
void readAllNative(ProcessDump& d, PythonProcess& proc, pid_t pid, const CpuBefore* before) {
  NativeModules modules(pid);
  modules.findEvalLoop(d.info.runtime_addr);
  NativeWalker walker(modules, proc.mem());
  std::map<uint64_t, pid_t> tids = threadIds(pid);
  std::set<pid_t> seen;
  for (ThreadDump& t : d.threads) {
    auto it = t.native_tid ? tids.find(t.native_tid) : tids.end();
    if (it == tids.end()) {
      t.native_error = "its OS thread is not known";
      continue;
    }
    seen.insert(it->second);
    readNative(t, it->second, modules, walker);
  }
  // The threads that run no Python: a library's workers, a runtime's.
  for (const auto& [inner, here] : tids) {
    if (seen.count(here)) continue;
    ThreadDump t;
    t.python = false;
    t.native_tid = inner;
    t.name = threadComm(pid, here);
    const ThreadCpu cpu = cpuOf(pid, inner, here, before);
    t.cpu_known = cpu.ok;
    t.on_cpu = cpu.running;
    readNative(t, here, modules, walker);
    d.threads.push_back(std::move(t));
  }
  d.native_replaced = modules.replaced();
}

}  // namespace

ProcessDump dumpProcess(pid_t pid, bool blocking, bool native, bool tasks) {
  ProcessDump d;
  auto proc = PythonProcess::attach(pid);
  d.info = proc->info();
  CodeCache codes(*proc);
  ThreadsRead read;
  if (!blocking && !native) {
    d.threads = dumpThreads(*proc, codes, &read);
    if (tasks) readTasks(*proc, codes, read, d.tasks);
    return d;
  }
  // Each thread's CPU state as it was before the stop.
  CpuBefore cpu_before;
  for (const auto& [inner, here] : threadIds(pid)) {
    ThreadStatFiles files(pid, here, false);
    cpu_before[inner] = files.read();
  }
  ProcessPause pause(pid);
  const uint64_t stopped_ns = monotonicNs();
  const int stopped = pause.stop();
  if (native && stopped == EPERM)
    throw RecorderError(ErrorCode::kPermissionDenied,
                        "reading native stacks needs ptrace, which was refused for process " +
                            std::to_string(pid));
  d.threads = dumpThreads(*proc, codes, &read, &cpu_before);
  if (native) readAllNative(d, *proc, pid, &cpu_before);
  if (tasks) {
    AsyncioTasks reader(*proc, codes);
    reader.setDeadline(stopped_ns + kTaskStopNs, [&pause] { pause.resume(); });
    d.tasks = reader.read(read.interp, read.refs, nullptr, &read.stacks);
  }
  return d;
}

}  // namespace psrec::recorder
