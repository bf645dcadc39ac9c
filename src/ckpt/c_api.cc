// The C API (include/gantry/ckpt.h): a thin shell over CheckpointManager
// that turns Status into codes plus a thread-local message.
#include <memory>
#include <string>
#include <vector>

#include "gantry/ckpt.h"
#include "gantry/ckpt/manager.h"

struct gantry_ckpt_manager {
  std::unique_ptr<gantry::ckpt::CheckpointManager> impl;
};

struct gantry_ckpt_loaded {
  gantry::ckpt::LoadedCheckpoint data;
  std::string metadata;
};

namespace {

using gantry::Status;
using gantry::StatusCode;

thread_local std::string g_last_error;

gantry_ckpt_status Report(const Status& s) {
  if (s.ok()) return GANTRY_CKPT_OK;
  g_last_error = s.ToString();
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      return GANTRY_CKPT_INVALID_ARGUMENT;
    case StatusCode::kNotFound:
      return GANTRY_CKPT_NOT_FOUND;
    case StatusCode::kAlreadyExists:
      return GANTRY_CKPT_ALREADY_EXISTS;
    case StatusCode::kDataLoss:
      return GANTRY_CKPT_DATA_LOSS;
    case StatusCode::kIoError:
      return GANTRY_CKPT_IO_ERROR;
    case StatusCode::kFailedPrecondition:
      return GANTRY_CKPT_FAILED_PRECONDITION;
    case StatusCode::kResourceExhausted:
      return GANTRY_CKPT_RESOURCE_EXHAUSTED;
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      return GANTRY_CKPT_UNAVAILABLE;
    default:
      return GANTRY_CKPT_INTERNAL;
  }
}

gantry_ckpt_status BadArg(const char* what) {
  g_last_error = std::string("invalid_argument: ") + what;
  return GANTRY_CKPT_INVALID_ARGUMENT;
}

gantry::Result<std::vector<gantry::ckpt::TensorView>> Views(const gantry_ckpt_tensor* tensors,
                                                            size_t count) {
  std::vector<gantry::ckpt::TensorView> views;
  for (size_t i = 0; i < count; ++i) {
    const gantry_ckpt_tensor& t = tensors[i];
    if (t.name == nullptr || (t.ndim > 0 && t.shape == nullptr) || t.dtype < GANTRY_DTYPE_BOOL ||
        t.dtype > GANTRY_DTYPE_F8_E5M2) {
      return gantry::InvalidArgument("tensor " + std::to_string(i) +
                                     " has a null name or shape, or an unknown dtype");
    }
    views.push_back({t.name, static_cast<gantry::ckpt::DType>(t.dtype),
                     std::vector<int64_t>(t.shape, t.shape + t.ndim), t.data, t.bytes});
  }
  return views;
}

gantry::Result<gantry::Json> Metadata(const char* json) {
  if (json == nullptr) return gantry::Json::object();
  return gantry::ParseJson(json, "metadata_json");
}

// Runs `fn` and turns any exception into a status: no exception may cross
// the C boundary (a C caller cannot catch it; it would terminate).
template <typename Fn>
gantry_ckpt_status Guard(Fn&& fn) noexcept {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return Report(gantry::ResourceExhausted("out of memory in the gantry checkpoint C API"));
  } catch (const std::exception& e) {
    return Report(gantry::Internal(
        std::string("unexpected error in the gantry checkpoint C API: ") + e.what()));
  } catch (...) {
    return Report(gantry::Internal("unexpected error in the gantry checkpoint C API"));
  }
}

template <typename SaveFn>
gantry_ckpt_status DoSave(gantry_ckpt_manager* m, const gantry_ckpt_tensor* tensors, size_t count,
                          const char* metadata_json, SaveFn fn) {
  if (m == nullptr || (count > 0 && tensors == nullptr)) return BadArg("null manager or tensors");
  auto views = Views(tensors, count);
  if (!views.ok()) return Report(views.status());
  auto meta = Metadata(metadata_json);
  if (!meta.ok()) return Report(meta.status());
  return Report(fn(*views, *meta));
}

}  // namespace

