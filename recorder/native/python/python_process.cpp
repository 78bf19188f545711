#include "recorder/native/python/python_process.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "recorder/native/errors.hpp"
#include "recorder/native/python/offsets.hpp"
#include "recorder/native/memory/process_maps.hpp"
#include "recorder/native/sampler/thread_stats.hpp"
#include "recorder/native/python/version_detect.hpp"

namespace psrec::recorder {

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string baseName(const std::string& p) { return p.substr(p.rfind('/') + 1); }

[[noreturn]] void throwPermission(pid_t pid) {
  throw RecorderError(ErrorCode::kPermissionDenied,
                      "permission denied reading the memory of process " + std::to_string(pid));
}

}  // namespace

std::string processCommandLine(pid_t pid) {
  std::string raw = readFile("/proc/" + std::to_string(pid) + "/cmdline");
  while (!raw.empty() && raw.back() == '\0') raw.pop_back();
  for (char& c : raw)
    if (c == '\0') c = ' ';
  return raw;
}

std::string processName(pid_t pid) {
  std::string s = readFile("/proc/" + std::to_string(pid) + "/comm");
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

uint64_t processImage(pid_t pid) {
  std::string auxv = readFile("/proc/" + std::to_string(pid) + "/auxv");
  uint64_t random_at = 0, hash = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i, v >>= 8) hash = (hash ^ (v & 0xff)) * 1099511628211ull;
  };
  for (size_t i = 0; i + 16 <= auxv.size(); i += 16) {
    uint64_t key, value;
    std::memcpy(&key, auxv.data() + i, 8);
    std::memcpy(&value, auxv.data() + i + 8, 8);
    if (key == AT_RANDOM) random_at = value;
    if (key == AT_RANDOM || key == AT_ENTRY || key == AT_PHDR) mix(key ^ (value << 8));
  }
  if (!random_at) return 0;
  uint64_t bytes[2];
  struct iovec local = {bytes, sizeof bytes};
  struct iovec remote = {reinterpret_cast<void*>(random_at), sizeof bytes};
  if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(sizeof bytes))
    return 0;
  mix(bytes[0]);
  mix(bytes[1]);
  return hash ? hash : 1;
}

namespace {

// /proc/PID/maps needs the same ptrace access as reading memory: classify early.
void requireMaps(pid_t pid) {
  int fd = open(("/proc/" + std::to_string(pid) + "/maps").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ESRCH)
      throw RecorderError(ErrorCode::kNoSuchProcess, "no process with pid " + std::to_string(pid));
    throwPermission(pid);
  }
  close(fd);
}

// A map opened just before the process execs reads empty (it was its old program's): read
// again. A map that stays empty belongs to a process that exited, or one psrec may not read.
std::vector<MapEntry> readableMaps(pid_t pid) {
  std::vector<MapEntry> maps;
  for (int attempt = 0; attempt < 4 && maps.empty(); ++attempt) maps = readMaps(pid);
  if (maps.empty()) {
    if (gone(processState(pid)))
      throw RecorderError(ErrorCode::kNoSuchProcess, "process " + std::to_string(pid) + " exited");
    requireMaps(pid);
    throw RecorderError(ErrorCode::kReadFailed,
                        "cannot read the memory map of process " + std::to_string(pid) +
                            " (it is starting another program): try again");
  }
  return maps;
}

// Where the runtime may be: a mapped libpython first (runtime in the shared library), then the
// executable itself (statically linked interpreters such as Debian's /usr/bin/python3.X).
std::vector<std::string> runtimeCandidates(const std::vector<MapEntry>& maps,
                                           const std::string& executable) {
  std::vector<std::string> candidates;
  for (const auto& m : maps) {
    if (baseName(m.path).rfind("libpython", 0) == 0 &&
        std::find(candidates.begin(), candidates.end(), m.path) == candidates.end())
      candidates.push_back(m.path);
  }
  for (const auto& m : maps) {
    if (!m.path.empty() && (m.path == executable || m.path == executable + " (deleted)")) {
      candidates.push_back(m.path);
      break;
    }
  }
  return candidates;
}

// The runtime at info.runtime_addr is in place and psrec may read it; throws otherwise.
void requireRuntime(pid_t pid, RemoteMemory& mem, const std::vector<MapEntry>& maps,
                    const TargetInfo& info, const std::string& path) {
  // While the loader is still mapping the binary, its first segment spans the whole file, so
  // the runtime's address reads the file's bytes, not the (zeroed) runtime: a process caught
  // then is not Python yet. The runtime lies in a writable mapping once it is.
  const auto at = std::find_if(maps.begin(), maps.end(), [&](const MapEntry& m) {
    return m.start <= info.runtime_addr && info.runtime_addr < m.end;
  });
  if (at == maps.end() || at->perms.find('w') == std::string::npos)
    throw RecorderError(ErrorCode::kNotPython,
                        "process " + std::to_string(pid) + " (" + processName(pid) +
                            ") is still loading " + baseName(path) + ": not Python yet");
  switch (mem.probe(info.runtime_addr)) {
    case ReadStatus::kOk: break;
    case ReadStatus::kPermission: throwPermission(pid);
    case ReadStatus::kNoProcess:
      throw RecorderError(ErrorCode::kNoSuchProcess, "process " + std::to_string(pid) + " exited");
    default:
      throw RecorderError(ErrorCode::kReadFailed,
                          "cannot read the Python runtime of process " + std::to_string(pid));
  }
}

