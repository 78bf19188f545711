// LEB128 varints and zigzag, shared by the encoder and the decoder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace psrec::format {

inline void putVarint(std::string& out, uint64_t v) {
  char buf[10];
  size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out.append(buf, n);
}

inline uint64_t zigzag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t unzigzag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

inline size_t varintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Bounds-checked reader over a byte range. Every read reports failure instead of reading past
// the end, so a corrupt payload can never make the decoder touch memory outside it.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}

  bool varint(uint64_t& out) {
    uint64_t result = 0;
    unsigned shift = 0;
    while (p_ < end_) {
      uint8_t b = *p_++;
      if (shift == 63 && b > 1) return false;
      result |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) {
        out = result;
        return true;
      }
      shift += 7;
      if (shift > 63) return false;
    }
    return false;
  }
  bool byte(uint8_t& out) {
    if (p_ >= end_) return false;
    out = *p_++;
    return true;
  }
  bool bytes(size_t n, const uint8_t*& out) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
    out = p_;
    p_ += n;
    return true;
  }
  bool atEnd() const { return p_ >= end_; }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  const uint8_t* pos() const { return p_; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace psrec::format
