// The local run directory "<root>/<run>" (internal to src/ckpt): its paths,
// the writer lock, stale temporaries, and reading its committed steps (the
// StepSource of the local tier). Writing a step is LocalCommitter's
// (commit.h), deleting steps LocalRetention's (retention.h), downloading one
// TierReader's (tiering.h).
//
// Locking: "<run>/.writer.lock" (flock) excludes other processes; two Lock
// objects of one process conflict too, so every user of the run lock in this
// process takes LocalGuard() first, then the lock, and holds both for the
// whole change (the save path, Prune, the uploader's catch-up retention and
// a download). Reading needs neither.
//
// Threads: every method may be called from any thread (the caller's, the
// async save worker, the uploader); the FileSystem must allow that (every
// storage::FileSystem does).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "format.h"
#include "gantry/core/clock.h"
#include "gantry/storage/filesystem.h"
#include "load.h"

namespace gantry::ckpt::internal {

class RunDir : public StepSource {
 public:
  // `dir` is "<root>/<run>" (it need not exist yet). With `read_only`,
  // Writable() refuses every change.
  RunDir(storage::FileSystem& fs, std::string dir, bool read_only)
      : fs_(fs), dir_(std::move(dir)), read_only_(read_only) {}

  storage::FileSystem& fs() { return fs_; }
  const std::string& path() const { return dir_; }
  bool read_only() const { return read_only_; }

  // "<run>/step-0000000042", "<run>/.tmp-step-0000000042" (a save or a
  // download in progress), "<run>/.tmp-delete-step-0000000042" (a step being
  // deleted: renamed there first, so a crash mid-delete never leaves a step
  // that looks committed but has lost files), "<run>/.writer.lock".
  std::string StepDir(int64_t step) const override;
  std::string TmpDir(int64_t step) const;
  std::string DeletingDir(int64_t step) const;
  std::string LockPath() const;

  // FailedPrecondition "<what> <run> refused: the manager was opened
  // read-only" when read-only.
  Status Writable(std::string_view what) const;

  // The in-process half of the run lock (see above).
  [[nodiscard]] std::unique_lock<std::mutex> LocalGuard() { return std::unique_lock(local_mu_); }
  // The run lock, without waiting: FailedPrecondition (from the
  // FileSystem) when another writer holds it.
  Result<std::unique_ptr<storage::Lock>> TryLock() { return fs_.TryLock(LockPath()); }
  // TryLock for a change called `what`: AlreadyExists "<what> refused: ..."
  // when another writer holds the lock.
  Result<std::unique_ptr<storage::Lock>> LockRun(std::string_view what);

  // Removes ".tmp-*" entries: abandoned saves and half-deleted steps. The
  // caller holds the run lock (or knows no writer does).
  Status CleanStale();

  // StepSource.
  Result<std::vector<int64_t>> CommittedSteps() override;
  Result<Manifest> ReadManifest(int64_t step) override;
  Status CheckShardSizes(int64_t step, const Manifest& m) override;
  Status ProbeShard(int64_t step, const Manifest& m, int shard) override;
  Status ReadShard(int64_t step, const Manifest& m, int shard, ShardFiles& files, uint64_t offset,
                   void* dst, size_t len) override;

 private:
  storage::FileSystem& fs_;
  const std::string dir_;
  const bool read_only_;
  std::mutex local_mu_;
};

// Polls `done` every 20 ms on `clock` until it returns true; DeadlineExceeded
// "<what> within N s (barrier_timeout); ..." after `timeout`. The storage
// barrier of the commit protocol, and a download waiting for another writer.
Status WaitFor(const Clock& clock, std::chrono::seconds timeout, const std::function<bool()>& done,
               const std::string& what);

}  // namespace gantry::ckpt::internal
