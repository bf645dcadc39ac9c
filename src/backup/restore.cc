// `gantry backup restore`: verified chunks, atomic files, no writes outside
// the target.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <future>
#include <unordered_set>

#include "gantry/backup/backup.h"
#include "gantry/core/log.h"

namespace gantry::backup {
namespace {

std::string_view Parent(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
}

// Makes sure every directory of `rel` below `target` exists as a real
// directory, creating missing ones. A symlink or a file on the way is an error:
// following it could write outside the target.
Status EnsureDirs(const std::string& target, std::string_view rel) {
  std::string cur = target;
  size_t start = 0;
  while (start <= rel.size() && !rel.empty()) {
    size_t end = rel.find('/', start);
    std::string_view seg =
        rel.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    cur += "/";
    cur += seg;
    struct stat st {};
    if (lstat(cur.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        return FailedPrecondition(cur + " exists and is not a directory (" +
                                  (S_ISLNK(st.st_mode) ? "a symlink" : "a file") +
                                  "); refusing to restore through it - move it away");
      }
    } else if (errno == ENOENT) {
      if (mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST) {
        return IoError("creating directory " + cur, errno);
      }
    } else {
      return IoError("checking " + cur, errno);
    }
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return Status::Ok();
}

// A temporary name next to `dest` for the atomic rename.
std::string TempName(const std::string& dest) {
  size_t slash = dest.rfind('/');
  return dest.substr(0, slash + 1) + ".gantry-restore-" + std::to_string(getpid()) + "-" +
         dest.substr(slash + 1);
}

// Refuses to replace a directory with a file or symlink (rename would fail
// with an unhelpful errno, or worse, succeed on an empty directory).
Status CheckReplaceable(const std::string& dest) {
  struct stat st {};
  if (lstat(dest.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return FailedPrecondition(dest + " exists and is a directory; move it away to restore the " +
                              "file of the same name");
  }
  return Status::Ok();
}

Result<std::string> FetchChunk(const Repository& repo, const ChunkRef& ref) {
  std::string key = Repository::ChunkKey(ref.id);
  auto object = repo.store().Get(key);
  if (!object.ok()) {
    if (object.status().code() == StatusCode::kNotFound) {
      return DataLoss("chunk " + ref.id + " is missing from " + repo.url() +
                      "; the backup is damaged (run gantry backup verify)");
    }
    return object.status().WithContext("reading chunk " + key);
  }
  ASSIGN_OR_RETURN(std::string plain, repo.DecodeChunk(ref.id, *object));
  if (plain.size() != ref.size) {
    return DataLoss("chunk " + ref.id + " has " + std::to_string(plain.size()) +
                    " bytes, the manifest says " + std::to_string(ref.size));
  }
  return plain;
}

Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t w = write(fd, data.data() + off, data.size() - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      return IoError("writing " + path, errno);
    }
    off += static_cast<size_t>(w);
  }
  return Status::Ok();
}

// Fetches chunks ahead of the writer, across file boundaries (so many small
// files do not pay one round trip each), in exactly the order the writer
// consumes them: the chunks of the selected files, in manifest order.
class Prefetcher {
 public:
  Prefetcher(const Repository& repo, const Manifest& m, const std::vector<bool>& selected,
             size_t window)
      : repo_(repo), window_(window) {
    for (size_t i = 0; i < m.entries.size(); ++i) {
      if (!selected[i] || m.entries[i].type != EntryType::kFile) continue;
      for (const ChunkRef& c : m.entries[i].chunks) order_.push_back(&c);
    }
  }
  ~Prefetcher() {
    for (auto& f : pending_) f.wait();
  }
  Result<std::string> Next() {
    while (next_ < order_.size() && pending_.size() < window_) {
      pending_.push_back(
          std::async(std::launch::async, FetchChunk, std::cref(repo_), std::cref(*order_[next_])));
      ++next_;
    }
    if (pending_.empty()) return Internal("restore asked for more chunks than the manifest has");
    Result<std::string> r = pending_.front().get();
    pending_.pop_front();
    return r;
  }

