// Listing, verifying and loading committed steps (internal to src/ckpt), for
// one tier at a time: the local run directory (RunDir) or, in direct mode,
// the object store (DirectRun), both seen through StepSource. The two-tier
// reads of Options::persist (TierReader, tiering.h) reuse Loader for the
// local copy and the fallback rules below.
//
// Threads: a Loader keeps no state of its own; its methods may run on any
// thread as long as the StepSource allows it (both implementations do). No
// lock is expected of callers: a step, once committed, is immutable, and
// one that retention deletes meanwhile fails like a damaged one.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "format.h"
#include "gantry/ckpt/manager.h"
#include "gantry/storage/filesystem.h"

namespace gantry::ckpt::internal {

// One thread's open shard files, by shard index (opened on first use).
using ShardFiles = std::map<int, std::unique_ptr<storage::ReadableFile>>;

// Where committed steps are read from.
class StepSource {
 public:
  virtual ~StepSource() = default;

  // The step's directory or store prefix (messages, CheckpointInfo::path).
  virtual std::string StepDir(int64_t step) const = 0;
  // Steps with a commit marker, oldest first.
  virtual Result<std::vector<int64_t>> CommittedSteps() = 0;
  // The manifest of a committed step, checked against the marker's SHA-256:
  // NotFound when the step is not committed, DataLoss naming the file when
  // the manifest is damaged.
  virtual Result<Manifest> ReadManifest(int64_t step) = 0;
  // DataLoss naming the shard when one is missing or has another size.
  virtual Status CheckShardSizes(int64_t step, const Manifest& m) = 0;
  // Fails now when shard `shard` cannot be read later (a local file that
  // does not open); OK where reads need no open.
  virtual Status ProbeShard(int64_t step, const Manifest& m, int shard) = 0;
  // Reads shard bytes [offset, offset + len) of `step` into `dst`, through
  // `files` (the calling thread's own descriptors) where the source uses them.
  virtual Status ReadShard(int64_t step, const Manifest& m, int shard, ShardFiles& files,
                           uint64_t offset, void* dst, size_t len) = 0;
};

class Loader {
 public:
  // `load_verify` is how Load checks what it reads (Options::verify);
  // `fallback` is Options::fallback; `where` names the run in NotFound
  // messages ("no committed checkpoint in <where>").
  Loader(StepSource& source, VerifyMode load_verify, bool fallback, std::string where)
      : source_(source), verify_(load_verify), fallback_(fallback), where_(std::move(where)) {}

  // Committed steps, oldest first; a step whose manifest does not read has
  // CheckpointInfo::error set.
  Result<std::vector<CheckpointInfo>> List();
  // CheckpointManager::Verify: sizes, then the chunks that `mode` selects.
  Result<VerifyReport> Verify(int64_t step, VerifyMode mode);
  // CheckpointManager::Latest and Load over this source alone.
  Result<LatestResult> Latest();
  Result<LoadedCheckpoint> Load(std::optional<int64_t> step, std::span<const std::string> names);
  // Loads one step (the tensors in `names`, or all), reading in pieces on up
  // to 8 threads that verify what they read. Sets *missing_name when a
  // requested tensor is not in the step.
  Result<LoadedCheckpoint> LoadStep(int64_t step, std::span<const std::string> names,
                                    bool* missing_name = nullptr);

 private:
  Status CheckChunk(int64_t step, const Manifest& m, const TensorEntry& t, size_t i,
                    const void* data, size_t len);

  StepSource& source_;
  const VerifyMode verify_;
  const bool fallback_;
  const std::string where_;
};

// The fallback rules of Latest() and Load() without a step, shared by one
// tier (Loader) and two (TierReader). `newest_first` are the candidate steps.
//
// NewestVerified: the first step that `verify` accepts; with `fallback` a
// step that fails is logged and skipped (LatestResult::skipped), without it
// its error is returned. NotFound "no committed checkpoint in <where>" when
// none is left (" verifies (N failed)" when some were skipped).
Result<LatestResult> NewestVerified(std::span<const int64_t> newest_first, bool fallback,
                                    const std::function<Result<VerifyReport>(int64_t)>& verify,
                                    std::string_view where);
// NewestLoadable: the first step that `load` loads. A failure is returned as
// it is, without trying older steps, when `fallback` is off, when `load` set
// its missing-name flag (the caller asked for a tensor the step lacks), and
// on FailedPrecondition (a newer format: an older step would silently lose
// progress); any other failure falls back to the next step. NotFound
// "no committed checkpoint in <where>" when none is left (" loads without
// errors" when some failed).
using StepLoadFn = std::function<Result<LoadedCheckpoint>(int64_t step, bool* missing_name)>;
Result<LoadedCheckpoint> NewestLoadable(std::span<const int64_t> newest_first, bool fallback,
                                        const StepLoadFn& load, std::string_view where);

}  // namespace gantry::ckpt::internal
