// CheckpointManager: staging, the commit protocol, verification, loading and
// retention. See gantry/ckpt/manager.h for the layout and the protocol.
#include "gantry/ckpt/manager.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include "format.h"
#include "gantry/comm/communicator.h"
#include "gantry/config.h"
#include "gantry/core/log.h"
#include "gantry/storage/filesystem.h"
#include "tiering.h"

namespace gantry::ckpt {

using internal::ManifestFromJson;
using internal::ManifestToJson;
using internal::ShardEntry;
using internal::TensorEntry;

// ---------------------------------------------------------------- buffers

Result<AlignedBuffer> AlignedBuffer::Allocate(size_t bytes) {
  // Large buffers are aligned to 2 MiB and asked to use transparent huge
  // pages: faulting in a multi-GiB pool 4 KiB at a time costs more than
  // writing it (THP is often in "madvise" mode, so the hint matters).
  constexpr size_t kHuge = 2u << 20;
  const size_t align = bytes >= 2 * kHuge ? kHuge : storage::kDirectIoAlignment;
  void* p = nullptr;
  if (::posix_memalign(&p, align, std::max<size_t>(bytes, 1)) != 0) {
    return ResourceExhausted("cannot allocate " + std::to_string(bytes) +
                             " bytes of aligned memory; reduce the state size or free memory");
  }
  if (align == kHuge) (void)::madvise(p, bytes / kHuge * kHuge, MADV_HUGEPAGE);
  AlignedBuffer b;
  b.data_ = p;
  b.size_ = bytes;
  return b;
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

void* AlignedBuffer::Release() {
  size_ = 0;
  return std::exchange(data_, nullptr);
}

void AlignedFree(void* p) { std::free(p); }

std::string_view VerifyModeName(VerifyMode mode) {
  switch (mode) {
    case VerifyMode::kFull:
      return "full";
    case VerifyMode::kSample:
      return "sample";
    case VerifyMode::kNone:
      return "none";
  }
  return "full";
}

Result<VerifyMode> ParseVerifyMode(std::string_view text) {
  if (text == "full") return VerifyMode::kFull;
  if (text == "sample") return VerifyMode::kSample;
  if (text == "none") return VerifyMode::kNone;
  return InvalidArgument("verify mode '" + std::string(text) +
                         "' is unknown; use full, sample or none");
}

// ---------------------------------------------------------------- impl

namespace {

constexpr size_t kWriteBlock = 16u << 20;  // large aligned writes keep the device busy
constexpr auto kPollInterval = std::chrono::milliseconds(20);
// Loads split the bytes to read into kLoadThreads contiguous ranges, one per
// thread, each read front to back in pieces of about kLoadPiece through the
// thread's own file descriptors. More threads than cores: an uncached read
// waits on the device. Own descriptors and contiguous ranges: the kernel keeps
// readahead state per open file, and threads taking turns on one descriptor
// look random to it (measured on a virtio disk: 0.55 GB/s that way, 2.1-2.4
// GB/s with a range and a descriptor per thread, dd 2.0 GB/s).
constexpr size_t kLoadPiece = 8u << 20;
constexpr size_t kLoadThreads = 8;

size_t RoundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "unknown-host";
  return buf;
}

// A step selected by the sample verify mode: first and last chunk of every
// tensor plus every 16th chunk overall.
bool SampleChunk(size_t index, size_t count, size_t global) {
  return index == 0 || index + 1 == count || global % 16 == 0;
}

// "file:///nvme/ckpt" names the local directory "/nvme/ckpt".
std::string LocalRoot(const std::string& root) {
  return root.starts_with("file://") ? root.substr(7) : root;
}

double Seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

class CheckpointManager::Impl {
 public:
  Impl(Options options)
      : opt_(std::move(options)),
        fs_(opt_.fs ? *opt_.fs : storage::LocalFileSystem()),
        clock_(opt_.clock ? *opt_.clock : SystemClock()),
        run_dir_(LocalRoot(opt_.root) + "/" + opt_.run) {}

  // Finishes the in-flight save and every queued upload (a checkpoint that
  // only the local disk holds is what tiering exists to avoid), then stops
  // the eviction watcher and the uploader.
  ~Impl() {
    StopEvictionWatcher();
    Status s = Wait();
    if (!s.ok()) log::error("checkpoint save failed: {}", s.message());
    if (uploader_.joinable()) {
      {
        std::lock_guard<std::mutex> lock(up_mu_);
        up_stop_ = true;
      }
      up_cv_.notify_all();
      uploader_.join();
      std::lock_guard<std::mutex> lock(up_mu_);
      if (!up_pending_.ok()) log::error("checkpoint upload failed: {}", up_pending_.message());
    }
  }

  Status Init() {
    if (opt_.root.empty()) return InvalidArgument("checkpoint root is empty; pass a directory");
    if (opt_.run.empty() || opt_.run.find('/') != std::string::npos || opt_.run[0] == '.') {
      return InvalidArgument("run name '" + opt_.run +
                             "' must be non-empty, without '/', and not start with '.'");
    }
    if (opt_.world_size < 1 || opt_.rank < 0 || opt_.rank >= opt_.world_size) {
      return InvalidArgument("rank " + std::to_string(opt_.rank) + " is outside world size " +
                             std::to_string(opt_.world_size));
    }
    if (opt_.chunk_bytes == 0 || opt_.chunk_bytes > internal::kMaxChunkBytes) {
      return InvalidArgument("chunk_bytes " + std::to_string(opt_.chunk_bytes) +
                             " is outside [1, " + std::to_string(internal::kMaxChunkBytes) + "]");
    }
    const bool has_persist = opt_.persist_store != nullptr || !opt_.persist.empty();
    if (opt_.root_store != nullptr || storage::IsRemoteUrl(opt_.root))
      return InitDirect(has_persist);
    if (has_persist) {
      storage::ObjectStore* store = opt_.persist_store;
      if (store == nullptr) {
        ASSIGN_OR_RETURN(owned_persist_store_, storage::OpenObjectStore(opt_.persist, opt_.store));
        store = owned_persist_store_.get();
      }
      persist_ = std::make_unique<internal::StoreTier>(*store, opt_.run);
      up_status_.enabled = true;
      up_status_.store = store->url();
      // Rank 0 commits, so rank 0 uploads.
      if (opt_.rank == 0 && !opt_.read_only) uploader_ = std::thread([this] { UploaderLoop(); });
    }
    if (opt_.read_only) {
      auto info = fs_.Stat(run_dir_);
      if (!info.ok() || !info->is_dir) {
        return NotFound("no checkpoint run directory " + run_dir_ +
                        "; pass <root>/<run> of an existing run");
      }
      return Status::Ok();
    }
    RETURN_IF_ERROR(fs_.CreateDirs(run_dir_).WithContext("checkpoint run directory"));
    // Makes the run directory's entry durable; without it a power loss could
    // take the run directory, and the first commit in it, away.
    RETURN_IF_ERROR(fs_.SyncDir(LocalRoot(opt_.root)).WithContext("checkpoint root directory"));
    if (opt_.staging_bytes > 0) {
      ASSIGN_OR_RETURN(staging_, AlignedBuffer::Allocate(
                                     RoundUp(opt_.staging_bytes, storage::kDirectIoAlignment)));
    }
    if (opt_.rank == 0) {
      auto lock = fs_.TryLock(LockPath());
      if (lock.ok()) RETURN_IF_ERROR(CleanStale());
    }
    return Status::Ok();
  }

  std::string StepDir(int64_t step) const {
    if (direct_) return direct_->Where(step);
    return run_dir_ + "/" + internal::StepName(step);
  }
  std::string TmpDir(int64_t step) const {
    return run_dir_ + "/" + std::string(internal::kTmpPrefix) + internal::StepName(step);
  }
  std::string LockPath() const { return run_dir_ + "/" + std::string(internal::kLockName); }
  const Options& options() const { return opt_; }

  // Copying into the pool and writing the file overlap: a helper thread
  // copies (and checksums) the tensors piece by piece while this thread
  // writes what is already staged, so a save takes about as long as the
  // write alone. The protocol (and any Communicator call) stays on the
  // caller's thread.
  Status Save(int64_t step, std::span<const TensorView> tensors, const Json& metadata) {
    RETURN_IF_ERROR(WaitSave());
    RETURN_IF_ERROR(Writable("saving"));
    RETURN_IF_ERROR(Layout(step, tensors, metadata));
    std::thread copier([this, tensors] { CopyAndHash(tensors); });
    Status st = WriteAndCommit();
    copier.join();
    return st;
  }

  // Returns once the tensors are in the pool; checksums, writes and the
  // commit run on the background thread.
  Status SaveAsync(int64_t step, std::span<const TensorView> tensors, const Json& metadata) {
    RETURN_IF_ERROR(WaitSave());
    RETURN_IF_ERROR(Writable("saving"));
    RETURN_IF_ERROR(Layout(step, tensors, metadata));
    ParallelCopy(tensors);
    worker_ = std::thread([this] {
      // An exception must not escape the thread (std::terminate); it becomes
      // the pending status that Wait() reports.
      Status s;
      try {
        HashStaged();
        s = WriteAndCommit();
      } catch (const std::bad_alloc&) {
        s = ResourceExhausted("out of memory while saving step " + std::to_string(staged_.step));
      } catch (const std::exception& e) {
        s = Internal("saving step " + std::to_string(staged_.step) + ": " + e.what());
      }
      std::lock_guard<std::mutex> lock(mu_);
      pending_ = std::move(s);
    });
    return Status::Ok();
  }

  // The in-flight save's error, if any.
  Status WaitSave() {
    if (worker_.joinable()) worker_.join();
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(pending_, Status::Ok());
  }

  // The in-flight save's error first, else an upload error not reported
  // yet. Save and SaveAsync do not return upload errors: the local commit
  // does not depend on the store, and an emergency checkpoint must not be
  // refused because an older upload failed.
  Status Wait() {
    RETURN_IF_ERROR(WaitSave());
    std::lock_guard<std::mutex> lock(up_mu_);
    return std::exchange(up_pending_, Status::Ok());
  }

  Result<std::vector<int64_t>> CommittedSteps() {
    if (direct_) return direct_->CommittedSteps();
    ASSIGN_OR_RETURN(std::vector<storage::DirEntry> entries, fs_.ListDir(run_dir_));
    std::vector<int64_t> steps;
    for (const storage::DirEntry& e : entries) {
      int64_t step;
      if (!e.is_dir || !internal::ParseStepName(e.name, &step)) continue;
      if (fs_.Stat(run_dir_ + "/" + e.name + "/" + std::string(internal::kCommitName)).ok()) {
        steps.push_back(step);
      }
    }
    std::sort(steps.begin(), steps.end());
    return steps;
  }

  Result<std::vector<CheckpointInfo>> List() {
    ASSIGN_OR_RETURN(std::vector<int64_t> steps, CommittedSteps());
    std::vector<CheckpointInfo> out;
    for (int64_t step : steps) {
      CheckpointInfo info;
      info.step = step;
      info.path = StepDir(step);
      auto m = ReadManifest(step);
      if (m.ok()) {
        for (const TensorEntry& t : m->tensors) info.bytes += t.length;
        info.tensors = m->tensors.size();
        info.world_size = m->world_size;
        info.created = m->created;
        info.created_unix_s = m->created_unix_s;
        info.metadata = m->metadata;
      } else {
        info.error = m.status().message();
      }
      out.push_back(std::move(info));
    }
    return out;
  }

  Result<LatestResult> Latest() {
    if (persist_) return LatestTiered();
    ASSIGN_OR_RETURN(std::vector<int64_t> steps, CommittedSteps());
    LatestResult r;
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
      auto v = Verify(*it, opt_.verify, {});
      if (v.ok()) {
        r.step = *it;
        return r;
      }
      if (!opt_.fallback) return v.status();
      std::string why = "step " + std::to_string(*it) + ": " + v.status().message();
      log::warn("skipping checkpoint {}; falling back to an older one", why);
      r.skipped.push_back(std::move(why));
    }
    std::string msg = "no committed checkpoint in " + run_dir_;
    if (!r.skipped.empty()) msg += " verifies (" + std::to_string(r.skipped.size()) + " failed)";
    return NotFound(msg);
  }

  Result<LoadedCheckpoint> Load(std::optional<int64_t> step, std::span<const std::string> names) {
    if (persist_) return LoadTiered(step, names);
    if (step) return LoadStep(*step, names);
    // Reading and verifying happen in one pass, so the newest step is not
    // read twice. Like Latest(), any failure of a step falls back to the
    // previous one, except a newer format version (FailedPrecondition: an
    // older step would silently lose progress) and a requested tensor that
    // the step lacks (the caller's error).
    ASSIGN_OR_RETURN(std::vector<int64_t> steps, CommittedSteps());
    std::vector<std::string> skipped;
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
      bool missing_name = false;
      auto loaded = LoadStep(*it, names, &missing_name);
      if (loaded.ok() || !opt_.fallback || missing_name ||
          loaded.status().code() == StatusCode::kFailedPrecondition) {
        return loaded;
      }
      log::warn("checkpoint step {} cannot be loaded ({}), falling back to an older one", *it,
                loaded.status().message());
      skipped.push_back(loaded.status().message());
    }
    return NotFound("no committed checkpoint in " + run_dir_ +
                    (skipped.empty() ? std::string() : " loads without errors"));
  }

