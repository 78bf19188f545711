#include "recorder/native/unwinder.hpp"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <utility>

namespace psrec::recorder {

using cpython::FrameModel;
using cpython::kAbsent;
namespace st = cpython::st;

namespace {

constexpr size_t kChunkProbe = 16 * 1024;  // DATA_STACK_CHUNK_SIZE: the smallest chunk
constexpr uint64_t kMaxChunkBytes = 16u << 20;

// How much of a data-stack chunk to read ahead of a walk: the part in use at the previous
// sample and room for a few more frames (a walk that finds more reads the rest). Every byte
// and page copied costs: on basic.py's shallow stacks, 4 KiB of room cost 0.35 us more per
// sample than 512 B, and 2 KiB about 0.05 us, while threads.py read no more often with 512 B.
size_t aheadLen(uint64_t used) {
  constexpr uint64_t kRoom = 512;
  return static_cast<size_t>(std::min<uint64_t>(kChunkProbe, used + kRoom));
}

std::set<int32_t> taskIds(pid_t pid) {
  std::set<int32_t> out;
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] >= '0' && e->d_name[0] <= '9') out.insert(std::atoi(e->d_name));
    }
    closedir(d);
  }
  return out;
}

}  // namespace

Unwinder::Unwinder(PythonProcess& proc) : proc_(proc), l_(proc.layout()) {
  const uint64_t runtime = proc.info().runtime_addr;
  if (l_.runtime_gil_locked != kAbsent) {
    // 3.8-3.11: one GIL in _PyRuntime.ceval.gil.
    gil_addr_ = runtime;
    gil_lo_ = std::min(l_.runtime_gil_locked, l_.runtime_gil_last_holder);
    gil_hi_ = std::max(l_.runtime_gil_locked, l_.runtime_gil_last_holder) + 8;
  } else {
    resolveGil();
  }
  chunk_buf_.reserve(64 * 1024);
}

// 3.12+: interp->ceval.gil points at the GIL this interpreter uses. It is null until the
// interpreter has created its GIL, which a launched target may not have done when psrec
// attaches, so the pass reads call this again until it is set; once set it does not change.
// Not read at all where each thread state says whether it holds the GIL (3.14+), or where a
// thread's status is whether it is attached (free-threaded): one range fewer in every pass.
void Unwinder::resolveGil() {
  if (gil_addr_ || l_.interp_ceval_gil == kAbsent || l_.tstate_holds_gil != kAbsent ||
      l_.free_threaded)
    return;
  uint64_t interp = proc_.mainInterpreter();
  uint64_t gil = 0;
  if (interp &&
      proc_.mem().readValue(interp + static_cast<uint64_t>(l_.interp_ceval_gil), gil) && gil) {
    gil_addr_ = gil;
    gil_lo_ = std::min(l_.gil_locked, l_.gil_last_holder);
    gil_hi_ = std::max(l_.gil_locked, l_.gil_last_holder) + 8;
  }
}

GilStatus Unwinder::gilStatus(const ThreadHead& t, const PassHead& ph) const {
  GilStatus g;
  if (l_.free_threaded) {
    // No GIL (or one re-enabled at run time, which an attached thread then holds): a thread
    // is "attached" while it may run Python code, as a GIL holder is (pycore_pystate.h).
    g.known = t.state >= 0;
    g.held = t.state == 1;  // _Py_THREAD_ATTACHED
  } else if (t.holds_gil >= 0) {
    g.known = true;
    g.held = t.holds_gil != 0;
    g.requested_known = t.gil_requested >= 0;
    g.requested = t.gil_requested > 0;
  } else if (ph.gil_known) {
    g.known = true;
    g.held = ph.gil_locked && ph.gil_holder == t.tstate;
  }
  return g;
}

// The GIL's state from the bytes [gil_lo_, gil_hi_) of its struct; gil is null when unread.
void Unwinder::parseGil(const uint8_t* gil, size_t gil_len, PassHead& out) const {
  out.gil_known = gil != nullptr;
  if (!gil) return;
  int32_t locked_off = (l_.runtime_gil_locked != kAbsent ? l_.runtime_gil_locked : l_.gil_locked);
  int32_t holder_off =
      (l_.runtime_gil_locked != kAbsent ? l_.runtime_gil_last_holder : l_.gil_last_holder);
  StructView<st::Gil> v(gil, gil_len);
  out.gil_locked = v.at<int32_t>(locked_off - gil_lo_) != 0;
  out.gil_holder = v.at<uint64_t>(holder_off - gil_lo_);
}

bool Unwinder::listEnds(uint64_t first, uint64_t last) {
  uint64_t head = 0, next = 0;
  ReadRequest reqs[2] = {
      {proc_.mainInterpreter() + static_cast<uint64_t>(l_.interp_threads_head), &head, 8},
      {last + static_cast<uint64_t>(l_.tstate_next), &next, 8}};
  return proc_.mem().readMany(reqs, 2) == ReadStatus::kOk && head == first && next == 0;
}

bool Unwinder::linked(uint64_t tstate) {
  // Its neighbour may come or go between the two reads: a state that stays in the list
  // shows a consistent pair within a few tries, one that left it never does (CPython leaves
  // an unlinked state's own links as they were, or the allocator overwrites them).
  for (int attempt = 0; attempt < 4; ++attempt) {
    uint64_t prev = 0, link = 0;
    if (proc_.mem().read(tstate + static_cast<uint64_t>(l_.tstate_prev), &prev, 8) !=
        ReadStatus::kOk)
      return false;
    const uint64_t at =
        prev ? prev + static_cast<uint64_t>(l_.tstate_next)
             : proc_.mainInterpreter() + static_cast<uint64_t>(l_.interp_threads_head);
    if (proc_.mem().read(at, &link, 8) == ReadStatus::kOk && link == tstate) return true;
  }
  return false;
}

