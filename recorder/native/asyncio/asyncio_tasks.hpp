// The asyncio tasks of a target, read from outside it: each task's name, whether a thread runs
// it now, where it is suspended (its chain of coroutines, down to the innermost await) and which
// tasks wait on which. Every read may fail or be torn; a task that cannot be read whole is left
// out rather than guessed.
//
// Where the tasks are:
// - 3.8-3.13: asyncio.tasks._all_tasks (3.8-3.11) or _scheduled_tasks and _eager_tasks
//   (3.12-3.13), a WeakSet and a set; the task each loop runs in asyncio.tasks._current_tasks
//   ({loop: task}), the loop's thread in its _thread_id.
// - 3.14+: a linked list per thread state (and one in the interpreter for tasks whose thread
//   has exited), the running task in the thread state, as the _asyncio module's .AsyncioDebug
//   section says.
// Which task waits on which: 3.14+ keep it in each task (task_awaited_by); before, psrec derives
// it as 3.14 records it: a task waits on the task it awaits, on the children of the gather it
// awaits, and on the tasks of the TaskGroup whose block it is in.
#pragma once

#include <cstdint>
#include <optional>
#include <functional>
#include <memory>
#include <string_view>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "recorder/native/python/code_cache.hpp"
#include "recorder/native/cpython/asyncio_layout.hpp"
#include "recorder/native/python/py_objects.hpp"
#include "recorder/native/python/python_process.hpp"

namespace psrec::recorder {

// What a task is doing when read.
enum class TaskRun : uint8_t {
  kSuspended,  // at an await (or ready to run again: TaskRecord::fut_waiter 0)
  kRunning,    // a thread runs it now
  kPending,    // created, not started yet
};
const char* taskRunName(TaskRun state);  // "suspended", "running", "pending"

constexpr uint32_t kNoFrameText = UINT32_MAX;

struct TaskFrame {
  CodeInfo* code = nullptr;  // its code object in the CodeCache (valid in the pass it was read)
  int32_t line = 0;
  // A dump's: the frame's file and function names, at this index of TaskList::frame_text (a
  // recording interns the code instead).
  uint32_t text = kNoFrameText;
};

// Which tasks wait on which: kept apart, for the few tasks that have any.
struct TaskEdges {
  std::vector<uint64_t> awaits;      // the tasks it waits on
  std::vector<uint64_t> awaited_by;  // the tasks waiting on it
  // What the edges come from. 3.8-3.13: the tasks its awaited future stands for (that task,
  // or a gather's children), and the task whose TaskGroup block it belongs to; 3.14+: the
  // tasks its own field says wait on it.
  std::vector<uint64_t> waited;
  uint64_t group_parent = 0;
  std::vector<uint64_t> waiters;
};

// One task as read. A recording keeps one of these per live task between readings (a hundred
// thousand tasks cost the recorder their size times that): what changes rarely lies apart.
struct TaskRecord {
  uint64_t id = 0;         // the task object's address (what asyncio's own tools call its id)
  std::string name;
  TaskRun state = TaskRun::kSuspended;
  bool checked = false;    // its coroutine and name were read again after its name
  uint64_t thread_id = 0;  // running: the Python thread id of the thread running it
  // Suspended: its coroutines, innermost first, down to the await it is suspended at.
  std::vector<TaskFrame> stack;
  // Suspended: the type of what it waits on (Task, Future, ...), as an index in the reader's
  // names of such types (AsyncioTasks::waitsName, TaskList::waits_names); 0: none known.
  uint32_t waits = 0;
  uint64_t coro = 0;       // its coroutine and name objects (what AsyncioTasks::identity reads)
  uint64_t name_obj = 0;
  uint64_t fut_waiter = 0; // suspended: what it awaits (0: nothing, it is ready to run)
  std::unique_ptr<TaskEdges> edges;  // null: it waits on no task and none waits on it

