// A target's struct layout: psrec's own tables (3.8-3.12, and what _Py_DebugOffsets lacks),
// or the target's _Py_DebugOffsets (3.13+) read by field name and checked.
//
// Over 400 lines for a reason: half of it is the field lists of _Py_DebugOffsets, one per
// shape of the struct, which tests/native/test_layouts.py checks against each interpreter's
// headers; they are data, and sit beside the code that reads them.
#include "recorder/native/python/offsets.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "recorder/native/cpython/v3_10.hpp"
#include "recorder/native/cpython/v3_11.hpp"
#include "recorder/native/cpython/v3_12.hpp"
#include "recorder/native/cpython/v3_13.hpp"
#include "recorder/native/cpython/v3_14.hpp"
#include "recorder/native/cpython/v3_15.hpp"
#include "recorder/native/cpython/v3_8.hpp"
#include "recorder/native/cpython/v3_9.hpp"

namespace psrec::cpython {

void finishLayout(Layout& l) {
  auto end = [](std::initializer_list<int32_t> offsets, int32_t width) {
    int32_t m = 0;
    for (int32_t o : offsets)
      if (o != kAbsent) m = std::max(m, o + width);
    return m;
  };
  l.tstate_size = end({l.tstate_prev, l.tstate_next, l.tstate_interp, l.tstate_thread_id,
                       l.tstate_native_thread_id, l.tstate_frame, l.tstate_cframe,
                       l.tstate_current_frame, l.tstate_datastack_chunk, l.tstate_datastack_top,
                       l.tstate_state, l.tstate_holds_gil, l.tstate_gil_requested,
                       l.tstate_base_frame, l.tstate_last_profiled_frame,
                       l.tstate_last_profiled_frame_seq},
                      8);
  l.frame_size = end({l.frame_back, l.frame_code, l.frame_lasti, l.frame_state, l.frame_gen}, 8);
  if (l.iframe_size == 0) l.iframe_size = end({l.iframe_code, l.iframe_previous, l.iframe_instr}, 8);
  l.code_size = end({l.object_type, l.var_size, l.code_filename, l.code_name, l.code_qualname,
                     l.code_firstlineno, l.code_linetable, l.code_stacksize, l.code_nlocalsplus,
                     l.code_tlbc},
                    8);
  const uint32_t minor = (l.version_hex >> 16) & 0xFF;
  l.frame_state_running = minor >= 10 ? 0 : 1;
  if (l.frame_model == FrameModel::kInterpreterFrame) l.call_sites = callSitesFor(minor);
  // Frame owners (see Layout::owner_shim) and _PyStackRef tags, by version; a later version
  // than psrec knows is taken to be like the latest it knows.
  if (minor >= 12) l.owner_shim = 3;
  l.owner_max = minor < 12 ? 2 : minor == 14 ? 4 : 3;
  if (minor >= 14) l.code_tag_bits = l.free_threaded ? 1 : 3;
  l.unicode_kind_bit = l.free_threaded ? 8 : 2;
  l.managed_dict = l.free_threaded ? -8 : -24;
  l.generators_enter_loop = minor == 11;
  l.instance_dict = minor < 11    ? InstanceDict::kDictOffset
                    : minor == 11 ? InstanceDict::kManagedPair
                    : minor == 12 ? InstanceDict::kTaggedPointer
                                  : InstanceDict::kInlineValues;
}

}  // namespace psrec::cpython