ReadStatus Unwinder::readPassHead(PassHead& out) {
  uint64_t interp = proc_.mainInterpreter();
  if (!interp) return ReadStatus::kUnmapped;
  resolveGil();
  uint8_t gil[64];
  ReadRequest reqs[2];
  size_t n = 0;
  reqs[n++] = {interp + static_cast<uint64_t>(l_.interp_threads_head), &out.threads_head, 8};
  size_t gil_len = static_cast<size_t>(gil_hi_ - gil_lo_);
  bool with_gil = gil_addr_ && gil_len <= sizeof gil;
  if (with_gil) reqs[n++] = {gil_addr_ + static_cast<uint64_t>(gil_lo_), gil, gil_len};
  ReadStatus st = proc_.mem().readMany(reqs, n);
  if (st != ReadStatus::kOk) return st;
  parseGil(with_gil ? gil : nullptr, gil_len, out);
  return ReadStatus::kOk;
}

bool Unwinder::calibratePthreadTid(uint64_t thread_id) {
  // glibc keeps the kernel thread id in struct pthread (pthread_t points at it); its offset
  // depends on the glibc build. Find the int32 equal to one of the process's task ids,
  // preferring the offset current x86-64 glibc uses.
  pthread_calibrated_ = true;
  std::set<int32_t> tids = taskIds(proc_.pid());
  uint8_t buf[2048];
  if (proc_.mem().read(thread_id, buf, sizeof buf) != ReadStatus::kOk) return false;
  std::vector<int32_t> hits;
  for (size_t off = 0; off + 4 <= sizeof buf; off += 4) {
    int32_t v;
    std::memcpy(&v, buf + off, 4);
    if (v > 0 && tids.count(v)) hits.push_back(static_cast<int32_t>(off));
  }
  if (hits.empty()) return false;
  pthread_tid_offset_ = std::find(hits.begin(), hits.end(), 0x2d0) != hits.end() ? 0x2d0 : hits[0];
  return true;
}

void Unwinder::updateHint(const ThreadHead& t, StackHint& hint) {
  hint.cframe = t.frame;
  hint.chunk = t.datastack_chunk;
  hint.used = t.datastack_top > t.datastack_chunk ? t.datastack_top - t.datastack_chunk : 0;
}

ReadStatus Unwinder::readPass(PassHead& out, const std::vector<PrefetchThread>& known) {
  pf_.clear();
  pf_cursor_ = 0;
  uint64_t interp = proc_.mainInterpreter();
  if (!interp) return ReadStatus::kUnmapped;
  resolveGil();
  size_t gil_len = static_cast<size_t>(gil_hi_ - gil_lo_);
  uint8_t gil[64];
  const bool with_gil = gil_addr_ && gil_len <= sizeof gil;
  if (known.empty() || l_.tstate_size > 1024) return readPassHead(out);
  // Up to eight requests per thread within the kernel's 1024.
  const size_t count = std::min<size_t>(known.size(), 127);
  const size_t tlen = static_cast<size_t>(l_.tstate_size);
  const bool iframes = l_.frame_model == FrameModel::kInterpreterFrame;
  const bool pthread_tid = l_.tstate_native_thread_id == kAbsent && pthread_tid_offset_ >= 0;
  pf_.resize(count);
  size_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    const PrefetchThread& k = known[i];
    Prefetched& p = pf_[i];
    p.tstate = k.tstate;
    p.ts_off = total;
    total += tlen;
    if (iframes && k.hint.chunk && k.hint.used < kChunkProbe) {
      p.chunk = k.hint.chunk;
      p.chunk_len = aheadLen(k.hint.used);
      p.chunk_off = total;
      total += p.chunk_len;
      if (l_.tstate_cframe != kAbsent && k.hint.cframe) {
        if (l_.generators_enter_loop && codes_ && k.hint.entry) {
          p.top_cframe = k.hint.cframe;
          p.entry = k.hint.entry;
          p.entry_code = k.hint.entry_code;
        } else {
          p.cframe = k.hint.cframe;
        }
      }
      p.outside_n = std::min<uint8_t>(k.hint.outside_n, StackHint::kMaxOutside);
      for (size_t j = 0; j < p.outside_n; ++j) {
        p.outside[j] = k.hint.outside[j];
        p.outside_off[j] = total;
        total += static_cast<size_t>(l_.iframe_size);
      }
    }
    if (pthread_tid && k.thread_id) p.thread_id = k.thread_id;
  }
  pf_buf_.resize(total);
  plan_.clear();
  pf_owner_.clear();
  // No request for the list head: the copies of the thread states show whether the list is
  // still the one they were read from (listUnchanged); only when it is not is the head read.
  // The GIL is required: when it cannot be read, the pass says why the ordinary way and
  // reads nothing ahead.
  if (with_gil) {
    plan_.add(gil_addr_ + static_cast<uint64_t>(gil_lo_), gil, gil_len, true);
    pf_owner_.push_back({0, 255});
  }
  for (size_t i = 0; i < count; ++i) {
    Prefetched& p = pf_[i];
    const auto idx = static_cast<uint32_t>(i);
    plan_.add(p.tstate, pf_buf_.data() + p.ts_off, tlen);
    pf_owner_.push_back({idx, 0});
    if (p.chunk) {
      plan_.add(p.chunk, pf_buf_.data() + p.chunk_off, p.chunk_len);
      pf_owner_.push_back({idx, 1});
    }
    if (p.cframe) {
      plan_.add(p.cframe + static_cast<uint64_t>(l_.cframe_current_frame), &p.frame, 8);
      pf_owner_.push_back({idx, 2});
    }
    for (size_t j = 0; j < p.outside_n; ++j) {
      plan_.add(p.outside[j], pf_buf_.data() + p.outside_off[j],
                static_cast<size_t>(l_.iframe_size));
      pf_owner_.push_back({idx, static_cast<uint8_t>(4 + j)});
    }
    if (p.thread_id) {
      plan_.add(p.thread_id + static_cast<uint64_t>(pthread_tid_offset_), &p.tid, sizeof p.tid);
      pf_owner_.push_back({idx, 3});
    }
  }
  // A request that fails (a thread gone, a chunk freed) costs one more call: at most eight.
  plan_.run(proc_.mem(), 8);
  if (with_gil && !plan_.ok(0)) {
    pf_.clear();
    return readPassHead(out);
  }
  for (size_t j = 0; j < plan_.size(); ++j) {
    if (!plan_.ok(j)) continue;
    const auto [idx, what] = pf_owner_[j];
    if (what == 255) continue;
    Prefetched& p = pf_[idx];
    if (what == 0) p.ts_ok = true;
    else if (what == 1) p.chunk_ok = true;
    else if (what == 2) p.cframe_ok = true;
    else if (what == 3) p.tid_ok = true;
    else p.outside_ok[what - 4] = true;
  }
  parseGil(with_gil ? gil : nullptr, gil_len, out);
  if (count == known.size() && listUnchanged()) {
    out.threads_head = pf_.front().tstate;
    out.list_unchanged = true;
    return ReadStatus::kOk;
  }
  return proc_.mem().read(interp + static_cast<uint64_t>(l_.interp_threads_head),
                          &out.threads_head, 8);
}

