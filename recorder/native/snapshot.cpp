#include "recorder/native/snapshot.hpp"

#include "format/native/constants.hpp"
#include "recorder/native/code_cache.hpp"
#include "recorder/native/errors.hpp"
#include "recorder/native/process_pause.hpp"
#include "recorder/native/stack_reader.hpp"
#include "recorder/native/thread_list.hpp"
#include "recorder/native/thread_names.hpp"
#include "recorder/native/thread_stats.hpp"
#include "recorder/native/unwinder.hpp"

namespace psrec::recorder {

namespace {
// Reads again of a torn copy before a thread's stack is given up (as many as a sample's).
constexpr int kReadAgain = 3;
}  // namespace

std::vector<ThreadDump> dumpThreads(PythonProcess& proc) {
  Unwinder unwinder(proc);
  CodeCache codes(proc);
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
  while (list.next(t, no_hint)) {
    if (unwinder.pass.notStarted(t)) continue;
    ThreadStack stack;
    uint64_t read_again = 0;
    const StackRead got = reader.read(t, stack, interp, pass, kReadAgain, &read_again);
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
      ThreadStatFiles files(proc.pid(), static_cast<pid_t>(t.native_tid), false);
      ThreadCpu cpu = files.read();
      d.cpu_known = cpu.ok;
      d.on_cpu = cpu.running;
    }
    if (got == StackRead::kTorn) {
      d.error = "stack changed while being read";
    } else {
      const std::vector<RawFrame>& frames = reader.frames();
      d.truncated = reader.truncated();
      // Innermost first, as a traceback's last line.
      for (size_t i = frames.size(); i-- > 0;) {
        CodeInfo* info = reader.info(i);
        if (info->shim) continue;  // the __init__ trampoline (3.13+): not Python code
        FrameDump fd;
        fd.filename = info->filename;
        fd.name = info->name;
        fd.line = info->lineAt(proc.layout().line_table,
                               codes.byteOffset(*info, frames[i].instr, frames[i].tlbc));
        d.frames.push_back(std::move(fd));
      }
    }
    out.push_back(std::move(d));
  }
  return out;
}

ProcessDump dumpProcess(pid_t pid, bool blocking) {
  ProcessDump d;
  auto proc = PythonProcess::attach(pid);
  d.info = proc->info();
  if (blocking) {
    ProcessPause pause(pid);
    pause.stop();
    d.threads = dumpThreads(*proc);
  } else {
    d.threads = dumpThreads(*proc);
  }
  return d;
}

}  // namespace psrec::recorder
