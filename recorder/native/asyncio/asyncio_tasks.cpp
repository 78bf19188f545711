#include "recorder/native/asyncio/asyncio_tasks.hpp"

#include <algorithm>
#include <cstring>
#include <set>
#include <unordered_set>

#include "recorder/native/memory/process_maps.hpp"
#include "recorder/native/sampler/thread_stats.hpp"

namespace psrec::recorder {

const std::vector<uint64_t> TaskRecord::kNone;

const char* taskRunName(TaskRun state) {
  switch (state) {
    case TaskRun::kRunning: return "running";
    case TaskRun::kPending: return "pending";
    case TaskRun::kSuspended: break;
  }
  return "suspended";
}

namespace {

constexpr size_t kMaxTasks = 1 << 20;
constexpr size_t kMaxChain = 256;  // coroutines in one task's chain
constexpr size_t kMaxSet = 1 << 22;
constexpr int kMaxBases = 32;

bool has(int32_t off) { return off != cpython::kAbsent; }

// The .AsyncioDebug section of the first mapped binary that has one: the _asyncio extension
// module, or the interpreter when it is built in.
bool findAsyncioDebug(pid_t pid, cpython::AsyncioLayout& a) {
  std::set<std::string> tried;
  std::vector<MapEntry> maps = readMaps(pid);
  // The extension module first: it is where the section is unless _asyncio is built in.
  std::stable_partition(maps.begin(), maps.end(), [](const MapEntry& m) {
    return m.path.find("_asyncio") != std::string::npos;
  });
  for (const MapEntry& m : maps) {
    if (m.path.empty() || m.path[0] != '/' || !tried.insert(m.path).second) continue;
    const std::string base = m.path.substr(m.path.rfind('/') + 1);
    if (base.find("_asyncio") == std::string::npos && base.find("python") == std::string::npos)
      continue;
    std::optional<ElfFile> elf = ElfFile::open(m.path, pid);
    if (!elf) continue;
    auto sec = elf->section(".AsyncioDebug");
    if (!sec || sec->second > 4096) continue;
    std::vector<uint8_t> buf(sec->second);
    if (!elf->readAt(sec->first, buf.data(), buf.size())) continue;
    if (cpython::withAsyncioDebug(a, buf.data(), buf.size())) return true;
  }
  return false;
}

std::string cString(RemoteMemory& mem, uint64_t addr) {
  char buf[128];
  ReadStatus st;
  size_t got = mem.readSome(addr, buf, sizeof buf, &st);
  size_t n = 0;
  while (n < got && buf[n]) ++n;
  return n < got ? std::string(buf, n) : std::string();
}

}  // namespace

AsyncioTasks::AsyncioTasks(PythonProcess& proc, CodeCache& codes)
    : proc_(proc), codes_(codes), objs_(proc.mem(), proc.layout()),
      a_(cpython::asyncioLayout(proc.layout())) {
  const auto& l = proc.layout();
  hdr_ = static_cast<uint64_t>(l.object_type) + 8;
  if (l.version_hex >= 0x030E0000) {
    if (!has(a_.gen_iframe) || !has(a_.iframe_stackpointer))
      layout_error_ = "the interpreter's debug offsets do not describe coroutines";
  } else if (!has(a_.task_coro)) {
    layout_error_ = "psrec does not know this version's asyncio";
  }
}

uint64_t AsyncioTasks::word(uint64_t addr) {
  uint64_t v = 0;
  if (!addr || !proc_.mem().readValue(addr, v)) return 0;
  return v;
}

const AsyncioTasks::TypeDesc* AsyncioTasks::type(uint64_t obj) {
  return typeAt(word(obj + static_cast<uint64_t>(proc_.layout().object_type)));
}

const AsyncioTasks::TypeDesc* AsyncioTasks::typeAt(uint64_t t) {
  const auto& l = proc_.layout();
  if (!t) return nullptr;
  auto it = types_.find(t);
  if (it != types_.end()) return &it->second;
  // tp_name follows the type's PyVarObject header; tp_base lies 88 bytes after tp_flags.
  const uint64_t name_at = static_cast<uint64_t>(l.var_size) + 8;
  const uint64_t base_at = static_cast<uint64_t>(l.type_flags) + 88;
  TypeDesc d;
  d.name = cString(proc_.mem(), word(t + name_at));
  if (d.name.empty()) return nullptr;
  d.coroutine = d.name == "coroutine" || d.name == "generator";
  uint64_t b = t;
  for (int i = 0; i < kMaxBases && b; ++i) {
    const std::string n = i == 0 ? d.name : cString(proc_.mem(), word(b + name_at));
    if (n == "_asyncio.Task") d.c_task = true;
    if (n == "_GatheringFuture") d.gathering = true;
    if (n == "Task" && !d.c_task) d.py_task = true;
    b = word(b + base_at);
  }
  if (d.c_task) d.py_task = false;
  return &types_.emplace(t, std::move(d)).first->second;
}

bool AsyncioTasks::pastDeadline() {
  if (!deadline_ns_) return false;
  if (!resumed_ && monotonicNs() > deadline_ns_) {
    resumed_ = true;
    if (past_deadline_) past_deadline_();
  }
  return resumed_;
}

bool AsyncioTasks::setItems(uint64_t set, std::vector<uint64_t>& out) {
  // PySetObject: fill, used, mask, table after the header; a table of {key, hash} entries
  // (Include/cpython/setobject.h). Empty slots hold NULL, deleted ones the dummy key, which
  // is no object of the type the caller looks for.
  // mask and table in one system call: a set that grows stores both, and a read of one
  // before and the other after would read a table by the wrong size.
  int64_t head[2] = {0, 0};
  if (proc_.mem().read(set + hdr_ + 16, head, sizeof head) != ReadStatus::kOk) return false;
  const int64_t mask = head[0];
  const uint64_t table = static_cast<uint64_t>(head[1]);
  if (mask < 0 || static_cast<uint64_t>(mask) >= kMaxSet || !table) return false;
  std::vector<uint64_t> entries(2 * (static_cast<size_t>(mask) + 1));
  if (proc_.mem().read(table, entries.data(), entries.size() * 8) != ReadStatus::kOk)
    return false;
  for (size_t i = 0; i < entries.size(); i += 2)
    if (entries[i]) out.push_back(entries[i]);
  return true;
}

bool AsyncioTasks::weakSetItems(uint64_t weakset, std::vector<uint64_t>& out) {
  // A weakref.WeakSet keeps weak references in its `data` set; a reference's wr_object is
  // the first field after its header (Py_None once the referent is gone).
  const uint64_t data = objs_.attribute(weakset, "data");
  std::vector<uint64_t> refs;
  if (!data || !setItems(data, refs)) return false;
  // Every reference's referent, 1,024 to a system call (a hundred thousand tasks: a hundred
  // calls, not a hundred thousand).
  std::vector<uint64_t> objs(refs.size());
  reqs_.clear();
  for (size_t i = 0; i < refs.size(); ++i) reqs_.push_back({refs[i] + hdr_, &objs[i], 8});
  for (size_t i = 0; i < reqs_.size(); i += 1024) {
    pastDeadline();  // (a reference's referent stays until it is gone: read after, too)
    if (proc_.mem().readMany(reqs_.data() + i, std::min<size_t>(1024, reqs_.size() - i)) !=
        ReadStatus::kOk)
      return false;
  }
  for (uint64_t o : objs)
    if (o) out.push_back(o);
  return true;
}

bool AsyncioTasks::listItems(uint64_t list, std::vector<uint64_t>& out) {
  const auto& l = proc_.layout();
  int64_t n = 0;
  if (!proc_.mem().readValue(list + static_cast<uint64_t>(l.var_size), n) || n < 0 ||
      n > (1 << 20))
    return false;
  const uint64_t items = word(list + static_cast<uint64_t>(l.var_size) + 8);
  if (!n) return true;
  std::vector<uint64_t> v(static_cast<size_t>(n));
  if (!items || proc_.mem().read(items, v.data(), v.size() * 8) != ReadStatus::kOk) return false;
  out.insert(out.end(), v.begin(), v.end());
  return true;
}

std::optional<int64_t> AsyncioTasks::intValue(uint64_t obj) {
  // PyLongObject: 30-bit digits after ob_size (3.8-3.11) or lv_tag (3.12+: digit count << 3,
  // sign in the low two bits: 0 positive, 1 zero, 2 negative).
  const auto& l = proc_.layout();
  const uint64_t at = static_cast<uint64_t>(l.var_size);
  int64_t size = 0;
  uint32_t digits[3] = {0, 0, 0};
  if (!proc_.mem().readValue(obj + at, size)) return std::nullopt;
  int64_t n;
  bool negative;
  if (l.version_hex >= 0x030C0000) {
    const uint64_t tag = static_cast<uint64_t>(size);
    n = static_cast<int64_t>(tag >> 3);
    negative = (tag & 3) == 2;
    if ((tag & 3) == 1) return 0;
  } else {
    n = size < 0 ? -size : size;
    negative = size < 0;
  }
  if (n < 0 || n > 3) return std::nullopt;
  if (n && proc_.mem().read(obj + at + 8, digits, static_cast<size_t>(n) * 4) != ReadStatus::kOk)
    return std::nullopt;
  uint64_t v = 0;
  for (int64_t i = n; i-- > 0;) v = (v << 30) | (digits[i] & 0x3FFFFFFF);
  return negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
}

uint64_t AsyncioTasks::module(std::string_view name) {
  const auto& l = proc_.layout();
  uint64_t interp = proc_.mainInterpreter(), modules = 0, md = 0;
  if (!interp || !has(l.interp_modules) || !has(l.module_dict) ||
      !proc_.mem().readValue(interp + static_cast<uint64_t>(l.interp_modules), modules))
    return 0;
  const uint64_t m = objs_.dictGet(modules, name);
  if (!m || !proc_.mem().readValue(m + static_cast<uint64_t>(l.module_dict), md)) return 0;
  return md;
}

bool AsyncioTasks::findTasks(uint64_t interp, const std::vector<ThreadRef>& threads,
                             std::vector<uint64_t>& out, std::string& why) {
  const uint32_t minor = (proc_.layout().version_hex >> 16) & 0xFF;
  if (minor >= 14) {
    if (!have_debug_) {
      why = "the _asyncio module's debug offsets (.AsyncioDebug) were not found";
      return false;
    }
    // Each list is circular through its head; a node lies task_node bytes into its task.
    // (A node at a time: past a read's deadline the walk ends there, the list not read
    // whole: TaskList::incomplete.)
    auto walk = [&](uint64_t head) {
      uint64_t node = word(head);
      for (size_t n = 0; node && node != head && n < kMaxTasks; ++n) {
        if (n % 1024 == 1023 && pastDeadline()) {
          walk_cut_ = true;
          return true;
        }
        out.push_back(node - static_cast<uint64_t>(a_.task_node));
        node = word(node);
      }
      return node == head;
    };
    bool ok = true;
    for (const ThreadRef& t : threads)
      ok &= walk(t.tstate + static_cast<uint64_t>(a_.tstate_tasks_head));
    ok &= walk(interp + static_cast<uint64_t>(a_.interp_tasks_head));
    if (!ok) why = "a list of tasks changed while it was read";
    return ok;
  }
  const uint64_t tasks = module("asyncio.tasks");
  if (!tasks) {
    why = "asyncio.tasks could not be read";
    return false;
  }
  const char* weak = minor <= 11 ? "_all_tasks" : "_scheduled_tasks";
  const uint64_t ws = objs_.dictGet(tasks, weak);
  if (!ws || !weakSetItems(ws, out)) {
    why = std::string("asyncio.tasks.") + weak + " could not be read";
    return false;
  }
  if (minor >= 12) {
    const uint64_t eager = objs_.dictGet(tasks, "_eager_tasks");
    if (eager) setItems(eager, out);
  }
  return true;
}

bool AsyncioTasks::coroutineChain(uint64_t coro, TaskRecord& rec) {
  const auto& l = proc_.layout();
  const uint64_t tag = ~l.code_tag_bits;
  uint64_t obj = coro;
  // 3.11+: the object's type, state and frame in one system call.
  const size_t inside = has(a_.gen_iframe)
                            ? static_cast<size_t>(a_.gen_iframe) + static_cast<size_t>(l.iframe_size)
                            : 0;
  std::vector<uint8_t> ob(inside);
  for (size_t depth = 0; depth < kMaxChain; ++depth) {
    const TypeDesc* t = nullptr;
    if (inside) {
      if (proc_.mem().read(obj, ob.data(), ob.size()) != ReadStatus::kOk) return depth > 0;
      uint64_t type_addr = 0;
      std::memcpy(&type_addr, ob.data() + l.object_type, 8);
      t = typeAt(type_addr);
    } else {
      t = type(obj);
    }
    if (!t || !t->coroutine) return depth > 0;
    uint64_t code = 0, instr = 0, top = 0;
    int32_t tlbc = 0;
    bool suspended_in_await = false;
    if (has(a_.gen_frame)) {  // 3.8-3.10: a frame object, NULL once the coroutine finished
      const uint64_t f = word(obj + static_cast<uint64_t>(a_.gen_frame));
      if (!f) return depth > 0;
      std::vector<uint8_t> fb(static_cast<size_t>(l.frame_size));
      if (proc_.mem().read(f, fb.data(), fb.size()) != ReadStatus::kOk) return depth > 0;
      auto get = [&](int32_t off, auto& v) { std::memcpy(&v, fb.data() + off, sizeof v); };
      get(l.frame_code, code);
      int32_t lasti = 0;
      get(l.frame_lasti, lasti);
      instr = static_cast<uint64_t>(static_cast<uint32_t>(lasti));
      int8_t running = 0;
      get(l.frame_state, running);
      if (running == l.frame_state_running) {
        if (depth == 0) rec.state = TaskRun::kRunning;
        return true;
      }
      if (lasti < 0) {  // created, not started
        if (depth == 0) rec.state = TaskRun::kPending;
      } else if (has(a_.frame_stacktop)) {
        const uint64_t st = word(f + static_cast<uint64_t>(a_.frame_stacktop));
        if (st) top = word(st - 8);
      } else {
        const uint64_t vs = word(f + static_cast<uint64_t>(a_.frame_valuestack));
        int32_t sd = 0;
        if (vs && proc_.mem().readValue(f + static_cast<uint64_t>(a_.frame_stackdepth), sd) &&
            sd > 0 && sd < (1 << 20))
          top = word(vs + 8 * static_cast<uint64_t>(sd - 1));
      }
      suspended_in_await = top != 0;
    } else {  // 3.11+: the frame lives inside the coroutine
      int8_t state = 0;
      const uint64_t fr = obj + static_cast<uint64_t>(a_.gen_iframe);
      std::memcpy(&state, ob.data() + a_.gen_frame_state, 1);
      if (state == a_.state_executing) {
        if (depth == 0) rec.state = TaskRun::kRunning;
        return true;
      }
      const bool suspended = state >= a_.state_suspended_min && state <= a_.state_suspended_max;
      if (!suspended && !(state < a_.state_suspended_min && depth == 0 &&
                          state < a_.state_executing))
        return depth > 0;  // finished (a created frame only counts for the task's own)
      if (!suspended) rec.state = TaskRun::kPending;
      const uint8_t* fb = ob.data() + a_.gen_iframe;
      std::memcpy(&code, fb + l.iframe_code, 8);
      code &= tag;
      std::memcpy(&instr, fb + l.iframe_instr, 8);
      if (has(l.iframe_tlbc_index)) std::memcpy(&tlbc, fb + l.iframe_tlbc_index, 4);
      if (suspended && state >= a_.state_yield_from_min && state <= a_.state_yield_from_max) {
        if (has(a_.iframe_stackpointer)) {
          uint64_t sp = 0;
          std::memcpy(&sp, fb + a_.iframe_stackpointer, 8);
          const uint64_t below = 8 * static_cast<uint64_t>(a_.awaited_depth);
          if (sp >= fr + static_cast<uint64_t>(l.iframe_size) + below) top = word(sp - below) & tag;
        } else {
          int32_t st = 0;
          std::memcpy(&st, fb + a_.iframe_stacktop, 4);
          if (st > 0 && st < (1 << 20))
            top = word(fr + static_cast<uint64_t>(l.iframe_size) +
                       8 * static_cast<uint64_t>(st - 1));
        }
        suspended_in_await = top != 0;
      }
    }
    CodeInfo* info = codes_.lookup(code, own_pass_ ? ++pass_ : pass_);
    if (!info) return depth > 0;
    TaskFrame tf;
    if (own_pass_) {  // a dump names them; a recording interns the code (f.code)
      tf.text = static_cast<uint32_t>(frame_text_.size());
      frame_text_.emplace_back(info->filename, info->name);
    }
    tf.line = info->lineAt(l.line_table, codes_.byteOffset(*info, instr, tlbc));
    tf.code = info;
    rec.stack.push_back(std::move(tf));
    if (!suspended_in_await) return true;
    obj = top;
  }
  return true;
}

bool AsyncioTasks::readTask(uint64_t task, TaskRecord& rec, uint64_t& fut_waiter) {
  uint64_t coro = 0, name = 0;
  // No coroutine: finished (3.12+ let go of it).
  if (!identity(task, coro, name)) return false;
  const TypeDesc* t = type(task);
  rec.id = task;
  rec.coro = coro;
  rec.name_obj = name;
  rec.fut_waiter = t && t->c_task ? word(task + static_cast<uint64_t>(a_.task_fut_waiter))
                                  : objs_.attribute(task, "_fut_waiter");
  rec.state = TaskRun::kSuspended;
  if (!coroutineChain(coro, rec)) return false;  // its coroutine has finished
  finishTask(rec);
  fut_waiter = rec.fut_waiter;
  nameOf(name, rec.name);
  return true;
}

void AsyncioTasks::finishTask(TaskRecord& rec) {
  if (rec.state != TaskRun::kRunning) {
    // Innermost first, as every stack psrec prints.
    std::reverse(rec.stack.begin(), rec.stack.end());
    const TypeDesc* w = rec.fut_waiter ? type(rec.fut_waiter) : nullptr;
    if (w) {
      std::string name = w->c_task || w->py_task ? "Task" : w->name;
      if (name.rfind("_asyncio.", 0) == 0) name.erase(0, 9);
      auto [it, added] = waits_ids_.try_emplace(name, static_cast<uint32_t>(waits_names_.size()));
      if (added) waits_names_.push_back(name);
      rec.waits = it->second;
    }
  } else {
    rec.stack.clear();
    rec.fut_waiter = 0;
  }
}

bool AsyncioTasks::nameOf(uint64_t name, std::string& out) {
  out.clear();
  if (!name) return false;
  // Its type and, for a short str, its text, in one system call.
  uint8_t head[kUnicodeHead];
  ReadStatus rs;
  const size_t got = proc_.mem().readSome(name, head, sizeof head, &rs);
  const size_t type_at = static_cast<size_t>(proc_.layout().object_type);
  if (got < type_at + 8) return false;
  uint64_t type_addr;
  std::memcpy(&type_addr, head + type_at, 8);
  const TypeDesc* n = typeAt(type_addr);
  if (n && n->name == "str")
    return readUnicodeFrom(proc_.mem(), proc_.layout(), name, head, got, out, 1024);
  if (n && n->name == "int") {
    // 3.13+ name a task lazily: the counter, until its name is asked for.
    auto v = intValue(name);
    if (v) out = "Task-" + std::to_string(*v);
    return v.has_value();
  }
  return false;
}

bool AsyncioTasks::identity(uint64_t task, uint64_t& coro, uint64_t& name) {
  // A C task's type, coroutine and name in one system call.
  const auto& l = proc_.layout();
  const size_t from = static_cast<size_t>(l.object_type);
  const size_t to = static_cast<size_t>(std::max(a_.task_coro, a_.task_name)) + 8;
  uint8_t buf[512];
  if (has(a_.task_coro) && to <= sizeof buf + from &&
      proc_.mem().read(task + from, buf, to - from) == ReadStatus::kOk) {
    uint64_t type_addr;
    std::memcpy(&type_addr, buf, 8);
    const TypeDesc* t = typeAt(type_addr);
    if (!t || !(t->c_task || t->py_task)) return false;
    if (t->c_task) {
      std::memcpy(&coro, buf + (a_.task_coro - static_cast<int32_t>(from)), 8);
      std::memcpy(&name, buf + (a_.task_name - static_cast<int32_t>(from)), 8);
      return coro != 0;
    }
  }
  const TypeDesc* t = type(task);
  if (!t || !(t->c_task || t->py_task)) return false;
  if (t->py_task) {
    coro = objs_.attribute(task, "_coro");
    name = objs_.attribute(task, "_name");
    return coro != 0;
  }
  coro = word(task + static_cast<uint64_t>(a_.task_coro));
  name = word(task + static_cast<uint64_t>(a_.task_name));
  return coro != 0;
}

uint64_t AsyncioTasks::coroutineFrame(uint64_t coro) {
  if (has(a_.gen_frame)) return word(coro + static_cast<uint64_t>(a_.gen_frame));
  return has(a_.gen_iframe) ? coro + static_cast<uint64_t>(a_.gen_iframe) : 0;
}

uint64_t AsyncioTasks::coroutineCode(uint64_t coro) {
  const auto& l = proc_.layout();
  if (has(a_.gen_code)) return word(coro + static_cast<uint64_t>(a_.gen_code));
  if (!has(a_.gen_iframe)) return 0;
  return word(coro + static_cast<uint64_t>(a_.gen_iframe) + static_cast<uint64_t>(l.iframe_code)) &
         ~l.code_tag_bits;
}

bool AsyncioTasks::running(const std::vector<ThreadRef>& threads, std::vector<uint64_t>& out) {
  out.assign(threads.size(), 0);
  unplaced_.clear();
  if (has(a_.tstate_running_task)) {  // 3.14+: one word of each thread state, in one call
    reqs_.clear();
    for (size_t i = 0; i < threads.size(); ++i)
      reqs_.push_back({threads[i].tstate + static_cast<uint64_t>(a_.tstate_running_task),
                       &out[i], 8});
    for (size_t i = 0; i < reqs_.size(); i += 1024) {
      const size_t n = std::min<size_t>(1024, reqs_.size() - i);
      if (proc_.mem().readMany(reqs_.data() + i, n) != ReadStatus::kOk) {
        out.assign(threads.size(), 0);
        return false;
      }
    }
    return true;
  }
  // 3.8-3.13: {loop: task} in asyncio.tasks._current_tasks; a loop's thread in _thread_id.
  // The module binds the name twice as it runs (its own dict, then _asyncio's), so the name is
  // looked up again now and then; soon while the dict is empty: one found mid-import is the
  // module's own, which no task enters (its tasks went unseen for 256 reads).
  constexpr uint32_t kLookAgain = 256, kLookAgainEmpty = 8;
  if (!current_tasks_ ||
      ++current_reads_ % (current_empty_ ? kLookAgainEmpty : kLookAgain) == 0) {
    if (!tasks_module_) tasks_module_ = module("asyncio.tasks");
    current_tasks_ = tasks_module_ ? objs_.dictGet(tasks_module_, "_current_tasks") : 0;
    if (!current_tasks_) {
      // asyncio.tasks is not imported yet (asyncio is importing it) or is gone (the
      // interpreter is finalizing): no task can run.
      tasks_module_ = 0;
      return true;
    }
  }
  if (!objs_.dictEntries(current_tasks_, entries_, 1 << 16)) {
    current_tasks_ = 0;  // looked up again at the next read: the name may have been rebound
    return false;
  }
  current_empty_ = entries_.empty();
  constexpr uint32_t kRecheck = 1000;  // passes between reads of a loop's thread
  for (const DictEntry& e : entries_) {
    LoopThread& lt = loops_[e.key];
    if (lt.reads++ % kRecheck == 0) {
      lt.thread_id = 0;
      if (uint64_t ident = objs_.attribute(e.key, "_thread_id"))
        if (auto v = intValue(ident)) lt.thread_id = static_cast<uint64_t>(*v);
    }
    if (!lt.thread_id) {
      unplaced_.push_back(e.value);
      continue;
    }
    for (size_t i = 0; i < threads.size(); ++i)
      if (threads[i].thread_id == lt.thread_id) out[i] = e.value;
  }
  if (loops_.size() > 4 * entries_.size() + 64) {  // loops gone: forget them
    for (auto it = loops_.begin(); it != loops_.end();) {
      bool live = false;
      for (const DictEntry& e : entries_) live |= e.key == it->first;
      it = live ? std::next(it) : loops_.erase(it);
    }
  }
  return true;
}

void AsyncioTasks::awaitSources(TaskRecord& rec, const TypeDesc* t, uint64_t cb0,
                                uint64_t awaited_by, int8_t by_set) {
  if (rec.edges) {
    rec.edges->waited.clear();
    rec.edges->group_parent = 0;
    rec.edges->waiters.clear();
  }
  if (has(a_.task_awaited_by)) {  // 3.14+: each task says which tasks wait on it
    if (!awaited_by) return;
    if (by_set)
      setItems(awaited_by, rec.edgesMade().waiters);
    else
      rec.edgesMade().waiters.push_back(awaited_by);
    return;
  }
  // The task it awaits, or a gather's children (tasks, or the futures of nested gathers).
  if (const uint64_t waiter = rec.fut_waiter) {
    const TypeDesc* wt = type(waiter);
    if (wt && (wt->c_task || wt->py_task)) {
      rec.edgesMade().waited.push_back(waiter);
    } else {
      std::vector<uint64_t> pending{waiter};
      for (int level = 0; level < 8 && !pending.empty(); ++level) {
        std::vector<uint64_t> next;
        for (uint64_t f : pending) {
          const TypeDesc* ft = type(f);
          if (!ft || !ft->gathering) continue;
          std::vector<uint64_t> children;
          const uint64_t list = objs_.attribute(f, "_children");
          if (!list || !listItems(list, children)) continue;
          for (uint64_t c : children) {
            const TypeDesc* ct = type(c);
            if (ct && (ct->c_task || ct->py_task))
              rec.edgesMade().waited.push_back(c);
            else
              next.push_back(c);
          }
        }
        pending.swap(next);
      }
    }
  }
  // A TaskGroup's tasks: each has the group's _on_task_done as its first done callback, and
  // the group knows the task whose `async with` block it is (_parent_task).
  uint64_t cb = 0;
  if (t && t->c_task) {
    cb = cb0 ? cb0 : word(rec.id + hdr_ + 8);  // FutureObj: fut_loop, then fut_callback0
  } else if (t && t->py_task) {
    std::vector<uint64_t> cbs;
    const uint64_t list = objs_.attribute(rec.id, "_callbacks");
    if (list && listItems(list, cbs) && !cbs.empty())
      cb = word(cbs[0] + static_cast<uint64_t>(proc_.layout().var_size) + 8);  // (cb, ctx)
  }
  const TypeDesc* ct = cb ? type(cb) : nullptr;
  if (!ct || ct->name != "method") return;
  const uint64_t group = word(cb + hdr_ + 8);  // PyMethodObject: im_func, im_self
  const TypeDesc* gt = group ? type(group) : nullptr;
  if (gt && gt->name == "TaskGroup") {
    if (const uint64_t parent = objs_.attribute(group, "_parent_task"))
      rec.edgesMade().group_parent = parent;
  }
}

void AsyncioTasks::linkAwaits(std::vector<TaskRecord>& tasks) {
  // The tasks by address, in a sorted index (a hundred thousand tasks: no map nodes).
  std::vector<std::pair<uint64_t, uint32_t>> by_id;
  for (size_t i = 0; i < tasks.size(); ++i) {
    TaskRecord& r = tasks[i];
    if (r.edges) {
      r.edges->awaits.clear();
      r.edges->awaited_by.clear();
    }
    by_id.emplace_back(r.id, static_cast<uint32_t>(i));
  }
  std::sort(by_id.begin(), by_id.end());
  auto find = [&](uint64_t id) -> TaskRecord* {
    auto it = std::lower_bound(by_id.begin(), by_id.end(), std::make_pair(id, uint32_t{0}));
    return it != by_id.end() && it->first == id ? &tasks[it->second] : nullptr;
  };
  auto edge = [&](uint64_t parent, uint64_t child) {
    TaskRecord* p = find(parent);
    TaskRecord* c = find(child);
    if (!p || !c || parent == child) return;
    auto& a = p->edgesMade().awaits;
    if (std::find(a.begin(), a.end(), child) != a.end()) return;
    a.push_back(child);
    c->edgesMade().awaited_by.push_back(parent);
  };
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (!tasks[i].edges) continue;
    // (edge() adds to awaits and awaited_by only: these two stay as they are.)
    const uint64_t id = tasks[i].id;
    const TaskEdges& e = *tasks[i].edges;
    for (uint64_t c : e.waited) edge(id, c);
    for (uint64_t w : e.waiters) edge(w, id);
  }
  for (size_t i = 0; i < tasks.size(); ++i)
    if (tasks[i].edges && tasks[i].edges->group_parent)
      edge(tasks[i].edges->group_parent, tasks[i].id);
  // Tasks left with no edge and no source give their edges back.
  for (TaskRecord& r : tasks)
    if (r.edges && r.edges->awaits.empty() && r.edges->awaited_by.empty() &&
        r.edges->waited.empty() && r.edges->waiters.empty() && !r.edges->group_parent)
      r.edges.reset();
}

