#include "recorder/native/python/code_cache.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <ctime>

#include "recorder/native/python/line_table.hpp"
#include "recorder/native/python/py_objects.hpp"

namespace psrec::recorder {

using cpython::kAbsent;

int CodeInfo::lineAt(cpython::LineTable kind, int byte_offset) const {
  return lineFor(kind, linetable, firstlineno, byte_offset);
}

CodeKey CodeCache::keyFrom(const uint8_t* header) const {
  const auto& l = proc_.layout();
  StructView<cpython::st::Code> v(header, static_cast<size_t>(l.code_size));
  CodeKey k;
  k.type = v.ptr(l.object_type);
  k.filename = v.ptr(l.code_filename);
  k.name = v.ptr(l.code_qualname != kAbsent ? l.code_qualname : l.code_name);
  k.linetable = v.ptr(l.code_linetable);
  k.firstlineno = v.get<int32_t>(l.code_firstlineno);
  k.size = l.code_adaptive != kAbsent ? v.get<int64_t>(l.var_size) : 0;
  return k;
}

bool CodeCache::prepare(const uint64_t* codes, size_t n, uint64_t pass) {
  const auto& l = proc_.layout();
  const size_t hsize = static_cast<size_t>(l.code_size);
  pending_.clear();
  for (size_t i = 0; i < n; ++i) {
    auto it = entries_.find(codes[i]);
    if (it != entries_.end() && it->second->validated_pass == pass) continue;
    if (std::find(pending_.begin(), pending_.end(), codes[i]) == pending_.end())
      pending_.push_back(codes[i]);
  }
  if (pending_.empty()) return true;
  headers_.resize(pending_.size() * hsize);
  texts_.resize(pending_.size() * kTexts * kTextWindow);
  text_lens_.assign(pending_.size() * kTexts, 0);
  text_reqs_.assign(pending_.size() * kTexts, SIZE_MAX);
  header_reqs_.resize(pending_.size());
  plan_.clear();
  int windows = 0;
  for (size_t i = 0; i < pending_.size(); ++i) {
    header_reqs_[i] = plan_.add(pending_[i], headers_.data() + i * hsize, hsize);
    // A code object known by its address is checked by its strings too, as they are now at
    // the addresses it had them: all of them may have been freed and made again, each at
    // the address of the last (code compiled and run again and again, as exec and eval do).
    // Up to the end of the page each lies in (whose object is mapped), at least its header.
    auto it = entries_.find(pending_[i]);
    if (it == entries_.end()) continue;
    const CodeKey& k = it->second->key;
    const uint64_t at[kTexts] = {k.filename, k.name, k.linetable};
    const size_t least[kTexts] = {static_cast<size_t>(l.unicode_compact_size),
                                  static_cast<size_t>(l.unicode_compact_size),
                                  static_cast<size_t>(static_cast<int32_t>(l.bytes_sval))};
    for (size_t t = 0; t < kTexts; ++t) {
      const size_t len = std::min<size_t>(
          kTextWindow, std::max<size_t>(least[t], 4096 - (at[t] & 4095)));
      text_lens_[i * kTexts + t] = static_cast<uint32_t>(len);
      text_reqs_[i * kTexts + t] =
          plan_.add(at[t], texts_.data() + (i * kTexts + t) * kTextWindow, len);
      ++windows;
    }
  }
  // One system call for every code object of the sample that needs checking; one that cannot
  // be read fails the sample (a torn read). A string that cannot be read (freed, its arena
  // given back) is not the code object's any more.
  plan_.run(proc_.mem(), windows);
  for (size_t i = 0; i < pending_.size(); ++i)
    if (!plan_.ok(header_reqs_[i])) return false;
  const uint64_t code_type = proc_.info().code_type_addr;
  for (size_t i = 0; i < pending_.size(); ++i) {
    CodeKey key = keyFrom(headers_.data() + i * hsize);
    if (code_type && key.type != code_type) return false;  // not a code object: torn read
    if (!key.filename || !key.name || !key.linetable) return false;
    auto& slot = entries_[pending_[i]];
    if (slot && slot->key == key && sameTexts(*slot, i)) {
      slot->validated_pass = pass;
      continue;
    }
    if (slot) ++invalidations_;
    auto info = std::make_unique<CodeInfo>();
    info->addr = pending_[i];
    info->key = key;
    info->firstlineno = key.firstlineno;
    if (l.code_stacksize != kAbsent && l.code_nlocalsplus != kAbsent) {
      StructView<cpython::st::Code> v(headers_.data() + i * hsize, hsize);
      const int32_t stack = v.get<int32_t>(l.code_stacksize);
      const int32_t locals = v.get<int32_t>(l.code_nlocalsplus);
      if (stack >= 0 && locals >= 0 && stack + static_cast<int64_t>(locals) < (1 << 20))
        info->frame_bytes = static_cast<uint64_t>(l.iframe_size) +
                            8 * static_cast<uint64_t>(stack + static_cast<int64_t>(locals));
    }
    if (!resolve(*info)) {
      entries_.erase(pending_[i]);
      return false;
    }
    info->validated_pass = pass;
    slot = std::move(info);
  }
  return true;
}

bool CodeCache::sameTexts(const CodeInfo& info, size_t i) const {
  const auto& l = proc_.layout();
  const uint8_t* text = texts_.data() + i * kTexts * kTextWindow;
  const uint32_t* len = text_lens_.data() + i * kTexts;
  for (size_t t = 0; t < kTexts; ++t)
    if (!plan_.ok(text_reqs_[i * kTexts + t])) return false;
  return unicodeHeadMatches(l, text, len[0], info.filename) &&
         unicodeHeadMatches(l, text + kTextWindow, len[1], info.name) &&
         bytesHeadMatches(l, text + 2 * kTextWindow, len[2], info.linetable);
}

CodeInfo* CodeCache::get(uint64_t addr, uint64_t pass) {
  auto it = entries_.find(addr);
  if (it == entries_.end() || it->second->validated_pass != pass) return nullptr;
  return it->second.get();
}

bool CodeCache::resolve(CodeInfo& info) {
  ++resolutions_;
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  // Taken before the strings are read: a copy older than this saw them as read here, or a
  // code object freed since.
  info.resolved_ns = static_cast<uint64_t>(now.tv_sec) * 1000000000ull +
                     static_cast<uint64_t>(now.tv_nsec);
  if (!readUnicode(proc_.mem(), proc_.layout(), info.key.filename, info.filename)) return false;
  if (!readUnicode(proc_.mem(), proc_.layout(), info.key.name, info.name)) return false;
  if (!readBytes(proc_.mem(), proc_.layout(), info.key.linetable, info.linetable, 1 << 20)) return false;
  // 3.13+ pushes a trampoline frame under every __init__ called by CALL_ALLOC_AND_ENTER_INIT:
  // the static code object _Py_InitCleanup (Python/specialize.c), whose file and name are
  // both "__init__"; no code compiled from a file has that file name.
  info.shim = proc_.layout().version_hex >= 0x030D0000 && info.filename == "__init__" &&
              info.name == "__init__";
  return true;
}

uint8_t CodeCache::pushes(CodeInfo& info, uint64_t raw_instr, int32_t tlbc) {
  const auto& l = proc_.layout();
  const cpython::CallSites& sites = l.call_sites;
  if (!sites.known()) return 3;
  int off = byteOffset(info, raw_instr, tlbc);
  if (off < 0) return 0;  // not started: it cannot be calling
  auto it = info.call_sites.find(off);
  if (it != info.call_sites.end()) return it->second;
  const uint64_t at = bytecodeBase(info, tlbc, raw_instr) + static_cast<uint64_t>(off);
  const size_t back = std::min<size_t>(sites.max_back, static_cast<size_t>(off) / 2);
  uint16_t units[16];
  if (back + 1 > sizeof units / sizeof units[0] ||
      proc_.mem().read(at - back * 2, units, (back + 1) * 2) != ReadStatus::kOk)
    return 0;
  uint8_t what = sites.pushes(units, back + 1);
  info.call_sites.emplace(off, what);
  return what;
}

uint64_t CodeCache::bytecodeBase(CodeInfo& info, int32_t tlbc, uint64_t raw_instr) {
  const auto& l = proc_.layout();
  const uint64_t own = info.addr + static_cast<uint64_t>(l.code_adaptive);
  if (tlbc == 0 || l.code_tlbc == kAbsent) return own;
  // A thread's own copy of a code object's bytecode (Include/internal/pycore_code.h,
  // _PyCodeArray {Py_ssize_t size; char *entries[]}, entries[0] being co_code_adaptive).
  // Copies are made once per thread index and kept while the code object lives; the array
  // itself may be replaced when it grows, so a copy that does not hold the instruction is
  // looked up again.
  if (tlbc < 0 || tlbc > 4096) return 0;
  const uint64_t bytes = static_cast<uint64_t>(std::max<int64_t>(info.key.size, 0)) * 2;
  auto holds = [&](uint64_t base) { return base && raw_instr + 1 >= base && raw_instr < base + bytes; };
  const size_t idx = static_cast<size_t>(tlbc);
  if (idx < info.tlbc_bases.size() && holds(info.tlbc_bases[idx])) return info.tlbc_bases[idx];
  uint64_t array = 0;
  int64_t size = 0;
  uint64_t base = 0;
  if (!proc_.mem().readValue(info.addr + static_cast<uint64_t>(l.code_tlbc), array) || !array ||
      !proc_.mem().readValue(array, size) || size <= tlbc ||
      !proc_.mem().readValue(array + 8 + 8 * idx, base) || !base)
    return 0;
  if (info.tlbc_bases.size() <= idx) info.tlbc_bases.resize(idx + 1, 0);
  info.tlbc_bases[idx] = base;
  return base;
}

int CodeCache::byteOffset(CodeInfo& info, uint64_t raw_instr, int32_t tlbc) {
  const auto& l = proc_.layout();
  if (l.frame_model == cpython::FrameModel::kFrameObject) {
    int lasti = static_cast<int32_t>(raw_instr);
    if (lasti < 0) return -1;
    // 3.10 counts f_lasti in code units; 3.8-3.9 in bytes.
    return l.line_table == cpython::LineTable::kLinetable ? lasti * 2 : lasti;
  }
  const uint64_t first = bytecodeBase(info, tlbc, raw_instr);
  if (!first) return -2;
  if (raw_instr < first) return -1;  // a frame that has not started (prev_instr = first - 1)
  uint64_t off = raw_instr - first;
  if (off > (1u << 30)) return -2;
  return static_cast<int>(off & ~uint64_t{1});
}

uint32_t functionId(format::Encoder& enc, CodeInfo& info) {
  if (!info.function_id)
    info.function_id = enc.internFunction(enc.internString(info.filename),
                                          enc.internString(info.name),
                                          static_cast<uint32_t>(info.firstlineno));
  return info.function_id;
}

}  // namespace psrec::recorder
