#include "recorder/native/python/version_detect.hpp"

#include <cctype>
#include <cstring>

#include "recorder/native/python/offsets.hpp"

namespace psrec::recorder {

std::string versionString(uint32_t hex, bool micro_known) {
  std::string s = std::to_string(hex >> 24) + "." + std::to_string((hex >> 16) & 0xFF);
  if (!micro_known) return s;
  s += "." + std::to_string((hex >> 8) & 0xFF);
  uint32_t level = (hex >> 4) & 0xF, serial = hex & 0xF;
  if (level == 0xA) s += "a" + std::to_string(serial);
  if (level == 0xB) s += "b" + std::to_string(serial);
  if (level == 0xC) s += "rc" + std::to_string(serial);
  return s;
}

uint32_t versionFromFileName(const std::string& path) {
  std::string base = path.substr(path.rfind('/') + 1);
  size_t p = base.find("python");
  if (p == std::string::npos) return 0;
  p += 6;
  if (p + 2 >= base.size() || !std::isdigit(static_cast<unsigned char>(base[p])) || base[p + 1] != '.')
    return 0;
  uint32_t major = static_cast<uint32_t>(base[p] - '0');
  size_t q = p + 2;
  uint32_t minor = 0;
  size_t digits = 0;
  while (q < base.size() && std::isdigit(static_cast<unsigned char>(base[q])) && digits < 3)
    minor = minor * 10 + static_cast<uint32_t>(base[q++] - '0'), ++digits;
  if (digits == 0) return 0;
  return (major << 24) | (minor << 16);
}

VersionInfo detectVersion(RemoteMemory& mem, const ElfFile& elf, uint64_t load_bias,
                          uint64_t runtime_addr, const std::string& binary_path) {
  VersionInfo v;
  // Both sources below are constant data that the interpreter never writes. They are read from
  // the binary on disk first: right after exec the dynamic loader may have mapped the file
  // only in part (the whole extent from offset 0 first, then each segment in place), and a
  // memory read then returns bytes from the wrong file offset.
  // 1. 3.13+ put _Py_DebugOffsets first in _PyRuntime, starting with the "xdebugpy" cookie.
  uint8_t head[16];
  const uint64_t runtime_link = runtime_addr - load_bias;
  if (elf.readAt(runtime_link, head, sizeof head) ||
      mem.read(runtime_addr, head, sizeof head) == ReadStatus::kOk) {
    uint32_t hex = debugOffsetsVersion(head, sizeof head);
    if (hex) {
      v.hex = hex;
      v.source = "_Py_DebugOffsets";
      return v;
    }
  }
  // 2. 3.11+ export Py_Version (const unsigned long, PY_VERSION_HEX).
  if (auto sym = elf.symbol("Py_Version")) {
    uint32_t hex = 0;
    if ((elf.readAt(*sym, &hex, sizeof hex) || mem.readValue(*sym + load_bias, hex)) &&
        (hex >> 24) == 3) {
      v.hex = hex;
      v.source = "Py_Version";
      return v;
    }
  }
  // 3. The version string in the binary gives the micro version too; prefer it to the name.
  uint32_t from_name = versionFromFileName(binary_path);
  uint32_t from_string = elf.scanVersionString();
  if (from_string && (!from_name || (from_string >> 16) == (from_name >> 16))) {
    v.hex = from_string;
    v.source = "version string";
    return v;
  }
  if (from_name) {
    v.hex = from_name;
    v.source = "file name";
  }
  return v;
}

}  // namespace psrec::recorder