  Result<VerifyReport> Verify(int64_t step, VerifyMode mode, std::span<const std::string> names) {
    ASSIGN_OR_RETURN(internal::Manifest m, ReadManifest(step));
    VerifyReport report;
    report.step = step;
    RETURN_IF_ERROR(CheckShardSizes(step, m));
    if (mode == VerifyMode::kNone) return report;
    // One chunk at most, but no more than the largest tensor needs.
    uint64_t largest = 0;
    for (const TensorEntry& t : m.tensors) largest = std::max(largest, t.length);
    std::vector<char> buf(std::min(m.chunk_bytes, largest));
    size_t global = 0;
    std::map<int, std::unique_ptr<storage::ReadableFile>> files;
    for (const TensorEntry& t : m.tensors) {
      if (!names.empty() && std::find(names.begin(), names.end(), t.name) == names.end()) continue;
      for (size_t i = 0; i < t.chunks.size(); ++i, ++global) {
        if (mode == VerifyMode::kSample && !SampleChunk(i, t.chunks.size(), global)) continue;
        uint64_t off = i * m.chunk_bytes;
        size_t len = std::min<uint64_t>(m.chunk_bytes, t.length - off);
        RETURN_IF_ERROR(ReadShard(step, m, t.shard, files, t.offset + off, buf.data(), len));
        RETURN_IF_ERROR(CheckChunk(step, m, t, i, buf.data(), len));
        report.bytes_checked += len;
        ++report.chunks_checked;
      }
    }
    return report;
  }

  Result<std::vector<int64_t>> Prune() {
    RETURN_IF_ERROR(Writable("pruning"));
    if (direct_) return direct_->Prune(opt_.retention, std::nullopt, NowUnix());
    std::lock_guard<std::mutex> local(local_mu_);
    ASSIGN_OR_RETURN(std::unique_ptr<storage::Lock> lock, LockRun("pruning"));
    return PruneLocked(std::nullopt);
  }

  // ------------------------------------------------------------ tiering

  Status WaitForUploads() {
    std::unique_lock<std::mutex> lock(up_mu_);
    up_cv_.wait(lock, [&] { return up_queue_.empty(); });
    return std::exchange(up_pending_, Status::Ok());
  }

