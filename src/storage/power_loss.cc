// PowerLossFileSystem: see power_loss.h for the model. Inodes are never
// freed (tests are short); a directory inode holds its entries twice: as
// the running process sees them and as they were when the disk was mounted.
// Every change of an entry since the mount is in `log_`, with the
// directories whose fsync it still waits for; a crash image replays the
// durable changes and a prefix of the pending ones from the mount state.
#include "gantry/storage/power_loss.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <functional>

namespace gantry::storage {
namespace {

constexpr int kRoot = 0;
constexpr int kNone = -1;
constexpr size_t kRecentOps = 64;

struct Inode {
  bool dir = false;
  std::string data;                    // files: what the process sees
  size_t synced = 0;                   // files: data[0, synced) is durable (writes append)
  std::map<std::string, int> entries;  // dirs: as the process sees them
  std::map<std::string, int> mounted;  // dirs: durable at mount time
  int64_t mtime = 0;
};

// One change of one directory entry: `ino` linked as `name`, or removed.
struct Change {
  int dir = kRoot;
  std::string name;
  int ino = kNone;
};

// One atomic step of the namespace (a rename is two changes).
struct MetaOp {
  std::vector<Change> changes;
  std::set<int> unsynced;  // directories whose fsync this still waits for
  std::string what;
};

std::vector<std::string> Components(const std::string& path) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) out.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

uint64_t Fnv64(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

std::string DiskImage::Describe() const {
  std::string out;
  for (const auto& [path, data] : entries) {
    if (!data) {
      out += "d " + path + "\n";
    } else {
      char buf[64];
      std::snprintf(buf, sizeof buf, " %zu %016llx\n", data->size(),
                    static_cast<unsigned long long>(Fnv64(*data)));
      out += "f " + path + buf;
    }
  }
  return out;
}

class PowerLossFileSystem::Impl {
 public:
  explicit Impl(size_t block_bytes) : block_(block_bytes ? block_bytes : 1) {
    inodes_.emplace_back();
    inodes_.back().dir = true;
  }

  std::mutex mu;
  size_t block_;
  std::vector<Inode> inodes_;
  std::vector<MetaOp> log_;
  int64_t crash_after_ = -1;
  int64_t mutations_ = 0;
  bool crashed_ = false;
  int64_t clock_ = 0;
  std::deque<std::string> recent_;
  // Held locks; shared with the Lock objects, which may outlive the disk.
  struct LockTable {
    std::mutex mu;
    std::set<std::string> held;
  };
  std::shared_ptr<LockTable> locks_ = std::make_shared<LockTable>();

  // Counts one mutating call; the crash error when it is due. Holds mu.
  Status BeginLocked(const std::string& what) {
    if (crashed_) return Dead(what);
    if (crash_after_ >= 0 && mutations_ >= crash_after_) {
      crashed_ = true;
      return Dead(what);
    }
    ++mutations_;
    recent_.push_back(what);
    if (recent_.size() > kRecentOps) recent_.pop_front();
    return Status::Ok();
  }
  Status LiveLocked(const std::string& what) const { return crashed_ ? Dead(what) : Status::Ok(); }
  Status Dead(const std::string& what) const {
    return IoError("simulated power loss after " + std::to_string(mutations_) +
                       " operations (at: " + what + ")",
                   EIO);
  }

  // The inode at `path`, or kNone.
  int Resolve(const std::string& path) const {
    int ino = kRoot;
    for (const std::string& c : Components(path)) {
      const Inode& d = inodes_[ino];
      if (!d.dir) return kNone;
      auto it = d.entries.find(c);
      if (it == d.entries.end()) return kNone;
      ino = it->second;
    }
    return ino;
  }
  // The directory holding `path` and the last component; NotFound when the
  // parent is missing, InvalidArgument for "/".
  Status ResolveParent(const std::string& path, int* dir, std::string* name) const {
    std::vector<std::string> parts = Components(path);
    if (parts.empty()) return InvalidArgument("'" + path + "' names the root directory");
    *name = parts.back();
    int ino = kRoot;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const Inode& d = inodes_[ino];
      auto it = d.entries.find(parts[i]);
      if (!d.dir || it == d.entries.end()) {
        return NotFound("parent directory of " + path + " does not exist");
      }
      ino = it->second;
    }
    if (!inodes_[ino].dir) return NotFound("parent of " + path + " is not a directory");
    *dir = ino;
    return Status::Ok();
  }

  void RecordLocked(MetaOp op) {
    for (const Change& c : op.changes) {
      Inode& d = inodes_[c.dir];
      if (c.ino == kNone) {
        d.entries.erase(c.name);
      } else {
        d.entries[c.name] = c.ino;
      }
      d.mtime = ++clock_;
    }
    log_.push_back(std::move(op));
  }

  // Rename and Replace: one atomic change of two entries. Takes mu itself.
  Status Move(const std::string& from, const std::string& to, bool replace) {
    std::lock_guard<std::mutex> lock(mu);
    const std::string what = "rename " + from + " -> " + to + (replace ? " (replacing)" : "");
    RETURN_IF_ERROR(BeginLocked(what));
    int from_dir, to_dir;
    std::string from_name, to_name;
    RETURN_IF_ERROR(ResolveParent(from, &from_dir, &from_name));
    RETURN_IF_ERROR(ResolveParent(to, &to_dir, &to_name));
    auto it = inodes_[from_dir].entries.find(from_name);
    if (it == inodes_[from_dir].entries.end()) return NotFound(what + ": no such file");
    auto target = inodes_[to_dir].entries.find(to_name);
    if (target != inodes_[to_dir].entries.end()) {
      if (!replace) return AlreadyExists(what + ": target exists");
      if (inodes_[target->second].dir) return FailedPrecondition(what + ": target is a directory");
    }
    const int ino = it->second;
    RecordLocked(
        {{{from_dir, from_name, kNone}, {to_dir, to_name, ino}}, {from_dir, to_dir}, what});
    return Status::Ok();
  }

  int NewInodeLocked(bool dir) {
    inodes_.emplace_back();
    inodes_.back().dir = dir;
    inodes_.back().mtime = ++clock_;
    return static_cast<int>(inodes_.size()) - 1;
  }

  Status MkdirLocked(const std::string& path) {
    int dir;
    std::string name;
    RETURN_IF_ERROR(ResolveParent(path, &dir, &name));
    if (inodes_[dir].entries.count(name)) return AlreadyExists(path + " already exists");
    int ino = NewInodeLocked(true);
    RecordLocked({{{dir, name, ino}}, {dir}, "mkdir " + path});
    return Status::Ok();
  }

  // Unlinks `ino` (named `name` in `dir`, reached as `path`) and, first,
  // everything below it, one change per entry as rm -r does. readdir order
  // is arbitrary; reverse name order is the adversarial one for the usual
  // layouts (an upper-case marker such as COMMITTED goes last).
  void RemoveTreeLocked(int dir, const std::string& name, int ino, const std::string& path) {
    if (inodes_[ino].dir) {
      std::map<std::string, int> children = inodes_[ino].entries;
      for (auto it = children.rbegin(); it != children.rend(); ++it) {
        RemoveTreeLocked(ino, it->first, it->second, path + "/" + it->first);
      }
    }
    RecordLocked({{{dir, name, kNone}}, {dir}, "unlink " + path});
  }

  // Entries of every inode on a disk that kept the durable changes and the
  // first `pending_kept` pending ones.
  std::vector<std::map<std::string, int>> EntriesAfterCrash(size_t pending_kept) const {
    std::vector<std::map<std::string, int>> entries(inodes_.size());
    for (size_t i = 0; i < inodes_.size(); ++i) entries[i] = inodes_[i].mounted;
    size_t pending_seen = 0;
    for (const MetaOp& op : log_) {
      bool keep = op.unsynced.empty();
      if (!keep) keep = pending_seen++ < pending_kept;
      if (!keep) continue;
      for (const Change& c : op.changes) {
        if (c.ino == kNone) {
          entries[c.dir].erase(c.name);
        } else {
          entries[c.dir][c.name] = c.ino;
        }
      }
    }
    return entries;
  }

  size_t PendingCount() const {
    return std::count_if(log_.begin(), log_.end(),
                         [](const MetaOp& op) { return !op.unsynced.empty(); });
  }

  // Walks `entries` from the root; `data_of` gives each file's bytes.
  DiskImage Walk(const std::vector<std::map<std::string, int>>& entries,
                 const std::function<std::string(int)>& data_of) const {
    DiskImage image;
    std::set<int> on_path;  // a directory linked below itself is not followed
    std::function<void(int, const std::string&)> visit = [&](int dir, const std::string& prefix) {
      on_path.insert(dir);
      for (const auto& [name, ino] : entries[dir]) {
        std::string path = prefix + "/" + name;
        if (inodes_[ino].dir) {
          image.entries[path] = std::nullopt;
          if (!on_path.count(ino)) visit(ino, path);
        } else {
          image.entries[path] = data_of(ino);
        }
      }
      on_path.erase(dir);
    };
    visit(kRoot, "");
    return image;
  }

  // File data after a crash: kept up to `synced`, then `mode`:
  // 'd' dropped, 'c' complete, 'h' torn keeping the head blocks, 't' torn
  // keeping the tail blocks (unwritten blocks read as zeros).
  std::string DataAfterCrash(int ino, char mode) const {
    const Inode& f = inodes_[ino];
    if (mode == 'd') return f.data.substr(0, f.synced);
    if (mode == 'c' || f.synced >= f.data.size()) return f.data;
    std::string out = f.data;
    const size_t first = f.synced / block_;
    const size_t last = (f.data.size() - 1) / block_;
    const size_t blocks = last - first + 1;
    const size_t head = blocks / 2;  // one block alone is lost whole
    for (size_t b = first; b <= last; ++b) {
      bool keep = mode == 'h' ? b - first < head : b - first >= blocks - head;
      if (keep) continue;
      size_t from = std::max(b * block_, f.synced);
      size_t to = std::min((b + 1) * block_, out.size());
      std::fill(out.begin() + static_cast<std::ptrdiff_t>(from),
                out.begin() + static_cast<std::ptrdiff_t>(to), '\0');
    }
    return out;
  }
};

namespace {

class MemWritableFile : public WritableFile {
 public:
  MemWritableFile(PowerLossFileSystem::Impl& fs, int ino, std::string path)
      : fs_(fs), ino_(ino), path_(std::move(path)) {}

