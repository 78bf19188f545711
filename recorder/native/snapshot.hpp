// A one-off stack dump of every thread of a process (psrec dump PID).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "recorder/native/python_process.hpp"

namespace psrec::recorder {

struct FrameDump {
  std::string filename;
  std::string name;
  int line = 0;
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
};

struct ProcessDump {
  TargetInfo info;
  std::vector<ThreadDump> threads;
};

// Attaches (throws RecorderError) and reads every thread's stack once. With blocking, the
// process is stopped while it is read.
ProcessDump dumpProcess(pid_t pid, bool blocking);
// Same for an already attached process.
std::vector<ThreadDump> dumpThreads(PythonProcess& proc);

}  // namespace psrec::recorder