  UploadStatus Uploads() const {
    std::lock_guard<std::mutex> lock(up_mu_);
    UploadStatus s = up_status_;
    s.pending.assign(up_queue_.begin(), up_queue_.end());
    std::sort(s.pending.begin(), s.pending.end());
    return s;
  }

  Result<std::vector<int64_t>> PersistedSteps() {
    if (direct_) return direct_->CommittedSteps();
    if (persist_) return persist_->CommittedSteps();
    return FailedPrecondition("run " + run_dir_ +
                              " has no object store; set Options::persist to tier checkpoints");
  }

  Status OnEviction(EvictionCallback fn, ScheduledEventsOptions options, bool acknowledge) {
    if (!fn) return InvalidArgument("the eviction callback is empty");
    StopEvictionWatcher();
    watcher_ = std::make_unique<ScheduledEventsWatcher>(options);
    // Acknowledging goes through its own watcher object: the callback may
    // stop (and so destroy) the polling one.
    auto acker = std::make_shared<ScheduledEventsWatcher>(options);
    return watcher_->Start([fn = std::move(fn), acker, acknowledge](const ScheduledEvent& e) {
      if (!e.loses_local_disk()) {
        log::info("scheduled event {} ({}) keeps the local disks; no emergency checkpoint",
                  e.event_id, e.event_type);
        return;
      }
      log::warn("scheduled event {}: {} of {} not before '{}'; calling the eviction handler",
                e.event_id, e.event_type, fmt::join(e.resources, ","), e.not_before_text);
      fn(e);
      if (acknowledge) {
        Status s = acker->Acknowledge(e.event_id);
        if (!s.ok()) log::warn("acknowledging scheduled event {}: {}", e.event_id, s.message());
      }
    });
  }

  void StopEvictionWatcher() {
    if (watcher_) watcher_->Stop();
    watcher_.reset();
  }

 private:
  struct Staged {
    int64_t step = 0;
    Json metadata;
    size_t file_bytes = 0;  // exact shard size (no padding)
    std::vector<TensorEntry> entries;
  };

  Status Writable(std::string_view what) const {
    if (!opt_.read_only) return Status::Ok();
    return FailedPrecondition(std::string(what) + " " + run_dir_ +
                              " refused: the manager was opened read-only");
  }

  Result<std::unique_ptr<storage::Lock>> LockRun(std::string_view what) {
    auto lock = fs_.TryLock(LockPath());
    if (!lock.ok() && lock.status().code() == StatusCode::kFailedPrecondition) {
      return AlreadyExists(std::string(what) + " refused: " + lock.status().message());
    }
    return lock;
  }

  // Validates the request and lays the shard out in the staging pool exactly
  // as the file (safetensors prefix, then the tensors back to back), so the
  // writer issues large aligned writes straight from the pool. Copies only
  // the prefix; the tensors follow with CopyAndHash or ParallelCopy.
  Status Layout(int64_t step, std::span<const TensorView> tensors, const Json& metadata) {
    if (step < 0 || step > 9'999'999'999) {
      return InvalidArgument("step " + std::to_string(step) + " is outside [0, 9999999999]");
    }
    // dump() throws on strings that are not UTF-8; the manifest is written
    // later (possibly on the worker thread), so catch that here.
    std::string metadata_text;
    try {
      metadata_text = metadata.dump();
    } catch (const std::exception& e) {
      return InvalidArgument(std::string("checkpoint metadata cannot be written as JSON (") +
                             e.what() + "); use UTF-8 strings");
    }
    if (!metadata.is_null() && !metadata.is_object()) {
      return InvalidArgument("checkpoint metadata must be a JSON object, got " + metadata_text);
    }
    RETURN_IF_ERROR(internal::ValidateTensors(tensors));
    std::string prefix = internal::SafetensorsPrefix(tensors, storage::kDirectIoAlignment, Json());
    size_t total = prefix.size();
    for (const TensorView& t : tensors) total += t.bytes;
    size_t padded = RoundUp(total, storage::kDirectIoAlignment);
    if (staging_.size() < padded) {
      staging_ = AlignedBuffer();  // free first: the peak stays one pool
      ASSIGN_OR_RETURN(staging_, AlignedBuffer::Allocate(padded));
    }
    char* base = static_cast<char*>(staging_.data());
    std::memcpy(base, prefix.data(), prefix.size());
    // Zero the padding so that no stale pool bytes reach the disk.
    std::memset(base + total, 0, padded - total);
    staged_ = Staged();
    staged_.step = step;
    staged_.metadata = metadata.is_null() ? Json::object() : metadata;
    staged_.file_bytes = total;
    uint64_t off = prefix.size();
    for (const TensorView& t : tensors) {
      TensorEntry e;
      e.name = t.name;
      e.dtype = t.dtype;
      e.shape = t.shape;
      e.shard = opt_.rank;
      e.offset = off;
      e.length = t.bytes;
      staged_.entries.push_back(std::move(e));
      off += t.bytes;
    }
    std::lock_guard<std::mutex> lock(progress_mu_);
    ready_ = prefix.size();
    return Status::Ok();
  }

  void MarkReady(size_t end) {
    {
      std::lock_guard<std::mutex> lock(progress_mu_);
      ready_ = end;
    }
    progress_cv_.notify_one();
  }

  // Blocks until the pool holds the file's bytes [0, end).
  void WaitReady(size_t end) {
    std::unique_lock<std::mutex> lock(progress_mu_);
    progress_cv_.wait(lock, [&] { return ready_ >= end; });
  }

  // Copies tensor by tensor, one checksum chunk at a time, hashing each
  // chunk while it is still in cache and publishing progress to the writer.
  void CopyAndHash(std::span<const TensorView> tensors) {
    char* base = static_cast<char*>(staging_.data());
    for (size_t k = 0; k < tensors.size(); ++k) {
      const TensorView& t = tensors[k];
      TensorEntry& e = staged_.entries[k];
      const char* src = static_cast<const char*>(t.data);
      for (size_t off = 0; off < t.bytes; off += opt_.chunk_bytes) {
        size_t len = std::min(opt_.chunk_bytes, t.bytes - off);
        std::memcpy(base + e.offset + off, src + off, len);
        e.chunks.push_back(internal::Xxh3(base + e.offset + off, len));
        MarkReady(e.offset + off + len);
      }
    }
    MarkReady(staged_.file_bytes);
  }

  // Copies every tensor into the pool with several threads (the time
  // SaveAsync blocks the caller is this copy).
  void ParallelCopy(std::span<const TensorView> tensors) {
    struct Piece {
      char* dst;
      const char* src;
      size_t len;
    };
    std::vector<Piece> pieces;
    char* base = static_cast<char*>(staging_.data());
    size_t bytes = 0;
    for (size_t k = 0; k < tensors.size(); ++k) {
      if (tensors[k].bytes == 0) continue;
      pieces.push_back({base + staged_.entries[k].offset, static_cast<const char*>(tensors[k].data),
                        tensors[k].bytes});
      bytes += tensors[k].bytes;
    }
    constexpr size_t kPerThread = 64u << 20;
    size_t threads = std::clamp<size_t>(bytes / kPerThread, 1,
                                        std::max(1u, std::thread::hardware_concurrency()));
    threads = std::min<size_t>(threads, 8);
    size_t share = (bytes + threads - 1) / threads;
    // Thread i copies the byte range [i * share, (i + 1) * share) of the
    // concatenated tensors.
    auto copy_range = [&](size_t begin, size_t end) {
      size_t pos = 0;
      for (const Piece& p : pieces) {
        size_t lo = std::max(begin, pos), hi = std::min(end, pos + p.len);
        if (lo < hi) std::memcpy(p.dst + (lo - pos), p.src + (lo - pos), hi - lo);
        pos += p.len;
      }
    };
    std::vector<std::thread> pool;
    for (size_t i = 1; i < threads; ++i) {
      pool.emplace_back(copy_range, i * share, std::min(bytes, (i + 1) * share));
    }
    copy_range(0, std::min(bytes, share));
    for (std::thread& t : pool) t.join();
    MarkReady(staged_.file_bytes);
  }

