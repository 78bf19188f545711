#include "recorder/native/capture/bpf.hpp"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <limits>

namespace psrec::recorder {

namespace {

long sysBpf(int cmd, bpf_attr* attr) {
  return syscall(__NR_bpf, cmd, attr, sizeof *attr);
}

uint64_t ptr(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

// Enough for the full log of a program of a few thousand verified instructions; kernels
// since 6.4 keep the end of a longer log (where the reason is) rather than failing.
constexpr size_t kLogBytes = 1 << 20;

}  // namespace

BpfFd& BpfFd::operator=(BpfFd&& other) noexcept {
  if (this != &other) {
    reset(other.fd_);
    other.fd_ = -1;
  }
  return *this;
}

void BpfFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

BpfFd bpfCreateMap(uint32_t type, uint32_t key_size, uint32_t value_size, uint32_t max_entries,
                   uint32_t flags, int* err) {
  bpf_attr attr{};
  attr.map_type = type;
  attr.key_size = key_size;
  attr.value_size = value_size;
  attr.max_entries = max_entries;
  attr.map_flags = flags;
  const long fd = sysBpf(BPF_MAP_CREATE, &attr);
  if (fd < 0) {
    if (err) *err = errno;
    return BpfFd();
  }
  return BpfFd(static_cast<int>(fd));
}

int bpfUpdateElem(const BpfFd& map, const void* key, const void* value, uint64_t flags) {
  bpf_attr attr{};
  attr.map_fd = static_cast<uint32_t>(map.get());
  attr.key = ptr(key);
  attr.value = ptr(value);
  attr.flags = flags;
  return sysBpf(BPF_MAP_UPDATE_ELEM, &attr) == 0 ? 0 : errno;
}

int bpfDeleteElem(const BpfFd& map, const void* key) {
  bpf_attr attr{};
  attr.map_fd = static_cast<uint32_t>(map.get());
  attr.key = ptr(key);
  return sysBpf(BPF_MAP_DELETE_ELEM, &attr) == 0 ? 0 : errno;
}

BpfFd bpfCreateLink(const BpfFd& prog, int target_fd, uint32_t attach_type, int* err) {
  bpf_attr attr{};
  attr.link_create.prog_fd = static_cast<uint32_t>(prog.get());
  attr.link_create.target_fd = static_cast<uint32_t>(target_fd);
  attr.link_create.attach_type = attach_type;
  const long fd = sysBpf(BPF_LINK_CREATE, &attr);
  if (fd < 0) {
    if (err) *err = errno;
    return BpfFd();
  }
  return BpfFd(static_cast<int>(fd));
}

BpfFd bpfLoadProgram(uint32_t type, const std::vector<bpf_insn>& insns, std::string* log,
                     int* err) {
  static const char kLicense[] = "GPL";
  bpf_attr attr{};
  attr.prog_type = type;
  attr.insns = ptr(insns.data());
  attr.insn_cnt = static_cast<uint32_t>(insns.size());
  attr.license = ptr(kLicense);
  long fd = sysBpf(BPF_PROG_LOAD, &attr);
  if (fd >= 0) return BpfFd(static_cast<int>(fd));
  const int first = errno;
  if (err) *err = first;
  if (log) log->clear();
  // Only a refusal by the verifier has a log worth the second load.
  if (log && (first == EINVAL || first == EACCES || first == E2BIG)) {
    std::vector<char> buf(kLogBytes, 0);
    attr.log_level = 1;
    attr.log_buf = ptr(buf.data());
    attr.log_size = static_cast<uint32_t>(buf.size());
    fd = sysBpf(BPF_PROG_LOAD, &attr);
    if (fd >= 0) {  // accepted the second time: keep it, though the first was refused
      log->clear();
      return BpfFd(static_cast<int>(fd));
    }
    buf.back() = 0;
    log->assign(buf.data());
  }
  return BpfFd();
}

std::string bpfVerifierReason(const std::string& log) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    if (end > start) lines.push_back(log.substr(start, end - start));
    start = end + 1;
  }
  // The log ends with statistics ("processed N insns ...", "verification time ...") after the
  // line that names the fault.
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    const std::string& l = *it;
    if (l.rfind("processed ", 0) == 0 || l.rfind("verification time", 0) == 0 ||
        l.rfind("stack depth", 0) == 0 || l.rfind("max_states_per_insn", 0) == 0)
      continue;
    return l;
  }
  return std::string();
}

