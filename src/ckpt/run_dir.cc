// RunDir: the local run directory (see run_dir.h).
#include "run_dir.h"

#include <algorithm>

#include "gantry/core/log.h"

namespace gantry::ckpt::internal {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(20);

}  // namespace

std::string RunDir::StepDir(int64_t step) const { return dir_ + "/" + StepName(step); }

std::string RunDir::TmpDir(int64_t step) const {
  return dir_ + "/" + std::string(kTmpPrefix) + StepName(step);
}

std::string RunDir::DeletingDir(int64_t step) const {
  return dir_ + "/" + std::string(kTmpPrefix) + "delete-" + StepName(step);
}

std::string RunDir::LockPath() const { return dir_ + "/" + std::string(kLockName); }

Status RunDir::Writable(std::string_view what) const {
  if (!read_only_) return Status::Ok();
  return FailedPrecondition(std::string(what) + " " + dir_ +
                            " refused: the manager was opened read-only");
}

Result<std::unique_ptr<storage::Lock>> RunDir::LockRun(std::string_view what) {
  auto lock = fs_.TryLock(LockPath());
  if (!lock.ok() && lock.status().code() == StatusCode::kFailedPrecondition) {
    return AlreadyExists(std::string(what) + " refused: " + lock.status().message());
  }
  return lock;
}

Status RunDir::CleanStale() {
  ASSIGN_OR_RETURN(std::vector<storage::DirEntry> entries, fs_.ListDir(dir_));
  for (const storage::DirEntry& e : entries) {
    if (!e.name.starts_with(kTmpPrefix)) continue;
    log::info("removing stale checkpoint temporary {}/{}", dir_, e.name);
    RETURN_IF_ERROR(fs_.RemoveAll(dir_ + "/" + e.name));
  }
  return Status::Ok();
}

Result<std::vector<int64_t>> RunDir::CommittedSteps() {
  ASSIGN_OR_RETURN(std::vector<storage::DirEntry> entries, fs_.ListDir(dir_));
  std::vector<int64_t> steps;
  for (const storage::DirEntry& e : entries) {
    int64_t step;
    if (!e.is_dir || !ParseStepName(e.name, &step)) continue;
    if (fs_.Stat(dir_ + "/" + e.name + "/" + std::string(kCommitName)).ok()) {
      steps.push_back(step);
    }
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

Result<Manifest> RunDir::ReadManifest(int64_t step) {
  const std::string dir = StepDir(step);
  const std::string commit_path = dir + "/" + std::string(kCommitName);
  const std::string manifest_path = dir + "/" + std::string(kManifestName);
  auto marker = storage::ReadSmallFile(fs_, commit_path, kMaxMarkerBytes);
  if (!marker.ok()) {
    if (marker.status().code() == StatusCode::kNotFound) {
      return NotFound("step " + std::to_string(step) + " is not committed (no " + commit_path +
                      ")");
    }
    return marker.status();
  }
  ASSIGN_OR_RETURN(std::string text, storage::ReadSmallFile(fs_, manifest_path, kMaxManifestBytes));
  std::string want = "sha256 " + Sha256Hex(text) + "\n";
  if (*marker != want) {
    return DataLoss(manifest_path + " does not match the SHA-256 in " + commit_path +
                    "; the manifest is corrupt");
  }
  auto j = ParseJson(text, manifest_path);
  if (!j.ok()) return DataLoss(j.status().message());
  return ManifestFromJson(*j, manifest_path);
}

Status RunDir::CheckShardSizes(int64_t step, const Manifest& m) {
  for (const ShardEntry& s : m.shards) {
    const std::string path = StepDir(step) + "/" + s.file;
    auto fi = fs_.Stat(path);
    if (!fi.ok()) {
      return DataLoss("shard " + path + " of step " + std::to_string(step) + " is missing (" +
                      fi.status().message() + ")");
    }
    if (fi->size != s.bytes) {
      return DataLoss("shard " + path + " is truncated or extended: " + std::to_string(fi->size) +
                      " bytes, the manifest says " + std::to_string(s.bytes));
    }
  }
  return Status::Ok();
}

Status RunDir::ProbeShard(int64_t step, const Manifest& m, int shard) {
  ASSIGN_OR_RETURN(std::unique_ptr<storage::ReadableFile> probe,
                   fs_.Open(StepDir(step) + "/" + m.shards[shard].file));
  return Status::Ok();
}

Status RunDir::ReadShard(int64_t step, const Manifest& m, int shard, ShardFiles& files,
                         uint64_t offset, void* dst, size_t len) {
  const std::string path = StepDir(step) + "/" + m.shards[shard].file;
  if (!files.count(shard)) {
    ASSIGN_OR_RETURN(files[shard], fs_.Open(path));
  }
  return storage::ReadExact(*files[shard], offset, dst, len, path);
}

Status WaitFor(const Clock& clock, std::chrono::seconds timeout, const std::function<bool()>& done,
               const std::string& what) {
  auto deadline = clock.Now() + timeout;
  while (!done()) {
    if (clock.Now() >= deadline) {
      return DeadlineExceeded(what + " within " + std::to_string(timeout.count()) +
                              " s (barrier_timeout); check that every rank is saving this step");
    }
    clock.SleepFor(kPollInterval);
  }
  return Status::Ok();
}

}  // namespace gantry::ckpt::internal