  void HashStaged() {
    const char* base = static_cast<const char*>(staging_.data());
    for (TensorEntry& e : staged_.entries) {
      e.chunks = internal::ChunkChecksums(base + e.offset, e.length, opt_.chunk_bytes);
    }
  }

  // Writes the staged shard and runs the commit protocol. On failure the
  // temporary directory is removed (rank 0) and committed steps are untouched.
  Status WriteAndCommit() {
    if (direct_) return DirectCommit();
    // See local_mu_: the uploader's catch-up retention must not hold the
    // run lock when this save tries to take it.
    std::lock_guard<std::mutex> local(local_mu_);
    Staged& s = staged_;
    const std::string tmp = TmpDir(s.step);
    const std::string ctx = "saving step " + std::to_string(s.step) + " to " + run_dir_;
    std::unique_ptr<storage::Lock> lock;
    if (opt_.rank == 0) {
      ASSIGN_OR_RETURN(lock, LockRun(ctx));
      if (fs_.Stat(StepDir(s.step)).ok()) {
        return AlreadyExists(ctx + ": " + StepDir(s.step) +
                             " is already committed; checkpoints are immutable, use a new step");
      }
      RETURN_IF_ERROR(CleanStale().WithContext(ctx));
      RETURN_IF_ERROR(fs_.CreateDir(tmp).WithContext(ctx));
    }
    Status st = WriteRankPart(tmp);
    if (opt_.rank == 0) {
      // Once the shard barriers are passed, the final barrier is reached
      // even when the commit fails, so the other ranks learn the outcome
      // instead of waiting in it.
      const bool in_final_barrier = st.ok() && opt_.comm != nullptr;
      if (st.ok()) st = Commit(tmp);
      if (!st.ok()) {
        Status cleanup = fs_.RemoveAll(tmp);
        if (!cleanup.ok()) log::warn("removing {} after a failed save: {}", tmp, cleanup.message());
      } else {
        // Queued before local retention runs, which never removes a step
        // that waits for its upload.
        EnqueueUpload(s.step);
        auto pruned = PruneLocked(s.step);
        if (!pruned.ok())
          log::warn("retention after step {}: {}", s.step, pruned.status().message());
      }
      if (in_final_barrier) {
        Status barrier = opt_.comm->Barrier();
        if (st.ok()) st = barrier;
      }
      return st.WithContext(ctx);
    }
    if (!st.ok()) return st.WithContext(ctx);
    // Other ranks return once rank 0 has committed. The temporary directory
    // vanishes either by the commit rename or by rank 0 giving up, so its
    // absence without a committed step means the save failed on rank 0.
    if (opt_.comm) RETURN_IF_ERROR(opt_.comm->Barrier());
    const std::string marker = StepDir(s.step) + "/" + std::string(internal::kCommitName);
    bool abandoned = false;
    RETURN_IF_ERROR(WaitFor(
        [&] {
          if (fs_.Stat(marker).ok()) return true;
          abandoned = !fs_.Stat(tmp).ok() && !fs_.Stat(marker).ok();
          return abandoned;
        },
        ctx + ": rank 0 did not commit"));
    if (abandoned) {
      return FailedPrecondition(
          ctx + ": rank 0 abandoned the step (see its error); nothing was committed");
    }
    return Status::Ok();
  }

  Status WaitFor(const std::function<bool()>& done, const std::string& what) {
    auto deadline = clock_.Now() + opt_.barrier_timeout;
    while (!done()) {
      if (clock_.Now() >= deadline) {
        return DeadlineExceeded(what + " within " + std::to_string(opt_.barrier_timeout.count()) +
                                " s (barrier_timeout); check that every rank is saving this step");
      }
      clock_.SleepFor(kPollInterval);
    }
    return Status::Ok();
  }

  Status WriteRankPart(const std::string& tmp) {
    Staged& s = staged_;
    if (opt_.comm) {
      RETURN_IF_ERROR(opt_.comm->Barrier());  // rank 0 has created tmp
    } else if (opt_.rank != 0) {
      RETURN_IF_ERROR(WaitFor([&] { return fs_.Stat(tmp).ok(); },
                              "rank 0 did not start step " + std::to_string(s.step)));
    }
    const std::string file = internal::ShardName(opt_.rank, opt_.world_size);
    const std::string path = tmp + "/" + file;
    const char* base = static_cast<const char*>(staging_.data());
    {
      ASSIGN_OR_RETURN(std::unique_ptr<storage::WritableFile> f, fs_.Create(path, opt_.direct_io));
      const size_t total = s.file_bytes;
      const size_t aligned = total / storage::kDirectIoAlignment * storage::kDirectIoAlignment;
      size_t written = 0;
      while (written < total) {
        // Whole aligned blocks while the copy is in progress; the unaligned
        // tail (written buffered) last.
        size_t end = written < aligned ? std::min(written + kWriteBlock, aligned) : total;
        WaitReady(end);
        RETURN_IF_ERROR(storage::WriteAll(*f, base + written, end - written, path));
        written = end;
      }
      RETURN_IF_ERROR(f->Sync());
      RETURN_IF_ERROR(f->Close());
    }
    // Rank 0 keeps its own record in memory; the others publish theirs next
    // to their shard, after the shard is durable.
    // The record appears under its final name only complete (rename), since
    // rank 0 reads it as soon as the name exists.
    if (opt_.rank != 0) {
      ShardEntry shard{file, opt_.rank, s.file_bytes};
      const std::string part = RankPartPath(tmp, opt_.rank);
      RETURN_IF_ERROR(storage::WriteSmallFile(fs_, part + ".partial",
                                              internal::RankPartToJson(shard, s.entries).dump()));
      RETURN_IF_ERROR(fs_.Rename(part + ".partial", part));
    }
    if (opt_.comm) RETURN_IF_ERROR(opt_.comm->Barrier());  // every shard is durable
    return Status::Ok();
  }

