// `gantry backup create`: scan the sources, chunk files with the CDC chunker,
// upload new chunks in parallel, write the manifest last.
#include <dirent.h>
#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <unordered_set>

#include "gantry/backup/backup.h"
#include "gantry/core/log.h"
#include "gantry/core/text.h"
#include "gantry/core/units.h"
#include "lock.h"

namespace gantry::backup {
namespace {

struct Scanned {
  std::string abs;  // where to read it
  size_t entry;     // index into the manifest's entries
};

// Manifests are JSON, which holds UTF-8 only; other names are refused by name
// rather than silently mangled.
bool ValidUtf8(const std::string& s) {
  // The JSON library's own check, so that whatever passes here also dumps.
  try {
    (void)Json(s).dump();
    return true;
  } catch (const Json::exception&) {
    return false;
  }
}

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

class Scanner {
 public:
  Scanner(const std::vector<std::string>& excludes, Manifest& m, std::vector<Scanned>& files)
      : excludes_(excludes), m_(m), files_(files) {}

  // Adds `abs` (already lstat'ed into `st`) as `rel` and recurses into directories.
  Status Add(const std::string& abs, const std::string& rel, const struct stat& st) {
    Entry e;
    e.path = rel;
    e.mode = st.st_mode & 07777;
    e.mtime_ns = MtimeNs(st);
    if (S_ISDIR(st.st_mode)) {
      e.type = EntryType::kDir;
      m_.entries.push_back(std::move(e));
      ++m_.stats.dirs;
      return Walk(abs, rel);
    }
    if (S_ISLNK(st.st_mode)) {
      std::string target(static_cast<size_t>(st.st_size) + 256, '\0');
      ssize_t n = readlink(abs.c_str(), target.data(), target.size());
      if (n < 0) return IoError("reading symlink " + abs, errno);
      target.resize(static_cast<size_t>(n));
      if (!ValidUtf8(target)) {
        return InvalidArgument("symlink " + abs + " has a target that is not valid UTF-8; " +
                               "backup manifests cannot hold it - --exclude it");
      }
      e.type = EntryType::kSymlink;
      e.target = std::move(target);
      m_.entries.push_back(std::move(e));
      ++m_.stats.symlinks;
      return Status::Ok();
    }
    if (S_ISREG(st.st_mode)) {
      e.type = EntryType::kFile;
      e.size = static_cast<uint64_t>(st.st_size);
      total_bytes_ += e.size;
      files_.push_back({abs, m_.entries.size()});
      m_.entries.push_back(std::move(e));
      ++m_.stats.files;
      return Status::Ok();
    }
    log::warn("gantry backup: skipping {} (not a file, directory or symlink)", abs);
    ++m_.stats.skipped;
    return Status::Ok();
  }

  uint64_t total_bytes() const { return total_bytes_; }

 private:
  Status Walk(const std::string& abs, const std::string& rel) {
    DIR* d = opendir(abs.c_str());
    if (d == nullptr) return IoError("reading directory " + abs, errno);
    std::vector<std::string> names;
    errno = 0;
    while (struct dirent* de = readdir(d)) {
      std::string_view n = de->d_name;
      if (n != "." && n != "..") names.emplace_back(n);
    }
    int err = errno;
    closedir(d);
    if (err != 0) return IoError("reading directory " + abs, err);
    // Sorted so that the same tree always gives the same manifest.
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) {
      std::string child_abs = abs + "/" + n;
      if (!ValidUtf8(n)) {
        return InvalidArgument("file name " +
                               Json(child_abs).dump(-1, ' ', true, Json::error_handler_t::replace) +
                               " is not valid UTF-8, which backup manifests cannot hold; rename "
                               "it or --exclude it");
      }
      std::string child_rel = rel + "/" + n;
      if (MatchesAny(excludes_, child_rel)) continue;
      struct stat st {};
      if (lstat(child_abs.c_str(), &st) != 0) return IoError("reading " + child_abs, errno);
      RETURN_IF_ERROR(Add(child_abs, child_rel, st));
    }
    return Status::Ok();
  }

