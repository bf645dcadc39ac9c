// The commit protocol of the local tier (internal to src/ckpt), as
// gantry/ckpt/manager.h states it: rank 0 takes the run lock, refuses a
// committed step, removes stale temporaries and creates "<run>/.tmp-step-N";
// every rank writes and fsyncs its shard there, ranks > 0 then publish a
// "rank-N.json" record (by rename, after the shard is durable); rank 0 waits
// for every record (or passes Communicator barriers), merges them into
// manifest.json, writes the marker COMMITTED with the manifest's SHA-256,
// fsyncs the directory, renames it to "step-N" and fsyncs the run directory.
// Then it queues the upload and applies retention. A crash at any point
// leaves the previous committed steps or the new one, never a half step.
//
// Threads: WriteAndCommit runs on the thread that owns the save (the
// caller's for Save, the background worker for SaveAsync), one save at a
// time; it takes RunDir::LocalGuard() and (rank 0) the run lock itself. With
// a Communicator, its Barrier() is called from that thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "gantry/ckpt/manager.h"
#include "gantry/core/clock.h"
#include "retention.h"
#include "run_dir.h"
#include "staging.h"

namespace gantry::ckpt::internal {

class LocalCommitter {
 public:
  // Reads rank, world_size, chunk_bytes, direct_io, barrier_timeout and comm
  // from `opt`. `enqueue_upload(step)` (may be empty) is called on rank 0
  // once the step is committed, under the run lock and before retention, so
  // that retention never removes a step that waits for its upload.
  LocalCommitter(RunDir& dir, StagingPool& pool, const Options& opt, const Clock& clock,
                 LocalRetention& retention, std::function<void(int64_t)> enqueue_upload)
      : dir_(dir),
        pool_(pool),
        opt_(opt),
        clock_(clock),
        retention_(retention),
        enqueue_upload_(std::move(enqueue_upload)) {}

  // Writes the staged shard (waiting for the pool's bytes as they are
  // copied) and runs the protocol. On failure the temporary directory is
  // removed (rank 0) and committed steps are untouched; ranks > 0 return
  // once rank 0 committed, or FailedPrecondition when it abandoned the step.
  // Errors start with "saving step N to <run>".
  Status WriteAndCommit();

 private:
  Status WriteRankPart(const std::string& tmp);
  Status Commit(const std::string& tmp);

  RunDir& dir_;
  StagingPool& pool_;
  const Options& opt_;
  const Clock& clock_;
  LocalRetention& retention_;
  const std::function<void(int64_t)> enqueue_upload_;
};

}  // namespace gantry::ckpt::internal
