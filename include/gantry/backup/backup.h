// `gantry backup`: deduplicated, content-addressed, optionally encrypted
// backups of directories into an object store (file:// or Azure Blob). The
// repository layout and the object formats are in repository.h; this header
// has the operations.
//
// Guarantees:
//  - A backup becomes visible only when its manifest is written, last, with a
//    conditional create. An interrupted create leaves chunks but no backup; a
//    re-run finds those chunks (one listing of chunks/) and does not upload
//    them again.
//  - Restore checks every chunk against its name (and the AES-GCM tag) before
//    a byte reaches the target, writes each file to a temporary name and
//    renames it, and never writes outside the target: a manifest path that is
//    absolute, has "." / ".." / empty segments, or would pass through a
//    symlink is an error naming the path.
//  - Prune deletes manifests first, then only chunks that no remaining manifest
//    references and that are older than the prune start minus a grace period
//    (so chunks a concurrent backup has just uploaded survive). A prune cut
//    short anywhere (a crash, a failed Delete) leaves at worst unreferenced
//    chunks; running it again completes it.
//  - Create and prune exclude each other through lock objects (locks/): a
//    create refuses to start while a prune runs, a prune while a create or
//    another prune runs (FailedPrecondition naming the lock); locks of dead
//    processes are ignored and removed by the next prune. Without this, a
//    prune could delete old chunks that a running create reuses.
//  - Tested by crashing create/prune/gc at every store call (crash_test.cc),
//    SIGKILLing the real CLI (kill_integration_test.cc) and running each
//    operation inside the other (lock_test.cc).
//
// Errors: NotFound (no repository, unknown backup id), FailedPrecondition /
// PermissionDenied (missing or wrong key), InvalidArgument (bad options, a
// source that is not a directory), DataLoss (corrupt manifest or chunk, with
// the object's key), IoError (an unreadable source file or an unwritable
// target, with the path).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/backup/repository.h"
#include "gantry/core/clock.h"
#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry::backup {

inline constexpr int kManifestFormatVersion = 1;

enum class EntryType { kFile, kDir, kSymlink };

struct ChunkRef {
  ChunkId id;
  uint64_t size = 0;  // plaintext bytes
};

struct Entry {
  std::string path;  // relative, '/'-separated; the first segment is the source's name
  EntryType type = EntryType::kFile;
  uint32_t mode = 0;             // permission bits (07777)
  int64_t mtime_ns = 0;          // since the epoch
  uint64_t size = 0;             // files: bytes
  std::string target;            // symlinks
  std::vector<ChunkRef> chunks;  // files, in order
};

struct BackupStats {
  uint64_t files = 0, dirs = 0, symlinks = 0, skipped = 0;  // skipped: sockets, fifos, devices
  uint64_t bytes = 0;                                       // file bytes read
  uint64_t chunks = 0;                                      // chunk references
  uint64_t new_chunks = 0;                                  // chunks uploaded by this run
  uint64_t uploaded_bytes = 0;  // object bytes uploaded (after compression/encryption)
};

struct Manifest {
  std::string id;   // 16 hex characters
  std::string key;  // "backups/<YYYYMMDDTHHMMSS.uuuuuuZ>-<id>.json"
  std::string name;
  int64_t time_unix = 0;  // seconds since the epoch (UTC)
  std::string time;       // RFC 3339 UTC
  std::string hostname;
  std::map<std::string, std::string> tags;
  std::vector<std::string> sources;  // absolute paths as given
  std::vector<Entry> entries;        // parents before children
  BackupStats stats;

  Json ToJson() const;
  // Checks the structure: types, chunk ids, sizes adding up, safe paths, no
  // duplicate paths, parents present. DataLoss naming `origin` and the entry.
  static Result<Manifest> FromJson(const Json& j, std::string_view origin);
};

// A manifest path is safe when it is relative and every segment is a normal
// name (not empty, ".", ".." and without NUL). InvalidArgument naming it otherwise.
Status CheckSafePath(std::string_view path);

// Progress callback: bytes done of total and a short label (a file name).
using ProgressFn = std::function<void(uint64_t done, uint64_t total, std::string_view label)>;

struct CreateOptions {
  std::vector<std::string> sources;  // directories
  std::string name;                  // default: the sources' base names joined by ','
  std::map<std::string, std::string> tags;
  // fnmatch globs; a pattern without '/' matches any entry's base name, one
  // with '/' matches the path inside the backup ("models/*.tmp").
  std::vector<std::string> excludes;
  int parallelism = 4;           // chunks hashed, compressed, encrypted and uploaded at once
  const Clock* clock = nullptr;  // the backup's time; nullptr = the system clock
  ProgressFn progress;
};

