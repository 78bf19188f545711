// A thread's native (C, C++, Rust) stack: the binaries mapped executable in the target, each
// with its build id, call-frame information and function symbols, and the walk from a thread's
// registers through its callers.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "recorder/native/native_unwind/call_frame_info.hpp"
#include "recorder/native/memory/process_maps.hpp"
#include "recorder/native/memory/remote_memory.hpp"

namespace psrec::recorder {

struct NativeModule {
  std::string path;      // as the target sees it
  std::string build_id;  // hex; empty when the file has none
  // The file at its path is no longer the one mapped (replaced on disk: an upgrade): named
  // from the mapped file all the same.
  bool replaced = false;
  uint64_t start = 0;    // the lowest and highest address of its mappings
  uint64_t end = 0;
  uint64_t bias = 0;     // run-time address = link-time address + bias
  std::unique_ptr<ElfFile> elf;           // null when the file could not be opened
  std::unique_ptr<CallFrameInfo> cfi;     // null with elf
  std::unique_ptr<ElfFile> debug;         // its detached debug file, if installed
  std::vector<ElfFile::Symbol> symbols;   // functions by address, read on first use
  bool symbols_read = false;
  // The interpreter's evaluation loop (_PyEval_EvalFrameDefault), link-time [begin, end)
  // ranges (its body, and the part a compiler moved out of line), in the module that holds
  // the interpreter; none elsewhere.
  std::vector<std::pair<uint64_t, uint64_t>> eval_loop;
};

// How a native walk ended.
enum class NativeEnd : uint8_t {
  kRoot,       // the outermost frame says it has no caller: the whole stack was read
  kNoInfo,     // a frame in code with no call-frame information (and no frame pointer chain)
  kFailed,     // a rule could not be applied: the stack could not be read there
  kTruncated,  // the frame limit
};

struct NativeFrame {
  uint64_t pc = 0;          // the frame's pc, or its return address (see exact)
  bool exact = false;       // pc is where the frame is (the innermost, above a signal frame)
  int32_t module = -1;      // index in NativeModules, -1 outside every mapped file
  // The address whose function the frame is in: a return address names the call before it.
  uint64_t callSite() const { return exact ? pc : pc - 1; }
};

class NativeModules {
 public:
  explicit NativeModules(pid_t pid) : pid_(pid) { refresh(); }
  // Reads the target's maps again (libraries loaded since), keeping the files already open.
  void refresh();
  const std::vector<NativeModule>& modules() const { return modules_; }
  // What to say of each binary replaced on disk while mapped, met so far (one sentence each).
  const std::vector<std::string>& replaced() const { return replaced_; }
  int32_t find(uint64_t pc) const;
  // Finds the evaluation loop in the module that holds the run-time address of _PyRuntime: the
  // largest function its call-frame information describes, with the functions its symbols
  // name _PyEval_EvalFrameDefault or a compiler's part of it (.cold, .part.N).
  void findEvalLoop(uint64_t runtime_addr);
  // Whether a run-time address (a pc, or a return address minus one) is in the loop.
  bool inEvalLoop(int32_t module, uint64_t at) const;
  // Whether a module is the interpreter's binary (the one findEvalLoop found).
  bool isInterpreter(int32_t module) const {
    return module >= 0 && static_cast<size_t>(module) < modules_.size() &&
           !modules_[static_cast<size_t>(module)].eval_loop.empty();
  }
  // The function around a run-time address: its name and the address's offset in it; false
  // when the module names no function there. The symbols of a stripped binary's detached
  // debug file (/usr/lib/debug/.build-id/, in the target's root or here) count as its own.
  bool symbolize(int32_t module, uint64_t pc, std::string* name, uint64_t* offset);

 private:
  pid_t pid_;
  std::vector<NativeModule> modules_;  // by start address
  std::vector<std::string> replaced_;
};

// The walk itself. Reads the top of the thread's stack in one system call (or takes a copy of
// it made when the registers were) and the rest, if a frame lies beyond it, a word at a time.
class NativeWalker {
 public:
  NativeWalker(NativeModules& modules, RemoteMemory& mem) : modules_(modules), mem_(mem) {}
  NativeEnd walk(const NativeRegisters& regs, size_t max_frames, std::vector<NativeFrame>& out,
                 const std::vector<uint8_t>* copy = nullptr);

