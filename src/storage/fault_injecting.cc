#include "gantry/storage/fault_injecting.h"

#include <cerrno>
#include <cstring>

namespace gantry::storage {
namespace {

Status FaultStatus(std::string_view what, const std::string& path, int err) {
  std::string msg = std::string(what) + " " + path + " (injected fault)";
  if (err == ENOSPC) return ResourceExhausted(msg + ": no space left on device");
  return IoError(msg, err);
}

class FaultyWritableFile : public WritableFile {
 public:
  FaultyWritableFile(FaultInjectingFileSystem& fs, std::unique_ptr<WritableFile> base,
                     std::string path)
      : fs_(fs), base_(std::move(base)), path_(std::move(path)) {}

  Result<size_t> Write(const void* data, size_t bytes) override {
    auto d = fs_.Check(FaultOp::kWrite, path_);
    if (d.fire && d.error != 0) return FaultStatus("writing", path_, d.error);
    if (d.fire && d.short_bytes < bytes) return base_->Write(data, d.short_bytes);
    return base_->Write(data, bytes);
  }
  Status Sync() override {
    auto d = fs_.Check(FaultOp::kSync, path_);
    if (d.fire) return FaultStatus("fsync", path_, d.error);
    return base_->Sync();
  }
  Status Close() override { return base_->Close(); }

 private:
  FaultInjectingFileSystem& fs_;
  std::unique_ptr<WritableFile> base_;
  std::string path_;
};

}  // namespace

FaultInjectingFileSystem::FaultInjectingFileSystem(FileSystem& base) : base_(base) {}

void FaultInjectingFileSystem::AddRule(FaultRule rule) {
  std::lock_guard<std::mutex> lock(mu_);
  rules_.push_back({std::move(rule), 0, false});
}

void FaultInjectingFileSystem::ClearRules() {
  std::lock_guard<std::mutex> lock(mu_);
  rules_.clear();
}

int FaultInjectingFileSystem::fired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fired_;
}

FaultInjectingFileSystem::Decision FaultInjectingFileSystem::Check(FaultOp op,
                                                                   const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Armed& a : rules_) {
    if (a.done || a.rule.op != op) continue;
    if (!a.rule.path_contains.empty() && path.find(a.rule.path_contains) == std::string::npos) {
      continue;
    }
    ++a.seen;
    if (a.seen < a.rule.nth) continue;
    if (!a.rule.sticky) a.done = true;
    ++fired_;
    return {true, a.rule.error, a.rule.short_bytes};
  }
  return {};
}

Result<std::unique_ptr<WritableFile>> FaultInjectingFileSystem::Create(const std::string& path,
                                                                       bool direct) {
  auto d = Check(FaultOp::kCreate, path);
  if (d.fire) return FaultStatus("creating", path, d.error);
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, base_.Create(path, direct));
  return std::unique_ptr<WritableFile>(new FaultyWritableFile(*this, std::move(f), path));
}

Result<std::unique_ptr<ReadableFile>> FaultInjectingFileSystem::Open(const std::string& path) {
  return base_.Open(path);
}

Status FaultInjectingFileSystem::CreateDir(const std::string& path) {
  auto d = Check(FaultOp::kCreateDir, path);
  if (d.fire) return FaultStatus("creating directory", path, d.error);
  return base_.CreateDir(path);
}

Status FaultInjectingFileSystem::CreateDirs(const std::string& path) {
  auto d = Check(FaultOp::kCreateDir, path);
  if (d.fire) return FaultStatus("creating directory", path, d.error);
  return base_.CreateDirs(path);
}

Status FaultInjectingFileSystem::SyncDir(const std::string& path) {
  auto d = Check(FaultOp::kSyncDir, path);
  if (d.fire) return FaultStatus("fsync directory", path, d.error);
  return base_.SyncDir(path);
}

Status FaultInjectingFileSystem::Rename(const std::string& from, const std::string& to) {
  auto d = Check(FaultOp::kRename, to);
  if (d.fire) return FaultStatus("renaming " + from + " to", to, d.error);
  return base_.Rename(from, to);
}

Status FaultInjectingFileSystem::Replace(const std::string& from, const std::string& to) {
  auto d = Check(FaultOp::kRename, to);
  if (d.fire) return FaultStatus("renaming " + from + " to", to, d.error);
  return base_.Replace(from, to);
}

Status FaultInjectingFileSystem::Link(const std::string& from, const std::string& to) {
  auto d = Check(FaultOp::kRename, to);
  if (d.fire) return FaultStatus("linking " + from + " to", to, d.error);
  return base_.Link(from, to);
}

Status FaultInjectingFileSystem::RemoveDir(const std::string& path) {
  auto d = Check(FaultOp::kRemove, path);
  if (d.fire) return FaultStatus("removing", path, d.error);
  return base_.RemoveDir(path);
}

Status FaultInjectingFileSystem::RemoveFile(const std::string& path) {
  auto d = Check(FaultOp::kRemove, path);
  if (d.fire) return FaultStatus("removing", path, d.error);
  return base_.RemoveFile(path);
}

Status FaultInjectingFileSystem::RemoveAll(const std::string& path) {
  auto d = Check(FaultOp::kRemove, path);
  if (d.fire) return FaultStatus("removing", path, d.error);
  return base_.RemoveAll(path);
}

Result<std::vector<DirEntry>> FaultInjectingFileSystem::ListDir(const std::string& path) {
  return base_.ListDir(path);
}

Result<FileInfo> FaultInjectingFileSystem::Stat(const std::string& path) {
  return base_.Stat(path);
}

Result<std::unique_ptr<Lock>> FaultInjectingFileSystem::TryLock(const std::string& path) {
  return base_.TryLock(path);
}

}  // namespace gantry::storage
