#include "recorder/native/capture/frame_capture.hpp"

#include <errno.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace psrec::recorder {

namespace {

// The config map's value, one per watched thread (key: its tid as the program sees it).
// Offsets are 64-bit so that the program adds them to addresses as they are; seq is the
// program's own, counted on from what watch() wrote.
struct Config {
  uint64_t tstate;
  int64_t first_off;    // CaptureLayout::tstate_frame
  int64_t second_off;   // CaptureLayout::cframe_current, < 0: none
  int64_t previous_off; // CaptureLayout::frame_previous
  uint64_t seq;
  uint32_t slot_base;
  uint32_t pad;
};

// A slot of the output array. The program writes gen_begin first and gen_end last, both the
// capture's sequence number, with the capture between; a reader copies gen_end, the capture,
// then gen_begin, and keeps the copy only when the two agree. The stores reach memory in
// program order on x86-64 (the JIT emits plain moves; x86 does not reorder stores), which is
// all the seqlock needs of the writer.
constexpr int16_t kGenBegin = 0;
constexpr int16_t kSeq = 8;
constexpr int16_t kTime = 16;
constexpr int16_t kFirstHop = 24;
constexpr int16_t kCount = 32;   // u32: frames copied
constexpr int16_t kStatus = 36;  // u32: kStatus* bits
constexpr int16_t kFrames = 40;  // {u64 addr; u8 header[stride]} x kMaxCapturedFrames, gen_end
static_assert(kMaxCapturedFrames * (8 + kMaxCapturedHeader) + kFrames + 8 <= 32767,
              "the program addresses a slot with 16-bit offsets");
static_assert((kSlotsPerThread & (kSlotsPerThread - 1)) == 0, "slots are indexed by a mask");

constexpr uint32_t kStatusComplete = 1;  // ended at a null link
constexpr uint32_t kStatusTruncated = 2; // kMaxCapturedFrames frames and more to go
constexpr uint32_t kStatusReadFailed = 4;

// A sequence number is the watch's id (watch() gives each a new one) over the count of its
// captures: a slot's contents name the watch they were written for, so the captures of a
// slot's earlier thread, or of the same thread before it was re-pointed, are never taken for
// the current one. 2^40 captures are 3.5 years at 10 kHz.
constexpr int kCountBits = 40;
constexpr uint64_t kCountMask = (uint64_t{1} << kCountBits) - 1;
constexpr uint32_t kWatchIds = 1u << (64 - kCountBits);

constexpr size_t kMaxThreads = size_t{1} << 16;

// A capture this close after a sample is that sample's: the kernel's sampling timers are at
// least 10 us apart, so the next sample's capture cannot be this close.
constexpr uint64_t kMatchSureNs = 5000;

// The program. r6: the frame index; r7: the thread's config; r8: the capture's sequence
// number; r9: the slot; the stack holds the map keys (fp-4, fp-8) and the frame pointer being
// followed (fp-16), where bpf_probe_read_user writes it.
struct ProgramLabels {
  BpfAssembler::Label loop, done, truncated, failed, finish, out;
};

// r7, r8 and r9: the config of the thread on the CPU, its next sequence number, and the slot
// it goes in, stamped with it and the time; to `out` where the thread is not watched.
void emitSlot(BpfAssembler& a, int config_fd, int slots_fd, const ProgramLabels& l) {
  // The config of the thread on the CPU: the low half is its id in the initial pid namespace.
  a.call(BPF_FUNC_get_current_pid_tgid);
  a.store(BPF_W, BPF_REG_10, -4, BPF_REG_0);
  a.loadMap(BPF_REG_1, config_fd);
  a.mov(BPF_REG_2, BPF_REG_10);
  a.aluImm(BPF_ADD, BPF_REG_2, -4);
  a.call(BPF_FUNC_map_lookup_elem);
  a.jumpImm(BPF_JEQ, BPF_REG_0, 0, l.out);
  a.mov(BPF_REG_7, BPF_REG_0);
  // Only this thread's overflows come here, one at a time: a plain increment is enough.
  a.load(BPF_DW, BPF_REG_8, BPF_REG_7, offsetof(Config, seq));
  a.aluImm(BPF_ADD, BPF_REG_8, 1);
  a.store(BPF_DW, BPF_REG_7, offsetof(Config, seq), BPF_REG_8);
  a.mov(BPF_REG_1, BPF_REG_8);
  a.aluImm(BPF_AND, BPF_REG_1, static_cast<int32_t>(kSlotsPerThread - 1));
  a.load(BPF_W, BPF_REG_2, BPF_REG_7, offsetof(Config, slot_base));
  a.aluReg(BPF_ADD, BPF_REG_1, BPF_REG_2);
  a.store(BPF_W, BPF_REG_10, -8, BPF_REG_1);
  a.loadMap(BPF_REG_1, slots_fd);
  a.mov(BPF_REG_2, BPF_REG_10);
  a.aluImm(BPF_ADD, BPF_REG_2, -8);
  a.call(BPF_FUNC_map_lookup_elem);
  a.jumpImm(BPF_JEQ, BPF_REG_0, 0, l.out);
  a.mov(BPF_REG_9, BPF_REG_0);
  a.store(BPF_DW, BPF_REG_9, kGenBegin, BPF_REG_8);
  a.store(BPF_DW, BPF_REG_9, kSeq, BPF_REG_8);
  a.call(BPF_FUNC_ktime_get_ns);
  a.store(BPF_DW, BPF_REG_9, kTime, BPF_REG_0);
  a.storeImm(BPF_DW, BPF_REG_9, kFirstHop, 0);
  a.movImm(BPF_REG_6, 0);
}

// The pointer at tstate + first_off and, 3.11-3.12, from there the _PyCFrame's current_frame:
// the innermost frame at fp-16.
void emitFirstHops(BpfAssembler& a, const ProgramLabels& l) {
  // The first hop: tstate + first_off.
  a.mov(BPF_REG_1, BPF_REG_10);
  a.aluImm(BPF_ADD, BPF_REG_1, -16);
  a.movImm(BPF_REG_2, 8);
  a.load(BPF_DW, BPF_REG_3, BPF_REG_7, offsetof(Config, tstate));
  a.load(BPF_DW, BPF_REG_4, BPF_REG_7, offsetof(Config, first_off));
  a.aluReg(BPF_ADD, BPF_REG_3, BPF_REG_4);
  a.call(BPF_FUNC_probe_read_user);
  a.jumpImm(BPF_JNE, BPF_REG_0, 0, l.failed);
  a.load(BPF_DW, BPF_REG_3, BPF_REG_10, -16);
  a.store(BPF_DW, BPF_REG_9, kFirstHop, BPF_REG_3);
  // The second (3.11-3.12: _PyCFrame.current_frame), unless there is none.
  a.load(BPF_DW, BPF_REG_4, BPF_REG_7, offsetof(Config, second_off));
  a.jumpImm(BPF_JSLT, BPF_REG_4, 0, l.loop);
  a.jumpImm(BPF_JEQ, BPF_REG_3, 0, l.done);
  a.aluReg(BPF_ADD, BPF_REG_3, BPF_REG_4);
  a.mov(BPF_REG_1, BPF_REG_10);
  a.aluImm(BPF_ADD, BPF_REG_1, -16);
  a.movImm(BPF_REG_2, 8);
  a.call(BPF_FUNC_probe_read_user);
  a.jumpImm(BPF_JNE, BPF_REG_0, 0, l.failed);
}

// Each frame's address and header into the slot, following the links to the callers.
void emitFrames(BpfAssembler& a, const ProgramLabels& l, uint32_t header_bytes, int32_t entry,
                bool link_in_header) {
  const auto max_frames = static_cast<int32_t>(kMaxCapturedFrames);
  // The frames. The bound on r6 is what lets the verifier accept the loop (it follows each
  // iteration) and check that each copy stays inside the slot.
  a.bind(l.loop);
  a.load(BPF_DW, BPF_REG_3, BPF_REG_10, -16);
  a.jumpImm(BPF_JEQ, BPF_REG_3, 0, l.done);
  a.jumpImm(BPF_JGE, BPF_REG_6, max_frames, l.truncated);
  a.mov(BPF_REG_1, BPF_REG_9);
  a.mov(BPF_REG_2, BPF_REG_6);
  a.aluImm(BPF_MUL, BPF_REG_2, entry);
  a.aluReg(BPF_ADD, BPF_REG_1, BPF_REG_2);
  a.store(BPF_DW, BPF_REG_1, kFrames, BPF_REG_3);
  if (header_bytes > 0) {
    a.aluImm(BPF_ADD, BPF_REG_1, kFrames + 8);
    a.movImm(BPF_REG_2, static_cast<int32_t>(header_bytes));
    a.call(BPF_FUNC_probe_read_user);  // r3: the frame
    a.jumpImm(BPF_JNE, BPF_REG_0, 0, l.failed);
  }
  a.load(BPF_DW, BPF_REG_2, BPF_REG_7, offsetof(Config, previous_off));
  if (link_in_header) {
    // The caller's frame from the header just copied: one read of user memory per frame.
    // The bound check is the verifier's proof that the load stays in the header.
    a.jumpImm(BPF_JGT, BPF_REG_2, static_cast<int32_t>(header_bytes - 8), l.failed);
    a.mov(BPF_REG_1, BPF_REG_9);
    a.mov(BPF_REG_3, BPF_REG_6);
    a.aluImm(BPF_MUL, BPF_REG_3, entry);
    a.aluReg(BPF_ADD, BPF_REG_1, BPF_REG_3);
    a.aluReg(BPF_ADD, BPF_REG_1, BPF_REG_2);
    a.load(BPF_DW, BPF_REG_3, BPF_REG_1, kFrames + 8);
    a.store(BPF_DW, BPF_REG_10, -16, BPF_REG_3);
    a.aluImm(BPF_ADD, BPF_REG_6, 1);
    a.jump(l.loop);
  } else {
    a.load(BPF_DW, BPF_REG_3, BPF_REG_10, -16);
    a.aluReg(BPF_ADD, BPF_REG_3, BPF_REG_2);
    a.mov(BPF_REG_1, BPF_REG_10);
    a.aluImm(BPF_ADD, BPF_REG_1, -16);
    a.movImm(BPF_REG_2, 8);
    a.call(BPF_FUNC_probe_read_user);
    a.aluImm(BPF_ADD, BPF_REG_6, 1);
    a.jumpImm(BPF_JNE, BPF_REG_0, 0, l.failed);
    a.jump(l.loop);
  }
}

// The count, the status and the closing sequence number (the seqlock's end).
void emitEnd(BpfAssembler& a, const ProgramLabels& l, int16_t gen_end) {
  a.bind(l.done);
  a.movImm(BPF_REG_2, kStatusComplete);
  a.jump(l.finish);
  a.bind(l.truncated);
  a.movImm(BPF_REG_2, kStatusTruncated);
  a.jump(l.finish);
  a.bind(l.failed);
  a.movImm(BPF_REG_2, kStatusReadFailed);
  a.bind(l.finish);
  a.store(BPF_W, BPF_REG_9, kCount, BPF_REG_6);
  a.store(BPF_W, BPF_REG_9, kStatus, BPF_REG_2);
  a.store(BPF_DW, BPF_REG_9, gen_end, BPF_REG_8);
  // Not 0: perf writes its sample as it would without the program.
  a.bind(l.out);
  a.movImm(BPF_REG_0, 1);
  a.exit();
}

std::vector<bpf_insn> captureProgram(int config_fd, int slots_fd, uint32_t header_bytes,
                                     uint32_t stride, bool link_in_header, std::string* error) {
  const int32_t entry = static_cast<int32_t>(8 + stride);
  const auto gen_end = static_cast<int16_t>(kFrames + kMaxCapturedFrames * entry);
  BpfAssembler a;
  const ProgramLabels l{a.newLabel(), a.newLabel(), a.newLabel(),
                        a.newLabel(), a.newLabel(), a.newLabel()};
  emitSlot(a, config_fd, slots_fd, l);
  emitFirstHops(a, l);
  emitFrames(a, l, header_bytes, entry, link_in_header);
  emitEnd(a, l, gen_end);
  return a.finish(error);
}

std::string refusal(int err, const std::string& what) {
  if (err == EPERM) return "BPF is not permitted (needs CAP_BPF and CAP_PERFMON, or root)";
  if (err == ENOSYS) return "this kernel has no bpf(2)";
  if (err == ENOMEM || err == E2BIG) return what + ": not enough kernel memory";
  return what + ": " + std::strerror(err);
}

uint64_t load64(const uint8_t* p, std::ptrdiff_t off, int order) {
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(p + off), order);
}

}  // namespace

