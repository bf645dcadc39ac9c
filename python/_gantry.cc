// _gantry: the native half of the Python package `gantry` (python/gantry/).
//
// Deliberately thin: the Python layer turns state_dicts into flat lists of
// (name, dtype name, C-contiguous numpy array) and back; this file moves those
// buffers in and out of ckpt::CheckpointManager without copying them.
//  - Saving reads each array through the buffer protocol and hands its memory
//    to the manager as a TensorView, valid for the duration of the call (the
//    engine copies it into its staging pool before Save/SaveAsync return).
//  - Loading releases each tensor's aligned buffer into a `_Buffer` object that
//    frees it when the last numpy array / torch tensor viewing it goes away.
// The GIL is released around every call that touches storage, so a training
// loop's other Python threads keep running during save, wait and load.
// A non-OK Status becomes gantry.CheckpointError with `code` set to the
// status code's name ("data_loss", "not_found", ...), except InvalidArgument,
// which becomes ValueError.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gantry/ckpt/manager.h"
#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace py = pybind11;

namespace gantry::python {
namespace {

// Carries a non-OK Status to the exception translator.
struct StatusError {
  Status status;
};

void ThrowIfError(const Status& status) {
  if (!status.ok()) throw StatusError{status};
}

template <typename T>
T ValueOrThrow(Result<T> result) {
  if (!result.ok()) throw StatusError{result.status()};
  return std::move(result).value();
}

// Bytes of a loaded tensor, freed with ckpt::AlignedFree when Python drops the
// last view. Exposed as a writable 1-D byte buffer; the Python layer gives it a
// dtype and shape with numpy.frombuffer(...).reshape(...).
class Buffer {
 public:
  explicit Buffer(ckpt::AlignedBuffer buffer) : size_(buffer.size()), data_(buffer.Release()) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { ckpt::AlignedFree(data_); }

  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  size_t size_;
  void* data_;
};

// Parses the JSON text the Python layer produced (json.dumps of a dict).
Json MetadataFromText(const std::string& text) {
  if (text.empty()) return Json();
  return ValueOrThrow(ParseJson(text, "checkpoint metadata"));
}

// Holds the buffer views of the arrays being saved; the views keep the
// arrays alive and unchanged in size until destroyed (with the GIL held).
struct SaveRequest {
  std::vector<py::buffer_info> buffers;
  std::vector<ckpt::TensorView> views;
};

SaveRequest MakeSaveRequest(const py::list& arrays) {
  SaveRequest request;
  request.buffers.reserve(arrays.size());
  request.views.reserve(arrays.size());
  for (const py::handle item : arrays) {
    auto entry = item.cast<py::tuple>();
    if (entry.size() != 3) throw py::value_error("expected (name, dtype, array) tuples");
    ckpt::TensorView view;
    view.name = entry[0].cast<std::string>();
    view.dtype = ValueOrThrow(ckpt::ParseDType(entry[1].cast<std::string>()));
    py::buffer_info info = entry[2].cast<py::buffer>().request();
    // The contract with the Python layer: C-contiguous arrays only.
    py::ssize_t stride = info.itemsize;
    for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
      if (info.shape[d] > 1 && info.strides[d] != stride) {
        throw py::value_error("array '" + view.name + "' is not C-contiguous");
      }
      stride *= info.shape[d];
    }
    view.shape.assign(info.shape.begin(), info.shape.end());
    view.data = info.ptr;
    view.bytes = static_cast<size_t>(info.size) * static_cast<size_t>(info.itemsize);
    if (view.bytes != ckpt::DTypeSize(view.dtype) * static_cast<size_t>(info.size)) {
      throw py::value_error("array '" + view.name + "' has " + std::to_string(info.itemsize) +
                            "-byte elements, which does not match dtype " +
                            std::string(ckpt::DTypeName(view.dtype)));
    }
    request.views.push_back(std::move(view));
    request.buffers.push_back(std::move(info));
  }
  return request;
}

py::dict InfoToDict(const ckpt::CheckpointInfo& info) {
  py::dict d;
  d["step"] = info.step;
  d["path"] = info.path;
  d["bytes"] = info.bytes;
  d["tensors"] = info.tensors;
  d["world_size"] = info.world_size;
  d["created"] = info.created;
  d["created_unix_s"] = info.created_unix_s;
  d["metadata"] = info.metadata.is_null() ? std::string() : info.metadata.dump();
  return d;
}

// A Scheduled Event as a dict: the document's fields plus "not_before_unix"
// (seconds since the epoch, None when NotBefore is blank).
py::dict EventToDict(const ScheduledEvent& e) {
  py::dict d;
  d["event_id"] = e.event_id;
  d["event_type"] = e.event_type;
  d["resource_type"] = e.resource_type;
  d["resources"] = e.resources;
  d["event_status"] = e.event_status;
  d["not_before"] = e.not_before_text;
  d["not_before_unix"] =
      e.not_before ? py::object(py::float_(
                         std::chrono::duration<double>(e.not_before->time_since_epoch()).count()))
                   : py::object(py::none());
  d["description"] = e.description;
  d["event_source"] = e.event_source;
  d["duration_s"] = e.duration_s;
  return d;
}

class Manager {
 public:
  Manager(const std::string& root, const std::string& run, int rank, int world_size, int keep_last,
          int64_t keep_every, int64_t keep_for_s, const std::string& verify, bool fallback,
          size_t staging_bytes, size_t chunk_bytes, bool direct_io, const std::string& persist,
          const std::string& container, int persist_keep_last, int64_t persist_keep_every,
          int64_t persist_keep_for_s) {
    ckpt::Options options;
    options.root = root;
    options.run = run;
    options.rank = rank;
    options.world_size = world_size;
    options.retention.keep_last = keep_last;
    options.retention.keep_every = keep_every;
    options.retention.keep_for = std::chrono::seconds(keep_for_s);
    options.verify = ValueOrThrow(ckpt::ParseVerifyMode(verify));
    options.fallback = fallback;
    options.staging_bytes = staging_bytes;
    if (chunk_bytes != 0) options.chunk_bytes = chunk_bytes;
    options.direct_io = direct_io;
    options.persist = persist;
    options.store.container = container;
    options.persist_retention.keep_last = persist_keep_last;
    options.persist_retention.keep_every = persist_keep_every;
    options.persist_retention.keep_for = std::chrono::seconds(persist_keep_for_s);
    py::gil_scoped_release release;
    manager_ = ValueOrThrow(ckpt::CheckpointManager::Open(std::move(options)));
  }

