#include "recorder/native/offsets.hpp"

#include <algorithm>
#include <cstring>

#include "recorder/native/cpython/v3_10.hpp"
#include "recorder/native/cpython/v3_11.hpp"
#include "recorder/native/cpython/v3_12.hpp"
#include "recorder/native/cpython/v3_13.hpp"
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
                       l.tstate_current_frame, l.tstate_datastack_chunk, l.tstate_datastack_top},
                      8);
  l.frame_size = end({l.frame_back, l.frame_code, l.frame_lasti}, 8);
  if (l.iframe_size == 0) l.iframe_size = end({l.iframe_code, l.iframe_previous, l.iframe_instr}, 8);
  l.code_size = end({l.object_type, l.var_size, l.code_filename, l.code_name, l.code_qualname,
                     l.code_firstlineno, l.code_linetable, l.code_stacksize, l.code_nlocalsplus},
                    8);
  const uint32_t minor = (l.version_hex >> 16) & 0xFF;
  if (l.frame_model == FrameModel::kInterpreterFrame) l.call_sites = callSitesFor(minor);
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
    default: return std::nullopt;
  }
}

namespace {

// Field positions (in uint64 units) of the 3.13 _Py_DebugOffsets
// (Include/internal/pycore_runtime.h, struct _Py_DebugOffsets).
enum DebugField : size_t {
  kCookie = 0, kVersion = 1, kFreeThreaded = 2,
  kRuntimeSize = 3, kRuntimeFinalizing = 4, kRuntimeInterpretersHead = 5,
  kInterpSize = 6, kInterpId = 7, kInterpNext = 8, kInterpThreadsHead = 9, kInterpGc = 10,
  kInterpModules = 11, kInterpSysdict = 12, kInterpBuiltins = 13, kInterpCevalGil = 14,
  kInterpGilState = 15, kInterpGilEnabled = 16, kInterpGilLocked = 17, kInterpGilHolder = 18,
  kTstateSize = 19, kTstatePrev = 20, kTstateNext = 21, kTstateInterp = 22,
  kTstateCurrentFrame = 23, kTstateThreadId = 24, kTstateNativeThreadId = 25,
  kTstateDatastackChunk = 26, kTstateStatus = 27,
  kFrameSize = 28, kFramePrevious = 29, kFrameExecutable = 30, kFrameInstrPtr = 31,
  kFrameLocalsplus = 32, kFrameOwner = 33,
  kCodeSize = 34, kCodeFilename = 35, kCodeName = 36, kCodeQualname = 37, kCodeLinetable = 38,
  kCodeFirstlineno = 39, kCodeArgcount = 40, kCodeLocalsplusnames = 41,
  kCodeLocalspluskinds = 42, kCodeAdaptive = 43,
  kObjectSize = 44, kObjectType = 45,
  kTypeSize = 46, kTypeName = 47, kTypeRepr = 48, kTypeFlags = 49,
  kDictSize = 56, kDictKeys = 57, kDictValues = 58,
  kBytesSize = 64, kBytesObSize = 65, kBytesSval = 66,
  kUnicodeSize = 67, kUnicodeState = 68, kUnicodeLength = 69, kUnicodeAsciiSize = 70,
};

uint64_t field(const uint8_t* data, size_t i) {
  uint64_t v;
  std::memcpy(&v, data + i * 8, 8);
  return v;
}

}  // namespace

uint32_t debugOffsetsVersion(const uint8_t* data, size_t size) {
  if (size < 16 || std::memcmp(data, kDebugCookie, 8) != 0) return 0;
  return static_cast<uint32_t>(field(data, kVersion));
}

