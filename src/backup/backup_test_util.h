// Test support for src/backup: a store wrapper that fails on demand or counts
// calls, and helpers that build and compare directory trees.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gantry/storage/object_store.h"
#include "testing/temp_dir.h"

namespace gantry::backup::testing {

namespace fs = std::filesystem;

inline std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = rng();
    for (size_t j = 0; j < 8 && i + j < n; ++j) s[i + j] = static_cast<char>(v >> (8 * j));
  }
  return s;
}

inline void WriteFile(const fs::path& p, const std::string& data) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << data;
}

inline std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Forwards to `base`; after `fail_after_puts` Put attempts every further Put
// fails with Unavailable (an interrupted upload). Counts Puts of chunks.
// Deletes fail the same way after `fail_after_deletes` attempts, and always
// for keys containing `fail_delete_matching` (when set); a failed Delete
// leaves the object in place.
class FlakyStore : public storage::ObjectStore {
 public:
  explicit FlakyStore(storage::ObjectStore& base) : base_(base) {}
  std::atomic<int64_t> fail_after_puts{-1};  // -1: never fail
  std::atomic<int64_t> puts{0};              // successful
  std::atomic<int64_t> attempts{0};  // every Put, so concurrent Puts fail exactly at the limit
  std::atomic<int64_t> chunk_puts{0};
  std::atomic<int64_t> fail_after_deletes{-1};  // -1: never fail
  std::atomic<int64_t> delete_attempts{0};      // every Delete
  std::atomic<int64_t> deletes{0};              // successful
  std::atomic<int64_t> failed_deletes{0};

  void FailDeletesMatching(std::string substring) {
    std::lock_guard lock(mu_);
    fail_delete_matching_ = std::move(substring);
  }

  std::string url() const override { return base_.url(); }
  Status Put(std::string_view key, std::span<const std::byte> data,
             const storage::PutOptions& o) override {
    int64_t limit = fail_after_puts.load();
    if (limit >= 0 && attempts++ >= limit) {
      return Unavailable("injected failure putting " + std::string(key));
    }
    Status s = base_.Put(key, data, o);
    if (s.ok()) {
      ++puts;
      if (key.starts_with("chunks/")) ++chunk_puts;
    }
    return s;
  }
  Status PutFile(std::string_view key, const std::string& path,
                 const storage::PutOptions& o) override {
    return base_.PutFile(key, path, o);
  }
  Status PutStream(std::string_view key, const storage::ReadFn& read,
                   const storage::PutOptions& o) override {
    return base_.PutStream(key, read, o);
  }
  Result<std::string> Get(std::string_view key) override { return base_.Get(key); }
  Status GetRange(std::string_view key, uint64_t off, std::span<std::byte> out) override {
    return base_.GetRange(key, off, out);
  }
  Status GetFile(std::string_view key, const std::string& path) override {
    return base_.GetFile(key, path);
  }
  Result<storage::ObjectInfo> Stat(std::string_view key) override { return base_.Stat(key); }
  Result<storage::ListPage> List(std::string_view prefix, std::string_view next,
                                 int max_results) override {
    return base_.List(prefix, next, max_results);
  }
  Status Delete(std::string_view key) override {
    const int64_t limit = fail_after_deletes.load();
    const int64_t n = delete_attempts++;
    bool fail = limit >= 0 && n >= limit;
    {
      std::lock_guard lock(mu_);
      if (!fail_delete_matching_.empty() &&
          key.find(fail_delete_matching_) != std::string_view::npos) {
        fail = true;
      }
    }
    if (fail) {
      ++failed_deletes;
      return Unavailable("injected failure deleting " + std::string(key));
    }
    Status s = base_.Delete(key);
    if (s.ok()) ++deletes;
    return s;
  }

 private:
  storage::ObjectStore& base_;
  std::mutex mu_;
  std::string fail_delete_matching_;
};

