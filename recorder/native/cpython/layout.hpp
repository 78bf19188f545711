// The fields of CPython's structures that psrec reads, as byte offsets. One instance per
// supported version (cpython/v3_X.hpp); 3.13+ fills one from the target's _Py_DebugOffsets and
// takes from its version's table only what that block lacks.
// kAbsent marks a field the version does not have. spec/cpython-layouts.md lists the source of
// every value; tests/native/layout_probe.c recomputes them from each version's headers.
#pragma once

#include <cstdint>

#include "recorder/native/cpython/call_sites.hpp"

namespace psrec::cpython {

constexpr int32_t kAbsent = -1;

// The CPython structures psrec reads, as tags for their fields. A struct that begins with
// another (a code object with PyVarObject's header, which begins with PyObject's) derives
// from it: a view of its bytes reads the fields of both.
namespace st {
struct Runtime {};      // _PyRuntimeState
struct Interp {};       // PyInterpreterState
struct Gil {};          // struct _gil_runtime_state
struct TState {};       // PyThreadState
struct CFrame {};       // _PyCFrame (3.11-3.12)
struct Chunk {};        // _PyStackChunk (3.11+)
struct FrameObject {};  // PyFrameObject (3.8-3.10)
struct IFrame {};       // _PyInterpreterFrame (3.11+)
struct Object {};       // PyObject
struct VarObject : Object {};
struct Code : VarObject {};
struct Bytes : VarObject {};
struct Unicode : Object {};
struct Type : VarObject {};
struct HeapType : Type {};
struct Dict : Object {};
struct DictKeys {};
struct DictValues {};
struct Module : Object {};
}  // namespace st

// The byte offset of a field of struct S (kAbsent where the version has no such field). It
// converts to its offset for address arithmetic; a view of S's bytes (StructView<S>) reads
// only fields of S and of the structs S begins with.
template <class S>
struct Field {
  int32_t off = kAbsent;
  constexpr Field() = default;
  constexpr Field(int32_t o) : off(o) {}  // NOLINT(google-explicit-constructor): tables
  constexpr operator int32_t() const { return off; }  // NOLINT(google-explicit-constructor)
};

enum class FrameModel : uint8_t {
  kFrameObject,       // 3.8-3.10: tstate->frame, a chain of PyFrameObject via f_back
  kInterpreterFrame,  // 3.11+: _PyInterpreterFrame chain via previous, in data-stack chunks
};

enum class LineTable : uint8_t {
  kLnotab,     // 3.8-3.9 co_lnotab: (byte offset delta, signed line delta) pairs
  kLinetable,  // 3.10 co_linetable: (byte offset delta, signed line delta or -128) pairs
  kLocations,  // 3.11+ co_linetable: the location table (PEP 626 / 657 format)
};

// Where an instance of a Python class keeps its attributes.
enum class InstanceDict : uint8_t {
  kDictOffset,    // 3.8-3.10: a dict pointer at tp_dictoffset
  kManagedPair,   // 3.11: values pointer at obj-32, dict pointer at obj-24
  kTaggedPointer, // 3.12: one word at obj-24, a dict, or values-1 (odd) for values
  kInlineValues,  // 3.13+: values inline at obj+tp_basicsize, dict pointer at obj-24
};

struct Layout {
  uint32_t version_hex = 0;  // PY_VERSION_HEX of the table (micro may be 0)
  FrameModel frame_model = FrameModel::kFrameObject;
  LineTable line_table = LineTable::kLnotab;
  bool free_threaded = false;      // built with --disable-gil (Py_GIL_DISABLED)
  // _PyInterpreterFrame.owner (Include/internal/pycore_frame.h, pycore_interpframe_structs.h):
  // values from owner_shim to owner_max mark frames that run no Python code (3.12-3.13
  // FRAME_OWNED_BY_CSTACK = 3; 3.14 FRAME_OWNED_BY_INTERPRETER = 3 and _CSTACK = 4; 3.15
  // FRAME_OWNED_BY_INTERPRETER = 3); above owner_max a byte is no owner at all (a torn read).
  static constexpr uint8_t kNoShim = 0xFF;
  uint8_t owner_shim = kNoShim;
  uint8_t owner_max = 2;  // 3.11: THREAD, GENERATOR, FRAME_OBJECT
  // 3.14+: f_executable is a _PyStackRef whose low bits are tags (Include/internal/
  // pycore_stackref.h: Py_TAG_BITS is 3 on default builds, 1 on free-threaded ones).
  uint64_t code_tag_bits = 0;
  // 3.11: a generator or coroutine is always resumed in a new C-level run of the interpreter
  // loop (a new _PyCFrame); only calls of Python functions are inlined, each pushing its frame
  // on the data stack. (3.12 resumes generators inline too: SEND_GEN, FOR_ITER_GEN.)
  bool generators_enter_loop = false;