BpfAssembler::Label BpfAssembler::newLabel() {
  labels_.push_back(-1);
  return static_cast<Label>(labels_.size() - 1);
}

void BpfAssembler::bind(Label label) {
  labels_.at(static_cast<size_t>(label)) = static_cast<long>(insns_.size());
}

void BpfAssembler::emit(uint8_t code, int dst, int src, int16_t off, int32_t imm) {
  bpf_insn insn{};
  insn.code = code;
  insn.dst_reg = static_cast<uint8_t>(dst) & 0xf;
  insn.src_reg = static_cast<uint8_t>(src) & 0xf;
  insn.off = off;
  insn.imm = imm;
  insns_.push_back(insn);
}

void BpfAssembler::mov(int dst, int src) { emit(BPF_ALU64 | BPF_MOV | BPF_X, dst, src, 0, 0); }

void BpfAssembler::movImm(int dst, int32_t imm) {
  emit(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm);
}

void BpfAssembler::aluImm(int op, int dst, int32_t imm) {
  emit(static_cast<uint8_t>(BPF_ALU64 | op | BPF_K), dst, 0, 0, imm);
}

void BpfAssembler::aluReg(int op, int dst, int src) {
  emit(static_cast<uint8_t>(BPF_ALU64 | op | BPF_X), dst, src, 0, 0);
}

void BpfAssembler::load(int size, int dst, int src, int16_t off) {
  emit(static_cast<uint8_t>(BPF_LDX | size | BPF_MEM), dst, src, off, 0);
}

void BpfAssembler::store(int size, int dst, int16_t off, int src) {
  emit(static_cast<uint8_t>(BPF_STX | size | BPF_MEM), dst, src, off, 0);
}

void BpfAssembler::storeImm(int size, int dst, int16_t off, int32_t imm) {
  emit(static_cast<uint8_t>(BPF_ST | size | BPF_MEM), dst, 0, off, imm);
}

void BpfAssembler::loadMap(int dst, int map_fd) {
  // A 16-byte instruction: the second half carries the upper 32 bits of the immediate.
  emit(BPF_LD | BPF_DW | BPF_IMM, dst, BPF_PSEUDO_MAP_FD, 0, map_fd);
  emit(0, 0, 0, 0, 0);
}

void BpfAssembler::call(int helper) { emit(BPF_JMP | BPF_CALL, 0, 0, 0, helper); }

void BpfAssembler::exit() { emit(BPF_JMP | BPF_EXIT, 0, 0, 0, 0); }

void BpfAssembler::jumpImm(int op, int dst, int32_t imm, Label to) {
  fixups_.push_back({insns_.size(), to});
  emit(static_cast<uint8_t>(BPF_JMP | op | BPF_K), dst, 0, 0, imm);
}

void BpfAssembler::jump(Label to) {
  fixups_.push_back({insns_.size(), to});
  emit(BPF_JMP | BPF_JA, 0, 0, 0, 0);
}

std::vector<bpf_insn> BpfAssembler::finish(std::string* error) {
  for (const Fixup& f : fixups_) {
    const long target = f.to >= 0 && static_cast<size_t>(f.to) < labels_.size()
                            ? labels_[static_cast<size_t>(f.to)]
                            : -1;
    if (target < 0) {
      if (error) *error = "jump to an unbound label";
      return {};
    }
    // Offsets count from the instruction after the jump.
    const long off = target - static_cast<long>(f.insn) - 1;
    if (off < std::numeric_limits<int16_t>::min() || off > std::numeric_limits<int16_t>::max()) {
      if (error) *error = "jump too far";
      return {};
    }
    insns_[f.insn].off = static_cast<int16_t>(off);
  }
  return insns_;
}

}  // namespace psrec::recorder