  static std::string RankPartPath(const std::string& tmp, int rank) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "/rank-%05d.json", rank);
    return tmp + buf;
  }

  // The manifest fields that do not depend on the shards.
  internal::Manifest BaseManifest() const {
    const Staged& s = staged_;
    internal::Manifest m;
    m.step = s.step;
    m.created_unix_s = NowUnix();
    m.created = internal::IsoTime(m.created_unix_s);
    m.creator = std::string("gantry ") + GANTRY_VERSION + " on " + HostName() + " pid " +
                std::to_string(::getpid());
    m.world_size = opt_.world_size;
    m.chunk_bytes = opt_.chunk_bytes;
    m.metadata = s.metadata;
    return m;
  }

  int64_t NowUnix() const {
    return std::chrono::duration_cast<std::chrono::seconds>(clock_.WallNow().time_since_epoch())
        .count();
  }

  Status Commit(const std::string& tmp) {
    Staged& s = staged_;
    internal::Manifest m = BaseManifest();
    // The storage barrier: every rank's record appears only after its shard
    // was fsynced.
    RETURN_IF_ERROR(WaitFor(
        [&] {
          for (int r = 1; r < opt_.world_size; ++r) {
            if (!fs_.Stat(RankPartPath(tmp, r)).ok()) return false;
          }
          return true;
        },
        "not every rank wrote its shard of step " + std::to_string(s.step)));
    std::set<std::string> names;
    for (int r = 0; r < opt_.world_size; ++r) {
      const std::string part_path = RankPartPath(tmp, r);
      ShardEntry shard{internal::ShardName(0, opt_.world_size), 0, s.file_bytes};
      std::vector<TensorEntry> tensors = s.entries;
      if (r != 0) {
        tensors.clear();
        ASSIGN_OR_RETURN(std::string text,
                         storage::ReadSmallFile(fs_, part_path, internal::kMaxManifestBytes));
        ASSIGN_OR_RETURN(Json j, ParseJson(text, part_path));
        RETURN_IF_ERROR(internal::RankPartFromJson(j, part_path, &shard, &tensors));
        RETURN_IF_ERROR(fs_.RemoveFile(part_path));
      }
      ASSIGN_OR_RETURN(storage::FileInfo fi, fs_.Stat(tmp + "/" + shard.file));
      if (fi.size != shard.bytes) {
        return DataLoss(tmp + "/" + shard.file + " has " + std::to_string(fi.size) +
                        " bytes but rank " + std::to_string(r) + " wrote " +
                        std::to_string(shard.bytes));
      }
      for (TensorEntry& t : tensors) {
        if (!names.insert(t.name).second) {
          return InvalidArgument("tensor '" + t.name +
                                 "' is saved by more than one rank; "
                                 "give each rank's tensors distinct names");
        }
        t.shard = static_cast<int>(m.shards.size());
        m.tensors.push_back(std::move(t));
      }
      m.shards.push_back(std::move(shard));
    }
    const std::string manifest = ManifestToJson(m).dump(1) + "\n";
    RETURN_IF_ERROR(
        storage::WriteSmallFile(fs_, tmp + "/" + std::string(internal::kManifestName), manifest));
    // The marker is written last and carries the manifest digest, so a
    // manifest that does not match its marker is detected on load.
    RETURN_IF_ERROR(storage::WriteSmallFile(fs_, tmp + "/" + std::string(internal::kCommitName),
                                            "sha256 " + internal::Sha256Hex(manifest) + "\n"));
    RETURN_IF_ERROR(fs_.SyncDir(tmp));
    RETURN_IF_ERROR(fs_.Rename(tmp, StepDir(s.step)));
    // Without this fsync a power loss could forget the rename.
    return fs_.SyncDir(run_dir_);
  }

  // Removes ".tmp-*" entries: abandoned saves and half-deleted steps. The
  // caller holds the run lock (or knows no writer does).
  Status CleanStale() {
    ASSIGN_OR_RETURN(std::vector<storage::DirEntry> entries, fs_.ListDir(run_dir_));
    for (const storage::DirEntry& e : entries) {
      if (!e.name.starts_with(internal::kTmpPrefix)) continue;
      log::info("removing stale checkpoint temporary {}/{}", run_dir_, e.name);
      RETURN_IF_ERROR(fs_.RemoveAll(run_dir_ + "/" + e.name));
    }
    return Status::Ok();
  }

  // Applies the retention rules. Never deletes `just_saved` (the step this
  // call committed), the newest step that verifies (with opts_.verify) nor
  // any step newer than it (a failed verification is not a reason to
  // delete; when nothing verifies, nothing is deleted). Steps whose manifest
  // cannot be read do not count toward keep_last.
  Result<std::vector<int64_t>> PruneLocked(std::optional<int64_t> just_saved) {
    std::vector<int64_t> deleted;
    const Retention& r = opt_.retention;
    if (r.keep_last <= 0 && r.keep_every <= 0 && r.keep_for.count() <= 0) return deleted;
    ASSIGN_OR_RETURN(std::vector<int64_t> steps, CommittedSteps());
    // Newest first. The step just committed was checksummed as it was
    // written, so it is trusted without reading it back.
    std::optional<int64_t> newest_good;
    for (auto it = steps.rbegin(); it != steps.rend() && !newest_good; ++it) {
      if ((just_saved && *it == *just_saved) || Verify(*it, opt_.verify, {}).ok()) {
        newest_good = *it;
      }
    }
    if (!newest_good) return deleted;
    const int64_t now = NowUnix();
    int readable = 0;  // readable steps seen so far, newest first
    std::vector<int64_t> doomed_steps;
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
      const int64_t step = *it;
      auto m = ReadManifest(step);
      bool recent = false;
      if (m.ok()) recent = r.keep_last > 0 && ++readable <= r.keep_last;
      bool keep =
          step >= *newest_good || (just_saved && step == *just_saved) || recent ||
          UploadPending(step) || (r.keep_every > 0 && step % r.keep_every == 0) ||
          (m.ok() && r.keep_for.count() > 0 && now - m->created_unix_s < r.keep_for.count());
      if (!keep) doomed_steps.push_back(step);
    }
    std::sort(doomed_steps.begin(), doomed_steps.end());
    for (int64_t step : doomed_steps) {
      // Rename first so that a crash mid-delete never leaves a step that
      // looks committed but has lost files.
      const std::string doomed =
          run_dir_ + "/" + std::string(internal::kTmpPrefix) + "delete-" + internal::StepName(step);
      RETURN_IF_ERROR(fs_.Rename(StepDir(step), doomed));
      RETURN_IF_ERROR(fs_.SyncDir(run_dir_));
      RETURN_IF_ERROR(fs_.RemoveAll(doomed));
      deleted.push_back(step);
    }
    return deleted;
  }

  Result<internal::Manifest> ReadManifest(int64_t step) {
    if (direct_) return direct_->ReadManifest(step);
    const std::string dir = StepDir(step);
    const std::string commit_path = dir + "/" + std::string(internal::kCommitName);
    const std::string manifest_path = dir + "/" + std::string(internal::kManifestName);
    auto marker = storage::ReadSmallFile(fs_, commit_path, internal::kMaxMarkerBytes);
    if (!marker.ok()) {
      if (marker.status().code() == StatusCode::kNotFound) {
        return NotFound("step " + std::to_string(step) + " is not committed (no " + commit_path +
                        ")");
      }
      return marker.status();
    }
    ASSIGN_OR_RETURN(std::string text,
                     storage::ReadSmallFile(fs_, manifest_path, internal::kMaxManifestBytes));
    std::string want = "sha256 " + internal::Sha256Hex(text) + "\n";
    if (*marker != want) {
      return DataLoss(manifest_path + " does not match the SHA-256 in " + commit_path +
                      "; the manifest is corrupt");
    }
    auto j = ParseJson(text, manifest_path);
    if (!j.ok()) return DataLoss(j.status().message());
    return ManifestFromJson(*j, manifest_path);
  }

  Status CheckShardSizes(int64_t step, const internal::Manifest& m) {
    if (direct_) return direct_->CheckShardSizes(step, m);
    for (const ShardEntry& s : m.shards) {
      const std::string path = StepDir(step) + "/" + s.file;
      auto fi = fs_.Stat(path);
      if (!fi.ok()) {
        return DataLoss("shard " + path + " of step " + std::to_string(step) + " is missing (" +
                        fi.status().message() + ")");
      }
      if (fi->size != s.bytes) {
        return DataLoss("shard " + path + " is truncated or extended: " + std::to_string(fi->size) +
                        " bytes, the manifest says " + std::to_string(s.bytes));
      }
    }
    return Status::Ok();
  }

  Status CheckChunk(int64_t step, const internal::Manifest& m, const TensorEntry& t, size_t i,
                    const void* data, size_t len) {
    if (internal::Xxh3(data, len) == t.chunks[i]) return Status::Ok();
    uint64_t off = t.offset + i * m.chunk_bytes;
    return DataLoss("checksum mismatch in shard " + StepDir(step) + "/" + m.shards[t.shard].file +
                    ", tensor '" + t.name + "', chunk " + std::to_string(i) + " (file bytes [" +
                    std::to_string(off) + ", " + std::to_string(off + len) +
                    ")): the checkpoint is corrupt");
  }

  // Reads the selected tensors straight into their final buffers, in
  // pieces of whole checksum chunks spread over a few threads that each read
  // and verify their piece (the page cache or the device is the limit, not
  // one core's hashing).
  // Sets *missing_name when a requested tensor is not in the step.
  Result<LoadedCheckpoint> LoadStep(int64_t step, std::span<const std::string> names,
                                    bool* missing_name = nullptr) {
    ASSIGN_OR_RETURN(internal::Manifest m, ReadManifest(step));
    RETURN_IF_ERROR(CheckShardSizes(step, m));
    for (const std::string& n : names) {
      bool found = std::any_of(m.tensors.begin(), m.tensors.end(),
                               [&](const TensorEntry& t) { return t.name == n; });
      if (!found) {
        if (missing_name) *missing_name = true;
        return NotFound("tensor '" + n + "' is not in step " + std::to_string(step) + " (" +
                        std::to_string(m.tensors.size()) + " tensors)");
      }
    }
    LoadedCheckpoint out;
    out.step = step;
    out.metadata = m.metadata;
    struct Piece {
      const TensorEntry* entry;
      char* dst;
      int shard;
      const std::string* path;
      size_t first_chunk, end_chunk;
      size_t global;  // index of first_chunk among all chunks (sample mode)
      uint64_t bytes;
    };
    std::map<int, std::string> paths;
    std::vector<Piece> pieces;
    const size_t chunks_per_piece = std::max<size_t>(1, kLoadPiece / m.chunk_bytes);
    size_t global = 0;
    for (const TensorEntry& t : m.tensors) {
      if (!names.empty() && std::find(names.begin(), names.end(), t.name) == names.end()) {
        global += t.chunks.size();
        continue;
      }
      if (!paths.count(t.shard)) {
        paths[t.shard] = StepDir(step) + "/" + m.shards[t.shard].file;
        // Opened here once so that a missing shard fails before any thread starts.
        if (!direct_) {
          ASSIGN_OR_RETURN(std::unique_ptr<storage::ReadableFile> probe, fs_.Open(paths[t.shard]));
        }
      }
      Tensor tensor;
      tensor.name = t.name;
      tensor.dtype = t.dtype;
      tensor.shape = t.shape;
      ASSIGN_OR_RETURN(tensor.data, AlignedBuffer::Allocate(t.length));
      char* dst = static_cast<char*>(tensor.data.data());
      for (size_t c = 0; c < t.chunks.size(); c += chunks_per_piece) {
        size_t e = std::min(t.chunks.size(), c + chunks_per_piece);
        uint64_t bytes = std::min<uint64_t>(e * m.chunk_bytes, t.length) - c * m.chunk_bytes;
        pieces.push_back({&t, dst, t.shard, &paths[t.shard], c, e, global + c, bytes});
      }
      global += t.chunks.size();
      out.tensors.push_back(std::move(tensor));
    }
    // File order, so that each thread's range is one sequential stream.
    std::sort(pieces.begin(), pieces.end(), [&m](const Piece& a, const Piece& b) {
      uint64_t ao = a.entry->offset + a.first_chunk * m.chunk_bytes;
      uint64_t bo = b.entry->offset + b.first_chunk * m.chunk_bytes;
      return std::tie(a.shard, ao) < std::tie(b.shard, bo);
    });
    size_t threads = std::min<size_t>({pieces.size(), kLoadThreads});
    uint64_t total = 0;
    for (const Piece& p : pieces) total += p.bytes;
    // Range k is the pieces whose start falls in bytes [k*total/T, (k+1)*total/T).
    std::vector<size_t> bounds(threads + 1, pieces.size());
    bounds[0] = 0;
    {
      uint64_t seen = 0;
      size_t k = 1;
      for (size_t i = 0; i < pieces.size() && k < threads; ++i) {
        while (k < threads && seen >= total * k / threads) bounds[k++] = i;
        seen += pieces[i].bytes;
      }
      for (; k < threads; ++k) bounds[k] = pieces.size();
    }
    std::atomic<bool> stop{false};
    std::mutex err_mu;
    Status first_error;
    auto work = [&](size_t range) {
      std::map<int, std::unique_ptr<storage::ReadableFile>> files;  // this thread's descriptors
      for (size_t i = bounds[range]; i < bounds[range + 1] && !stop.load(); ++i) {
        const Piece& p = pieces[i];
        uint64_t begin = p.first_chunk * m.chunk_bytes;
        uint64_t end = std::min<uint64_t>(p.end_chunk * m.chunk_bytes, p.entry->length);
        Status st =
            ReadShard(step, m, p.shard, files, p.entry->offset + begin, p.dst + begin, end - begin);
        for (size_t c = p.first_chunk; st.ok() && c < p.end_chunk; ++c) {
          if (opt_.verify == VerifyMode::kNone) break;
          if (opt_.verify == VerifyMode::kSample &&
              !SampleChunk(c, p.entry->chunks.size(), p.global + (c - p.first_chunk))) {
            continue;
          }
          uint64_t off = c * m.chunk_bytes;
          st = CheckChunk(step, m, *p.entry, c, p.dst + off,
                          std::min<uint64_t>(m.chunk_bytes, p.entry->length - off));
        }
        if (!st.ok()) {
          std::lock_guard<std::mutex> lock(err_mu);
          if (first_error.ok()) first_error = std::move(st);
          stop = true;  // stop the others early
        }
      }
    };
    std::vector<std::thread> pool;
    for (size_t i = 1; i < threads; ++i) pool.emplace_back(work, i);
    if (threads > 0) work(0);
    for (std::thread& t : pool) t.join();
    RETURN_IF_ERROR(first_error);
    return out;
  }

  // ------------------------------------------------------------ direct mode

  Status InitDirect(bool has_persist) {
    if (has_persist) {
      return InvalidArgument("persist '" + opt_.persist + "' needs a local root; with the root " +
                             "on an object store (direct mode) the store is already durable");
    }
    if (opt_.world_size != 1) {
      return InvalidArgument("direct-to-object-store checkpoints support world_size 1, not " +
                             std::to_string(opt_.world_size) +
                             "; give each rank a local root and use persist");
    }
    storage::ObjectStore* store = opt_.root_store;
    if (store == nullptr) {
      ASSIGN_OR_RETURN(owned_root_store_, storage::OpenObjectStore(opt_.root, opt_.store));
      store = owned_root_store_.get();
    }
    direct_ = std::make_unique<internal::StoreTier>(*store, opt_.run);
    if (opt_.read_only) {
      ASSIGN_OR_RETURN(std::vector<int64_t> steps, direct_->CommittedSteps());
      if (steps.empty()) {
        return NotFound("no committed checkpoint under " + direct_->RunUrl() +
                        "; pass the root and run of an existing run");
      }
    }
    if (opt_.staging_bytes > 0) {
      ASSIGN_OR_RETURN(staging_, AlignedBuffer::Allocate(
                                     RoundUp(opt_.staging_bytes, storage::kDirectIoAlignment)));
    }
    return Status::Ok();
  }

  // Reads shard bytes [offset, offset+len) of `step`: a ranged read on the
  // store in direct mode, else through `files` (the calling thread's own
  // descriptors, opened on first use).
  Status ReadShard(int64_t step, const internal::Manifest& m, int shard,
                   std::map<int, std::unique_ptr<storage::ReadableFile>>& files, uint64_t offset,
                   void* dst, size_t len) {
    if (direct_) {
      return direct_->store().GetRange(direct_->Key(step, m.shards[shard].file), offset,
                                       std::span(static_cast<std::byte*>(dst), len));
    }
    const std::string path = StepDir(step) + "/" + m.shards[shard].file;
    if (!files.count(shard)) {
      ASSIGN_OR_RETURN(files[shard], fs_.Open(path));
    }
    return storage::ReadExact(*files[shard], offset, dst, len, path);
  }

  // The shard goes up straight from the staging pool (the store sends it
  // as parallel blocks), then the manifest, then the marker.
  Status DirectCommit() {
    Staged& s = staged_;
    const std::string ctx = "saving step " + std::to_string(s.step) + " to " + direct_->RunUrl();
    if (direct_->IsCommitted(s.step)) {
      return AlreadyExists(ctx + ": " + direct_->Where(s.step) +
                           " is already committed; checkpoints are immutable, use a new step");
    }
    WaitReady(s.file_bytes);
    const std::string shard = internal::ShardName(0, 1);
    RETURN_IF_ERROR(
        direct_->store()
            .Put(direct_->Key(s.step, shard),
                 std::span(static_cast<const std::byte*>(staging_.data()), s.file_bytes))
            .WithContext(ctx));
    internal::Manifest m = BaseManifest();
    m.shards.push_back({shard, 0, s.file_bytes});
    m.tensors = s.entries;
    for (TensorEntry& t : m.tensors) t.shard = 0;
    RETURN_IF_ERROR(
        direct_->CommitManifest(s.step, ManifestToJson(m).dump(1) + "\n").WithContext(ctx));
    auto pruned = direct_->Prune(opt_.retention, s.step, NowUnix());
    if (!pruned.ok()) log::warn("retention after step {}: {}", s.step, pruned.status().message());
    return Status::Ok();
  }

  // ------------------------------------------------------------ uploads

  void EnqueueUpload(int64_t step) {
    if (!persist_ || !uploader_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(up_mu_);
      up_queue_.push_back(step);
    }
    up_cv_.notify_all();
  }

  bool UploadPending(int64_t step) const {
    std::lock_guard<std::mutex> lock(up_mu_);
    return std::find(up_queue_.begin(), up_queue_.end(), step) != up_queue_.end();
  }

  // Uploads queued steps in order until stopped with an empty queue.
  void UploaderLoop() {
    while (true) {
      int64_t step;
      {
        std::unique_lock<std::mutex> lock(up_mu_);
        up_cv_.wait(lock, [&] { return up_stop_ || !up_queue_.empty(); });
        if (up_queue_.empty()) return;
        step = up_queue_.front();
      }
      const auto t0 = clock_.Now();
      Result<uint64_t> sent = Status();
      try {
        sent = UploadOne(step);
      } catch (const std::exception& e) {
        sent = Internal("uploading step " + std::to_string(step) + ": " + e.what());
      }
      const double secs = Seconds(clock_.Now() - t0);
      if (sent.ok()) {
        log::info("checkpoint step {} uploaded to {} ({} bytes in {:.2f} s)", step,
                  persist_->Where(step), *sent, secs);
        // Before the step leaves the queue, so that WaitForUploads() also
        // waits for the store's retention.
        auto pruned = persist_->Prune(opt_.persist_retention, step, NowUnix());
        if (!pruned.ok()) {
          log::warn("retention on {}: {}", persist_->RunUrl(), pruned.status().message());
        }
        PruneLocalAfterUpload(step);
      }
      {
        std::lock_guard<std::mutex> lock(up_mu_);
        up_queue_.pop_front();
        if (sent.ok()) {
          up_status_.last_uploaded = std::max(up_status_.last_uploaded, step);
          up_status_.bytes_uploaded += *sent;
          up_status_.last_seconds = secs;
          up_status_.last_error.clear();
        } else {
          ++up_status_.failed;
          up_status_.last_error = sent.status().message();
          if (up_pending_.ok()) up_pending_ = sent.status();
          log::error("checkpoint upload: {}", sent.status().message());
        }
      }
      up_cv_.notify_all();
    }
  }

  // Local retention skipped the steps that waited for their upload; once
  // the queue has caught up (`step` is the last queued and the newest local
  // step, so it is trusted like a step just saved) it runs again.
  void PruneLocalAfterUpload(int64_t step) {
    const Retention& r = opt_.retention;
    if (r.keep_last <= 0 && r.keep_every <= 0 && r.keep_for.count() <= 0) return;
    {
      std::lock_guard<std::mutex> lock(up_mu_);
      if (up_queue_.size() != 1) return;
    }
    // Waiting costs no upload: the queue is empty but for this step. A save
    // that commits a newer step meanwhile makes the check below skip; that
    // step's upload catches up instead.
    std::lock_guard<std::mutex> local(local_mu_);
    auto lock = fs_.TryLock(LockPath());
    if (!lock.ok()) return;
    auto steps = CommittedSteps();
    if (!steps.ok() || steps->empty() || steps->back() != step) return;
    auto pruned = PruneLocked(step);
    if (!pruned.ok())
      log::warn("retention after uploading step {}: {}", step, pruned.status().message());
  }

  Result<uint64_t> UploadOne(int64_t step) {
    // Already there (e.g. the step was downloaded from the store).
    if (persist_->IsCommitted(step)) return 0;
    const std::string dir = StepDir(step);
    const std::string ctx =
        "uploading step " + std::to_string(step) + " to " + persist_->Where(step);
    ASSIGN_OR_RETURN(std::string marker,
                     storage::ReadSmallFile(fs_, dir + "/" + std::string(internal::kCommitName),
                                            internal::kMaxMarkerBytes));
    const std::string manifest_path = dir + "/" + std::string(internal::kManifestName);
    ASSIGN_OR_RETURN(std::string text,
                     storage::ReadSmallFile(fs_, manifest_path, internal::kMaxManifestBytes));
    ASSIGN_OR_RETURN(Json j, ParseJson(text, manifest_path));
    ASSIGN_OR_RETURN(internal::Manifest m, ManifestFromJson(j, manifest_path));
    return persist_->UploadStep(step, dir, m, text, marker);
  }

  // ------------------------------------------------------------ two tiers

  // Committed steps of both tiers, newest first, each with where it is.
  struct TierSteps {
    std::vector<int64_t> steps;  // newest first
    std::set<int64_t> local, remote;
  };
  Result<TierSteps> BothTiers() {
    TierSteps t;
    ASSIGN_OR_RETURN(std::vector<int64_t> local, CommittedSteps());
    t.local.insert(local.begin(), local.end());
    auto remote = persist_->CommittedSteps();
    if (remote.ok()) {
      t.remote.insert(remote->begin(), remote->end());
    } else if (local.empty()) {
      return remote.status().WithContext("no local checkpoint in " + run_dir_ +
                                         " and the store cannot be listed");
    } else {
      log::warn("listing {}: {}; using the local checkpoints only", persist_->RunUrl(),
                remote.status().message());
    }
    std::set<int64_t> all = t.local;
    all.insert(t.remote.begin(), t.remote.end());
    t.steps.assign(all.rbegin(), all.rend());
    return t;
  }

  // Makes `step` committed locally by downloading it from the store into
  // "<run>/.tmp-step-N" and committing it with the local protocol. With
  // `replace`, a local copy that failed verification is removed first.
  Status Fetch(int64_t step, bool replace) {
    RETURN_IF_ERROR(Writable("downloading a checkpoint into"));
    // An async save of this manager holds the run lock; let it finish (its
    // error stays for the next Wait).
    if (worker_.joinable()) worker_.join();
    const std::string ctx =
        "downloading step " + std::to_string(step) + " from " + persist_->Where(step);
    const std::string marker_path = StepDir(step) + "/" + std::string(internal::kCommitName);
    std::lock_guard<std::mutex> local(local_mu_);
    auto lock = fs_.TryLock(LockPath());
    if (!lock.ok()) {
      if (lock.status().code() != StatusCode::kFailedPrecondition || replace) {
        return lock.status().WithContext(ctx);
      }
      // Another process (e.g. another rank) is downloading or saving: wait for its copy.
      return WaitFor([&] { return fs_.Stat(marker_path).ok(); },
                     ctx + ": another writer holds " + LockPath() + " and did not commit the step");
    }
    if (fs_.Stat(StepDir(step)).ok()) {
      if (!replace) return Status::Ok();
      const std::string doomed =
          run_dir_ + "/" + std::string(internal::kTmpPrefix) + "delete-" + internal::StepName(step);
      RETURN_IF_ERROR(fs_.Rename(StepDir(step), doomed).WithContext(ctx));
      RETURN_IF_ERROR(fs_.SyncDir(run_dir_));
      RETURN_IF_ERROR(fs_.RemoveAll(doomed));
    }
    const std::string tmp = TmpDir(step);
    RETURN_IF_ERROR(fs_.RemoveAll(tmp));
    RETURN_IF_ERROR(fs_.CreateDir(tmp).WithContext(ctx));
    const auto t0 = clock_.Now();
    Status st = [&]() -> Status {
      ASSIGN_OR_RETURN(std::string marker, persist_->DownloadStep(step, tmp, fs_));
      RETURN_IF_ERROR(
          storage::WriteSmallFile(fs_, tmp + "/" + std::string(internal::kCommitName), marker));
      RETURN_IF_ERROR(fs_.SyncDir(tmp));
      RETURN_IF_ERROR(fs_.Rename(tmp, StepDir(step)));
      return fs_.SyncDir(run_dir_);
    }();
    if (!st.ok()) {
      Status cleanup = fs_.RemoveAll(tmp);
      if (!cleanup.ok()) log::warn("removing {}: {}", tmp, cleanup.message());
      return st.WithContext(ctx);
    }
    log::info("checkpoint step {} downloaded from {} in {:.2f} s", step, persist_->Where(step),
              Seconds(clock_.Now() - t0));
    return Status::Ok();
  }

  // Runs `attempt(step)` on the local copy of `step`, fetching it first when
  // only the store has it, and once more after replacing a local copy that
  // fails with DataLoss when the store has the step.
  template <typename T, typename Fn>
  Result<T> OnLocalCopy(int64_t step, const TierSteps& tiers, Fn attempt) {
    if (!tiers.local.count(step)) {
      if (!tiers.remote.count(step)) {
        return NotFound("step " + std::to_string(step) + " is committed neither in " + run_dir_ +
                        " nor on " + persist_->RunUrl());
      }
      RETURN_IF_ERROR(Fetch(step, /*replace=*/false));
      return attempt(step);
    }
    Result<T> r = attempt(step);
    if (r.ok() || r.status().code() != StatusCode::kDataLoss || !tiers.remote.count(step) ||
        opt_.read_only) {
      return r;
    }
    log::warn("local copy of checkpoint step {} is damaged ({}); downloading it from {}", step,
              r.status().message(), persist_->Where(step));
    RETURN_IF_ERROR(Fetch(step, /*replace=*/true));
    return attempt(step);
  }

  Result<LatestResult> LatestTiered() {
    ASSIGN_OR_RETURN(TierSteps tiers, BothTiers());
    LatestResult r;
    for (int64_t step : tiers.steps) {
      auto v = OnLocalCopy<VerifyReport>(step, tiers,
                                         [&](int64_t s) { return Verify(s, opt_.verify, {}); });
      if (v.ok()) {
        r.step = step;
        return r;
      }
      if (!opt_.fallback) return v.status();
      std::string why = "step " + std::to_string(step) + ": " + v.status().message();
      log::warn("skipping checkpoint {}; falling back to an older one", why);
      r.skipped.push_back(std::move(why));
    }
    std::string msg = "no committed checkpoint in " + run_dir_ + " or on " + persist_->RunUrl();
    if (!r.skipped.empty()) msg += " verifies (" + std::to_string(r.skipped.size()) + " failed)";
    return NotFound(msg);
  }

  Result<LoadedCheckpoint> LoadTiered(std::optional<int64_t> step,
                                      std::span<const std::string> names) {
    ASSIGN_OR_RETURN(TierSteps tiers, BothTiers());
    bool missing_name = false;
    auto load = [&](int64_t s) { return LoadStep(s, names, &missing_name); };
    if (step) return OnLocalCopy<LoadedCheckpoint>(*step, tiers, load);
    std::vector<std::string> skipped;
    for (int64_t s : tiers.steps) {
      missing_name = false;
      auto loaded = OnLocalCopy<LoadedCheckpoint>(s, tiers, load);
      if (loaded.ok() || !opt_.fallback || missing_name ||
          loaded.status().code() == StatusCode::kFailedPrecondition) {
        return loaded;
      }
      log::warn("checkpoint step {} cannot be loaded ({}), falling back to an older one", s,
                loaded.status().message());
      skipped.push_back(loaded.status().message());
    }
    return NotFound("no committed checkpoint in " + run_dir_ + " or on " + persist_->RunUrl() +
                    (skipped.empty() ? std::string() : " loads without errors"));
  }

  Options opt_;
  storage::FileSystem& fs_;
  const Clock& clock_;
  std::string run_dir_;
  // Tiering and direct mode.
  std::unique_ptr<storage::ObjectStore> owned_root_store_;
  std::unique_ptr<storage::ObjectStore> owned_persist_store_;
  std::unique_ptr<internal::StoreTier> direct_;   // direct mode: the store is the root
  std::unique_ptr<internal::StoreTier> persist_;  // tiering: the durable tier
  std::thread uploader_;
  mutable std::mutex up_mu_;  // guards the up_* fields
  std::condition_variable up_cv_;
  std::deque<int64_t> up_queue_;  // front: the step being uploaded
  bool up_stop_ = false;
  Status up_pending_;  // first upload error not reported yet
  UploadStatus up_status_;
  std::unique_ptr<ScheduledEventsWatcher> watcher_;
  // Held (in this process) around every use of the run lock once the
  // uploader runs: two Lock objects of one process conflict, so without it
  // the uploader's catch-up retention could make a concurrent Save fail
  // with AlreadyExists.
  std::mutex local_mu_;
  AlignedBuffer staging_;
  Staged staged_;
  std::mutex progress_mu_;
  std::condition_variable progress_cv_;
  size_t ready_ = 0;  // bytes of the shard file staged so far
  std::thread worker_;
  std::mutex mu_;
  Status pending_;
};