std::optional<Layout> layoutFromDebugOffsets(const uint8_t* data, size_t size, std::string* why) {
  uint32_t version = debugOffsetsVersion(data, size);
  if (version == 0 || size < kDebugOffsetsSize) {
    *why = "no _Py_DebugOffsets cookie";
    return std::nullopt;
  }
  uint32_t minor = (version >> 16) & 0xFF;
  if ((version >> 24) != 3 || minor != 13) {
    // 3.14 reshaped the struct (fields were inserted): parsing it as 3.13 would be wrong.
    *why = "its _Py_DebugOffsets layout is not one psrec knows";
    return std::nullopt;
  }
  if (field(data, kFreeThreaded) != 0) {
    *why = "free-threaded builds are not supported";
    return std::nullopt;
  }
  // Every offset must lie inside its struct's stated size: a sanity check on the block.
  auto within = [&](size_t f, size_t size_field, size_t width) {
    uint64_t off = field(data, f), sz = field(data, size_field);
    return sz > 0 && sz < (1u << 20) && off + width <= sz;
  };
  const size_t checks[][3] = {
      {kRuntimeInterpretersHead, kRuntimeSize, 8}, {kInterpNext, kInterpSize, 8},
      {kInterpThreadsHead, kInterpSize, 8},        {kInterpCevalGil, kInterpSize, 8},
      {kTstatePrev, kTstateSize, 8},               {kTstateNext, kTstateSize, 8},
      {kTstateCurrentFrame, kTstateSize, 8},
      {kTstateThreadId, kTstateSize, 8},           {kTstateNativeThreadId, kTstateSize, 8},
      {kTstateDatastackChunk, kTstateSize, 24},    {kFramePrevious, kFrameSize, 8},
      {kFrameExecutable, kFrameSize, 8},           {kFrameInstrPtr, kFrameSize, 8},
      {kFrameOwner, kFrameSize, 1},                {kCodeFilename, kCodeSize, 8},
      {kCodeName, kCodeSize, 8},                   {kCodeQualname, kCodeSize, 8},
      {kCodeLinetable, kCodeSize, 8},              {kCodeFirstlineno, kCodeSize, 4},
      {kCodeAdaptive, kCodeSize, 0},               {kUnicodeState, kUnicodeSize, 4},
      {kUnicodeLength, kUnicodeSize, 8},           {kBytesSval, kBytesSize, 0},
      {kTypeFlags, kTypeSize, 8},                  {kDictKeys, kDictSize, 8},
      {kDictValues, kDictSize, 8},
  };
  for (const auto& c : checks) {
    if (!within(c[0], c[1], c[2])) {
      *why = "its _Py_DebugOffsets block is inconsistent";
      return std::nullopt;
    }
  }
  auto i32 = [&](size_t f) { return static_cast<int32_t>(field(data, f)); };
  Layout l;
  l.version_hex = version;
  l.frame_model = cpython::FrameModel::kInterpreterFrame;
  l.line_table = cpython::LineTable::kLocations;
  l.has_cstack_owner = true;
  l.runtime_interpreters_head = i32(kRuntimeInterpretersHead);
  l.interp_next = i32(kInterpNext);
  l.interp_threads_head = i32(kInterpThreadsHead);
  l.interp_modules = i32(kInterpModules);
  l.interp_ceval_gil = i32(kInterpCevalGil);
  // The debug block gives the GIL fields relative to the interpreter (interp->_gil.locked);
  // ceval.gil points at a struct _gil_runtime_state, so make them relative to that struct.
  l.gil_locked = i32(kInterpGilLocked) - i32(kInterpGilState);
  l.gil_last_holder = i32(kInterpGilHolder) - i32(kInterpGilState);
  l.tstate_prev = i32(kTstatePrev);
  l.tstate_next = i32(kTstateNext);
  l.tstate_interp = i32(kTstateInterp);
  l.tstate_thread_id = i32(kTstateThreadId);
  l.tstate_native_thread_id = i32(kTstateNativeThreadId);
  l.tstate_current_frame = i32(kTstateCurrentFrame);
  l.tstate_datastack_chunk = i32(kTstateDatastackChunk);
  // Not in the debug block: datastack_top directly follows datastack_chunk in every 3.11+
  // PyThreadState (Include/cpython/pystate.h), and _PyStackChunk is {previous, size, top, data}.
  l.tstate_datastack_top = l.tstate_datastack_chunk + 8;
  l.chunk_previous = 0;
  l.chunk_size = 8;
  l.chunk_top = 16;
  l.chunk_data = 24;
  l.iframe_code = i32(kFrameExecutable);
  l.iframe_previous = i32(kFramePrevious);
  l.iframe_instr = i32(kFrameInstrPtr);
  l.iframe_owner = i32(kFrameOwner);
  l.iframe_size = i32(kFrameLocalsplus);
  l.code_filename = i32(kCodeFilename);
  l.code_name = i32(kCodeName);
  l.code_qualname = i32(kCodeQualname);
  l.code_firstlineno = i32(kCodeFirstlineno);
  l.code_linetable = i32(kCodeLinetable);
  l.code_adaptive = i32(kCodeAdaptive);
  l.object_type = i32(kObjectType);
  l.var_size = i32(kBytesObSize);
  l.bytes_sval = i32(kBytesSval);
  l.unicode_state = i32(kUnicodeState);
  l.unicode_length = i32(kUnicodeLength);
  l.unicode_ascii_size = i32(kUnicodeAsciiSize);
  // PyCompactUnicodeObject = PyASCIIObject + utf8_length + utf8 (3.12+).
  l.unicode_compact_size = l.unicode_ascii_size + 16;
  // Thread names: the debug block has tp_flags, ma_keys and ma_values; the rest of the object
  // model is taken from 3.13 (if a later version moved it, threads keep their OS names).
  const Layout base = cpython::v3_13::layout();
  l.type_basicsize = base.type_basicsize;
  l.type_flags = i32(kTypeFlags);
  l.type_dictoffset = base.type_dictoffset;
  l.heaptype_cached_keys = base.heaptype_cached_keys;
  l.dict_keys = i32(kDictKeys);
  l.dict_values = i32(kDictValues);
  l.dictkeys_log2_size = base.dictkeys_log2_size;
  l.dictkeys_log2_index_bytes = base.dictkeys_log2_index_bytes;
  l.dictkeys_kind = base.dictkeys_kind;
  l.dictkeys_nentries = base.dictkeys_nentries;
  l.dictkeys_indices = base.dictkeys_indices;
  l.dictvalues_values = base.dictvalues_values;
  l.module_dict = base.module_dict;
  cpython::finishLayout(l);
  return l;
}

}  // namespace psrec::recorder