void AsyncioTasks::markRunning(TaskRecord& rec, uint64_t thread_id) {
  rec.state = TaskRun::kRunning;
  rec.thread_id = thread_id;
  rec.stack.clear();
  rec.waits = 0;
  rec.fut_waiter = 0;
}

bool AsyncioTasks::debugOffsets() {
  // 3.14+: the _asyncio module is mapped once asyncio is imported.
  if (proc_.layout().version_hex >= 0x030E0000 && !have_debug_ && layout_error_.empty())
    have_debug_ = findAsyncioDebug(proc_.pid(), a_);
  return proc_.layout().version_hex < 0x030E0000 || have_debug_;
}

bool AsyncioTasks::imported() {
  if (!layout_error_.empty()) return false;
  // sys.modules is looked into only when its size (ma_used, the first field after the
  // header) changed: one word read while nothing is imported.
  const auto& l = proc_.layout();
  if (!sys_modules_) {
    const uint64_t interp = proc_.mainInterpreter();
    if (!interp || !has(l.interp_modules)) return false;
    sys_modules_ = word(interp + static_cast<uint64_t>(l.interp_modules));
    if (!sys_modules_) return false;
  }
  int64_t used = 0;
  if (!proc_.mem().readValue(sys_modules_ + hdr_, used)) {
    sys_modules_ = 0;
    return false;
  }
  if (used == modules_used_ && !asyncio_found_) return false;
  modules_used_ = used;
  asyncio_found_ = module("asyncio") != 0;
  return asyncio_found_ && debugOffsets();
}

