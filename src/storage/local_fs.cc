// POSIX implementation of storage::FileSystem.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include "gantry/storage/filesystem.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

namespace gantry::storage {
namespace {

class LocalWritableFile : public WritableFile {
 public:
  LocalWritableFile(int fd, std::string path, bool direct)
      : fd_(fd), path_(std::move(path)), direct_(direct) {}
  ~LocalWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Result<size_t> Write(const void* data, size_t bytes) override {
    if (direct_ && !IsAligned(data, bytes)) {
      // O_DIRECT rejects unaligned buffers (EINVAL); the tail of a shard is
      // rarely aligned, so drop to buffered I/O for the rest of the file.
      int flags = ::fcntl(fd_, F_GETFL);
      if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_DIRECT) != 0) {
        return IoError("clearing O_DIRECT on " + path_, errno);
      }
      direct_ = false;
    }
    for (;;) {
      ssize_t n = ::write(fd_, data, bytes);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno == EINTR) continue;
      return IoError("writing " + path_, errno);
    }
  }

  Status Sync() override {
    if (::fsync(fd_) != 0) return IoError("fsync " + path_, errno);
    return Status::Ok();
  }

  Status Close() override {
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return IoError("closing " + path_, errno);
    return Status::Ok();
  }

 private:
  static bool IsAligned(const void* data, size_t bytes) {
    return reinterpret_cast<uintptr_t>(data) % kDirectIoAlignment == 0 &&
           bytes % kDirectIoAlignment == 0;
  }
  int fd_;
  std::string path_;
  bool direct_;
};

class LocalReadableFile : public ReadableFile {
 public:
  LocalReadableFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~LocalReadableFile() override { ::close(fd_); }

  Result<size_t> ReadAt(uint64_t offset, void* dst, size_t bytes) override {
    for (;;) {
      ssize_t n = ::pread(fd_, dst, bytes, static_cast<off_t>(offset));
      if (n >= 0) return static_cast<size_t>(n);
      if (errno == EINTR) continue;
      return IoError("reading " + path_, errno);
    }
  }

  Result<uint64_t> Size() override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return IoError("stat " + path_, errno);
    return static_cast<uint64_t>(st.st_size);
  }

 private:
  int fd_;
  std::string path_;
};

class LocalLock : public Lock {
 public:
  explicit LocalLock(int fd) : fd_(fd) {}
  ~LocalLock() override { ::close(fd_); }  // closing releases the flock

 private:
  int fd_;
};

Status ErrnoStatus(std::string_view what, const std::string& path, int err) {
  std::string msg = std::string(what) + " " + path;
  if (err == ENOENT) return NotFound(msg + ": no such file or directory");
  if (err == EEXIST || err == ENOTEMPTY) return AlreadyExists(msg + ": already exists");
  if (err == ENOSPC || err == EDQUOT) {
    return ResourceExhausted(msg +
                             ": no space left on device; free space or prune old checkpoints");
  }
  if (err == EACCES || err == EPERM) return PermissionDenied(msg + ": permission denied");
  return IoError(msg, err);
}

class LocalFs : public FileSystem {
 public:
  Result<std::unique_ptr<WritableFile>> Create(const std::string& path, bool direct) override {
    int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;
    int fd = ::open(path.c_str(), flags | (direct ? O_DIRECT : 0), 0644);
    if (fd < 0 && direct && errno == EINVAL) {
      // tmpfs and some FUSE filesystems refuse O_DIRECT at open.
      direct = false;
      fd = ::open(path.c_str(), flags, 0644);
    }
    if (fd < 0) return ErrnoStatus("creating", path, errno);
    return std::unique_ptr<WritableFile>(new LocalWritableFile(fd, path, direct));
  }

  Result<std::unique_ptr<ReadableFile>> Open(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("opening", path, errno);
    return std::unique_ptr<ReadableFile>(new LocalReadableFile(fd, path));
  }