  const std::vector<uint64_t>& awaits() const { return edges ? edges->awaits : kNone; }
  const std::vector<uint64_t>& awaitedBy() const { return edges ? edges->awaited_by : kNone; }
  TaskEdges& edgesMade() {
    if (!edges) edges = std::make_unique<TaskEdges>();
    return *edges;
  }

 private:
  static const std::vector<uint64_t> kNone;
};

struct TaskList {
  bool asyncio = false;  // asyncio is imported
  std::vector<TaskRecord> tasks;  // read(): every task read; readChanged(): none (see tasks())
  std::string error;     // why the tasks could not be read (tasks is then empty)
  uint64_t read_ns = 0;  // readChanged: when the tasks' fields were read (CLOCK_MONOTONIC)
  // read() with a deadline: the tasks found, and how many of them were read before it
  // passed (the others after: not of the same moment).
  size_t found = 0;
  size_t before_deadline = 0;
  bool past_deadline = false;
  bool incomplete = false;  // the lists of tasks were not walked whole by the deadline
  // read(): the file and function names of the tasks' frames (TaskFrame::text), and the
  // names of what they wait on (TaskRecord::waits).
  std::vector<std::pair<std::string, std::string>> frame_text;
  std::vector<std::string> waits_names;
};

struct ThreadRef {
  uint64_t tstate = 0;
  uint64_t thread_id = 0;
};

class AsyncioTasks {
 public:
  AsyncioTasks(PythonProcess& proc, CodeCache& codes);

  // Reads every live task of the interpreter interp, whose threads are given. running_now, if
  // given, is the task each thread runs (as running() just read it), not read again; else
  // stacks, if given, are the threads' frame addresses (in threads' order), which place the
  // tasks running() could not (placeUnplaced).
  TaskList read(uint64_t interp, const std::vector<ThreadRef>& threads,
                const std::vector<uint64_t>* running_now = nullptr,
                const std::vector<std::vector<uint64_t>>* stacks = nullptr);
  // read()'s tasks read before CLOCK_MONOTONIC time deadline_ns are read before
  // past_deadline() is called, once, and the others after it (dump --tasks resumes the
  // process it stopped there).
  void setDeadline(uint64_t deadline_ns, std::function<void()> past_deadline) {
    deadline_ns_ = deadline_ns;
    past_deadline_ = std::move(past_deadline);
  }
  // For recording: read()'s tasks, each named, with what the previous call found kept for a
  // task that cannot have moved since: the same coroutine, name and awaited future, not
  // running now and not run by a thread since that call (ran: the tasks the recorder saw
  // running in between). Its tasks' fields are read in one system call for all of them.
  // A reading spread over calls, so that a hundred thousand tasks do not hold up a pass: each
  // call reads tasks until CLOCK_MONOTONIC time deadline_ns (at least a batch of them), and
  // returns true with `out` once every task was read (a reading begins at a call after the
  // previous one ended). running_now and ran are those of the call's pass. The tasks of the
  // reading are then tasks(); out says whether asyncio runs, and why they could not be read.
  bool readChanged(uint64_t interp, const std::vector<ThreadRef>& threads,
                   const std::vector<uint64_t>& running_now,
                   const std::unordered_set<uint64_t>& ran, uint64_t deadline_ns,
                   TaskList& out);
  // Whether a reading is in progress (readChanged returned false last).
  bool readingTasks() const { return job_.active; }
  // The tasks of the last reading readChanged finished, by address (each task's record is
  // kept here only: the next reading takes over those of tasks that have not moved).
  const std::vector<TaskRecord>& tasks() const { return last_; }
  // The type of what a task waits on ("" where none is known).
  const std::string& waitsName(const TaskRecord& rec) const {
    return waits_names_[rec.waits < waits_names_.size() ? rec.waits : 0];
  }
  // Code objects are looked up in the CodeCache as of the recorder's pass, which validates
  // them once per pass (a one-off read counts passes of its own).
  void usePass(uint64_t pass) {
    pass_ = pass;
    own_pass_ = false;
  }

