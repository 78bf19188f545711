// Thin wrappers of bpf(2), enough to run a small hand-assembled program: an owned descriptor,
// map creation and update, program loading with the verifier's log, and an assembler with
// labels so that the program's jumps need no hand-counted offsets. There is no libbpf and no
// compiler of BPF at run time: the one program psrec loads is generated instruction by
// instruction, with the target's layout as immediates. Every call here reports failure by
// errno value; none throws.
#pragma once

#include <linux/bpf.h>

#include <cstdint>
#include <string>
#include <vector>

namespace psrec::recorder {

// A BPF object's file descriptor (map or program), closed with its owner.
class BpfFd {
 public:
  BpfFd() = default;
  explicit BpfFd(int fd) : fd_(fd) {}
  ~BpfFd() { reset(); }
  BpfFd(const BpfFd&) = delete;
  BpfFd& operator=(const BpfFd&) = delete;
  BpfFd(BpfFd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  BpfFd& operator=(BpfFd&& other) noexcept;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// BPF_MAP_CREATE; invalid with *err set (errno) on failure.
BpfFd bpfCreateMap(uint32_t type, uint32_t key_size, uint32_t value_size, uint32_t max_entries,
                   uint32_t flags, int* err);
// BPF_MAP_UPDATE_ELEM / BPF_MAP_DELETE_ELEM: 0, or the errno.
int bpfUpdateElem(const BpfFd& map, const void* key, const void* value, uint64_t flags);
int bpfDeleteElem(const BpfFd& map, const void* key);

// BPF_LINK_CREATE: attaches prog to target_fd (a perf event for BPF_PERF_EVENT, Linux 5.15+)
// for as long as the link is open, which the ioctl PERF_EVENT_IOC_SET_BPF cannot undo short of
// closing the event. Invalid with *err set on failure.
BpfFd bpfCreateLink(const BpfFd& prog, int target_fd, uint32_t attach_type, int* err);

// BPF_PROG_LOAD (GPL: bpf_probe_read_user needs it). On failure *err is the errno and, when
// the verifier refused the program, *log its account of why (it is loaded a second time with
// the log on: a log costs verification time that a good program need not pay).
BpfFd bpfLoadProgram(uint32_t type, const std::vector<bpf_insn>& insns, std::string* log,
                     int* err);
// The line of a verifier log that says why it refused (the last one before its statistics),
// or "" when the log has none.
std::string bpfVerifierReason(const std::string& log);

// Writes BPF instructions. Jumps name labels, made by newLabel() and placed by bind(); the
// offsets are filled in by finish(). All arithmetic is 64-bit (BPF_ALU64).
class BpfAssembler {
 public:
  using Label = int;

  Label newLabel();
  void bind(Label label);  // the next instruction is the label's

  void mov(int dst, int src);
  void movImm(int dst, int32_t imm);
  void aluImm(int op, int dst, int32_t imm);  // op: BPF_ADD, BPF_AND, BPF_MUL, BPF_LSH, ...
  void aluReg(int op, int dst, int src);
  void load(int size, int dst, int src, int16_t off);        // dst = *(size *)(src + off)
  void store(int size, int dst, int16_t off, int src);       // *(size *)(dst + off) = src
  void storeImm(int size, int dst, int16_t off, int32_t imm);
  void loadMap(int dst, int map_fd);  // dst = the map (ld_imm64, BPF_PSEUDO_MAP_FD)
  void call(int helper);              // a BPF_FUNC_*; r0 = its result, r1-r5 clobbered
  void exit();
  void jumpImm(int op, int dst, int32_t imm, Label to);  // op: BPF_JEQ, BPF_JNE, BPF_JSLT, ...
  void jump(Label to);

  size_t size() const { return insns_.size(); }
  // The program with its jumps resolved; empty, with *error set, when a label was never bound
  // or a jump does not fit the 16-bit offset.
  std::vector<bpf_insn> finish(std::string* error);

 private:
  void emit(uint8_t code, int dst, int src, int16_t off, int32_t imm);

  struct Fixup {
    size_t insn;
    Label to;
  };
  std::vector<bpf_insn> insns_;
  std::vector<long> labels_;  // instruction index of each label, -1 until bound
  std::vector<Fixup> fixups_;
};

}  // namespace psrec::recorder