  void Save(int64_t step, const py::list& arrays, const std::string& metadata, bool async) {
    ckpt::CheckpointManager& manager = get();
    SaveRequest request = MakeSaveRequest(arrays);
    Json meta = MetadataFromText(metadata);
    Status status;
    {
      py::gil_scoped_release release;
      status = async ? manager.SaveAsync(step, request.views, meta)
                     : manager.Save(step, request.views, meta);
    }
    ThrowIfError(status);
  }

  void Wait() {
    ckpt::CheckpointManager& manager = get();
    Status status;
    {
      py::gil_scoped_release release;
      status = manager.Wait();
    }
    ThrowIfError(status);
  }

  // (step, skipped lines), or None when no committed step verifies.
  py::object Latest() {
    ckpt::CheckpointManager& manager = get();
    Result<ckpt::LatestResult> latest = Status();
    {
      py::gil_scoped_release release;
      latest = manager.Latest();
    }
    if (!latest.ok() && latest.status().code() == StatusCode::kNotFound) return py::none();
    ckpt::LatestResult value = ValueOrThrow(std::move(latest));
    return py::make_tuple(value.step, value.skipped);
  }

  py::list List() {
    ckpt::CheckpointManager& manager = get();
    Result<std::vector<ckpt::CheckpointInfo>> infos = Status();
    {
      py::gil_scoped_release release;
      infos = manager.List();
    }
    py::list out;
    for (const auto& info : ValueOrThrow(std::move(infos))) out.append(InfoToDict(info));
    return out;
  }

