// Local retention: the choice (pure) and the deletion (see retention.h).
#include "retention.h"

#include <algorithm>

#include "gantry/core/log.h"

namespace gantry::ckpt::internal {

bool RetentionEnabled(const Retention& r) {
  return r.keep_last > 0 || r.keep_every > 0 || r.keep_for.count() > 0;
}

std::vector<int64_t> ChooseDeletions(const Retention& r, std::span<const StepFacts> newest_first,
                                     int64_t newest_good, std::optional<int64_t> just_saved,
                                     int64_t now_unix_s) {
  int readable = 0;  // readable steps seen so far, newest first
  std::vector<int64_t> doomed;
  for (const StepFacts& f : newest_first) {
    bool recent = false;
    if (f.readable) recent = r.keep_last > 0 && ++readable <= r.keep_last;
    bool keep = f.step >= newest_good || (just_saved && f.step == *just_saved) || recent ||
                f.pinned || (r.keep_every > 0 && f.step % r.keep_every == 0) ||
                (f.readable && r.keep_for.count() > 0 &&
                 now_unix_s - f.created_unix_s < r.keep_for.count());
    if (!keep) doomed.push_back(f.step);
  }
  std::sort(doomed.begin(), doomed.end());
  return doomed;
}

Result<std::vector<int64_t>> LocalRetention::PruneLocked(std::optional<int64_t> just_saved) {
  std::vector<int64_t> deleted;
  if (!RetentionEnabled(rules_)) return deleted;
  ASSIGN_OR_RETURN(std::vector<int64_t> steps, dir_.CommittedSteps());
  // Newest first. The step just committed was checksummed as it was
  // written, so it is trusted without reading it back.
  std::optional<int64_t> newest_good;
  for (auto it = steps.rbegin(); it != steps.rend() && !newest_good; ++it) {
    if ((just_saved && *it == *just_saved) || loader_.Verify(*it, verify_).ok()) {
      newest_good = *it;
    }
  }
  if (!newest_good) return deleted;
  const int64_t now = NowUnix(clock_);
  std::vector<StepFacts> facts;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    StepFacts f;
    f.step = *it;
    auto m = dir_.ReadManifest(f.step);
    f.readable = m.ok();
    if (m.ok()) f.created_unix_s = m->created_unix_s;
    f.pinned = pinned_ && pinned_(f.step);
    facts.push_back(f);
  }
  for (int64_t step : ChooseDeletions(rules_, facts, *newest_good, just_saved, now)) {
    // Rename first so that a crash mid-delete never leaves a step that
    // looks committed but has lost files.
    const std::string doomed = dir_.DeletingDir(step);
    RETURN_IF_ERROR(dir_.fs().Rename(dir_.StepDir(step), doomed));
    RETURN_IF_ERROR(dir_.fs().SyncDir(dir_.path()));
    RETURN_IF_ERROR(dir_.fs().RemoveAll(doomed));
    deleted.push_back(step);
  }
  return deleted;
}

void LocalRetention::AfterUpload(int64_t step) {
  if (!RetentionEnabled(rules_)) return;
  std::unique_lock<std::mutex> local = dir_.LocalGuard();
  auto lock = dir_.TryLock();
  if (!lock.ok()) return;
  auto steps = dir_.CommittedSteps();
  if (!steps.ok() || steps->empty() || steps->back() != step) return;
  auto pruned = PruneLocked(step);
  if (!pruned.ok()) {
    log::warn("retention after uploading step {}: {}", step, pruned.status().message());
  }
}

}  // namespace gantry::ckpt::internal