namespace psrec::recorder {

using cpython::kAbsent;
using cpython::Layout;

std::optional<Layout> builtinLayout(uint32_t version_hex) {
  uint32_t major = version_hex >> 24, minor = (version_hex >> 16) & 0xFF;
  if (major != 3) return std::nullopt;
  switch (minor) {
    case 8: return cpython::v3_8::layout();
    case 9: return cpython::v3_9::layout();
    case 10: return cpython::v3_10::layout();
    case 11: return cpython::v3_11::layout();
    case 12: return cpython::v3_12::layout();
    case 13: return cpython::v3_13::layout();
    case 14: return cpython::v3_14::layout();
    case 15: return cpython::v3_15::layout();
    default: return std::nullopt;
  }
}

namespace {

// The fields of _Py_DebugOffsets in order, as section.field, one list per shape of the struct
// (Include/internal/pycore_runtime.h in 3.13, pycore_debug_offsets.h from 3.14). Every field
// is a uint64 (the 8-byte cookie counts as one). tests/native/test_layouts.py checks each list
// against the headers of every installed interpreter of its version.
constexpr const char* kDebugFields3_13 = R"(
cookie version free_threaded
runtime_state.size runtime_state.finalizing runtime_state.interpreters_head
interpreter_state.size interpreter_state.id interpreter_state.next interpreter_state.threads_head
interpreter_state.gc interpreter_state.imports_modules interpreter_state.sysdict
interpreter_state.builtins interpreter_state.ceval_gil interpreter_state.gil_runtime_state
interpreter_state.gil_runtime_state_enabled interpreter_state.gil_runtime_state_locked
interpreter_state.gil_runtime_state_holder
thread_state.size thread_state.prev thread_state.next thread_state.interp
thread_state.current_frame thread_state.thread_id thread_state.native_thread_id
thread_state.datastack_chunk thread_state.status
interpreter_frame.size interpreter_frame.previous interpreter_frame.executable
interpreter_frame.instr_ptr interpreter_frame.localsplus interpreter_frame.owner
code_object.size code_object.filename code_object.name code_object.qualname
code_object.linetable code_object.firstlineno code_object.argcount code_object.localsplusnames
code_object.localspluskinds code_object.co_code_adaptive
pyobject.size pyobject.ob_type
type_object.size type_object.tp_name type_object.tp_repr type_object.tp_flags
tuple_object.size tuple_object.ob_item tuple_object.ob_size
list_object.size list_object.ob_item list_object.ob_size
dict_object.size dict_object.ma_keys dict_object.ma_values
float_object.size float_object.ob_fval
long_object.size long_object.lv_tag long_object.ob_digit
bytes_object.size bytes_object.ob_size bytes_object.ob_sval
unicode_object.size unicode_object.state unicode_object.length unicode_object.asciiobject_size
gc.size gc.collecting
)";

constexpr const char* kDebugFields3_14 = R"(
cookie version free_threaded
runtime_state.size runtime_state.finalizing runtime_state.interpreters_head
interpreter_state.size interpreter_state.id interpreter_state.next interpreter_state.threads_head
interpreter_state.threads_main interpreter_state.gc interpreter_state.imports_modules
interpreter_state.sysdict interpreter_state.builtins interpreter_state.ceval_gil
interpreter_state.gil_runtime_state interpreter_state.gil_runtime_state_enabled
interpreter_state.gil_runtime_state_locked interpreter_state.gil_runtime_state_holder
interpreter_state.code_object_generation interpreter_state.tlbc_generation
thread_state.size thread_state.prev thread_state.next thread_state.interp
thread_state.current_frame thread_state.thread_id thread_state.native_thread_id
thread_state.datastack_chunk thread_state.status
interpreter_frame.size interpreter_frame.previous interpreter_frame.executable
interpreter_frame.instr_ptr interpreter_frame.localsplus interpreter_frame.owner
interpreter_frame.stackpointer interpreter_frame.tlbc_index
code_object.size code_object.filename code_object.name code_object.qualname
code_object.linetable code_object.firstlineno code_object.argcount code_object.localsplusnames
code_object.localspluskinds code_object.co_code_adaptive code_object.co_tlbc
pyobject.size pyobject.ob_type
type_object.size type_object.tp_name type_object.tp_repr type_object.tp_flags
tuple_object.size tuple_object.ob_item tuple_object.ob_size
list_object.size list_object.ob_item list_object.ob_size
set_object.size set_object.used set_object.table set_object.mask
dict_object.size dict_object.ma_keys dict_object.ma_values
float_object.size float_object.ob_fval
long_object.size long_object.lv_tag long_object.ob_digit
bytes_object.size bytes_object.ob_size bytes_object.ob_sval
unicode_object.size unicode_object.state unicode_object.length unicode_object.asciiobject_size
gc.size gc.collecting
gen_object.size gen_object.gi_name gen_object.gi_iframe gen_object.gi_frame_state
llist_node.next llist_node.prev
debugger_support.eval_breaker debugger_support.remote_debugger_support
debugger_support.remote_debugging_enabled debugger_support.debugger_pending_call
debugger_support.debugger_script_path debugger_support.debugger_script_path_size
)";