  Result<size_t> Write(const void* data, size_t bytes) override {
    std::lock_guard<std::mutex> lock(fs_.mu);
    if (closed_) return FailedPrecondition("write to closed file " + path_);
    RETURN_IF_ERROR(fs_.BeginLocked("write " + path_));
    Inode& f = fs_.inodes_[ino_];
    f.data.append(static_cast<const char*>(data), bytes);
    f.mtime = ++fs_.clock_;
    return bytes;
  }
  Status Sync() override {
    std::lock_guard<std::mutex> lock(fs_.mu);
    if (closed_) return FailedPrecondition("fsync of closed file " + path_);
    RETURN_IF_ERROR(fs_.BeginLocked("fsync " + path_));
    Inode& f = fs_.inodes_[ino_];
    f.synced = f.data.size();
    return Status::Ok();
  }
  Status Close() override {
    std::lock_guard<std::mutex> lock(fs_.mu);
    closed_ = true;
    return fs_.LiveLocked("close " + path_);
  }

 private:
  PowerLossFileSystem::Impl& fs_;
  int ino_;
  std::string path_;
  bool closed_ = false;
};

class MemReadableFile : public ReadableFile {
 public:
  MemReadableFile(PowerLossFileSystem::Impl& fs, int ino, std::string path)
      : fs_(fs), ino_(ino), path_(std::move(path)) {}