// Whether the thread states read ahead, in the previous pass's list order, still form the
// whole list: the first has no prev, each next is the one after it and each prev the one
// before, the last has no next. CPython adds a thread state at the head (setting the old
// head's prev) and unlinks one by rewriting its neighbours' links (the head's successor gets
// prev = NULL), so any change since the previous pass shows in these links; a state freed in
// the meantime has its first words overwritten by the allocator.
bool Unwinder::listUnchanged() const {
  uint64_t prev = 0;
  for (size_t i = 0; i < pf_.size(); ++i) {
    const Prefetched& p = pf_[i];
    if (!p.ts_ok) return false;
    StructView<st::TState> v(pf_buf_.data() + p.ts_off, static_cast<size_t>(l_.tstate_size));
    const uint64_t next = i + 1 < pf_.size() ? pf_[i + 1].tstate : 0;
    if (v.ptr(l_.tstate_prev) != prev || v.ptr(l_.tstate_next) != next) return false;
    prev = p.tstate;
  }
  return !pf_.empty();
}

void Unwinder::parseThread(uint64_t tstate, const uint8_t* buf, size_t len, ThreadHead& out,
                           const Prefetched* pf) {
  StructView<st::TState> v(buf, len);
  out.tstate = tstate;
  out.prev = v.ptr(l_.tstate_prev);
  out.next = v.ptr(l_.tstate_next);
  out.interp = v.ptr(l_.tstate_interp);
  out.thread_id = v.ptr(l_.tstate_thread_id);
  out.native_tid = l_.tstate_native_thread_id != kAbsent ? v.ptr(l_.tstate_native_thread_id) : 0;
  if (l_.tstate_frame != kAbsent) out.frame = v.ptr(l_.tstate_frame);
  else if (l_.tstate_cframe != kAbsent) out.frame = v.ptr(l_.tstate_cframe);
  else out.frame = v.ptr(l_.tstate_current_frame);
  out.datastack_chunk = l_.tstate_datastack_chunk != kAbsent ? v.ptr(l_.tstate_datastack_chunk) : 0;
  out.datastack_top = l_.tstate_datastack_top != kAbsent ? v.ptr(l_.tstate_datastack_top) : 0;
  if (l_.free_threaded && l_.tstate_state != kAbsent) out.state = v.get<int32_t>(l_.tstate_state);
  if (l_.tstate_base_frame != kAbsent) out.base_frame = v.ptr(l_.tstate_base_frame);
  if (l_.tstate_holds_gil != kAbsent) {
    out.holds_gil = v.get<int32_t>(l_.tstate_holds_gil);
    if (l_.tstate_gil_requested != kAbsent)
      out.gil_requested = v.get<int32_t>(l_.tstate_gil_requested);
  }
  if (l_.tstate_native_thread_id == kAbsent && out.thread_id) {
    // The pthread's tid read ahead counts only for the same pthread_t it was read from.
    if (pf && pf->tid_ok && pf->thread_id == out.thread_id && pf->tid > 0) {
      out.native_tid = static_cast<uint64_t>(pf->tid);
      return;
    }
    if (!pthread_calibrated_) calibratePthreadTid(out.thread_id);
    if (pthread_tid_offset_ >= 0) {
      int32_t tid = 0;
      if (proc_.mem().readValue(out.thread_id + static_cast<uint64_t>(pthread_tid_offset_), tid) &&
          tid > 0)
        out.native_tid = static_cast<uint64_t>(tid);
    }
  }
}

uint64_t Unwinder::frameBytesOf(uint64_t code) {
  if (codes_->invalidations() != sizes_gen_) {
    std::fill(std::begin(sizes_), std::end(sizes_), SizeSlot{});
    sizes_gen_ = codes_->invalidations();
  }
  SizeSlot& slot = sizes_[(code >> 4) & 63];
  if (slot.code != code) {
    const CodeInfo* info = codes_->peek(code);
    if (!info) return 0;
    slot = {code, info->frame_bytes};
  }
  return slot.bytes;
}

