// Python bindings of the analyzer's engine (psrec.analyzer._engine): conversions, GIL release
// and argument checks only. Its classes take the format's decoded sample batches
// (psrec.format._format.SampleBatch) as they are.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <vector>

#include "analyzer/native/accumulator.hpp"
#include "analyzer/native/group_sums.hpp"
#include "analyzer/native/stack_keys.hpp"
#include "analyzer/native/timeline.hpp"
#include "format/bindings/columns.hpp"

namespace nb = nanobind;
using namespace psrec::analyzer;
using psrec::bindings::asBytes;
using psrec::bindings::Column;
using psrec::bindings::sameLength;
using psrec::bindings::toVector;
using psrec::bindings::viewOf;

namespace {

AccumulatorQuery makeQuery(int64_t from_ts, int64_t to_ts,
                           const std::optional<std::vector<uint32_t>>& threads,
                           uint8_t status_mask, uint8_t status_value, bool cpu_view,
                           const std::optional<std::vector<uint32_t>>& tasks) {
  AccumulatorQuery q;
  q.cpu_view = cpu_view;
  q.from_ts = from_ts;
  q.to_ts = to_ts;
  if (threads) q.selectThreads(*threads);
  if (tasks) q.selectTasks(*tasks);
  q.status_mask = status_mask;
  q.status_value = status_value;
  return q;
}

// Rows of (node, count, value), optionally only those of one thread; the columns are read in
// place, so the caller holds them for the call.
NodeRows nodeRows(const char* what, const Column<uint32_t>& node, const Column<uint64_t>& count,
                  const Column<uint64_t>& value, uint64_t value_scale,
                  const std::optional<Column<uint32_t>>& thread, uint32_t only) {
  const size_t n = node.shape(0);
  sameLength(what, n, {count.shape(0), value.shape(0)});
  if (thread) sameLength(what, n, {thread->shape(0)});
  return NodeRows{node.data(), count.data(), value.data(), value_scale,
                  thread ? thread->data() : nullptr, only, n};
}

}  // namespace

