#include "recorder/native/cpython/asyncio_layout.hpp"

#include <cstring>

namespace psrec::cpython {

namespace {

struct TaskFields {
  int32_t fut_waiter, coro, name;
};

// TaskObj's task_fut_waiter, task_coro and task_name, which follow FutureObj_HEAD(task) and,
// from 3.11, two bit-fields and an int (Modules/_asynciomodule.c of each version).
TaskFields taskFields(uint32_t minor) {
  switch (minor) {
    case 8: return {104, 112, 120};
    case 9: return {144, 152, 160};
    case 10: return {152, 160, 168};
    case 11:
    case 12: return {128, 136, 144};
    case 13: return {112, 120, 128};
    default: return {kAbsent, kAbsent, kAbsent};
  }
}

}  // namespace

AsyncioLayout asyncioLayout(const Layout& l) {
  AsyncioLayout a;
  const uint32_t minor = (l.version_hex >> 16) & 0xFF;
  if ((l.version_hex >> 24) != 3 || minor < 8) return a;
  const TaskFields t = taskFields(minor);
  a.task_fut_waiter = t.fut_waiter;
  a.task_coro = t.coro;
  a.task_name = t.name;
  if (minor <= 10) {
    // PyGenObject: PyObject_HEAD, then gi_frame, (3.8-3.9: char gi_running,) gi_code
    // (Include/genobject.h).
    a.gen_frame = 16;
    a.gen_code = minor <= 9 ? 32 : 24;
    if (minor <= 9) {
      a.frame_stacktop = 72;  // PyFrameObject.f_stacktop (Include/frameobject.h)
    } else {
      a.frame_valuestack = 64;  // PyFrameObject.f_valuestack, f_stackdepth (3.10)
      a.frame_stackdepth = 80;
    }
    return a;
  }
  if (minor <= 13) {
    // _PyGenObject_HEAD (Include/cpython/genobject.h): gi_frame_state, then gi_iframe; 3.11
    // still has gi_code first. _PyInterpreterFrame.stacktop (Include/internal/pycore_frame.h).
    a.gen_iframe = minor == 11 ? 80 : 72;
    a.gen_frame_state = minor == 11 ? 75 : 67;
    a.iframe_stacktop = 64;
    if (minor <= 12) {  // FRAME_SUSPENDED = -1, FRAME_EXECUTING = 0
      a.state_suspended_min = a.state_suspended_max = -1;
      a.state_yield_from_min = a.state_yield_from_max = -1;
    } else {  // FRAME_SUSPENDED = -2, FRAME_SUSPENDED_YIELD_FROM = -1
      a.state_suspended_min = -2;
      a.state_suspended_max = a.state_yield_from_min = a.state_yield_from_max = -1;
    }
    a.state_executing = 0;
    return a;
  }
  // 3.14+: _Py_DebugOffsets.gen_object and interpreter_frame.stackpointer.
  a.gen_iframe = l.gen_iframe;
  a.gen_frame_state = l.gen_frame_state;
  a.iframe_stackpointer = l.iframe_stackpointer;
  if (minor == 14) {  // FRAME_SUSPENDED = -2, _YIELD_FROM = -1, FRAME_EXECUTING = 0
    a.state_suspended_min = -2;
    a.state_suspended_max = a.state_yield_from_min = a.state_yield_from_max = -1;
    a.state_executing = 0;
  } else {  // 3.15: SUSPENDED = 1, _YIELD_FROM = 2, _YIELD_FROM_LOCKED = 3, EXECUTING = 4
    a.awaited_depth = 2;  // _PyGen_yf reads stackpointer[-2]
    a.state_suspended_min = 1;
    a.state_suspended_max = a.state_yield_from_max = 3;
    a.state_yield_from_min = 2;
    a.state_executing = 4;
  }
  return a;
}

bool withAsyncioDebug(AsyncioLayout& a, const uint8_t* data, size_t size) {
  // struct _Py_AsyncioModuleDebugOffsets: asyncio_task_object {size, task_name,
  // task_awaited_by, task_is_task, task_awaited_by_is_set, task_coro, task_node},
  // asyncio_interpreter_state {size, asyncio_tasks_head}, asyncio_thread_state {size,
  // asyncio_running_loop, asyncio_running_task, asyncio_tasks_head}.
  constexpr size_t kWords = 13;
  if (size < kWords * 8) return false;
  uint64_t v[kWords];
  std::memcpy(v, data, sizeof v);
  const uint64_t task_size = v[0], interp_size = v[7], tstate_size = v[9];
  auto inside = [](uint64_t off, uint64_t width, uint64_t of) {
    return of < (1u << 20) && off + width <= of;
  };
  if (!inside(v[1], 8, task_size) || !inside(v[2], 8, task_size) ||
      !inside(v[4], 1, task_size) || !inside(v[5], 8, task_size) ||
      !inside(v[6], 16, task_size) || !inside(v[8], 16, interp_size) ||
      !inside(v[10], 8, tstate_size) || !inside(v[11], 8, tstate_size) ||
      !inside(v[12], 16, tstate_size) || v[5] < 8)
    return false;
  a.task_name = static_cast<int32_t>(v[1]);
  a.task_awaited_by = static_cast<int32_t>(v[2]);
  a.task_awaited_by_is_set = static_cast<int32_t>(v[4]);
  a.task_coro = static_cast<int32_t>(v[5]);
  // TaskObj declares task_fut_waiter just before task_coro; the section does not list it.
  a.task_fut_waiter = a.task_coro - 8;
  a.task_node = static_cast<int32_t>(v[6]);
  a.interp_tasks_head = static_cast<int32_t>(v[8]);
  a.tstate_running_loop = static_cast<int32_t>(v[10]);
  a.tstate_running_task = static_cast<int32_t>(v[11]);
  a.tstate_tasks_head = static_cast<int32_t>(v[12]);
  return true;
}

}  // namespace psrec::cpython