// 3.11, with the thread state still pointing at the _PyCFrame of the previous pass: that run of
// the interpreter loop began with the frame p.entry in the data-stack chunk. Generators and
// calls from C each run in a loop of their own (Layout::generators_enter_loop), with a
// _PyCFrame of their own, so every frame of this loop above its entry frame was pushed by an
// inlined call: the frames from the entry to datastack_top follow one another without gaps,
// each taking its code's frame size and linking to the one below it, and the current frame
// is the last of them. (A loop that ended and another that began at the same _PyCFrame
// address started with a frame at the same place, which is then that loop's entry; or with a
// generator's frame, outside the chunk, and the chain from the old entry no longer reaches
// the top.) Anything that does not fit leaves the _PyCFrame to be read.
bool Unwinder::topFrame(const Prefetched& p, const ThreadHead& t, uint64_t* frame) {
  if (t.frame != p.top_cframe || t.datastack_chunk != p.chunk) return false;
  const uint64_t top = t.datastack_top;
  const uint64_t base = p.chunk + static_cast<uint64_t>(l_.chunk_data);
  const uint64_t head = static_cast<uint64_t>(l_.iframe_size);
  if (top <= base || top - p.chunk > p.chunk_len) return false;
  const uint8_t* data = pf_buf_.data() + p.chunk_off;
  uint64_t at = p.entry, below = 0;
  for (int n = 0; n < 4096; ++n) {
    if (at < base || at > top || top - at < head) return false;
    StructView<st::IFrame> v(data + (at - p.chunk), static_cast<size_t>(head));
    const uint64_t code = v.ptr(l_.iframe_code);
    if (v.get<uint8_t>(l_.iframe_owner) != 0) return false;  // FRAME_OWNED_BY_THREAD
    const bool entry = v.get<uint8_t>(l_.iframe_is_entry) != 0;
    if (n == 0 ? (code != p.entry_code || !entry) : (entry || v.ptr(l_.iframe_previous) != below))
      return false;
    const uint64_t bytes = frameBytesOf(code);
    if (!bytes || bytes > top - at) return false;
    if (bytes == top - at) {
      *frame = at;
      return true;
    }
    below = at;
    at += bytes;
  }
  return false;
}

void Unwinder::noteWalk(StackHint& hint) const {
  if (walk_bottom_) hint.bottom = walk_bottom_;
  hint.entry = walk_entry_;
  hint.entry_code = walk_entry_code_;
  hint.outside_n = 0;
  for (uint64_t a : walk_outside_) {
    if (hint.outside_n == StackHint::kMaxOutside) break;
    hint.outside[hint.outside_n++] = a;
  }
}

ReadStatus Unwinder::readThread(uint64_t tstate, ThreadHead& out, const StackHint* hint) {
  spec_cframe_ = spec_chunk_ = 0;
  spec_out_n_ = 0;
  if (hint) {
    // Read ahead by readPass, in list order as a rule.
    const Prefetched* pf = nullptr;
    if (pf_cursor_ < pf_.size() && pf_[pf_cursor_].tstate == tstate) {
      pf = &pf_[pf_cursor_++];
    } else {
      for (const auto& q : pf_)
        if (q.tstate == tstate) pf = &q;
    }
    if (pf && pf->ts_ok) {
      if (pf->chunk_ok) {
        spec_chunk_ = pf->chunk;
        spec_data_ = pf_buf_.data() + pf->chunk_off;
        spec_len_ = pf->chunk_len;
        if (pf->cframe_ok) {
          spec_cframe_ = pf->cframe;
          spec_frame_ = pf->frame;
        }
        // Copied in the same system call as the chunk: as consistent with it as its frames.
        for (size_t j = 0; j < pf->outside_n; ++j) {
          if (!pf->outside_ok[j]) continue;
          spec_out_addr_[spec_out_n_] = pf->outside[j];
          spec_out_ptr_[spec_out_n_++] = pf_buf_.data() + pf->outside_off[j];
        }
      }
      parseThread(tstate, pf_buf_.data() + pf->ts_off, static_cast<size_t>(l_.tstate_size), out,
                  pf);
      uint64_t top = 0;
      if (pf->chunk_ok && pf->top_cframe && topFrame(*pf, out, &top)) {
        spec_cframe_ = pf->top_cframe;
        spec_frame_ = top;
      }
      return ReadStatus::kOk;
    }
  }
  uint8_t buf[1024];
  size_t len = static_cast<size_t>(l_.tstate_size);
  if (len > sizeof buf) return ReadStatus::kOther;
  ReadStatus st = ReadStatus::kOther;
  if (hint && l_.frame_model == FrameModel::kInterpreterFrame && hint->chunk &&
      hint->used < kChunkProbe) {
    ReadRequest reqs[3];
    size_t n = 0;
    reqs[n++] = {tstate, buf, len};
    size_t chunk_len = aheadLen(hint->used);
    spec_buf_.resize(chunk_len);
    reqs[n++] = {hint->chunk, spec_buf_.data(), chunk_len};
    if (l_.tstate_cframe != kAbsent && hint->cframe)
      reqs[n++] = {hint->cframe + static_cast<uint64_t>(l_.cframe_current_frame), &spec_frame_, 8};
    if (proc_.mem().readMany(reqs, n) == ReadStatus::kOk) {
      st = ReadStatus::kOk;
      spec_chunk_ = hint->chunk;
      spec_data_ = spec_buf_.data();
      spec_len_ = chunk_len;
      if (n == 3) spec_cframe_ = hint->cframe;
    }
  }
  if (st != ReadStatus::kOk) st = proc_.mem().read(tstate, buf, len);
  if (st != ReadStatus::kOk) return st;
  parseThread(tstate, buf, len, out, nullptr);
  return ReadStatus::kOk;
}

