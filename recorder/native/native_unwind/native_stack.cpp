#include "recorder/native/native_unwind/native_stack.hpp"

#include <errno.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "recorder/native/memory/process_pause.hpp"

namespace psrec::recorder {

namespace {

// The kernel's vDSO as /proc/PID/maps names it.
const std::string kVdso = "[vdso]";
// How far past a symbol without a size an address is still named after it.
constexpr uint64_t kUnsizedSymbolBytes = 256;
// The top of the stack read in one system call: deep enough for the frames of most stacks.
constexpr size_t kStackWindow = 64 * 1024;

bool executablePath(const MapEntry& m) {
  return !m.path.empty() && m.path[0] == '/' && m.perms.size() > 2 && m.perms[2] == 'x';
}

class StackWords : public WordReader {
 public:
  StackWords(RemoteMemory& mem, uint64_t base, const std::vector<uint8_t>& bytes, size_t got)
      : mem_(mem), base_(base), bytes_(bytes), got_(got) {}
  bool word(uint64_t addr, uint64_t* out) override {
    if (addr >= base_ && addr - base_ <= got_ && got_ - (addr - base_) >= 8) {
      std::memcpy(out, bytes_.data() + (addr - base_), 8);
      return true;
    }
    // Beyond the copy: the stack read a block at a time, as the walk goes up it.
    const uint64_t block = addr & ~(kBlock - 1);
    if (addr - block > kBlock - 8) return mem_.readValue(addr, *out);
    for (const Block& b : blocks_) {
      if (b.addr == block) {
        std::memcpy(out, b.bytes + (addr - block), 8);
        return true;
      }
    }
    if (blocks_.size() >= kMaxBlocks) return mem_.readValue(addr, *out);
    blocks_.emplace_back();
    Block& b = blocks_.back();
    b.addr = block;
    if (mem_.read(block, b.bytes, kBlock) != ReadStatus::kOk) {
      blocks_.pop_back();
      return mem_.readValue(addr, *out);
    }
    std::memcpy(out, b.bytes + (addr - block), 8);
    return true;
  }