  Result<size_t> ReadAt(uint64_t offset, void* dst, size_t bytes) override {
    std::lock_guard<std::mutex> lock(fs_.mu);
    RETURN_IF_ERROR(fs_.LiveLocked("read " + path_));
    const std::string& data = fs_.inodes_[ino_].data;
    if (offset >= data.size()) return size_t{0};
    size_t n = std::min<size_t>(bytes, data.size() - offset);
    std::memcpy(dst, data.data() + offset, n);
    return n;
  }
  Result<uint64_t> Size() override {
    std::lock_guard<std::mutex> lock(fs_.mu);
    RETURN_IF_ERROR(fs_.LiveLocked("size of " + path_));
    return static_cast<uint64_t>(fs_.inodes_[ino_].data.size());
  }

 private:
  PowerLossFileSystem::Impl& fs_;
  int ino_;
  std::string path_;
};

class MemLock : public Lock {
 public:
  MemLock(std::shared_ptr<PowerLossFileSystem::Impl::LockTable> table, std::string path)
      : table_(std::move(table)), path_(std::move(path)) {}
  ~MemLock() override {
    std::lock_guard<std::mutex> lock(table_->mu);
    table_->held.erase(path_);
  }

 private:
  std::shared_ptr<PowerLossFileSystem::Impl::LockTable> table_;
  std::string path_;
};

}  // namespace

PowerLossFileSystem::PowerLossFileSystem(size_t block_bytes)
    : impl_(std::make_unique<Impl>(block_bytes)) {}

PowerLossFileSystem::PowerLossFileSystem(const DiskImage& image, size_t block_bytes)
    : impl_(std::make_unique<Impl>(block_bytes)) {
  // Parents sort before their children ("/a" < "/a/b"), so one pass links
  // every entry under an existing directory.
  for (const auto& [path, data] : image.entries) {
    int dir;
    std::string name;
    if (!impl_->ResolveParent(path, &dir, &name).ok()) continue;
    int ino = impl_->NewInodeLocked(!data.has_value());
    if (data) {
      impl_->inodes_[ino].data = *data;
      impl_->inodes_[ino].synced = data->size();
    }
    impl_->inodes_[dir].entries[name] = ino;
    impl_->inodes_[dir].mounted[name] = ino;
  }
}

PowerLossFileSystem::~PowerLossFileSystem() = default;

void PowerLossFileSystem::CrashAfter(int64_t n) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->crash_after_ = n < 0 ? -1 : impl_->mutations_ + n;
}