bool Unwinder::loadChunk(uint64_t addr, uint64_t used_end) {
  size_t at = chunk_buf_.size();
  ++chunk_loads_;
  ++stats_.chunk_reads;
  if (used_end) {
    // The current chunk: its used part ends at tstate->datastack_top.
    if (used_end <= addr || used_end - addr > kMaxChunkBytes) return false;
    size_t len = static_cast<size_t>(used_end - addr);
    chunk_buf_.resize(at + len);
    if (proc_.mem().read(addr, chunk_buf_.data() + at, len) != ReadStatus::kOk) {
      chunk_buf_.resize(at);
      return false;
    }
  } else {
    // An older chunk: read the smallest chunk size in one go; its header says how much of it
    // (chunk->top, saved when the next chunk was pushed) is in use.
    chunk_buf_.resize(at + kChunkProbe);
    ReadStatus st;
    size_t got = proc_.mem().readSome(addr, chunk_buf_.data() + at, kChunkProbe, &st);
    if (got < static_cast<size_t>(l_.chunk_data)) {
      chunk_buf_.resize(at);
      return false;
    }
    StructView<st::Chunk> h(chunk_buf_.data() + at, got);
    uint64_t size = h.ptr(l_.chunk_size);
    uint64_t top = h.ptr(l_.chunk_top);
    uint64_t used = static_cast<uint64_t>(l_.chunk_data) + top * 8;
    if (used > size || size > kMaxChunkBytes) {
      chunk_buf_.resize(at);
      return false;
    }
    if (used > got) {
      chunk_buf_.resize(at + used);
      if (proc_.mem().read(addr + got, chunk_buf_.data() + at + got, used - got) !=
          ReadStatus::kOk) {
        chunk_buf_.resize(at);
        return false;
      }
    } else {
      chunk_buf_.resize(at + used);
    }
    used_end = addr + used;
  }
  StructView<st::Chunk> h(chunk_buf_.data() + at, chunk_buf_.size() - at);
  next_chunk_ = h.ptr(l_.chunk_previous);
  chunks_.push_back({addr, used_end, at});
  return true;
}

void Unwinder::noteSolo(uint64_t addr, const uint8_t* bytes, size_t len, bool leaf) {
  size_t at = solo_buf_.size();
  solo_buf_.insert(solo_buf_.end(), bytes, bytes + len);
  solo_.push_back({addr, at, leaf});
}

bool Unwinder::verifySolo(size_t len, int32_t instr_offset, size_t instr_width,
                          uint64_t leaf_ptr, uint64_t leaf) {
  // A frame read on its own is not part of one bulk copy: re-read all of them at once and
  // require them unchanged (links, code, and the caller's instruction: a caller that moved on
  // means the callee we read belongs to another call). The leaf's own instruction may move.
  if (solo_.empty()) return true;
  verify_buf_.resize(solo_buf_.size());
  uint64_t leaf_now = 0;
  verify_plan_.clear();
  // The innermost frame must still be the thread's current one: a frame that returned keeps
  // its contents (a zombie frame on 3.8-3.10), and its caller, read after it, may already be
  // at its next call.
  if (leaf_ptr) verify_plan_.add(leaf_ptr, &leaf_now, 8);
  for (const SoloFrame& f : solo_) verify_plan_.add(f.addr, verify_buf_.data() + f.offset, len);
  if (!verify_plan_.run(proc_.mem(), 0)) return false;
  verified_leaf_ = leaf_now;
  if (leaf_ptr && leaf_now != leaf && !calledFrom(leaf_now, leaf) && !selfRecursiveLeaf())
    return false;
  // The fields a walk uses must be unchanged: code, link, owner, and the instruction of
  // every frame but the leaf. Not the whole struct: a running leaf moves its own stack
  // pointer all the time, which says nothing of the copy.
  const bool objects = l_.frame_model == FrameModel::kFrameObject;
  // (Offsets into copies of either struct: compared byte for byte, not read as fields.)
  const int32_t fields[3] = {objects ? int32_t{l_.frame_code} : int32_t{l_.iframe_code},
                             objects ? int32_t{l_.frame_back} : int32_t{l_.iframe_previous},
                             objects ? kAbsent : int32_t{l_.iframe_owner}};
  const size_t widths[3] = {8, 8, 1};
  auto same = [&](const uint8_t* a, const uint8_t* b, int32_t off, size_t width) {
    return off == kAbsent || (static_cast<size_t>(off) + width <= len &&
                              std::memcmp(a + off, b + off, width) == 0);
  };
  for (size_t i = 0; i < solo_.size(); ++i) {
    const SoloFrame& f = solo_[i];
    const uint8_t* a = solo_buf_.data() + f.offset;
    const uint8_t* b = verify_buf_.data() + f.offset;
    // (A frame called by its own function that returned may already be reused at another
    // depth of the recursion: its link is not compared either.)
    for (int k = 0; k < 3; ++k)
      if (!same(a, b, fields[k], widths[k]) && !(k == 1 && selfCall(i + 1)))
        return false;
    if (!f.leaf && !same(a, b, instr_offset, instr_width) && !selfCall(i)) return false;
  }
  return true;
}

