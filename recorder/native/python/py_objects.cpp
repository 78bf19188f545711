#include "recorder/native/python/py_objects.hpp"

#include <algorithm>
#include <cstring>

namespace psrec::recorder {

using cpython::InstanceDict;
using cpython::kAbsent;

namespace {

// Include/object.h: tp_flags bits.
constexpr uint64_t kTpflagsInlineValues = 1ull << 2;  // 3.13+
constexpr uint64_t kTpflagsManagedDict = 1ull << 4;   // 3.11+
constexpr uint64_t kTpflagsHeapType = 1ull << 9;
// Include/internal/pycore_dict.h (3.11+): dk_kind.
constexpr uint8_t kDictKeysGeneral = 0;

// PyASCIIObject.state bit-fields: interned, then kind:3, compact:1, ascii:1 from the
// layout's unicode_kind_bit.
struct StrState {
  uint32_t kind;
  bool compact;
  bool ascii;
  StrState(uint32_t s, const cpython::Layout& l)
      : kind((s >> l.unicode_kind_bit) & 7),
        compact((s >> (l.unicode_kind_bit + 3)) & 1),
        ascii((s >> (l.unicode_kind_bit + 4)) & 1) {}
};

void putUtf8(std::string& out, uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) cp = 0xFFFD;
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
}

uint64_t word(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

bool readUnicode(RemoteMemory& mem, const cpython::Layout& l, uint64_t addr, std::string& out,
                 size_t max_len) {
  // The header and, in the same system call, the text of a short string.
  uint8_t head[kUnicodeHead];
  ReadStatus rs;
  const size_t got = mem.readSome(addr, head, sizeof head, &rs);
  return readUnicodeFrom(mem, l, addr, head, got, out, max_len);
}

bool readUnicodeFrom(RemoteMemory& mem, const cpython::Layout& l, uint64_t addr,
                     const uint8_t* head, size_t got, std::string& out, size_t max_len) {
  size_t hsize = static_cast<size_t>(l.unicode_compact_size);
  if (got < hsize) return false;
  StructView<cpython::st::Unicode> v(head, hsize);
  StrState st(v.get<uint32_t>(l.unicode_state), l);
  int64_t length = v.get<int64_t>(l.unicode_length);
  if (!st.compact || length < 0 || static_cast<uint64_t>(length) > max_len ||
      (st.kind != 1 && st.kind != 2 && st.kind != 4))
    return false;
  const size_t data_at =
      static_cast<size_t>(st.ascii ? l.unicode_ascii_size : l.unicode_compact_size);
  std::string raw(static_cast<size_t>(length) * st.kind, '\0');
  if (data_at + raw.size() <= got)
    std::memcpy(raw.data(), head + data_at, raw.size());
  else if (!raw.empty() && mem.read(addr + data_at, raw.data(), raw.size()) != ReadStatus::kOk)
    return false;
  out.clear();
  if (st.ascii) {
    out = std::move(raw);
    return true;
  }
  for (int64_t i = 0; i < length; ++i) {
    uint32_t cp = 0;
    std::memcpy(&cp, raw.data() + i * st.kind, st.kind);  // little-endian
    putUtf8(out, cp);
  }
  return true;
}

bool unicodeHeadMatches(const cpython::Layout& l, const uint8_t* head, size_t got,
                        const std::string& utf8) {
  const size_t hsize = static_cast<size_t>(l.unicode_compact_size);
  if (got < hsize) return false;
  StructView<cpython::st::Unicode> v(head, hsize);
  const StrState st(v.get<uint32_t>(l.unicode_state), l);
  const int64_t length = v.get<int64_t>(l.unicode_length);
  if (!st.compact || length < 0) return false;
  if (!st.ascii) {
    int64_t points = 0;  // code points of the text: bytes that do not continue one
    for (unsigned char c : utf8) points += (c & 0xC0) != 0x80;
    return points == length;
  }
  if (static_cast<size_t>(length) != utf8.size()) return false;
  const size_t data_at = static_cast<size_t>(l.unicode_ascii_size);
  const size_t have = got > data_at ? std::min(got - data_at, utf8.size()) : 0;
  return std::memcmp(head + data_at, utf8.data(), have) == 0;
}

bool bytesHeadMatches(const cpython::Layout& l, const uint8_t* head, size_t got,
                      const std::string& contents) {
  const size_t size_at = static_cast<size_t>(static_cast<int32_t>(l.var_size));
  const size_t data_at = static_cast<size_t>(static_cast<int32_t>(l.bytes_sval));
  if (got < size_at + 8 || got < data_at) return false;
  int64_t size = 0;
  std::memcpy(&size, head + size_at, 8);
  if (size < 0 || static_cast<size_t>(size) != contents.size()) return false;
  const size_t have = std::min(got - data_at, contents.size());
  return std::memcmp(head + data_at, contents.data(), have) == 0;
}

bool readBytes(RemoteMemory& mem, const cpython::Layout& l, uint64_t addr, std::string& out,
               size_t max_len) {
  int64_t size = 0;
  if (!mem.readValue(addr + static_cast<uint64_t>(l.var_size), size)) return false;
  if (size < 0 || static_cast<size_t>(size) > max_len) return false;
  out.assign(static_cast<size_t>(size), '\0');
  if (size == 0) return true;
  return mem.read(addr + static_cast<uint64_t>(l.bytes_sval), out.data(), out.size()) ==
         ReadStatus::kOk;
}

const ObjectReader::TypeInfo* ObjectReader::typeOf(uint64_t obj, uint64_t* type_addr) {
  uint64_t type = 0;
  if (!obj || !mem_.readValue(obj + static_cast<uint64_t>(l_.object_type), type) || !type)
    return nullptr;
  if (type_addr) *type_addr = type;
  auto it = types_.find(type);
  if (it != types_.end()) return &it->second;
  if (l_.type_flags == kAbsent || l_.type_basicsize == kAbsent) return nullptr;
  int32_t end = std::max<int32_t>({l_.type_basicsize, l_.type_flags, l_.type_dictoffset,
                                   l_.heaptype_cached_keys}) + 8;
  buf_.resize(static_cast<size_t>(end));
  // Static types are shorter than heap types: read what is there.
  ReadStatus st;
  size_t got = mem_.readSome(type, buf_.data(), buf_.size(), &st);
  StructView<cpython::st::HeapType> v(buf_.data(), got);
  if (!v.has(l_.type_flags, 8)) return nullptr;
  TypeInfo t;
  t.flags = v.get<uint64_t>(l_.type_flags);
  t.basicsize = v.get<int64_t>(l_.type_basicsize);
  t.dictoffset = v.get<int64_t>(l_.type_dictoffset);
  if (t.flags & kTpflagsHeapType) t.cached_keys = v.ptr(l_.heaptype_cached_keys);
  return &types_.emplace(type, t).first->second;
}

bool ObjectReader::isStr(uint64_t obj) {
  uint64_t type = 0;
  return str_type_ && typeOf(obj, &type) && type == str_type_;
}

bool ObjectReader::keysEntries(uint64_t keys, uint64_t values, std::vector<DictEntry>& out,
                               size_t max, bool inline_values) {
  out.clear();
  if (!keys || l_.dictkeys_nentries == kAbsent || l_.dictkeys_indices == kAbsent) return false;
  // The header and, in the same system call, the index and entries of a small table.
  uint8_t head[512];
  ReadStatus rs;
  const size_t got = static_cast<size_t>(l_.dictkeys_indices) > sizeof head
                         ? 0 : mem_.readSome(keys, head, sizeof head, &rs);
  if (got < static_cast<size_t>(l_.dictkeys_indices)) return false;
  StructView<cpython::st::DictKeys> v(head, static_cast<size_t>(l_.dictkeys_indices));
  int64_t nentries = v.get<int64_t>(l_.dictkeys_nentries);
  uint64_t index_bytes = 0;
  size_t entry_size = 24;  // PyDictKeyEntry: hash, key, value
  bool has_hash = true;
  if (l_.dictkeys_log2_size != kAbsent) {  // 3.11+
    uint8_t log2_size = v.get<uint8_t>(l_.dictkeys_log2_size);
    uint8_t log2_bytes = v.get<uint8_t>(l_.dictkeys_log2_index_bytes);
    if (log2_size > 30 || log2_bytes > 34) return false;
    index_bytes = uint64_t{1} << log2_bytes;
    if (v.get<uint8_t>(l_.dictkeys_kind) != kDictKeysGeneral) {
      entry_size = 16;  // PyDictUnicodeEntry: key, value
      has_hash = false;
    }
  } else {  // 3.8-3.10: dk_size slots of 1, 2, 4 or 8 bytes
    int64_t size = v.get<int64_t>(l_.dictkeys_size);
    if (size <= 0 || size > (int64_t{1} << 30) || (size & (size - 1))) return false;
    uint64_t width = size <= 0xff ? 1 : size <= 0xffff ? 2 : 4;
    index_bytes = static_cast<uint64_t>(size) * width;
  }
  if (nentries < 0 || static_cast<uint64_t>(nentries) > max) return false;
  const size_t n = static_cast<size_t>(nentries);
  if (n == 0) return true;
  const uint64_t ent_off = static_cast<uint64_t>(l_.dictkeys_indices) + index_bytes;
  buf_.resize(n * entry_size + n * 8);
  uint8_t* ent = buf_.data();
  uint8_t* vals = ent + n * entry_size;
  if (ent_off + n * entry_size <= got)
    std::memcpy(ent, head + ent_off, n * entry_size);
  else if (mem_.read(keys + ent_off, ent, n * entry_size) != ReadStatus::kOk)
    return false;
  size_t nvals = n;
  if (values) {
    uint64_t array = values + static_cast<uint64_t>(l_.dictvalues_values);
    if (l_.instance_dict == InstanceDict::kInlineValues) {
      // 3.13+ PyDictValues starts {capacity, size, embedded, valid}: only capacity slots
      // exist; values inside an object are in use only while valid (a dict's own are).
      uint8_t hdr[4];
      if (mem_.read(values, hdr, sizeof hdr) != ReadStatus::kOk || (inline_values && !hdr[3]))
        return false;
      nvals = std::min<size_t>(n, hdr[0]);
    }
    if (nvals && mem_.read(array, vals, nvals * 8) != ReadStatus::kOk) return false;
  }
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* e = ent + i * entry_size;
    DictEntry d;
    d.has_hash = has_hash;
    if (has_hash) d.hash = word(e);
    d.key = word(e + (has_hash ? 8 : 0));
    d.value = values ? (i < nvals ? word(vals + i * 8) : 0) : word(e + (has_hash ? 16 : 8));
    if (d.key && d.value) out.push_back(d);
  }
  return true;
}

bool ObjectReader::dictEntries(uint64_t dict, std::vector<DictEntry>& out, size_t max_entries) {
  out.clear();
  if (!dict || l_.dict_keys == kAbsent || l_.dict_values == kAbsent) return false;
  uint64_t keys = 0, values = 0;
  if (l_.dict_values == l_.dict_keys + 8) {  // every version so far: one read
    uint64_t both[2];
    if (mem_.read(dict + static_cast<uint64_t>(l_.dict_keys), both, sizeof both) !=
        ReadStatus::kOk)
      return false;
    keys = both[0];
    values = both[1];
  } else if (!mem_.readValue(dict + static_cast<uint64_t>(l_.dict_keys), keys) ||
             !mem_.readValue(dict + static_cast<uint64_t>(l_.dict_values), values)) {
    return false;
  }
  return keysEntries(keys, values, out, max_entries);
}

uint64_t ObjectReader::findKey(const std::vector<DictEntry>& entries, std::string_view key) {
  auto known = interned_.find(std::string(key));
  if (known != interned_.end()) {
    for (const auto& e : entries)
      if (e.key == known->second) return e.value;
  }
  // Compare the text of every key of the right length, reading all headers in few calls.
  const size_t ascii = static_cast<size_t>(l_.unicode_ascii_size);
  const size_t len = ascii + key.size();
  if (len > 256) return 0;
  std::vector<uint8_t> heads(std::min<size_t>(entries.size(), 1024) * len);
  ReadPlan plan;
  for (size_t base = 0; base < entries.size(); base += 1024) {
    const size_t m = std::min<size_t>(entries.size() - base, 1024);
    plan.clear();
    for (size_t i = 0; i < m; ++i) plan.add(entries[base + i].key, heads.data() + i * len, len);
    plan.run(mem_, static_cast<int>(m));  // a key that cannot be read whole is skipped
    for (size_t i = 0; i < m; ++i) {
      if (!plan.ok(i)) continue;
      StructView<cpython::st::Unicode> v(heads.data() + i * len, len);
      StrState s(v.get<uint32_t>(l_.unicode_state), l_);
      if (!s.compact || !s.ascii ||
          v.get<int64_t>(l_.unicode_length) != static_cast<int64_t>(key.size()) ||
          std::memcmp(heads.data() + i * len + ascii, key.data(), key.size()) != 0)
        continue;
      interned_[std::string(key)] = entries[base + i].key;
      str_type_ = v.ptr(l_.object_type);
      return entries[base + i].value;
    }
  }
  return 0;
}

uint64_t ObjectReader::dictGet(uint64_t dict, std::string_view key) {
  if (!dictEntries(dict, entries_)) return 0;
  return findKey(entries_, key);
}

uint64_t ObjectReader::attribute(uint64_t obj, std::string_view name) {
  const TypeInfo* t = typeOf(obj);
  if (!t) return 0;
  uint64_t dict = 0, values = 0;
  const bool managed = (t->flags & kTpflagsManagedDict) != 0;
  // A class deriving from a C type that has a __dict__ slot of its own (_asyncio.Future's
  // subclasses) keeps its attributes there, on every version.
  const InstanceDict where = !managed && t->dictoffset > 0 ? InstanceDict::kDictOffset
                                                           : l_.instance_dict;
  switch (where) {
    case InstanceDict::kDictOffset:
      if (t->dictoffset <= 0 ||
          !mem_.readValue(obj + static_cast<uint64_t>(t->dictoffset), dict))
        return 0;
      break;
    case InstanceDict::kManagedPair: {  // Include/internal/pycore_object.h (3.11)
      if (!managed) return 0;
      uint64_t pair[2];
      if (mem_.read(obj - 32, pair, sizeof pair) != ReadStatus::kOk) return 0;
      values = pair[0];
      dict = pair[1];
      break;
    }
    case InstanceDict::kTaggedPointer: {  // PyDictOrValues (3.12)
      if (!managed) return 0;
      uint64_t w = 0;
      if (!mem_.readValue(obj + static_cast<uint64_t>(int64_t{l_.managed_dict}), w)) return 0;
      if (w & 1)
        values = w + 1;
      else
        dict = w;
      break;
    }
    case InstanceDict::kInlineValues:  // 3.13+: the managed dict wins once it exists
      if (!managed || !mem_.readValue(obj + static_cast<uint64_t>(int64_t{l_.managed_dict}), dict))
        return 0;
      if (!dict && (t->flags & kTpflagsInlineValues))
        values = obj + static_cast<uint64_t>(t->basicsize);
      break;
  }
  if (dict) return dictGet(dict, name);
  if (!values || !t->cached_keys || !keysEntries(t->cached_keys, values, entries_, 4096, true))
    return 0;
  return findKey(entries_, name);
}

}  // namespace psrec::recorder
