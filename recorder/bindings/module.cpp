// Python bindings of the native recorder: conversions, GIL release and exception translation.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "recorder/native/errors.hpp"
#include "recorder/native/python/offsets.hpp"
#include "recorder/native/python/python_process.hpp"
#include "recorder/native/sampler/sampler.hpp"
#include "recorder/native/sampler/snapshot.hpp"

namespace nb = nanobind;
using namespace psrec::recorder;

namespace {

const char* errorClassName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kNoSuchProcess: return "NoSuchProcessError";
    case ErrorCode::kPermissionDenied: return "RecorderPermissionError";
    case ErrorCode::kNotPython: return "NotPythonError";
    case ErrorCode::kUnsupportedVersion: return "UnsupportedPythonError";
    case ErrorCode::kReadFailed: return "TargetReadError";
    case ErrorCode::kInternal: break;
  }
  return "RecorderError";
}

nb::dict infoDict(const TargetInfo& i) {
  nb::dict d;
  d["pid"] = i.pid;
  d["executable"] = i.executable;
  d["binary"] = i.binary;
  d["shared_libpython"] = i.shared_libpython;
  d["version"] = i.version;
  d["version_hex"] = i.version_hex;
  d["version_source"] = i.version_source;
  d["layout_source"] = i.layout_source;
  d["layout_warning"] = i.layout_warning;
  d["free_threaded"] = i.free_threaded;
  d["gil_requested_known"] = i.gil_requested_known;
  return d;
}

nb::dict tasksDict(const TaskList& l) {
  nb::list tasks;
  for (const TaskRecord& r : l.tasks) {
    nb::dict t;
    t["id"] = r.id;
    t["name"] = r.name;
    t["state"] = taskRunName(r.state);
    t["thread_id"] = r.thread_id;
    nb::list stack;
    for (const TaskFrame& f : r.stack) {
      if (f.text < l.frame_text.size())
        stack.append(nb::make_tuple(l.frame_text[f.text].first, l.frame_text[f.text].second,
                                    f.line));
      else if (f.code)
        stack.append(nb::make_tuple(f.code->filename, f.code->name, f.line));
    }
    t["stack"] = stack;
    t["waits_on"] = r.waits < l.waits_names.size() ? l.waits_names[r.waits] : std::string();
    t["awaits"] = r.awaits();
    t["awaited_by"] = r.awaitedBy();
    tasks.append(t);
  }
  nb::dict out;
  out["asyncio"] = l.asyncio;
  out["tasks"] = tasks;
  out["error"] = l.error;
  out["found"] = l.found;
  out["past_deadline"] = l.past_deadline;
  out["before_deadline"] = l.before_deadline;
  out["incomplete"] = l.incomplete;
  return out;
}

nb::dict statsDict(const SamplerStats& s) {
  nb::dict d;
  s.forEach([&](const char* name, auto value) { d[name] = value; });
  return d;
}

}  // namespace