constexpr const char* kDebugFields3_15 = R"(
cookie version free_threaded
runtime_state.size runtime_state.finalizing runtime_state.interpreters_head
interpreter_state.size interpreter_state.id interpreter_state.next interpreter_state.threads_head
interpreter_state.threads_main interpreter_state.gc interpreter_state.imports_modules
interpreter_state.sysdict interpreter_state.builtins interpreter_state.ceval_gil
interpreter_state.gil_runtime_state interpreter_state.gil_runtime_state_enabled
interpreter_state.gil_runtime_state_locked interpreter_state.gil_runtime_state_holder
interpreter_state.code_object_generation interpreter_state.tlbc_generation
thread_state.size thread_state.prev thread_state.next thread_state.interp
thread_state.current_frame thread_state.base_frame thread_state.last_profiled_frame
thread_state.last_profiled_frame_seq thread_state.thread_id thread_state.native_thread_id
thread_state.datastack_chunk thread_state.status thread_state.holds_gil
thread_state.gil_requested thread_state.current_exception thread_state.exc_state
err_stackitem.exc_value
interpreter_frame.size interpreter_frame.previous interpreter_frame.executable
interpreter_frame.instr_ptr interpreter_frame.localsplus interpreter_frame.owner
interpreter_frame.stackpointer interpreter_frame.tlbc_index
code_object.size code_object.filename code_object.name code_object.qualname
code_object.linetable code_object.firstlineno code_object.argcount code_object.localsplusnames
code_object.localspluskinds code_object.co_code_adaptive code_object.co_tlbc
pyobject.size pyobject.ob_type
type_object.size type_object.tp_name type_object.tp_repr type_object.tp_flags
type_object.tp_basicsize type_object.tp_dictoffset
heap_type_object.size heap_type_object.ht_cached_keys
tuple_object.size tuple_object.ob_item tuple_object.ob_size
list_object.size list_object.ob_item list_object.ob_size
set_object.size set_object.used set_object.table set_object.mask
dict_object.size dict_object.ma_keys dict_object.ma_values
float_object.size float_object.ob_fval
long_object.size long_object.lv_tag long_object.ob_digit
bytes_object.size bytes_object.ob_size bytes_object.ob_sval
unicode_object.size unicode_object.state unicode_object.length unicode_object.asciiobject_size
unicode_object.compactunicodeobject_size
gc.size gc.collecting gc.frame gc.generation_stats_size gc.generation_stats
gen_object.size gen_object.gi_name gen_object.gi_iframe gen_object.gi_frame_state
llist_node.next llist_node.prev
debugger_support.eval_breaker debugger_support.remote_debugger_support
debugger_support.remote_debugging_enabled debugger_support.debugger_pending_call
debugger_support.debugger_script_path debugger_support.debugger_script_path_size
)";

// One _Py_DebugOffsets block, read by field name.
class DebugBlock {
 public:
  DebugBlock(const uint8_t* data, size_t size, const char* names) : data_(data), size_(size) {
    const char* p = names;
    while (*p) {
      while (*p == ' ' || *p == '\n') ++p;
      const char* b = p;
      while (*p && *p != ' ' && *p != '\n') ++p;
      if (p > b) names_.emplace_back(b, static_cast<size_t>(p - b));
    }
  }
  size_t bytes() const { return names_.size() * 8; }
  bool has(const char* name) const { return index(name) < names_.size(); }
  // The field's value (0 for a field this shape does not have).
  uint64_t operator[](const char* name) const {
    size_t i = index(name);
    if (i >= names_.size() || (i + 1) * 8 > size_) return 0;
    uint64_t v;
    std::memcpy(&v, data_ + i * 8, 8);
    return v;
  }
  int32_t i32(const char* name) const { return static_cast<int32_t>((*this)[name]); }

 private:
  size_t index(const char* name) const {
    for (size_t i = 0; i < names_.size(); ++i)
      if (names_[i] == name) return i;
    return names_.size();
  }
  const uint8_t* data_;
  size_t size_;
  std::vector<std::string> names_;
};

const char* fieldsFor(uint32_t minor) {
  return minor == 13 ? kDebugFields3_13 : minor == 14 ? kDebugFields3_14 : kDebugFields3_15;
}

}  // namespace

uint32_t debugOffsetsVersion(const uint8_t* data, size_t size) {
  if (size < 16 || std::memcmp(data, kDebugCookie, 8) != 0) return 0;
  uint64_t v;
  std::memcpy(&v, data + 8, 8);
  return static_cast<uint32_t>(v);
}