  const std::vector<std::string>& excludes_;
  Manifest& m_;
  std::vector<Scanned>& files_;
  uint64_t total_bytes_ = 0;
};

// Chunks already in the repository (from one listing at the start, plus what
// this run uploads). Shared by the upload tasks.
class KnownChunks {
 public:
  void Insert(std::string id) {
    std::lock_guard lock(mu_);
    ids_.insert(std::move(id));
  }
  bool Contains(const std::string& id) const {
    std::lock_guard lock(mu_);
    return ids_.count(id) > 0;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_set<std::string> ids_;
};

struct Upload {
  ChunkRef ref;
  bool uploaded = false;
  uint64_t object_bytes = 0;
};

Result<Upload> StoreChunk(const Repository& repo, KnownChunks& known, std::string data) {
  Upload u;
  u.ref.size = data.size();
  u.ref.id = repo.IdOf(data);
  if (known.Contains(u.ref.id)) return u;
  ASSIGN_OR_RETURN(std::string object, repo.EncodeChunk(u.ref.id, data));
  storage::PutOptions po;
  // Another run (or another task of this one) may store the same chunk at the
  // same time; the conditional create makes that a no-op instead of a rewrite.
  po.if_none_match = true;
  std::string key = Repository::ChunkKey(u.ref.id);
  Status s = repo.store().Put(
      key, std::span(reinterpret_cast<const std::byte*>(object.data()), object.size()), po);
  if (s.ok()) {
    u.uploaded = true;
    u.object_bytes = object.size();
  } else if (s.code() != StatusCode::kAlreadyExists) {
    return s.WithContext("uploading chunk " + key + " to " + repo.url());
  }
  known.Insert(u.ref.id);
  return u;
}

Status ReadFull(int fd, uint8_t* p, size_t n, size_t* got, const std::string& path) {
  *got = 0;
  while (*got < n) {
    ssize_t r = read(fd, p + *got, n - *got);
    if (r < 0) {
      if (errno == EINTR) continue;
      return IoError("reading " + path, errno);
    }
    if (r == 0) break;
    *got += static_cast<size_t>(r);
  }
  return Status::Ok();
}

}  // namespace

Result<Manifest> CreateBackup(Repository& repo, const CreateOptions& options) {
  if (options.sources.empty()) return InvalidArgument("give at least one directory to back up");
  const Clock& clock = options.clock ? *options.clock : SystemClock();
  Manifest m;
  m.id = internal::RandomId();
  auto wall = clock.WallNow();
  m.time_unix = std::chrono::duration_cast<std::chrono::seconds>(wall.time_since_epoch()).count();
  m.time = FormatUtc(wall, "%Y-%m-%dT%H:%M:%SZ");
  // Microseconds in the key: keys sort by time, and two backups in the same
  // second must still sort in the order they were made ("latest").
  char micros[16];
  snprintf(
      micros, sizeof micros, ".%06lld",
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::microseconds>(wall.time_since_epoch()).count() %
          1000000));
  m.key = std::string(kBackupPrefix) + FormatUtc(wall, "%Y%m%dT%H%M%S") + micros + "Z-" + m.id +
          ".json";
  m.tags = options.tags;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) m.hostname = host;

  // 1. Scan: every entry first, so that progress knows the total.
  std::vector<Scanned> files;
  Scanner scanner(options.excludes, m, files);
  std::unordered_set<std::string> roots;
  std::string default_name;
  for (const std::string& src : options.sources) {
    std::string abs = src;
    if (abs.empty()) return InvalidArgument("empty source directory name");
    if (abs.front() != '/') {
      char cwd[4096];
      if (getcwd(cwd, sizeof cwd) == nullptr) return IoError("getcwd", errno);
      abs = std::string(cwd) + "/" + abs;
    }
    while (abs.size() > 1 && abs.back() == '/') abs.pop_back();
    struct stat st {};
    if (stat(abs.c_str(), &st) != 0) {
      if (errno == ENOENT) return InvalidArgument("source " + src + " does not exist");
      return IoError("source " + src, errno);
    }
    if (!S_ISDIR(st.st_mode)) return InvalidArgument("source " + src + " is not a directory");
    std::string root = abs.substr(abs.rfind('/') + 1);
    if (root.empty() || root == "." || root == "..") root = "root";
    if (!roots.insert(root).second) {
      return InvalidArgument("two sources have the same name '" + root +
                             "'; back them up separately (each source is stored under its base "
                             "name)");
    }
    m.sources.push_back(abs);
    if (!default_name.empty()) default_name += ",";
    default_name += root;
    RETURN_IF_ERROR(scanner.Add(abs, root, st));
  }
  m.name = options.name.empty() ? default_name : options.name;
  if (!ValidUtf8(m.name)) return InvalidArgument("--name is not valid UTF-8");
  for (const auto& [k, v] : m.tags) {
    if (!ValidUtf8(k) || !ValidUtf8(v)) return InvalidArgument("--tag value is not valid UTF-8");
  }
  for (const std::string& s : m.sources) {
    if (!ValidUtf8(s)) return InvalidArgument("a source path is not valid UTF-8; rename it");
  }
  log::info("gantry backup: {} files ({}) in {} directories to back up", m.stats.files,
            FormatSize(scanner.total_bytes()), m.stats.dirs);

  // 2. A lock, before looking at what is stored: from the listing below on,
  //    this backup relies on stored chunks that no manifest may reference
  //    any more, and a prune must not collect them until the manifest is
  //    written. Held until this function returns.
  ASSIGN_OR_RETURN(auto lock,
                   internal::RepoLock::Acquire(repo, internal::LockKind::kCreate, clock));

  // 3. What the repository already has (an interrupted earlier run included).
  KnownChunks known;
  {
    ASSIGN_OR_RETURN(auto objects, ListPrefix(repo.store(), kChunkPrefix));
    for (const auto& o : objects) {
      std::string id = Repository::IdFromChunkKey(o.key);
      if (!id.empty()) known.Insert(std::move(id));
    }
  }

  // 4. Chunk and upload, `parallelism` chunks in flight (bounded memory:
  //    2 x parallelism x max chunk size).
  const Chunker chunker(repo.config().chunker);
  const size_t max_bytes = chunker.params().max_bytes;
  const size_t window = static_cast<size_t>(std::max(1, options.parallelism)) * 2;
  struct Pending {
    size_t entry;
    size_t index;
    std::future<Result<Upload>> result;
  };
  std::deque<Pending> pending;
  Status first_error;
  uint64_t done_bytes = 0;
  const uint64_t total = scanner.total_bytes();
  auto finish_one = [&]() {
    Pending p = std::move(pending.front());
    pending.pop_front();
    Result<Upload> r = p.result.get();
    if (!r.ok()) {
      if (first_error.ok()) first_error = r.status();
      return;
    }
    m.entries[p.entry].chunks[p.index] = r->ref;
    if (r->uploaded) {
      ++m.stats.new_chunks;
      m.stats.uploaded_bytes += r->object_bytes;
    }
    done_bytes += r->ref.size;
    if (options.progress) options.progress(done_bytes, total, m.entries[p.entry].path);
  };

  std::vector<uint8_t> buf(2 * max_bytes);
  for (const Scanned& f : files) {
    if (!first_error.ok()) break;
    Entry& e = m.entries[f.entry];
    int fd = open(f.abs.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
      first_error = IoError("reading " + f.abs, errno);
      break;
    }
    size_t start = 0, end = 0;
    bool eof = false;
    uint64_t size = 0;
    while (first_error.ok()) {
      if (!eof && end - start < max_bytes) {
        if (start > 0) {
          std::memmove(buf.data(), buf.data() + start, end - start);
          end -= start;
          start = 0;
        }
        size_t got = 0;
        Status s = ReadFull(fd, buf.data() + end, buf.size() - end, &got, f.abs);
        if (!s.ok()) {
          first_error = s;
          break;
        }
        end += got;
        // ReadFull stops short of a full window only at the end of the file.
        if (end < buf.size()) eof = true;
      }
      if (end == start) break;
      size_t cut = chunker.NextCut(std::span(buf.data() + start, end - start), eof);
      std::string data(reinterpret_cast<const char*>(buf.data() + start), cut);
      start += cut;
      size += cut;
      e.chunks.emplace_back();
      while (pending.size() >= window) finish_one();
      pending.push_back({f.entry, e.chunks.size() - 1,
                         std::async(std::launch::async, StoreChunk, std::cref(repo),
                                    std::ref(known), std::move(data))});
    }
    close(fd);
    e.size = size;  // what was read, even if the file changed since the scan
    m.stats.bytes += size;
    m.stats.chunks += e.chunks.size();
  }
  while (!pending.empty()) finish_one();
  if (!first_error.ok()) {
    return first_error.WithContext("backup to " + repo.url() +
                                   " did not complete; no backup was recorded, re-run to resume");
  }

  // 5. The manifest, last: until it exists, the backup does not.
  ASSIGN_OR_RETURN(std::string object, repo.EncodeManifest(m.key, m.ToJson()));
  storage::PutOptions po;
  po.if_none_match = true;
  po.content_type = repo.encrypted() ? "application/octet-stream" : "application/json";
  Status s = repo.store().Put(
      m.key, std::span(reinterpret_cast<const std::byte*>(object.data()), object.size()), po);
  if (!s.ok()) return s.WithContext("writing manifest " + repo.url() + "/" + m.key);
  log::info("gantry backup: wrote {} ({} new chunks of {})", m.key, m.stats.new_chunks,
            m.stats.chunks);
  return m;
}

}  // namespace gantry::backup