bool PowerLossFileSystem::crashed() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->crashed_;
}

int64_t PowerLossFileSystem::mutations() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->mutations_;
}

Status PowerLossFileSystem::Tick(const std::string& what) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->BeginLocked(what);
}

std::vector<std::string> PowerLossFileSystem::RecentOps(size_t n) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const auto& r = impl_->recent_;
  size_t from = r.size() > n ? r.size() - n : 0;
  return {r.begin() + static_cast<std::ptrdiff_t>(from), r.end()};
}

DiskImage PowerLossFileSystem::Visible() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<std::map<std::string, int>> entries;
  for (const Inode& i : impl_->inodes_) entries.push_back(i.entries);
  return impl_->Walk(entries, [&](int ino) { return impl_->inodes_[ino].data; });
}

std::vector<CrashState> PowerLossFileSystem::PossibleStates(size_t limit) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const Impl& m = *impl_;
  std::vector<CrashState> out;
  std::set<std::string> seen;  // full serialisations, so distinct disks are never merged
  auto add = [&](DiskImage image, std::string how) {
    if (out.size() >= limit) return;
    std::string key;
    for (const auto& [path, data] : image.entries) {
      key.append(path);
      if (data) {
        key.push_back('\1');
        key.append(std::to_string(data->size()));
        key.push_back('\1');
        key.append(*data);
      } else {
        key.push_back('\2');
      }
      key.push_back('\0');
    }
    if (!seen.insert(std::move(key)).second) return;
    out.push_back({std::move(image), std::move(how)});
  };
  const size_t pending = m.PendingCount();
  // The two extremes first, so a small limit still covers them.
  for (size_t kept : {size_t{0}, pending}) {
    auto entries = m.EntriesAfterCrash(kept);
    add(m.Walk(entries, [&](int ino) { return m.DataAfterCrash(ino, kept ? 'c' : 'd'); }),
        kept ? "everything reached the disk" : "only what was fsynced reached the disk");
  }
  for (size_t kept = 0; kept <= pending; ++kept) {
    auto entries = m.EntriesAfterCrash(kept);
    const std::string meta = "durable entries + " + std::to_string(kept) + " of " +
                             std::to_string(pending) + " pending entry changes";
    for (char mode : {'d', 'c', 'h', 't'}) {
      static const char* kName[] = {"unsynced data dropped", "unsynced data complete",
                                    "unsynced data torn (head kept)",
                                    "unsynced data torn (tail kept)"};
      const char* name = kName[mode == 'd' ? 0 : mode == 'c' ? 1 : mode == 'h' ? 2 : 3];
      add(m.Walk(entries, [&](int ino) { return m.DataAfterCrash(ino, mode); }),
          meta + "; " + name);
    }
    // One file at a time dropped or torn while every other file is complete:
    // catches a missing fsync of just that file.
    std::set<int> unsynced_files;
    for (size_t i = 0; i < m.inodes_.size(); ++i) {
      const Inode& f = m.inodes_[i];
      if (!f.dir && f.synced < f.data.size()) unsynced_files.insert(static_cast<int>(i));
    }
    for (int victim : unsynced_files) {
      for (char mode : {'d', 'h'}) {
        DiskImage image = m.Walk(
            entries, [&](int ino) { return m.DataAfterCrash(ino, ino == victim ? mode : 'c'); });
        add(std::move(image), meta + "; one file's unsynced data " +
                                  (mode == 'd' ? "dropped" : "torn") + ", others complete");
      }
    }
  }
  return out;
}