namespace {

// Every offset must lie inside its struct's stated size: a check of the block's shape, which
// matters most for a version newer than psrec knows. False, with why, when one does not.
bool blockHolds(const DebugBlock& d, bool free_threaded, std::string* why) {
  struct Check {
    const char* field;
    const char* size;
    uint64_t width;
  };
  std::vector<Check> checks = {
      {"runtime_state.interpreters_head", "runtime_state.size", 8},
      {"interpreter_state.next", "interpreter_state.size", 8},
      {"interpreter_state.threads_head", "interpreter_state.size", 8},
      {"interpreter_state.ceval_gil", "interpreter_state.size", 8},
      {"interpreter_state.imports_modules", "interpreter_state.size", 8},
      {"interpreter_state.gil_runtime_state_locked", "interpreter_state.size", 4},
      {"interpreter_state.gil_runtime_state_holder", "interpreter_state.size", 8},
      {"thread_state.prev", "thread_state.size", 8},
      {"thread_state.next", "thread_state.size", 8},
      {"thread_state.interp", "thread_state.size", 8},
      {"thread_state.current_frame", "thread_state.size", 8},
      {"thread_state.thread_id", "thread_state.size", 8},
      {"thread_state.native_thread_id", "thread_state.size", 8},
      {"thread_state.datastack_chunk", "thread_state.size", 24},
      {"thread_state.status", "thread_state.size", 4},
      {"interpreter_frame.previous", "interpreter_frame.size", 8},
      {"interpreter_frame.executable", "interpreter_frame.size", 8},
      {"interpreter_frame.instr_ptr", "interpreter_frame.size", 8},
      {"interpreter_frame.owner", "interpreter_frame.size", 1},
      {"interpreter_frame.localsplus", "interpreter_frame.size", 0},
      {"code_object.filename", "code_object.size", 8},
      {"code_object.name", "code_object.size", 8},
      {"code_object.qualname", "code_object.size", 8},
      {"code_object.linetable", "code_object.size", 8},
      {"code_object.firstlineno", "code_object.size", 4},
      {"code_object.co_code_adaptive", "code_object.size", 0},
      {"pyobject.ob_type", "pyobject.size", 8},
      {"unicode_object.state", "unicode_object.size", 4},
      {"unicode_object.length", "unicode_object.size", 8},
      {"unicode_object.asciiobject_size", "unicode_object.size", 0},
      {"bytes_object.ob_size", "bytes_object.size", 8},
      {"bytes_object.ob_sval", "bytes_object.size", 0},
      {"type_object.tp_flags", "type_object.size", 8},
      {"dict_object.ma_keys", "dict_object.size", 8},
      {"dict_object.ma_values", "dict_object.size", 8},
  };
  if (d.has("thread_state.base_frame"))
    checks.push_back({"thread_state.base_frame", "thread_state.size", 8});
  if (d.has("thread_state.last_profiled_frame_seq")) {
    checks.push_back({"thread_state.last_profiled_frame", "thread_state.size", 8});
    checks.push_back({"thread_state.last_profiled_frame_seq", "thread_state.size", 8});
  }
  if (d.has("thread_state.holds_gil")) {
    checks.push_back({"thread_state.holds_gil", "thread_state.size", 4});
    checks.push_back({"thread_state.gil_requested", "thread_state.size", 4});
  }
  if (free_threaded) {
    checks.push_back({"interpreter_frame.tlbc_index", "interpreter_frame.size", 4});
    checks.push_back({"code_object.co_tlbc", "code_object.size", 8});
  }
  for (const Check& c : checks) {
    const uint64_t off = d[c.field], sz = d[c.size];
    if (sz == 0 || sz >= (1u << 20) || off + c.width > sz) {
      *why = std::string("its _Py_DebugOffsets lacks a field psrec needs (") + c.field + ")";
      return false;
    }
  }
  return true;
}

// A field the block lacks, from the version's table (t), anchored on one the block gives in
// the same struct: a free-threaded build's larger object header, or a field inserted before
// it, moves both alike.
int32_t anchored(int32_t table_field, int32_t table_anchor, int64_t anchor) {
  return table_field == kAbsent ? kAbsent
                                : static_cast<int32_t>(table_field - table_anchor + anchor);
}

// The interpreter's and the thread state's fields.
void stateFields(const DebugBlock& d, const Layout& t, Layout& l) {
  l.runtime_interpreters_head = d.i32("runtime_state.interpreters_head");
  l.interp_next = d.i32("interpreter_state.next");
  l.interp_threads_head = d.i32("interpreter_state.threads_head");
  l.interp_modules = d.i32("interpreter_state.imports_modules");
  l.interp_ceval_gil = d.i32("interpreter_state.ceval_gil");
  // The debug block gives the GIL fields relative to the interpreter (interp->_gil.locked);
  // ceval.gil points at a struct _gil_runtime_state, so make them relative to that struct.
  const int32_t gil = d.i32("interpreter_state.gil_runtime_state");
  l.gil_locked = d.i32("interpreter_state.gil_runtime_state_locked") - gil;
  l.gil_last_holder = d.i32("interpreter_state.gil_runtime_state_holder") - gil;
  l.tstate_prev = d.i32("thread_state.prev");
  l.tstate_next = d.i32("thread_state.next");
  l.tstate_interp = d.i32("thread_state.interp");
  l.tstate_thread_id = d.i32("thread_state.thread_id");
  l.tstate_native_thread_id = d.i32("thread_state.native_thread_id");
  l.tstate_current_frame = d.i32("thread_state.current_frame");
  l.tstate_datastack_chunk = d.i32("thread_state.datastack_chunk");
  // Not in the debug block: datastack_top directly follows datastack_chunk in every 3.11+
  // PyThreadState (Include/cpython/pystate.h), and _PyStackChunk is {previous, size, top, data}.
  l.tstate_datastack_top = l.tstate_datastack_chunk + 8;
  l.tstate_status = d.i32("thread_state.status");
  l.tstate_state = anchored(t.tstate_state, t.tstate_status, l.tstate_status);
  if (d.has("thread_state.holds_gil")) {
    l.tstate_holds_gil = d.i32("thread_state.holds_gil");
    l.tstate_gil_requested = d.i32("thread_state.gil_requested");
  } else {
    // 3.14 keeps holds_gil in the thread state without naming it in the block.
    l.tstate_holds_gil = anchored(t.tstate_holds_gil, t.tstate_status, l.tstate_status);
  }
  if (d.has("thread_state.base_frame")) l.tstate_base_frame = d.i32("thread_state.base_frame");
  if (d.has("thread_state.last_profiled_frame_seq")) {
    // Both or neither: the anchor alone cannot tell its own moves from another frame taking
    // its address (see FrameAnchor).
    l.tstate_last_profiled_frame = d.i32("thread_state.last_profiled_frame");
    l.tstate_last_profiled_frame_seq = d.i32("thread_state.last_profiled_frame_seq");
  }
}

// The frames', code objects' and generators' fields.
void frameFields(const DebugBlock& d, const Layout& t, Layout& l) {
  l.chunk_previous = 0;
  l.chunk_size = 8;
  l.chunk_top = 16;
  l.chunk_data = 24;
  l.iframe_code = d.i32("interpreter_frame.executable");
  l.iframe_previous = d.i32("interpreter_frame.previous");
  l.iframe_instr = d.i32("interpreter_frame.instr_ptr");
  l.iframe_owner = d.i32("interpreter_frame.owner");
  l.iframe_size = d.i32("interpreter_frame.localsplus");
  if (l.free_threaded) l.iframe_tlbc_index = d.i32("interpreter_frame.tlbc_index");
  if (d.has("gen_object.gi_iframe") && d.has("interpreter_frame.stackpointer")) {
    l.gen_iframe = d.i32("gen_object.gi_iframe");
    l.gen_frame_state = d.i32("gen_object.gi_frame_state");
    l.iframe_stackpointer = d.i32("interpreter_frame.stackpointer");
  }
  l.code_filename = d.i32("code_object.filename");
  l.code_name = d.i32("code_object.name");
  l.code_qualname = d.i32("code_object.qualname");
  l.code_firstlineno = d.i32("code_object.firstlineno");
  l.code_linetable = d.i32("code_object.linetable");
  l.code_adaptive = d.i32("code_object.co_code_adaptive");
  l.code_stacksize = anchored(t.code_stacksize, t.code_filename, l.code_filename);
  l.code_nlocalsplus = anchored(t.code_nlocalsplus, t.code_filename, l.code_filename);
  if (l.free_threaded) l.code_tlbc = d.i32("code_object.co_tlbc");
}

// The fields of the objects read for names: strings, bytes, types, dicts, modules.
void objectFields(const DebugBlock& d, const Layout& t, Layout& l) {
  l.object_type = d.i32("pyobject.ob_type");
  l.var_size = d.i32("bytes_object.ob_size");
  l.bytes_sval = d.i32("bytes_object.ob_sval");
  l.unicode_state = d.i32("unicode_object.state");
  l.unicode_length = d.i32("unicode_object.length");
  l.unicode_ascii_size = d.i32("unicode_object.asciiobject_size");
  // PyCompactUnicodeObject = PyASCIIObject + utf8_length + utf8 (3.12+).
  l.unicode_compact_size = d.has("unicode_object.compactunicodeobject_size")
                               ? d.i32("unicode_object.compactunicodeobject_size")
                               : l.unicode_ascii_size + 16;
  // Thread names: the type and module fields the block lacks move with the object header.
  l.type_flags = d.i32("type_object.tp_flags");
  l.type_basicsize = d.has("type_object.tp_basicsize")
                         ? d.i32("type_object.tp_basicsize")
                         : anchored(t.type_basicsize, t.type_flags, l.type_flags);
  l.type_dictoffset = d.has("type_object.tp_dictoffset")
                          ? d.i32("type_object.tp_dictoffset")
                          : anchored(t.type_dictoffset, t.type_flags, l.type_flags);
  l.heaptype_cached_keys = d.has("heap_type_object.ht_cached_keys")
                               ? d.i32("heap_type_object.ht_cached_keys")
                               : anchored(t.heaptype_cached_keys, t.type_flags, l.type_flags);
  l.dict_keys = d.i32("dict_object.ma_keys");
  l.dict_values = d.i32("dict_object.ma_values");
  // Dict keys and values are no objects (no header): the same in every build.
  l.dictkeys_log2_size = t.dictkeys_log2_size;
  l.dictkeys_log2_index_bytes = t.dictkeys_log2_index_bytes;
  l.dictkeys_kind = t.dictkeys_kind;
  l.dictkeys_nentries = t.dictkeys_nentries;
  l.dictkeys_indices = t.dictkeys_indices;
  l.dictvalues_values = t.dictvalues_values;
  l.module_dict = anchored(t.module_dict, t.object_type, l.object_type);
}

}  // namespace