TaskList AsyncioTasks::read(uint64_t interp, const std::vector<ThreadRef>& threads,
                           const std::vector<uint64_t>* running_now,
                           const std::vector<std::vector<uint64_t>>* stacks) {
  TaskList out;
  frame_text_.clear();
  // The recorder reads tasks once imported() said asyncio is there.
  if (own_pass_ && !module("asyncio")) return out;
  debugOffsets();
  out.asyncio = true;
  if (!layout_error_.empty()) {
    out.error = layout_error_;
    return out;
  }
  std::vector<uint64_t> found;
  walk_cut_ = false;
  if (!findTasks(interp, threads, found, out.error)) return out;
  out.incomplete = walk_cut_;
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  // The task each thread runs now (a task running on a loop whose thread is not known still
  // shows as running: its coroutine is executing).
  std::unordered_map<uint64_t, uint64_t> running;  // task -> thread id
  std::vector<uint64_t> now;
  if (running_now && running_now->size() == threads.size())
    now = *running_now;
  else if (!this->running(threads, now))
    now.clear();
  else if (stacks && stacks->size() == threads.size())
    placeUnplaced(now, [&](size_t i, uint64_t frame) {
      const auto& s = (*stacks)[i];
      return std::find(s.begin(), s.end(), frame) != s.end();
    });
  for (size_t i = 0; i < now.size(); ++i)
    if (now[i]) running[now[i]] = threads[i].thread_id;
  out.tasks.reserve(found.size());
  out.found = found.size();
  for (uint64_t task : found) {
    if (pastDeadline() && !out.past_deadline) {
      out.past_deadline = true;
      out.before_deadline = out.tasks.size();
    }
    TaskRecord rec;
    uint64_t waiter = 0;
    if (!readTask(task, rec, waiter)) continue;
    auto r = running.find(task);
    if (r != running.end()) markRunning(rec, r->second);
    uint64_t by = 0;
    uint8_t by_set = 0;
    if (has(a_.task_awaited_by) && (by = word(task + static_cast<uint64_t>(a_.task_awaited_by))))
      proc_.mem().readValue(task + static_cast<uint64_t>(a_.task_awaited_by_is_set), by_set);
    awaitSources(rec, type(task), 0, by, static_cast<int8_t>(by_set));
    out.tasks.push_back(std::move(rec));
  }
  linkAwaits(out.tasks);
  out.frame_text = std::move(frame_text_);
  frame_text_.clear();
  out.waits_names = waits_names_;
  return out;
}

