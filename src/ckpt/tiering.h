// Tiering (internal to src/ckpt): checkpoints on an object store, the
// background uploader of Options::persist, and reads that use both tiers.
//
// StoreTier: the layout and commit rule of gantry/ckpt/manager.h, with the
// step directory replaced by the key prefix "<run>/step-<10-digit step>/". A
// step is committed on the store iff its "COMMITTED" object exists; that
// object is always written last, as a conditional create, and deleted first.
// Its methods may run on any thread (the store client allows it).
//
// Uploader: after rank 0 commits a step locally it is queued; one thread
// copies queued steps to the store in order (StoreTier::UploadStep), applies
// the store's retention and lets local retention catch up. Errors are kept
// for the next Wait()/WaitForUploads() and in UploadStatus; a failed step is
// not retried.
//
// TierReader: Latest() and Load() over the newest step of either tier: a
// local copy when it verifies, else the step is downloaded into
// "<run>/.tmp-step-N" and committed locally like a save.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "format.h"
#include "gantry/ckpt/manager.h"
#include "gantry/core/clock.h"
#include "gantry/storage/filesystem.h"
#include "gantry/storage/object_store.h"
#include "load.h"
#include "run_dir.h"

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

// The background uploader of Options::persist (rank 0 of a writable manager).
//
// Threads: Enqueue, Pending, WaitAll, TakeError and Snapshot may be called
// from any thread (they take the uploader's own mutex, never the run lock);
// Start and Shutdown from the thread that owns the manager. The upload
// thread reads local step directories without a lock (committed steps are
// immutable, and retention keeps queued ones) and calls `caught_up` with no
// lock of its own held.
class Uploader {
 public:
  // `caught_up(step)` runs on the upload thread after `step` was uploaded
  // while it was the only queued step (local retention catches up then).
  Uploader(StoreTier& store, RunDir& local, const Clock& clock, const Retention& store_retention,
           std::function<void(int64_t)> caught_up);
  ~Uploader() { Shutdown(); }
  Uploader(const Uploader&) = delete;
  Uploader& operator=(const Uploader&) = delete;

  // Starts the upload thread; without it Enqueue is a no-op (a read-only
  // manager, or a rank other than 0, reports an idle uploader).
  void Start();
  // Uploads every queued step, stops the thread and logs an upload error not
  // reported yet. Idempotent; the destructor calls it.
  void Shutdown();

  // Queues a step committed locally (oldest first).
  void Enqueue(int64_t step);
  // Whether `step` is queued or being uploaded.
  bool Pending(int64_t step) const;
  // Waits until the queue is empty; returns the first error not reported yet.
  Status WaitAll();
  // Returns (and forgets) the first error not reported yet.
  Status TakeError();
  // UploadStatus (CheckpointManager::Uploads).
  UploadStatus Snapshot() const;

 private:
  void Loop();
  Result<uint64_t> UploadOne(int64_t step);

  StoreTier& store_;
  RunDir& local_;
  const Clock& clock_;
  const Retention store_retention_;
  const std::function<void(int64_t)> caught_up_;
  std::thread thread_;
  mutable std::mutex mu_;  // guards the fields below
  std::condition_variable cv_;
  std::deque<int64_t> queue_;  // front: the step being uploaded
  bool stop_ = false;
  Status pending_;  // first upload error not reported yet
  UploadStatus status_;
};

// Latest() and Load() with Options::persist: the newest step of either tier.
//
// Threads: for the thread that uses the manager (a download takes
// RunDir::LocalGuard() and the run lock itself, after `finish_save`).
class TierReader {
 public:
  // `local_loader` reads `local`; `finish_save()` waits for an async save of
  // this manager (it holds the run lock a download needs). Reads verify,
  // fallback and barrier_timeout from `opt`.
  TierReader(RunDir& local, Loader& local_loader, StoreTier& store, const Options& opt,
             const Clock& clock, std::function<void()> finish_save)
      : local_(local),
        loader_(local_loader),
        store_(store),
        opt_(opt),
        clock_(clock),
        finish_save_(std::move(finish_save)) {}

  Result<LatestResult> Latest();
  Result<LoadedCheckpoint> Load(std::optional<int64_t> step, std::span<const std::string> names);

 private:
  // Committed steps of both tiers, newest first, each with where it is.
  struct TierSteps {
    std::vector<int64_t> steps;  // newest first
    std::set<int64_t> local, remote;
  };
  Result<TierSteps> BothTiers();
  // Makes `step` committed locally by downloading it from the store into
  // "<run>/.tmp-step-N" and committing it with the local protocol. With
  // `replace`, a local copy that failed verification is removed first.
  Status Fetch(int64_t step, bool replace);
  // Runs `attempt(step)` on the local copy of `step`, fetching it first when
  // only the store has it, and once more after replacing a local copy that
  // fails with DataLoss when the store has the step.
  template <typename T, typename Fn>
  Result<T> OnLocalCopy(int64_t step, const TierSteps& tiers, Fn attempt);
  std::string Where() const;  // "<run> or on <store url>/<run>"

  RunDir& local_;
  Loader& loader_;
  StoreTier& store_;
  const Options& opt_;
  const Clock& clock_;
  const std::function<void()> finish_save_;
};

}  // namespace gantry::ckpt::internal
