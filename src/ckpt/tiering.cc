// StoreTier, Uploader and TierReader: the object-store tier (see tiering.h).
#include "tiering.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <map>
#include <set>
#include <utility>

#include "gantry/core/log.h"
#include "retention.h"

namespace gantry::ckpt::internal {

Result<std::vector<storage::ObjectInfo>> ListEverything(storage::ObjectStore& store,
                                                        std::string_view prefix) {
  std::vector<storage::ObjectInfo> out;
  std::string next;
  do {
    ASSIGN_OR_RETURN(storage::ListPage page, store.List(prefix, next));
    for (auto& o : page.objects) out.push_back(std::move(o));
    next = std::move(page.next);
  } while (!next.empty());
  return out;
}

std::string StoreTier::Key(int64_t step, std::string_view file) const {
  return run_ + "/" + StepName(step) + "/" + std::string(file);
}

std::string StoreTier::Where(int64_t step) const { return RunUrl() + "/" + StepName(step); }

std::string StoreTier::RunUrl() const {
  std::string url = store_.url();
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url + "/" + run_;
}

Result<std::vector<int64_t>> StoreTier::CommittedSteps() {
  ASSIGN_OR_RETURN(std::vector<storage::ObjectInfo> objects,
                   ListEverything(store_, run_ + "/" + std::string(kStepPrefix)));
  std::vector<int64_t> steps;
  const std::string tail = "/" + std::string(kCommitName);
  for (const storage::ObjectInfo& o : objects) {
    // "<run>/step-N/COMMITTED" exactly; anything deeper or elsewhere is not a marker.
    std::string_view key = o.key;
    if (!key.starts_with(run_ + "/") || !key.ends_with(tail)) continue;
    std::string_view name = key.substr(run_.size() + 1, key.size() - run_.size() - 1 - tail.size());
    int64_t step;
    if (ParseStepName(name, &step)) steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  return steps;
}

bool StoreTier::IsCommitted(int64_t step) { return store_.Stat(Key(step, kCommitName)).ok(); }

Result<Manifest> StoreTier::ReadManifest(int64_t step, std::string* manifest_text,
                                         std::string* marker_out) {
  const std::string marker_key = Key(step, kCommitName);
  const std::string manifest_key = Key(step, kManifestName);
  auto marker = store_.Get(marker_key);
  if (!marker.ok()) {
    if (marker.status().code() == StatusCode::kNotFound) {
      return NotFound("step " + std::to_string(step) + " is not committed on " + store_.url() +
                      " (no " + marker_key + ")");
    }
    return marker.status();
  }
  if (marker->size() > kMaxMarkerBytes) {
    return DataLoss(store_.url() + "/" + marker_key + " is larger than a commit marker can be");
  }
  ASSIGN_OR_RETURN(storage::ObjectInfo info, store_.Stat(manifest_key));
  if (info.size > kMaxManifestBytes) {
    return DataLoss(store_.url() + "/" + manifest_key + " has " + std::to_string(info.size) +
                    " bytes, more than a manifest may have");
  }
  ASSIGN_OR_RETURN(std::string text, store_.Get(manifest_key));
  if (*marker != "sha256 " + Sha256Hex(text) + "\n") {
    return DataLoss(store_.url() + "/" + manifest_key + " does not match the SHA-256 in " +
                    marker_key + "; the manifest on the store is corrupt");
  }
  const std::string origin = store_.url() + "/" + manifest_key;
  auto j = ParseJson(text, origin);
  if (!j.ok()) return DataLoss(j.status().message());
  ASSIGN_OR_RETURN(Manifest m, ManifestFromJson(*j, origin));
  if (manifest_text) *manifest_text = std::move(text);
  if (marker_out) *marker_out = std::move(*marker);
  return m;
}

Status StoreTier::CheckShardSizes(int64_t step, const Manifest& m) {
  for (const ShardEntry& s : m.shards) {
    const std::string key = Key(step, s.file);
    auto info = store_.Stat(key);
    if (!info.ok()) {
      return DataLoss("shard " + store_.url() + "/" + key + " of step " + std::to_string(step) +
                      " is missing (" + info.status().message() + ")");
    }
    if (info->size != s.bytes) {
      return DataLoss("shard " + store_.url() + "/" + key + " has " + std::to_string(info->size) +
                      " bytes, the manifest says " + std::to_string(s.bytes));
    }
  }
  return Status::Ok();
}

Status StoreTier::CommitManifest(int64_t step, const std::string& manifest_text) {
  RETURN_IF_ERROR(store_.Put(Key(step, kManifestName), std::as_bytes(std::span(manifest_text)),
                             {.content_type = "application/json"}));
  const std::string marker = "sha256 " + Sha256Hex(manifest_text) + "\n";
  Status st = store_.Put(Key(step, kCommitName), std::as_bytes(std::span(marker)),
                         {.if_none_match = true, .content_type = "text/plain"});
  if (st.code() == StatusCode::kAlreadyExists) {
    // A retried upload of the same step finds its own marker: success.
    auto existing = store_.Get(Key(step, kCommitName));
    if (existing.ok() && *existing == marker) return Status::Ok();
    return AlreadyExists(Where(step) +
                         " is already committed with another manifest; "
                         "checkpoints are immutable, use a new step");
  }
  return st;
}

Result<uint64_t> StoreTier::UploadStep(int64_t step, const std::string& dir, const Manifest& m,
                                       const std::string& manifest_text,
                                       const std::string& marker) {
  if (marker != "sha256 " + Sha256Hex(manifest_text) + "\n") {
    return DataLoss(dir + "/" + std::string(kManifestName) + " does not match its marker");
  }
  uint64_t bytes = 0;
  for (const ShardEntry& s : m.shards) {
    RETURN_IF_ERROR(store_.PutFile(Key(step, s.file), dir + "/" + s.file)
                        .WithContext("uploading step " + std::to_string(step)));
    bytes += s.bytes;
  }
  RETURN_IF_ERROR(
      CommitManifest(step, manifest_text).WithContext("uploading step " + std::to_string(step)));
  return bytes + manifest_text.size() + marker.size();
}

Result<std::string> StoreTier::DownloadStep(int64_t step, const std::string& dir,
                                            storage::FileSystem& fs) {
  std::string manifest_text, marker;
  ASSIGN_OR_RETURN(Manifest m, ReadManifest(step, &manifest_text, &marker));
  RETURN_IF_ERROR(CheckShardSizes(step, m));
  for (const ShardEntry& s : m.shards) {
    const std::string path = dir + "/" + s.file;
    RETURN_IF_ERROR(store_.GetFile(Key(step, s.file), path)
                        .WithContext("downloading step " + std::to_string(step)));
    // The store's GetFile does not promise durability; the marker written
    // after this must not outlive the shard in a power loss.
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return IoError("open " + path, errno);
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (rc != 0) return IoError("fsync " + path, err);
  }
  RETURN_IF_ERROR(
      storage::WriteSmallFile(fs, dir + "/" + std::string(kManifestName), manifest_text));
  return marker;
}

Status StoreTier::DeleteStep(int64_t step) {
  Status st = store_.Delete(Key(step, kCommitName));
  if (!st.ok() && st.code() != StatusCode::kNotFound) return st;
  ASSIGN_OR_RETURN(std::vector<storage::ObjectInfo> objects,
                   ListEverything(store_, run_ + "/" + StepName(step) + "/"));
  for (const storage::ObjectInfo& o : objects) {
    Status d = store_.Delete(o.key);
    if (!d.ok() && d.code() != StatusCode::kNotFound) return d;
  }
  return Status::Ok();
}

Result<std::vector<int64_t>> StoreTier::Prune(const Retention& r, std::optional<int64_t> keep,
                                              int64_t now_unix_s) {
  std::vector<int64_t> deleted;
  if (!RetentionEnabled(r)) return deleted;
  ASSIGN_OR_RETURN(std::vector<int64_t> steps, CommittedSteps());
  if (steps.empty()) return deleted;
  // Without a step to anchor on, the newest committed step is kept.
  const int64_t anchor = keep ? *keep : steps.back();
  int seen = 0;
  std::vector<int64_t> doomed;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    const int64_t step = *it;
    bool keepit = step >= anchor || (r.keep_last > 0 && ++seen <= r.keep_last) ||
                  (r.keep_every > 0 && step % r.keep_every == 0);
    if (!keepit && r.keep_for.count() > 0) {
      auto m = ReadManifest(step);
      // An unreadable manifest says nothing about age; such a step stays.
      keepit = !m.ok() || now_unix_s - m->created_unix_s < r.keep_for.count();
    }
    if (step >= anchor) ++seen;  // the anchor and newer count toward keep_last
    if (!keepit) doomed.push_back(step);
  }
  std::sort(doomed.begin(), doomed.end());
  for (int64_t step : doomed) {
    RETURN_IF_ERROR(DeleteStep(step).WithContext("retention on " + RunUrl()));
    deleted.push_back(step);
  }
  return deleted;
}

// ---------------------------------------------------------------- uploader

namespace {

double Seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Uploader::Uploader(StoreTier& store, RunDir& local, const Clock& clock,
                   const Retention& store_retention, std::function<void(int64_t)> caught_up)
    : store_(store),
      local_(local),
      clock_(clock),
      store_retention_(store_retention),
      caught_up_(std::move(caught_up)) {
  status_.enabled = true;
  status_.store = store_.store().url();
}

void Uploader::Start() {
  thread_ = std::thread([this] { Loop(); });
}

// A checkpoint that only the local disk holds is what tiering exists to
// avoid, so the queue is drained before the thread stops.
void Uploader::Shutdown() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  if (!pending_.ok()) log::error("checkpoint upload failed: {}", pending_.message());
}

void Uploader::Enqueue(int64_t step) {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(step);
  }
  cv_.notify_all();
}