Result<std::unique_ptr<WritableFile>> PowerLossFileSystem::Create(const std::string& path,
                                                                  bool direct) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  RETURN_IF_ERROR(impl_->BeginLocked("create " + path));
  int dir;
  std::string name;
  RETURN_IF_ERROR(impl_->ResolveParent(path, &dir, &name));
  if (impl_->inodes_[dir].entries.count(name)) return AlreadyExists(path + " already exists");
  int ino = impl_->NewInodeLocked(false);
  impl_->RecordLocked({{{dir, name, ino}}, {dir}, "create " + path});
  return std::unique_ptr<WritableFile>(std::make_unique<MemWritableFile>(*impl_, ino, path));
}

Result<std::unique_ptr<ReadableFile>> PowerLossFileSystem::Open(const std::string& path) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  RETURN_IF_ERROR(impl_->LiveLocked("open " + path));
  int ino = impl_->Resolve(path);
  if (ino == kNone) return NotFound("opening " + path + ": no such file");
  if (impl_->inodes_[ino].dir) return FailedPrecondition("opening " + path + ": is a directory");
  return std::unique_ptr<ReadableFile>(std::make_unique<MemReadableFile>(*impl_, ino, path));
}

Status PowerLossFileSystem::CreateDir(const std::string& path) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  RETURN_IF_ERROR(impl_->BeginLocked("mkdir " + path));
  return impl_->MkdirLocked(path);
}

Status PowerLossFileSystem::CreateDirs(const std::string& path) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  RETURN_IF_ERROR(impl_->BeginLocked("mkdir -p " + path));
  std::string prefix;
  for (const std::string& c : Components(path)) {
    prefix += "/" + c;
    int ino = impl_->Resolve(prefix);
    if (ino != kNone) {
      if (!impl_->inodes_[ino].dir) return FailedPrecondition(prefix + " is not a directory");
      continue;
    }
    RETURN_IF_ERROR(impl_->MkdirLocked(prefix));
  }
  return Status::Ok();
}

Status PowerLossFileSystem::SyncDir(const std::string& path) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  RETURN_IF_ERROR(impl_->BeginLocked("fsync dir " + path));
  int ino = impl_->Resolve(path);
  if (ino == kNone) return NotFound("fsync of directory " + path + ": no such directory");
  if (!impl_->inodes_[ino].dir) return FailedPrecondition(path + " is not a directory");
  for (MetaOp& op : impl_->log_) op.unsynced.erase(ino);
  return Status::Ok();
}

Status PowerLossFileSystem::Rename(const std::string& from, const std::string& to) {
  return impl_->Move(from, to, /*replace=*/false);
}

Status PowerLossFileSystem::Replace(const std::string& from, const std::string& to) {
  return impl_->Move(from, to, /*replace=*/true);
}

Status PowerLossFileSystem::Link(const std::string& from, const std::string& to) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const std::string what = "link " + from + " -> " + to;
  RETURN_IF_ERROR(impl_->BeginLocked(what));
  int ino = impl_->Resolve(from);
  if (ino == kNone) return NotFound(what + ": no such file");
  if (impl_->inodes_[ino].dir) return FailedPrecondition(what + ": is a directory");
  int dir;
  std::string name;
  RETURN_IF_ERROR(impl_->ResolveParent(to, &dir, &name));
  if (impl_->inodes_[dir].entries.count(name)) return AlreadyExists(what + ": target exists");
  impl_->RecordLocked({{{dir, name, ino}}, {dir}, what});
  return Status::Ok();
}

Status PowerLossFileSystem::RemoveDir(const std::string& path) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  RETURN_IF_ERROR(impl_->BeginLocked("rmdir " + path));
  int dir;
  std::string name;
  RETURN_IF_ERROR(impl_->ResolveParent(path, &dir, &name));
  auto it = impl_->inodes_[dir].entries.find(name);
  if (it == impl_->inodes_[dir].entries.end())
    return NotFound("removing " + path + ": no such directory");
  const Inode& d = impl_->inodes_[it->second];
  if (!d.dir) return FailedPrecondition(path + " is not a directory");
  if (!d.entries.empty()) return FailedPrecondition("removing directory " + path + ": not empty");
  impl_->RecordLocked({{{dir, name, kNone}}, {dir}, "rmdir " + path});
  return Status::Ok();
}