bool Unwinder::selfCall(size_t i) const {
  // 3.8-3.10 (frames in walk order, innermost first): solo frame i calls a frame of its own
  // function. Such a caller moves between its recursive calls faster than a re-read can
  // confirm, and shows the same function at any of them (as on 3.11+, see StackReader).
  if (l_.frame_model != FrameModel::kFrameObject || i == 0 || i >= solo_.size()) return false;
  const size_t len = static_cast<size_t>(l_.frame_size);
  const uint64_t code = StructView<st::FrameObject>(solo_buf_.data() + solo_[i].offset, len).ptr(l_.frame_code);
  const uint64_t callee =
      StructView<st::FrameObject>(solo_buf_.data() + solo_[i - 1].offset, len).ptr(l_.frame_code);
  return code && code == callee;
}

void Unwinder::guessFrames(uint64_t tstate, const std::vector<RawFrame>& frames) {
  guess_tstate_ = tstate;
  guess_.clear();
  for (const RawFrame& f : frames) guess_.push_back(f.addr);
  std::sort(guess_.begin(), guess_.end());
}

bool Unwinder::walkGuessed(const ThreadHead& t, std::vector<RawFrame>& out, size_t max_depth,
                           uint64_t* current_frame) {
  // The thread's current frame and every guessed frame in one copy: when the chain from the
  // current frame runs through guessed frames to its end, the stack is that copy (as
  // consistent as a 3.11+ data-stack chunk, and checked as those are: StackReader re-reads
  // callers whose callee changed in place).
  const size_t len = static_cast<size_t>(l_.frame_size);
  const size_t n = std::min<size_t>(guess_.size(), 1000);
  if (!n) return false;
  guess_buf_.resize(n * len);
  uint64_t current = 0;
  verify_plan_.clear();
  verify_plan_.add(t.tstate + static_cast<uint64_t>(l_.tstate_frame), &current, 8);
  for (size_t i = 0; i < n; ++i) verify_plan_.add(guess_[i], guess_buf_.data() + i * len, len);
  ++stats_.frame_reads;
  if (!verify_plan_.run(proc_.mem(), 0)) return false;
  *current_frame = current;
  out.clear();
  solo_.clear();
  solo_buf_.clear();
  uint64_t addr = current;
  while (addr) {
    if (out.size() >= max_depth || out.size() >= n) return false;
    auto it = std::lower_bound(guess_.begin(), guess_.begin() + static_cast<long>(n), addr);
    if (it == guess_.begin() + static_cast<long>(n) || *it != addr) return false;
    StructView<st::FrameObject> v(guess_buf_.data() + static_cast<size_t>(it - guess_.begin()) * len, len);
    RawFrame f;
    f.addr = addr;
    f.code = v.ptr(l_.frame_code);
    f.instr = static_cast<uint64_t>(static_cast<uint32_t>(v.get<int32_t>(l_.frame_lasti)));
    f.prev = v.ptr(l_.frame_back);
    if (!f.code) return false;
    noteSolo(addr, guess_buf_.data() + static_cast<size_t>(it - guess_.begin()) * len, len,
             out.empty());
    out.push_back(f);
    addr = f.prev;
  }
  // One copy is not one instant (the kernel copies the frames one after the other, in
  // address order): read them all again, with the current frame, and require them unchanged,
  // as a walk one by one is.
  return verifySolo(len, l_.frame_lasti, 4, t.tstate + static_cast<uint64_t>(l_.tstate_frame),
                    current);
}

bool Unwinder::selfRecursiveLeaf() const {
  // 3.8-3.10: a leaf that returned while the walk read it, called by the same function. Fast
  // recursion returns and calls again faster than any re-read can confirm a leaf, and the
  // functions its stack shows are right either way: as in a self-recursion on 3.11+, the
  // stack is kept rather than counted as an error, which would drop nearly every sample of it.
  return !solo_.empty() && solo_[0].leaf && selfCall(1);
}

bool Unwinder::calledFrom(uint64_t now, uint64_t leaf) {
  // 3.8-3.10: the thread's current frame moved since the walk began. When it is a callee of
  // the frame the walk took as innermost (the leaf called on, as fast-calling code does all
  // the time), that frame is still live and the stack read is the thread's stack as it was:
  // only a leaf that returned makes the stack read stale. A few frames are followed.
  if (l_.frame_model != FrameModel::kFrameObject || !now || !leaf) return false;
  for (int i = 0; i < 4 && now; ++i) {
    uint64_t back = 0;
    if (!proc_.mem().readValue(now + static_cast<uint64_t>(l_.frame_back), back)) return false;
    if (back == leaf) return true;
    now = back;
  }
  return false;
}

bool Unwinder::verifyCallers(const std::vector<RawFrame>& frames, const size_t* which,
                             size_t count) {
  // One bulk copy is not one snapshot: it runs from low to high addresses while the target
  // runs, so a caller can be copied before its callee returned and the callee after another
  // function took its place (the same address, the caller at its next line). Re-read such
  // callers at once and require each one's code, link and instruction unchanged.
  if (count == 0) return true;
  if (l_.frame_model == FrameModel::kFrameObject) {
    // 3.8-3.10: the same for a walk copied in one read (walkGuessed).
    const size_t flen = static_cast<size_t>(l_.frame_size);
    verify_buf_.resize(count * flen);
    verify_plan_.clear();
    for (size_t k = 0; k < count; ++k)
      verify_plan_.add(frames[which[k]].addr, verify_buf_.data() + k * flen, flen);
    if (!verify_plan_.run(proc_.mem(), 0)) return false;
    for (size_t k = 0; k < count; ++k) {
      StructView<st::FrameObject> v(verify_buf_.data() + k * flen, flen);
      const RawFrame& f = frames[which[k]];
      if (v.ptr(l_.frame_code) != f.code || v.ptr(l_.frame_back) != f.prev ||
          static_cast<uint64_t>(static_cast<uint32_t>(v.get<int32_t>(l_.frame_lasti))) != f.instr)
        return false;
    }
    return true;
  }
  if (l_.frame_model != FrameModel::kInterpreterFrame) return true;
  const size_t len = static_cast<size_t>(l_.iframe_size);
  verify_buf_.resize(count * len);
  verify_plan_.clear();
  for (size_t k = 0; k < count; ++k)
    verify_plan_.add(frames[which[k]].addr, verify_buf_.data() + k * len, len);
  if (!verify_plan_.run(proc_.mem(), 0)) return false;
  for (size_t k = 0; k < count; ++k) {
    StructView<st::IFrame> v(verify_buf_.data() + k * len, len);
    const RawFrame& f = frames[which[k]];
    if ((v.ptr(l_.iframe_code) & ~l_.code_tag_bits) != f.code ||
        v.ptr(l_.iframe_previous) != f.prev || v.ptr(l_.iframe_instr) != f.instr)
      return false;
  }
  return true;
}

