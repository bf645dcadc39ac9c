// StoreTier: checkpoints on an object store (see tiering.h).
#include "tiering.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <set>

#include "gantry/core/log.h"

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
  if (r.keep_last <= 0 && r.keep_every <= 0 && r.keep_for.count() <= 0) return deleted;
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

}  // namespace gantry::ckpt::internal
