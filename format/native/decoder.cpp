#include "format/native/decoder.hpp"

#include <algorithm>

#include "format/native/constants.hpp"
#include "format/native/varint.hpp"

namespace psrec::format {

namespace {

[[noreturn]] void fail(const char* what) { throw DecodeError(what); }

inline uint64_t need(ByteReader& r, const char* what) {
  uint64_t v;
  if (!r.varint(v)) fail(what);
  return v;
}

// Values that must fit the decoded form: anything wider can only come from a damaged payload,
// and is an error rather than a silently wrapped value (the reference decoder does the same).
inline uint32_t need32(ByteReader& r, const char* what) {
  uint64_t v = need(r, what);
  if (v > UINT32_MAX) fail(what);
  return static_cast<uint32_t>(v);
}

inline int64_t needI64(ByteReader& r, const char* what) {
  uint64_t v = need(r, what);
  if (v > static_cast<uint64_t>(INT64_MAX)) fail(what);
  return static_cast<int64_t>(v);
}

// Where a key of two 32-bit halves starts probing in a table of a power-of-two size (at
// least 8). Keys that differ only in the low three bits go to neighbouring slots (trie nodes
// made one after another, frames of one function, are often used together, and then share
// cache lines); groups of eight are spread by a hash of the rest, so that runs of consecutive
// keys (one thread's nodes 0..n) never pile up into long probe sequences.
inline size_t groupedSlot(uint64_t key) {
  uint64_t g = key >> 3;  // every bit of the group moves the low bits the mask keeps
  g ^= g >> 33;
  g *= 0xFF51AFD7ED558CCDULL;
  g ^= g >> 33;
  return static_cast<size_t>(g << 3 | (key & 7));
}

}  // namespace

StackTrie::StackTrie() : index_(1024, Slot{0, 0}) {
  parent_.push_back(0);
  frame_.push_back(0);
  depth_.push_back(0);
  hint_.push_back(0);
}

size_t StackTrie::indexSlot(uint64_t key) const {
  // The slot holding key, or the free slot where it would go.
  const size_t mask = index_.size() - 1;
  size_t i = groupedSlot(key) & mask;
  while (index_[i].node != 0 && index_[i].key != key) i = (i + 1) & mask;
  return i;
}

void StackTrie::growIndex() {
  std::vector<Slot> old(index_.size() * 2, Slot{0, 0});
  old.swap(index_);
  for (const Slot& s : old)
    if (s.node != 0) index_[indexSlot(s.key)] = s;
}

uint32_t StackTrie::child(uint32_t parent, uint32_t frame) {
  const uint32_t h = hint_[parent];
  if (h != 0 && frame_[h] == frame) return h;
  const uint64_t key = (static_cast<uint64_t>(parent) << 32) | frame;
  size_t at = indexSlot(key);
  if (index_[at].node != 0) {
    hint_[parent] = index_[at].node;
    return index_[at].node;
  }
  uint32_t id = static_cast<uint32_t>(parent_.size());
  parent_.push_back(parent);
  frame_.push_back(frame);
  depth_.push_back(depth_[parent] + 1);
  hint_.push_back(0);
  hint_[parent] = id;
  // parent_ holds the root too: the index has parent_.size() - 1 entries after this one.
  if (2 * parent_.size() > index_.size()) {
    growIndex();
    at = indexSlot(key);
  }
  index_[at] = Slot{key, id};
  return id;
}

Definitions Decoder::decodeDefs(const uint8_t* data, size_t size) {
  Definitions d;
  ByteReader r(data, size);
  while (!r.atEnd()) {
    uint8_t type;
    r.byte(type);
    uint64_t len = need(r, "truncated record length");
    const uint8_t* body;
    if (!r.bytes(len, body)) fail("record runs past the end of its chunk");
    ByteReader b(body, len);
    switch (type) {
      case kRecString: {
        uint32_t id = need32(b, "bad string id");
        uint64_t n = need(b, "bad string length");
        const uint8_t* s;
        if (!b.bytes(n, s)) fail("string runs past its record");
        d.strings.push_back({id, std::string(reinterpret_cast<const char*>(s), n)});
        break;
      }
      case kRecFunction: {
        DefFunction f;
        f.id = need32(b, "bad function record");
        f.filename = need32(b, "bad function record");
        f.name = need32(b, "bad function record");
        f.first_line = need32(b, "bad function record");
        d.functions.push_back(f);
        break;
      }
      case kRecFrame: {
        DefFrame f;
        f.id = need32(b, "bad frame record");
        f.function = need32(b, "bad frame record");
        f.line = unzigzag(need(b, "bad frame record"));
        d.frames.push_back(f);
        break;
      }
      case kRecThread: {
        DefThread t;
        t.ref = need32(b, "bad thread record");
        t.pid = need(b, "bad thread record");
        t.python_tid = need(b, "bad thread record");
        t.os_tid = need(b, "bad thread record");
        t.name = need32(b, "bad thread record");
        t.start_ts = need(b, "bad thread record");
        d.threads.push_back(t);
        break;
      }
      case kRecProcess: {
        DefProcess p;
        p.pid = need(b, "bad process record");
        p.parent_pid = need(b, "bad process record");
        p.command = need32(b, "bad process record");
        p.start_ts = need(b, "bad process record");
        d.processes.push_back(p);
        break;
      }
      default:
        ++d.unknown_records;
    }
  }
  return d;
}

Decoder::Decoder(uint32_t weight_cap_ticks, uint32_t first_weight_ticks)
    : weight_cap_(weight_cap_ticks), first_weight_(first_weight_ticks) {}

Decoder::Thread& Decoder::thread(uint64_t ref) {
  // Thread refs are small and dense; a huge one can only come from a corrupt chunk.
  if (ref == 0 || ref > (1u << 24)) fail("thread reference out of range");
  if (ref > threads_.size()) threads_.resize(ref);
  return threads_[ref - 1];
}

ChunkSummary Decoder::decodeData(const uint8_t* data, size_t size, SampleColumns& out,
                                 std::vector<Event>& events) {
  ChunkSummary sum;
  // A chunk needs nothing before it: every thread starts unknown and not live.
  for (Thread& t : threads_) t = Thread();
  live_.clear();
  int64_t last_pass = -1;  // -1: unknown
  int64_t base = 0;
  bool begun = false;
  uint64_t pass_no = 0;
  const size_t rows_before = out.size();

  ByteReader r(data, size);
  while (!r.atEnd()) {
    uint8_t type;
    r.byte(type);
    uint64_t len = need(r, "truncated record length");
    const uint8_t* body;
    if (!r.bytes(len, body)) fail("record runs past the end of its chunk");
    ByteReader b(body, len);
    switch (type) {
      case kRecBegin: {
        sum.seq = need(b, "bad BEGIN record");
        base = needI64(b, "bad BEGIN record");
        const int64_t prev = needI64(b, "bad BEGIN record");
        last_pass = prev ? prev - 1 : -1;
        begun = true;
        break;
      }
      case kRecPass: {
        if (!begun) fail("PASS before BEGIN");
        const int64_t delta = needI64(b, "bad PASS timestamp");
        const int64_t from = pass_no == 0 ? base : last_pass;
        if (from > INT64_MAX - delta) fail("PASS timestamp out of range");
        const int64_t ts = from + delta;
        ++pass_no;
        while (!b.atEnd()) {
          const uint64_t head = need(b, "bad PASS entry");
          const uint64_t ref = head >> kEntryFlagBits;
          const uint32_t flags = static_cast<uint32_t>(head & ((1u << kEntryFlagBits) - 1));
          Thread& t = thread(ref);
          if (!t.live) {
            t.live = true;
            live_.push_back(static_cast<uint32_t>(ref));
          }
          t.pass = pass_no;
          t.error = flags == 0;
          if (flags & kEntryStack) {
            uint64_t pop = need(b, "bad stack delta");
            uint64_t push = need(b, "bad stack delta");
            if (pop > trie_.depth(t.node)) fail("stack delta pops more frames than the stack has");
            if (push > kMaxDepth) fail("stack delta pushes too many frames");
            uint32_t node = t.node;
            for (uint64_t i = 0; i < pop; ++i) node = trie_.parent(node);
            for (uint64_t i = 0; i < push; ++i)
              node = trie_.child(node, need32(b, "bad frame id"));
            t.node = node;
          }
          if (flags & kEntryStatus) {
            if (!b.byte(t.status)) fail("bad status byte");
          }
          t.cpu = 0;
          // CPU time beyond the column's range (over an hour in 1 µs ticks) saturates.
          if (flags & kEntryCpu)
            t.cpu = static_cast<uint32_t>(std::min<uint64_t>(need(b, "bad cpu time"), UINT32_MAX));
        }
        uint32_t w;
        if (last_pass < 0) {
          w = first_weight_;
        } else {
          int64_t d = ts - last_pass;
          w = static_cast<uint32_t>(std::min<int64_t>(std::max<int64_t>(d, 0), weight_cap_));
        }
        for (uint32_t ref : live_) {
          Thread& t = threads_[ref - 1];
          if (t.pass == pass_no && t.error) {
            ++sum.errors;
            continue;
          }
          out.ts.push_back(ts);
          out.thread.push_back(ref);
          out.node.push_back(t.node);
          out.status.push_back(t.status);
          out.cpu.push_back(t.pass == pass_no ? t.cpu : 0);
          out.weight.push_back(w);
        }
        if (sum.first_ts < 0) sum.first_ts = ts;
        sum.last_ts = ts;
        last_pass = ts;
        ++sum.passes;
        break;
      }
      case kRecThreadStart: {
        int64_t ref = needI64(b, "bad THREAD_START");
        uint64_t ts = need(b, "bad THREAD_START");
        thread(ref);
        events.push_back({type, ts, ref, 0, 0});
        break;
      }
      case kRecThreadExit: {
        int64_t ref = needI64(b, "bad THREAD_EXIT");
        uint64_t ts = need(b, "bad THREAD_EXIT");
        Thread& t = thread(ref);
        if (t.live) {
          t = Thread();
          live_.erase(std::remove(live_.begin(), live_.end(), static_cast<uint32_t>(ref)),
                      live_.end());
        }
        events.push_back({type, ts, ref, 0, 0});
        break;
      }
      case kRecThreadRename: {
        int64_t ref = needI64(b, "bad THREAD_RENAME");
        uint64_t ts = need(b, "bad THREAD_RENAME");
        int64_t name = needI64(b, "bad THREAD_RENAME");
        events.push_back({type, ts, ref, name, 0});
        break;
      }
      case kRecProcessStart: {
        uint64_t ts = need(b, "bad PROCESS_START");
        int64_t pid = needI64(b, "bad PROCESS_START");
        int64_t ppid = needI64(b, "bad PROCESS_START");
        int64_t cmd = needI64(b, "bad PROCESS_START");
        events.push_back({type, ts, pid, ppid,
                          cmd});
        break;
      }
      case kRecProcessExit: {
        uint64_t ts = need(b, "bad PROCESS_EXIT");
        int64_t pid = needI64(b, "bad PROCESS_EXIT");
        int64_t code = unzigzag(need(b, "bad PROCESS_EXIT"));
        events.push_back({type, ts, pid, code, 0});
        break;
      }
      case kRecPassErrors: {
        uint64_t ts = need(b, "bad PASS_ERRORS");
        int64_t errors = needI64(b, "bad PASS_ERRORS");
        int64_t missed = needI64(b, "bad PASS_ERRORS");
        events.push_back({type, ts, errors, missed, 0});
        break;
      }
      case kRecMarker: {
        uint64_t ts = need(b, "bad MARKER");
        int64_t label = needI64(b, "bad MARKER");
        events.push_back({type, ts, label, 0, 0});
        break;
      }
      default:
        ++sum.unknown_records;
    }
  }
  sum.samples = out.size() - rows_before;
  return sum;
}

void Accumulator::newGeneration() const {
  used_ = 0;
  if (++gen_ == 0) {  // wrapped: forget every slot for real
    for (Slot& s : table_) s.gen = 0;
    gen_ = 1;
  }
}


void Accumulator::grow() {
  std::vector<Slot> old(std::max<size_t>(1024, table_.size() * 2));
  old.swap(table_);
  const size_t mask = table_.size() - 1;
  for (const Slot& s : old) {
    if (s.gen != gen_) continue;
    size_t i = groupedSlot(s.key) & mask;
    while (table_[i].gen == gen_) i = (i + 1) & mask;
    table_[i] = s;
  }
}

uint32_t Accumulator::cellFor(const Key& k) {
  if (k.slice != slice_) {
    if (k.slice < max_slice_) revisited_ = true;
    max_slice_ = std::max(max_slice_, k.slice);
    slice_ = k.slice;
    newGeneration();
  }
  if (2 * (used_ + 1) > table_.size()) grow();
  const uint64_t key = static_cast<uint64_t>(k.thread) << 32 | k.node;
  const size_t mask = table_.size() - 1;
  for (size_t i = groupedSlot(key) & mask;;
       i = (i + 1) & mask) {
    Slot& s = table_[i];
    if (s.gen != gen_) {
      s.key = key;
      s.gen = gen_;
      s.cell = static_cast<uint32_t>(cells_.size());
      cells_.push_back({k, AccumulatorCell()});
      ++used_;
      if (revisited_) repeats_ = true;
      return s.cell;
    }
    if (s.key == key) return s.cell;
  }
}

const Accumulator::CellList& Accumulator::cells() const {
  if (repeats_) {
    std::unordered_map<Key, size_t, KeyHash> index;
    CellList merged;
    for (const auto& [k, a] : cells_) {
      auto [it, added] = index.emplace(k, merged.size());
      if (added) {
        merged.push_back({k, a});
        continue;
      }
      AccumulatorCell& c = merged[it->second].second;
      c.count += a.count;
      c.weight += a.weight;
      c.cpu += a.cpu;
      c.gil += a.gil;
      c.on_cpu += a.on_cpu;
    }
    cells_.swap(merged);
    repeats_ = false;
    // Cell positions moved: the table and the per-thread cache start afresh.
    newGeneration();
    last_.clear();
  }
  return cells_;
}

void Accumulator::add(const SampleColumns& c) {
  const size_t n = c.size();
  for (size_t i = 0; i < n; ++i) {
    const int64_t ts = c.ts[i];
    const uint32_t th = c.thread[i];
    const uint8_t st = c.status[i];
    if (th >= last_.size()) last_.resize(static_cast<size_t>(th) + 1);
    LastCell& lc = last_[th];
    const auto fate = q_.fate(ts, th, st, c.cpu[i], lc.on_cpu && lc.cell != UINT32_MAX);
    if (fate == AccumulatorQuery::Fate::kDrop || fate == AccumulatorQuery::Fate::kCpuToPrevious) {
      if (fate == AccumulatorQuery::Fate::kCpuToPrevious) cells_[lc.cell].second.cpu += c.cpu[i];
      lc.on_cpu = false;
      continue;
    }
    const bool counted = fate == AccumulatorQuery::Fate::kKeep;
    uint32_t slice = 0;
    if (q_.slice_ticks > 0) {
      slice = static_cast<uint32_t>((ts - q_.slice_origin) / q_.slice_ticks);
    }
    // A thread's next sample often has the stack of its previous one: remember each thread's
    // last cell.
    const Key key{slice, th, c.node[i]};
    lc.on_cpu = (st & kStatusOnCpu) != 0;
    if (lc.cell == UINT32_MAX || !(lc.key == key)) {
      lc.key = key;
      lc.cell = cellFor(key);
    }
    AccumulatorCell& cell = cells_[lc.cell].second;
    cell.cpu += c.cpu[i];
    if (!counted) continue;
    ++cell.count;
    cell.weight += c.weight[i];
    cell.gil += (st & kStatusGilHeld) ? 1 : 0;
    cell.on_cpu += (st & kStatusOnCpu) ? 1 : 0;
    ++selected_;
    if (first_ < 0) first_ = ts;
    last_ts_ = ts;
  }
}

}  // namespace psrec::format
