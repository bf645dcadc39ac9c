// LocalCommitter: the crash-atomic commit protocol of the local tier (see
// commit.h). The order of writes, fsyncs and renames here is the protocol;
// changing it changes what a crash can leave behind.
#include "commit.h"

#include <cstdio>
#include <memory>
#include <set>
#include <vector>

#include "gantry/comm/communicator.h"
#include "gantry/core/log.h"
#include "gantry/storage/filesystem.h"

namespace gantry::ckpt::internal {
namespace {

constexpr size_t kWriteBlock = 16u << 20;  // large aligned writes keep the device busy

std::string RankPartPath(const std::string& tmp, int rank) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "/rank-%05d.json", rank);
  return tmp + buf;
}

}  // namespace

Status LocalCommitter::WriteAndCommit() {
  // See RunDir::LocalGuard: the uploader's catch-up retention must not hold
  // the run lock when this save tries to take it.
  std::unique_lock<std::mutex> local = dir_.LocalGuard();
  storage::FileSystem& fs = dir_.fs();
  const StagedShard& s = pool_.shard();
  const std::string tmp = dir_.TmpDir(s.step);
  const std::string ctx = "saving step " + std::to_string(s.step) + " to " + dir_.path();
  std::unique_ptr<storage::Lock> lock;
  if (opt_.rank == 0) {
    ASSIGN_OR_RETURN(lock, dir_.LockRun(ctx));
    if (fs.Stat(dir_.StepDir(s.step)).ok()) {
      return AlreadyExists(ctx + ": " + dir_.StepDir(s.step) +
                           " is already committed; checkpoints are immutable, use a new step");
    }
    RETURN_IF_ERROR(dir_.CleanStale().WithContext(ctx));
    RETURN_IF_ERROR(fs.CreateDir(tmp).WithContext(ctx));
  }
  Status st = WriteRankPart(tmp);
  if (opt_.rank == 0) {
    // Once the shard barriers are passed, the final barrier is reached
    // even when the commit fails, so the other ranks learn the outcome
    // instead of waiting in it.
    const bool in_final_barrier = st.ok() && opt_.comm != nullptr;
    if (st.ok()) st = Commit(tmp);
    if (!st.ok()) {
      Status cleanup = fs.RemoveAll(tmp);
      if (!cleanup.ok()) log::warn("removing {} after a failed save: {}", tmp, cleanup.message());
    } else {
      // Queued before local retention runs, which never removes a step
      // that waits for its upload.
      if (enqueue_upload_) enqueue_upload_(s.step);
      auto pruned = retention_.PruneLocked(s.step);
      if (!pruned.ok()) log::warn("retention after step {}: {}", s.step, pruned.status().message());
    }
    if (in_final_barrier) {
      Status barrier = opt_.comm->Barrier();
      if (st.ok()) st = barrier;
    }
    return st.WithContext(ctx);
  }
  if (!st.ok()) return st.WithContext(ctx);
  // Other ranks return once rank 0 has committed. The temporary directory
  // vanishes either by the commit rename or by rank 0 giving up, so its
  // absence without a committed step means the save failed on rank 0.
  if (opt_.comm) RETURN_IF_ERROR(opt_.comm->Barrier());
  const std::string marker = dir_.StepDir(s.step) + "/" + std::string(kCommitName);
  bool abandoned = false;
  RETURN_IF_ERROR(WaitFor(
      clock_, opt_.barrier_timeout,
      [&] {
        if (fs.Stat(marker).ok()) return true;
        abandoned = !fs.Stat(tmp).ok() && !fs.Stat(marker).ok();
        return abandoned;
      },
      ctx + ": rank 0 did not commit"));
  if (abandoned) {
    return FailedPrecondition(ctx +
                              ": rank 0 abandoned the step (see its error); nothing was committed");
  }
  return Status::Ok();
}

