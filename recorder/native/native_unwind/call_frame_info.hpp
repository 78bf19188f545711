// The call-frame information of one ELF file (.eh_frame, searched through the table of
// .eh_frame_hdr) and the x86-64 unwinding step it describes: from a native frame's registers
// to its caller's. DWARF 5 §6.4 and the LSB's .eh_frame description define what is read.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "recorder/native/memory/process_maps.hpp"

namespace psrec::recorder {

// DWARF register numbers of x86-64 (System V psABI, figure 3.36); 16 is the return address.
enum : int { kDwarfRbp = 6, kDwarfRsp = 7, kDwarfReturn = 16, kDwarfRegisters = 17 };

struct NativeRegisters {
  uint64_t r[kDwarfRegisters] = {};
  uint32_t known = 0;  // bit i: r[i] holds the frame's value
  bool has(int i) const { return (known >> i) & 1u; }
  void set(int i, uint64_t v) {
    r[i] = v;
    known |= 1u << i;
  }
};

// Reads one 8-byte word of the target (a copy of its stack, or the target itself).
class WordReader {
 public:
  virtual ~WordReader() = default;
  virtual bool word(uint64_t addr, uint64_t* out) = 0;
};

enum class UnwindStep : uint8_t {
  kOk,       // regs now hold the caller's
  kOutermost,  // the frame says it has no caller (its return address is undefined)
  kNoInfo,   // no call-frame information covers the address
  kFailed,   // the information could not be applied (memory unreadable, an unknown rule)
};

class CallFrameInfo {
 public:
  // Reads the .eh_frame_hdr table of elf, which must outlive this object. Without one (or
  // with one whose table is unusable), every lookup gives kNoInfo.
  explicit CallFrameInfo(const ElfFile& elf);
  ~CallFrameInfo();
  bool usable() const { return table_ != nullptr; }

  // One step. lookup is the link-time address to find the rules for: the frame's pc for the
  // innermost frame and a signal frame's caller, else the return address minus one (the call
  // instruction). regs are the frame's registers at run time (r[16] its pc); on kOk they are
  // the caller's, and *signal_frame says whether the frame stepped out of was a signal
  // handler's trampoline (its caller's pc is then exact, not a return address).
  UnwindStep step(uint64_t lookup, NativeRegisters& regs, WordReader& mem,
                  bool* signal_frame) const;

  // The link-time range [begin, end) of the largest function the table describes (0, 0 when
  // none): in an interpreter, its evaluation loop, which no other function comes near.
  std::pair<uint64_t, uint64_t> largestFunction() const;
  // The range of the function covering a link-time address (0, 0 when none).
  std::pair<uint64_t, uint64_t> functionAt(uint64_t lookup) const;

 private:
  // The FDE of table entry i: its function's range, and where its instructions are.
  bool fde(uint64_t i, uint64_t* begin, uint64_t* range) const;
  uint64_t entryFor(uint64_t lookup) const;

  // The rules found for each address looked up, so that a frame seen again (most are, sample
  // after sample) costs no search of the table and no run of its instructions. Not shared
  // between threads: one sampler steps through a file at a time.
  struct Found;
  struct Rows;
  Found find(uint64_t lookup) const;
  std::unique_ptr<Rows> rows_;

  const ElfFile& elf_;
  const uint8_t* table_ = nullptr;  // (initial location, FDE address) pairs, datarel sdata4
  uint64_t hdr_vaddr_ = 0;
  uint64_t count_ = 0;
};

}  // namespace psrec::recorder
