// A CPython process we are attached to: where its runtime is, which version it runs and the
// field table for that version. Attaching reads the maps and ELF files once; nothing here runs
// in the sampling loop except the memory reader it owns.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "recorder/native/cpython/layout.hpp"
#include "recorder/native/memory/remote_memory.hpp"

namespace psrec::recorder {

struct TargetInfo {
  pid_t pid = 0;
  std::string executable;   // /proc/PID/exe
  std::string binary;       // the ELF holding _PyRuntime (libpython or the executable)
  bool shared_libpython = false;
  uint32_t version_hex = 0;
  std::string version;         // "3.11.2"
  std::string version_source;  // how the version was found
  std::string layout_source;   // "built-in 3.11 table" or "_Py_DebugOffsets"
  std::string layout_warning;  // set when the version is newer than psrec knows
  bool free_threaded = false;
  // The layout has a thread's own "GIL requested" field (3.15+, builds with a GIL): samples
  // say which threads wait for the GIL.
  bool gil_requested_known = false;
  uint64_t runtime_addr = 0;
  uint64_t code_type_addr = 0;  // &PyCode_Type in the target, 0 if unknown
  uint64_t load_bias = 0;
};

class PythonProcess {
 public:
  // Throws RecorderError (no such process, permission denied, not Python, unsupported).
  static std::unique_ptr<PythonProcess> attach(pid_t pid);

  PythonProcess(const PythonProcess&) = delete;
  PythonProcess& operator=(const PythonProcess&) = delete;

  RemoteMemory& mem() { return mem_; }
  const cpython::Layout& layout() const { return layout_; }
  const TargetInfo& info() const { return info_; }
  pid_t pid() const { return info_.pid; }

  // The main interpreter (_PyRuntime.interpreters.head); 0 before the runtime is initialised.
  uint64_t mainInterpreter();
  // A pass that could not read the process read it again from the runtime: the head read
  // may have been one the process had not finished writing.
  void forgetInterpreter() { interp_ = 0; }

 private:
  PythonProcess(pid_t pid) : mem_(pid) {}

  RemoteMemory mem_;
  cpython::Layout layout_;
  TargetInfo info_;
  uint64_t interp_ = 0;
};

// The command line of a process (NUL-separated args joined with spaces); empty if gone.
std::string processCommandLine(pid_t pid);
// /proc/PID/comm.
std::string processName(pid_t pid);
// What identifies the program image a process runs: it changes with every exec and with
// nothing else. The kernel gives each exec fresh random bytes (the auxiliary vector's
// AT_RANDOM) at an address of the new stack: their address and value, with the entry point
// and program headers' address, hashed. 0 when it cannot be read (gone, no access, between
// the two halves of an exec).
uint64_t processImage(pid_t pid);

}  // namespace psrec::recorder