std::optional<Layout> layoutFromDebugOffsets(const uint8_t* data, size_t size, std::string* why,
                                             std::string* warning) {
  uint32_t version = debugOffsetsVersion(data, size);
  if (version == 0) {
    *why = "no _Py_DebugOffsets cookie";
    return std::nullopt;
  }
  const uint32_t minor = (version >> 16) & 0xFF;
  if ((version >> 24) != 3 || minor < 13) {
    *why = "its _Py_DebugOffsets states an impossible version";
    return std::nullopt;
  }
  const DebugBlock d(data, size, fieldsFor(minor));
  if (d.bytes() > size) {
    *why = "its _Py_DebugOffsets block cannot be read whole";
    return std::nullopt;
  }
  const bool free_threaded = d["free_threaded"] != 0;
  if (free_threaded && minor < 14) {
    *why = "free-threaded builds are supported from 3.14 on (3.13t keeps frames in another form)";
    return std::nullopt;
  }
  if (!blockHolds(d, free_threaded, why)) return std::nullopt;
  if (minor > kNewestMinor) {
    *warning = "Python " + std::to_string(version >> 24) + "." + std::to_string(minor) +
               " is newer than psrec knows (" + supportedRange() + "): recording it as 3." +
               std::to_string(kNewestMinor) + " from its _Py_DebugOffsets; check the stacks";
  }
  // What the block lacks comes from the version's table (the newest psrec has for a later
  // version).
  const Layout t = *builtinLayout((3u << 24) | (std::min(minor, kNewestMinor) << 16));
  Layout l;
  l.version_hex = version;
  l.free_threaded = free_threaded;
  l.frame_model = cpython::FrameModel::kInterpreterFrame;
  l.line_table = cpython::LineTable::kLocations;
  stateFields(d, t, l);
  frameFields(d, t, l);
  objectFields(d, t, l);
  cpython::finishLayout(l);
  return l;
}

std::string supportedRange() {
  return "3." + std::to_string(kOldestMinor) + " to 3." + std::to_string(kNewestMinor);
}

}  // namespace psrec::recorder
