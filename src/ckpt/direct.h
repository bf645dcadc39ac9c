// Direct mode (internal to src/ckpt): the run lives on an object store with
// no local directory (Options::root is a remote URL, or Options::root_store
// is set; world size 1). A save sends the staged shard with one Put (blocks
// in parallel), then the manifest, then the marker as a conditional create
// (StoreTier::CommitManifest); loads read tensors with ranged reads straight
// into their buffers. One writer per run: a second writer of the same step
// gets AlreadyExists from the marker, but its shard may already have replaced
// the first one's bytes (verification on load detects that).
//
// Threads: Commit runs on the thread that owns the save (one at a time); the
// StepSource methods may run on any thread (the store client allows it).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gantry/ckpt/manager.h"
#include "gantry/core/clock.h"
#include "gantry/storage/object_store.h"
#include "load.h"
#include "staging.h"
#include "tiering.h"

namespace gantry::ckpt::internal {

class DirectRun : public StepSource {
 public:
  // Validates `opt` for direct mode (no persist, world size 1), opens the
  // store (or uses opt.root_store) and, read-only, checks that the run has a
  // committed step (NotFound otherwise).
  static Result<std::unique_ptr<DirectRun>> Open(const Options& opt, const Clock& clock);

  // "<store url>/<run>" (messages).
  std::string RunUrl() const { return tier_.RunUrl(); }

  // Uploads the staged shard (after waiting for the whole of it), then the
  // manifest and the marker; AlreadyExists when the step is committed. Then
  // applies `retention` on the store (errors are logged). Errors start with
  // "saving step N to <store url>/<run>".
  Status Commit(StagingPool& pool, const Retention& retention);
  // CheckpointManager::Prune in direct mode (StoreTier::Prune, anchored on
  // the newest committed step).
  Result<std::vector<int64_t>> Prune(const Retention& retention);

  // StepSource.
  std::string StepDir(int64_t step) const override { return tier_.Where(step); }
  Result<std::vector<int64_t>> CommittedSteps() override { return tier_.CommittedSteps(); }
  Result<Manifest> ReadManifest(int64_t step) override { return tier_.ReadManifest(step); }
  Status CheckShardSizes(int64_t step, const Manifest& m) override {
    return tier_.CheckShardSizes(step, m);
  }
  Status ProbeShard(int64_t, const Manifest&, int) override { return Status::Ok(); }
  Status ReadShard(int64_t step, const Manifest& m, int shard, ShardFiles& files, uint64_t offset,
                   void* dst, size_t len) override;

 private:
  DirectRun(std::unique_ptr<storage::ObjectStore> owned, storage::ObjectStore& store,
            const std::string& run, size_t chunk_bytes, const Clock& clock)
      : owned_(std::move(owned)), tier_(store, run), chunk_bytes_(chunk_bytes), clock_(clock) {}

  std::unique_ptr<storage::ObjectStore> owned_;  // when not Options::root_store
  StoreTier tier_;
  const size_t chunk_bytes_;
  const Clock& clock_;
};

}  // namespace gantry::ckpt::internal