bool Uploader::Pending(int64_t step) const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::find(queue_.begin(), queue_.end(), step) != queue_.end();
}

Status Uploader::WaitAll() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return queue_.empty(); });
  return std::exchange(pending_, Status::Ok());
}

Status Uploader::TakeError() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(pending_, Status::Ok());
}

UploadStatus Uploader::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  UploadStatus s = status_;
  s.pending.assign(queue_.begin(), queue_.end());
  std::sort(s.pending.begin(), s.pending.end());
  return s;
}

// Uploads queued steps in order until stopped with an empty queue.
void Uploader::Loop() {
  while (true) {
    int64_t step;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      step = queue_.front();
    }
    const auto t0 = clock_.Now();
    Result<uint64_t> sent = Status();
    try {
      sent = UploadOne(step);
    } catch (const std::exception& e) {
      sent = Internal("uploading step " + std::to_string(step) + ": " + e.what());
    }
    const double secs = Seconds(clock_.Now() - t0);
    if (sent.ok()) {
      log::info("checkpoint step {} uploaded to {} ({} bytes in {:.2f} s)", step,
                store_.Where(step), *sent, secs);
      // Before the step leaves the queue, so that WaitForUploads() also
      // waits for the store's retention.
      auto pruned = store_.Prune(store_retention_, step, NowUnix(clock_));
      if (!pruned.ok()) {
        log::warn("retention on {}: {}", store_.RunUrl(), pruned.status().message());
      }
      // Waiting costs no upload: the queue is empty but for this step.
      bool last = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        last = queue_.size() == 1;
      }
      if (last && caught_up_) caught_up_(step);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.pop_front();
      if (sent.ok()) {
        status_.last_uploaded = std::max(status_.last_uploaded, step);
        status_.bytes_uploaded += *sent;
        status_.last_seconds = secs;
        status_.last_error.clear();
      } else {
        ++status_.failed;
        status_.last_error = sent.status().message();
        if (pending_.ok()) pending_ = sent.status();
        log::error("checkpoint upload: {}", sent.status().message());
      }
    }
    cv_.notify_all();
  }
}