Result<Manifest> CreateBackup(Repository& repo, const CreateOptions& options);

// One line of `list`: a manifest, or the error that made it unreadable.
struct Listing {
  std::string key;
  Manifest manifest;  // valid when error is empty
  std::string error;
  // DataLoss for a corrupt manifest, PermissionDenied / FailedPrecondition for a
  // key problem, the store's code (Unavailable, IoError, NotFound) when reading failed.
  StatusCode error_code = StatusCode::kOk;
};
// All backups, oldest first.
Result<std::vector<Listing>> ListBackups(Repository& repo);

// Reads one manifest by its key.
Result<Manifest> LoadManifest(Repository& repo, std::string_view key);
// Finds a backup by id (a unique prefix of at least 4 characters) or "latest"
// (the newest, limited to `name` when given). NotFound / InvalidArgument (ambiguous).
Result<Manifest> FindBackup(Repository& repo, std::string_view id_or_latest,
                            std::string_view name = {});

// True when `path` (inside the backup) matches one of the globs (see CreateOptions::excludes).
bool MatchesAny(const std::vector<std::string>& globs, std::string_view path);

struct RestoreOptions {
  std::string target;  // created when missing
  std::vector<std::string>
      includes;  // empty = everything; an included directory brings its subtree
  int parallelism = 4;
  ProgressFn progress;
};

struct RestoreResult {
  uint64_t files = 0, dirs = 0, symlinks = 0, bytes = 0;
};

Result<RestoreResult> Restore(Repository& repo, const Manifest& manifest,
                              const RestoreOptions& options);

struct VerifyOptions {
  bool read_data = false;  // download and check every chunk, not only its presence
  int parallelism = 4;
  ProgressFn progress;
};

struct VerifyReport {
  std::string key;  // the manifest
  std::string id;
  uint64_t chunks = 0;       // distinct chunks referenced
  uint64_t chunks_read = 0;  // downloaded and checked (read_data)
  uint64_t bytes_read = 0;
  std::vector<std::string> problems;  // empty = ok
  bool ok() const { return problems.empty(); }
};

// Verifies the given manifests (all of them when `keys` is empty). A manifest
// that cannot be read is a report with a problem, not an error; errors are for
// the store itself failing (listing).
Result<std::vector<VerifyReport>> Verify(Repository& repo, const std::vector<std::string>& keys,
                                         const VerifyOptions& options);

struct RetentionPolicy {
  int keep_last = 0;
  int keep_daily = 0;
  int keep_weekly = 0;
  int keep_monthly = 0;
  bool empty() const { return keep_last + keep_daily + keep_weekly + keep_monthly == 0; }
};

struct RetentionInput {
  std::string key;
  std::string name;
  int64_t time_unix = 0;
};
struct RetentionDecision {
  std::string key;
  bool keep = false;
  std::vector<std::string> reasons;  // "last", "daily", "weekly", "monthly"
};
// restic's semantics, per backup name, in UTC: keep-last N keeps the N newest;
// keep-daily N keeps the newest backup of each of the N most recent days that
// have a backup (weekly: ISO weeks, monthly: calendar months). Output order
// follows the input.
std::vector<RetentionDecision> ApplyRetention(const std::vector<RetentionInput>& backups,
                                              const RetentionPolicy& policy);

struct PruneOptions {
  RetentionPolicy policy;
  bool dry_run = false;
  // Unreferenced chunks modified within this long before the prune started
  // are kept: a backup running concurrently may be about to reference them.
  std::chrono::seconds gc_grace{std::chrono::hours(1)};
  const Clock* clock = nullptr;
  ProgressFn progress;
};

struct PruneResult {
  std::vector<RetentionDecision> decisions;  // one per readable backup
  std::vector<std::string> unreadable;       // manifests kept because they could not be read
  uint64_t chunks_total = 0;
  uint64_t chunks_referenced = 0;
  uint64_t chunks_deleted = 0;  // or that would be, with dry_run
  uint64_t bytes_deleted = 0;
  uint64_t chunks_kept_recent = 0;  // unreferenced but inside the grace period
};

// InvalidArgument when the policy keeps nothing. Refuses (FailedPrecondition)
// to collect garbage while any manifest is unreadable: its chunks are unknown;
// and to start while a create or another prune holds a lock (not with dry_run).
Result<PruneResult> Prune(Repository& repo, const PruneOptions& options);

}  // namespace gantry::backup