extern "C" {

const char* gantry_ckpt_last_error(void) { return g_last_error.c_str(); }  // never throws

gantry_ckpt_status gantry_ckpt_open(const char* root, const char* run, int rank, int world_size,
                                    int keep_last, const char* verify, gantry_ckpt_manager** out) {
  return gantry_ckpt_open_persist(root, run, rank, world_size, keep_last, verify, nullptr, 0, out);
}

gantry_ckpt_status gantry_ckpt_open_persist(const char* root, const char* run, int rank,
                                            int world_size, int keep_last, const char* verify,
                                            const char* persist, int persist_keep_last,
                                            gantry_ckpt_manager** out) {
  return Guard([&]() -> gantry_ckpt_status {
    if (root == nullptr || out == nullptr) return BadArg("root and out must not be null");
    gantry::ckpt::Options o;
    o.root = root;
    if (run != nullptr) o.run = run;
    o.rank = rank;
    o.world_size = world_size;
    o.retention.keep_last = keep_last;
    if (persist != nullptr) o.persist = persist;
    o.persist_retention.keep_last = persist_keep_last;
    if (verify != nullptr) {
      auto mode = gantry::ckpt::ParseVerifyMode(verify);
      if (!mode.ok()) return Report(mode.status());
      o.verify = *mode;
    }
    auto mgr = gantry::ckpt::CheckpointManager::Open(std::move(o));
    if (!mgr.ok()) return Report(mgr.status());
    *out = new gantry_ckpt_manager{std::move(*mgr)};
    return GANTRY_CKPT_OK;
  });
}

gantry_ckpt_status gantry_ckpt_wait_uploads(gantry_ckpt_manager* m) {
  return Guard([&]() -> gantry_ckpt_status {
    if (m == nullptr) return BadArg("null manager");
    return Report(m->impl->WaitForUploads());
  });
}

gantry_ckpt_status gantry_ckpt_on_eviction(gantry_ckpt_manager* m, const char* endpoint,
                                           gantry_ckpt_eviction_fn fn, void* user) {
  return Guard([&]() -> gantry_ckpt_status {
    if (m == nullptr) return BadArg("null manager");
    if (fn == nullptr) {
      m->impl->StopEvictionWatcher();
      return GANTRY_CKPT_OK;
    }
    gantry::ScheduledEventsOptions options;
    if (endpoint != nullptr) options.endpoint = endpoint;
    return Report(m->impl->OnEviction(
        [fn, user](const gantry::ScheduledEvent& e) {
          // No exception may reach the C callback's caller (the watcher thread).
          std::string text;
          try {
            text = e.ToJson().dump();
          } catch (const std::exception&) {
            text = "{}";
          }
          fn(user, text.c_str());
        },
        options));
  });
}

void gantry_ckpt_close(gantry_ckpt_manager* m) {
  (void)Guard([&] {
    delete m;
    return GANTRY_CKPT_OK;
  });
}

gantry_ckpt_status gantry_ckpt_save(gantry_ckpt_manager* m, int64_t step,
                                    const gantry_ckpt_tensor* tensors, size_t count,
                                    const char* metadata_json) {
  return Guard([&]() -> gantry_ckpt_status {
    return DoSave(m, tensors, count, metadata_json, [&](const auto& views, const auto& meta) {
      return m->impl->Save(step, views, meta);
    });
  });
}

gantry_ckpt_status gantry_ckpt_save_async(gantry_ckpt_manager* m, int64_t step,
                                          const gantry_ckpt_tensor* tensors, size_t count,
                                          const char* metadata_json) {
  return Guard([&]() -> gantry_ckpt_status {
    return DoSave(m, tensors, count, metadata_json, [&](const auto& views, const auto& meta) {
      return m->impl->SaveAsync(step, views, meta);
    });
  });
}

gantry_ckpt_status gantry_ckpt_wait(gantry_ckpt_manager* m) {
  return Guard([&]() -> gantry_ckpt_status {
    if (m == nullptr) return BadArg("null manager");
    return Report(m->impl->Wait());
  });
}

gantry_ckpt_status gantry_ckpt_latest(gantry_ckpt_manager* m, int64_t* step) {
  return Guard([&]() -> gantry_ckpt_status {
    if (m == nullptr || step == nullptr) return BadArg("null manager or step");
    auto r = m->impl->Latest();
    if (!r.ok()) return Report(r.status());
    *step = r->step;
    return GANTRY_CKPT_OK;
  });
}

gantry_ckpt_status gantry_ckpt_load(gantry_ckpt_manager* m, int64_t step, const char* const* names,
                                    size_t name_count, gantry_ckpt_loaded** out) {
  return Guard([&]() -> gantry_ckpt_status {
    if (m == nullptr || out == nullptr) return BadArg("null manager or out");
    std::vector<std::string> wanted;
    for (size_t i = 0; names != nullptr && i < name_count; ++i) {
      if (names[i] == nullptr) return BadArg("null tensor name");
      wanted.emplace_back(names[i]);
    }
    std::optional<int64_t> which;
    if (step >= 0) which = step;
    auto loaded = m->impl->Load(which, wanted);
    if (!loaded.ok()) return Report(loaded.status());
    // Brace-initialised: clang 14 (make fuzz) has no parenthesised aggregate init.
    auto l = std::unique_ptr<gantry_ckpt_loaded>(
        new gantry_ckpt_loaded{std::move(*loaded), std::string()});
    l->metadata = l->data.metadata.dump();
    *out = l.release();
    return GANTRY_CKPT_OK;
  });
}

int64_t gantry_ckpt_loaded_step(const gantry_ckpt_loaded* l) { return l ? l->data.step : -1; }

size_t gantry_ckpt_loaded_count(const gantry_ckpt_loaded* l) {
  return l ? l->data.tensors.size() : 0;
}

gantry_ckpt_status gantry_ckpt_loaded_tensor(const gantry_ckpt_loaded* l, size_t i,
                                             gantry_ckpt_tensor* out) {
  return Guard([&]() -> gantry_ckpt_status {
    if (l == nullptr || out == nullptr) return BadArg("null handle or out");
    if (i >= l->data.tensors.size()) {
      return BadArg("tensor index out of range; see gantry_ckpt_loaded_count");
    }
    const gantry::ckpt::Tensor& t = l->data.tensors[i];
    out->name = t.name.c_str();
    out->dtype = static_cast<gantry_dtype>(t.dtype);
    out->shape = t.shape.data();
    out->ndim = t.shape.size();
    out->data = t.data.data();
    out->bytes = t.data.size();
    return GANTRY_CKPT_OK;
  });
}

const char* gantry_ckpt_loaded_metadata(const gantry_ckpt_loaded* l) {
  return l ? l->metadata.c_str() : "";
}

void gantry_ckpt_loaded_free(gantry_ckpt_loaded* l) { delete l; }

}  // extern "C"