std::unique_ptr<FrameCapture> FrameCapture::open(const CaptureLayout& layout, size_t max_threads,
                                                 std::string* why) {
  auto fail = [&](const std::string& reason) {
    if (why) *why = reason;
    return std::unique_ptr<FrameCapture>();
  };
  if (layout.tstate_frame < 0 || layout.frame_previous < 0 || layout.cframe_current < -1 ||
      layout.header_bytes > kMaxCapturedHeader)
    return fail("no frame capture for this layout (offsets missing or header too long)");
  if (max_threads == 0 || max_threads > kMaxThreads)
    return fail("no frame capture for " + std::to_string(max_threads) + " threads");

  std::unique_ptr<FrameCapture> fc(new FrameCapture());
  fc->layout_ = layout;
  fc->header_stride_ = (layout.header_bytes + 7) & ~7u;
  fc->slot_bytes_ =
      static_cast<uint32_t>(kFrames + kMaxCapturedFrames * (8 + fc->header_stride_) + 8);
  const auto nslots = static_cast<uint32_t>(max_threads * kSlotsPerThread);

  // No RLIMIT_MEMLOCK: since 5.11 the kernel charges BPF memory to the memory cgroup. On an
  // older kernel whose limit is too low for the maps this fails with EPERM, as without the
  // capabilities.
  int err = 0;
  fc->config_ = bpfCreateMap(BPF_MAP_TYPE_HASH, sizeof(uint32_t), sizeof(Config),
                             static_cast<uint32_t>(max_threads), 0, &err);
  if (!fc->config_.valid()) return fail(refusal(err, "cannot create the BPF config map"));
  fc->slots_map_ = bpfCreateMap(BPF_MAP_TYPE_ARRAY, sizeof(uint32_t), fc->slot_bytes_, nslots,
                                BPF_F_MMAPABLE, &err);
  if (!fc->slots_map_.valid()) {
    if (err == EINVAL) return fail("this kernel cannot map BPF arrays (needs Linux 5.5+)");
    return fail(refusal(err, "cannot create the BPF capture array"));
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  fc->slots_len_ = (size_t{nslots} * fc->slot_bytes_ + page - 1) / page * page;
  void* m = mmap(nullptr, fc->slots_len_, PROT_READ, MAP_SHARED, fc->slots_map_.get(), 0);
  if (m == MAP_FAILED) return fail(refusal(errno, "cannot map the BPF capture array"));
  fc->slots_ = static_cast<uint8_t*>(m);

  const bool link_in_header =
      static_cast<uint32_t>(layout.frame_previous) + 8 <= layout.header_bytes;
  std::string error;
  const std::vector<bpf_insn> prog =
      captureProgram(fc->config_.get(), fc->slots_map_.get(), layout.header_bytes,
                     fc->header_stride_, link_in_header, &error);
  if (prog.empty()) return fail("cannot assemble the frame capture program: " + error);
  std::string log;
  fc->program_ = bpfLoadProgram(BPF_PROG_TYPE_PERF_EVENT, prog, &log, &err);
  if (!fc->program_.valid()) {
    const std::string reason = bpfVerifierReason(log);
    if (err != EPERM && !reason.empty())
      return fail("the kernel's verifier refused the frame capture program: " + reason);
    return fail(refusal(err, "cannot load the frame capture program"));
  }
  for (uint32_t g = 0; g < max_threads; ++g) fc->free_groups_.push_back(g);
  return fc;
}

FrameCapture::~FrameCapture() {
  // Events that outlive this still hold the program and its maps: with no config left the
  // program ends at its first lookup. (Closing the links detaches it where it has them.)
  while (!watches_.empty()) forget(watches_.begin()->first);
  if (slots_) munmap(slots_, slots_len_);
}

bool FrameCapture::attach(int perf_fd, BpfFd& link) {
  int err = 0;
  link = bpfCreateLink(program_, perf_fd, BPF_PERF_EVENT, &err);
  if (link.valid()) return true;
  // Before 5.15 there are no links to perf events: the ioctl, which lasts as long as the event.
  if (err != EINVAL) return false;
  return ioctl(perf_fd, PERF_EVENT_IOC_SET_BPF, program_.get()) == 0;
}

bool FrameCapture::watch(pid_t tid, uint64_t tstate, int perf_fd) {
  if (tid <= 0 || perf_fd < 0) return false;
  Watch w;
  auto it = watches_.find(tid);
  if (it != watches_.end()) {
    w.group = it->second.group;
    if (it->second.perf_fd == perf_fd) w.link = std::move(it->second.link);
  } else {
    if (free_groups_.empty()) return false;
    w.group = free_groups_.front();
    free_groups_.pop_front();
  }
  // A re-pointed thread keeps its event's attachment: the ioctl cannot be repeated on the
  // same event (EEXIST), and a link to it is still open.
  const bool attached = it != watches_.end() && it->second.perf_fd == perf_fd;
  w.perf_fd = perf_fd;
  w.watch_id = next_watch_id_;
  next_watch_id_ = next_watch_id_ + 1 < kWatchIds ? next_watch_id_ + 1 : 1;

  Config c{};
  c.tstate = tstate;
  c.first_off = layout_.tstate_frame;
  c.second_off = layout_.cframe_current;
  c.previous_off = layout_.frame_previous;
  c.seq = uint64_t{w.watch_id} << kCountBits;
  c.slot_base = static_cast<uint32_t>(w.group * kSlotsPerThread);
  const auto key = static_cast<uint32_t>(tid);
  bool ok = bpfUpdateElem(config_, &key, &c, BPF_ANY) == 0;
  if (ok && !attached) ok = attach(perf_fd, w.link);
  if (!ok) {
    if (it != watches_.end()) watches_.erase(it);  // its old link, if any, detaches here
    bpfDeleteElem(config_, &key);
    free_groups_.push_back(w.group);
    return false;
  }
  watches_[tid] = std::move(w);
  return true;
}

void FrameCapture::forget(pid_t tid) {
  auto it = watches_.find(tid);
  if (it == watches_.end()) return;
  const auto key = static_cast<uint32_t>(tid);
  bpfDeleteElem(config_, &key);
  free_groups_.push_back(it->second.group);
  watches_.erase(it);
}

bool FrameCapture::readSlot(const uint8_t* s, uint64_t gen, Capture& out) const {
  if (load64(s, genEnd(), __ATOMIC_ACQUIRE) != gen) return false;
  uint64_t seq, time, first_hop;
  uint32_t count, status;
  std::memcpy(&seq, s + kSeq, 8);
  std::memcpy(&time, s + kTime, 8);
  std::memcpy(&first_hop, s + kFirstHop, 8);
  std::memcpy(&count, s + kCount, 4);
  std::memcpy(&status, s + kStatus, 4);
  const size_t n = std::min<size_t>(count, kMaxCapturedFrames);
  const uint32_t hb = layout_.header_bytes;
  out.addr.resize(n);
  out.bytes.resize(n * hb);
  const uint8_t* e = s + kFrames;
  for (size_t i = 0; i < n; ++i, e += 8 + header_stride_) {
    std::memcpy(&out.addr[i], e, 8);
    if (hb) std::memcpy(out.bytes.data() + i * hb, e + 8, hb);
  }
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  if (load64(s, kGenBegin, __ATOMIC_RELAXED) != gen || seq != gen) return false;
  out.seq = gen & kCountMask;
  out.time_ns = time;
  out.first_hop = first_hop;
  out.complete = status == kStatusComplete;
  out.truncated = status == kStatusTruncated;
  out.frames = n;
  return true;
}

size_t FrameCapture::scan(const Watch& w, SlotSeen* seen) const {
  const uint32_t base = static_cast<uint32_t>(w.group * kSlotsPerThread);
  size_t n = 0;
  for (uint32_t k = 0; k < kSlotsPerThread; ++k) {
    const uint8_t* s = slot(base + k);
    const uint64_t gen = load64(s, genEnd(), __ATOMIC_ACQUIRE);
    if ((gen >> kCountBits) != w.watch_id || (gen & kCountMask) == 0) continue;
    const uint64_t time = load64(s, kTime, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (load64(s, kGenBegin, __ATOMIC_RELAXED) != gen) continue;
    seen[n++] = {s, gen, time};
  }
  return n;
}

bool FrameCapture::at(pid_t tid, uint64_t sample_ns, Capture& out) const {
  auto it = watches_.find(tid);
  if (it == watches_.end()) return false;
  // A slot chosen can be overwritten before it is copied: choose again.
  for (int attempt = 0; attempt < 3; ++attempt) {
    SlotSeen seen[kSlotsPerThread];
    const size_t n = scan(it->second, seen);
    const SlotSeen* best = nullptr;
    uint64_t best_dist = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t t = seen[i].time;
      if (t > sample_ns ? t - sample_ns > kMatchAfterNs : sample_ns - t > kMatchBeforeNs)
        continue;
      const uint64_t dist = t > sample_ns ? t - sample_ns : sample_ns - t;
      if (!best || dist < best_dist) best = &seen[i], best_dist = dist;
    }
    if (!best) return false;
    // The nearest capture is the sample's own, unless that one was overwritten already: then
    // the nearest is the next sample's, taken after this one. A capture taken after the sample
    // is its own for sure when it is too close to be the next one, or when its predecessor is
    // still there (and was then farther from the sample).
    if (best->time > sample_ns + kMatchSureNs && (best->gen & kCountMask) > 1) {
      bool predecessor = false;
      for (size_t i = 0; i < n; ++i) predecessor |= seen[i].gen + 1 == best->gen;
      if (!predecessor) return false;
    }
    if (readSlot(best->slot, best->gen, out)) return true;
  }
  return false;
}

bool FrameCapture::newest(pid_t tid, Capture& out, uint64_t before_seq) const {
  auto it = watches_.find(tid);
  if (it == watches_.end()) return false;
  for (int attempt = 0; attempt < 3; ++attempt) {
    SlotSeen seen[kSlotsPerThread];
    const size_t n = scan(it->second, seen);
    const SlotSeen* best = nullptr;
    for (size_t i = 0; i < n; ++i)
      if ((seen[i].gen & kCountMask) < before_seq && (!best || seen[i].gen > best->gen))
        best = &seen[i];
    if (!best) return false;
    if (readSlot(best->slot, best->gen, out)) return true;
  }
  return false;
}

}  // namespace psrec::recorder