Status PowerLossFileSystem::RemoveFile(const std::string& path) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  RETURN_IF_ERROR(impl_->BeginLocked("unlink " + path));
  int dir;
  std::string name;
  RETURN_IF_ERROR(impl_->ResolveParent(path, &dir, &name));
  auto it = impl_->inodes_[dir].entries.find(name);
  if (it == impl_->inodes_[dir].entries.end())
    return NotFound("removing " + path + ": no such file");
  if (impl_->inodes_[it->second].dir) return FailedPrecondition(path + " is a directory");
  impl_->RecordLocked({{{dir, name, kNone}}, {dir}, "unlink " + path});
  return Status::Ok();
}

Status PowerLossFileSystem::RemoveAll(const std::string& path) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  RETURN_IF_ERROR(impl_->BeginLocked("rm -r " + path));
  int dir;
  std::string name;
  if (!impl_->ResolveParent(path, &dir, &name).ok()) return Status::Ok();
  auto it = impl_->inodes_[dir].entries.find(name);
  if (it == impl_->inodes_[dir].entries.end()) return Status::Ok();
  impl_->RemoveTreeLocked(dir, name, it->second, path);
  return Status::Ok();
}

Result<std::vector<DirEntry>> PowerLossFileSystem::ListDir(const std::string& path) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  RETURN_IF_ERROR(impl_->LiveLocked("list " + path));
  int ino = impl_->Resolve(path);
  if (ino == kNone) return NotFound("listing " + path + ": no such directory");
  if (!impl_->inodes_[ino].dir) return FailedPrecondition(path + " is not a directory");
  std::vector<DirEntry> out;
  for (const auto& [name, child] : impl_->inodes_[ino].entries) {
    out.push_back({name, impl_->inodes_[child].dir});
  }
  return out;
}

Result<FileInfo> PowerLossFileSystem::Stat(const std::string& path) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  RETURN_IF_ERROR(impl_->LiveLocked("stat " + path));
  int ino = impl_->Resolve(path);
  if (ino == kNone) return NotFound(path + ": no such file or directory");
  const Inode& i = impl_->inodes_[ino];
  // The logical clock stands in for time: it orders changes, and a changed
  // file gets a new (seconds, nanoseconds) pair.
  return FileInfo{i.dir ? 0 : i.data.size(), i.dir, i.mtime / 1000000000, i.mtime % 1000000000,
                  static_cast<uint64_t>(ino)};
}

Result<std::unique_ptr<Lock>> PowerLossFileSystem::TryLock(const std::string& path) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  RETURN_IF_ERROR(impl_->BeginLocked("lock " + path));
  if (impl_->Resolve(path) == kNone) {
    int dir;
    std::string name;
    RETURN_IF_ERROR(impl_->ResolveParent(path, &dir, &name));
    int ino = impl_->NewInodeLocked(false);
    impl_->RecordLocked({{{dir, name, ino}}, {dir}, "create " + path});
  }
  {
    std::lock_guard<std::mutex> held(impl_->locks_->mu);
    if (!impl_->locks_->held.insert(path).second) {
      return FailedPrecondition(path + " is locked by another writer");
    }
  }
  return std::unique_ptr<Lock>(std::make_unique<MemLock>(impl_->locks_, path));
}

CrashExploration ExploreCrashes(
    const std::function<void(PowerLossFileSystem& fs)>& workload,
    const std::function<bool(int64_t crash_point, PowerLossFileSystem& recovered,
                             const CrashState& state)>& check,
    size_t block_bytes) {
  CrashExploration result;
  {
    PowerLossFileSystem fs(block_bytes);
    workload(fs);
    result.operations = fs.mutations();
  }
  // Point N is a power loss after the workload finished: what it left
  // unsynced is at stake there too.
  for (int64_t k = 0; k <= result.operations; ++k) {
    PowerLossFileSystem fs(block_bytes);
    fs.CrashAfter(k);
    workload(fs);
    ++result.crash_points;
    for (const CrashState& state : fs.PossibleStates()) {
      PowerLossFileSystem recovered(state.image, block_bytes);
      ++result.states_checked;
      if (!check(k, recovered, state)) return result;
    }
  }
  return result;
}

}  // namespace gantry::storage