  Status CreateDir(const std::string& path) override {
    if (::mkdir(path.c_str(), 0755) != 0) return ErrnoStatus("creating directory", path, errno);
    return Status::Ok();
  }

  Status CreateDirs(const std::string& path) override {
    std::string cur;
    size_t pos = 0;
    while (pos != std::string::npos) {
      pos = path.find('/', pos + 1);
      cur = path.substr(0, pos);
      if (cur.empty()) continue;
      if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) {
        return ErrnoStatus("creating directory", cur, errno);
      }
    }
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("creating directory", path, errno);
    if (!S_ISDIR(st.st_mode)) return FailedPrecondition(path + " exists and is not a directory");
    return Status::Ok();
  }

  Status SyncDir(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("opening directory", path, errno);
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (rc != 0 && err == EINVAL) {
      return Unimplemented("fsync directory " + path +
                           ": the filesystem cannot fsync directories (EINVAL)");
    }
    if (rc != 0) return IoError("fsync directory " + path, err);
    return Status::Ok();
  }

  Status Replace(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      if (errno == EISDIR)
        return FailedPrecondition("renaming " + from + ": " + to + " is a directory");
      return ErrnoStatus("renaming " + from + " to", to, errno);
    }
    return Status::Ok();
  }

  Status Link(const std::string& from, const std::string& to) override {
    if (::link(from.c_str(), to.c_str()) != 0) {
      int err = errno;
      if (err == EPERM || err == ENOTSUP || err == EOPNOTSUPP) {
        return Unimplemented("linking " + from + " to " + to + ": no hard links here");
      }
      return ErrnoStatus("linking " + from + " to", to, err);
    }
    return Status::Ok();
  }

  Status RemoveDir(const std::string& path) override {
    if (::rmdir(path.c_str()) != 0) {
      if (errno == ENOTEMPTY || errno == EEXIST) {
        return FailedPrecondition("removing directory " + path + ": not empty");
      }
      return ErrnoStatus("removing directory", path, errno);
    }
    return Status::Ok();
  }

  Status Rename(const std::string& from, const std::string& to) override {
    // renameat2(RENAME_NOREPLACE) refuses to replace `to` atomically; on
    // filesystems without it (EINVAL) fall back to a check-then-rename,
    // which is safe here because only the lock holder renames.
    long rc =
        ::syscall(SYS_renameat2, AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE);
    if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {
      struct stat st;
      if (::stat(to.c_str(), &st) == 0)
        return AlreadyExists("renaming " + from + " to " + to + ": target exists");
      rc = ::rename(from.c_str(), to.c_str());
    }
    if (rc != 0) return ErrnoStatus("renaming " + from + " to", to, errno);
    return Status::Ok();
  }

  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return ErrnoStatus("removing", path, errno);
    return Status::Ok();
  }

  Status RemoveAll(const std::string& path) override {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) return Status::Ok();
      return ErrnoStatus("stat", path, errno);
    }
    if (S_ISDIR(st.st_mode)) {
      ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDir(path));
      for (const DirEntry& e : entries) RETURN_IF_ERROR(RemoveAll(path + "/" + e.name));
      if (::rmdir(path.c_str()) != 0 && errno != ENOENT)
        return ErrnoStatus("removing", path, errno);
      return Status::Ok();
    }
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("removing", path, errno);
    return Status::Ok();
  }

  Result<std::vector<DirEntry>> ListDir(const std::string& path) override {
    DIR* dir = ::opendir(path.c_str());
    if (dir == nullptr) return ErrnoStatus("listing", path, errno);
    std::vector<DirEntry> out;
    while (struct dirent* d = ::readdir(dir)) {
      std::string name = d->d_name;
      if (name == "." || name == "..") continue;
      bool is_dir = d->d_type == DT_DIR;
      if (d->d_type == DT_UNKNOWN) {
        struct stat st;
        is_dir = ::stat((path + "/" + name).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
      }
      out.push_back({std::move(name), is_dir});
    }
    ::closedir(dir);
    return out;
  }

  Result<FileInfo> Stat(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("stat", path, errno);
    return FileInfo{static_cast<uint64_t>(st.st_size), S_ISDIR(st.st_mode),
                    static_cast<int64_t>(st.st_mtim.tv_sec),
                    static_cast<int64_t>(st.st_mtim.tv_nsec), static_cast<uint64_t>(st.st_ino)};
  }

  Result<std::unique_ptr<Lock>> TryLock(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoStatus("opening lock file", path, errno);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK) {
        return FailedPrecondition(path +
                                  " is held by another writer (a save or prune of this run "
                                  "is in progress)");
      }
      return IoError("locking " + path, err);
    }
    return std::unique_ptr<Lock>(new LocalLock(fd));
  }
};

}  // namespace