bool AsyncioTasks::liveTasks(uint64_t interp, const std::vector<ThreadRef>& threads,
                             std::vector<uint64_t>& found, TaskList& out) {
  const uint32_t minor = (proc_.layout().version_hex >> 16) & 0xFF;
  if (minor >= 14) return findTasks(interp, threads, found, out.error);
  // 3.8-3.13: the sets that hold the tasks, looked up by name now and then; soon while they
  // are empty (sets found mid-import are the module's own, which _asyncio's replace).
  if (!task_sets_[0] || ++set_reads_ % (sets_empty_ ? 8 : 256) == 0) {
    const uint64_t tasks = module("asyncio.tasks");
    const uint64_t ws =
        tasks ? objs_.dictGet(tasks, minor <= 11 ? "_all_tasks" : "_scheduled_tasks") : 0;
    if (const uint64_t data = ws ? objs_.attribute(ws, "data") : 0) {
      task_sets_[0] = data;
      task_sets_[1] = minor >= 12 ? objs_.dictGet(tasks, "_eager_tasks") : 0;
    } else if (!task_sets_[0]) {
      // asyncio.tasks is not imported yet, or is being imported (its set not made yet): no
      // task can exist.
      out.asyncio = false;
      return false;
    }
  }
  std::vector<uint64_t> refs;
  if (!task_sets_[0] || !setItems(task_sets_[0], refs)) {
    task_sets_[0] = 0;
    out.error = "asyncio's set of tasks could not be read";
    return false;
  }
  // Every weak reference's referent (the first field after its header) in one system call.
  found.resize(refs.size());
  reqs_.clear();
  for (size_t i = 0; i < refs.size(); ++i) reqs_.push_back({refs[i] + hdr_, &found[i], 8});
  for (size_t i = 0; i < reqs_.size(); i += 1024) {
    if (proc_.mem().readMany(reqs_.data() + i, std::min<size_t>(1024, reqs_.size() - i)) !=
        ReadStatus::kOk) {
      out.error = "asyncio's set of tasks changed while it was read";
      return false;
    }
  }
  if (task_sets_[1] && !setItems(task_sets_[1], found)) {
    out.error = "asyncio's set of eager tasks could not be read";
    return false;
  }
  sets_empty_ = found.empty();
  return true;
}