  // For recording, at every pass. Whether asyncio is imported (one lookup in sys.modules).
  bool imported();
  // The task each thread runs now (0: none), in the order of threads; false when that could
  // not be read. A task running on a loop that does not say its thread (3.8-3.13: uvloop's
  // keeps it in a C field) is in unplaced() instead.
  bool running(const std::vector<ThreadRef>& threads, std::vector<uint64_t>& out);
  const std::vector<uint64_t>& unplaced() const { return unplaced_; }
  // Gives each unplaced() task to the first thread of out that runs none and whose stack
  // holds the task's coroutine's frame (holds(i, frame): thread i's does).
  template <typename Holds>
  void placeUnplaced(std::vector<uint64_t>& out, Holds holds) {
    for (uint64_t task : unplaced_) {
      uint64_t coro = 0, name_obj = 0;
      if (!identity(task, coro, name_obj)) continue;
      const uint64_t frame = coroutineFrame(coro);
      if (!frame) continue;
      for (size_t i = 0; i < out.size(); ++i) {
        if (!out[i] && holds(i, frame)) {
          out[i] = task;
          break;
        }
      }
    }
  }
  // What tells a task from one created later at its address: its coroutine and name objects
  // (both are read in one system call for a C task). False if it is no task.
  bool identity(uint64_t task, uint64_t& coro, uint64_t& name);
  // The code object of a coroutine (0).
  uint64_t coroutineCode(uint64_t coro);
  // The text of a task's name object (identity's name): a str, or 3.13+'s counter.
  bool nameOf(uint64_t name_obj, std::string& out);
  // The frame a running coroutine's code runs in (what a stack read finds): inside the object
  // from 3.11, its frame object before (0 if it has none).
  uint64_t coroutineFrame(uint64_t coro);
  // Whether the frame of a coroutine has its own memory (3.11+): then a coroutine found at its
  // frame's place is the one running there; before, a frame object may have been freed with
  // an old coroutine and reused for a new one's (so the codes must agree too).
  bool framesInside() const { return a_.gen_iframe != cpython::kAbsent; }

 private:
  struct TypeDesc {
    std::string name;
    bool c_task = false;     // _asyncio.Task or a subclass of it
    bool py_task = false;    // asyncio.tasks.Task in pure Python, or a subclass
    bool gathering = false;  // asyncio.tasks._GatheringFuture
    bool coroutine = false;  // a coroutine or a generator (something with a frame)
  };
  const TypeDesc* type(uint64_t obj);
  const TypeDesc* typeAt(uint64_t type_addr);
  uint64_t word(uint64_t addr);
  bool setItems(uint64_t set, std::vector<uint64_t>& out);
  bool weakSetItems(uint64_t weakset, std::vector<uint64_t>& out);
  bool listItems(uint64_t list, std::vector<uint64_t>& out);
  std::optional<int64_t> intValue(uint64_t obj);
  uint64_t module(std::string_view name);
  bool findTasks(uint64_t interp, const std::vector<ThreadRef>& threads,
                 std::vector<uint64_t>& out, std::string& why);
  // The frames of a coroutine chain from coro inward; false when coro has finished.
  // readChanged's live tasks (out.asyncio false: asyncio.tasks is not imported yet).
  bool liveTasks(uint64_t interp, const std::vector<ThreadRef>& threads,
                 std::vector<uint64_t>& found, TaskList& out);
  bool coroutineChain(uint64_t coro, TaskRecord& rec);
  bool readTask(uint64_t task, TaskRecord& rec, uint64_t& fut_waiter);
  // A task read with its coroutine chain: its stack innermost first and what it waits on, or,
  // running, neither.
  void finishTask(TaskRecord& rec);
  bool debugOffsets();
  // The await edges' sources of rec (TaskRecord::waited, group_parent, waiters): cb0 is a C
  // task's first done callback (read when 0), awaited_by and by_set its 3.14+ fields.
  void awaitSources(TaskRecord& rec, const TypeDesc* t, uint64_t cb0, uint64_t awaited_by,
                    int8_t by_set);
  // awaits and awaited_by of every task, from their sources, between tasks of the list.
  static void linkAwaits(std::vector<TaskRecord>& tasks);
  void markRunning(TaskRecord& rec, uint64_t thread_id);