  // _PyRuntimeState
  Field<st::Runtime> runtime_interpreters_head = kAbsent;
  Field<st::Runtime> runtime_gil_locked = kAbsent;       // 3.8-3.11: _PyRuntime.ceval.gil.locked (int)
  Field<st::Runtime> runtime_gil_last_holder = kAbsent;  // 3.8-3.11: _PyRuntime.ceval.gil.last_holder

  // PyInterpreterState
  Field<st::Interp> interp_next = kAbsent;
  Field<st::Interp> interp_threads_head = kAbsent;
  Field<st::Interp> interp_modules = kAbsent;
  Field<st::Interp> interp_ceval_gil = kAbsent;  // 3.12+: struct _gil_runtime_state *ceval.gil
  Field<st::Gil> gil_locked = kAbsent;        // 3.12+: within struct _gil_runtime_state
  Field<st::Gil> gil_last_holder = kAbsent;

  // PyThreadState
  Field<st::TState> tstate_prev = kAbsent;
  Field<st::TState> tstate_next = kAbsent;
  Field<st::TState> tstate_interp = kAbsent;
  Field<st::TState> tstate_thread_id = kAbsent;
  Field<st::TState> tstate_native_thread_id = kAbsent;  // 3.11+
  Field<st::TState> tstate_frame = kAbsent;             // 3.8-3.10: PyFrameObject *frame
  Field<st::TState> tstate_cframe = kAbsent;            // 3.11-3.12: _PyCFrame *cframe
  Field<st::CFrame> cframe_current_frame = kAbsent;     // 3.11-3.12: within _PyCFrame
  Field<st::TState> tstate_current_frame = kAbsent;     // 3.13+: _PyInterpreterFrame *current_frame
  Field<st::TState> tstate_datastack_chunk = kAbsent;   // 3.11+
  Field<st::TState> tstate_datastack_top = kAbsent;
  Field<st::TState> tstate_status = kAbsent;            // 3.13+: the _status bit-field (an anchor only)
  Field<st::TState> tstate_state = kAbsent;             // 3.13+: int, _Py_THREAD_ATTACHED (1) or not
  Field<st::TState> tstate_holds_gil = kAbsent;         // 3.15+: int, this thread holds the GIL
  Field<st::TState> tstate_gil_requested = kAbsent;     // 3.15+: int, this thread waits for the GIL
  Field<st::TState> tstate_base_frame = kAbsent;        // 3.15+: the bottom frame of every whole stack
  Field<st::TState> tstate_last_profiled_frame = kAbsent;  // 3.15+: a profiler's frame-cache anchor
  Field<st::TState> tstate_last_profiled_frame_seq = kAbsent;  // 3.15+: its moves on returns
  int32_t tstate_size = 0;                    // bytes to copy to cover the fields above

  // _PyStackChunk (3.11+)
  Field<st::Chunk> chunk_previous = kAbsent;
  Field<st::Chunk> chunk_size = kAbsent;
  Field<st::Chunk> chunk_top = kAbsent;
  Field<st::Chunk> chunk_data = kAbsent;

  // PyFrameObject (3.8-3.10)
  Field<st::FrameObject> frame_back = kAbsent;
  Field<st::FrameObject> frame_code = kAbsent;
  Field<st::FrameObject> frame_lasti = kAbsent;  // int; bytes in 3.8-3.9, code units in 3.10
  // char: f_executing (3.8-3.9, 1 while the frame runs) / f_state (3.10, FRAME_EXECUTING = 0)
  Field<st::FrameObject> frame_state = kAbsent;
  int8_t frame_state_running = 0;  // the value of frame_state while the frame runs
  Field<st::FrameObject> frame_gen = kAbsent;  // its generator (borrowed), or NULL
  int32_t frame_size = 0;