Status LocalCommitter::WriteRankPart(const std::string& tmp) {
  storage::FileSystem& fs = dir_.fs();
  const StagedShard& s = pool_.shard();
  if (opt_.comm) {
    RETURN_IF_ERROR(opt_.comm->Barrier());  // rank 0 has created tmp
  } else if (opt_.rank != 0) {
    RETURN_IF_ERROR(WaitFor(
        clock_, opt_.barrier_timeout, [&] { return fs.Stat(tmp).ok(); },
        "rank 0 did not start step " + std::to_string(s.step)));
  }
  const std::string file = ShardName(opt_.rank, opt_.world_size);
  const std::string path = tmp + "/" + file;
  const char* base = pool_.data();
  {
    ASSIGN_OR_RETURN(std::unique_ptr<storage::WritableFile> f, fs.Create(path, opt_.direct_io));
    const size_t total = s.file_bytes;
    const size_t aligned = total / storage::kDirectIoAlignment * storage::kDirectIoAlignment;
    size_t written = 0;
    while (written < total) {
      // Whole aligned blocks while the copy is in progress; the unaligned
      // tail (written buffered) last.
      size_t end = written < aligned ? std::min(written + kWriteBlock, aligned) : total;
      pool_.WaitReady(end);
      RETURN_IF_ERROR(storage::WriteAll(*f, base + written, end - written, path));
      written = end;
    }
    RETURN_IF_ERROR(f->Sync());
    RETURN_IF_ERROR(f->Close());
  }
  // Rank 0 keeps its own record in memory; the others publish theirs next
  // to their shard, after the shard is durable.
  // The record appears under its final name only complete (rename), since
  // rank 0 reads it as soon as the name exists.
  if (opt_.rank != 0) {
    ShardEntry shard{file, opt_.rank, s.file_bytes};
    const std::string part = RankPartPath(tmp, opt_.rank);
    RETURN_IF_ERROR(
        storage::WriteSmallFile(fs, part + ".partial", RankPartToJson(shard, s.entries).dump()));
    RETURN_IF_ERROR(fs.Rename(part + ".partial", part));
  }
  if (opt_.comm) RETURN_IF_ERROR(opt_.comm->Barrier());  // every shard is durable
  return Status::Ok();
}

Status LocalCommitter::Commit(const std::string& tmp) {
  storage::FileSystem& fs = dir_.fs();
  const StagedShard& s = pool_.shard();
  Manifest m = BaseManifest(s, opt_.world_size, opt_.chunk_bytes, NowUnix(clock_));
  // The storage barrier: every rank's record appears only after its shard
  // was fsynced.
  RETURN_IF_ERROR(WaitFor(
      clock_, opt_.barrier_timeout,
      [&] {
        for (int r = 1; r < opt_.world_size; ++r) {
          if (!fs.Stat(RankPartPath(tmp, r)).ok()) return false;
        }
        return true;
      },
      "not every rank wrote its shard of step " + std::to_string(s.step)));
  std::set<std::string> names;
  for (int r = 0; r < opt_.world_size; ++r) {
    const std::string part_path = RankPartPath(tmp, r);
    ShardEntry shard{ShardName(0, opt_.world_size), 0, s.file_bytes};
    std::vector<TensorEntry> tensors = s.entries;
    if (r != 0) {
      tensors.clear();
      ASSIGN_OR_RETURN(std::string text, storage::ReadSmallFile(fs, part_path, kMaxManifestBytes));
      ASSIGN_OR_RETURN(Json j, ParseJson(text, part_path));
      RETURN_IF_ERROR(RankPartFromJson(j, part_path, &shard, &tensors));
      RETURN_IF_ERROR(fs.RemoveFile(part_path));
    }
    ASSIGN_OR_RETURN(storage::FileInfo fi, fs.Stat(tmp + "/" + shard.file));
    if (fi.size != shard.bytes) {
      return DataLoss(tmp + "/" + shard.file + " has " + std::to_string(fi.size) +
                      " bytes but rank " + std::to_string(r) + " wrote " +
                      std::to_string(shard.bytes));
    }
    for (TensorEntry& t : tensors) {
      if (!names.insert(t.name).second) {
        return InvalidArgument("tensor '" + t.name +
                               "' is saved by more than one rank; "
                               "give each rank's tensors distinct names");
      }
      t.shard = static_cast<int>(m.shards.size());
      m.tensors.push_back(std::move(t));
    }
    m.shards.push_back(std::move(shard));
  }
  const std::string manifest = ManifestToJson(m).dump(1) + "\n";
  RETURN_IF_ERROR(storage::WriteSmallFile(fs, tmp + "/" + std::string(kManifestName), manifest));
  // The marker is written last and carries the manifest digest, so a
  // manifest that does not match its marker is detected on load.
  RETURN_IF_ERROR(storage::WriteSmallFile(fs, tmp + "/" + std::string(kCommitName),
                                          "sha256 " + Sha256Hex(manifest) + "\n"));
  RETURN_IF_ERROR(fs.SyncDir(tmp));
  RETURN_IF_ERROR(fs.Rename(tmp, dir_.StepDir(s.step)));
  // Without this fsync a power loss could forget the rename.
  return fs.SyncDir(dir_.path());
}

}  // namespace gantry::ckpt::internal
