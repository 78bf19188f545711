// The pass reader's planned batch (see pass_reader.hpp): the GIL and every thread state seen
// in the previous pass, with what each thread's last walk used of its stack, read in one system
// call; then each thread state parsed from it (or read afresh), and on 3.11 its current frame
// inferred from the data stack's top.
#include <algorithm>
#include <cstring>

#include "recorder/native/python/pass_reader.hpp"

namespace psrec::recorder {

using cpython::FrameModel;
using cpython::kAbsent;
namespace st = cpython::st;

namespace {

// How much of a data-stack chunk to read ahead of a walk: the part in use at the previous
// sample and room for a few more frames (a walk that finds more reads the rest). Every byte
// and page copied costs: on basic.py's shallow stacks, 4 KiB of room cost 0.35 us more per
// sample than 512 B, and 2 KiB about 0.05 us, while threads.py read no more often with 512 B.
size_t aheadLen(uint64_t used) {
  constexpr uint64_t kRoom = 512;
  return static_cast<size_t>(std::min<uint64_t>(kChunkProbe, used + kRoom));
}

}  // namespace

void PassReader::updateHint(const ThreadHead& t, StackHint& hint) {
  hint.cframe = t.frame;
  hint.chunk = t.datastack_chunk;
  hint.used = t.datastack_top > t.datastack_chunk ? t.datastack_top - t.datastack_chunk : 0;
}

ReadStatus PassReader::readPass(PassHead& out, const std::vector<PrefetchThread>& known) {
  pf_.clear();
  pf_older_.clear();
  pf_cursor_ = 0;
  uint64_t interp = proc_.mainInterpreter();
  if (!interp) return ReadStatus::kUnmapped;
  resolveGil();
  size_t gil_len = static_cast<size_t>(gil_hi_ - gil_lo_);
  uint8_t gil[64];
  const bool with_gil = gil_addr_ && gil_len <= sizeof gil;
  if (known.empty() || l_.tstate_size > 1024) return readPassHead(out);
  const size_t count = planThreads(known);
  planRequests(with_gil ? gil : nullptr, gil_len);
  // A request that fails (a thread gone, a chunk freed) costs one more call: at most eight.
  plan_.run(proc_.mem(), 8);
  if (with_gil && !plan_.ok(0)) {
    pf_.clear();
    return readPassHead(out);
  }
  markRead();
  parseGil(with_gil ? gil : nullptr, gil_len, out);
  if (count == known.size() && listUnchanged()) {
    out.threads_head = pf_.front().tstate;
    out.list_unchanged = true;
    return ReadStatus::kOk;
  }
  return proc_.mem().read(interp + static_cast<uint64_t>(l_.interp_threads_head),
                          &out.threads_head, 8);
}

size_t PassReader::planThreads(const std::vector<PrefetchThread>& known) {
  const size_t tlen = static_cast<size_t>(l_.tstate_size);
  const bool iframes = l_.frame_model == FrameModel::kInterpreterFrame;
  const bool pthread_tid = l_.tstate_native_thread_id == kAbsent && pthread_tid_offset_ >= 0;
  // Within the kernel's 1024 requests a call: the GIL, then up to 4 + StackHint::kMaxOutside +
  // StackHint::kMaxOlder a thread, for as many threads as fit (the rest are read after the pass head).
  constexpr size_t kMaxRequests = 1023;
  constexpr size_t kMaxOlderBytes = 1u << 20;  // older chunks read ahead in one pass
  pf_.resize(known.size());
  size_t count = 0, requests = 0, older_bytes = 0;
  size_t total = 0;
  for (; count < known.size(); ++count) {
    const PrefetchThread& k = known[count];
    if (requests + 4 + StackHint::kMaxOutside + k.hint.older_n > kMaxRequests) break;
    Prefetched& p = pf_[count];
    p.tstate = k.tstate;
    p.ts_off = total;
    total += tlen;
    if (iframes && k.hint.chunk && k.hint.used < kChunkProbe) {
      p.chunk = k.hint.chunk;
      p.chunk_len = aheadLen(k.hint.used);
      p.chunk_off = total;
      total += p.chunk_len;
      if (l_.tstate_cframe != kAbsent && k.hint.cframe) {
        if (l_.generators_enter_loop && sizes_.known() && k.hint.entry) {
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
      p.older_from = static_cast<uint32_t>(pf_older_.size());
      for (size_t j = 0; j < k.hint.older_n && older_bytes < kMaxOlderBytes; ++j) {
        pf_older_.push_back({k.hint.older[j], k.hint.older_len[j], total, false});
        ++p.older_n;
        total += k.hint.older_len[j];
        older_bytes += k.hint.older_len[j];
      }
    }
    if (pthread_tid && k.thread_id) p.thread_id = k.thread_id;
    requests += 4 + p.outside_n + p.older_n;  // its state, chunk, cframe, tid, and the rest
  }
  pf_.resize(count);
  pf_buf_.resize(total);
  return count;
}

void PassReader::planRequests(uint8_t* gil, size_t gil_len) {
  const size_t tlen = static_cast<size_t>(l_.tstate_size);
  const size_t count = pf_.size();
  plan_.clear();
  pf_owner_.clear();
  // No request for the list head: the copies of the thread states show whether the list is
  // still the one they were read from (listUnchanged); only when it is not is the head read.
  // The GIL is required: when it cannot be read, the pass says why the ordinary way and
  // reads nothing ahead.
  if (gil) {
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
    for (size_t j = 0; j < p.older_n; ++j) {
      const OlderChunk& c = pf_older_[p.older_from + j];
      plan_.add(c.addr, pf_buf_.data() + c.off, c.len);
      pf_owner_.push_back({idx, static_cast<uint8_t>(4 + StackHint::kMaxOutside + j)});
    }
    if (p.thread_id) {
      plan_.add(p.thread_id + static_cast<uint64_t>(pthread_tid_offset_), &p.tid, sizeof p.tid);
      pf_owner_.push_back({idx, 3});
    }
  }
}

void PassReader::markRead() {
  for (size_t j = 0; j < plan_.size(); ++j) {
    if (!plan_.ok(j)) continue;
    const auto [idx, what] = pf_owner_[j];
    if (what == 255) continue;
    Prefetched& p = pf_[idx];
    if (what == 0) p.ts_ok = true;
    else if (what == 1) p.chunk_ok = true;
    else if (what == 2) p.cframe_ok = true;
    else if (what == 3) p.tid_ok = true;
    else if (what < 4 + StackHint::kMaxOutside) p.outside_ok[what - 4] = true;
    else pf_older_[p.older_from + what - 4 - StackHint::kMaxOutside].ok = true;
  }
}

// Whether the thread states read ahead, in the previous pass's list order, still form the
// whole list: the first has no prev, each next is the one after it and each prev the one
// before, the last has no next. CPython adds a thread state at the head (setting the old
// head's prev) and unlinks one by rewriting its neighbours' links (the head's successor gets
// prev = NULL), so any change since the previous pass shows in these links; a state freed in
// the meantime has its first words overwritten by the allocator.
bool PassReader::listUnchanged() const {
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

void PassReader::parseThread(uint64_t tstate, const uint8_t* buf, size_t len, ThreadHead& out,
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
  if (l_.tstate_last_profiled_frame_seq != kAbsent) {
    out.anchor = v.ptr(l_.tstate_last_profiled_frame);
    out.anchor_seq = v.ptr(l_.tstate_last_profiled_frame_seq);
  }
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

ReadStatus PassReader::readThread(uint64_t tstate, ThreadHead& out, const StackHint* hint,
                                  bool fresh) {
  ahead_.clear();
  if (hint && !fresh) {
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
        ahead_.chunk = pf->chunk;
        ahead_.data = pf_buf_.data() + pf->chunk_off;
        ahead_.len = pf->chunk_len;
        if (pf->cframe_ok) {
          ahead_.cframe = pf->cframe;
          ahead_.frame = pf->frame;
        }
        // Copied in the same system call as the chunk: as consistent with it as its frames.
        for (size_t j = 0; j < pf->outside_n; ++j) {
          if (!pf->outside_ok[j]) continue;
          ahead_.outside_addr[ahead_.outside_n] = pf->outside[j];
          ahead_.outside_ptr[ahead_.outside_n++] = pf_buf_.data() + pf->outside_off[j];
        }
        for (size_t j = 0; j < pf->older_n; ++j) {
          const OlderChunk& c = pf_older_[pf->older_from + j];
          if (!c.ok) continue;
          ahead_.older_addr[ahead_.older_n] = c.addr;
          ahead_.older_len[ahead_.older_n] = c.len;
          ahead_.older_ptr[ahead_.older_n++] = pf_buf_.data() + c.off;
        }
      }
      parseThread(tstate, pf_buf_.data() + pf->ts_off, static_cast<size_t>(l_.tstate_size), out,
                  pf);
      uint64_t top = 0;
      if (pf->chunk_ok && pf->top_cframe && topFrame(*pf, out, &top)) {
        ahead_.cframe = pf->top_cframe;
        ahead_.frame = top;
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
    ahead_.buf.resize(chunk_len);
    reqs[n++] = {hint->chunk, ahead_.buf.data(), chunk_len};
    if (l_.tstate_cframe != kAbsent && hint->cframe)
      reqs[n++] = {hint->cframe + static_cast<uint64_t>(l_.cframe_current_frame), &ahead_.frame, 8};
    if (proc_.mem().readMany(reqs, n) == ReadStatus::kOk) {
      st = ReadStatus::kOk;
      ahead_.chunk = hint->chunk;
      ahead_.data = ahead_.buf.data();
      ahead_.len = chunk_len;
      if (n == 3) ahead_.cframe = hint->cframe;
    }
  }
  if (st != ReadStatus::kOk) st = proc_.mem().read(tstate, buf, len);
  if (st != ReadStatus::kOk) return st;
  parseThread(tstate, buf, len, out, nullptr);
  return ReadStatus::kOk;
}

uint64_t FrameSizes::of(uint64_t code) {
  if (codes_->invalidations() != generation_) {
    std::fill(std::begin(slots_), std::end(slots_), Slot{});
    generation_ = codes_->invalidations();
  }
  Slot& slot = slots_[(code >> 4) & 63];
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
bool PassReader::topFrame(const Prefetched& p, const ThreadHead& t, uint64_t* frame) {
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
    const uint64_t bytes = sizes_.of(code);
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

}  // namespace psrec::recorder