  PythonProcess& proc_;
  CodeCache& codes_;
  ObjectReader objs_;
  cpython::AsyncioLayout a_;
  bool have_debug_ = false;
  std::string layout_error_;
  uint64_t hdr_ = 16;  // where an object's first field lies (after PyObject_HEAD)
  std::unordered_map<uint64_t, TypeDesc> types_;
  // readChanged(): the tasks of its last reading, by address (tasks()); the sets that hold
  // the tasks (3.8-3.13: the weak set's table, and the eager tasks'), looked up again now
  // and then.
  std::vector<TaskRecord> last_;
  // The names of the types tasks wait on (TaskRecord::waits), each once.
  std::vector<std::string> waits_names_{std::string()};
  std::unordered_map<std::string, uint32_t> waits_ids_;
  // read(): the frames' names (TaskList::frame_text) as they are read.
  std::vector<std::pair<std::string, std::string>> frame_text_;
  struct SnapshotJob {
    bool active = false;
    std::vector<uint64_t> found;  // the live tasks, listed when it began
    size_t next = 0;              // the first of them not read yet
    // The batch being read: its first task, its size, the next of its tasks, and which of
    // their fields were read (into heads_).
    size_t batch_first = 0, batch_n = 0, k = 0;
    std::vector<uint8_t> ok;
    TaskList out;
  };
  SnapshotJob job_;
  // readChanged's steps: a reading begun (the live tasks listed; false, with out, when it
  // ends there), the fields of the next batch of tasks read in one system call (into heads_,
  // len bytes each from offset `from` of the object), and the batch's next task read.
  bool beginReading(uint64_t interp, const std::vector<ThreadRef>& threads, TaskList& out);
  void readBatch(int32_t from, size_t len);
  void readOne(int32_t from, size_t len, const std::unordered_map<uint64_t, uint64_t>& running,
               const std::unordered_set<uint64_t>& ran);
  uint64_t task_sets_[2] = {0, 0};
  uint32_t set_reads_ = 0;
  std::vector<uint8_t> heads_;
  uint64_t pass_ = 1000;
  uint64_t deadline_ns_ = 0;
  bool walk_cut_ = false;
  bool resumed_ = false;  // past the deadline (past_deadline_ called)
  // Whether the deadline has passed; calls past_deadline_ the first time it has.
  bool pastDeadline();
  std::function<void()> past_deadline_;
  bool own_pass_ = true;
  // 3.8-3.13, recording: asyncio.tasks._current_tasks, and each loop's thread, read again now
  // and then (a loop may be closed and another made at its address).
  uint64_t current_tasks_ = 0;
  uint64_t tasks_module_ = 0;  // asyncio.tasks's dict
  uint32_t current_reads_ = 0;
  bool current_empty_ = true;  // the last read of current_tasks_ found no entry
  bool sets_empty_ = true;  // the last read of task_sets_ found no task
  // imported(): sys.modules, and its size when last looked into.
  uint64_t sys_modules_ = 0;
  int64_t modules_used_ = -1;
  bool asyncio_found_ = false;
  struct LoopThread {
    uint64_t thread_id = 0;
    uint32_t reads = 0;
  };
  std::unordered_map<uint64_t, LoopThread> loops_;
  std::vector<DictEntry> entries_;
  std::vector<uint64_t> unplaced_;  // see unplaced()
  std::vector<ReadRequest> reqs_;
};

}  // namespace psrec::recorder
