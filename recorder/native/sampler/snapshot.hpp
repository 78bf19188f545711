// A one-off stack dump of every thread of a process (psrec dump PID).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "recorder/native/asyncio/asyncio_tasks.hpp"
#include "recorder/native/python/python_process.hpp"
#include "recorder/native/sampler/thread_stats.hpp"

namespace psrec::recorder {

struct FrameDump {
  std::string filename;
  std::string name;
  int line = 0;
  // The frame was entered from C: it is the first (outermost) frame an evaluation-loop call
  // runs. Every frame is, before 3.11.
  bool entry = false;
};

// A native frame as `dump --native` gives it: named here, from the target's own files.
struct NativeFrameDump {
  uint64_t pc = 0;
  bool exact = false;      // pc is the frame's own; else a return address
  std::string module;      // the binary's path as the target sees it; empty outside any
  std::string build_id;
  std::string function;    // empty when no symbol covers pc
  uint64_t offset = 0;     // from the function's start, else from the module's start
  bool eval = false;       // a frame of the interpreter's evaluation loop
};

struct ThreadDump {
  uint64_t python_tid = 0;
  uint64_t native_tid = 0;
  std::string name;
  bool gil_known = false;
  bool gil_held = false;
  bool cpu_known = false;
  bool on_cpu = false;
  bool truncated = false;
  std::string error;  // non-empty when the stack could not be read
  std::vector<FrameDump> frames;  // innermost first
  bool python = true;             // a thread of the interpreter (false: native frames only)
  std::vector<NativeFrameDump> native;  // innermost first (with native only)
  std::string native_end;         // how the native walk ended: root, no-info, failed, truncated
  std::string native_error;       // why there are no native frames
};

struct ProcessDump {
  TargetInfo info;
  std::vector<ThreadDump> threads;
  std::vector<std::string> native_replaced;  // binaries replaced on disk while mapped
  TaskList tasks;                             // with tasks: its asyncio tasks
};

// Attaches (throws RecorderError) and reads every thread's stack once. With blocking, the
// process is stopped while it is read. With native, it is stopped too (a thread's registers
// can be read only then), and each thread's native stack is read and named; threads of the
// process that run no Python come after those that do.
// With tasks, the process's asyncio tasks are read too, in the same stop, for at most
// kTaskStopNs from its start: the tasks not read by then are read after the process is
// resumed (TaskList::past_deadline says so), so that a process with a hundred thousand tasks
// is not held for seconds.
ProcessDump dumpProcess(pid_t pid, bool blocking, bool native = false, bool tasks = false);
inline constexpr uint64_t kTaskStopNs = 100000000;

// What dumpThreads read besides the dumps: each thread's ref and frame addresses (for the
// tasks read after it), and the interpreter.
struct ThreadsRead {
  std::vector<ThreadRef> refs;
  std::vector<std::vector<uint64_t>> stacks;
  uint64_t interp = 0;
};
// Each thread's CPU state by its id in the target (as ThreadDump::native_tid), read before a
// stop: a stopped thread is off its CPU because it was stopped.
using CpuBefore = std::map<uint64_t, ThreadCpu>;
// Same for an already attached process, its code objects looked up in codes; a thread's CPU
// state from cpu_before where it has one, else read now.
std::vector<ThreadDump> dumpThreads(PythonProcess& proc, CodeCache& codes,
                                    ThreadsRead* read = nullptr,
                                    const CpuBefore* cpu_before = nullptr);

}  // namespace psrec::recorder
