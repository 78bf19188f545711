#include "format/native/decoder.hpp"

#include <algorithm>

#include "format/native/constants.hpp"
#include "format/native/grouped_slot.hpp"
#include "format/native/varint.hpp"

namespace psrec::format {

static_assert(kMaxDepth == 8192 && kMaxChunkSamples == 4194304 && kMaxChunkPasses == 1048576,
              "the messages below name these limits");

namespace {

[[noreturn]] void fail(const char* what) { throw DecodeError(what); }
[[noreturn]] void overBudget(const char* what, uint64_t budget) {
  throw BudgetError(std::string(what) + " " + std::to_string(budget));
}

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

// The next record of a payload: its type, and a reader over its body (section 3: type,
// varint length, body).
inline ByteReader nextRecord(ByteReader& r, uint8_t& type) {
  r.byte(type);
  uint64_t len = need(r, "truncated record length");
  const uint8_t* body;
  if (!r.bytes(len, body)) fail("record runs past the end of its chunk");
  return ByteReader(body, len);
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

Definitions Decoder::decodeDefs(const uint8_t* data, size_t size, uint64_t max_records) {
  Definitions d;
  ByteReader r(data, size);
  uint64_t records = 0;
  while (!r.atEnd()) {
    uint8_t type;
    ByteReader b = nextRecord(r, type);
    if (type >= kRecString && type <= kRecTask && ++records > max_records)
      fail("more definitions than the file's size allows");
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
        // Format 1.3: a native function's fields (a record that ends before one has 0).
        if (!b.atEnd())
          f.kind = need32(b, "bad function record");
        if (!b.atEnd())
          f.build_id = need32(b, "bad function record");
        if (!b.atEnd())
          f.address = need(b, "bad function record");
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
        if (t.ref == 0 || t.ref > kMaxThreadRef) fail("thread reference out of range");
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
      case kRecTask: {
        DefTask t;
        t.id = need32(b, "bad task record");
        t.pid = need(b, "bad task record");
        t.address = need(b, "bad task record");
        t.name = need32(b, "bad task record");
        t.coroutine = need32(b, "bad task record");
        t.start_ts = need(b, "bad task record");
        d.tasks.push_back(t);
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
  if (ref == 0 || ref > kMaxThreadRef) fail("thread reference out of range");
  Thread& t = threads_[static_cast<uint32_t>(ref)];
  if (t.chunk == 0 && ++threads_seen_ > max_threads_) {  // a ref no chunk used before
    t.chunk = chunk_;  // counted once, as if it had been read
    overBudget("thread refs", max_threads_);
  }
  if (t.chunk != chunk_) {  // first use in this chunk: every thread starts unknown, not live
    t = Thread();
    t.chunk = chunk_;
  }
  return t;
}

void Decoder::compactLive() {
  // Threads that exited leave their place in live_ until a pass needs the list: dropping each
  // at once would cost the whole list per exit.
  size_t n = 0;
  for (size_t i = 0; i < live_.size(); ++i) {
    Thread& t = threads_[live_[i]];
    if (!t.live || t.live_at != i) continue;
    t.live_at = static_cast<uint32_t>(n);
    live_[n++] = live_[i];
  }
  live_.resize(n);
  stale_ = false;
}

std::vector<Event> Decoder::threadRenames(const uint8_t* data, size_t size,
                                         uint64_t max_events, bool exits) {
  std::vector<Event> out;
  ByteReader r(data, size);
  while (!r.atEnd()) {
    uint8_t type;
    ByteReader b = nextRecord(r, type);
    if (exits && type == kRecThreadExit) {
      int64_t ref = needI64(b, "bad THREAD_EXIT");
      uint64_t ts = need(b, "bad THREAD_EXIT");
      if (out.size() >= max_events) fail("more events than the file's size allows");
      out.push_back({type, ts, ref, 0, 0});
      continue;
    }
    if (type != kRecThreadRename) continue;
    int64_t ref = needI64(b, "bad THREAD_RENAME");
    uint64_t ts = need(b, "bad THREAD_RENAME");
    int64_t name = needI64(b, "bad THREAD_RENAME");
    if (out.size() >= max_events) fail("more events than the file's size allows");
    out.push_back({type, ts, ref, name, 0});
  }
  return out;
}

ChunkSummary Decoder::decodeData(const uint8_t* data, size_t size, SampleColumns& out,
                                 std::vector<Event>& events, uint64_t max_events,
                                 Budgets budgets) {
  max_threads_ = budgets.max_threads;
  // A chunk needs nothing before it: every thread starts unknown and not live (thread()
  // resets a thread's state on its first use in the chunk).
  ++chunk_;
  live_.clear();
  stale_ = false;
  Chunk c{out, events, max_events, budgets, out.size(), events.size(), {}};
  ByteReader r(data, size);
  while (!r.atEnd()) {
    uint8_t type;
    ByteReader b = nextRecord(r, type);
    if (type != kRecTaskState && type != kRecTaskAwaits) {
      c.in_snapshot = false;
      c.state_task = 0;
    }
    switch (type) {
      case kRecBegin: {
        c.sum.seq = need(b, "bad BEGIN record");
        c.base = needI64(b, "bad BEGIN record");
        const int64_t prev = needI64(b, "bad BEGIN record");
        c.last_pass = prev ? prev - 1 : -1;
        c.begun = true;
        break;
      }
      case kRecPass:
        readPass(b, c);
        break;
      case kRecPassTasks:
        readPassTasks(b, c);
        break;
      case kRecThreadStart:
      case kRecThreadExit:
        readThreadEvent(type, b, c);
        break;
      case kRecTaskSnapshot: {
        const uint64_t ts = need(b, "bad TASK_SNAPSHOT");
        const int64_t pid = needI64(b, "bad TASK_SNAPSHOT");
        const int64_t full = needI64(b, "bad TASK_SNAPSHOT");
        const int64_t since = needI64(b, "bad TASK_SNAPSHOT");
        c.event({type, ts, pid, full, since});
        c.snapshot_ts = ts;
        c.in_snapshot = true;
        break;
      }
      case kRecTaskState:
        readTaskState(b, c);
        break;
      case kRecTaskAwaits: {
        const uint32_t task = need32(b, "bad TASK_AWAITS");
        const uint32_t awaited = need32(b, "bad TASK_AWAITS");
        if (!c.state_task || task != c.state_task)
          fail("TASK_AWAITS without its task's TASK_STATE");
        c.event({type, c.snapshot_ts, task, awaited, 0});
        break;
      }
      default:
        if (!readEvent(type, b, c)) ++c.sum.unknown_records;
    }
  }
  c.sum.samples = out.size() - c.rows_before;
  return c.sum;
}

void Decoder::Chunk::event(const Event& e) {
  if (events.size() - events_before >= max_events)
    fail("more events than the file's size allows");
  events.push_back(e);
}

// flatten: the per-sample column appends and per-entry thread lookups are inlined (GCC's
// heuristics otherwise left std::vector::push_back out of line, which cost a fifth more time
// per sample).
// The body of kRecPass: its delta, then its entries (spec section 4.1).
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((flatten))
#endif
void Decoder::readPass(ByteReader& b, Chunk& c) {
  if (!c.begun) fail("PASS before BEGIN");
  const int64_t delta = needI64(b, "bad PASS timestamp");
  const int64_t from = c.pass_no == 0 ? c.base : c.last_pass;
  if (from > INT64_MAX - delta) fail("PASS timestamp out of range");
  const int64_t ts = from + delta;
  if (++c.pass_no > kMaxChunkPasses)
    fail("more than MAX_CHUNK_PASSES (1048576) passes in one chunk");
  while (!b.atEnd()) {
    const uint64_t head = need(b, "bad PASS entry");
    const uint64_t ref = head >> kEntryFlagBits;
    const uint32_t flags = static_cast<uint32_t>(head & ((1u << kEntryFlagBits) - 1));
    Thread& t = thread(ref);
    if (!t.live) {
      t.live = true;
      t.live_at = static_cast<uint32_t>(live_.size());
      live_.push_back(static_cast<uint32_t>(ref));
    }
    t.pass = c.pass_no;
    t.error = flags == 0;
    if (flags & kEntryStack) {
      uint64_t pop = need(b, "bad stack delta");
      uint64_t push = need(b, "bad stack delta");
      const uint32_t depth = trie_.depth(t.node);
      if (pop > depth) fail("stack delta pops more frames than the stack has");
      // The cap holds for the stack, not only for one delta: pushes on a stack that is never
      // popped would otherwise grow it (and the trie) without end.
      if (push > kMaxDepth - (depth - pop)) fail("stack deeper than MAX_DEPTH (8192) frames");
      uint32_t node = t.node;
      for (uint64_t i = 0; i < pop; ++i) node = trie_.parent(node);
      for (uint64_t i = 0; i < push; ++i) node = trie_.child(node, need32(b, "bad frame id"));
      // Checked once per delta: the trie passes its budget by at most kMaxDepth nodes.
      if (trie_.size() > c.budgets.max_nodes) overBudget("stack-trie nodes", c.budgets.max_nodes);
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
  passRows(c, ts);
}

#if defined(__GNUC__) && !defined(__clang__)
__attribute__((flatten))
#endif
void Decoder::passRows(Chunk& c, int64_t ts) {
  SampleColumns& out = c.out;
  const uint64_t pass_no = c.pass_no;
  uint32_t w;
  if (c.last_pass < 0) {
    w = first_weight_;
  } else {
    int64_t d = ts - c.last_pass;
    w = static_cast<uint32_t>(std::min<int64_t>(std::max<int64_t>(d, 0), weight_cap_));
  }
  if (stale_) compactLive();
  // At most one row per live thread: the limit is checked before anything is allocated for
  // it.
  if (out.size() - c.rows_before + live_.size() > kMaxChunkSamples) {
    size_t n = out.size() - c.rows_before;
    for (uint32_t ref : live_) {
      const Thread& t = threads_[ref];
      if (!(t.pass == pass_no && t.error) && ++n > kMaxChunkSamples)
        fail("more than MAX_CHUNK_SAMPLES (4194304) thread-samples in one chunk");
    }
  }
  for (uint32_t ref : live_) {
    Thread& t = threads_[ref];
    if (t.pass == pass_no && t.error) {
      ++c.sum.errors;
      continue;
    }
    t.row = out.size();
    t.row_pass = pass_no;
    out.task.push_back(t.task);
    out.ts.push_back(ts);
    out.thread.push_back(ref);
    out.node.push_back(t.node);
    out.status.push_back(t.status);
    out.cpu.push_back(t.pass == pass_no ? t.cpu : 0);
    out.weight.push_back(w);
  }
  if (c.sum.first_ts < 0) c.sum.first_ts = ts;
  c.sum.last_ts = ts;
  c.last_pass = ts;
  ++c.sum.passes;
}

// The body of kRecPassTasks: its entries only.
void Decoder::readPassTasks(ByteReader& b, Chunk& c) {
  // The running tasks of the pass just read: the threads' state from now on, and the rows
  // that pass gave them.
  if (c.pass_no == 0) fail("PASS_TASKS before any PASS");
  while (!b.atEnd()) {
    const uint64_t ref = need(b, "bad PASS_TASKS entry");
    const uint32_t task = need32(b, "bad PASS_TASKS entry");
    if (ref == 0 || ref > kMaxThreadRef) fail("thread reference out of range");
    const Thread* known = threads_.find(static_cast<uint32_t>(ref));
    if (!known || known->chunk != chunk_ || !known->live)
      fail("PASS_TASKS names a thread that is not live");
    Thread& t = threads_[static_cast<uint32_t>(ref)];
    t.task = task;
    if (t.row_pass == c.pass_no) c.out.task[t.row] = task;
  }
}

// The body of kRecTaskState.
void Decoder::readTaskState(ByteReader& b, Chunk& c) {
  if (!c.in_snapshot) fail("TASK_STATE without its TASK_SNAPSHOT");
  const uint32_t task = need32(b, "bad TASK_STATE");
  const uint64_t state = need(b, "bad TASK_STATE");
  const uint32_t waits = need32(b, "bad TASK_STATE");
  const uint64_t depth = need(b, "bad TASK_STATE");
  if (state > kTaskRunning) fail("TASK_STATE state out of range");
  if (depth > kMaxDepth) fail("task stack deeper than MAX_DEPTH (8192) frames");
  uint32_t node = 0;
  for (uint64_t i = 0; i < depth; ++i) node = trie_.child(node, need32(b, "bad frame id"));
  if (trie_.size() > c.budgets.max_nodes) overBudget("stack-trie nodes", c.budgets.max_nodes);
  // The state and what it waits on share a field: state | waits << 2.
  c.event({kRecTaskState, c.snapshot_ts, task,
           static_cast<int64_t>(state | uint64_t{waits} << 2), node});
  c.state_task = task;
}

// The body of kRecThreadStart and kRecThreadExit.
void Decoder::readThreadEvent(uint8_t type, ByteReader& b, Chunk& c) {
  const char* bad = type == kRecThreadStart ? "bad THREAD_START" : "bad THREAD_EXIT";
  int64_t ref = needI64(b, bad);
  uint64_t ts = need(b, bad);
  Thread& t = thread(ref);
  if (type == kRecThreadExit && t.live) {
    t = Thread();
    t.chunk = chunk_;
    stale_ = true;
  }
  c.event({type, ts, ref, 0, 0});
}

bool Decoder::readEvent(uint8_t type, ByteReader& b, Chunk& c) {
  switch (type) {
    case kRecThreadRename: {
      int64_t ref = needI64(b, "bad THREAD_RENAME");
      uint64_t ts = need(b, "bad THREAD_RENAME");
      int64_t name = needI64(b, "bad THREAD_RENAME");
      c.event({type, ts, ref, name, 0});
      return true;
    }
    case kRecProcessStart: {
      uint64_t ts = need(b, "bad PROCESS_START");
      int64_t pid = needI64(b, "bad PROCESS_START");
      int64_t ppid = needI64(b, "bad PROCESS_START");
      int64_t cmd = needI64(b, "bad PROCESS_START");
      c.event({type, ts, pid, ppid, cmd});
      return true;
    }
    case kRecProcessExit: {
      uint64_t ts = need(b, "bad PROCESS_EXIT");
      int64_t pid = needI64(b, "bad PROCESS_EXIT");
      int64_t code = unzigzag(need(b, "bad PROCESS_EXIT"));
      c.event({type, ts, pid, code, 0});
      return true;
    }
    case kRecPassErrors: {
      uint64_t ts = need(b, "bad PASS_ERRORS");
      int64_t errors = needI64(b, "bad PASS_ERRORS");
      int64_t missed = needI64(b, "bad PASS_ERRORS");
      c.event({type, ts, errors, missed, 0});
      return true;
    }
    case kRecMarker: {
      uint64_t ts = need(b, "bad MARKER");
      int64_t label = needI64(b, "bad MARKER");
      c.event({type, ts, label, 0, 0});
      return true;
    }
    default:
      return false;
  }
}

}  // namespace psrec::format
