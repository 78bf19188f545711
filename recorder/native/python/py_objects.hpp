// Reading CPython objects out of the target: str, bytes, dict entries and instance attributes,
// for what psrec looks up by name (code object strings, thread names). Every read may fail or
// be torn; nothing here throws, and a failed lookup is simply "not found".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "recorder/native/cpython/layout.hpp"
#include "recorder/native/memory/remote_memory.hpp"

namespace psrec::recorder {

// A compact str as UTF-8; false unless addr holds one of at most max_len code points.
bool readUnicode(RemoteMemory& mem, const cpython::Layout& l, uint64_t addr, std::string& out,
                 size_t max_len = 4096);
// The same from the first `got` bytes of the object already read into head (the rest of a
// long text is read); readUnicode reads kUnicodeHead bytes at once.
constexpr size_t kUnicodeHead = 192;
bool readUnicodeFrom(RemoteMemory& mem, const cpython::Layout& l, uint64_t addr,
                     const uint8_t* head, size_t got, std::string& out, size_t max_len);
// Whether the first `got` bytes of a str object are those of a compact str with the text
// utf8: its length, and as much of its text as they hold (a string made since at the address
// of another has another length or text, most often).
bool unicodeHeadMatches(const cpython::Layout& l, const uint8_t* head, size_t got,
                        const std::string& utf8);
// The same for a bytes object and its contents.
bool bytesHeadMatches(const cpython::Layout& l, const uint8_t* head, size_t got,
                      const std::string& contents);
// A bytes object's contents; false unless it holds at most max_len bytes.
bool readBytes(RemoteMemory& mem, const cpython::Layout& l, uint64_t addr, std::string& out,
               size_t max_len);

struct DictEntry {
  uint64_t key = 0;
  uint64_t value = 0;
  uint64_t hash = 0;  // valid only when has_hash (tables of str keys keep no hash from 3.11)
  bool has_hash = false;
};

class ObjectReader {
 public:
  ObjectReader(RemoteMemory& mem, const cpython::Layout& l) : mem_(mem), l_(l) {}

  // The live entries of a dict, in table order (false when it cannot be read or has more than
  // max_entries).
  bool dictEntries(uint64_t dict, std::vector<DictEntry>& out, size_t max_entries = 1 << 16);
  // The object stored under a str key in a dict, or as an attribute in an instance's own
  // attributes (not its class's); 0 when absent or unreadable.
  uint64_t dictGet(uint64_t dict, std::string_view key);
  uint64_t attribute(uint64_t obj, std::string_view name);
  // Whether obj is a str (known once a str key has been matched; false before).
  bool isStr(uint64_t obj);

 private:
  struct TypeInfo {
    uint64_t flags = 0;
    int64_t basicsize = 0;
    int64_t dictoffset = 0;
    uint64_t cached_keys = 0;  // heap types: the keys their instances share
  };
  const TypeInfo* typeOf(uint64_t obj, uint64_t* type_addr = nullptr);
  // Entries of a keys object, with values from a split table's values when values != 0 (an
  // object's inline values when inline_values, else a dict's).
  bool keysEntries(uint64_t keys, uint64_t values, std::vector<DictEntry>& out, size_t max,
                   bool inline_values = false);
  // The value of the entry whose key is the str `key` (0 if none).
  uint64_t findKey(const std::vector<DictEntry>& entries, std::string_view key);

  RemoteMemory& mem_;
  const cpython::Layout& l_;
  std::unordered_map<std::string, uint64_t> interned_;  // key text -> the str object holding it
  std::unordered_map<uint64_t, TypeInfo> types_;
  uint64_t str_type_ = 0;
  std::vector<DictEntry> entries_;
  std::vector<uint8_t> buf_;
};

}  // namespace psrec::recorder
