// Code objects of one target process, resolved once: file, (qualified) name, first line and the
// line table, plus the encoder ids handed out for them. Entries are keyed by address but
// checked against more than the address (type, name/file/line-table pointers, first line),
// because the garbage collector reuses addresses for new code objects.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "format/native/encoder.hpp"
#include "recorder/native/python/python_process.hpp"

namespace psrec::recorder {

struct CodeKey {
  uint64_t type = 0;
  uint64_t filename = 0;
  uint64_t name = 0;
  uint64_t linetable = 0;
  int32_t firstlineno = 0;
  int64_t size = 0;  // ob_size: code units in 3.11+
  bool operator==(const CodeKey& o) const {
    return type == o.type && filename == o.filename && name == o.name &&
           linetable == o.linetable && firstlineno == o.firstlineno && size == o.size;
  }
};

struct CodeInfo {
  uint64_t addr = 0;
  CodeKey key;
  std::string filename;
  std::string name;  // co_qualname where the version has it, else co_name
  std::string linetable;
  int firstlineno = 0;
  // 3.11+: the bytes its frames take on the data stack (header included); 0 when unknown.
  uint64_t frame_bytes = 0;
  // An interpreter trampoline rather than Python code (see CodeCache::resolve).
  bool shim = false;
  uint64_t validated_pass = 0;
  // CLOCK_MONOTONIC when what is cached here was read (a copy older than that may have meant
  // another code object at the same address).
  uint64_t resolved_ns = 0;
  // Ids in the recording's encoder; 0 until first used.
  uint32_t function_id = 0;
  std::unordered_map<int32_t, uint32_t> frame_ids;  // instruction byte offset -> frame id
  std::unordered_map<int32_t, uint8_t> call_sites;  // instruction byte offset -> what it pushes
  // Free-threaded 3.14+: where each thread-local copy of the bytecode lies, by tlbc index
  // (index 0, co_code_adaptive, is not listed); 0 where not read yet.
  std::vector<uint64_t> tlbc_bases;

  int lineAt(cpython::LineTable kind, int byte_offset) const;
};

class CodeCache {
 public:
  explicit CodeCache(PythonProcess& proc) : proc_(proc) {}
  CodeCache(const CodeCache&) = delete;
  CodeCache& operator=(const CodeCache&) = delete;

  // Validates (one batched read) every address not yet validated in this pass and resolves
  // new or changed code objects. Returns false if any address is not a readable code object.
  bool prepare(const uint64_t* codes, size_t n, uint64_t pass);
  // Marks addr validated in this pass if it was validated in the previous one (the caller
  // knows the object stayed alive in between). False if that is not the case.
  bool carryOver(uint64_t addr, uint64_t pass) {
    auto it = entries_.find(addr);
    if (it == entries_.end() || it->second->validated_pass + 1 < pass) return false;
    it->second->validated_pass = pass;
    return true;
  }
  // The entry for addr if it was validated in the given pass.
  CodeInfo* get(uint64_t addr, uint64_t pass);
  // The entry for addr, validated or not: for a frame known to be alive since it was.
  CodeInfo* peek(uint64_t addr) {
    auto it = entries_.find(addr);
    return it == entries_.end() ? nullptr : it->second.get();
  }
  const CodeInfo* peek(uint64_t addr) const {
    auto it = entries_.find(addr);
    return it == entries_.end() ? nullptr : it->second.get();
  }
  // 3.11+: what the instruction at raw_instr (a frame's instruction pointer) can push: bit 0
  // a function's frame, bit 1 a generator's (cpython/call_sites.hpp); 3 where the version has
  // no table, 0 when it cannot be read. Read from the target once per offset.
  uint8_t pushes(CodeInfo& info, uint64_t raw_instr, int32_t tlbc = 0);
  // Validates and resolves a single code object now (for one-off dumps).
  CodeInfo* lookup(uint64_t addr, uint64_t pass) {
    return prepare(&addr, 1, pass) ? get(addr, pass) : nullptr;
  }

  // Byte offset of the current instruction from the frame's raw instruction field (and, on
  // free-threaded 3.14+, the frame's tlbc index); -1 for a frame that has not started, -2 for
  // an instruction pointer outside the code (a torn read).
  int byteOffset(CodeInfo& info, uint64_t raw_instr, int32_t tlbc = 0);

  size_t size() const { return entries_.size(); }
  uint64_t resolutions() const { return resolutions_; }
  uint64_t invalidations() const { return invalidations_; }

 private:
  bool resolve(CodeInfo& info);
  // Where the copy of the bytecode that raw_instr points into begins (see tlbc_bases); 0 when
  // it cannot be read.
  uint64_t bytecodeBase(CodeInfo& info, int32_t tlbc, uint64_t raw_instr);
  CodeKey keyFrom(const uint8_t* header) const;
  // Whether the strings of pending_[i], as read with its header, are still info's.
  bool sameTexts(const CodeInfo& info, size_t i) const;

  PythonProcess& proc_;
  std::unordered_map<uint64_t, std::unique_ptr<CodeInfo>> entries_;
  std::vector<uint64_t> pending_;
  std::vector<uint8_t> headers_;
  // File name, name and line table of each pending code object already known, as they are
  // now at the addresses it had them (sameTexts).
  static constexpr size_t kTexts = 3;
  static constexpr size_t kTextWindow = 96;
  std::vector<uint8_t> texts_;
  std::vector<uint32_t> text_lens_;
  std::vector<size_t> text_reqs_, header_reqs_;  // their requests in plan_
  ReadPlan plan_;
  uint64_t resolutions_ = 0;
  uint64_t invalidations_ = 0;
};

// The recording's FUNCTION id of a code object, defined in enc when first needed.
uint32_t functionId(format::Encoder& enc, CodeInfo& info);

}  // namespace psrec::recorder
