// Python bindings of the .psr codec: conversions, GIL release and exception translation only.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>
#include <nanobind/stl/optional.h>
#include <nanobind/ndarray.h>

#include <cstring>
#include <optional>
#include <type_traits>

#include "format/bindings/columns.hpp"
#include "format/native/decoder.hpp"
#include "format/native/demangle.hpp"
#include "format/native/encoder.hpp"

namespace nb = nanobind;
using namespace psrec::format;
using psrec::bindings::asBytes;
using psrec::bindings::viewOf;

NB_MODULE(_format, m) {
  nb::exception<DecodeError> decode_error(m, "DecodeError");
  nb::exception<BudgetError>(m, "BudgetError", decode_error);

  nb::class_<Encoder>(m, "Encoder")
      .def(nb::init<size_t, uint64_t, uint32_t>(), nb::arg("chunk_bytes") = 1 << 20,
           nb::arg("max_span_ticks") = 1000000, nb::arg("max_threads") = kMaxThreadRef)
      .def_prop_ro("threads_full", &Encoder::threadsFull)
      .def("intern_string", &Encoder::internString)
      .def("intern_function", &Encoder::internFunction)
      .def("intern_native_function", &Encoder::internNativeFunction)
      .def("intern_frame", &Encoder::internFrame)
      .def("add_thread", &Encoder::addThread)
      .def("thread_exit", &Encoder::threadExit)
      .def("thread_rename", &Encoder::threadRename)
      .def("begin_pass", &Encoder::beginPass)
      .def("sample",
           [](Encoder& e, uint32_t ref, const std::vector<uint32_t>& frames, uint8_t status,
              std::optional<uint64_t> cpu) {
             e.sample(ref, frames.data(), frames.size(), status, cpu.has_value(),
                      cpu.value_or(0));
           },
           nb::arg("ref"), nb::arg("frames"), nb::arg("status"), nb::arg("cpu") = nb::none())
      .def("sample_error", &Encoder::sampleError)
      .def("sample_task", &Encoder::sampleTask)
      .def("define_task", &Encoder::defineTask)
      .def("end_pass", &Encoder::endPass)
      .def("begin_task_snapshot", &Encoder::beginTaskSnapshot)
      .def("task_state",
           [](Encoder& e, uint32_t task, uint32_t state, std::string_view waits,
              const std::vector<uint32_t>& frames, const std::vector<uint32_t>& awaits) {
             e.taskState(task, state, waits, frames.data(), frames.size(), awaits.data(),
                         awaits.size());
           })
      .def("end_task_snapshot", &Encoder::endTaskSnapshot)
      .def("end_tasks", &Encoder::endTasks)
      .def("pass_errors", &Encoder::passErrors)
      .def("marker", &Encoder::marker)
      .def("process_start", &Encoder::processStart)
      .def("process_exit", &Encoder::processExit)
      .def("chunk_due", &Encoder::chunkDue)
      .def("empty", &Encoder::empty)
      .def("seal",
           [](Encoder& e) {
             SealedChunk c = e.seal();
             return nb::make_tuple(nb::bytes(c.defs.data(), c.defs.size()),
                                   nb::bytes(c.data.data(), c.data.size()), c.first_ts,
                                   c.last_ts, c.passes, c.samples, c.epoch);
           })
      .def("new_epoch", &Encoder::newEpoch)
      .def_prop_ro("epoch", &Encoder::epoch)
      .def("forget_task", &Encoder::forgetTask)
      .def_prop_ro("stats", [](const Encoder& e) {
        const EncoderStats& s = e.stats();
        nb::dict d;
        d["passes"] = s.passes;
        d["samples"] = s.samples;
        d["sample_errors"] = s.sample_errors;
        d["chunks"] = s.chunks;
        d["truncated_stacks"] = s.truncated_stacks;
        return d;
      });

  m.def("decode_defs", [](const nb::bytes& payload, uint64_t max_records) {
    Definitions d;
    {
      nb::gil_scoped_release release;
      d = Decoder::decodeDefs(reinterpret_cast<const uint8_t*>(payload.c_str()), payload.size(),
                              max_records);
    }
    nb::list strings, functions, frames, threads, processes, tasks;
    for (auto& s : d.strings)
      // Strings come from the target's memory and may not be valid UTF-8: replace bad bytes
      // (as the reference decoder does) rather than fail the whole chunk.
      strings.append(nb::make_tuple(
          s.id, nb::steal<nb::str>(PyUnicode_DecodeUTF8(
                    s.value.data(), static_cast<Py_ssize_t>(s.value.size()), "replace"))));
    for (auto& f : d.functions)
      functions.append(
          nb::make_tuple(f.id, f.filename, f.name, f.first_line, f.kind, f.build_id, f.address));
    for (auto& f : d.frames) frames.append(nb::make_tuple(f.id, f.function, f.line));
    for (auto& t : d.threads)
      threads.append(nb::make_tuple(t.ref, t.pid, t.python_tid, t.os_tid, t.name, t.start_ts));
    for (auto& p : d.processes)
      processes.append(nb::make_tuple(p.pid, p.parent_pid, p.command, p.start_ts));
    for (auto& t : d.tasks)
      tasks.append(
          nb::make_tuple(t.id, t.pid, t.address, t.name, t.coroutine, t.start_ts));
    return nb::make_tuple(strings, functions, frames, threads, processes, d.unknown_records,
                          tasks);
  }, nb::arg("payload"), nb::arg("max_records") = UINT64_MAX);

  m.def("demangle", [](const std::vector<std::string>& symbols) {
    std::vector<std::string> out;
    out.reserve(symbols.size());
    for (const auto& s : symbols) out.push_back(psrec::format::demangle(s));
    return out;
  }, nb::arg("symbols"));

  m.def("thread_renames", [](const nb::bytes& payload, uint64_t max_events, bool exits) {
    std::vector<Event> events;
    {
      nb::gil_scoped_release release;
      events = Decoder::threadRenames(reinterpret_cast<const uint8_t*>(payload.c_str()),
                                      payload.size(), max_events, exits);
    }
    nb::list out;
    for (auto& e : events) out.append(nb::make_tuple(e.type, e.ts, e.a, e.b, e.c));
    return out;
  }, nb::arg("payload"), nb::arg("max_events") = UINT64_MAX, nb::arg("exits") = false);

  // The decoded samples of a chunk. The analyzer's engine (psrec.analyzer._engine) takes
  // these objects as they are: nanobind shares the bound type between the two modules.
  // Each column as a property of its raw bytes, and SAMPLE_COLUMNS: (name, typecode) in order.
  auto batch = nb::class_<SampleColumns>(m, "SampleBatch")
                   .def(nb::init<>())
                   .def("__len__", [](const SampleColumns& c) { return c.size(); })
                   .def("clear", [](SampleColumns& c) { c.clear(); });
  nb::list columns;
#define PSREC_BIND_COLUMN(name, type, typecode)                                    \
  batch.def_prop_ro(#name, [](const SampleColumns& c) { return asBytes(c.name); }); \
  columns.append(nb::make_tuple(#name, typecode));
  PSREC_SAMPLE_COLUMNS(PSREC_BIND_COLUMN)
#undef PSREC_BIND_COLUMN
  // Other stack nodes for the samples (the analyzer's logical stacks), one per sample.
  batch.def("set_node", [](SampleColumns& c, const psrec::bindings::Column<uint32_t>& node) {
    psrec::bindings::sameLength("set_node", c.size(), {node.shape(0)});
    c.node = psrec::bindings::toVector(node);
  }, nb::arg("node"));
  batch.def("shift", [](SampleColumns& c, int64_t ts_delta, uint32_t thread_offset,
                        const psrec::bindings::Column<uint32_t>& node_map, uint32_t task_offset) {
    if (!c.shift(ts_delta, thread_offset, node_map.data(), node_map.shape(0), task_offset))
      throw nb::index_error("a sample's stack node is past the node map");
  }, nb::arg("ts_delta"), nb::arg("thread_offset"), nb::arg("node_map"), nb::arg("task_offset"));
  m.attr("SAMPLE_COLUMNS") = nb::tuple(columns);

  nb::class_<Decoder>(m, "Decoder")
      .def(nb::init<uint32_t, uint32_t>(), nb::arg("weight_cap_ticks"),
           nb::arg("first_weight_ticks"))
      .def("decode_data",
           [](Decoder& d, const nb::bytes& payload, SampleColumns& batch, uint64_t max_events,
              uint64_t max_nodes, uint64_t max_threads) {
             std::vector<Event> events;
             ChunkSummary s;
             {
               nb::gil_scoped_release release;
               s = d.decodeData(reinterpret_cast<const uint8_t*>(payload.c_str()),
                                payload.size(), batch, events, max_events,
                                Budgets{max_nodes, max_threads});
             }
             nb::list ev;
             for (auto& e : events) ev.append(nb::make_tuple(e.type, e.ts, e.a, e.b, e.c));
             nb::dict sum;
             sum["seq"] = s.seq;
             sum["passes"] = s.passes;
             sum["samples"] = s.samples;
             sum["errors"] = s.errors;
             sum["unknown_records"] = s.unknown_records;
             sum["first_ts"] = s.first_ts;
             sum["last_ts"] = s.last_ts;
             return nb::make_tuple(ev, sum);
           },
           nb::arg("payload"), nb::arg("batch"), nb::arg("max_events") = UINT64_MAX,
           nb::arg("max_nodes") = UINT64_MAX, nb::arg("max_threads") = UINT64_MAX)
      .def("trie_size", [](Decoder& d) { return d.trie().size(); })
      .def_prop_ro("threads_seen", &Decoder::threadsSeen)
      // The trie's columns without a copy: read-only buffers into the decoder, which they keep
      // alive. Valid until the decoder decodes again (its trie may grow and move).
      .def("trie_parents",
           [](nb::handle self) { return viewOf(nb::cast<Decoder&>(self).trie().parents(), self); })
      .def("trie_frames",
           [](nb::handle self) { return viewOf(nb::cast<Decoder&>(self).trie().frames(), self); });

}