 private:
  const Repository& repo_;
  size_t window_;
  std::vector<const ChunkRef*> order_;
  size_t next_ = 0;
  std::deque<std::future<Result<std::string>>> pending_;
};

struct timespec ToTimespec(int64_t ns) {
  struct timespec ts {};
  ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  if (ts.tv_nsec < 0) {
    ts.tv_nsec += 1'000'000'000;
    ts.tv_sec -= 1;
  }
  return ts;
}

}  // namespace

Result<RestoreResult> Restore(Repository& repo, const Manifest& manifest,
                              const RestoreOptions& options) {
  if (options.target.empty()) return InvalidArgument("give --to PATH for the restore target");
  // Check every path before writing anything (the manifest parser did too;
  // this guards manifests built in memory).
  for (const Entry& e : manifest.entries) RETURN_IF_ERROR(CheckSafePath(e.path));

  // Which entries: the included ones, their subtrees and their parent directories.
  std::vector<bool> selected(manifest.entries.size(), options.includes.empty());
  if (!options.includes.empty()) {
    std::unordered_set<std::string> chosen_dirs, parents;
    for (size_t i = 0; i < manifest.entries.size(); ++i) {
      const Entry& e = manifest.entries[i];
      std::string_view parent = Parent(e.path);
      bool in = MatchesAny(options.includes, e.path) ||
                (!parent.empty() && chosen_dirs.count(std::string(parent)));
      if (!in) continue;
      selected[i] = true;
      if (e.type == EntryType::kDir) chosen_dirs.insert(e.path);
      for (std::string_view p = parent; !p.empty(); p = Parent(p)) parents.insert(std::string(p));
    }
    for (size_t i = 0; i < manifest.entries.size(); ++i) {
      if (parents.count(manifest.entries[i].path)) selected[i] = true;
    }
    if (std::none_of(selected.begin(), selected.end(), [](bool b) { return b; })) {
      return NotFound("no path in backup " + manifest.id + " matches --include");
    }
  }

  std::string target = options.target;
  while (target.size() > 1 && target.back() == '/') target.pop_back();
  {
    std::string cur;
    // mkdir -p for the target itself (following symlinks here is the user's choice).
    for (size_t pos = 0; pos != std::string::npos;) {
      pos = target.find('/', pos + 1);
      cur = target.substr(0, pos);
      if (!cur.empty() && mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) {
        return IoError("creating restore target " + cur, errno);
      }
    }
    struct stat st {};
    if (stat(target.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return FailedPrecondition("restore target " + target + " is not a directory");
    }
  }

  uint64_t total = 0;
  for (size_t i = 0; i < manifest.entries.size(); ++i) {
    if (selected[i]) total += manifest.entries[i].size;
  }
  RestoreResult result;
  Prefetcher fetch(repo, manifest, selected,
                   static_cast<size_t>(std::max(1, options.parallelism)) * 2);
  for (size_t i = 0; i < manifest.entries.size(); ++i) {
    if (!selected[i]) continue;
    const Entry& e = manifest.entries[i];
    std::string dest = target + "/" + e.path;
    if (e.type == EntryType::kDir) {
      RETURN_IF_ERROR(EnsureDirs(target, e.path));
      ++result.dirs;
      continue;
    }
    RETURN_IF_ERROR(EnsureDirs(target, Parent(e.path)));
    RETURN_IF_ERROR(CheckReplaceable(dest));
    std::string tmp = TempName(dest);
    unlink(tmp.c_str());  // a leftover from an interrupted restore
    if (e.type == EntryType::kSymlink) {
      if (symlink(e.target.c_str(), tmp.c_str()) != 0) {
        return IoError("creating symlink " + dest, errno);
      }
      struct timespec ts[2] = {ToTimespec(e.mtime_ns), ToTimespec(e.mtime_ns)};
      utimensat(AT_FDCWD, tmp.c_str(), ts, AT_SYMLINK_NOFOLLOW);
      if (rename(tmp.c_str(), dest.c_str()) != 0) {
        int err = errno;
        unlink(tmp.c_str());
        return IoError("renaming " + tmp + " to " + dest, err);
      }
      ++result.symlinks;
      continue;
    }
    int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return IoError("creating " + tmp, errno);
    Status st;
    for (size_t c = 0; st.ok() && c < e.chunks.size(); ++c) {
      Result<std::string> data = fetch.Next();
      if (!data.ok()) {
        st = data.status().WithContext("restoring " + e.path);
        break;
      }
      st = WriteAll(fd, *data, tmp);
      result.bytes += data->size();
      if (options.progress) options.progress(result.bytes, total, e.path);
    }
    if (st.ok() && fchmod(fd, e.mode) != 0) st = IoError("chmod " + tmp, errno);
    if (st.ok()) {
      struct timespec ts[2] = {ToTimespec(e.mtime_ns), ToTimespec(e.mtime_ns)};
      if (futimens(fd, ts) != 0) st = IoError("setting mtime of " + tmp, errno);
    }
    if (close(fd) != 0 && st.ok()) st = IoError("closing " + tmp, errno);
    if (st.ok() && rename(tmp.c_str(), dest.c_str()) != 0) {
      st = IoError("renaming " + tmp + " to " + dest, errno);
    }
    if (!st.ok()) {
      unlink(tmp.c_str());
      return st;
    }
    ++result.files;
  }
  // Directory modes and times last, deepest first: writing into a directory
  // changes its mtime, and a read-only mode would stop the writes.
  for (size_t i = manifest.entries.size(); i-- > 0;) {
    if (!selected[i] || manifest.entries[i].type != EntryType::kDir) continue;
    const Entry& e = manifest.entries[i];
    std::string dest = target + "/" + e.path;
    if (chmod(dest.c_str(), e.mode) != 0) return IoError("chmod " + dest, errno);
    struct timespec ts[2] = {ToTimespec(e.mtime_ns), ToTimespec(e.mtime_ns)};
    if (utimensat(AT_FDCWD, dest.c_str(), ts, AT_SYMLINK_NOFOLLOW) != 0) {
      return IoError("setting mtime of " + dest, errno);
    }
  }
  return result;
}

}  // namespace gantry::backup