const uint8_t* Unwinder::frameBytes(uint64_t addr) {
  const uint64_t size = static_cast<uint64_t>(l_.iframe_size);
  if (last_chunk_ < chunks_.size()) {
    const auto& c = chunks_[last_chunk_];
    if (addr >= c.start && c.end - c.start >= size && addr - c.start <= c.end - c.start - size)
      return chunk_buf_.data() + c.offset + (addr - c.start);
  }
  for (;;) {
    for (size_t i = 0; i < chunks_.size(); ++i) {
      const auto& c = chunks_[i];
      // Written so that a torn pointer near 2^64 cannot wrap around into range.
      if (addr >= c.start && c.end - c.start >= size &&
          addr - c.start <= c.end - c.start - size) {
        last_chunk_ = i;
        return chunk_buf_.data() + c.offset + (addr - c.start);
      }
    }
    // Not in what we have: older chunks hold outer frames; frames outside every chunk
    // (generators, C-stack entry frames) are read on their own.
    if (!next_chunk_ || chunk_loads_ >= 256 || !loadChunk(next_chunk_, 0)) break;
  }
  walk_outside_.push_back(addr);
  for (size_t j = 0; j < spec_out_n_; ++j)
    if (spec_out_addr_[j] == addr) return spec_out_ptr_[j];
  ++stats_.frame_reads;
  if (size > sizeof scratch_ || proc_.mem().read(addr, scratch_, size) != ReadStatus::kOk)
    return nullptr;
  noteSolo(addr, scratch_, size, false);
  return scratch_;
}