  // (step, metadata JSON text, [(name, dtype name, shape, _Buffer)]).
  py::tuple Load(std::optional<int64_t> step, const std::vector<std::string>& names) {
    ckpt::CheckpointManager& manager = get();
    Result<ckpt::LoadedCheckpoint> loaded = Status();
    {
      py::gil_scoped_release release;
      loaded = manager.Load(step, names);
    }
    ckpt::LoadedCheckpoint value = ValueOrThrow(std::move(loaded));
    py::list tensors;
    for (auto& t : value.tensors) {
      tensors.append(py::make_tuple(t.name, std::string(ckpt::DTypeName(t.dtype)), t.shape,
                                    std::make_unique<Buffer>(std::move(t.data))));
    }
    return py::make_tuple(value.step, value.metadata.is_null() ? "" : value.metadata.dump(),
                          tensors);
  }

  py::dict Verify(int64_t step, const std::string& mode) {
    ckpt::CheckpointManager& manager = get();
    ckpt::VerifyMode verify_mode = ValueOrThrow(ckpt::ParseVerifyMode(mode));
    Result<ckpt::VerifyReport> report = Status();
    {
      py::gil_scoped_release release;
      report = manager.Verify(step, verify_mode);
    }
    ckpt::VerifyReport value = ValueOrThrow(std::move(report));
    py::dict d;
    d["step"] = value.step;
    d["bytes_checked"] = value.bytes_checked;
    d["chunks_checked"] = value.chunks_checked;
    return d;
  }

  std::vector<int64_t> Prune() {
    ckpt::CheckpointManager& manager = get();
    Result<std::vector<int64_t>> deleted = Status();
    {
      py::gil_scoped_release release;
      deleted = manager.Prune();
    }
    return ValueOrThrow(std::move(deleted));
  }

  std::string StepDir(int64_t step) { return get().StepDir(step); }

  void WaitForUploads() {
    ckpt::CheckpointManager& manager = get();
    Status status;
    {
      py::gil_scoped_release release;
      status = manager.WaitForUploads();
    }
    ThrowIfError(status);
  }

  py::dict UploadStatus() {
    ckpt::UploadStatus s = get().Uploads();
    py::dict d;
    d["enabled"] = s.enabled;
    d["store"] = s.store;
    d["pending"] = s.pending;
    d["last_uploaded"] =
        s.last_uploaded < 0 ? py::object(py::none()) : py::object(py::int_(s.last_uploaded));
    d["bytes_uploaded"] = s.bytes_uploaded;
    d["last_seconds"] = s.last_seconds;
    d["last_error"] = s.last_error;
    d["failed"] = s.failed;
    return d;
  }

  std::vector<int64_t> PersistedSteps() {
    ckpt::CheckpointManager& manager = get();
    Result<std::vector<int64_t>> steps = Status();
    {
      py::gil_scoped_release release;
      steps = manager.PersistedSteps();
    }
    return ValueOrThrow(std::move(steps));
  }

  // `fn(event_dict)` runs on the watcher thread with the GIL held. An
  // exception in it is reported as unraisable (printed), never lost in C++.
  void OnEviction(py::function fn, const std::string& endpoint, double interval_s,
                  bool acknowledge) {
    if (interval_s <= 0) throw py::value_error("interval must be positive seconds");
    // The function is released with the GIL held, whichever thread drops
    // the last copy of the C++ callback.
    auto holder =
        std::shared_ptr<py::function>(new py::function(std::move(fn)), [](py::function* f) {
          py::gil_scoped_acquire gil;
          delete f;
        });
    ScheduledEventsOptions options;
    options.endpoint = endpoint;
    options.interval = std::chrono::milliseconds(static_cast<int64_t>(interval_s * 1000));
    ckpt::CheckpointManager& manager = get();
    Status status;
    {
      py::gil_scoped_release release;
      status = manager.OnEviction(
          [holder](const ScheduledEvent& e) {
            py::gil_scoped_acquire gil;
            try {
              (*holder)(EventToDict(e));
            } catch (py::error_already_set& err) {
              err.discard_as_unraisable("gantry CheckpointManager.on_eviction callback");
            }
          },
          options, acknowledge);
    }
    ThrowIfError(status);
  }

