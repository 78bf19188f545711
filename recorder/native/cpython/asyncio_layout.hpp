// What psrec reads of asyncio's tasks and of the coroutines they run, as byte offsets: the
// _asyncio module's TaskObj, generator and coroutine objects, and where a suspended frame keeps
// the object it awaits. 3.8-3.13 come from this table (their structs are not in the installed
// headers; tests/integration/test_tasks.py checks them end to end on every version, and
// spec/cpython-layouts.md names their CPython source); 3.14+ take the task and thread fields
// from the _asyncio module's own debug offsets (its .AsyncioDebug section) and the generator
// and frame fields from _Py_DebugOffsets.
#pragma once

#include <cstddef>
#include <cstdint>

#include "recorder/native/cpython/layout.hpp"

namespace psrec::cpython {

struct AsyncioLayout {
  // PyGenObject / PyCoroObject
  int32_t gen_frame = kAbsent;        // 3.8-3.10: PyFrameObject *gi_frame (NULL once finished)
  int32_t gen_code = kAbsent;         // 3.8-3.10: PyObject *gi_code
  int32_t gen_iframe = kAbsent;       // 3.11+: the _PyInterpreterFrame inside the object
  int32_t gen_frame_state = kAbsent;  // 3.11+: int8_t gi_frame_state
  // 3.11+: the gi_frame_state values of a suspended frame, and of one suspended in an await
  // (yield from): 3.11-3.12 have a single suspended state.
  int8_t state_suspended_min = 0, state_suspended_max = 0;
  int8_t state_yield_from_min = 0, state_yield_from_max = 0;
  int8_t state_executing = 0;
  // Where a suspended frame's value stack ends (its top is the object it awaits).
  int32_t frame_stacktop = kAbsent;      // 3.8-3.9: PyObject **f_stacktop
  int32_t frame_valuestack = kAbsent;    // 3.10: PyObject **f_valuestack
  int32_t frame_stackdepth = kAbsent;    // 3.10: int f_stackdepth
  int32_t iframe_stacktop = kAbsent;     // 3.11-3.13: int stacktop, an index into localsplus
  int32_t iframe_stackpointer = kAbsent; // 3.14+: _PyStackRef *stackpointer
  // How far under the stack's end the awaited object lies: 1 (its top), 2 from 3.15 (whose
  // suspended frames keep one more value above it).
  int32_t awaited_depth = 1;
  // _asyncio's TaskObj (Modules/_asynciomodule.c)
  int32_t task_fut_waiter = kAbsent;
  int32_t task_coro = kAbsent;
  int32_t task_name = kAbsent;
  int32_t task_awaited_by = kAbsent;         // 3.14+: the awaiter, or a set of them
  int32_t task_awaited_by_is_set = kAbsent;  // 3.14+: char
  int32_t task_node = kAbsent;               // 3.14+: struct llist_node in its thread's list
  // 3.14+: _PyThreadStateImpl and PyInterpreterState
  int32_t tstate_running_loop = kAbsent;
  int32_t tstate_running_task = kAbsent;
  int32_t tstate_tasks_head = kAbsent;  // struct llist_node: the thread's live tasks
  int32_t interp_tasks_head = kAbsent;  // tasks whose thread has exited
};

// The table for a version (3.8-3.13 complete; 3.14+ only the generator and frame fields, from
// the layout, until withAsyncioDebug adds the rest). Versions outside 3.8+ get an empty table.
AsyncioLayout asyncioLayout(const Layout& l);
// Fills the task, thread and interpreter fields from the bytes of an .AsyncioDebug section
// (struct _Py_AsyncioModuleDebugOffsets, 3.14+: 13 uint64 values). False if it is too short or
// states offsets outside the sizes it states.
bool withAsyncioDebug(AsyncioLayout& a, const uint8_t* data, size_t size);

}  // namespace psrec::cpython
