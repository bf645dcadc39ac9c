// Checkpoints on an object store (internal to src/ckpt): the layout and
// commit rule of gantry/ckpt/manager.h, with the step directory replaced by
// the key prefix "<run>/step-<10-digit step>/". A step is committed on the
// store iff its "COMMITTED" object exists; that object is always written
// last, as a conditional create, and deleted first.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "format.h"
#include "gantry/ckpt/manager.h"
#include "gantry/storage/filesystem.h"
#include "gantry/storage/object_store.h"

namespace gantry::ckpt::internal {

class StoreTier {
 public:
  StoreTier(storage::ObjectStore& store, std::string run) : store_(store), run_(std::move(run)) {}

  storage::ObjectStore& store() { return store_; }
  // "<run>/step-0000000042/<file>".
  std::string Key(int64_t step, std::string_view file) const;
  // "<store url>/<run>/step-0000000042" (for messages and StepDir()).
  std::string Where(int64_t step) const;
  std::string RunUrl() const;

  // Steps whose marker exists, oldest first.
  Result<std::vector<int64_t>> CommittedSteps();
  bool IsCommitted(int64_t step);
  // The manifest of a committed step, checked against the marker's SHA-256
  // (DataLoss naming the keys otherwise). `manifest_text` and `marker`
  // receive the raw objects when not null.
  Result<Manifest> ReadManifest(int64_t step, std::string* manifest_text = nullptr,
                                std::string* marker = nullptr);
  // DataLoss naming the key when a shard is missing or has another size.
  Status CheckShardSizes(int64_t step, const Manifest& m);

  // Copies a locally committed step directory up: every shard (PutFile),
  // then manifest.json, then the marker (conditional create). A marker that
  // already exists with the same content is success (the step was uploaded
  // before); with other content it is AlreadyExists. Returns the bytes sent.
  Result<uint64_t> UploadStep(int64_t step, const std::string& dir, const Manifest& m,
                              const std::string& manifest_text, const std::string& marker);
  // Commits a step written straight to the store (direct mode): `shards`
  // are already there; writes the manifest and then the marker.
  Status CommitManifest(int64_t step, const std::string& manifest_text);

  // Downloads a committed step into `dir` (an existing, empty local
  // directory): shards with GetFile (parallel ranged reads), fsynced, and
  // manifest.json; returns the marker text (the caller writes it last).
  Result<std::string> DownloadStep(int64_t step, const std::string& dir, storage::FileSystem& fs);

  // Deletes a step: the marker first (the step stops being committed), then
  // everything else under its prefix.
  Status DeleteStep(int64_t step);
  // Retention on the store: like the local rules, except that nothing is
  // verified (that would mean downloading): never deletes `keep` nor any
  // step newer than it; keep_last counts committed steps; keep_for reads the
  // manifests' creation time. Returns the deleted steps.
  Result<std::vector<int64_t>> Prune(const Retention& r, std::optional<int64_t> keep,
                                     int64_t now_unix_s);

 private:
  storage::ObjectStore& store_;
  std::string run_;
};

// Pages through List until the end.
Result<std::vector<storage::ObjectInfo>> ListEverything(storage::ObjectStore& store,
                                                        std::string_view prefix);

}  // namespace gantry::ckpt::internal