NB_MODULE(_recorder, m) {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const RecorderError& e) {
      nb::object errors = nb::module_::import_("psrec.recorder.errors");
      nb::object cls = errors.attr(errorClassName(e.code()));
      PyErr_SetObject(cls.ptr(), nb::str(e.what()).ptr());
    }
  });

  m.def("dump", [](int pid, bool blocking, bool native, bool tasks) {
    ProcessDump d;
    {
      nb::gil_scoped_release release;
      d = dumpProcess(pid, blocking, native, tasks);
    }
    nb::list threads;
    for (const auto& t : d.threads) {
      nb::dict td;
      td["python_tid"] = t.python_tid;
      td["native_tid"] = t.native_tid;
      td["name"] = t.name;
      td["gil_known"] = t.gil_known;
      td["gil_held"] = t.gil_held;
      td["cpu_known"] = t.cpu_known;
      td["on_cpu"] = t.on_cpu;
      td["truncated"] = t.truncated;
      td["error"] = t.error;
      nb::list frames;
      for (const auto& f : t.frames) frames.append(nb::make_tuple(f.filename, f.name, f.line));
      td["frames"] = frames;
      if (native) {
        nb::list entries;
        for (const auto& f : t.frames) entries.append(f.entry);
        td["entry"] = entries;
        td["python"] = t.python;
        nb::list nat;
        for (const auto& f : t.native)
          nat.append(
              nb::make_tuple(f.pc, f.exact, f.module, f.build_id, f.function, f.offset, f.eval));
        td["native"] = nat;
        td["native_end"] = t.native_end;
        td["native_error"] = t.native_error;
      }
      threads.append(td);
    }
    nb::dict out;
    out["info"] = infoDict(d.info);
    out["threads"] = threads;
    if (native) out["native_replaced"] = d.native_replaced;
    if (tasks) out["tasks"] = tasksDict(d.tasks);
    return out;
  }, nb::arg("pid"), nb::arg("blocking") = false, nb::arg("native") = false,
     nb::arg("tasks") = false);

  m.def("inspect", [](int pid) {
    std::unique_ptr<PythonProcess> p;
    {
      nb::gil_scoped_release release;
      p = PythonProcess::attach(pid);
    }
    nb::dict d = infoDict(p->info());
    d["initialized"] = p->mainInterpreter() != 0;
    nb::dict layout;
    psrec::cpython::forEachOffset(p->layout(), [&](const char* name, int32_t v) {
      if (v != psrec::cpython::kAbsent) layout[name] = v;
    });
    d["layout"] = layout;
    return d;
  }, nb::arg("pid"));

  // The versions psrec records (recorder/native/python/offsets.hpp).
  m.attr("OLDEST_MINOR") = kOldestMinor;
  m.attr("NEWEST_MINOR") = kNewestMinor;
  m.attr("FREE_THREADED_FROM_MINOR") = kFreeThreadedFromMinor;
  m.attr("SUPPORTED_RANGE") = supportedRange();

  m.def("command_line", [](int pid) { return processCommandLine(pid); });
  m.def("prepare_switch_events", &prepareSwitchEvents);

  nb::class_<Sampler>(m, "Sampler")
      .def("__init__",
           [](Sampler* self, int pid, uint64_t interval_ns, uint64_t created_mono_ns,
              bool blocking, bool subprocesses, bool realtime, bool cpu_switches,
              bool launched, uint32_t max_threads, bool native, bool frame_cache,
              bool tasks, uint64_t task_interval_ns, uint64_t window_ticks) {
             SamplerConfig c;
             c.pid = pid;
             c.interval_ns = interval_ns;
             c.created_mono_ns = created_mono_ns;
             c.blocking = blocking;
             c.subprocesses = subprocesses;
             c.realtime = realtime;
             c.cpu_switches = cpu_switches;
             c.launched = launched;
             c.max_threads = max_threads;
             c.native = native;
             c.frame_cache = frame_cache;
             c.tasks = tasks;
             c.task_interval_ns = task_interval_ns;
             c.window_ticks = window_ticks;
             nb::gil_scoped_release release;
             new (self) Sampler(c);
           },
           nb::arg("pid"), nb::arg("interval_ns"), nb::arg("created_mono_ns"),
           nb::arg("blocking") = false, nb::arg("subprocesses") = false,
           nb::arg("realtime") = false, nb::arg("cpu_switches") = true,
           nb::arg("launched") = false, nb::arg("max_threads") = psrec::format::kMaxThreadRef,
           nb::arg("native") = false, nb::arg("frame_cache") = true,
           nb::arg("tasks") = true, nb::arg("task_interval_ns") = 0,
           nb::arg("window_ticks") = 0)
      .def("target_info",
           [](Sampler& s) -> nb::object {
             auto info = s.targetInfo();
             if (!info) return nb::none();
             return infoDict(*info);
           })
      .def("state",
           [](Sampler& s) {
             SamplerState st = s.state();
             nb::dict d;
             d["python"] = st.python;
             d["root_python"] = st.root_python;
             d["root_error"] = st.root_error;
             d["root_error_class"] = errorClassName(st.root_error_code);
             d["stop_reason"] = st.stop_reason;
             d["threads_full"] = st.threads_full;
             d["native_refusal"] = st.native_refusal;
             d["capture_refusal"] = st.capture_refusal;
             d["native_replaced"] = st.native_replaced;
             return d;
           })
      .def("start", &Sampler::start)
      .def("wait", &Sampler::wait, nb::arg("timeout_s"), nb::call_guard<nb::gil_scoped_release>())
      .def("stop", &Sampler::stop, nb::call_guard<nb::gil_scoped_release>())
      .def("finish", &Sampler::finish, nb::arg("exit_code") = nb::none(),
           nb::call_guard<nb::gil_scoped_release>())
      .def("stats", [](Sampler& s) { return statsDict(s.stats()); })
      .def("pop_chunk",
           [](Sampler& s, int timeout_ms) -> nb::object {
             std::optional<psrec::format::SealedChunk> c;
             SamplerStats at_seal;
             {
               nb::gil_scoped_release release;
               c = s.popChunk(timeout_ms, &at_seal);
             }
             if (!c) return nb::none();
             return nb::make_tuple(nb::bytes(c->defs.data(), c->defs.size()),
                                   nb::bytes(c->data.data(), c->data.size()), c->first_ts,
                                   c->last_ts, c->passes, c->samples, c->epoch,
                                   statsDict(at_seal));
           },
           nb::arg("timeout_ms"))
      .def("new_epoch", &Sampler::newEpoch)
      .def("seal_soon", &Sampler::sealSoon)
      .def("chunks_done", &Sampler::chunksDone);
}
