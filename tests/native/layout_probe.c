/* Prints, for the CPython headers it is compiled against, the offsets of every field psrec's
 * recorder reads, as "name value" lines. tests/native/test_layouts.py compiles it against each
 * installed interpreter's headers and compares the output with the recorder's own tables.
 * Build: cc -DPy_BUILD_CORE -I<include>/python3.X -I<include>/python3.X/internal layout_probe.c
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include <frameobject.h>
#if PY_VERSION_HEX >= 0x03090000
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#else
#include "internal/pycore_pystate.h"
#endif
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#endif
#if PY_VERSION_HEX >= 0x030E0000
#include "internal/pycore_interpframe_structs.h"
#endif
#if PY_VERSION_HEX >= 0x030C0000
#include "internal/pycore_ceval_state.h"
#endif
#include "internal/pycore_gil.h"
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_dict.h"
#include "internal/pycore_moduleobject.h"
#endif

#define P(name, value) printf("%s %ld\n", name, (long)(value))

int main(void) {
  P("version_hex", PY_VERSION_HEX);
  P("runtime.interpreters_head", offsetof(_PyRuntimeState, interpreters.head));
#if PY_VERSION_HEX < 0x030C0000
  P("runtime.gil_locked", offsetof(_PyRuntimeState, ceval.gil.locked));
  P("runtime.gil_last_holder", offsetof(_PyRuntimeState, ceval.gil.last_holder));
#else
  P("interp.ceval_gil", offsetof(PyInterpreterState, ceval.gil));
  P("gil.locked", offsetof(struct _gil_runtime_state, locked));
  P("gil.last_holder", offsetof(struct _gil_runtime_state, last_holder));
#endif
  P("interp.next", offsetof(PyInterpreterState, next));
#if PY_VERSION_HEX >= 0x030B0000
  P("interp.threads_head", offsetof(PyInterpreterState, threads.head));
#else
  P("interp.threads_head", offsetof(PyInterpreterState, tstate_head));
#endif
#if PY_VERSION_HEX >= 0x030C0000
  P("interp.modules", offsetof(PyInterpreterState, imports.modules));
#else
  P("interp.modules", offsetof(PyInterpreterState, modules));
#endif
  P("tstate.prev", offsetof(PyThreadState, prev));
  P("tstate.next", offsetof(PyThreadState, next));
  P("tstate.interp", offsetof(PyThreadState, interp));
  P("tstate.thread_id", offsetof(PyThreadState, thread_id));
#if PY_VERSION_HEX >= 0x030D0000
  /* The attached/detached state, and the status bit-field it is found from (3.13+). */
  P("tstate.status", offsetof(PyThreadState, _status));
  P("tstate.state", offsetof(PyThreadState, state));
#endif
#if PY_VERSION_HEX >= 0x030E0000
  /* A whole int from 3.14 (a bit of _status in 3.13), kept by take_gil/drop_gil. */
  P("tstate.holds_gil", offsetof(PyThreadState, holds_gil));
#endif
#if PY_VERSION_HEX >= 0x030F0000
  P("tstate.gil_requested", offsetof(PyThreadState, gil_requested));
  P("tstate.base_frame", offsetof(PyThreadState, base_frame));
  P("tstate.last_profiled_frame", offsetof(PyThreadState, last_profiled_frame));
  P("tstate.last_profiled_frame_seq", offsetof(PyThreadState, last_profiled_frame_seq));
#endif
#if PY_VERSION_HEX >= 0x030B0000
  P("tstate.native_thread_id", offsetof(PyThreadState, native_thread_id));
  P("tstate.datastack_chunk", offsetof(PyThreadState, datastack_chunk));
  P("tstate.datastack_top", offsetof(PyThreadState, datastack_top));
  P("tstate.datastack_limit", offsetof(PyThreadState, datastack_limit));
  P("chunk.previous", offsetof(_PyStackChunk, previous));
  P("chunk.size", offsetof(_PyStackChunk, size));
  P("chunk.top", offsetof(_PyStackChunk, top));
  P("chunk.data", offsetof(_PyStackChunk, data));
#endif
#if PY_VERSION_HEX >= 0x030D0000
  P("tstate.current_frame", offsetof(PyThreadState, current_frame));
#elif PY_VERSION_HEX >= 0x030B0000
  P("tstate.cframe", offsetof(PyThreadState, cframe));
  P("cframe.current_frame", offsetof(_PyCFrame, current_frame));