 private:
  // The walk from regs (exact: the innermost frame, or above a signal frame); a walk that may
  // branch tries each candidate caller of its first frame with no call-frame information.
  NativeEnd walkFrom(NativeRegisters regs, bool exact, WordReader& words, size_t max_frames,
                     std::vector<NativeFrame>& out, bool may_branch);
  // A frame whose code has no call-frame information: its caller from its frame pointer, or
  // from the first word above its stack pointer that is a return address (after a call
  // instruction, in a binary whose call-frame information takes the walk on from there).
  bool framePointer(const NativeRegisters& regs, WordReader& words, NativeRegisters& next);
  // The words [first, first + count) above the stack pointer; in a scan deep in the stack,
  // the caller's caller must be code too.
  bool scan(const NativeRegisters& regs, WordReader& words, NativeRegisters& next,
            uint64_t first, uint64_t count, bool deep);
  // A frame too large for the scan (a kernel that realigns its stack and keeps a buffer on
  // it: OpenBLAS's Haswell dgemm, 29 KiB) keeps its caller's stack pointer in a register, to
  // restore it: the words just above each callee-saved register that points up the stack.
  bool anchored(const NativeRegisters& regs, WordReader& words, NativeRegisters& next);
  // Whether w, the word at `at`, a return address, takes the walk to its caller.
  bool tryReturnAddress(const NativeRegisters& regs, WordReader& words, uint64_t at,
                        uint64_t w, bool deep, NativeRegisters& next);
  // A frame whose rule needs the frame pointer, not known: its caller's registers (next)
  // with the frame pointer at `at`, if the words there can be where it points (the caller's
  // frame pointer, then a return address) and the frame's rule agrees.
  bool frameBase(const NativeRegisters& regs, bool exact, int32_t module, WordReader& words,
                 uint64_t at, NativeRegisters& next);
  // The same for the words above sp, the first `most` that can be (their addresses in bases).
  size_t frameBases(const NativeRegisters& regs, bool exact, int32_t module, WordReader& words,
                    size_t most, NativeRegisters* out, uint64_t* bases);
  bool returnAddress(uint64_t pc) const;
  static constexpr size_t kCandidates = 3;
  static constexpr uint64_t kScanWords = 256;
  static constexpr uint64_t kAnchorWords = 32;
  static constexpr uint64_t kAnchorReach = 1u << 20;  // how far above sp a register may point

  NativeModules& modules_;
  RemoteMemory& mem_;
  std::vector<uint8_t> window_;
  // Frame bases that took a walk to its outermost frame, by (pc, sp) of the frame that needed
  // one: a thread that waits where it waited before is walked without the search.
  std::unordered_map<uint64_t, uint64_t> base_hints_;
  static constexpr size_t kBaseHints = 4096;
};

// A stopped thread's registers (ptrace must hold it stopped); false when they cannot be read.
bool stoppedThreadRegisters(pid_t tid, NativeRegisters& regs);

// Stops one thread for as long as it takes to read its registers and the top stack_bytes of
// its stack (ptrace: PTRACE_SEIZE, PTRACE_INTERRUPT, PTRACE_DETACH, a signal that came
// meanwhile handed back): for a thread blocked since before its perf events were opened,
// which the kernel will not sample until it runs again. False when ptrace is refused (or
// the thread is traced already, or gone).
bool interruptedThreadRegisters(pid_t tid, RemoteMemory& mem, size_t stack_bytes,
                                NativeRegisters& regs, std::vector<uint8_t>& stack);

// A stopped thread's registers and the top stack_bytes of its stack (ptrace must hold it
// stopped).
bool stoppedThreadStack(pid_t tid, RemoteMemory& mem, size_t stack_bytes, NativeRegisters& regs,
                        std::vector<uint8_t>& stack);

}  // namespace psrec::recorder
