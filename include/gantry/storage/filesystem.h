// Storage behind an interface so that the checkpoint engine can be tested
// against injected faults (ENOSPC, EIO, short writes, failing fsync/rename)
// and, later, run on object storage.
//
// Paths are plain strings ("/a/b/c"). Errors carry errno text and name the
// path. All implementations are thread-safe: distinct files may be used from
// distinct threads at the same time; one file object is used by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::storage {

// A file opened for sequential writing.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Writes up to `bytes` at the current end of the file and returns how many
  // were written (possibly fewer: a short write; callers loop). With direct
  // I/O, `data` and `bytes` should be multiples of kDirectIoAlignment; an
  // unaligned write is done buffered instead (correct, just not direct).
  virtual Result<size_t> Write(const void* data, size_t bytes) = 0;
  // Makes the written data durable (fsync).
  virtual Status Sync() = 0;
  // Closes the file; further calls are invalid. The destructor closes too,
  // ignoring errors.
  virtual Status Close() = 0;
};

// A file opened for random-access reading.
class ReadableFile {
 public:
  virtual ~ReadableFile() = default;
  // Reads up to `bytes` at `offset`; returns the count (0 at end of file).
  // Positional, so several threads may read one file at the same time.
  virtual Result<size_t> ReadAt(uint64_t offset, void* dst, size_t bytes) = 0;
  virtual Result<uint64_t> Size() = 0;
};

// An exclusive advisory lock, released by the destructor.
class Lock {
 public:
  virtual ~Lock() = default;
};

struct DirEntry {
  std::string name;  // not a path
  bool is_dir = false;
};

struct FileInfo {
  uint64_t size = 0;
  bool is_dir = false;
  int64_t mtime_unix_s = 0;
  int64_t mtime_ns = 0;  // the sub-second part of the modification time
  uint64_t inode = 0;    // distinct for distinct files of one filesystem
};

// O_DIRECT needs buffers, sizes and offsets aligned to the logical block
// size; 4096 covers every common device.
inline constexpr size_t kDirectIoAlignment = 4096;

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  // Creates `path` exclusively (AlreadyExists when it exists). `direct`
  // requests O_DIRECT where the filesystem supports it (silently buffered
  // where it does not, e.g. tmpfs).
  virtual Result<std::unique_ptr<WritableFile>> Create(const std::string& path, bool direct) = 0;
  virtual Result<std::unique_ptr<ReadableFile>> Open(const std::string& path) = 0;
  // Creates one directory; AlreadyExists when it exists.
  virtual Status CreateDir(const std::string& path) = 0;
  // Creates a directory and its missing parents; OK when it exists.
  virtual Status CreateDirs(const std::string& path) = 0;
  // fsync of a directory, making renames and creations in it durable.
  // Unimplemented where the filesystem cannot fsync directories.
  virtual Status SyncDir(const std::string& path) = 0;
  // Renames `from` to `to`; AlreadyExists when `to` exists (never replaces).
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // Renames `from` to `to`, atomically replacing `to` when it is a file
  // (rename(2)); FailedPrecondition when `to` is a directory.
  virtual Status Replace(const std::string& from, const std::string& to) = 0;
  // Makes `to` another name of the file `from` (a hard link): AlreadyExists
  // when `to` exists, Unimplemented where the filesystem has no hard links.
  virtual Status Link(const std::string& from, const std::string& to) = 0;
  virtual Status RemoveFile(const std::string& path) = 0;
  // Removes an empty directory: NotFound when missing, FailedPrecondition
  // when not empty.
  virtual Status RemoveDir(const std::string& path) = 0;
  // Removes a file or a directory tree; OK when `path` does not exist.
  virtual Status RemoveAll(const std::string& path) = 0;
  virtual Result<std::vector<DirEntry>> ListDir(const std::string& path) = 0;
  // NotFound when `path` does not exist.
  virtual Result<FileInfo> Stat(const std::string& path) = 0;
  // Takes an exclusive lock on `path` (created when missing) without
  // waiting: FailedPrecondition when another holder has it. Locks conflict
  // between processes and between two Lock objects of one process.
  virtual Result<std::unique_ptr<Lock>> TryLock(const std::string& path) = 0;
};

// The POSIX filesystem of this machine. The returned object lives forever.
FileSystem& LocalFileSystem();

// Convenience helpers on any FileSystem.
// Writes all of `bytes`, looping over short writes; a write that makes no
// progress is an IoError naming `path`.
Status WriteAll(WritableFile& file, const void* data, size_t bytes, const std::string& path);
// Reads exactly `bytes` at `offset`; DataLoss naming `path` when the file is
// shorter.
Status ReadExact(ReadableFile& file, uint64_t offset, void* dst, size_t bytes,
                 const std::string& path);
// Creates `path`, writes `text`, syncs and closes it.
Status WriteSmallFile(FileSystem& fs, const std::string& path, std::string_view text);
// Creates `path` and its missing parents like FileSystem::CreateDirs, and
// fsyncs the parent of each directory it creates, so that a power loss
// cannot take a new directory (and what is later committed in it) away.
// OK when `path` exists; FailedPrecondition when a component is a file.
Status CreateDirsDurably(FileSystem& fs, const std::string& path);
// Reads a whole file; a file larger than `max_bytes` is DataLoss naming
// `path` (nothing is allocated for it), so a corrupt or hostile file cannot
// exhaust memory.
inline constexpr uint64_t kDefaultSmallFileLimit = 256ull << 20;
Result<std::string> ReadSmallFile(FileSystem& fs, const std::string& path,
                                  uint64_t max_bytes = kDefaultSmallFileLimit);

}  // namespace gantry::storage
