#include "recorder/native/memory/process_maps.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace psrec::recorder {

std::vector<MapEntry> readMaps(pid_t pid) {
  std::vector<MapEntry> out;
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(in, line)) {
    MapEntry e;
    unsigned long long start, end, offset, inode = 0;
    char perms[8] = {0};
    int path_pos = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %llu %n", &start, &end, perms, &offset,
                    &inode, &path_pos) < 4)
      continue;
    e.start = start;
    e.end = end;
    e.offset = offset;
    e.inode = inode;
    e.perms = perms;
    if (path_pos > 0 && static_cast<size_t>(path_pos) < line.size()) e.path = line.substr(path_pos);
    out.push_back(std::move(e));
  }
  return out;
}

std::optional<ElfFile> ElfFile::open(const std::string& path, pid_t pid) {
  std::string clean = path;
  const std::string deleted = " (deleted)";
  if (clean.size() > deleted.size() &&
      clean.compare(clean.size() - deleted.size(), deleted.size(), deleted) == 0)
    clean.resize(clean.size() - deleted.size());
  int fd = -1;
  if (pid > 0) {
    // The target may live in another mount namespace (a container): see its file system.
    std::string via_root = "/proc/" + std::to_string(pid) + "/root" + clean;
    fd = ::open(via_root.c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (fd < 0) fd = ::open(clean.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && pid > 0) {
    // A path neither we nor the target's root can resolve (a chroot inside a container's
    // mount namespace shows paths from that namespace's root): the mapping itself still
    // leads to the file.
    for (const MapEntry& m : readMaps(pid)) {
      if (m.path != path) continue;
      char range[64];
      std::snprintf(range, sizeof range, "/%llx-%llx", static_cast<unsigned long long>(m.start),
                    static_cast<unsigned long long>(m.end));
      fd = ::open(("/proc/" + std::to_string(pid) + "/map_files" + range).c_str(),
                  O_RDONLY | O_CLOEXEC);
      break;
    }
  }
  return fromFd(fd);
}

std::optional<ElfFile> ElfFile::openMapping(pid_t pid, uint64_t start, uint64_t end) {
  char range[96];
  std::snprintf(range, sizeof range, "/proc/%d/map_files/%llx-%llx", static_cast<int>(pid),
                static_cast<unsigned long long>(start), static_cast<unsigned long long>(end));
  return fromFd(::open(range, O_RDONLY | O_CLOEXEC));
}

std::optional<ElfFile> ElfFile::copyOf(pid_t pid, uint64_t start, uint64_t end) {
  if (end <= start || end - start > (uint64_t{1} << 24)) return std::nullopt;
  const size_t size = static_cast<size_t>(end - start);
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return std::nullopt;
  struct iovec local = {p, size};
  struct iovec remote = {reinterpret_cast<void*>(start), size};
  ElfFile f;
  f.data_ = static_cast<const uint8_t*>(p);
  f.size_ = size;
  if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(size) ||
      size < sizeof(Elf64_Ehdr) || !f.parse())
    return std::nullopt;  // f's destructor unmaps
  return std::optional<ElfFile>(std::move(f));
}

std::optional<ElfFile> ElfFile::fromFd(int fd) {
  if (fd < 0) return std::nullopt;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
    ::close(fd);
    return std::nullopt;
  }
  void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return std::nullopt;
  ElfFile f;
  f.data_ = static_cast<const uint8_t*>(p);
  f.size_ = static_cast<size_t>(st.st_size);
  f.inode_ = static_cast<uint64_t>(st.st_ino);
  if (!f.parse()) return std::nullopt;  // f's destructor unmaps
  return std::optional<ElfFile>(std::move(f));
}