// ---------------------------------------------------------------- facade

Result<std::unique_ptr<CheckpointManager>> CheckpointManager::Open(Options options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<CheckpointManager>(new CheckpointManager(std::move(impl)));
}

CheckpointManager::CheckpointManager(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CheckpointManager::~CheckpointManager() = default;

Status CheckpointManager::Save(int64_t step, std::span<const TensorView> tensors,
                               const Json& metadata) {
  return impl_->Save(step, tensors, metadata);
}
Status CheckpointManager::SaveAsync(int64_t step, std::span<const TensorView> tensors,
                                    const Json& metadata) {
  return impl_->SaveAsync(step, tensors, metadata);
}
Status CheckpointManager::Wait() { return impl_->Wait(); }
Result<std::vector<CheckpointInfo>> CheckpointManager::List() { return impl_->List(); }
Result<LatestResult> CheckpointManager::Latest() { return impl_->Latest(); }
Result<LoadedCheckpoint> CheckpointManager::Load(std::optional<int64_t> step,
                                                 std::span<const std::string> names) {
  return impl_->Load(step, names);
}
Result<VerifyReport> CheckpointManager::Verify(int64_t step, VerifyMode mode) {
  return impl_->Verify(step, mode, {});
}
Result<std::vector<int64_t>> CheckpointManager::Prune() { return impl_->Prune(); }
Status CheckpointManager::WaitForUploads() { return impl_->WaitForUploads(); }
UploadStatus CheckpointManager::Uploads() const { return impl_->Uploads(); }
Result<std::vector<int64_t>> CheckpointManager::PersistedSteps() { return impl_->PersistedSteps(); }
Status CheckpointManager::OnEviction(EvictionCallback fn, ScheduledEventsOptions options,
                                     bool acknowledge) {
  return impl_->OnEviction(std::move(fn), std::move(options), acknowledge);
}
void CheckpointManager::StopEvictionWatcher() { impl_->StopEvictionWatcher(); }
std::string CheckpointManager::StepDir(int64_t step) const { return impl_->StepDir(step); }
const Options& CheckpointManager::options() const { return impl_->options(); }

}  // namespace gantry::ckpt