 private:
  static constexpr uint64_t kBlock = 4096;
  static constexpr size_t kMaxBlocks = 64;
  struct Block {
    uint64_t addr;
    uint8_t bytes[kBlock];
  };
  RemoteMemory& mem_;
  uint64_t base_;
  const std::vector<uint8_t>& bytes_;
  size_t got_;
  std::vector<Block> blocks_;
};

}  // namespace

void NativeModules::refresh() {
  // Each file's range, its first mapping (which /proc/PID/map_files opens) and its inode.
  struct Seen {
    uint64_t start, end;
    const MapEntry* first;
    bool executable;
  };
  std::map<std::string, Seen> files;
  const std::vector<MapEntry> maps = readMaps(pid_);
  for (const MapEntry& m : maps) {
    const bool vdso = m.path == kVdso;
    if (m.path.empty() || (m.path[0] != '/' && !vdso)) continue;
    auto it = files.find(m.path);
    if (it == files.end()) {
      files.emplace(m.path, Seen{m.start, m.end, &m, executablePath(m) || vdso});
    } else {
      it->second.start = std::min(it->second.start, m.start);
      it->second.end = std::max(it->second.end, m.end);
      it->second.executable |= executablePath(m);
    }
  }
  static const std::string kDeleted = " (deleted)";
  std::vector<NativeModule> next;
  for (const auto& [shown, seen] : files) {
    if (!seen.executable) continue;
    NativeModule mod;
    // A module already open at the same place keeps its file and symbols.
    for (NativeModule& old : modules_) {
      if (old.start == seen.start && old.end == seen.end && old.elf &&
          (old.path == shown || old.path + kDeleted == shown)) {
        mod = std::move(old);
        break;
      }
    }
    if (!mod.elf) {
      std::string path = shown;
      const bool deleted = path.size() > kDeleted.size() &&
                           path.compare(path.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0;
      if (deleted) path.resize(path.size() - kDeleted.size());
      mod.path = path;
      mod.start = seen.start;
      mod.end = seen.end;
      // The mapped file itself; by its path only where map_files is refused, and then only
      // if the path still leads to it. The vDSO, which no file holds, copied out of the
      // target (the kernel maps the whole image, its symbols and call-frame information).
      const bool vdso = shown == kVdso;
      auto elf = vdso ? ElfFile::copyOf(pid_, seen.start, seen.end)
                      : ElfFile::openMapping(pid_, seen.first->start, seen.first->end);
      auto at_path = vdso ? std::nullopt : ElfFile::open(path, pid_);
      mod.replaced =
          deleted || (at_path && seen.first->inode && at_path->inode() != seen.first->inode);
      if (!elf && at_path && !mod.replaced) elf.emplace(std::move(*at_path));
      if (elf) {
        mod.elf = std::make_unique<ElfFile>(std::move(*elf));
        mod.build_id = mod.elf->buildId();
        mod.bias = loadBias(maps, shown, *mod.elf).value_or(0);
        mod.cfi = std::make_unique<CallFrameInfo>(*mod.elf);
      }
      if (mod.replaced)
        replaced_.push_back(
            path + " was replaced on disk while the target had it mapped (an upgrade?): " +
            (mod.elf ? "its frames are named from the mapped file, build id " +
                           (mod.build_id.empty() ? std::string("none") : mod.build_id)
                     : std::string("the mapped file could not be read: its frames are left "
                                   "unnamed")));
    }
    next.push_back(std::move(mod));
  }
  std::sort(next.begin(), next.end(),
            [](const NativeModule& a, const NativeModule& b) { return a.start < b.start; });
  modules_ = std::move(next);
}

int32_t NativeModules::find(uint64_t pc) const {
  auto it = std::upper_bound(modules_.begin(), modules_.end(), pc,
                             [](uint64_t v, const NativeModule& m) { return v < m.start; });
  if (it == modules_.begin()) return -1;
  --it;
  return pc < it->end ? static_cast<int32_t>(it - modules_.begin()) : -1;
}

void NativeModules::findEvalLoop(uint64_t runtime_addr) {
  // The module whose symbol _PyRuntime is at that address (its .bss may lie past the file's
  // mappings, so the address alone does not find it).
  NativeModule* found = nullptr;
  for (NativeModule& m : modules_) {
    if (!m.elf || runtime_addr < m.start) continue;
    auto sym = m.elf->symbol("_PyRuntime");
    if (sym && *sym + m.bias == runtime_addr) {
      found = &m;
      break;
    }
  }
  if (!found || !found->cfi) return;
  NativeModule& m = *found;
  // The largest function is the loop, stripped or not; the functions named for it are its
  // parts a compiler moved out of line (.cold, .part.N) or the loop itself.
  static const char kLoop[] = "_PyEval_EvalFrameDefault";
  const auto largest = m.cfi->largestFunction();
  if (largest.second) m.eval_loop.push_back(largest);
  for (const ElfFile::Symbol& s : m.elf->functionSymbols()) {
    if (std::strncmp(s.name, kLoop, sizeof kLoop - 1) != 0 ||
        (s.name[sizeof kLoop - 1] != '\0' && s.name[sizeof kLoop - 1] != '.'))
      continue;
    const auto range = m.cfi->functionAt(s.addr);
    if (range.second && std::find(m.eval_loop.begin(), m.eval_loop.end(), range) == m.eval_loop.end())
      m.eval_loop.push_back(range);
  }
}

bool NativeModules::inEvalLoop(int32_t module, uint64_t at) const {
  if (module < 0 || static_cast<size_t>(module) >= modules_.size()) return false;
  const NativeModule& m = modules_[static_cast<size_t>(module)];
  const uint64_t link = at - m.bias;
  for (const auto& [begin, end] : m.eval_loop)
    if (link >= begin && link < end) return true;
  return false;
}

bool NativeModules::symbolize(int32_t module, uint64_t pc, std::string* name, uint64_t* offset) {
  if (module < 0 || static_cast<size_t>(module) >= modules_.size()) return false;
  NativeModule& m = modules_[static_cast<size_t>(module)];
  if (!m.elf) return false;
  if (!m.symbols_read) {
    m.symbols = m.elf->functionSymbols();
    if (m.build_id.size() > 2) {
      const std::string debug = "/usr/lib/debug/.build-id/" + m.build_id.substr(0, 2) + "/" +
                                m.build_id.substr(2) + ".debug";
      if (auto elf = ElfFile::open(debug, pid_)) {
        if (elf->buildId() == m.build_id) {
          m.debug = std::make_unique<ElfFile>(std::move(*elf));
          const auto more = m.debug->functionSymbols();
          m.symbols.insert(m.symbols.end(), more.begin(), more.end());
        }
      }
    }
    // By address; of several at one address (aliases), the one named first: a sized one, an
    // exported one, the one with the fewest leading underscores, the shortest (clock_nanosleep
    // before __clock_nanosleep and __GI___clock_nanosleep).
    auto underscores = [](const char* n) {
      size_t k = 0;
      while (n[k] == '_') ++k;
      return k;
    };
    std::sort(m.symbols.begin(), m.symbols.end(),
              [&](const ElfFile::Symbol& a, const ElfFile::Symbol& b) {
                if (a.addr != b.addr) return a.addr < b.addr;
                if ((a.size == 0) != (b.size == 0)) return a.size != 0;
                if (a.global != b.global) return a.global;
                const size_t ua = underscores(a.name), ub = underscores(b.name);
                if (ua != ub) return ua < ub;
                const size_t la = std::strlen(a.name), lb = std::strlen(b.name);
                if (la != lb) return la < lb;
                return std::strcmp(a.name, b.name) < 0;
              });
    m.symbols_read = true;
  }
  const uint64_t at = pc - m.bias;
  auto it = std::upper_bound(m.symbols.begin(), m.symbols.end(), at,
                             [](uint64_t v, const ElfFile::Symbol& s) { return v < s.addr; });
  // The nearest symbol at or below the address that contains it (a sized symbol must).
  while (it != m.symbols.begin()) {
    --it;
    const uint64_t group = it->addr;
    // Of the symbols at this address, the first in the order above is the one named.
    while (it != m.symbols.begin() && (it - 1)->addr == group) --it;
    // A symbol without a size (_start, _init) names only a stub's worth of bytes after it:
    // farther on lies code no symbol names (a PLT), better left unnamed than misnamed.
    if ((it->size == 0 && at - it->addr < kUnsizedSymbolBytes) ||
        (it->size != 0 && at - it->addr < it->size)) {
      *name = it->name;
      *offset = at - it->addr;
      return true;
    }
    return false;
  }
  return false;
}

bool NativeWalker::framePointer(const NativeRegisters& regs, WordReader& words,
                                NativeRegisters& next) {
  const uint64_t sp = regs.r[kDwarfRsp];
  uint64_t fp = regs.r[kDwarfRbp], caller_fp = 0, ret = 0;
  if (!regs.has(kDwarfRbp) || fp < sp || fp - sp > (64u << 20) || (fp & 7) ||
      !words.word(fp, &caller_fp) || !words.word(fp + 8, &ret) || ret == 0 ||
      modules_.find(ret) < 0)
    return false;
  next = NativeRegisters();
  next.set(kDwarfRbp, caller_fp);
  next.set(kDwarfRsp, fp + 16);
  next.set(kDwarfReturn, ret);
  return true;
}

bool NativeWalker::returnAddress(uint64_t pc) const {
  const int32_t i = modules_.find(pc);
  if (i < 0) return false;
  const NativeModule& m = modules_.modules()[static_cast<size_t>(i)];
  if (!m.elf || !m.cfi) return false;
  const uint8_t* p = m.elf->bytesAt(pc - m.bias - 7, 7);
  if (!p) return false;
  // The instruction before it is a call: E8 rel32, or FF /2 (register, memory, with or
  // without a displacement or SIB byte).
  if (p[2] == 0xE8) return true;
  for (int len : {2, 3, 4, 6, 7}) {
    const uint8_t* insn = p + 7 - len;
    if (insn[0] == 0xFF && ((insn[1] >> 3) & 7) == 2) return true;
  }
  return false;
}

bool NativeWalker::tryReturnAddress(const NativeRegisters& regs, WordReader& words,
                                    uint64_t at, uint64_t w, bool deep,
                                    NativeRegisters& next) {
  // Accepted if the caller's own call-frame information takes the walk one step further (and,
  // deep, to code). A frame that reaches so far has used the callee-saved registers for its
  // own ends: they are not its caller's.
  NativeRegisters trial = regs;
  trial.known = 0;
  if (!deep)
    for (int r : {3, static_cast<int>(kDwarfRbp), 12, 13, 14, 15})  // callee-saved
      if (regs.has(r)) trial.set(r, regs.r[r]);
  trial.set(kDwarfRsp, at + 8);
  trial.set(kDwarfReturn, w);
  const int32_t i = modules_.find(w);
  const NativeModule& m = modules_.modules()[static_cast<size_t>(i)];
  NativeRegisters probe = trial;
  bool signal = false;
  const UnwindStep s = m.cfi->step(w - 1 - m.bias, probe, words, &signal);
  if (s == UnwindStep::kOutermost && !deep) {
    next = trial;
    return true;
  }
  if (s != UnwindStep::kOk) return false;
  if (deep && (!probe.has(kDwarfReturn) || modules_.find(probe.r[kDwarfReturn]) < 0 ||
               probe.r[kDwarfRsp] <= at))
    return false;
  next = trial;
  return true;
}

bool NativeWalker::scan(const NativeRegisters& regs, WordReader& words, NativeRegisters& next,
                        uint64_t first, uint64_t count, bool deep) {
  const uint64_t sp = regs.r[kDwarfRsp];
  for (uint64_t k = first; k < first + count; ++k) {
    uint64_t w;
    if (!words.word(sp + 8 * k, &w)) return false;
    if (returnAddress(w) && tryReturnAddress(regs, words, sp + 8 * k, w, deep, next)) return true;
  }
  return false;
}

bool NativeWalker::anchored(const NativeRegisters& regs, WordReader& words,
                            NativeRegisters& next) {
  const uint64_t sp = regs.r[kDwarfRsp];
  for (int r : {3, 12, 13, 14, 15, static_cast<int>(kDwarfRbp)}) {
    const uint64_t v = regs.r[r];
    if (!regs.has(r) || v <= sp + 8 * kScanWords || v - sp > kAnchorReach || (v & 7)) continue;
    if (scan(regs, words, next, (v - sp) / 8, kAnchorWords, true)) return true;
  }
  return false;
}

bool NativeWalker::frameBase(const NativeRegisters& regs, bool exact, int32_t module,
                             WordReader& words, uint64_t at, NativeRegisters& next) {
  // A frame pointer points at the caller's saved frame pointer, the return address above it.
  const NativeModule& m = modules_.modules()[static_cast<size_t>(module)];
  uint64_t ret;
  if (!words.word(at + 8, &ret) || !returnAddress(ret)) return false;
  next = regs;
  next.set(kDwarfRbp, at);
  bool signal = false;
  return m.cfi->step(regs.r[kDwarfReturn] - (exact ? 0 : 1) - m.bias, next, words, &signal) ==
             UnwindStep::kOk &&
         !signal && next.r[kDwarfReturn] == ret && next.r[kDwarfRsp] == at + 16;
}

size_t NativeWalker::frameBases(const NativeRegisters& regs, bool exact, int32_t module,
                                WordReader& words, size_t most, NativeRegisters* out,
                                uint64_t* bases) {
  const uint64_t sp = regs.r[kDwarfRsp];
  size_t n = 0;
  for (uint64_t k = 0; k < kScanWords && n < most; ++k) {
    const uint64_t at = sp + 8 * k;
    if (!frameBase(regs, exact, module, words, at, out[n])) continue;
    bases[n++] = at;
  }
  return n;
}

NativeEnd NativeWalker::walk(const NativeRegisters& regs, size_t max_frames,
                             std::vector<NativeFrame>& out, const std::vector<uint8_t>* copy) {
  out.clear();
  if (!regs.has(kDwarfReturn) || !regs.has(kDwarfRsp)) return NativeEnd::kFailed;
  const uint64_t base = regs.r[kDwarfRsp];
  size_t got = 0;
  if (copy) {
    got = copy->size();
  } else {
    window_.resize(kStackWindow);
    ReadStatus status;
    got = mem_.readSome(base, window_.data(), window_.size(), &status);
  }
  StackWords words(mem_, base, copy ? *copy : window_, got);
  return walkFrom(regs, true, words, max_frames, out, true);
}

NativeEnd NativeWalker::walkFrom(NativeRegisters regs, bool exact, WordReader& words,
                                 size_t max_frames, std::vector<NativeFrame>& out,
                                 bool may_branch) {
  for (;;) {
    if (out.size() >= max_frames) return NativeEnd::kTruncated;
    const uint64_t pc = regs.r[kDwarfReturn];
    const int32_t module = modules_.find(pc);
    out.push_back({pc, exact, module});
    const uint64_t sp = regs.r[kDwarfRsp];
    bool signal = false;
    UnwindStep step = UnwindStep::kNoInfo;
    if (module >= 0) {
      const NativeModule& m = modules_.modules()[static_cast<size_t>(module)];
      if (m.cfi) step = m.cfi->step(pc - (exact ? 0 : 1) - m.bias, regs, words, &signal);
    }
    if (step == UnwindStep::kOutermost) return NativeEnd::kRoot;
    // Where there is a choice of callers (at the walk's first frame that has one), the first
    // candidate whose walk reaches the outermost frame wins; the first otherwise.
    NativeRegisters candidates[kCandidates];
    size_t n = 0;
    // Only a walk that may branch looks for more than one.
    const size_t most = may_branch ? kCandidates : 1;
    uint64_t bases[kCandidates];
    uint64_t hint_key = 0;  // a frame-base search's (see base_hints_)
    if (step == UnwindStep::kFailed && module >= 0 && !regs.has(kDwarfRbp)) {
      // A rule of the frame's needs the frame pointer, which a thread read where it waits (in
      // /proc: its pc and sp only) does not give, when no callee saved it: an interpreter
      // built with frame pointers (3.15's) calling a system call's wrapper. A thread that
      // waits at the same pc and sp as a walk before has the base that walk found.
      hint_key = pc * 0x9E3779B97F4A7C15ull ^ sp;
      const auto hint = base_hints_.find(hint_key);
      if (hint != base_hints_.end() &&
          frameBase(regs, exact, module, words, hint->second, candidates[0])) {
        n = 1;
        hint_key = 0;
      } else {
        n = frameBases(regs, exact, module, words, most, candidates, bases);
      }
      if (n == 0) return NativeEnd::kFailed;
    } else if (step == UnwindStep::kFailed) {
      return NativeEnd::kFailed;
    } else if (step == UnwindStep::kNoInfo) {
      // Code with no call-frame information: generated at run time (outside every file: its
      // frame-pointer chain first), or hand-written assembly in a library (BLAS kernels: the
      // return address its caller pushed, found on the stack, first; then a frame too large
      // for the scan). A return address found may be stale, left by an earlier call in a part
      // of the frame not yet written.
      if (module < 0) {
        if (framePointer(regs, words, candidates[n])) ++n;
        if (n < most && scan(regs, words, candidates[n], 0, kScanWords, false)) ++n;
      } else {
        if (scan(regs, words, candidates[n], 0, kScanWords, false)) ++n;
        if (n < most && framePointer(regs, words, candidates[n])) ++n;
        if (n < most && anchored(regs, words, candidates[n])) ++n;
      }
      if (n == 0) return NativeEnd::kNoInfo;
    }
    if (n > 0) {
      if (may_branch && (n > 1 || hint_key)) {
        const size_t mark = out.size();
        for (size_t c = 0; c < n; ++c) {
          if (candidates[c].r[kDwarfRsp] <= sp) continue;
          const NativeEnd end = walkFrom(candidates[c], false, words, max_frames, out, false);
          if (end == NativeEnd::kRoot || end == NativeEnd::kTruncated) {
            if (hint_key) {
              if (base_hints_.size() >= kBaseHints) base_hints_.clear();
              base_hints_[hint_key] = bases[c];
            }
            return end;
          }
          out.resize(mark);
        }
      }
      regs = candidates[0];
    }
    // A caller's frame lies above its callee's, except across a signal (an alternate stack),
    // and where the innermost frame keeps its return address in a register with nothing on
    // the stack (vfork's, while the child runs): the same stack, another pc, once.
    const bool same_stack_ok = exact && regs.r[kDwarfRsp] == sp && regs.r[kDwarfReturn] != pc;
    if (!signal && regs.r[kDwarfRsp] <= sp && !same_stack_ok) return NativeEnd::kFailed;
    exact = signal;
  }
}

bool interruptedThreadRegisters(pid_t tid, RemoteMemory& mem, size_t stack_bytes,
                                NativeRegisters& regs, std::vector<uint8_t>& stack) {
  ThreadStop stop(tid);
  return stop.stopped() && stoppedThreadStack(tid, mem, stack_bytes, regs, stack);
}

bool stoppedThreadStack(pid_t tid, RemoteMemory& mem, size_t stack_bytes, NativeRegisters& regs,
                        std::vector<uint8_t>& stack) {
  if (!stoppedThreadRegisters(tid, regs)) return false;
  stack.resize(stack_bytes);
  ReadStatus st;
  stack.resize(mem.readSome(regs.r[kDwarfRsp], stack.data(), stack.size(), &st));
  return true;
}

bool stoppedThreadRegisters(pid_t tid, NativeRegisters& regs) {
  user_regs_struct u;
  if (ptrace(PTRACE_GETREGS, tid, nullptr, &u) != 0) return false;
  const uint64_t values[kDwarfRegisters] = {u.rax, u.rdx, u.rcx, u.rbx, u.rsi, u.rdi,
                                            u.rbp, u.rsp, u.r8,  u.r9,  u.r10, u.r11,
                                            u.r12, u.r13, u.r14, u.r15, u.rip};
  regs = NativeRegisters();
  for (int i = 0; i < kDwarfRegisters; ++i) regs.set(i, values[i]);
  return true;
}

}  // namespace psrec::recorder
