// CheckpointManager: the facade that composes the engines of src/ckpt (see
// gantry/ckpt/manager.h for the contract, src/ckpt/README.md for the map):
//   staging.h    the staging pool a save lays the shard out in
//   commit.h     the local commit protocol (LocalCommitter)
//   retention.h  local retention (LocalRetention)
//   run_dir.h    the local run directory: paths, lock, reading (RunDir)
//   load.h       list, verify, load over one tier (Loader, StepSource)
//   direct.h     direct mode: the run on an object store (DirectRun)
//   tiering.h    the store tier, the uploader and two-tier reads
//   eviction.h   the Scheduled Events watcher behind OnEviction
// This file validates options, wires the engines, and owns the one thread
// that is about saves: the SaveAsync worker.
#include "gantry/ckpt/manager.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

#include "commit.h"
#include "direct.h"
#include "eviction.h"
#include "format.h"
#include "gantry/core/log.h"
#include "gantry/storage/filesystem.h"
#include "load.h"
#include "retention.h"
#include "run_dir.h"
#include "staging.h"
#include "tiering.h"

namespace gantry::ckpt {

// ---------------------------------------------------------------- buffers

Result<AlignedBuffer> AlignedBuffer::Allocate(size_t bytes) {
  // Large buffers are aligned to 2 MiB and asked to use transparent huge
  // pages: faulting in a multi-GiB pool 4 KiB at a time costs more than
  // writing it (THP is often in "madvise" mode, so the hint matters).
  constexpr size_t kHuge = 2u << 20;
  const size_t align = bytes >= 2 * kHuge ? kHuge : storage::kDirectIoAlignment;
  void* p = nullptr;
  if (::posix_memalign(&p, align, std::max<size_t>(bytes, 1)) != 0) {
    return ResourceExhausted("cannot allocate " + std::to_string(bytes) +
                             " bytes of aligned memory; reduce the state size or free memory");
  }
  if (align == kHuge) (void)::madvise(p, bytes / kHuge * kHuge, MADV_HUGEPAGE);
  AlignedBuffer b;
  b.data_ = p;
  b.size_ = bytes;
  return b;
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

void* AlignedBuffer::Release() {
  size_ = 0;
  return std::exchange(data_, nullptr);
}

void AlignedFree(void* p) { std::free(p); }

std::string_view VerifyModeName(VerifyMode mode) {
  switch (mode) {
    case VerifyMode::kFull:
      return "full";
    case VerifyMode::kSample:
      return "sample";
    case VerifyMode::kNone:
      return "none";
  }
  return "full";
}

Result<VerifyMode> ParseVerifyMode(std::string_view text) {
  if (text == "full") return VerifyMode::kFull;
  if (text == "sample") return VerifyMode::kSample;
  if (text == "none") return VerifyMode::kNone;
  return InvalidArgument("verify mode '" + std::string(text) +
                         "' is unknown; use full, sample or none");
}

// ---------------------------------------------------------------- impl

namespace {

// "file:///nvme/ckpt" names the local directory "/nvme/ckpt".
std::string LocalRoot(const std::string& root) {
  return root.starts_with("file://") ? root.substr(7) : root;
}

}  // namespace

// Which engines exist depends on the mode: direct mode has direct_ and
// no local engines; the local modes have committer_ and retention_, and
// with persist also uploader_ and tiers_. loader_ reads whichever tier is
// the root (direct_ or run_).
class CheckpointManager::Impl {
 public:
  explicit Impl(Options options)
      : opt_(std::move(options)),
        fs_(opt_.fs ? *opt_.fs : storage::LocalFileSystem()),
        clock_(opt_.clock ? *opt_.clock : SystemClock()),
        run_(fs_, LocalRoot(opt_.root) + "/" + opt_.run, opt_.read_only),
        staging_(opt_.rank, opt_.chunk_bytes) {}

  // Finishes the in-flight save and every queued upload (a checkpoint that
  // only the local disk holds is what tiering exists to avoid), then stops
  // the eviction watcher and the uploader.
  ~Impl() {
    StopEvictionWatcher();
    Status s = Wait();
    if (!s.ok()) log::error("checkpoint save failed: {}", s.message());
    if (uploader_) uploader_->Shutdown();
  }

  Status Init() {
    if (opt_.root.empty()) return InvalidArgument("checkpoint root is empty; pass a directory");
    if (opt_.run.empty() || opt_.run.find('/') != std::string::npos || opt_.run[0] == '.') {
      return InvalidArgument("run name '" + opt_.run +
                             "' must be non-empty, without '/', and not start with '.'");
    }
    if (opt_.world_size < 1 || opt_.rank < 0 || opt_.rank >= opt_.world_size) {
      return InvalidArgument("rank " + std::to_string(opt_.rank) + " is outside world size " +
                             std::to_string(opt_.world_size));
    }
    if (opt_.chunk_bytes == 0 || opt_.chunk_bytes > internal::kMaxChunkBytes) {
      return InvalidArgument("chunk_bytes " + std::to_string(opt_.chunk_bytes) +
                             " is outside [1, " + std::to_string(internal::kMaxChunkBytes) + "]");
    }
    if (opt_.root_store != nullptr || storage::IsRemoteUrl(opt_.root)) return InitDirect();
    loader_ = std::make_unique<internal::Loader>(run_, opt_.verify, opt_.fallback, run_.path());
    retention_ = std::make_unique<internal::LocalRetention>(
        run_, *loader_, opt_.retention, opt_.verify, clock_,
        [this](int64_t step) { return uploader_ && uploader_->Pending(step); });
    committer_ = std::make_unique<internal::LocalCommitter>(run_, staging_, opt_, clock_,
                                                            *retention_, [this](int64_t step) {
                                                              if (uploader_)
                                                                uploader_->Enqueue(step);
                                                            });
    if (opt_.persist_store != nullptr || !opt_.persist.empty()) {
      storage::ObjectStore* store = opt_.persist_store;
      if (store == nullptr) {
        ASSIGN_OR_RETURN(owned_persist_store_, storage::OpenObjectStore(opt_.persist, opt_.store));
        store = owned_persist_store_.get();
      }
      persist_ = std::make_unique<internal::StoreTier>(*store, opt_.run);
      uploader_ = std::make_unique<internal::Uploader>(
          *persist_, run_, clock_, opt_.persist_retention,
          [this](int64_t step) { retention_->AfterUpload(step); });
      tiers_ = std::make_unique<internal::TierReader>(run_, *loader_, *persist_, opt_, clock_,
                                                      [this] { FinishSave(); });
      // Rank 0 commits, so rank 0 uploads.
      if (opt_.rank == 0 && !opt_.read_only) uploader_->Start();
    }
    if (opt_.read_only) {
      auto info = fs_.Stat(run_.path());
      if (!info.ok() || !info->is_dir) {
        return NotFound("no checkpoint run directory " + run_.path() +
                        "; pass <root>/<run> of an existing run");
      }
      return Status::Ok();
    }
    // Durably: without the parents' fsyncs a power loss could take the run
    // directory, and the first commit in it, away (found by
    // crash_consistency_test).
    RETURN_IF_ERROR(
        storage::CreateDirsDurably(fs_, run_.path()).WithContext("checkpoint run directory"));
    if (opt_.staging_bytes > 0) RETURN_IF_ERROR(staging_.Reserve(opt_.staging_bytes));
    if (opt_.rank == 0) {
      auto lock = run_.TryLock();
      if (lock.ok()) RETURN_IF_ERROR(run_.CleanStale());
    }
    return Status::Ok();
  }

  std::string StepDir(int64_t step) const {
    if (direct_) return direct_->StepDir(step);
    return run_.StepDir(step);
  }
  const Options& options() const { return opt_; }

  // Copying into the pool and writing the file overlap: a helper thread
  // copies (and checksums) the tensors piece by piece while this thread
  // writes what is already staged, so a save takes about as long as the
  // write alone. The protocol (and any Communicator call) stays on the
  // caller's thread.
  Status Save(int64_t step, std::span<const TensorView> tensors, const Json& metadata) {
    RETURN_IF_ERROR(WaitSave());
    RETURN_IF_ERROR(run_.Writable("saving"));
    RETURN_IF_ERROR(staging_.Layout(step, tensors, metadata));
    std::thread copier([this, tensors] { staging_.CopyAndHash(tensors); });
    Status st = WriteAndCommit();
    copier.join();
    return st;
  }

  // Returns once the tensors are in the pool; checksums, writes and the
  // commit run on the background thread.
  Status SaveAsync(int64_t step, std::span<const TensorView> tensors, const Json& metadata) {
    RETURN_IF_ERROR(WaitSave());
    RETURN_IF_ERROR(run_.Writable("saving"));
    RETURN_IF_ERROR(staging_.Layout(step, tensors, metadata));
    staging_.ParallelCopy(tensors);
    worker_ = std::thread([this] {
      // An exception must not escape the thread (std::terminate); it becomes
      // the pending status that Wait() reports.
      Status s;
      try {
        staging_.HashStaged();
        s = WriteAndCommit();
      } catch (const std::bad_alloc&) {
        s = ResourceExhausted("out of memory while saving step " +
                              std::to_string(staging_.shard().step));
      } catch (const std::exception& e) {
        s = Internal("saving step " + std::to_string(staging_.shard().step) + ": " + e.what());
      }
      std::lock_guard<std::mutex> lock(mu_);
      pending_ = std::move(s);
    });
    return Status::Ok();
  }

  // The in-flight save's error first, else an upload error not reported
  // yet. Save and SaveAsync do not return upload errors: the local commit
  // does not depend on the store, and an emergency checkpoint must not be
  // refused because an older upload failed.
  Status Wait() {
    RETURN_IF_ERROR(WaitSave());
    return uploader_ ? uploader_->TakeError() : Status::Ok();
  }

  Result<std::vector<CheckpointInfo>> List() { return loader_->List(); }

  Result<LatestResult> Latest() {
    if (tiers_) return tiers_->Latest();
    return loader_->Latest();
  }

  Result<LoadedCheckpoint> Load(std::optional<int64_t> step, std::span<const std::string> names) {
    if (tiers_) return tiers_->Load(step, names);
    return loader_->Load(step, names);
  }

  Result<VerifyReport> Verify(int64_t step, VerifyMode mode) { return loader_->Verify(step, mode); }

  Result<std::vector<int64_t>> Prune() {
    RETURN_IF_ERROR(run_.Writable("pruning"));
    if (direct_) return direct_->Prune(opt_.retention);
    std::unique_lock<std::mutex> local = run_.LocalGuard();
    ASSIGN_OR_RETURN(std::unique_ptr<storage::Lock> lock, run_.LockRun("pruning"));
    return retention_->PruneLocked(std::nullopt);
  }

  Status WaitForUploads() { return uploader_ ? uploader_->WaitAll() : Status::Ok(); }

  UploadStatus Uploads() const { return uploader_ ? uploader_->Snapshot() : UploadStatus(); }

  Result<std::vector<int64_t>> PersistedSteps() {
    if (direct_) return direct_->CommittedSteps();
    if (persist_) return persist_->CommittedSteps();
    return FailedPrecondition("run " + run_.path() +
                              " has no object store; set Options::persist to tier checkpoints");
  }

  Status OnEviction(EvictionCallback fn, ScheduledEventsOptions options, bool acknowledge) {
    return eviction_.Start(std::move(fn), std::move(options), acknowledge);
  }

  void StopEvictionWatcher() { eviction_.Stop(); }

 private:
  Status InitDirect() {
    ASSIGN_OR_RETURN(direct_, internal::DirectRun::Open(opt_, clock_));
    loader_ = std::make_unique<internal::Loader>(*direct_, opt_.verify, opt_.fallback, run_.path());
    if (opt_.staging_bytes > 0) RETURN_IF_ERROR(staging_.Reserve(opt_.staging_bytes));
    return Status::Ok();
  }

  // Writes the staged shard and commits it, on the thread that owns the save.
  Status WriteAndCommit() {
    if (direct_) return direct_->Commit(staging_, opt_.retention);
    return committer_->WriteAndCommit();
  }

  // The in-flight save's error, if any.
  Status WaitSave() {
    FinishSave();
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(pending_, Status::Ok());
  }

  // Joins the SaveAsync worker; its status stays pending.
  void FinishSave() {
    if (worker_.joinable()) worker_.join();
  }

  Options opt_;
  storage::FileSystem& fs_;
  const Clock& clock_;
  internal::RunDir run_;  // also in direct mode: run_.path() names the run in messages
  internal::StagingPool staging_;
  std::unique_ptr<internal::DirectRun> direct_;
  std::unique_ptr<internal::Loader> loader_;
  std::unique_ptr<internal::LocalRetention> retention_;
  std::unique_ptr<internal::LocalCommitter> committer_;
  std::unique_ptr<storage::ObjectStore> owned_persist_store_;
  std::unique_ptr<internal::StoreTier> persist_;
  std::unique_ptr<internal::TierReader> tiers_;
  std::unique_ptr<internal::Uploader> uploader_;  // after what its thread uses
  internal::EvictionWatch eviction_;
  std::thread worker_;  // the SaveAsync writer
  std::mutex mu_;       // guards pending_
  Status pending_;      // the failed background save's error, not reported yet
};

// ---------------------------------------------------------------- facade

Result<std::unique_ptr<CheckpointManager>> CheckpointManager::Open(Options options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<CheckpointManager>(new CheckpointManager(std::move(impl)));
}

CheckpointManager::CheckpointManager(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CheckpointManager::~CheckpointManager() = default;

Status CheckpointManager::Save(int64_t step, std::span<const TensorView> tensors,
                               const Json& metadata) {
  return impl_->Save(step, tensors, metadata);
}
Status CheckpointManager::SaveAsync(int64_t step, std::span<const TensorView> tensors,
                                    const Json& metadata) {
  return impl_->SaveAsync(step, tensors, metadata);
}
Status CheckpointManager::Wait() { return impl_->Wait(); }
Result<std::vector<CheckpointInfo>> CheckpointManager::List() { return impl_->List(); }
Result<LatestResult> CheckpointManager::Latest() { return impl_->Latest(); }
Result<LoadedCheckpoint> CheckpointManager::Load(std::optional<int64_t> step,
                                                 std::span<const std::string> names) {
  return impl_->Load(step, names);
}
Result<VerifyReport> CheckpointManager::Verify(int64_t step, VerifyMode mode) {
  return impl_->Verify(step, mode);
}
Result<std::vector<int64_t>> CheckpointManager::Prune() { return impl_->Prune(); }
Status CheckpointManager::WaitForUploads() { return impl_->WaitForUploads(); }
UploadStatus CheckpointManager::Uploads() const { return impl_->Uploads(); }
Result<std::vector<int64_t>> CheckpointManager::PersistedSteps() { return impl_->PersistedSteps(); }
Status CheckpointManager::OnEviction(EvictionCallback fn, ScheduledEventsOptions options,
                                     bool acknowledge) {
  return impl_->OnEviction(std::move(fn), std::move(options), acknowledge);
}
void CheckpointManager::StopEvictionWatcher() { impl_->StopEvictionWatcher(); }
std::string CheckpointManager::StepDir(int64_t step) const { return impl_->StepDir(step); }
const Options& CheckpointManager::options() const { return impl_->options(); }

}  // namespace gantry::ckpt