Result<uint64_t> Uploader::UploadOne(int64_t step) {
  // Already there (e.g. the step was downloaded from the store).
  if (store_.IsCommitted(step)) return 0;
  storage::FileSystem& fs = local_.fs();
  const std::string dir = local_.StepDir(step);
  ASSIGN_OR_RETURN(
      std::string marker,
      storage::ReadSmallFile(fs, dir + "/" + std::string(kCommitName), kMaxMarkerBytes));
  const std::string manifest_path = dir + "/" + std::string(kManifestName);
  ASSIGN_OR_RETURN(std::string text, storage::ReadSmallFile(fs, manifest_path, kMaxManifestBytes));
  ASSIGN_OR_RETURN(Json j, ParseJson(text, manifest_path));
  ASSIGN_OR_RETURN(Manifest m, ManifestFromJson(j, manifest_path));
  return store_.UploadStep(step, dir, m, text, marker);
}

// ---------------------------------------------------------------- two tiers

std::string TierReader::Where() const { return local_.path() + " or on " + store_.RunUrl(); }

Result<TierReader::TierSteps> TierReader::BothTiers() {
  TierSteps t;
  ASSIGN_OR_RETURN(std::vector<int64_t> local, local_.CommittedSteps());
  t.local.insert(local.begin(), local.end());
  auto remote = store_.CommittedSteps();
  if (remote.ok()) {
    t.remote.insert(remote->begin(), remote->end());
  } else if (local.empty()) {
    return remote.status().WithContext("no local checkpoint in " + local_.path() +
                                       " and the store cannot be listed");
  } else {
    log::warn("listing {}: {}; using the local checkpoints only", store_.RunUrl(),
              remote.status().message());
  }
  std::set<int64_t> all = t.local;
  all.insert(t.remote.begin(), t.remote.end());
  t.steps.assign(all.rbegin(), all.rend());
  return t;
}

