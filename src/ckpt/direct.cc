// DirectRun: checkpoints straight to an object store (see direct.h).
#include "direct.h"

#include <span>

#include "gantry/core/log.h"

namespace gantry::ckpt::internal {

Result<std::unique_ptr<DirectRun>> DirectRun::Open(const Options& opt, const Clock& clock) {
  if (opt.persist_store != nullptr || !opt.persist.empty()) {
    return InvalidArgument("persist '" + opt.persist + "' needs a local root; with the root " +
                           "on an object store (direct mode) the store is already durable");
  }
  if (opt.world_size != 1) {
    return InvalidArgument("direct-to-object-store checkpoints support world_size 1, not " +
                           std::to_string(opt.world_size) +
                           "; give each rank a local root and use persist");
  }
  std::unique_ptr<storage::ObjectStore> owned;
  storage::ObjectStore* store = opt.root_store;
  if (store == nullptr) {
    ASSIGN_OR_RETURN(owned, storage::OpenObjectStore(opt.root, opt.store));
    store = owned.get();
  }
  std::unique_ptr<DirectRun> run(
      new DirectRun(std::move(owned), *store, opt.run, opt.chunk_bytes, clock));
  if (opt.read_only) {
    ASSIGN_OR_RETURN(std::vector<int64_t> steps, run->CommittedSteps());
    if (steps.empty()) {
      return NotFound("no committed checkpoint under " + run->RunUrl() +
                      "; pass the root and run of an existing run");
    }
  }
  return run;
}

// The shard goes up straight from the staging pool (the store sends it as
// parallel blocks), then the manifest, then the marker.
Status DirectRun::Commit(StagingPool& pool, const Retention& retention) {
  const StagedShard& s = pool.shard();
  const std::string ctx = "saving step " + std::to_string(s.step) + " to " + tier_.RunUrl();
  if (tier_.IsCommitted(s.step)) {
    return AlreadyExists(ctx + ": " + tier_.Where(s.step) +
                         " is already committed; checkpoints are immutable, use a new step");
  }
  pool.WaitReady(s.file_bytes);
  const std::string shard = ShardName(0, 1);
  RETURN_IF_ERROR(tier_.store()
                      .Put(tier_.Key(s.step, shard),
                           std::span(reinterpret_cast<const std::byte*>(pool.data()), s.file_bytes))
                      .WithContext(ctx));
  Manifest m = BaseManifest(s, /*world_size=*/1, chunk_bytes_, NowUnix(clock_));
  m.shards.push_back({shard, 0, s.file_bytes});
  m.tensors = s.entries;
  for (TensorEntry& t : m.tensors) t.shard = 0;
  RETURN_IF_ERROR(tier_.CommitManifest(s.step, ManifestToJson(m).dump(1) + "\n").WithContext(ctx));
  auto pruned = tier_.Prune(retention, s.step, NowUnix(clock_));
  if (!pruned.ok()) log::warn("retention after step {}: {}", s.step, pruned.status().message());
  return Status::Ok();
}

Result<std::vector<int64_t>> DirectRun::Prune(const Retention& retention) {
  return tier_.Prune(retention, std::nullopt, NowUnix(clock_));
}

Status DirectRun::ReadShard(int64_t step, const Manifest& m, int shard, ShardFiles&,
                            uint64_t offset, void* dst, size_t len) {
  return tier_.store().GetRange(tier_.Key(step, m.shards[shard].file), offset,
                                std::span(static_cast<std::byte*>(dst), len));
}

}  // namespace gantry::ckpt::internal