// Simulated process death for crash tests: forwards to `base` and numbers
// every call (reads, listings and writes alike, in the order they start);
// from call number `crash_at` on, every call fails with Unavailable without
// reaching `base`, as if the client had died there. The store's own Puts are
// atomic, so after a "crash" each object is wholly present or absent - the
// state a killed process leaves in an object store. With concurrent callers
// exactly `crash_at` calls get through (which ones depends on scheduling).
class CrashStore : public storage::ObjectStore {
 public:
  explicit CrashStore(storage::ObjectStore& base, int64_t crash_at = -1)
      : base_(base), crash_at_(crash_at) {}
  int64_t calls() const { return calls_.load(); }  // every call, refused ones included
  bool crashed() const { return crash_at_ >= 0 && calls_.load() > crash_at_; }
  // "Delete locks/x.json": the call the crash refused first (the one numbered
  // `crash_at` without concurrency); empty when none was refused.
  std::string first_refused() const {
    std::lock_guard lock(mu_);
    return first_refused_;
  }

  std::string url() const override { return base_.url(); }
  Status Put(std::string_view key, std::span<const std::byte> data,
             const storage::PutOptions& o) override {
    RETURN_IF_ERROR(Gate("Put", key));
    return base_.Put(key, data, o);
  }
  Status PutFile(std::string_view key, const std::string& path,
                 const storage::PutOptions& o) override {
    RETURN_IF_ERROR(Gate("PutFile", key));
    return base_.PutFile(key, path, o);
  }
  Status PutStream(std::string_view key, const storage::ReadFn& read,
                   const storage::PutOptions& o) override {
    RETURN_IF_ERROR(Gate("PutStream", key));
    return base_.PutStream(key, read, o);
  }
  Result<std::string> Get(std::string_view key) override {
    RETURN_IF_ERROR(Gate("Get", key));
    return base_.Get(key);
  }
  Status GetRange(std::string_view key, uint64_t off, std::span<std::byte> out) override {
    RETURN_IF_ERROR(Gate("GetRange", key));
    return base_.GetRange(key, off, out);
  }
  Status GetFile(std::string_view key, const std::string& path) override {
    RETURN_IF_ERROR(Gate("GetFile", key));
    return base_.GetFile(key, path);
  }
  Result<storage::ObjectInfo> Stat(std::string_view key) override {
    RETURN_IF_ERROR(Gate("Stat", key));
    return base_.Stat(key);
  }
  Result<storage::ListPage> List(std::string_view prefix, std::string_view next,
                                 int max_results) override {
    RETURN_IF_ERROR(Gate("List", prefix));
    return base_.List(prefix, next, max_results);
  }
  Status Delete(std::string_view key) override {
    RETURN_IF_ERROR(Gate("Delete", key));
    return base_.Delete(key);
  }

 private:
  Status Gate(std::string_view op, std::string_view key) {
    const int64_t n = calls_++;
    if (crash_at_ >= 0 && n >= crash_at_) {
      {
        std::lock_guard lock(mu_);
        if (first_refused_.empty()) first_refused_ = std::string(op) + " " + std::string(key);
      }
      return Unavailable("simulated crash: store call " + std::to_string(n) + " (" +
                         std::string(op) + " " + std::string(key) + ") and every later one fail");
    }
    return Status::Ok();
  }
  storage::ObjectStore& base_;
  const int64_t crash_at_;
  std::atomic<int64_t> calls_{0};
  mutable std::mutex mu_;
  std::string first_refused_;
};

// Forwards to `base`, first calling `hook(op, key)` for every call (op is
// "Put", "Get", "List", "Delete", ...; key is the prefix for List). A hook can
// run another client against the base store at an exact point of this one's
// work. Set `hook` before use; it is called from the caller's threads.
class HookStore : public storage::ObjectStore {
 public:
  using Hook = std::function<void(std::string_view op, std::string_view key)>;
  HookStore(storage::ObjectStore& base, Hook hook) : base_(base), hook_(std::move(hook)) {}