bool AsyncioTasks::readChanged(uint64_t interp, const std::vector<ThreadRef>& threads,
                               const std::vector<uint64_t>& running_now,
                               const std::unordered_set<uint64_t>& ran, uint64_t deadline_ns,
                               TaskList& out) {
  SnapshotJob& job = job_;
  if (!job.active && !beginReading(interp, threads, out)) return true;
  std::unordered_map<uint64_t, uint64_t> running;  // task -> thread id
  for (size_t i = 0; i < running_now.size() && i < threads.size(); ++i)
    if (running_now[i]) running[running_now[i]] = threads[i].thread_id;
  // Each C task's type, first done callback, coroutine, name and awaited future (and 3.14's
  // awaited_by), kBatch tasks to a system call; as many batches as the time allows.
  const auto& l = proc_.layout();
  const int32_t from = l.object_type;
  int32_t to = std::max({a_.task_coro, a_.task_name, a_.task_fut_waiter,
                         static_cast<int32_t>(hdr_ + 8)}) + 8;
  if (has(a_.task_awaited_by)) to = std::max({to, a_.task_awaited_by + 8,
                                             a_.task_awaited_by_is_set + 1});
  const size_t len = static_cast<size_t>(to - from);
  bool progressed = false;
  while (job.next < job.found.size()) {
    if (job.k == job.batch_n) readBatch(from, len);  // the next batch, in one system call
    for (; job.k < job.batch_n; ++job.k) {
      // (Each call reads at least a few tasks, so that a reading always ends.)
      if (progressed && job.k % 4 == 0 && monotonicNs() > deadline_ns) return false;
      progressed = true;
      readOne(from, len, running, ran);
    }
    job.next = job.batch_first + job.batch_n;
  }
  job.out.read_ns = monotonicNs();
  // The tasks were read in order of address: the next reading looks them up in this one.
  linkAwaits(job.out.tasks);
  last_ = std::move(job.out.tasks);
  job.out.tasks.clear();
  out = std::move(job.out);
  job = SnapshotJob();
  return true;
}