Status TierReader::Fetch(int64_t step, bool replace) {
  RETURN_IF_ERROR(local_.Writable("downloading a checkpoint into"));
  // An async save of this manager holds the run lock; let it finish (its
  // error stays for the next Wait).
  if (finish_save_) finish_save_();
  storage::FileSystem& fs = local_.fs();
  const std::string ctx =
      "downloading step " + std::to_string(step) + " from " + store_.Where(step);
  const std::string marker_path = local_.StepDir(step) + "/" + std::string(kCommitName);
  std::unique_lock<std::mutex> local = local_.LocalGuard();
  auto lock = local_.TryLock();
  if (!lock.ok()) {
    if (lock.status().code() != StatusCode::kFailedPrecondition || replace) {
      return lock.status().WithContext(ctx);
    }
    // Another process (e.g. another rank) is downloading or saving: wait for its copy.
    return WaitFor(
        clock_, opt_.barrier_timeout, [&] { return fs.Stat(marker_path).ok(); },
        ctx + ": another writer holds " + local_.LockPath() + " and did not commit the step");
  }
  if (fs.Stat(local_.StepDir(step)).ok()) {
    if (!replace) return Status::Ok();
    const std::string doomed = local_.DeletingDir(step);
    RETURN_IF_ERROR(fs.Rename(local_.StepDir(step), doomed).WithContext(ctx));
    RETURN_IF_ERROR(fs.SyncDir(local_.path()));
    RETURN_IF_ERROR(fs.RemoveAll(doomed));
  }
  const std::string tmp = local_.TmpDir(step);
  RETURN_IF_ERROR(fs.RemoveAll(tmp));
  RETURN_IF_ERROR(fs.CreateDir(tmp).WithContext(ctx));
  const auto t0 = clock_.Now();
  Status st = [&]() -> Status {
    ASSIGN_OR_RETURN(std::string marker, store_.DownloadStep(step, tmp, fs));
    RETURN_IF_ERROR(storage::WriteSmallFile(fs, tmp + "/" + std::string(kCommitName), marker));
    RETURN_IF_ERROR(fs.SyncDir(tmp));
    RETURN_IF_ERROR(fs.Rename(tmp, local_.StepDir(step)));
    return fs.SyncDir(local_.path());
  }();
  if (!st.ok()) {
    Status cleanup = fs.RemoveAll(tmp);
    if (!cleanup.ok()) log::warn("removing {}: {}", tmp, cleanup.message());
    return st.WithContext(ctx);
  }
  log::info("checkpoint step {} downloaded from {} in {:.2f} s", step, store_.Where(step),
            Seconds(clock_.Now() - t0));
  return Status::Ok();
}

template <typename T, typename Fn>
Result<T> TierReader::OnLocalCopy(int64_t step, const TierSteps& tiers, Fn attempt) {
  if (!tiers.local.count(step)) {
    if (!tiers.remote.count(step)) {
      return NotFound("step " + std::to_string(step) + " is committed neither in " + local_.path() +
                      " nor on " + store_.RunUrl());
    }
    RETURN_IF_ERROR(Fetch(step, /*replace=*/false));
    return attempt(step);
  }
  Result<T> r = attempt(step);
  if (r.ok() || r.status().code() != StatusCode::kDataLoss || !tiers.remote.count(step) ||
      local_.read_only()) {
    return r;
  }
  log::warn("local copy of checkpoint step {} is damaged ({}); downloading it from {}", step,
            r.status().message(), store_.Where(step));
  RETURN_IF_ERROR(Fetch(step, /*replace=*/true));
  return attempt(step);
}

Result<LatestResult> TierReader::Latest() {
  ASSIGN_OR_RETURN(TierSteps tiers, BothTiers());
  return NewestVerified(
      tiers.steps, opt_.fallback,
      [&](int64_t step) {
        return OnLocalCopy<VerifyReport>(step, tiers,
                                         [&](int64_t s) { return loader_.Verify(s, opt_.verify); });
      },
      Where());
}

Result<LoadedCheckpoint> TierReader::Load(std::optional<int64_t> step,
                                          std::span<const std::string> names) {
  ASSIGN_OR_RETURN(TierSteps tiers, BothTiers());
  if (step) {
    bool missing_name = false;
    return OnLocalCopy<LoadedCheckpoint>(
        *step, tiers, [&](int64_t s) { return loader_.LoadStep(s, names, &missing_name); });
  }
  return NewestLoadable(
      tiers.steps, opt_.fallback,
      [&](int64_t s, bool* missing_name) {
        return OnLocalCopy<LoadedCheckpoint>(
            s, tiers, [&](int64_t x) { return loader_.LoadStep(x, names, missing_name); });
      },
      Where());
}

}  // namespace gantry::ckpt::internal
