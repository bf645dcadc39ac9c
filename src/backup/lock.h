// Repository locks (internal to src/backup): `create` and `prune` exclude each
// other across processes and hosts, because prune's mark and sweep only sees
// committed manifests, while a running create already relies on chunks - those
// it uploaded and, above all, old ones it found stored and reuses without
// uploading. Without the exclusion a prune that forgets the old backup deletes
// those chunks and the new backup is committed with chunks missing.
//
// A lock is the object locks/<kind>-<16 hex>.json (sealed like a manifest in
// an encrypted repository) naming the holder's host, pid and the time it was
// last written. Acquiring writes the own lock first (a conditional create)
// and then lists every lock, so of two processes that start at once at least
// one sees the other (the stores are strongly consistent). A create stands
// aside for a live prune lock; a prune stands aside for any live lock. Both
// remove their own lock before failing, and when they finish.
//
// A lock is stale - ignored, and removed by the next prune - when
//  - it names this host and a pid that is not running (a killed process), or
//    this process's pid but no lock this process holds;
//  - it names another host and was not rewritten for `stale` (holders rewrite
//    theirs every `refresh`; a clock skew larger than the difference makes
//    other hosts' locks look stale early or late).
// Locks compare times on the callers' clocks (Clock::WallNow), never the store's.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "gantry/backup/repository.h"
#include "gantry/core/clock.h"
#include "gantry/core/status.h"

namespace gantry::backup::internal {

// 16 random hex characters (backup and lock ids).
std::string RandomId();

inline constexpr std::string_view kLockPrefix = "locks/";

enum class LockKind { kCreate, kPrune };

struct LockTiming {
  std::chrono::seconds refresh{std::chrono::minutes(5)};
  std::chrono::seconds stale{std::chrono::minutes(30)};
};

class RepoLock {
 public:
  // Takes a lock of `kind` on `repo`. FailedPrecondition naming the other
  // lock (its key, host, pid and time) and what to do when a live lock stands
  // in the way; store errors with the lock's key. A prune also removes the
  // stale locks it finds.
  static Result<std::unique_ptr<RepoLock>> Acquire(Repository& repo, LockKind kind,
                                                   const Clock& clock, LockTiming timing = {});
  // Stops refreshing and deletes the lock object. A failure is logged, not
  // returned: the work the lock protected is done, and the leftover lock is
  // stale as soon as this process exits.
  ~RepoLock();
  RepoLock(const RepoLock&) = delete;
  RepoLock& operator=(const RepoLock&) = delete;

  const std::string& key() const { return key_; }

 private:
  struct Refresher;
  RepoLock(Repository& repo, std::string key, std::string id);
  Repository& repo_;
  std::string key_;
  std::string id_;
  std::unique_ptr<Refresher> refresher_;
};

}  // namespace gantry::backup::internal
