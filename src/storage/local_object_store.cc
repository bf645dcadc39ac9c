// The file:// ObjectStore: one file per key under a root directory.
//
// A Put writes "<dir>/.gantry-tmp-<random>" next to the target, fsyncs it,
// and renames it over the key (or link()s it for a conditional create, which
// fails atomically with EEXIST), then fsyncs the directory. Readers therefore
// see the old object or the whole new one, never a part.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "azure_blob.h"
#include "gantry/storage/object_store.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

namespace gantry::storage::internal {
namespace {

constexpr std::string_view kTmpPrefix = ".gantry-tmp-";

std::string RandomSuffix() {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[40];
  std::snprintf(buf, sizeof buf, "%d-%llx-%llx", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(counter.fetch_add(1)),
                static_cast<unsigned long long>(rng() & 0xffffffffull));
  return buf;
}

// Closes an fd on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

Status MkdirAll(const std::string& path) {
  if (path.empty()) return Status::Ok();
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::Ok();
    return FailedPrecondition(path + " exists and is not a directory");
  }
  size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) RETURN_IF_ERROR(MkdirAll(path.substr(0, slash)));
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return IoError("creating directory " + path, errno);
  }
  return Status::Ok();
}

Status WriteAllFd(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOSPC)
        return ResourceExhausted("writing " + path + ": no space left on device");
      return IoError("writing " + path, errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

class LocalObjectStore : public ObjectStore {
 public:
  LocalObjectStore(std::string root, StoreOptions options)
      : root_(std::move(root)), options_(std::move(options)) {}

  std::string url() const override { return "file://" + root_; }

  Status Put(std::string_view key, std::span<const std::byte> data,
             const PutOptions& options) override {
    return WriteObject(key, options, [&](int fd, const std::string& tmp) {
      return WriteAllFd(fd, data.data(), data.size(), tmp);
    });
  }

  Status PutFile(std::string_view key, const std::string& path,
                 const PutOptions& options) override {
    int in = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) {
      if (errno == ENOENT)
        return NotFound("uploading " + path + " to " + Where(key) + ": no such file");
      return IoError("opening " + path, errno);
    }
    Fd guard(in);
    return WriteObject(key, options, [&](int fd, const std::string& tmp) -> Status {
      std::vector<char> buf(1 << 20);
      for (;;) {
        ssize_t r = ::read(in, buf.data(), buf.size());
        if (r < 0) {
          if (errno == EINTR) continue;
          return IoError("reading " + path, errno);
        }
        if (r == 0) return Status::Ok();
        RETURN_IF_ERROR(WriteAllFd(fd, buf.data(), static_cast<size_t>(r), tmp));
      }
    });
  }

  Status PutStream(std::string_view key, const ReadFn& read, const PutOptions& options) override {
    return WriteObject(key, options, [&](int fd, const std::string& tmp) -> Status {
      std::vector<std::byte> buf(std::max<size_t>(options_.block_bytes, 64 << 10));
      for (;;) {
        Result<size_t> n = read(buf);
        if (!n.ok()) return n.status().WithContext("uploading " + Where(key));
        if (*n == 0) return Status::Ok();
        if (*n > buf.size())
          return Internal("PutStream: the read callback returned more bytes than asked");
        RETURN_IF_ERROR(WriteAllFd(fd, buf.data(), *n, tmp));
      }
    });
  }

  Result<std::string> Get(std::string_view key) override {
    RETURN_IF_ERROR(CheckKey(key));
    std::string path = PathOf(key);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return OpenError(key, path);
    Fd guard(fd);
    struct stat st;
    if (::fstat(fd, &st) != 0) return IoError("stat " + path, errno);
    if (!S_ISREG(st.st_mode)) return NotFound("object " + Where(key) + " does not exist");
    std::string out;
    out.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < out.size()) {
      ssize_t r = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return IoError("reading " + path, errno);
      }
      if (r == 0) break;
      done += static_cast<size_t>(r);
    }
    out.resize(done);
    return out;
  }

  Status GetRange(std::string_view key, uint64_t offset, std::span<std::byte> out) override {
    RETURN_IF_ERROR(CheckKey(key));
    std::string path = PathOf(key);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return OpenError(key, path);
    Fd guard(fd);
    struct stat st;
    if (::fstat(fd, &st) != 0) return IoError("stat " + path, errno);
    if (!S_ISREG(st.st_mode)) return NotFound("object " + Where(key) + " does not exist");
    size_t done = 0;
    while (done < out.size()) {
      ssize_t r =
          ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return IoError("reading " + path, errno);
      }
      if (r == 0) break;
      done += static_cast<size_t>(r);
    }
    if (done < out.size()) {
      return DataLoss("object " + Where(key) + " is " + std::to_string(st.st_size) +
                      " bytes; cannot read " + std::to_string(out.size()) + " bytes at offset " +
                      std::to_string(offset));
    }
    return Status::Ok();
  }

  Status GetFile(std::string_view key, const std::string& path) override {
    RETURN_IF_ERROR(CheckKey(key));
    std::string src = PathOf(key);
    int in = ::open(src.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) return OpenError(key, src);
    Fd in_guard(in);
    struct stat st;
    if (::fstat(in, &st) != 0) return IoError("stat " + src, errno);
    if (!S_ISREG(st.st_mode)) return NotFound("object " + Where(key) + " does not exist");
    std::string tmp = path + ".tmp-" + RandomSuffix();
    int out = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) return IoError("creating " + tmp, errno);
    Status s = [&]() -> Status {
      Fd out_guard(out);
      std::vector<char> buf(1 << 20);
      for (;;) {
        ssize_t r = ::read(in, buf.data(), buf.size());
        if (r < 0) {
          if (errno == EINTR) continue;
          return IoError("reading " + src, errno);
        }
        if (r == 0) break;
        RETURN_IF_ERROR(WriteAllFd(out, buf.data(), static_cast<size_t>(r), tmp));
      }
      if (::fsync(out) != 0) return IoError("fsync " + tmp, errno);
      int fd = out_guard.fd;
      out_guard.fd = -1;
      if (::close(fd) != 0) return IoError("closing " + tmp, errno);
      if (::rename(tmp.c_str(), path.c_str()) != 0)
        return IoError("renaming " + tmp + " to " + path, errno);
      return Status::Ok();
    }();
    if (!s.ok()) ::unlink(tmp.c_str());
    return s;
  }

  Result<ObjectInfo> Stat(std::string_view key) override {
    RETURN_IF_ERROR(CheckKey(key));
    std::string path = PathOf(key);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR)
        return NotFound("object " + Where(key) + " does not exist");
      return IoError("stat " + path, errno);
    }
    if (!S_ISREG(st.st_mode)) return NotFound("object " + Where(key) + " does not exist");
    return InfoFrom(std::string(key), st);
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
    std::string path = PathOf(key);
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      return NotFound("object " + Where(key) + " does not exist");
    }
    if (::unlink(path.c_str()) != 0) {
      if (errno == ENOENT || errno == ENOTDIR)
        return NotFound("object " + Where(key) + " does not exist");
      return IoError("deleting " + path, errno);
    }
    // Remove directories left empty, up to (not including) the root, so a
    // deleted prefix leaves no trace. A concurrent Put that loses its
    // directory to this retries (see WriteObject).
    std::string dir = path.substr(0, path.rfind('/'));
    while (dir.size() > root_.size() && ::rmdir(dir.c_str()) == 0) {
      dir = dir.substr(0, dir.rfind('/'));
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

  Status OpenError(std::string_view key, const std::string& path) const {
    if (errno == ENOENT || errno == ENOTDIR || errno == EISDIR) {
      return NotFound("object " + Where(key) + " does not exist");
    }
    return IoError("opening " + path, errno);
  }

  static ObjectInfo InfoFrom(std::string key, const struct stat& st) {
    ObjectInfo info;
    info.key = std::move(key);
    info.size = static_cast<uint64_t>(st.st_size);
    info.modified_unix = static_cast<int64_t>(st.st_mtim.tv_sec);
    char etag[80];
    // A rename installs a new inode, so (inode, mtime, size) changes on every replace.
    std::snprintf(
        etag, sizeof etag, "\"%llx-%llx.%lx-%llx\"", static_cast<unsigned long long>(st.st_ino),
        static_cast<unsigned long long>(st.st_mtim.tv_sec), static_cast<long>(st.st_mtim.tv_nsec),
        static_cast<unsigned long long>(st.st_size));
    info.etag = etag;
    return info;
  }

  // Collects every object below root_/rel whose key starts with `prefix`.
  Status Walk(const std::string& rel, std::string_view prefix, std::vector<ObjectInfo>* out) {
    std::string dir = rel.empty() ? root_ : root_ + "/" + rel;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      if (errno == ENOENT || errno == ENOTDIR) return Status::Ok();  // an empty store
      return IoError("listing " + dir, errno);
    }
    std::vector<std::pair<std::string, bool>> entries;
    while (struct dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == ".." || name.starts_with(kTmpPrefix)) continue;
      std::string key = rel.empty() ? name : rel + "/" + name;
      struct stat st;
      if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        continue;  // raced a delete
      if (S_ISDIR(st.st_mode)) {
        // Descend only where keys could still match the prefix.
        std::string as_dir = key + "/";
        size_t n = std::min(as_dir.size(), prefix.size());
        if (as_dir.compare(0, n, prefix.substr(0, n)) == 0) entries.emplace_back(key, true);
      } else if (S_ISREG(st.st_mode) && key.starts_with(prefix)) {
        out->push_back(InfoFrom(key, st));
      }
    }
    ::closedir(d);
    for (const auto& [key, is_dir] : entries) RETURN_IF_ERROR(Walk(key, prefix, out));
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
    std::string path = PathOf(key);
    std::string dir = path.substr(0, path.rfind('/'));
    // A concurrent Delete may remove an empty parent directory between our
    // mkdir and open; retry a few times.
    int fd = -1;
    std::string tmp;
    for (int attempt = 0; attempt < 5 && fd < 0; ++attempt) {
      RETURN_IF_ERROR(MkdirAll(dir).WithContext("writing " + Where(key)));
      tmp = dir + "/" + std::string(kTmpPrefix) + RandomSuffix();
      fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0 && errno != ENOENT) return IoError("creating " + tmp, errno);
    }
    if (fd < 0) return IoError("creating " + tmp, errno);
    Status s = [&]() -> Status {
      Fd guard(fd);
      RETURN_IF_ERROR(write(fd, tmp));
      if (::fsync(fd) != 0) return IoError("fsync " + tmp, errno);
      guard.fd = -1;
      if (::close(fd) != 0) return IoError("closing " + tmp, errno);
      if (options.if_none_match) {
        // link() fails with EEXIST atomically when the key exists.
        if (::link(tmp.c_str(), path.c_str()) != 0) {
          int err = errno;
          if (err == EEXIST) return AlreadyExists("object " + Where(key) + " already exists");
          if (err != EPERM && err != ENOTSUP && err != EOPNOTSUPP) {
            return IoError("linking " + tmp + " to " + path, err);
          }
          // Filesystems without hard links: rename that never replaces.
          if (::syscall(SYS_renameat2, AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(),
                        RENAME_NOREPLACE) != 0) {
            if (errno == EEXIST) return AlreadyExists("object " + Where(key) + " already exists");
            return IoError("renaming " + tmp + " to " + path, errno);
          }
          return Status::Ok();
        }
        ::unlink(tmp.c_str());
      } else if (::rename(tmp.c_str(), path.c_str()) != 0) {
        if (errno == EISDIR) {
          return FailedPrecondition("object " + Where(key) +
                                    ": a file:// store cannot hold a key that is also a prefix of "
                                    "other keys");
        }
        return IoError("renaming " + tmp + " to " + path, errno);
      }
      int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (dfd >= 0) {
        // Make the rename durable before reporting success.
        int rc = ::fsync(dfd);
        int err = errno;
        ::close(dfd);
        if (rc != 0 && err != EINVAL) return IoError("fsync directory " + dir, err);
      }
      return Status::Ok();
    }();
    if (!s.ok()) ::unlink(tmp.c_str());
    return s;
  }

  std::string root_;
  StoreOptions options_;
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
  struct stat st;
  if (::stat(root.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return FailedPrecondition("store directory " + root + " exists and is not a directory");
    }
  } else if (options.create_container) {
    RETURN_IF_ERROR(MkdirAll(root).WithContext("opening store file://" + root));
  } else {
    return NotFound("store directory " + root +
                    " does not exist (create it, or set StoreOptions::create_container)");
  }
  return std::unique_ptr<ObjectStore>(new LocalObjectStore(root, options));
}

}  // namespace gantry::storage::internal