  std::string url() const override { return base_.url(); }
  Status Put(std::string_view key, std::span<const std::byte> data,
             const storage::PutOptions& o) override {
    hook_("Put", key);
    return base_.Put(key, data, o);
  }
  Status PutFile(std::string_view key, const std::string& path,
                 const storage::PutOptions& o) override {
    hook_("PutFile", key);
    return base_.PutFile(key, path, o);
  }
  Status PutStream(std::string_view key, const storage::ReadFn& read,
                   const storage::PutOptions& o) override {
    hook_("PutStream", key);
    return base_.PutStream(key, read, o);
  }
  Result<std::string> Get(std::string_view key) override {
    hook_("Get", key);
    return base_.Get(key);
  }
  Status GetRange(std::string_view key, uint64_t off, std::span<std::byte> out) override {
    hook_("GetRange", key);
    return base_.GetRange(key, off, out);
  }
  Status GetFile(std::string_view key, const std::string& path) override {
    hook_("GetFile", key);
    return base_.GetFile(key, path);
  }
  Result<storage::ObjectInfo> Stat(std::string_view key) override {
    hook_("Stat", key);
    return base_.Stat(key);
  }
  Result<storage::ListPage> List(std::string_view prefix, std::string_view next,
                                 int max_results) override {
    hook_("List", prefix);
    return base_.List(prefix, next, max_results);
  }
  Status Delete(std::string_view key) override {
    hook_("Delete", key);
    return base_.Delete(key);
  }

 private:
  storage::ObjectStore& base_;
  Hook hook_;
};

// A thread-safe in-memory object store with the contract of the real ones:
// atomic Puts, conditional creates (AlreadyExists), sorted paged listings
// (`page_size` objects per page unless the caller asks for fewer), NotFound
// for a missing key. Every object's modified_unix is `mtime`.
class MemStore : public storage::ObjectStore {
 public:
  explicit MemStore(int page_size = 1000, int64_t mtime = 1'700'000'000)
      : page_size_(page_size), mtime_(mtime) {}

  std::string url() const override { return "mem://test"; }
  Status Put(std::string_view key, std::span<const std::byte> data,
             const storage::PutOptions& o) override {
    std::lock_guard lock(mu_);
    std::string k(key);
    if (o.if_none_match && objects_.count(k)) {
      return AlreadyExists("object '" + k + "' in " + url() + " already exists");
    }
    objects_[k] = std::string(reinterpret_cast<const char*>(data.data()), data.size());
    return Status::Ok();
  }
  Status PutFile(std::string_view key, const std::string& path,
                 const storage::PutOptions& o) override {
    std::string data = ReadAll(path);
    return Put(key, std::as_bytes(std::span(data.data(), data.size())), o);
  }
  Status PutStream(std::string_view key, const storage::ReadFn& read,
                   const storage::PutOptions& o) override {
    std::string data;
    std::vector<std::byte> buf(1 << 16);
    for (;;) {
      ASSIGN_OR_RETURN(size_t n, read(buf));
      if (n == 0) break;
      data.append(reinterpret_cast<const char*>(buf.data()), n);
    }
    return Put(key, std::as_bytes(std::span(data.data(), data.size())), o);
  }
  Result<std::string> Get(std::string_view key) override {
    std::lock_guard lock(mu_);
    auto it = objects_.find(std::string(key));
    if (it == objects_.end()) return Missing(key);
    return it->second;
  }
  Status GetRange(std::string_view key, uint64_t off, std::span<std::byte> out) override {
    ASSIGN_OR_RETURN(std::string data, Get(key));
    if (off + out.size() > data.size()) return DataLoss("object " + std::string(key) + " is short");
    std::memcpy(out.data(), data.data() + off, out.size());
    return Status::Ok();
  }
  Status GetFile(std::string_view key, const std::string& path) override {
    ASSIGN_OR_RETURN(std::string data, Get(key));
    WriteFile(path, data);
    return Status::Ok();
  }
  Result<storage::ObjectInfo> Stat(std::string_view key) override {
    std::lock_guard lock(mu_);
    auto it = objects_.find(std::string(key));
    if (it == objects_.end()) return Missing(key);
    return Info(*it);
  }
  Result<storage::ListPage> List(std::string_view prefix, std::string_view next,
                                 int max_results) override {
    std::lock_guard lock(mu_);
    size_t limit = static_cast<size_t>(page_size_);
    if (max_results > 0) limit = std::min(limit, static_cast<size_t>(max_results));
    storage::ListPage page;
    auto it = next.empty() ? objects_.lower_bound(std::string(prefix))
                           : objects_.upper_bound(std::string(next));
    for (; it != objects_.end() && it->first.starts_with(prefix); ++it) {
      if (page.objects.size() == limit) {
        page.next = page.objects.back().key;
        break;
      }
      page.objects.push_back(Info(*it));
    }
    return page;
  }
  Status Delete(std::string_view key) override {
    std::lock_guard lock(mu_);
    if (objects_.erase(std::string(key)) == 0) return Missing(key);
    return Status::Ok();
  }
  // Every key, sorted.
  std::vector<std::string> Keys() {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const auto& [k, v] : objects_) out.push_back(k);
    return out;
  }

