// Works out which CPython a process runs, most reliable source first: the target's
// _Py_DebugOffsets (3.13+), the Py_Version symbol (3.11+), the binary's file name, and last a
// version string in the binary's read-only data.
#pragma once

#include <cstdint>
#include <string>

#include "recorder/native/memory/process_maps.hpp"
#include "recorder/native/memory/remote_memory.hpp"

namespace psrec::recorder {

struct VersionInfo {
  uint32_t hex = 0;    // PY_VERSION_HEX (micro 0 when only the file name told us)
  std::string source;  // "_Py_DebugOffsets", "Py_Version", "file name", "version string"
};

VersionInfo detectVersion(RemoteMemory& mem, const ElfFile& elf, uint64_t load_bias,
                          uint64_t runtime_addr, const std::string& binary_path);

// "3.11.2", "3.13.0rc1", or "3.9" when the micro version is unknown.
std::string versionString(uint32_t hex, bool micro_known = true);

// Parses "python3.10" / "libpython3.10.so.1.0" / "libpython3.10d.so" file names.
uint32_t versionFromFileName(const std::string& path);

}  // namespace psrec::recorder
