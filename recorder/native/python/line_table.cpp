#include "recorder/native/python/line_table.hpp"

namespace psrec::recorder {

int lineFromLnotab(std::string_view table, int firstlineno, int byte_offset) {
  if (byte_offset < 0) return firstlineno;
  int line = firstlineno;
  int addr = 0;
  for (size_t i = 0; i + 1 < table.size(); i += 2) {
    addr += static_cast<uint8_t>(table[i]);
    if (addr > byte_offset) break;
    line += static_cast<int8_t>(table[i + 1]);
  }
  return line;
}

int lineFromLinetable(std::string_view table, int firstlineno, int byte_offset) {
  if (byte_offset < 0) return firstlineno;
  int line = firstlineno;
  int end = 0;
  for (size_t i = 0; i + 1 < table.size(); i += 2) {
    int start = end;
    end += static_cast<uint8_t>(table[i]);
    int delta = static_cast<int8_t>(table[i + 1]);
    int range_line;
    if (delta == -128) {
      range_line = 0;
    } else {
      line += delta;
      range_line = line;
    }
    if (byte_offset >= start && byte_offset < end) return range_line;
  }
  return 0;
}

namespace {

struct Cursor {
  const uint8_t* p;
  const uint8_t* end;
  bool ok = true;
  uint8_t next() {
    if (p >= end) {
      ok = false;
      return 0;
    }
    return *p++;
  }
  // 6-bit groups, least significant first; bit 6 (0x40) says another group follows.
  uint32_t varint() {
    uint8_t b = next();
    uint32_t v = b & 63;
    unsigned shift = 6;
    while ((b & 64) && ok && shift < 32) {
      b = next();
      v |= static_cast<uint32_t>(b & 63) << shift;
      shift += 6;
    }
    return v;
  }
  int32_t svarint() {
    uint32_t u = varint();
    return (u & 1) ? -static_cast<int32_t>(u >> 1) : static_cast<int32_t>(u >> 1);
  }
};

}  // namespace

int lineFromLocations(std::string_view table, int firstlineno, int byte_offset) {
  if (byte_offset < 0) return firstlineno;
  int unit = byte_offset / 2;
  Cursor c{reinterpret_cast<const uint8_t*>(table.data()),
           reinterpret_cast<const uint8_t*>(table.data()) + table.size()};
  int line = firstlineno;
  int start = 0;
  while (c.p < c.end && c.ok) {
    uint8_t head = c.next();
    if (!(head & 0x80)) return 0;  // not an entry start: corrupt table
    int code = (head >> 3) & 15;
    int length = (head & 7) + 1;
    bool has_line = true;
    if (code == 15) {
      has_line = false;  // no location
    } else if (code == 14) {
      line += c.svarint();  // long form: line delta, end line delta, column, end column
      c.varint();
      c.varint();
      c.varint();
    } else if (code == 13) {
      line += c.svarint();  // no column
    } else if (code >= 10) {
      line += code - 10;  // one-line form: line delta in the code, then column, end column
      c.next();
      c.next();
    } else {
      c.next();  // short form: same line, one byte of columns
    }
    if (unit >= start && unit < start + length) return has_line ? line : 0;
    start += length;
  }
  return 0;
}

int lineFor(cpython::LineTable kind, std::string_view table, int firstlineno, int byte_offset) {
  switch (kind) {
    case cpython::LineTable::kLnotab: return lineFromLnotab(table, firstlineno, byte_offset);
    case cpython::LineTable::kLinetable: return lineFromLinetable(table, firstlineno, byte_offset);
    case cpython::LineTable::kLocations: return lineFromLocations(table, firstlineno, byte_offset);
  }
  return 0;
}

}  // namespace psrec::recorder