NB_MODULE(_engine, m) {
  // The format's module binds the batches these classes read.
  nb::module_::import_("psrec.format._format");

  nb::class_<Accumulator>(m, "Accumulator")
      .def(
          "__init__",
          [](Accumulator* self, int64_t from_ts, int64_t to_ts,
             std::optional<std::vector<uint32_t>> threads, uint8_t status_mask,
             uint8_t status_value, int64_t slice_origin, int64_t slice_ticks, bool cpu_view,
             bool by_node, std::optional<std::vector<uint32_t>> tasks) {
            AccumulatorQuery q =
                makeQuery(from_ts, to_ts, threads, status_mask, status_value, cpu_view, tasks);
            q.slice_origin = slice_origin;
            q.slice_ticks = slice_ticks;
            q.by_node = by_node;
            new (self) Accumulator(std::move(q));
          },
          nb::arg("from_ts") = INT64_MIN, nb::arg("to_ts") = INT64_MAX,
          nb::arg("threads") = nb::none(), nb::arg("status_mask") = 0,
          nb::arg("status_value") = 0, nb::arg("slice_origin") = 0, nb::arg("slice_ticks") = 0,
          nb::arg("cpu_view") = false, nb::arg("by_node") = true, nb::arg("tasks") = nb::none())
      .def("add",
           [](Accumulator& a, const SampleColumns& b) {
             nb::gil_scoped_release release;
             a.add(b);
           })
      .def_prop_ro("selected", &Accumulator::selected)
      .def_prop_ro("first_ts", &Accumulator::firstTs)
      .def_prop_ro("last_ts", &Accumulator::lastTs)
      .def_prop_ro("slice_overflow", &Accumulator::sliceOverflow)
      .def("cells", [](const Accumulator& a) {
        nb::list out;
        for (auto& [k, c] : a.cells())
          out.append(nb::make_tuple(a.sliceBase() + k.slice, k.thread, k.node, c.count,
                                    c.weight, c.cpu, c.gil, c.on_cpu));
        return out;
      })
      .def("columns", [](nb::handle self) {
        // The cells as columns without a copy: slice (uint64), thread, node (uint32), count,
        // weight, cpu, gil, on_cpu (uint64), in the order cells() gives them; read-only
        // buffers into the accumulator, which they keep alive (it takes no more batches).
        const CellColumns& c = nb::cast<const Accumulator&>(self).columns();
        return nb::make_tuple(viewOf(c.slice, self), viewOf(c.thread, self),
                              viewOf(c.node, self), viewOf(c.count, self), viewOf(c.weight, self),
                              viewOf(c.cpu, self), viewOf(c.gil, self), viewOf(c.on_cpu, self));
      });

  nb::class_<Timeline>(m, "Timeline")
      .def(
          "__init__",
          [](Timeline* self, int64_t from_ts, int64_t to_ts,
             std::optional<std::vector<uint32_t>> threads, uint8_t status_mask,
             uint8_t status_value, bool cpu_view, bool split_at_gaps, uint8_t split_mask,
             std::optional<std::vector<uint32_t>> tasks) {
            AccumulatorQuery q =
                makeQuery(from_ts, to_ts, threads, status_mask, status_value, cpu_view, tasks);
            q.split_at_gaps = split_at_gaps;
            q.split_mask = split_mask;
            new (self) Timeline(std::move(q));
          },
          nb::arg("from_ts") = INT64_MIN, nb::arg("to_ts") = INT64_MAX,
          nb::arg("threads") = nb::none(), nb::arg("status_mask") = 0,
          nb::arg("status_value") = 0, nb::arg("cpu_view") = false,
          nb::arg("split_at_gaps") = false, nb::arg("split_mask") = 0,
          nb::arg("tasks") = nb::none())
      .def("add",
           [](Timeline& t, const SampleColumns& b) {
             nb::gil_scoped_release release;
             t.add(b);
           })
      .def_prop_ro("selected", &Timeline::selected)
      .def("threads", &Timeline::threads)
      .def("runs", [](const Timeline& t, uint32_t ref) {
        const TimelineRuns& r = t.runs(ref);
        return nb::make_tuple(asBytes(r.node), asBytes(r.count), asBytes(r.weight),
                              asBytes(r.cpu), asBytes(r.first_ts), asBytes(r.state));
      })
      .def("runs_view", [](nb::handle self, uint32_t ref) {
        // The same columns without a copy: read-only buffers into the timeline, which they
        // keep alive. Valid until the next add().
        const TimelineRuns& r = nb::cast<const Timeline&>(self).runs(ref);
        return nb::make_tuple(viewOf(r.node, self), viewOf(r.count, self),
                              viewOf(r.weight, self), viewOf(r.cpu, self),
                              viewOf(r.first_ts, self), viewOf(r.state, self));
      });

  nb::class_<StackKeys>(m, "StackKeys")
      .def(
          "__init__",
          [](StackKeys* self, Column<uint32_t> parents, Column<uint32_t> frames,
             Column<uint32_t> frame_key, uint32_t empty_key) {
            // The trie is read in place (the decoder's own buffers): kept alive with this.
            sameLength("StackKeys", parents.shape(0), {frames.shape(0)});
            new (self) StackKeys(parents.data(), frames.data(), parents.shape(0),
                                 toVector(frame_key), empty_key);
          },
          nb::arg("parents"), nb::arg("frames"), nb::arg("frame_key"), nb::arg("empty_key"),
          nb::keep_alive<1, 2>(), nb::keep_alive<1, 3>())
      .def_prop_ro("key_count", &StackKeys::keyCount)
      .def("keys", [](const StackKeys& sk, uint32_t node) {
        std::vector<uint32_t> out;
        sk.keys(node, out);
        return out;
      });

  // key_totals and key_edges: (keys, node, count, value, value_scale=1, thread=None, only=0),
  // the rows read in place; each returns its columns as bytes.
  auto keyWalk = [&m](const char* name, auto walk, auto columns) {
    m.def(
        name,
        [name, walk, columns](const StackKeys& sk, Column<uint32_t> node, Column<uint64_t> count,
                              Column<uint64_t> value, uint64_t value_scale,
                              std::optional<Column<uint32_t>> thread, uint32_t only) {
          NodeRows rows = nodeRows(name, node, count, value, value_scale, thread, only);
          decltype(walk(sk, rows)) out;
          {
            nb::gil_scoped_release release;
            out = walk(sk, rows);
          }
          return columns(out);
        },
        nb::arg("keys"), nb::arg("node"), nb::arg("count"), nb::arg("value"),
        nb::arg("value_scale") = 1, nb::arg("thread") = nb::none(), nb::arg("only") = 0);
  };
  keyWalk("key_totals", keyTotals, [](const KeyTotals& t) {
    return nb::make_tuple(asBytes(t.own_count), asBytes(t.own), asBytes(t.total_count),
                          asBytes(t.total));
  });
  keyWalk("key_edges", keyEdges, [](const KeyEdges& e) {
    return nb::make_tuple(asBytes(e.caller), asBytes(e.callee), asBytes(e.count),
                          asBytes(e.own), asBytes(e.cum));
  });

  m.def("slice_sums",
        [](const StackKeys& sk, Column<uint64_t> slice, Column<uint32_t> thread,
           Column<uint32_t> node, Column<uint64_t> count, Column<uint64_t> gil,
           Column<uint64_t> on_cpu, Column<uint64_t> value, uint64_t value_scale) {
          const size_t n = slice.shape(0);
          sameLength("slice_sums", n,
                     {thread.shape(0), node.shape(0), count.shape(0), gil.shape(0),
                      on_cpu.shape(0), value.shape(0)});
          CellColumnsView v{slice.data(), thread.data(), node.data(), count.data(),
                            gil.data(),  on_cpu.data(), value.data(), value_scale, n};
          SliceSums s;
          {
            nb::gil_scoped_release release;
            s = sliceSums(sk, v);
          }
          return nb::make_tuple(asBytes(s.thread_slice), asBytes(s.thread), asBytes(s.count),
                                asBytes(s.gil), asBytes(s.on_cpu), asBytes(s.key_slice),
                                asBytes(s.key), asBytes(s.value));
        });

  m.def("group_sums",
        [](const std::vector<std::tuple<Column<uint64_t>, Column<uint32_t>, Column<uint32_t>,
                                        Column<uint64_t>>>& sources,
           uint64_t factor, bool by_node) {
          std::vector<GroupSource> views;
          for (const auto& [slice, thread, node, value] : sources) {
            const size_t n = slice.shape(0);
            sameLength("group_sums", n, {thread.shape(0), node.shape(0), value.shape(0)});
            views.push_back(GroupSource{slice.data(), thread.data(), node.data(), value.data(), n});
          }
          Groups g;
          {
            nb::gil_scoped_release release;
            g = groupSums(views, factor, by_node);
          }
          return nb::make_tuple(asBytes(g.slice), asBytes(g.thread), asBytes(g.node),
                                asBytes(g.values));
        },
        nb::arg("sources"), nb::arg("factor") = 1, nb::arg("by_node") = true);

  nb::class_<SpeedscopeText>(m, "SpeedscopeText")
      .def(nb::init<const StackKeys&>(), nb::keep_alive<1, 2>())
      .def("set_thread",
           [](SpeedscopeText& t, Column<uint32_t> node, Column<uint32_t> count,
              Column<uint64_t> weight, Column<uint64_t> cpu, Column<int64_t> first_ts,
              const std::string& value, uint64_t count_mult, uint64_t scale) {
             const size_t n = node.shape(0);
             sameLength("set_thread", n,
                        {count.shape(0), weight.shape(0), cpu.shape(0), first_ts.shape(0)});
             SpeedscopeText::Value kind;
             if (value == "count") kind = SpeedscopeText::Value::kCount;
             else if (value == "cpu") kind = SpeedscopeText::Value::kCpu;
             else if (value == "weight") kind = SpeedscopeText::Value::kWeight;
             else throw nb::value_error("value must be count, cpu or weight");
             // The columns are read in place; the caller holds them for the call.
             RunsView r{node.data(), count.data(), weight.data(), cpu.data(), first_ts.data(), n};
             nb::gil_scoped_release release;
             t.setThread(r, kind, count_mult, scale);
           },
           nb::arg("node"), nb::arg("count"), nb::arg("weight"), nb::arg("cpu"),
           nb::arg("first_ts"), nb::arg("value"), nb::arg("count_mult"), nb::arg("scale"))
      .def("keys_in_order", [](const SpeedscopeText& t) { return t.keysInOrder(); })
      .def_prop_ro("kept", &SpeedscopeText::kept)
      .def_prop_ro("total", &SpeedscopeText::total)
      .def_prop_ro("samples", &SpeedscopeText::samples)
      .def_prop_ro("start", &SpeedscopeText::start)
      .def("samples_chunk",
           [](SpeedscopeText& t, size_t max_bytes) {
             std::string s;
             {
               nb::gil_scoped_release release;
               s = t.samplesChunk(max_bytes);
             }
             return nb::str(s.data(), s.size());
           })
      .def("weights_chunk", [](SpeedscopeText& t, size_t max_bytes) {
        std::string s;
        {
          nb::gil_scoped_release release;
          s = t.weightsChunk(max_bytes);
        }
        return nb::str(s.data(), s.size());
      });
}