 private:
  Status Missing(std::string_view key) const {
    return NotFound("object '" + std::string(key) + "' in " + url() + " does not exist");
  }
  storage::ObjectInfo Info(const std::pair<const std::string, std::string>& kv) const {
    storage::ObjectInfo i;
    i.key = kv.first;
    i.size = kv.second.size();
    i.etag = std::to_string(std::hash<std::string>{}(kv.second));
    i.modified_unix = mtime_;
    return i;
  }
  const int page_size_;
  const int64_t mtime_;
  std::mutex mu_;
  std::map<std::string, std::string> objects_;
};

// "path type mode mtime size/target sha" lines for every entry under `root`,
// sorted: two trees are equal when their descriptions are.
inline std::string DescribeTree(const fs::path& root) {
  std::map<std::string, std::string> lines;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    // lexically: fs::relative would resolve symlinks to their targets.
    std::string rel = it->path().lexically_relative(root).string();
    struct stat st {};
    lstat(it->path().c_str(), &st);
    std::ostringstream o;
    o << std::oct << (st.st_mode & 07777) << std::dec << " ";
    if (S_ISLNK(st.st_mode)) {
      o << "link " << fs::read_symlink(it->path()).string() << " " << st.st_mtim.tv_sec;
    } else if (S_ISDIR(st.st_mode)) {
      o << "dir " << st.st_mtim.tv_sec << "." << st.st_mtim.tv_nsec;
    } else {
      std::string data = ReadAll(it->path());
      o << "file " << data.size() << " " << std::hash<std::string>{}(data) << " "
        << st.st_mtim.tv_sec << "." << st.st_mtim.tv_nsec;
    }
    lines[rel] = o.str();
  }
  std::string out;
  for (const auto& [k, v] : lines) out += k + " " + v + "\n";
  return out;
}

// A tree with nested directories, an empty file, an empty directory,
// symlinks (relative, dangling absolute), odd modes and a large file.
inline void MakeTree(const fs::path& root, size_t large_bytes) {
  WriteFile(root / "a/b/c/deep.txt", "deep\n");
  WriteFile(root / "a/readme.md", "# hello\n");
  WriteFile(root / "empty.bin", "");
  fs::create_directories(root / "empty_dir");
  WriteFile(root / "models/large.bin", RandomBytes(large_bytes, 7));
  WriteFile(root / "models/zeros.bin", std::string(3u << 20, '\0'));  // compressible
  WriteFile(root / "bin/run.sh", "#!/bin/sh\necho hi\n");
  chmod((root / "bin/run.sh").c_str(), 0755);
  WriteFile(root / "secret.cfg", "token=1\n");
  chmod((root / "secret.cfg").c_str(), 0640);
  fs::create_symlink("../a/readme.md", root / "bin/readme-link");
  fs::create_symlink("/nonexistent/target", root / "dangling");
  chmod((root / "a/b").c_str(), 0750);
  // Fixed times so the comparison after restore is meaningful.
  struct timespec ts[2] = {{1700000000, 123456789}, {1700000000, 123456789}};
  utimensat(AT_FDCWD, (root / "a/readme.md").c_str(), ts, 0);
  utimensat(AT_FDCWD, (root / "a/b/c").c_str(), ts, 0);
}

// A fresh temporary directory, removed by the destructor.
using gantry::testing::TempDir;

}  // namespace gantry::backup::testing