bool AsyncioTasks::beginReading(uint64_t interp, const std::vector<ThreadRef>& threads,
                                TaskList& out) {
  SnapshotJob& job = job_;
  job = SnapshotJob();
  job.out.asyncio = true;
  debugOffsets();
  if (!layout_error_.empty()) {
    job.out.error = layout_error_;
    out = std::move(job.out);
    return false;
  }
  // A set that changed as it was read (its table grew, a weak reference went) is read
  // again.
  bool listed = false;
  for (int attempt = 0; attempt < 3 && !listed; ++attempt) {
    job.found.clear();
    job.out.error.clear();
    listed = liveTasks(interp, threads, job.found, job.out);
    if (!job.out.asyncio) break;
  }
  if (!listed || !job.out.asyncio) {
    out = std::move(job.out);
    return false;
  }
  std::vector<uint64_t>& found = job.found;
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  found.erase(std::remove(found.begin(), found.end(), uint64_t{0}), found.end());
  job.out.tasks.reserve(found.size());
  job.active = true;
  return true;
}

void AsyncioTasks::readBatch(int32_t from, size_t len) {
  constexpr size_t kBatch = 256;
  SnapshotJob& job = job_;
  const size_t first = job.next, n = std::min(kBatch, job.found.size() - first);
  heads_.assign(n * len, 0);
  job.ok.assign(n, 0);
  std::vector<ReadRequest> reqs;
  for (size_t k = 0; k < n; ++k)
    reqs.push_back({job.found[first + k] + static_cast<uint64_t>(from),
                    heads_.data() + k * len, len});
  for (size_t k = 0; k < n;) {
    ReadStatus st;
    const size_t got = proc_.mem().readLeading(reqs.data() + k, n - k, &st);
    for (size_t m = 0; m < got; ++m) job.ok[k + m] = 1;
    k += got < n - k ? got + 1 : n - k;  // a task that cannot be read is skipped
  }
  job.batch_first = first;
  job.batch_n = n;
  job.k = 0;
}

