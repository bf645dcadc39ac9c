// Test support for src/backup: a store wrapper that fails on demand or counts
// calls, and helpers that build and compare directory trees.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>

#include "gantry/storage/object_store.h"
#include "testing/temp_dir.h"

namespace gantry::backup::testing {

namespace fs = std::filesystem;

// Forwards to `base`; after `fail_after_puts` successful Puts every further
// Put fails with Unavailable (an interrupted upload). Counts Puts of chunks.
class FlakyStore : public storage::ObjectStore {
 public:
  explicit FlakyStore(storage::ObjectStore& base) : base_(base) {}
  std::atomic<int64_t> fail_after_puts{-1};  // -1: never fail
  std::atomic<int64_t> puts{0};              // successful
  std::atomic<int64_t> attempts{0};  // every Put, so concurrent Puts fail exactly at the limit
  std::atomic<int64_t> chunk_puts{0};
  std::atomic<int64_t> deletes{0};

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
    ++deletes;
    return base_.Delete(key);
  }

 private:
  storage::ObjectStore& base_;
};

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
