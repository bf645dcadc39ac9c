// The file:// ObjectStore: one file per key under a root directory, on a
// FileSystem (this machine's, or a fault-injecting or power-loss one in
// tests).
//
// A Put writes "<dir>/.gantry-tmp-<random>" next to the target, fsyncs it,
// and renames it over the key (or links it for a conditional create, which
// fails atomically when the key exists), then fsyncs the directory; new
// directories are fsynced into their parents first. Readers therefore see
// the old object or the whole new one, never a part, and an acknowledged
// Put survives a power loss.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <string>
#include <vector>

#include "azure_blob.h"
#include "gantry/storage/filesystem.h"
#include "gantry/storage/object_store.h"

namespace gantry::storage::internal {
namespace {

constexpr std::string_view kTmpPrefix = ".gantry-tmp-";
constexpr size_t kCopyBlock = 1u << 20;

std::string RandomSuffix() {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[40];
  std::snprintf(buf, sizeof buf, "%d-%llx-%llx", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(counter.fetch_add(1)),
                static_cast<unsigned long long>(rng() & 0xffffffffull));
  return buf;
}

class LocalObjectStore : public ObjectStore {
 public:
  LocalObjectStore(std::string root, StoreOptions options, FileSystem& fs)
      : root_(std::move(root)), options_(std::move(options)), fs_(fs) {}

  std::string url() const override { return "file://" + root_; }

  Status Put(std::string_view key, std::span<const std::byte> data,
             const PutOptions& options) override {
    return WriteObject(key, options, [&](WritableFile& f, const std::string& tmp) {
      return WriteAll(f, data.data(), data.size(), tmp);
    });
  }

  Status PutFile(std::string_view key, const std::string& path,
                 const PutOptions& options) override {
    auto in = fs_.Open(path);
    if (!in.ok()) {
      if (in.status().code() == StatusCode::kNotFound)
        return NotFound("uploading " + path + " to " + Where(key) + ": no such file");
      return in.status();
    }
    return WriteObject(key, options, [&](WritableFile& f, const std::string& tmp) {
      return Copy(**in, path, f, tmp);
    });
  }

  Status PutStream(std::string_view key, const ReadFn& read, const PutOptions& options) override {
    return WriteObject(key, options, [&](WritableFile& f, const std::string& tmp) -> Status {
      std::vector<std::byte> buf(std::max<size_t>(options_.block_bytes, 64 << 10));
      for (;;) {
        Result<size_t> n = read(buf);
        if (!n.ok()) return n.status().WithContext("uploading " + Where(key));
        if (*n == 0) return Status::Ok();
        if (*n > buf.size())
          return Internal("PutStream: the read callback returned more bytes than asked");
        RETURN_IF_ERROR(WriteAll(f, buf.data(), *n, tmp));
      }
    });
  }

  Result<std::string> Get(std::string_view key) override {
    std::string path;
    ASSIGN_OR_RETURN(std::unique_ptr<ReadableFile> f, OpenObject(key, &path));
    ASSIGN_OR_RETURN(uint64_t size, f->Size());
    std::string out(static_cast<size_t>(size), '\0');
    size_t done = 0;
    while (done < out.size()) {
      ASSIGN_OR_RETURN(size_t n, f->ReadAt(done, out.data() + done, out.size() - done));
      if (n == 0) break;  // shrank under us: return what is there
      done += n;
    }
    out.resize(done);
    return out;
  }

  Status GetRange(std::string_view key, uint64_t offset, std::span<std::byte> out) override {
    std::string path;
    ASSIGN_OR_RETURN(std::unique_ptr<ReadableFile> f, OpenObject(key, &path));
    ASSIGN_OR_RETURN(uint64_t size, f->Size());
    if (offset > size || out.size() > size - offset) {
      return DataLoss("object " + Where(key) + " is " + std::to_string(size) +
                      " bytes; cannot read " + std::to_string(out.size()) + " bytes at offset " +
                      std::to_string(offset));
    }
    return ReadExact(*f, offset, out.data(), out.size(), path);
  }

