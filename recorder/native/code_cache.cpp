#include "recorder/native/code_cache.hpp"

#include <algorithm>
#include <cstring>

#include "recorder/native/line_table.hpp"

namespace psrec::recorder {

using cpython::kAbsent;

int CodeInfo::lineAt(cpython::LineTable kind, int byte_offset) const {
  return lineFor(kind, linetable, firstlineno, byte_offset);
}

CodeKey CodeCache::keyFrom(const uint8_t* header) const {
  const auto& l = proc_.layout();
  StructView v(header, static_cast<size_t>(l.code_size));
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
  reqs_.clear();
  for (size_t i = 0; i < pending_.size(); ++i)
    reqs_.push_back({pending_[i], headers_.data() + i * hsize, hsize});
  // One system call for every code object of the sample that needs checking.
  bool all = true;
  for (size_t at = 0; at < reqs_.size(); at += 1024) {
    size_t cnt = std::min<size_t>(1024, reqs_.size() - at);
    if (proc_.mem().readMany(reqs_.data() + at, cnt) != ReadStatus::kOk) all = false;
  }
  if (!all) return false;
  const uint64_t code_type = proc_.info().code_type_addr;
  for (size_t i = 0; i < pending_.size(); ++i) {
    CodeKey key = keyFrom(headers_.data() + i * hsize);
    if (code_type && key.type != code_type) return false;  // not a code object: torn read
    if (!key.filename || !key.name || !key.linetable) return false;
    auto& slot = entries_[pending_[i]];
    if (slot && slot->key == key) {
      slot->validated_pass = pass;
      continue;
    }
    if (slot) ++invalidations_;
    auto info = std::make_unique<CodeInfo>();
    info->addr = pending_[i];
    info->key = key;
    info->firstlineno = key.firstlineno;
    if (!resolve(*info)) {
      entries_.erase(pending_[i]);
      return false;
    }
    info->validated_pass = pass;
    slot = std::move(info);
  }
  return true;
}

CodeInfo* CodeCache::get(uint64_t addr, uint64_t pass) {
  auto it = entries_.find(addr);
  if (it == entries_.end() || it->second->validated_pass != pass) return nullptr;
  return it->second.get();
}

bool CodeCache::resolve(CodeInfo& info) {
  ++resolutions_;
  if (!readUnicode(info.key.filename, info.filename)) return false;
  if (!readUnicode(info.key.name, info.name)) return false;
  if (!readBytes(info.key.linetable, info.linetable, 1 << 20)) return false;
  // 3.13+ pushes a trampoline frame under every __init__ called by CALL_ALLOC_AND_ENTER_INIT:
  // the static code object _Py_InitCleanup (Python/specialize.c), whose file and name are
  // both "__init__"; no code compiled from a file has that file name.
  info.shim = proc_.layout().version_hex >= 0x030D0000 && info.filename == "__init__" &&
              info.name == "__init__";
  return true;
}

uint8_t CodeCache::pushes(CodeInfo& info, uint64_t raw_instr) {
  const auto& l = proc_.layout();
  const cpython::CallSites& sites = l.call_sites;
  if (!sites.known()) return 3;
  int off = byteOffset(info.addr, raw_instr);
  if (off < 0) return 0;  // not started: it cannot be calling
  auto it = info.call_sites.find(off);
  if (it != info.call_sites.end()) return it->second;
  const uint64_t at = info.addr + static_cast<uint64_t>(l.code_adaptive) + static_cast<uint64_t>(off);
  const size_t back = std::min<size_t>(sites.max_back, static_cast<size_t>(off) / 2);
  uint16_t units[16];
  if (back + 1 > sizeof units / sizeof units[0] ||
      proc_.mem().read(at - back * 2, units, (back + 1) * 2) != ReadStatus::kOk)
    return 0;
  uint8_t what = sites.pushes(units, back + 1);
  info.call_sites.emplace(off, what);
  return what;
}

int CodeCache::byteOffset(uint64_t code_addr, uint64_t raw_instr) const {
  const auto& l = proc_.layout();
  if (l.frame_model == cpython::FrameModel::kFrameObject) {
    int lasti = static_cast<int32_t>(raw_instr);
    if (lasti < 0) return -1;
    // 3.10 counts f_lasti in code units; 3.8-3.9 in bytes.
    return l.line_table == cpython::LineTable::kLinetable ? lasti * 2 : lasti;
  }
  uint64_t first = code_addr + static_cast<uint64_t>(l.code_adaptive);
  if (raw_instr < first) return -1;  // a frame that has not started (prev_instr = first - 1)
  uint64_t off = raw_instr - first;
  if (off > (1u << 30)) return -2;
  return static_cast<int>(off & ~uint64_t{1});
}

bool CodeCache::readUnicode(uint64_t addr, std::string& out) {
  const auto& l = proc_.layout();
  uint8_t head[128];
  size_t hsize = static_cast<size_t>(l.unicode_compact_size);
  if (hsize > sizeof head || proc_.mem().read(addr, head, hsize) != ReadStatus::kOk) return false;
  StructView v(head, hsize);
  uint32_t state = v.get<uint32_t>(l.unicode_state);
  int64_t length = v.get<int64_t>(l.unicode_length);
  // PyASCIIObject.state bit-fields: interned:2, kind:3, compact:1, ascii:1 (3.8-3.13).
  uint32_t kind = (state >> 2) & 7;
  bool compact = (state >> 5) & 1;
  bool ascii = (state >> 6) & 1;
  if (!compact || length < 0 || length > 4096 || (kind != 1 && kind != 2 && kind != 4))
    return false;
  uint64_t data = addr + static_cast<uint64_t>(ascii ? l.unicode_ascii_size : l.unicode_compact_size);
  std::string raw(static_cast<size_t>(length) * kind, '\0');
  if (!raw.empty() && proc_.mem().read(data, raw.data(), raw.size()) != ReadStatus::kOk)
    return false;
  out.clear();
  if (ascii) {
    out = std::move(raw);
    return true;
  }
  auto put = [&](uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  };
  for (int64_t i = 0; i < length; ++i) {
    uint32_t cp = 0;
    std::memcpy(&cp, raw.data() + i * kind, kind);  // little-endian
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) cp = 0xFFFD;
    put(cp);
  }
  return true;
}

bool CodeCache::readBytes(uint64_t addr, std::string& out, size_t max_len) {
  const auto& l = proc_.layout();
  int64_t size = 0;
  if (!proc_.mem().readValue(addr + static_cast<uint64_t>(l.var_size), size)) return false;
  if (size < 0 || static_cast<size_t>(size) > max_len) return false;
  out.assign(static_cast<size_t>(size), '\0');
  if (size == 0) return true;
  return proc_.mem().read(addr + static_cast<uint64_t>(l.bytes_sval), out.data(), out.size()) ==
         ReadStatus::kOk;
}

}  // namespace psrec::recorder