WalkResult Unwinder::walk(const ThreadHead& t, std::vector<RawFrame>& out, size_t max_depth,
                          uint64_t bottom) {
  out.clear();
  walk_outside_.clear();
  if (l_.frame_model == FrameModel::kFrameObject) {
    // The guessed copy also reads the thread's current frame: a walk one by one after it
    // starts from there (the thread state read at the pass's start is older).
    uint64_t start = t.frame;
    if (guess_tstate_ == t.tstate && walkGuessed(t, out, max_depth, &start))
      return WalkResult::kOk;
    // One by one, each frame's link read before the next: slow enough for a thread that calls
    // and returns fast to change under the walk, so every frame is checked afterwards. The
    // frames read are the guess for a walk again.
    uint8_t buf[256];
    size_t len = static_cast<size_t>(l_.frame_size);
    uint64_t addr = start;
    solo_.clear();
    solo_buf_.clear();
    out.clear();
    guess_tstate_ = t.tstate;
    guess_.clear();
    WalkResult result = WalkResult::kOk;
    while (addr) {
      if (out.size() >= max_depth) {
        result = WalkResult::kTruncated;
        break;
      }
      ++stats_.frame_reads;
      guess_.push_back(addr);
      if (proc_.mem().read(addr, buf, len) != ReadStatus::kOk) {
        result = WalkResult::kError;
        break;
      }
      noteSolo(addr, buf, len, out.empty());
      StructView<st::FrameObject> v(buf, len);
      RawFrame f;
      f.addr = addr;
      f.code = v.ptr(l_.frame_code);
      f.instr = static_cast<uint64_t>(static_cast<uint32_t>(v.get<int32_t>(l_.frame_lasti)));
      f.prev = v.ptr(l_.frame_back);
      if (!f.code) {
        result = WalkResult::kError;
        break;
      }
      out.push_back(f);
      addr = f.prev;
    }
    std::sort(guess_.begin(), guess_.end());
    verified_leaf_ = 1;
    if (result == WalkResult::kOk &&
        !verifySolo(len, l_.frame_lasti, 4, t.tstate + static_cast<uint64_t>(l_.tstate_frame),
                    start)) {
      // A thread whose Python code ended meanwhile (a thread finishing) was seen without a
      // Python frame, in the check's own read: that is its sample.
      if (!verified_leaf_) {
        out.clear();
        return WalkResult::kOk;
      }
      result = WalkResult::kError;
    }
    return result;
  }

  walk_entry_ = walk_entry_code_ = walk_bottom_ = 0;
  bool entry_seen = false;
  bool check_current = false;
  uint64_t addr = t.frame;
  const uint64_t spec_cframe = std::exchange(spec_cframe_, 0);
  const uint64_t spec_chunk = std::exchange(spec_chunk_, 0);
  if (l_.tstate_cframe != kAbsent) {
    // 3.11-3.12: tstate->cframe->current_frame.
    if (!addr) return WalkResult::kOk;
    if (spec_cframe && spec_cframe == addr) {
      addr = spec_frame_;
    } else if (!proc_.mem().readValue(addr + static_cast<uint64_t>(l_.cframe_current_frame),
                                      addr)) {
      return WalkResult::kError;
    }
  }
  chunk_buf_.clear();
  chunks_.clear();
  last_chunk_ = 0;
  solo_.clear();
  solo_buf_.clear();
  next_chunk_ = 0;
  chunk_loads_ = 0;
  if (addr && t.datastack_chunk && t.datastack_top > t.datastack_chunk) {
    const uint64_t used = t.datastack_top - t.datastack_chunk;
    if (spec_chunk == t.datastack_chunk && used <= spec_len_ &&
        used >= static_cast<uint64_t>(l_.chunk_data)) {
      // Read ahead with the thread state: no further system call.
      chunk_buf_.assign(spec_data_, spec_data_ + used);
      next_chunk_ = StructView<st::Chunk>(chunk_buf_.data(), chunk_buf_.size()).ptr(l_.chunk_previous);
      chunks_.push_back({t.datastack_chunk, t.datastack_top, 0});
    } else {
      // One bulk read of the current chunk's used part instead of one read per frame.
      loadChunk(t.datastack_chunk, t.datastack_top);
    }
  }
  while (addr) {
    if (addr == t.base_frame) {
      // 3.15+: the thread's base frame, inside its thread state, is where every stack of it
      // ends (owned by the interpreter, no `previous`): nothing in it to read.
      if (!out.empty()) out.back().entered = true;
      walk_bottom_ = addr;
      break;
    }
    if (out.size() >= max_depth) return WalkResult::kTruncated;
    const size_t outside_before = walk_outside_.size();
    const uint8_t* p = frameBytes(addr);
    if (!p) return WalkResult::kError;
    StructView<st::IFrame> v(p, static_cast<size_t>(l_.iframe_size));
    uint8_t owner = v.get<uint8_t>(l_.iframe_owner);
    uint64_t prev = v.ptr(l_.iframe_previous);
    if (owner > l_.owner_max) return WalkResult::kError;  // not a frame: a torn read
    // A generator drops its frame's `previous` link when it suspends: a suspended frame on a
    // running stack means the copy caught the generator between a yield and a resume.
    if (owner == kOwnedByGenerator && !prev) return WalkResult::kError;
    if (owner >= l_.owner_shim) {
      // Shim frames owned by the C stack or the interpreter (3.12+) run no Python code: never
      // report them. The frame above one was entered from C.
      if (!out.empty()) out.back().entered = true;
    } else {
      RawFrame f;
      f.addr = addr;
      f.prev = prev;
      f.code = v.ptr(l_.iframe_code) & ~l_.code_tag_bits;
      f.instr = v.ptr(l_.iframe_instr);
      if (l_.iframe_tlbc_index != kAbsent) f.tlbc = v.get<int32_t>(l_.iframe_tlbc_index);
      f.owner = owner;
      f.outside = walk_outside_.size() != outside_before;
      if (l_.iframe_is_entry != kAbsent) f.entered = v.get<uint8_t>(l_.iframe_is_entry) != 0;
      if (!f.code) return WalkResult::kError;
      if (f.entered && !entry_seen) {
        // The current loop's entry frame; noted for the next pass only when it is in the
        // current chunk.
        entry_seen = true;
        if (!f.outside && addr >= t.datastack_chunk && addr < t.datastack_top) {
          walk_entry_ = addr;
          walk_entry_code_ = f.code;
        }
      }
      if (f.code != shim_code_ || !shim_code_) out.push_back(f);
    }
    if (prev == addr) return WalkResult::kError;
    if (!prev && l_.owner_shim != cpython::Layout::kNoShim && owner < l_.owner_shim) {
      // 3.12+ runs every frame under the entry frame of its run of the interpreter loop: a
      // Python frame with no `previous` was pushed and not yet linked to its entry frame
      // (_PyEval_Vector pushes it unlinked; _PyEval_EvalFrameDefault links it), and the copy
      // caught the thread's current frame pointing at it already.
      return WalkResult::kError;
    }
    if (!prev && t.base_frame && addr != t.base_frame) {
      // 3.15+: every whole stack ends at the thread's base frame; one that ends elsewhere
      // was copied while an entry frame was being linked in (its `previous` not yet set).
      return WalkResult::kError;
    }
    if (!prev && owner >= l_.owner_shim && addr != bottom &&
        walk_outside_.size() != outside_before) {
      // The walk ends at an entry frame on the C stack other than the one the thread's last
      // walk ended at: either the thread's stack is new, or the copy caught an entry frame
      // that a re-entry from C was still setting up, its `previous` not yet linked, and the
      // stack looks whole while its outer frames are missing. Read it again, with the
      // thread's current frame, before believing it.
      if (solo_.empty() || solo_.back().addr != addr)
        noteSolo(addr, p, static_cast<size_t>(l_.iframe_size), false);
      check_current = l_.tstate_current_frame != kAbsent;
    }
    if (!prev) walk_bottom_ = addr;
    addr = prev;
  }
  if (!solo_.empty()) {
    // The innermost frame's instruction pointer may move; mark it so if it was read alone.
    if (!out.empty() && solo_.front().addr == out.front().addr) solo_.front().leaf = true;
    const uint64_t current =
        check_current ? t.tstate + static_cast<uint64_t>(l_.tstate_current_frame) : 0;
    verified_leaf_ = 1;
    if (!verifySolo(static_cast<size_t>(l_.iframe_size), l_.iframe_instr, 8, current, t.frame)) {
      walk_bottom_ = 0;
      // As on 3.8-3.10: a thread seen with no current frame in the check's own read has left
      // Python code (it is ending); that is its sample.
      if (current && !verified_leaf_) {
        out.clear();
        return WalkResult::kOk;
      }
      return WalkResult::kError;
    }
  }
  return WalkResult::kOk;
}

}  // namespace psrec::recorder