  Status GetFile(std::string_view key, const std::string& path) override {
    std::string src;
    ASSIGN_OR_RETURN(std::unique_ptr<ReadableFile> in, OpenObject(key, &src));
    const std::string tmp = path + ".tmp-" + RandomSuffix();
    ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> out, fs_.Create(tmp, /*direct=*/false));
    Status s = [&]() -> Status {
      RETURN_IF_ERROR(Copy(*in, src, *out, tmp));
      RETURN_IF_ERROR(out->Sync());
      RETURN_IF_ERROR(out->Close());
      return fs_.Replace(tmp, path);
    }();
    if (!s.ok()) (void)fs_.RemoveFile(tmp);
    return s;
  }

  Result<ObjectInfo> Stat(std::string_view key) override {
    RETURN_IF_ERROR(CheckKey(key));
    auto st = fs_.Stat(PathOf(key));
    if (!st.ok()) {
      if (st.status().code() == StatusCode::kNotFound)
        return NotFound("object " + Where(key) + " does not exist");
      return st.status();
    }
    if (st->is_dir) return NotFound("object " + Where(key) + " does not exist");
    return InfoFrom(std::string(key), *st);
  }

  Result<ListPage> List(std::string_view prefix, std::string_view next, int max_results) override {
    if (prefix.find('\0') != std::string_view::npos || prefix.starts_with("/")) {
      return InvalidArgument("list prefix '" + std::string(prefix) + "' in " + url() +
                             " must be relative (no leading '/', no NUL)");
    }
    size_t limit = max_results > 0 ? static_cast<size_t>(max_results) : 1000;
    std::vector<ObjectInfo> all;
    RETURN_IF_ERROR(Walk("", prefix, &all));
    std::sort(all.begin(), all.end(),
              [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
    ListPage page;
    auto it = all.begin();
    if (!next.empty()) {
      it = std::upper_bound(all.begin(), all.end(), next,
                            [](std::string_view n, const ObjectInfo& o) { return n < o.key; });
    }
    for (; it != all.end() && page.objects.size() < limit; ++it) page.objects.push_back(*it);
    if (it != all.end()) page.next = page.objects.back().key;
    return page;
  }

  Status Delete(std::string_view key) override {
    RETURN_IF_ERROR(CheckKey(key));
    const std::string path = PathOf(key);
    auto st = fs_.Stat(path);
    if (st.ok() && st->is_dir) return NotFound("object " + Where(key) + " does not exist");
    Status removed = fs_.RemoveFile(path);
    if (removed.code() == StatusCode::kNotFound) {
      return NotFound("object " + Where(key) + " does not exist");
    }
    RETURN_IF_ERROR(removed);
    const std::string dir = path.substr(0, path.rfind('/'));
    // An acknowledged delete survives a power loss, as a Put does: without
    // this a finished prune could come back (found by backup's
    // power_loss_test).
    Status synced = fs_.SyncDir(dir);
    if (!synced.ok() && synced.code() != StatusCode::kUnimplemented) return synced;
    // Remove directories left empty, up to (not including) the root, so a
    // deleted prefix leaves no trace. A concurrent Put that loses its
    // directory to this retries (see WriteObject).
    // (Left unsynced: an empty directory that comes back is harmless.)
    for (std::string d = dir; d.size() > root_.size() && fs_.RemoveDir(d).ok();) {
      d = d.substr(0, d.rfind('/'));
    }
    return Status::Ok();
  }

 private:
  std::string Where(std::string_view key) const { return "'" + std::string(key) + "' in " + url(); }
  std::string PathOf(std::string_view key) const { return root_ + "/" + std::string(key); }

  Status CheckKey(std::string_view key) const {
    RETURN_IF_ERROR(ValidateKey(key).WithContext(url()));
    return Status::Ok();
  }

  // Opens the object `key` (its path in `*path`); NotFound when it is
  // missing or a directory.
  Result<std::unique_ptr<ReadableFile>> OpenObject(std::string_view key, std::string* path) {
    RETURN_IF_ERROR(CheckKey(key));
    *path = PathOf(key);
    auto st = fs_.Stat(*path);
    if (st.ok() && st->is_dir) return NotFound("object " + Where(key) + " does not exist");
    auto f = fs_.Open(*path);
    if (!f.ok() && f.status().code() == StatusCode::kNotFound) {
      return NotFound("object " + Where(key) + " does not exist");
    }
    return f;
  }

  static Status Copy(ReadableFile& in, const std::string& in_path, WritableFile& out,
                     const std::string& out_path) {
    std::vector<char> buf(kCopyBlock);
    for (uint64_t offset = 0;;) {
      ASSIGN_OR_RETURN(size_t n, in.ReadAt(offset, buf.data(), buf.size()));
      if (n == 0) return Status::Ok();
      RETURN_IF_ERROR(WriteAll(out, buf.data(), n, out_path));
      offset += n;
    }
  }

  static ObjectInfo InfoFrom(std::string key, const FileInfo& st) {
    ObjectInfo info;
    info.key = std::move(key);
    info.size = st.size;
    info.modified_unix = st.mtime_unix_s;
    char etag[80];
    // A rename installs a new inode, so (inode, mtime, size) changes on every replace.
    std::snprintf(
        etag, sizeof etag, "\"%llx-%llx.%llx-%llx\"", static_cast<unsigned long long>(st.inode),
        static_cast<unsigned long long>(st.mtime_unix_s),
        static_cast<unsigned long long>(st.mtime_ns), static_cast<unsigned long long>(st.size));
    info.etag = etag;
    return info;
  }

  // Collects every object below root_/rel whose key starts with `prefix`.
  Status Walk(const std::string& rel, std::string_view prefix, std::vector<ObjectInfo>* out) {
    const std::string dir = rel.empty() ? root_ : root_ + "/" + rel;
    auto entries = fs_.ListDir(dir);
    if (!entries.ok()) {
      // A missing or non-directory level: an empty store, or raced a delete.
      if (entries.status().code() == StatusCode::kNotFound ||
          entries.status().code() == StatusCode::kFailedPrecondition)
        return Status::Ok();
      return entries.status();
    }
    std::vector<std::string> subdirs;
    for (const DirEntry& e : *entries) {
      if (e.name.starts_with(kTmpPrefix)) continue;
      std::string key = rel.empty() ? e.name : rel + "/" + e.name;
      auto st = fs_.Stat(root_ + "/" + key);
      if (!st.ok()) continue;  // raced a delete
      if (st->is_dir) {
        // Descend only where keys could still match the prefix.
        std::string as_dir = key + "/";
        size_t n = std::min(as_dir.size(), prefix.size());
        if (as_dir.compare(0, n, prefix.substr(0, n)) == 0) subdirs.push_back(key);
      } else if (key.starts_with(prefix)) {
        out->push_back(InfoFrom(key, *st));
      }
    }
    for (const std::string& key : subdirs) RETURN_IF_ERROR(Walk(key, prefix, out));
    return Status::Ok();
  }

  template <typename WriteFn>
  Status WriteObject(std::string_view key, const PutOptions& options, WriteFn&& write) {
    RETURN_IF_ERROR(CheckKey(key));
    for (size_t start = 0;;) {
      size_t slash = key.find('/', start);
      std::string_view seg =
          key.substr(start, slash == std::string_view::npos ? key.npos : slash - start);
      if (seg.starts_with(kTmpPrefix)) {
        return InvalidArgument("object key '" + std::string(key) + "' in " + url() +
                               ": segments starting with '.gantry-tmp-' are reserved");
      }
      if (slash == std::string_view::npos) break;
      start = slash + 1;
    }
    const std::string path = PathOf(key);
    const std::string dir = path.substr(0, path.rfind('/'));
    // A concurrent Delete may remove an empty parent directory between our
    // mkdir and create; retry a few times.
    Result<std::unique_ptr<WritableFile>> file = NotFound("creating a temporary in " + dir);
    std::string tmp;
    for (int attempt = 0; attempt < 5 && !file.ok(); ++attempt) {
      RETURN_IF_ERROR(CreateDirsDurably(fs_, dir).WithContext("writing " + Where(key)));
      tmp = dir + "/" + std::string(kTmpPrefix) + RandomSuffix();
      file = fs_.Create(tmp, /*direct=*/false);
      if (!file.ok() && file.status().code() != StatusCode::kNotFound) return file.status();
    }
    RETURN_IF_ERROR(file.status());
    bool tmp_gone = false;
    Status s = [&]() -> Status {
      WritableFile& f = **file;
      RETURN_IF_ERROR(write(f, tmp));
      RETURN_IF_ERROR(f.Sync());
      RETURN_IF_ERROR(f.Close());
      if (options.if_none_match) {
        // A link fails atomically when the key exists.
        Status linked = fs_.Link(tmp, path);
        if (linked.code() == StatusCode::kUnimplemented) {
          // Filesystems without hard links: a rename that never replaces.
          linked = fs_.Rename(tmp, path);
          tmp_gone = linked.ok();
        }
        if (linked.code() == StatusCode::kAlreadyExists) {
          return AlreadyExists("object " + Where(key) + " already exists");
        }
        RETURN_IF_ERROR(linked);
      } else {
        Status renamed = fs_.Replace(tmp, path);
        if (renamed.code() == StatusCode::kFailedPrecondition) {
          return FailedPrecondition("object " + Where(key) +
                                    ": a file:// store cannot hold a key that is also a prefix of "
                                    "other keys");
        }
        RETURN_IF_ERROR(renamed);
        tmp_gone = true;
      }
      if (!tmp_gone) {
        RETURN_IF_ERROR(fs_.RemoveFile(tmp));
        tmp_gone = true;
      }
      // Make the new name durable before reporting success.
      Status synced = fs_.SyncDir(dir);
      if (synced.code() == StatusCode::kUnimplemented) return Status::Ok();
      return synced;
    }();
    if (!s.ok() && !tmp_gone) (void)fs_.RemoveFile(tmp);
    return s;
  }

  std::string root_;
  StoreOptions options_;
  FileSystem& fs_;
};

}  // namespace

Result<std::unique_ptr<ObjectStore>> NewLocalObjectStore(const std::string& root_in,
                                                         const StoreOptions& options) {
  std::string root = root_in;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  if (root.find("/./") != std::string::npos || root.find("/../") != std::string::npos ||
      root.ends_with("/..") || root.ends_with("/.")) {
    return InvalidArgument("store directory '" + root_in +
                           "' must not contain '.' or '..' segments");
  }
  FileSystem& fs = options.fs ? *options.fs : LocalFileSystem();
  auto st = fs.Stat(root);
  if (st.ok()) {
    if (!st->is_dir) {
      return FailedPrecondition("store directory " + root + " exists and is not a directory");
    }
  } else if (st.status().code() != StatusCode::kNotFound) {
    return st.status().WithContext("opening store file://" + root);
  } else if (options.create_container) {
    RETURN_IF_ERROR(CreateDirsDurably(fs, root).WithContext("opening store file://" + root));
  } else {
    return NotFound("store directory " + root +
                    " does not exist (create it, or set StoreOptions::create_container)");
  }
  return std::unique_ptr<ObjectStore>(new LocalObjectStore(root, options, fs));
}

}  // namespace gantry::storage::internal