void AsyncioTasks::readOne(int32_t from, size_t len,
                           const std::unordered_map<uint64_t, uint64_t>& running,
                           const std::unordered_set<uint64_t>& ran) {
  SnapshotJob& job = job_;
  auto field = [&](size_t k, int32_t off, size_t size) {
    uint64_t v = 0;
    std::memcpy(&v, heads_.data() + k * len + (off - from), size);
    return v;
  };
  const size_t k = job.k;
  const uint64_t task = job.found[job.batch_first + k];
  TaskRecord rec;
  const TypeDesc* t = job.ok[k] ? typeAt(field(k, from, 8)) : type(task);
  if (!t || !(t->c_task || t->py_task)) return;
  uint64_t cb0 = 0, by = 0;
  int8_t by_set = 0;
  if (t->c_task && job.ok[k]) {
    rec.id = task;
    rec.coro = field(k, a_.task_coro, 8);
    rec.name_obj = field(k, a_.task_name, 8);
    rec.fut_waiter = field(k, a_.task_fut_waiter, 8);
    cb0 = field(k, static_cast<int32_t>(hdr_ + 8), 8);
    if (has(a_.task_awaited_by)) {
      by = field(k, a_.task_awaited_by, 8);
      by_set = static_cast<int8_t>(field(k, a_.task_awaited_by_is_set, 1));
    }
    if (!rec.coro) return;  // finished
  } else {
    uint64_t waiter = 0;
    if (!readTask(task, rec, waiter)) return;
  }
  auto r = running.find(task);
  // Its record of the last reading (taken over below if it has not moved since).
  auto p = std::lower_bound(last_.begin(), last_.end(), task,
                            [](const TaskRecord& a, uint64_t id) { return a.id < id; });
  const bool same = p != last_.end() && p->id == task && p->coro == rec.coro &&
                    p->name_obj == rec.name_obj;
  const bool still = same && r == running.end() && p->state != TaskRun::kRunning &&
                     p->fut_waiter == rec.fut_waiter && !ran.count(task) && t->c_task;
  if (still) {
    rec = std::move(*p);  // it has not moved (each task is met once in a reading)
  } else if (t->c_task) {
    rec.state = TaskRun::kSuspended;
    if (!coroutineChain(rec.coro, rec)) return;  // its coroutine has finished
    finishTask(rec);
    if (same) {
      rec.name = p->name;
    } else {
      // A task made or freed as it was read is left for the next reading: its coroutine
      // and name read once more, after its name.
      uint64_t coro = 0, name_obj = 0;
      if (!nameOf(rec.name_obj, rec.name) || !identity(task, coro, name_obj) ||
          coro != rec.coro || name_obj != rec.name_obj)
        return;
      rec.checked = true;
    }
  }
  if (r != running.end()) markRunning(rec, r->second);
  // 3.14+ tasks say who waits on them in a field of their own, read with the others.
  if (!still || has(a_.task_awaited_by)) awaitSources(rec, t, cb0, by, by_set);
  job.out.tasks.push_back(std::move(rec));
}

}  // namespace psrec::recorder