  // _PyInterpreterFrame (3.11+)
  Field<st::IFrame> iframe_code = kAbsent;      // f_code (3.11-3.12) / f_executable (3.13)
  Field<st::IFrame> iframe_previous = kAbsent;
  Field<st::IFrame> iframe_instr = kAbsent;     // prev_instr (3.11-3.12) / instr_ptr (3.13)
  Field<st::IFrame> iframe_owner = kAbsent;     // char
  Field<st::IFrame> iframe_is_entry = kAbsent;  // bool, 3.11 (3.12+ marks entries with a shim frame)
  // Free-threaded 3.14+: int32, which copy of its code's bytecode instr_ptr points into
  // (0 is co_code_adaptive; others are listed in code->co_tlbc).
  Field<st::IFrame> iframe_tlbc_index = kAbsent;
  int32_t iframe_size = 0;            // offset of localsplus: the header we copy
  // 3.14+, from _Py_DebugOffsets, for reading coroutines (cpython/asyncio_layout.hpp): not
  // part of a stack's read, so not in forEachOffset.
  int32_t iframe_stackpointer = kAbsent;  // _PyStackRef *stackpointer
  int32_t gen_iframe = kAbsent;           // PyGenObject's frame, inside the object
  int32_t gen_frame_state = kAbsent;      // int8_t gi_frame_state

  // PyCodeObject
  Field<st::Code> code_filename = kAbsent;
  Field<st::Code> code_name = kAbsent;
  Field<st::Code> code_qualname = kAbsent;     // 3.11+
  Field<st::Code> code_firstlineno = kAbsent;  // int
  Field<st::Code> code_linetable = kAbsent;    // co_lnotab (3.8-3.9) / co_linetable (3.10+), bytes
  Field<st::Code> code_adaptive = kAbsent;     // 3.11+: first code unit, inside the object
  // 3.11+ (ints): a frame takes co_nlocalsplus + co_stacksize words on the data stack after
  // its header (localsplus), as _PyEvalFramePushAndInit and CALL_PY_EXACT_ARGS push it.
  Field<st::Code> code_stacksize = kAbsent;
  Field<st::Code> code_nlocalsplus = kAbsent;
  Field<st::Code> code_tlbc = kAbsent;  // free-threaded 3.14+: _PyCodeArray *co_tlbc {size, entries[]}
  int32_t code_size = 0;               // bytes to copy to cover the fields above

  // Objects
  Field<st::Object> object_type = 8;
  Field<st::VarObject> var_size = 16;  // PyVarObject.ob_size
  Field<st::Bytes> bytes_sval = kAbsent;
  Field<st::Unicode> unicode_length = kAbsent;
  Field<st::Unicode> unicode_state = kAbsent;
  int32_t unicode_ascii_size = 0;    // sizeof(PyASCIIObject): data of compact ASCII strings
  int32_t unicode_compact_size = 0;  // sizeof(PyCompactUnicodeObject): data of other compact ones
  // The bit of PyASCIIObject.state where `kind:3`, then `compact:1` and `ascii:1`, begin:
  // 2, after `interned:2`; free-threaded builds make `interned` an unsigned char of its own,
  // which moves them to bit 8 (Include/cpython/unicodeobject.h).
  uint8_t unicode_kind_bit = 2;

  // Objects read to name threads (threading._active, Thread._name); see InstanceDict.
  Field<st::Type> type_basicsize = kAbsent;
  Field<st::Type> type_flags = kAbsent;        // unsigned long
  Field<st::Type> type_dictoffset = kAbsent;   // 3.8-3.10: where an instance keeps its __dict__
  Field<st::HeapType> heaptype_cached_keys = kAbsent;  // keys shared by a class's instances
  Field<st::Dict> dict_keys = kAbsent;         // PyDictObject.ma_keys
  Field<st::Dict> dict_values = kAbsent;       // PyDictObject.ma_values (split tables)
  Field<st::DictKeys> dictkeys_size = kAbsent;     // 3.8-3.10: Py_ssize_t dk_size
  Field<st::DictKeys> dictkeys_log2_size = kAbsent;         // 3.11+: uint8_t
  Field<st::DictKeys> dictkeys_log2_index_bytes = kAbsent;  // 3.11+: uint8_t
  Field<st::DictKeys> dictkeys_kind = kAbsent;              // 3.11+: uint8_t (general, unicode, split)
  Field<st::DictKeys> dictkeys_nentries = kAbsent;
  Field<st::DictKeys> dictkeys_indices = kAbsent;  // the hash index, followed by the entries
  Field<st::DictValues> dictvalues_values = kAbsent; // the values array within a split table's values
  Field<st::Module> module_dict = kAbsent;       // PyModuleObject.md_dict
  InstanceDict instance_dict = InstanceDict::kDictOffset;  // set by finishLayout
  // 3.12+: where an instance's managed dict pointer lies, relative to the object
  // (Include/internal/pycore_object.h, MANAGED_DICT_OFFSET: -3 words; -1 on free-threaded
  // builds, which have no PyGC_Head before the object).
  int32_t managed_dict = -24;