ElfFile::~ElfFile() {
  if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

ElfFile::ElfFile(ElfFile&& other) noexcept
    : data_(other.data_), size_(other.size_), first_load_vaddr_(other.first_load_vaddr_),
      inode_(other.inode_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

bool ElfFile::parse() {
  auto* eh = reinterpret_cast<const Elf64_Ehdr*>(data_);
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64)
    return false;
  if (eh->e_phoff + static_cast<uint64_t>(eh->e_phnum) * sizeof(Elf64_Phdr) > size_) return false;
  if (eh->e_shoff + static_cast<uint64_t>(eh->e_shnum) * sizeof(Elf64_Shdr) > size_) return false;
  auto* ph = reinterpret_cast<const Elf64_Phdr*>(data_ + eh->e_phoff);
  bool found = false;
  for (int i = 0; i < eh->e_phnum; ++i) {
    if (ph[i].p_type == PT_LOAD) {
      uint64_t align = ph[i].p_align ? ph[i].p_align : 0x1000;
      if (!found || (ph[i].p_offset == 0)) {
        first_load_vaddr_ = (ph[i].p_vaddr - ph[i].p_offset) & ~(align - 1);
        found = true;
        if (ph[i].p_offset == 0) break;
      }
    }
  }
  return found;
}

namespace {

const Elf64_Shdr* sections(const uint8_t* data, uint16_t* n) {
  auto* eh = reinterpret_cast<const Elf64_Ehdr*>(data);
  *n = eh->e_shnum;
  return reinterpret_cast<const Elf64_Shdr*>(data + eh->e_shoff);
}

}  // namespace

std::optional<uint64_t> ElfFile::symbol(const char* name) const {
  uint16_t n;
  const Elf64_Shdr* sh = sections(data_, &n);
  size_t name_len = std::strlen(name);
  for (uint32_t want : {static_cast<uint32_t>(SHT_DYNSYM), static_cast<uint32_t>(SHT_SYMTAB)}) {
    for (uint16_t i = 0; i < n; ++i) {
      if (sh[i].sh_type != want || sh[i].sh_link >= n || sh[i].sh_entsize != sizeof(Elf64_Sym))
        continue;
      const Elf64_Shdr& strtab = sh[sh[i].sh_link];
      if (sh[i].sh_offset + sh[i].sh_size > size_ || strtab.sh_offset + strtab.sh_size > size_)
        continue;
      auto* syms = reinterpret_cast<const Elf64_Sym*>(data_ + sh[i].sh_offset);
      const char* strs = reinterpret_cast<const char*>(data_ + strtab.sh_offset);
      size_t count = sh[i].sh_size / sizeof(Elf64_Sym);
      for (size_t k = 0; k < count; ++k) {
        uint32_t off = syms[k].st_name;
        if (off + name_len >= strtab.sh_size || syms[k].st_value == 0) continue;
        if (std::memcmp(strs + off, name, name_len + 1) == 0) return syms[k].st_value;
      }
    }
  }
  return std::nullopt;
}

std::optional<std::pair<uint64_t, uint64_t>> ElfFile::section(const char* name) const {
  auto* eh = reinterpret_cast<const Elf64_Ehdr*>(data_);
  uint16_t n;
  const Elf64_Shdr* sh = sections(data_, &n);
  if (eh->e_shstrndx >= n) return std::nullopt;
  const Elf64_Shdr& names = sh[eh->e_shstrndx];
  if (names.sh_offset + names.sh_size > size_) return std::nullopt;
  const char* strs = reinterpret_cast<const char*>(data_ + names.sh_offset);
  size_t name_len = std::strlen(name);
  for (uint16_t i = 0; i < n; ++i) {
    if (sh[i].sh_name + name_len >= names.sh_size) continue;
    if (std::memcmp(strs + sh[i].sh_name, name, name_len + 1) == 0)
      return std::make_pair(static_cast<uint64_t>(sh[i].sh_addr), static_cast<uint64_t>(sh[i].sh_size));
  }
  return std::nullopt;
}

bool ElfFile::readAt(uint64_t vaddr, void* dst, size_t len) const {
  auto* eh = reinterpret_cast<const Elf64_Ehdr*>(data_);
  auto* ph = reinterpret_cast<const Elf64_Phdr*>(data_ + eh->e_phoff);
  for (int i = 0; i < eh->e_phnum; ++i) {
    if (ph[i].p_type != PT_LOAD) continue;
    if (vaddr >= ph[i].p_vaddr && vaddr + len <= ph[i].p_vaddr + ph[i].p_filesz) {
      uint64_t off = ph[i].p_offset + (vaddr - ph[i].p_vaddr);
      if (off + len > size_) return false;
      std::memcpy(dst, data_ + off, len);
      return true;
    }
  }
  return false;
}

uint32_t ElfFile::scanVersionString() const {
  // PY_VERSION ("3.10.13") is a string literal in .rodata; look for "3.<minor>.<micro>" standing
  // alone between NUL bytes.
  auto ro = section(".rodata");
  if (!ro) return 0;
  auto* eh = reinterpret_cast<const Elf64_Ehdr*>(data_);
  uint16_t n;
  const Elf64_Shdr* sh = sections(data_, &n);
  (void)eh;
  for (uint16_t i = 0; i < n; ++i) {
    if (sh[i].sh_addr != ro->first || sh[i].sh_type == SHT_NOBITS) continue;
    if (sh[i].sh_offset + sh[i].sh_size > size_) return 0;
    const char* p = reinterpret_cast<const char*>(data_ + sh[i].sh_offset);
    size_t len = sh[i].sh_size;
    for (size_t k = 1; k + 6 < len; ++k) {
      if (p[k] != '3' || p[k + 1] != '.' || p[k - 1] != '\0') continue;
      size_t j = k + 2;
      unsigned minor = 0, micro = 0;
      size_t d = 0;
      while (j < len && std::isdigit(static_cast<unsigned char>(p[j])) && d < 3) minor = minor * 10 + (p[j++] - '0'), ++d;
      if (d == 0 || j >= len || p[j] != '.') continue;
      ++j;
      d = 0;
      while (j < len && std::isdigit(static_cast<unsigned char>(p[j])) && d < 3) micro = micro * 10 + (p[j++] - '0'), ++d;
      if (d == 0 || j >= len) continue;
      // Optional release suffix like "a1", "rc2", "+".
      while (j < len && (std::isalnum(static_cast<unsigned char>(p[j])) || p[j] == '+') && j - k < 16) ++j;
      if (p[j] != '\0' || minor < 6 || minor > 40) continue;
      return (3u << 24) | (minor << 16) | (micro << 8);
    }
  }
  return 0;
}

const uint8_t* ElfFile::bytesAt(uint64_t vaddr, size_t len) const {
  auto* eh = reinterpret_cast<const Elf64_Ehdr*>(data_);
  auto* ph = reinterpret_cast<const Elf64_Phdr*>(data_ + eh->e_phoff);
  for (int i = 0; i < eh->e_phnum; ++i) {
    if (ph[i].p_type != PT_LOAD) continue;
    if (vaddr >= ph[i].p_vaddr && vaddr - ph[i].p_vaddr <= ph[i].p_filesz &&
        len <= ph[i].p_filesz - (vaddr - ph[i].p_vaddr)) {
      uint64_t off = ph[i].p_offset + (vaddr - ph[i].p_vaddr);
      if (off > size_ || len > size_ - off) return nullptr;
      return data_ + off;
    }
  }
  return nullptr;
}

std::string ElfFile::buildId() const {
  auto* eh = reinterpret_cast<const Elf64_Ehdr*>(data_);
  auto* ph = reinterpret_cast<const Elf64_Phdr*>(data_ + eh->e_phoff);
  for (int i = 0; i < eh->e_phnum; ++i) {
    if (ph[i].p_type != PT_NOTE || ph[i].p_offset > size_ || ph[i].p_filesz > size_ - ph[i].p_offset)
      continue;
    const uint8_t* p = data_ + ph[i].p_offset;
    const uint8_t* end = p + ph[i].p_filesz;
    while (end - p >= static_cast<ptrdiff_t>(sizeof(Elf64_Nhdr))) {
      Elf64_Nhdr n;
      std::memcpy(&n, p, sizeof n);
      const uint8_t* name = p + sizeof n;
      const uint64_t name_len = (n.n_namesz + 3u) & ~3u;
      const uint64_t desc_len = (n.n_descsz + 3u) & ~3u;
      if (name_len + desc_len > static_cast<uint64_t>(end - name)) break;
      const uint8_t* desc = name + name_len;
      if (n.n_type == NT_GNU_BUILD_ID && n.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0 &&
          n.n_descsz > 0 && n.n_descsz <= 64) {
        static const char kHex[] = "0123456789abcdef";
        std::string out;
        for (uint32_t k = 0; k < n.n_descsz; ++k) {
          out += kHex[desc[k] >> 4];
          out += kHex[desc[k] & 15];
        }
        return out;
      }
      p = desc + desc_len;
    }
  }
  return {};
}

std::pair<uint64_t, uint64_t> ElfFile::ehFrameHdr() const {
  auto* eh = reinterpret_cast<const Elf64_Ehdr*>(data_);
  auto* ph = reinterpret_cast<const Elf64_Phdr*>(data_ + eh->e_phoff);
  for (int i = 0; i < eh->e_phnum; ++i)
    if (ph[i].p_type == PT_GNU_EH_FRAME) return {ph[i].p_vaddr, ph[i].p_filesz};
  return {0, 0};
}

std::vector<ElfFile::Symbol> ElfFile::functionSymbols() const {
  std::vector<Symbol> out;
  uint16_t n;
  const Elf64_Shdr* sh = sections(data_, &n);
  for (uint16_t i = 0; i < n; ++i) {
    if ((sh[i].sh_type != SHT_DYNSYM && sh[i].sh_type != SHT_SYMTAB) || sh[i].sh_link >= n ||
        sh[i].sh_entsize != sizeof(Elf64_Sym))
      continue;
    const Elf64_Shdr& strtab = sh[sh[i].sh_link];
    if (sh[i].sh_offset > size_ || sh[i].sh_size > size_ - sh[i].sh_offset ||
        strtab.sh_offset > size_ || strtab.sh_size > size_ - strtab.sh_offset || strtab.sh_size == 0)
      continue;
    auto* syms = reinterpret_cast<const Elf64_Sym*>(data_ + sh[i].sh_offset);
    const char* strs = reinterpret_cast<const char*>(data_ + strtab.sh_offset);
    // The string table must end in a NUL for every name in it to end.
    if (strs[strtab.sh_size - 1] != '\0') continue;
    const size_t count = sh[i].sh_size / sizeof(Elf64_Sym);
    for (size_t k = 0; k < count; ++k) {
      const int type = ELF64_ST_TYPE(syms[k].st_info);
      if ((type != STT_FUNC && type != STT_GNU_IFUNC) || syms[k].st_value == 0 ||
          syms[k].st_shndx == SHN_UNDEF || syms[k].st_name >= strtab.sh_size)
        continue;
      const int bind = ELF64_ST_BIND(syms[k].st_info);
      out.push_back({syms[k].st_value, syms[k].st_size, strs + syms[k].st_name,
                     bind == STB_GLOBAL || bind == STB_WEAK});
    }
  }
  return out;
}

std::optional<uint64_t> loadBias(const std::vector<MapEntry>& maps, const std::string& path,
                                 const ElfFile& elf) {
  // The mapping of file offset 0 is the first PT_LOAD segment. (Segments a tool such as
  // patchelf added may lie at file offsets out of step with their addresses: the mapping of
  // offset 0 is the one to go by, the lowest start less offset only when there is none.)
  uint64_t lowest = 0;
  bool found = false, at_zero = false;
  for (const auto& m : maps) {
    if (m.path != path) continue;
    uint64_t base = m.start - m.offset;  // where file offset 0 would be
    if (m.offset == 0 && (!at_zero || base < lowest)) {
      lowest = base;
      found = at_zero = true;
    } else if (!at_zero && (!found || base < lowest)) {
      lowest = base;
      found = true;
    }
  }
  if (!found) return std::nullopt;
  return lowest - elf.firstLoadVaddr();
}

}  // namespace psrec::recorder