  void StopEvictionWatcher() {
    ckpt::CheckpointManager& manager = get();
    py::gil_scoped_release release;
    manager.StopEvictionWatcher();
  }

  // Destroying the engine waits for an in-flight save; other Python threads
  // keep running meanwhile.
  ~Manager() {
    if (manager_) Close();
  }
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  // Waits for an in-flight save before the manager goes away, without the GIL.
  void Close() {
    py::gil_scoped_release release;
    manager_.reset();
  }

  bool closed() const { return manager_ == nullptr; }

 private:
  ckpt::CheckpointManager& get() {
    if (!manager_) throw py::value_error("CheckpointManager is closed");
    return *manager_;
  }

  std::unique_ptr<ckpt::CheckpointManager> manager_;
};

}  // namespace

// gantry.drift's functions, in _gantry_drift.cc (the submodule _gantry._drift).
void RegisterDrift(py::module_& parent);

}  // namespace gantry::python

PYBIND11_MODULE(_gantry, m) {
  using gantry::python::Buffer;
  using gantry::python::Manager;
  m.doc() = "Native part of the gantry package; use gantry.CheckpointManager instead.";

  static py::exception<gantry::python::StatusError> error(m, "CheckpointError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const gantry::python::StatusError& e) {
      // Bad arguments are a ValueError, as Python callers expect.
      if (e.status.code() == gantry::StatusCode::kInvalidArgument) {
        PyErr_SetString(PyExc_ValueError, e.status.message().c_str());
        return;
      }
      py::object instance = py::handle(error.ptr())(e.status.message());
      instance.attr("code") = std::string(gantry::StatusCodeName(e.status.code()));
      PyErr_SetObject(error.ptr(), instance.ptr());
    }
  });

  py::class_<Buffer>(m, "_Buffer", py::buffer_protocol())
      .def_buffer([](Buffer& b) {
        return py::buffer_info(b.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(b.size())}, {1}, /*readonly=*/false);
      })
      .def("__len__", &Buffer::size);

  py::class_<Manager>(m, "Manager")
      .def(py::init<const std::string&, const std::string&, int, int, int, int64_t, int64_t,
                    const std::string&, bool, size_t, size_t, bool, const std::string&,
                    const std::string&, int, int64_t, int64_t>(),
           py::arg("root"), py::arg("run"), py::arg("rank"), py::arg("world_size"),
           py::arg("keep_last"), py::arg("keep_every"), py::arg("keep_for_s"), py::arg("verify"),
           py::arg("fallback"), py::arg("staging_bytes"), py::arg("chunk_bytes"),
           py::arg("direct_io"), py::arg("persist"), py::arg("container"),
           py::arg("persist_keep_last"), py::arg("persist_keep_every"),
           py::arg("persist_keep_for_s"))
      .def("save", &Manager::Save, py::arg("step"), py::arg("arrays"), py::arg("metadata"),
           py::arg("async_"))
      .def("wait", &Manager::Wait)
      .def("latest", &Manager::Latest)
      .def("list", &Manager::List)
      .def("load", &Manager::Load, py::arg("step"), py::arg("names"))
      .def("verify", &Manager::Verify, py::arg("step"), py::arg("mode"))
      .def("prune", &Manager::Prune)
      .def("step_dir", &Manager::StepDir, py::arg("step"))
      .def("wait_for_uploads", &Manager::WaitForUploads)
      .def("upload_status", &Manager::UploadStatus)
      .def("persisted_steps", &Manager::PersistedSteps)
      .def("on_eviction", &Manager::OnEviction, py::arg("fn"), py::arg("endpoint"),
           py::arg("interval_s"), py::arg("acknowledge"))
      .def("stop_eviction_watcher", &Manager::StopEvictionWatcher)
      .def("close", &Manager::Close)
      .def_property_readonly("closed", &Manager::closed);

  gantry::python::RegisterDrift(m);
}