[[noreturn]] void throwUnsupported(pid_t pid, const std::string& version) {
  throw RecorderError(ErrorCode::kUnsupportedVersion,
                      "process " + std::to_string(pid) + " runs Python " + version +
                          ", which psrec does not support (it supports CPython " +
                          supportedRange() + ")");
}

// The version of the runtime in elf (loaded at bias) and its layout: from its
// _Py_DebugOffsets (3.13+) or the built-in tables; info gets the version and where both came
// from. Throws for a version psrec does not support.
cpython::Layout versionLayout(pid_t pid, RemoteMemory& mem, const ElfFile& elf, uint64_t bias,
                              const std::string& path, TargetInfo& info) {
  VersionInfo v = detectVersion(mem, elf, bias, info.runtime_addr, path);
  if (v.hex == 0)
    throw RecorderError(ErrorCode::kUnsupportedVersion,
                        "cannot tell which Python version process " + std::to_string(pid) +
                            " runs (" + path + ")");
  info.version_hex = v.hex;
  info.version_source = v.source;
  info.version = versionString(v.hex, v.source != "file name");
  const uint32_t minor = (v.hex >> 16) & 0xFF;
  if ((v.hex >> 24) == 3 && minor >= 13) {
    std::vector<uint8_t> dbg(kDebugOffsetsSize);
    std::string why = "its _Py_DebugOffsets cannot be read";
    std::optional<cpython::Layout> layout;
    // The offsets are constant initialised data: the file has them even while the loader is
    // still mapping the target (see detectVersion); memory is the fallback.
    if (elf.readAt(info.runtime_addr - bias, dbg.data(), dbg.size()) ||
        mem.read(info.runtime_addr, dbg.data(), dbg.size()) == ReadStatus::kOk)
      layout = layoutFromDebugOffsets(dbg.data(), dbg.size(), &why, &info.layout_warning);
    if (!layout)
      throw RecorderError(ErrorCode::kUnsupportedVersion,
                          "process " + std::to_string(pid) + " runs Python " + info.version +
                              ", which psrec does not support: " + why);
    info.layout_source = "_Py_DebugOffsets";
    return *layout;
  }
  std::optional<cpython::Layout> layout;
  if ((v.hex >> 24) == 3 && minor >= kOldestMinor) layout = builtinLayout(v.hex);
  if (!layout) throwUnsupported(pid, info.version);
  info.layout_source = "built-in " + versionString(v.hex, false) + " table";
  return *layout;
}

}  // namespace

std::unique_ptr<PythonProcess> PythonProcess::attach(pid_t pid) {
  std::string proc = "/proc/" + std::to_string(pid);
  struct stat st;
  if (pid <= 0 || stat(proc.c_str(), &st) != 0)
    throw RecorderError(ErrorCode::kNoSuchProcess, "no process with pid " + std::to_string(pid));
  requireMaps(pid);
  std::unique_ptr<PythonProcess> p(new PythonProcess(pid));
  TargetInfo& info = p->info_;
  info.pid = pid;
  char buf[4096];
  ssize_t n = readlink((proc + "/exe").c_str(), buf, sizeof buf - 1);
  if (n > 0) info.executable.assign(buf, static_cast<size_t>(n));
  // The link needs ptrace access even where the map does not (root without CAP_SYS_PTRACE
  // reads another user's map): without it the executable's runtime would not be looked for,
  // and the process said to be no Python.
  if (n < 0 && errno == EACCES) throwPermission(pid);
  const std::vector<MapEntry> maps = readableMaps(pid);
  uint32_t named_version = 0;
  for (const auto& path : runtimeCandidates(maps, info.executable)) {
    if (!named_version) named_version = versionFromFileName(path);
    auto elf = ElfFile::open(path, pid);
    if (!elf) continue;
    std::optional<uint64_t> runtime = elf->symbol("_PyRuntime");
    if (!runtime) {
      if (auto sec = elf->section(".PyRuntime")) runtime = sec->first;
    }
    if (!runtime) continue;
    auto bias = loadBias(maps, path, *elf);
    if (!bias) continue;
    info.binary = path;
    info.shared_libpython = baseName(path).rfind("libpython", 0) == 0;
    info.load_bias = *bias;
    info.runtime_addr = *runtime + *bias;
    if (auto ct = elf->symbol("PyCode_Type")) info.code_type_addr = *ct + *bias;
    requireRuntime(pid, p->mem_, maps, info, path);
    p->layout_ = versionLayout(pid, p->mem_, *elf, *bias, path, info);
    info.free_threaded = p->layout_.free_threaded;
    info.gil_requested_known =
        p->layout_.tstate_gil_requested != cpython::kAbsent && !p->layout_.free_threaded;
    return p;
  }
  const uint32_t named_minor = (named_version >> 16) & 0xFF;
  // A supported version by name but no runtime found: not (yet) an initialised interpreter,
  // e.g. a process caught between exec and loading libpython.
  if (named_version && ((named_version >> 24) != 3 || named_minor < kOldestMinor))
    throwUnsupported(pid, versionString(named_version, false));
  throw RecorderError(ErrorCode::kNotPython,
                      "process " + std::to_string(pid) + " (" + processName(pid) +
                          ") is not a Python process: no CPython runtime in its memory map");
}

uint64_t PythonProcess::mainInterpreter() {
  if (interp_) return interp_;
  uint64_t head = 0;
  // Only a pointer a user-space object can have is kept (see forgetInterpreter).
  if (mem_.readValue(info_.runtime_addr + static_cast<uint64_t>(layout_.runtime_interpreters_head), head) &&
      head % 8 == 0 && head < (uint64_t{1} << 47))
    interp_ = head;
  return interp_;
}

}  // namespace psrec::recorder