  // Instructions a frame calling a Python function directly can be at (3.11-3.13).
  CallSites call_sites;
};

// Computes the copy sizes (tstate_size, frame_size, code_size) from the offsets, and picks the
// version's call-site table.
void finishLayout(Layout& l);

// Calls f(name, value) for every offset in the table, named as in tests/native/gen_layout.py
// (for tests that compare a target's table with its headers).
template <class F>
void forEachOffset(const Layout& l, F&& f) {
#define PSREC_FIELD(x) f(#x, l.x)
  PSREC_FIELD(runtime_interpreters_head); PSREC_FIELD(runtime_gil_locked);
  PSREC_FIELD(runtime_gil_last_holder); PSREC_FIELD(interp_next); PSREC_FIELD(interp_threads_head);
  PSREC_FIELD(interp_modules); PSREC_FIELD(interp_ceval_gil); PSREC_FIELD(gil_locked);
  PSREC_FIELD(gil_last_holder); PSREC_FIELD(tstate_prev); PSREC_FIELD(tstate_next);
  PSREC_FIELD(tstate_interp); PSREC_FIELD(tstate_thread_id); PSREC_FIELD(tstate_native_thread_id);
  PSREC_FIELD(tstate_frame); PSREC_FIELD(tstate_cframe); PSREC_FIELD(cframe_current_frame);
  PSREC_FIELD(tstate_current_frame); PSREC_FIELD(tstate_datastack_chunk);
  PSREC_FIELD(tstate_datastack_top); PSREC_FIELD(tstate_status); PSREC_FIELD(tstate_state);
  PSREC_FIELD(tstate_holds_gil); PSREC_FIELD(tstate_gil_requested);
  PSREC_FIELD(tstate_base_frame); PSREC_FIELD(tstate_last_profiled_frame);
  PSREC_FIELD(tstate_last_profiled_frame_seq); PSREC_FIELD(chunk_previous);
  PSREC_FIELD(chunk_size); PSREC_FIELD(chunk_top); PSREC_FIELD(chunk_data); PSREC_FIELD(frame_back);
  PSREC_FIELD(frame_code); PSREC_FIELD(frame_lasti); PSREC_FIELD(frame_state);
  PSREC_FIELD(frame_gen); PSREC_FIELD(iframe_code); PSREC_FIELD(iframe_previous);
  PSREC_FIELD(iframe_instr); PSREC_FIELD(iframe_owner);
  PSREC_FIELD(iframe_is_entry); PSREC_FIELD(iframe_tlbc_index); PSREC_FIELD(iframe_size);
  PSREC_FIELD(code_filename); PSREC_FIELD(code_name); PSREC_FIELD(code_qualname);
  PSREC_FIELD(code_firstlineno); PSREC_FIELD(code_linetable); PSREC_FIELD(code_adaptive);
  PSREC_FIELD(code_stacksize); PSREC_FIELD(code_nlocalsplus); PSREC_FIELD(code_tlbc);
  PSREC_FIELD(object_type); PSREC_FIELD(var_size); PSREC_FIELD(bytes_sval);
  PSREC_FIELD(unicode_length); PSREC_FIELD(unicode_state); PSREC_FIELD(unicode_ascii_size);
  PSREC_FIELD(unicode_compact_size); PSREC_FIELD(type_basicsize); PSREC_FIELD(type_flags);
  PSREC_FIELD(type_dictoffset); PSREC_FIELD(heaptype_cached_keys); PSREC_FIELD(dict_keys);
  PSREC_FIELD(dict_values); PSREC_FIELD(dictkeys_size); PSREC_FIELD(dictkeys_log2_size);
  PSREC_FIELD(dictkeys_log2_index_bytes); PSREC_FIELD(dictkeys_kind);
  PSREC_FIELD(dictkeys_nentries); PSREC_FIELD(dictkeys_indices); PSREC_FIELD(dictvalues_values);
  PSREC_FIELD(module_dict);
#undef PSREC_FIELD
}

}  // namespace psrec::cpython
