#include "format/native/encoder.hpp"

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string>

#include "format/native/varint.hpp"

namespace psrec::format {

size_t Encoder::TripleHash::operator()(const std::tuple<uint32_t, uint32_t, uint32_t>& t) const {
  uint64_t h = (static_cast<uint64_t>(std::get<0>(t)) << 32) ^ std::get<1>(t);
  h ^= static_cast<uint64_t>(std::get<2>(t)) * 0x9E3779B97F4A7C15ULL;
  return static_cast<size_t>(h ^ (h >> 29));
}

Encoder::Encoder(size_t chunk_bytes, uint64_t max_span_ticks, uint32_t max_threads)
    : chunk_bytes_(chunk_bytes),
      max_span_ticks_(max_span_ticks),
      max_threads_(std::min(max_threads, kMaxThreadRef)) {}

void Encoder::writeDef(uint8_t type, const std::string& body) {
  defs_.push_back(static_cast<char>(type));
  putVarint(defs_, body.size());
  defs_.append(body);
}

void Encoder::record(uint8_t type, const std::string& body) {
  data_.push_back(static_cast<char>(type));
  putVarint(data_, body.size());
  data_.append(body);
}

void Encoder::writeString(uint32_t id, std::string_view s) {
  scratch_.clear();
  putVarint(scratch_, id);
  putVarint(scratch_, s.size());
  scratch_.append(s.data(), s.size());
  writeDef(kRecString, scratch_);
}

uint32_t Encoder::internString(std::string_view s) {
  auto it = strings_.find(std::string(s));
  if (it != strings_.end()) {
    touchString(*it);
    return it->second.id;
  }
  uint32_t id = next_string_++;
  StringSlot& slot = *strings_.emplace(std::string(s), StringEntry{id, epoch_, 0}).first;
  string_by_id_.emplace(id, &slot);
  writeString(id, s);
  return id;
}

void Encoder::pinString(uint32_t id, int by) {
  if (id == 0) return;
  auto it = string_by_id_.find(id);
  if (it != string_by_id_.end()) it->second->second.pins += by;
}

void Encoder::touchString(uint32_t id) {
  if (id == 0) return;
  auto it = string_by_id_.find(id);
  if (it != string_by_id_.end()) touchString(*it->second);
}

void Encoder::touchString(StringSlot& s) {
  if (s.second.epoch == epoch_) return;
  s.second.epoch = epoch_;
  writeString(s.second.id, s.first);
}

void Encoder::forgetStrings() {
  if (epoch_ < 2) return;
  for (auto it = strings_.begin(); it != strings_.end();) {
    if (it->second.pins == 0 && it->second.epoch + 1 < epoch_) {
      string_by_id_.erase(it->second.id);
      it = strings_.erase(it);
    } else {
      ++it;
    }
  }
}

uint32_t Encoder::internFunction(uint32_t filename_id, uint32_t name_id, uint32_t first_line) {
  auto key = std::make_tuple(filename_id, name_id, first_line);
  auto it = functions_.find(key);
  if (it != functions_.end()) return it->second;
  uint32_t id = next_function_++;
  functions_.emplace(key, id);
  function_defs_.push_back({filename_id, name_id, first_line, kFunctionPython, 0, 0, false,
                            epoch_});
  pinString(filename_id, 1);
  pinString(name_id, 1);
  writeFunction(id, filename_id, name_id, first_line, false, kFunctionPython, 0, 0);
  return id;
}

uint32_t Encoder::internNativeFunction(uint32_t filename_id, uint32_t name_id, uint32_t kind,
                                       uint32_t build_id, uint64_t address) {
  auto key = std::make_tuple(filename_id, name_id, address, kind);
  auto it = native_functions_.find(key);
  if (it != native_functions_.end()) return it->second;
  uint32_t id = next_function_++;
  native_functions_.emplace(key, id);
  function_defs_.push_back({filename_id, name_id, 0, kind, build_id, address, true, epoch_});
  pinString(filename_id, 1);
  pinString(name_id, 1);
  pinString(build_id, 1);
  writeFunction(id, filename_id, name_id, 0, true, kind, build_id, address);
  return id;
}

void Encoder::touchFunction(uint32_t id) {
  if (id == 0 || id > function_defs_.size()) return;
  FunctionDef& f = function_defs_[id - 1];
  if (f.epoch == epoch_) return;
  f.epoch = epoch_;
  touchString(f.filename);
  touchString(f.name);
  touchString(f.build_id);
  writeFunction(id, f.filename, f.name, f.first_line, f.native, f.kind, f.build_id, f.address);
}

void Encoder::writeFunction(uint32_t id, uint32_t filename_id, uint32_t name_id,
                            uint32_t first_line, bool native, uint32_t kind, uint32_t build_id,
                            uint64_t address) {
  scratch_.clear();
  putVarint(scratch_, id);
  putVarint(scratch_, filename_id);
  putVarint(scratch_, name_id);
  putVarint(scratch_, first_line);
  if (native) {  // format 1.3: a Python function ends here
    putVarint(scratch_, kind);
    putVarint(scratch_, build_id);
    putVarint(scratch_, address);
  }
  writeDef(kRecFunction, scratch_);
}

uint32_t Encoder::internFrame(uint32_t function_id, int64_t line) {
  // Python line numbers fit in 32 bits; clamping keeps the interning key exact.
  line = std::clamp<int64_t>(line, INT32_MIN, INT32_MAX);
  uint64_t key = (static_cast<uint64_t>(function_id) << 32) ^
                 static_cast<uint32_t>(zigzag(line) & 0xFFFFFFFFu);
  auto it = frames_.find(key);
  if (it != frames_.end()) return it->second;
  uint32_t id = next_frame_++;
  frames_.emplace(key, id);
  frame_defs_.push_back({function_id, static_cast<int32_t>(line), epoch_});
  writeFrame(id, function_id, line);
  return id;
}

void Encoder::writeFrame(uint32_t id, uint32_t function_id, int64_t line) {
  writeDefFields(kRecFrame, id, function_id, zigzag(line));
}

void Encoder::rewriteFrame(uint32_t id) {
  FrameDef& f = frame_defs_[id - 1];
  f.epoch = epoch_;
  touchFunction(f.function);
  writeFrame(id, f.function, f.line);
}

void Encoder::writeThread(uint32_t ref, const ThreadState& t) {
  writeDefFields(kRecThread, ref, t.pid, t.python_tid, t.os_tid, t.name, t.start_ts);
}

void Encoder::rewriteThread(uint32_t ref) {
  ThreadState& t = threads_[ref - 1];
  t.def_epoch = epoch_;
  touchProcess(t.pid);
  touchString(t.name);
  touchString(t.current_name);  // what a file begun anew carries as its last name
  writeThread(ref, t);
}

void Encoder::writeProcess(uint64_t pid, const ProcessDef& p) {
  writeDefFields(kRecProcess, pid, p.parent_pid, p.command, p.start_ts);
}

void Encoder::touchProcess(uint64_t pid) {
  auto it = processes_.find(pid);
  if (it == processes_.end() || it->second.epoch == epoch_) return;
  it->second.epoch = epoch_;
  touchString(it->second.command);
  writeProcess(pid, it->second);
}

void Encoder::writeTask(uint32_t id, const TaskDef& t) {
  writeDefFields(kRecTask, id, t.pid, t.address, t.name, t.coroutine, t.start_ts);
}

void Encoder::touchTask(uint32_t id) {
  auto it = task_defs_.find(id);
  if (it == task_defs_.end() || it->second.epoch == epoch_) return;
  TaskDef& t = it->second;
  t.epoch = epoch_;
  touchString(t.name);
  touchFunction(t.coroutine);
  writeTask(id, t);
}

void Encoder::forgetTask(uint32_t id) {
  auto it = task_defs_.find(id);
  if (it == task_defs_.end()) return;
  pinString(it->second.name, -1);
  task_defs_.erase(it);
}

uint32_t Encoder::addThread(uint64_t pid, uint64_t python_tid, uint64_t os_tid,
                            std::string_view name, uint64_t ts) {
  if (threadsFull())
    throw std::length_error("a recording names at most " + std::to_string(max_threads_) +
                            " threads");
  uint32_t name_id = name.empty() ? 0 : internString(name);
  touchProcess(pid);
  threads_.emplace_back();
  uint32_t ref = static_cast<uint32_t>(threads_.size());
  ThreadState& t = threads_.back();
  t.live = true;
  t.pid = pid;
  t.python_tid = python_tid;
  t.os_tid = os_tid;
  t.start_ts = ts;
  t.name = t.current_name = name_id;
  t.def_epoch = epoch_;
  pinString(name_id, 2);  // as its first name and as its last
  ++live_threads_;
  writeThread(ref, t);
  beginChunkIfNeeded(ts);
  scratch_.clear();
  putVarint(scratch_, ref);
  putVarint(scratch_, ts);
  record(kRecThreadStart, scratch_);
  return ref;
}

void Encoder::threadExit(uint32_t ref, uint64_t ts) {
  if (ref == 0 || ref > threads_.size() || !threads_[ref - 1].live) return;
  ThreadState& t = threads_[ref - 1];
  if (in_pass_ && t.pass_seen == pass_count_) {
    // The thread has an entry in the pass being built: its exit must follow that PASS record.
    pending_exits_.emplace_back(ref, ts);
    return;
  }
  touchThread(ref);
  t.live = false;
  t.stack.clear();
  t.status_known = false;
  pinString(t.name, -1);
  pinString(t.current_name, -1);
  --live_threads_;
  beginChunkIfNeeded(ts);
  scratch_.clear();
  putVarint(scratch_, ref);
  putVarint(scratch_, ts);
  record(kRecThreadExit, scratch_);
}

void Encoder::threadRename(uint32_t ref, uint64_t ts, std::string_view name) {
  uint32_t name_id = name.empty() ? 0 : internString(name);
  if (ref != 0 && ref <= threads_.size()) {
    ThreadState& t = threads_[ref - 1];
    if (t.live) {
      touchThread(ref);
      pinString(name_id, 1);
      pinString(t.current_name, -1);
      t.current_name = name_id;
    }
  }
  beginChunkIfNeeded(ts);
  scratch_.clear();
  putVarint(scratch_, ref);
  putVarint(scratch_, ts);
  putVarint(scratch_, name_id);
  record(kRecThreadRename, scratch_);
}

void Encoder::beginChunkIfNeeded(uint64_t ts) {
  if (in_chunk_) return;
  in_chunk_ = true;
  chunk_first_ts_ = ts;
  chunk_passes_ = 0;
  chunk_samples_ = 0;
  scratch_.clear();
  putVarint(scratch_, chunk_seq_);
  putVarint(scratch_, ts);
  // The previous pass's time lets a reader weight this chunk's first pass without the chunk
  // before it; 0 means there was none, otherwise it is stored plus one.
  putVarint(scratch_, pass_count_ ? last_pass_ts_ + 1 : 0);
  record(kRecBegin, scratch_);
  for (ThreadState& t : threads_) {
    t.stack.clear();
    t.status_known = false;
    t.task = 0;
  }
}

void Encoder::beginPass(uint64_t ts) {
  if (ts < last_pass_ts_) ts = last_pass_ts_;  // timestamps never go backwards
  beginChunkIfNeeded(ts);
  if (ts < chunk_first_ts_) ts = chunk_first_ts_;
  in_pass_ = true;
  pass_ts_ = ts;
  ++pass_count_;
  pass_errors_ = 0;
  pass_explicit_ = 0;
  pass_body_.clear();
  pass_tasks_.clear();
  putVarint(pass_body_, ts - (chunk_passes_ == 0 ? chunk_first_ts_ : last_pass_ts_));
}

void Encoder::sample(uint32_t ref, const uint32_t* frames, size_t depth, uint8_t status,
                     bool has_cpu, uint64_t cpu_ticks) {
  if (!in_pass_ || ref == 0 || ref > threads_.size()) return;
  ThreadState& t = threads_[ref - 1];
  if (!t.live || t.pass_seen == pass_count_) return;
  t.pass_seen = pass_count_;
  ++pass_explicit_;
  touchThread(ref);

  // Deep stacks keep their innermost frames; frame 0 marks the cut at the root.
  const uint32_t* rec = frames;
  size_t n = depth;
  bool truncated = false;
  if (depth > kMaxDepth) {
    truncated = true;
    rec = frames + (depth - (kMaxDepth - 1));
    n = kMaxDepth - 1;
    ++stats_.truncated_stacks;
  }
  const size_t total = n + (truncated ? 1 : 0);
  auto at = [&](size_t i) -> uint32_t {
    if (truncated) return i == 0 ? kTruncatedFrame : rec[i - 1];
    return rec[i];
  };
  size_t common = 0;
  const size_t limit = std::min(total, t.stack.size());
  while (common < limit && t.stack[common] == at(common)) ++common;
  const bool stack_changed = common != t.stack.size() || common != total;
  const bool status_changed = !t.status_known || t.status != status;
  const bool cpu = has_cpu && cpu_ticks != 0;

  if (stack_changed || status_changed || cpu) {
    uint32_t flags = (stack_changed ? kEntryStack : 0) | (status_changed ? kEntryStatus : 0) |
                     (cpu ? kEntryCpu : 0);
    putVarint(pass_body_, (static_cast<uint64_t>(ref) << kEntryFlagBits) | flags);
    if (stack_changed) {
      putVarint(pass_body_, t.stack.size() - common);
      putVarint(pass_body_, total - common);
      for (size_t i = common; i < total; ++i) {
        touchFrame(at(i));
        putVarint(pass_body_, at(i));
      }
      t.stack.resize(common);
      for (size_t i = common; i < total; ++i) t.stack.push_back(at(i));
    }
    if (status_changed) {
      pass_body_.push_back(static_cast<char>(status));
      t.status = status;
      t.status_known = true;
    }
    if (cpu) putVarint(pass_body_, cpu_ticks);
  }
}

void Encoder::sampleError(uint32_t ref) {
  if (!in_pass_ || ref == 0 || ref > threads_.size()) return;
  ThreadState& t = threads_[ref - 1];
  if (!t.live || t.pass_seen == pass_count_) return;
  t.pass_seen = pass_count_;
  ++pass_errors_;
  touchThread(ref);
  putVarint(pass_body_, static_cast<uint64_t>(ref) << kEntryFlagBits);
}

void Encoder::sampleTask(uint32_t ref, uint32_t task) {
  if (!in_pass_ || ref == 0 || ref > threads_.size()) return;
  ThreadState& t = threads_[ref - 1];
  if (!t.live || t.pass_seen != pass_count_ || t.task == task) return;
  t.task = task;
  touchTask(task);
  putVarint(pass_tasks_, ref);
  putVarint(pass_tasks_, task);
}

uint32_t Encoder::defineTask(uint64_t pid, uint64_t address, std::string_view name,
                             uint32_t coroutine, uint64_t start_ts) {
  const uint32_t name_id = name.empty() ? 0 : internString(name);
  touchFunction(coroutine);
  const uint32_t id = next_task_++;
  const TaskDef& t = task_defs_[id] = TaskDef{pid, address, start_ts, name_id, coroutine, epoch_};
  pinString(name_id, 1);
  writeTask(id, t);
  return id;
}

void Encoder::endPass() {
  if (!in_pass_) return;
  in_pass_ = false;  // from here on, threadExit writes its record at once
  // A live thread that has never been written whole in this chunk must appear in the pass,
  // so that the chunk's readers learn it is live; give it an error entry if it was not sampled.
  for (size_t i = 0; i < threads_.size(); ++i) {
    ThreadState& t = threads_[i];
    if (t.live && t.pass_seen != pass_count_ && !t.status_known) {
      t.pass_seen = pass_count_;
      ++pass_errors_;
      touchThread(static_cast<uint32_t>(i + 1));
      putVarint(pass_body_, static_cast<uint64_t>(i + 1) << kEntryFlagBits);
    }
  }
  record(kRecPass, pass_body_);
  if (!pass_tasks_.empty())
    record(kRecPassTasks, pass_tasks_);
  const uint64_t samples = live_threads_ - pass_errors_;
  for (const auto& [ref, ts] : pending_exits_) threadExit(ref, ts);
  pending_exits_.clear();
  chunk_samples_ += samples;
  ++chunk_passes_;
  stats_.samples += samples;
  stats_.sample_errors += pass_errors_;
  ++stats_.passes;
  last_pass_ts_ = pass_ts_;
}

void Encoder::beginTaskSnapshot(uint64_t pid, uint64_t ts) {
  if (ts < last_pass_ts_) ts = last_pass_ts_;
  beginChunkIfNeeded(ts);
  if (ts < chunk_first_ts_) ts = chunk_first_ts_;
  snapshot_pid_ = pid;
  snapshot_ = &task_procs_[pid];
  ProcessTasks& p = *snapshot_;
  ++p.snapshots;
  p.full = p.chunk != chunk_seq_;
  p.chunk = chunk_seq_;
  p.since = p.snapshots > 1 ? ts - p.taken_ts : 0;
  p.taken_ts = ts;
  p.written = false;
  if (p.full) writeTaskSnapshot(pid, p);
}

void Encoder::writeTaskSnapshot(uint64_t pid, ProcessTasks& p) {
  const uint64_t ts = p.taken_ts;
  const uint64_t full = p.full ? 1 : 0;
  const uint64_t since = p.since;
  scratch_.clear();
  putVarint(scratch_, ts);
  putVarint(scratch_, pid);
  putVarint(scratch_, full);
  putVarint(scratch_, since);
  record(kRecTaskSnapshot, scratch_);
  p.written = true;
}

void Encoder::writeTaskState(uint32_t task, uint32_t state, uint32_t waits,
                             const uint32_t* frames, size_t depth) {
  touchTask(task);
  for (size_t i = 0; i < depth; ++i) touchFrame(frames[i]);
  scratch_.clear();
  putVarint(scratch_, task);
  putVarint(scratch_, state);
  putVarint(scratch_, waits);
  putVarint(scratch_, depth);
  for (size_t i = 0; i < depth; ++i) putVarint(scratch_, frames[i]);
  record(kRecTaskState, scratch_);
}

void Encoder::taskState(uint32_t task, uint32_t state, std::string_view waits,
                        const uint32_t* frames, size_t depth, const uint32_t* awaits,
                        size_t n_awaits) {
  if (!snapshot_ || task == 0) return;
  ProcessTasks& p = *snapshot_;
  depth = std::min<size_t>(depth, kMaxDepth);
  const uint32_t waits_id = waits.empty() ? 0 : internString(waits);
  TaskState& t = p.tasks[task];
  const bool same = t.snapshot && t.state == state && t.waits == waits_id &&
                    t.frames.size() == depth && t.awaits.size() == n_awaits &&
                    std::equal(frames, frames + depth, t.frames.begin()) &&
                    std::equal(awaits, awaits + n_awaits, t.awaits.begin());
  t.snapshot = p.snapshots;
  if (same && !p.full) return;
  t.state = state;
  t.waits = waits_id;
  t.frames.assign(frames, frames + depth);
  t.awaits.assign(awaits, awaits + n_awaits);
  if (!p.written) writeTaskSnapshot(snapshot_pid_, p);
  writeTaskState(task, state, waits_id, frames, depth);
  for (size_t i = 0; i < n_awaits; ++i) {
    const uint32_t awaited = awaits[i];
    touchTask(awaited);
    scratch_.clear();
    putVarint(scratch_, task);
    putVarint(scratch_, awaited);
    record(kRecTaskAwaits, scratch_);
  }
}

void Encoder::endTaskSnapshot() {
  if (!snapshot_) return;
  ProcessTasks& p = *snapshot_;
  // Tasks it did not give have ended: a full snapshot says so by not naming them.
  for (auto it = p.tasks.begin(); it != p.tasks.end();) {
    if (it->second.snapshot == p.snapshots) {
      ++it;
      continue;
    }
    if (!p.full) {
      if (!p.written) writeTaskSnapshot(snapshot_pid_, p);
      writeTaskState(it->first, kTaskEnded, 0, nullptr, 0);
    }
    it = p.tasks.erase(it);
  }
  snapshot_ = nullptr;
}

void Encoder::endTasks(uint64_t pid) {
  auto it = task_procs_.find(pid);
  if (it == task_procs_.end()) return;
  if (!it->second.written && in_chunk_) {
    it->second.full = false;
    writeTaskSnapshot(pid, it->second);
  }
  task_procs_.erase(it);
}

void Encoder::closeTaskSnapshots() {
  for (auto& [pid, p] : task_procs_) {
    if (p.written || p.chunk != chunk_seq_) continue;
    p.full = false;
    writeTaskSnapshot(pid, p);
  }
}

void Encoder::passErrors(uint64_t ts, uint64_t errors, uint64_t missed_deadlines) {
  beginChunkIfNeeded(ts);
  scratch_.clear();
  putVarint(scratch_, ts);
  putVarint(scratch_, errors);
  putVarint(scratch_, missed_deadlines);
  record(kRecPassErrors, scratch_);
}

void Encoder::marker(uint64_t ts, std::string_view label) {
  uint32_t label_id = internString(label);
  beginChunkIfNeeded(ts);
  scratch_.clear();
  putVarint(scratch_, ts);
  putVarint(scratch_, label_id);
  record(kRecMarker, scratch_);
}

void Encoder::processStart(uint64_t ts, uint64_t pid, uint64_t parent_pid,
                           std::string_view command) {
  uint32_t cmd_id = command.empty() ? 0 : internString(command);
  auto [it, added] = processes_.try_emplace(pid);
  if (!added) pinString(it->second.command, -1);
  it->second = ProcessDef{parent_pid, ts, cmd_id, epoch_};
  pinString(cmd_id, 1);
  writeProcess(pid, it->second);
  beginChunkIfNeeded(ts);
  scratch_.clear();
  putVarint(scratch_, ts);
  putVarint(scratch_, pid);
  putVarint(scratch_, parent_pid);
  putVarint(scratch_, cmd_id);
  record(kRecProcessStart, scratch_);
}

void Encoder::processExit(uint64_t ts, uint64_t pid, int64_t exit_code) {
  beginChunkIfNeeded(ts);
  scratch_.clear();
  putVarint(scratch_, ts);
  putVarint(scratch_, pid);
  putVarint(scratch_, zigzag(exit_code));
  record(kRecProcessExit, scratch_);
}

bool Encoder::chunkDue(uint64_t now_ts) const {
  if (!in_chunk_) return !defs_.empty();
  // Readers refuse a chunk of more than kMaxChunkSamples thread-samples or kMaxChunkPasses
  // passes: seal one at half of either, counting the next pass (thousands of idle threads, or
  // passes that find nothing changed, cost almost nothing in bytes).
  return data_.size() >= chunk_bytes_ || now_ts - chunk_first_ts_ >= max_span_ticks_ ||
         chunk_samples_ + live_threads_ > kMaxChunkSamples / 2 ||
         chunk_passes_ >= kMaxChunkPasses / 2;
}

SealedChunk Encoder::seal() {
  endPass();  // a chunk never ends inside a pass
  if (in_chunk_) closeTaskSnapshots();
  SealedChunk c;
  c.defs.swap(defs_);
  c.data.swap(data_);
  c.first_ts = chunk_first_ts_;
  c.last_ts = chunk_passes_ ? last_pass_ts_ : chunk_first_ts_;
  c.passes = chunk_passes_;
  c.samples = chunk_samples_;
  c.epoch = epoch_;
  if (in_chunk_) {
    ++chunk_seq_;
    ++stats_.chunks;
  }
  in_chunk_ = false;
  if (epoch_pending_) {  // between two chunks: the next one begins the epoch
    epoch_pending_ = false;
    ++epoch_;
    forgetStrings();
  }
  defs_.reserve(c.defs.capacity());
  data_.reserve(c.data.capacity());
  return c;
}

}  // namespace psrec::format