#else
  P("tstate.frame", offsetof(PyThreadState, frame));
  P("frame.f_back", offsetof(PyFrameObject, f_back));
  P("frame.f_code", offsetof(PyFrameObject, f_code));
  P("frame.f_lasti", offsetof(PyFrameObject, f_lasti));
  P("frame.f_gen", offsetof(PyFrameObject, f_gen));
#if PY_VERSION_HEX >= 0x030A0000
  P("frame.f_state", offsetof(PyFrameObject, f_state));
#else
  P("frame.f_state", offsetof(PyFrameObject, f_executing));
#endif
#endif
#if PY_VERSION_HEX >= 0x030D0000
  P("iframe.code", offsetof(_PyInterpreterFrame, f_executable));
  P("iframe.instr", offsetof(_PyInterpreterFrame, instr_ptr));
#elif PY_VERSION_HEX >= 0x030B0000
  P("iframe.code", offsetof(_PyInterpreterFrame, f_code));
  P("iframe.instr", offsetof(_PyInterpreterFrame, prev_instr));
#endif
#if PY_VERSION_HEX >= 0x030B0000
  P("iframe.previous", offsetof(_PyInterpreterFrame, previous));
  P("iframe.owner", offsetof(_PyInterpreterFrame, owner));
#if PY_VERSION_HEX < 0x030C0000
  P("iframe.is_entry", offsetof(_PyInterpreterFrame, is_entry));
#endif
#ifdef Py_GIL_DISABLED
  P("iframe.tlbc_index", offsetof(_PyInterpreterFrame, tlbc_index));
  P("code.tlbc", offsetof(PyCodeObject, co_tlbc));
#endif
  P("iframe.localsplus", offsetof(_PyInterpreterFrame, localsplus));
  P("code.qualname", offsetof(PyCodeObject, co_qualname));
  P("code.code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
  P("code.stacksize", offsetof(PyCodeObject, co_stacksize));
  P("code.nlocalsplus", offsetof(PyCodeObject, co_nlocalsplus));
  P("code.linetable", offsetof(PyCodeObject, co_linetable));
#elif PY_VERSION_HEX >= 0x030A0000
  P("code.linetable", offsetof(PyCodeObject, co_linetable));
#else
  P("code.linetable", offsetof(PyCodeObject, co_lnotab));
#endif
  P("code.filename", offsetof(PyCodeObject, co_filename));
  P("code.name", offsetof(PyCodeObject, co_name));
  P("code.firstlineno", offsetof(PyCodeObject, co_firstlineno));
  P("object.ob_type", offsetof(PyObject, ob_type));
  P("bytes.ob_size", offsetof(PyBytesObject, ob_base.ob_size));
  P("bytes.ob_sval", offsetof(PyBytesObject, ob_sval));
  P("unicode.length", offsetof(PyASCIIObject, length));
  P("unicode.state", offsetof(PyASCIIObject, state));
  P("unicode.ascii_size", sizeof(PyASCIIObject));
  P("unicode.compact_size", sizeof(PyCompactUnicodeObject));
  /* Objects read to find thread names (threading._active and Thread._name). */
  P("type.basicsize", offsetof(PyTypeObject, tp_basicsize));
  P("type.flags", offsetof(PyTypeObject, tp_flags));
  P("type.dictoffset", offsetof(PyTypeObject, tp_dictoffset));
  P("heaptype.cached_keys", offsetof(PyHeapTypeObject, ht_cached_keys));
  P("dict.keys", offsetof(PyDictObject, ma_keys));
  P("dict.values", offsetof(PyDictObject, ma_values));
#if PY_VERSION_HEX >= 0x030B0000
  P("dictkeys.log2_size", offsetof(PyDictKeysObject, dk_log2_size));
  P("dictkeys.log2_index_bytes", offsetof(PyDictKeysObject, dk_log2_index_bytes));
  P("dictkeys.kind", offsetof(PyDictKeysObject, dk_kind));
  P("dictkeys.nentries", offsetof(PyDictKeysObject, dk_nentries));
  P("dictkeys.indices", offsetof(PyDictKeysObject, dk_indices));
  P("dictvalues.values", offsetof(PyDictValues, values));
  P("module.dict", offsetof(PyModuleObject, md_dict));
#endif
  return 0;
}
