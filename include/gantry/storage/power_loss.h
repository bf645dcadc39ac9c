// PowerLossFileSystem: an in-memory FileSystem that models what a disk may
// hold after a power loss, for crash-consistency tests (in the spirit of
// LevelDB's fault-injection Env and of ALICE).
//
// The model is the weakest one POSIX allows, as Linux filesystems implement
// it:
// - File data is volatile until WritableFile::Sync() of that file. After a
//   crash an unsynced tail may be missing, present, or torn: present in size
//   but with some of its blocks (of `block_bytes`) never written (zeros).
// - A directory entry (a create, mkdir, rename, unlink) is volatile until
//   SyncDir() of the directory it changes; a rename between two directories
//   needs both. A rename is atomic: after a crash it happened or it did not.
// - Pending entry changes reach the disk in the order they were made (as a
//   journalling filesystem commits them), so a crash keeps every durable
//   change plus any prefix of the pending ones.
// The running process always sees everything it did (the page cache).
// RemoveAll unlinks a tree children first, in reverse name order.
//
// A crash is armed with CrashAfter(n): the first n mutating calls succeed,
// then that call and every later one (reads too: the process is gone) fail
// with IoError. PossibleStates() then lists every distinct disk the machine
// may reboot with, and FromImage() mounts one of them.
//
// Thread-safe; ReadableFile/WritableFile objects follow the FileSystem
// contract (one thread per file object).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gantry/storage/filesystem.h"

namespace gantry::storage {

// The contents of a disk: every path (absolute, "/" excluded) mapped to its
// file data, or to nullopt for a directory.
struct DiskImage {
  std::map<std::string, std::optional<std::string>> entries;

  bool operator==(const DiskImage& other) const = default;
  // One line per entry: "d /a" or "f /a/b 5120 <fnv64 of the data>".
  std::string Describe() const;
};

// One disk the machine may reboot with after a crash, and how it came about
// (for failure messages: "durable + 2 of 5 pending entry changes; torn file
// data").
struct CrashState {
  DiskImage image;
  std::string how;
};

class PowerLossFileSystem : public FileSystem {
 public:
  // An empty disk (only "/"), or one that holds `image`, all of it durable.
  // `block_bytes` is the granularity at which unsynced data tears.
  explicit PowerLossFileSystem(size_t block_bytes = kDirectIoAlignment);
  explicit PowerLossFileSystem(const DiskImage& image, size_t block_bytes = kDirectIoAlignment);
  ~PowerLossFileSystem() override;

  // Fails the mutating call after the next `n` ones and everything after
  // it; -1 disarms (the default).
  void CrashAfter(int64_t n);
  bool crashed() const;
  // Mutating calls that succeeded so far (the crash points of a workload).
  int64_t mutations() const;
  // Counts one mutating call made elsewhere on this machine (e.g. a store
  // that should die with the disk): the crash error when it is due, else OK.
  Status Tick(const std::string& what);
  // The last `n` mutating calls, oldest first ("rename /a -> /b"), for
  // failure messages.
  std::vector<std::string> RecentOps(size_t n) const;

  // Every distinct disk a power loss now may leave (at most `limit`; the
  // durable-only disk and the fully flushed one always among them).
  std::vector<CrashState> PossibleStates(size_t limit = 4096) const;
  // What the running process sees now (everything, as if flushed).
  DiskImage Visible() const;

  Result<std::unique_ptr<WritableFile>> Create(const std::string& path, bool direct) override;
  Result<std::unique_ptr<ReadableFile>> Open(const std::string& path) override;
  Status CreateDir(const std::string& path) override;
  Status CreateDirs(const std::string& path) override;
  Status SyncDir(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status Replace(const std::string& from, const std::string& to) override;
  Status Link(const std::string& from, const std::string& to) override;
  Status RemoveFile(const std::string& path) override;
  Status RemoveDir(const std::string& path) override;
  Status RemoveAll(const std::string& path) override;
  Result<std::vector<DirEntry>> ListDir(const std::string& path) override;
  Result<FileInfo> Stat(const std::string& path) override;
  Result<std::unique_ptr<Lock>> TryLock(const std::string& path) override;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// What ExploreCrashes did.
struct CrashExploration {
  int64_t operations = 0;      // mutating calls of the uncrashed workload
  int64_t crash_points = 0;    // workloads run with a crash
  int64_t states_checked = 0;  // distinct post-crash disks checked
};

// Runs `workload` on an empty PowerLossFileSystem without a crash to count
// its mutating calls N, then once for every crash point 0..N-1 with a fresh
// disk, and calls `check` on a filesystem mounted from every distinct disk
// that crash may leave. `check` returns false to stop (a failure was
// reported). `workload` must be deterministic in its filesystem calls.
CrashExploration ExploreCrashes(
    const std::function<void(PowerLossFileSystem& fs)>& workload,
    const std::function<bool(int64_t crash_point, PowerLossFileSystem& recovered,
                             const CrashState& state)>& check,
    size_t block_bytes = kDirectIoAlignment);

}  // namespace gantry::storage
