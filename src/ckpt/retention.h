// Retention of the local tier (internal to src/ckpt): which committed steps
// Options::retention deletes, and deleting them. The rules are those of
// gantry/ckpt/manager.h's Retention: a step is kept if any rule keeps it;
// never deleted are the step a save just committed, the newest step that
// verifies and every step newer than it (a failed verification is not a
// reason to delete; when nothing verifies, nothing is deleted), and a step
// still queued for upload. Steps whose manifest cannot be read do not count
// toward keep_last. The store's own retention is StoreTier::Prune (tiering.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "gantry/ckpt/manager.h"
#include "gantry/core/clock.h"
#include "load.h"
#include "run_dir.h"

namespace gantry::ckpt::internal {

// False when every rule is zero (retention keeps everything).
bool RetentionEnabled(const Retention& r);

// What the choice needs to know of one committed step.
struct StepFacts {
  int64_t step = 0;
  bool readable = false;       // its manifest reads
  int64_t created_unix_s = 0;  // from the manifest (when readable)
  bool pinned = false;         // queued for upload
};

// The steps to delete, ascending, given every committed step newest first,
// the newest step that verifies (`newest_good`), the step just committed, if
// any, and the time. Pure; the rules are above.
std::vector<int64_t> ChooseDeletions(const Retention& r, std::span<const StepFacts> newest_first,
                                     int64_t newest_good, std::optional<int64_t> just_saved,
                                     int64_t now_unix_s);

class LocalRetention {
 public:
  // `pinned(step)` says whether the step waits for its upload; it is called
  // under the run lock, so it must not take it (Uploader::Pending does not).
  // `verify` is Options::verify (how the newest good step is found).
  LocalRetention(RunDir& dir, Loader& loader, const Retention& rules, VerifyMode verify,
                 const Clock& clock, std::function<bool(int64_t)> pinned)
      : dir_(dir),
        loader_(loader),
        rules_(rules),
        verify_(verify),
        clock_(clock),
        pinned_(std::move(pinned)) {}

  // Applies the rules and deletes (rename to RunDir::DeletingDir, fsync the
  // run directory, remove) what they give up; returns the deleted steps.
  // `just_saved` is trusted without reading it back (it was checksummed as
  // it was written). The caller holds LocalGuard() and the run lock; any
  // thread.
  Result<std::vector<int64_t>> PruneLocked(std::optional<int64_t> just_saved);

  // The uploader's catch-up, on its thread: local retention skipped the steps
  // that waited for their upload, so once the queue has caught up (`step` is
  // the last queued and still the newest local step, so it is trusted like a
  // step just saved) it runs again. Takes LocalGuard() and the run lock
  // itself and does nothing when another writer holds it (a save that
  // commits a newer step meanwhile makes it skip; that step's upload
  // catches up instead). Errors go to the log.
  void AfterUpload(int64_t step);

 private:
  RunDir& dir_;
  Loader& loader_;
  const Retention rules_;
  const VerifyMode verify_;
  const Clock& clock_;
  const std::function<bool(int64_t)> pinned_;
};

}  // namespace gantry::ckpt::internal