FileSystem& LocalFileSystem() {
  static LocalFs* fs = new LocalFs();
  return *fs;
}

Status WriteAll(WritableFile& file, const void* data, size_t bytes, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ASSIGN_OR_RETURN(size_t n, file.Write(p, bytes));
    if (n == 0) return IoError("writing " + path + " made no progress", EIO);
    p += n;
    bytes -= n;
  }
  return Status::Ok();
}

Status ReadExact(ReadableFile& file, uint64_t offset, void* dst, size_t bytes,
                 const std::string& path) {
  char* p = static_cast<char*>(dst);
  size_t done = 0;
  while (done < bytes) {
    ASSIGN_OR_RETURN(size_t n, file.ReadAt(offset + done, p + done, bytes - done));
    if (n == 0) {
      return DataLoss(path + " is truncated: wanted bytes [" + std::to_string(offset) + ", " +
                      std::to_string(offset + bytes) + ") but the file ends at " +
                      std::to_string(offset + done));
    }
    done += n;
  }
  return Status::Ok();
}

Status WriteSmallFile(FileSystem& fs, const std::string& path, std::string_view text) {
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, fs.Create(path, /*direct=*/false));
  RETURN_IF_ERROR(WriteAll(*f, text.data(), text.size(), path));
  RETURN_IF_ERROR(f->Sync());
  return f->Close();
}

Status CreateDirsDurably(FileSystem& fs, const std::string& path) {
  // Parent to child: each new directory's entry is durable in its parent
  // before anything is created inside it.
  std::string prefix = path.starts_with('/') ? "" : ".";
  size_t i = 0;
  while (i < path.size()) {
    size_t j = std::min(path.find('/', i), path.size());
    if (j > i) {
      const std::string parent = prefix.empty() ? "/" : prefix;
      prefix.push_back('/');
      prefix.append(path, i, j - i);
      Status made = fs.CreateDir(prefix);
      if (made.ok()) {
        RETURN_IF_ERROR(fs.SyncDir(parent));
      } else if (made.code() != StatusCode::kAlreadyExists) {
        return made;
      } else if (auto info = fs.Stat(prefix); info.ok() && !info->is_dir) {
        return FailedPrecondition(prefix + " exists and is not a directory");
      }
    }
    i = j + 1;
  }
  return Status::Ok();
}

Result<std::string> ReadSmallFile(FileSystem& fs, const std::string& path, uint64_t max_bytes) {
  ASSIGN_OR_RETURN(std::unique_ptr<ReadableFile> f, fs.Open(path));
  ASSIGN_OR_RETURN(uint64_t size, f->Size());
  if (size > max_bytes) {
    return DataLoss(path + " has " + std::to_string(size) + " bytes, more than the " +
                    std::to_string(max_bytes) + " expected; the file is corrupt, remove it");
  }
  std::string out(size, '\0');
  RETURN_IF_ERROR(ReadExact(*f, 0, out.data(), out.size(), path));
  return out;
}

}  // namespace gantry::storage
