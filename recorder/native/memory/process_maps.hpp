// The target's memory map (/proc/PID/maps) and the ELF files behind it: symbol and section
// lookup with the load bias applied, for libpython and for statically linked interpreters.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace psrec::recorder {

struct MapEntry {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t offset = 0;
  uint64_t inode = 0;
  std::string perms;
  std::string path;
};

std::vector<MapEntry> readMaps(pid_t pid);

// A read-only view of an ELF64 file on disk. Owns the mapping.
class ElfFile {
 public:
  // Opens path as the target sees it (through /proc/PID/root when pid > 0, else the path
  // itself, else the target's mapping of it in /proc/PID/map_files).
  static std::optional<ElfFile> open(const std::string& path, pid_t pid = 0);
  // The file a mapping of process pid maps, whatever its path leads to now
  // (/proc/PID/map_files/START-END): the very file, even one replaced on disk since.
  static std::optional<ElfFile> openMapping(pid_t pid, uint64_t start, uint64_t end);
  // An ELF image that no file holds, copied out of process pid's memory at [start, end): the
  // kernel's vDSO, which the kernel maps whole.
  static std::optional<ElfFile> copyOf(pid_t pid, uint64_t start, uint64_t end);
  ~ElfFile();
  ElfFile(ElfFile&& other) noexcept;
  ElfFile& operator=(ElfFile&&) = delete;
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;

  // Unbiased (link-time) address of a symbol in .dynsym or .symtab.
  std::optional<uint64_t> symbol(const char* name) const;
  // Link-time address and size of a section.
  std::optional<std::pair<uint64_t, uint64_t>> section(const char* name) const;
  // Link-time vaddr of the PT_LOAD segment that starts at file offset 0 (page-aligned).
  uint64_t firstLoadVaddr() const { return first_load_vaddr_; }
  // The inode of the file opened.
  uint64_t inode() const { return inode_; }
  // Reads bytes at a link-time address from the file (initialised data only).
  bool readAt(uint64_t vaddr, void* dst, size_t len) const;
  // Scans read-only data for a version string like "3.10.13"; returns PY_VERSION_HEX-like or 0.
  uint32_t scanVersionString() const;
  // The bytes of the file at a link-time address, when [vaddr, vaddr + len) lies in the file
  // part of one loaded segment; null otherwise. Valid as long as the ElfFile.
  const uint8_t* bytesAt(uint64_t vaddr, size_t len) const;
  // The GNU build id (NT_GNU_BUILD_ID) in lowercase hex; empty when the file has none.
  std::string buildId() const;
  // Link-time address and size of the segment PT_GNU_EH_FRAME (.eh_frame_hdr); {0, 0} if none.
  std::pair<uint64_t, uint64_t> ehFrameHdr() const;
  // Every function symbol of .symtab and .dynsym with a nonzero address, as link-time address,
  // size and name (duplicates between the two tables included).
  struct Symbol {
    uint64_t addr;
    uint64_t size;
    const char* name;  // in the file's string table: valid as long as the ElfFile
    bool global;       // STB_GLOBAL or STB_WEAK (exported names before local aliases)
  };
  std::vector<Symbol> functionSymbols() const;

 private:
  ElfFile() = default;
  static std::optional<ElfFile> fromFd(int fd);
  bool parse();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  uint64_t first_load_vaddr_ = 0;
  uint64_t inode_ = 0;
};

// A binary mapped into the target: its path, where it is loaded and its ELF file.
struct LoadedBinary {
  std::string path;
  uint64_t load_bias = 0;  // runtime address = link-time address + load_bias
};

// Computes the load bias of a binary from the target's maps.
std::optional<uint64_t> loadBias(const std::vector<MapEntry>& maps, const std::string& path,
                                 const ElfFile& elf);

}  // namespace psrec::recorder
