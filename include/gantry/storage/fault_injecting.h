// FaultInjectingFileSystem: wraps another FileSystem and makes chosen calls
// fail, so tests can check that every storage error is reported clearly and
// leaves committed checkpoints intact. Thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gantry/storage/filesystem.h"

namespace gantry::storage {

enum class FaultOp { kCreate, kWrite, kSync, kSyncDir, kRename, kCreateDir, kRemove };

struct FaultRule {
  FaultOp op = FaultOp::kWrite;
  // The rule fires on the nth matching call (1-based) counted from when the
  // rule was added, and on every later one if `sticky`.
  int nth = 1;
  bool sticky = false;
  int error = 5;  // errno to report (EIO); 0 with short_bytes: a short write
  // For kWrite: write only this many bytes and report success (a short
  // write). Ignored unless error == 0.
  size_t short_bytes = 0;
  // Only calls whose path contains this substring match (empty: all).
  std::string path_contains;
};

class FaultInjectingFileSystem : public FileSystem {
 public:
  // `base` must outlive this object.
  explicit FaultInjectingFileSystem(FileSystem& base);

  void AddRule(FaultRule rule);
  void ClearRules();
  // Number of rules that have fired so far.
  int fired() const;

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

  // What a call should do: nothing (nullopt-like: fire == false), fail with
  // `error`, or write short. Used by the wrapped files.
  struct Decision {
    bool fire = false;
    int error = 0;
    size_t short_bytes = 0;
  };
  Decision Check(FaultOp op, const std::string& path);

 private:
  struct Armed {
    FaultRule rule;
    int seen = 0;
    bool done = false;
  };
  FileSystem& base_;
  mutable std::mutex mu_;
  std::vector<Armed> rules_;
  int fired_ = 0;
};

}  // namespace gantry::storage
