// Checkpoints of named tensors: atomic, checksummed, resumable.
//
//   auto m = CheckpointManager::Open({.root = "/nvme/ckpt", .run = "llm"});
//   (*m)->SaveAsync(step, tensors, {{"epoch", 3}});  // returns once copied
//   auto state = (*m)->Load();                       // the newest step that verifies
//
// Layout: <root>/<run>/step-<10-digit step>/ holds one safetensors shard per
// rank ("shard-<rank>-of-<world>.safetensors", readable by other tools),
// "manifest.json" (every tensor's place and per-chunk XXH3-64 checksums, user
// metadata, creator, time, format version) and the marker "COMMITTED" (the
// manifest's SHA-256), written last. A step is committed when its directory
// has its final name and holds the marker; nothing else is read as a
// checkpoint, and a crash at any point leaves either the previous set of
// committed steps or the new one (src/ckpt/commit.h has the protocol).
//
// Three ways to run (src/ckpt/README.md maps the engines):
// - Local: the root is a directory; ranks meet through the storage or a
//   Communicator. Retention (Options::retention) runs after every save.
// - Tiered (Options::persist): rank 0 also uploads each committed step to an
//   object store in the background, marker last; local retention keeps the
//   steps still queued, the store has its own. Upload errors are returned
//   once by the next Wait() or WaitForUploads(), never by Save/SaveAsync (an
//   emergency checkpoint is not refused because an older upload failed).
//   Load() and Latest() use the newest step of either tier and download it
//   when the local copy is missing or damaged.
// - Direct (Options::root is a remote URL, or root_store; world_size 1): no
//   local directory. One writer per run: a second writer of a step gets
//   AlreadyExists, but may already have replaced the first one's shard bytes
//   (verification on load detects that).
//
// Thread-safety: a CheckpointManager is used by one thread at a time (its
// background writer, uploader and eviction watcher are internal; an
// OnEviction callback runs on the watcher's thread, see there). Distinct
// managers may share a root. With a Communicator, SaveAsync calls its
// Barrier() from the background thread, so the communicator must allow calls
// from another thread (and every rank must reach the save: a rank that fails
// before the first barrier leaves the others waiting in it). Without one,
// ranks wait through the storage for at most barrier_timeout and a failed
// rank 0 is noticed by the others.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gantry/ckpt/dtype.h"
#include "gantry/core/clock.h"
#include "gantry/core/json.h"
#include "gantry/core/scheduled_events.h"
#include "gantry/core/status.h"
#include "gantry/storage/object_store.h"

namespace gantry::comm {
class Communicator;
}
namespace gantry::storage {
class FileSystem;
}

namespace gantry::ckpt {

inline constexpr int kFormatVersion = 1;

// A tensor to save. Not owning: `data` must stay valid and unchanged until
// Save returns (SaveAsync copies it before returning). `bytes` must equal
// product(shape) * DTypeSize(dtype); an empty shape is a scalar.
struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t bytes = 0;
};

// Memory aligned to 4096 bytes, owned. Move-only.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // Allocates `bytes` (uninitialised); ResourceExhausted when it cannot.
  static Result<AlignedBuffer> Allocate(size_t bytes);
  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer();

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t size() const { return size_; }
  // Gives up ownership: the caller frees the pointer with AlignedFree(). The
  // buffer becomes empty. Lets bindings hand memory to numpy/torch without a copy.
  void* Release();

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};
// Frees memory returned by AlignedBuffer::Release(). Null is a no-op.
void AlignedFree(void* p);

// A loaded tensor that owns its bytes (`data.size()` == bytes of the tensor).
struct Tensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  AlignedBuffer data;
};

enum class VerifyMode {
  kFull,    // every chunk's checksum
  kSample,  // first and last chunk of every tensor and every 16th chunk overall, plus sizes
  kNone,    // sizes and the manifest digest only
};
// "full", "sample", "none"; ParseVerifyMode names the bad text.
std::string_view VerifyModeName(VerifyMode mode);
Result<VerifyMode> ParseVerifyMode(std::string_view text);

// Which committed steps Prune keeps. A step is kept if any rule keeps it.
// Always kept: the step a Save just committed, the newest step that
// verifies (with Options::verify) and every step newer than it; when no
// step verifies, nothing is deleted. keep_last counts only steps whose
// manifest can be read. All zero keeps everything.
struct Retention {
  int keep_last = 0;                 // the N newest steps
  int64_t keep_every = 0;            // steps divisible by K
  std::chrono::seconds keep_for{0};  // steps younger than this (by manifest time)
};

struct Options {
  // Required: the directory holding runs ("/nvme/ckpt" or "file:///nvme/ckpt"),
  // or a remote object-store URL ("az://acct/container/prefix", a connection
  // string) for direct mode.
  std::string root;
  std::string run = "default";
  int rank = 0;
  int world_size = 1;
  Retention retention;                    // applied after every committed Save (rank 0)
  VerifyMode verify = VerifyMode::kFull;  // used by Load and Latest
  // Latest(): when the newest committed step fails verification, fall back to
  // the next older one (and report why) instead of failing.
  bool fallback = true;
  // Staging pool (Save and SaveAsync lay the shard out in it); 0 sizes it
  // to the first saved state. A larger state grows it; it is reused.
  size_t staging_bytes = 0;
  size_t chunk_bytes = 4u << 20;  // checksum granularity
  bool direct_io = true;          // O_DIRECT for shard writes where it helps
  // How long ranks wait for each other through the storage barrier.
  std::chrono::seconds barrier_timeout{600};
  storage::FileSystem* fs = nullptr;   // default: storage::LocalFileSystem()
  const Clock* clock = nullptr;        // default: SystemClock()
  comm::Communicator* comm = nullptr;  // optional: barrier via comm->Barrier()
  // Inspection only: Open fails with NotFound when the run directory is
  // missing instead of creating it, nothing is cleaned, and Save, SaveAsync
  // and Prune fail with FailedPrecondition.
  bool read_only = false;

  // Tiering: the object-store URL of the durable tier ("az://acct/ckpts",
  // "file:///mnt/share/ckpts", a connection string with store.container);
  // "" = none. Steps go under "<run>/step-N/" there.
  std::string persist;
  storage::StoreOptions store;  // credentials, block size, parallelism (persist and direct mode)
  Retention persist_retention;  // applied on the store after every upload (rank 0)
  // Already opened stores (tests, or sharing one client); they override
  // `persist` and a remote `root`, and must outlive the manager.
  storage::ObjectStore* persist_store = nullptr;
  storage::ObjectStore* root_store = nullptr;  // direct mode
};

// The background uploader (Options::persist), as seen by UploadStatus().
struct UploadStatus {
  bool enabled = false;
  std::string store;             // the store URL without credentials, "" when disabled
  std::vector<int64_t> pending;  // committed locally, not yet on the store (oldest first)
  int64_t last_uploaded = -1;    // the newest step this manager uploaded, -1 before any
  uint64_t bytes_uploaded = 0;   // since Open
  double last_seconds = 0;       // duration of the last successful upload
  std::string last_error;        // the most recent upload error, "" after a later success
  int failed = 0;                // uploads that failed since Open
};

// Called by OnEviction for each new Scheduled Event that ends the VM or
// its local disks (Preempt, Terminate, Redeploy).
using EvictionCallback = std::function<void(const ScheduledEvent&)>;

struct CheckpointInfo {
  int64_t step = 0;
  std::string path;    // the step directory
  uint64_t bytes = 0;  // sum of tensor bytes over all shards
  size_t tensors = 0;
  int world_size = 1;
  std::string created;  // ISO-8601 UTC time from the manifest
  int64_t created_unix_s = 0;
  Json metadata;  // user metadata (a JSON object, may be empty)
  // Empty when the manifest reads; else why not (the other fields are then
  // unknown, not zero).
  std::string error;
};

struct LatestResult {
  int64_t step = 0;
  // One line per newer committed step that failed verification and was
  // skipped (empty when the newest verified): "step 42: <why>".
  std::vector<std::string> skipped;
};

struct LoadedCheckpoint {
  int64_t step = 0;
  Json metadata;                // the user metadata given to Save
  std::vector<Tensor> tensors;  // in manifest order (rank, then save order)
};

struct VerifyReport {
  int64_t step = 0;
  uint64_t bytes_checked = 0;
  size_t chunks_checked = 0;
};

class CheckpointManager {
 public:
  // Validates options and creates <root>/<run>. Removes stale temporaries
  // (rank 0, only when no writer holds the run's lock).
  static Result<std::unique_ptr<CheckpointManager>> Open(Options options);
  // Stops the eviction watcher, waits for an in-flight async save and for
  // every queued upload (their errors are logged).
  ~CheckpointManager();

  // Saves this rank's tensors as `step` and returns after the step is
  // committed (rank 0 commits once every rank's shard is durable).
  // AlreadyExists when `step` is committed or another writer is saving it.
  // Tensor names must be unique (across ranks too). `metadata` must be a JSON
  // object or null. Applies retention afterwards (rank 0).
  Status Save(int64_t step, std::span<const TensorView> tensors, const Json& metadata = Json());
  // Copies the tensors into the staging pool and returns; a background
  // thread writes and commits. At most one save is in flight: a second call
  // first waits for the previous one. The error of a failed background save
  // is returned by the next SaveAsync/Save/Wait call (once).
  Status SaveAsync(int64_t step, std::span<const TensorView> tensors,
                   const Json& metadata = Json());
  // Waits for the in-flight save; returns its error, if any, else an upload
  // error not reported yet (tiering).
  Status Wait();

  // Committed steps, oldest first (not verified).
  Result<std::vector<CheckpointInfo>> List();
  // The newest committed step that verifies with options.verify.
  // NotFound when there is none.
  Result<LatestResult> Latest();
  // Loads `step` (default: Latest()), verifying with options.verify. With
  // `names` non-empty only those tensors are read (NotFound names a missing
  // one). DataLoss names the shard, tensor and offset of a bad chunk.
  // Without a step, a step that cannot be loaded falls back to the previous
  // one like Latest(), except on FailedPrecondition (a newer format) and a
  // missing requested tensor.
  Result<LoadedCheckpoint> Load(std::optional<int64_t> step = std::nullopt,
                                std::span<const std::string> names = {});
  Result<VerifyReport> Verify(int64_t step, VerifyMode mode);
  // Applies options.retention now; returns the deleted steps.
  Result<std::vector<int64_t>> Prune();

  // Tiering. Waits until every step queued for upload is on the store (or
  // failed); returns the first upload error not reported yet. OK at once
  // without persist.
  Status WaitForUploads();
  // Thread-safe snapshot of the uploader.
  UploadStatus Uploads() const;
  // Committed steps on the store (direct mode: the same as List()), oldest
  // first. FailedPrecondition without persist or direct mode.
  Result<std::vector<int64_t>> PersistedSteps();

  // Starts a Scheduled Events watcher (options.endpoint etc., see
  // gantry/core/scheduled_events.h) in the background and calls `fn` once for
  // every new Preempt, Terminate or Redeploy event, on the watcher's thread,
  // so that training can make an emergency checkpoint before NotBefore.
  // `fn` may call Save() on this manager only while no other thread uses it
  // (typical: fn sets a flag that the training loop checks each step). With
  // `acknowledge`, the event is acknowledged (StartRequests) after `fn`
  // returns, so the platform may proceed without waiting for NotBefore.
  // Replaces a previous watcher; the destructor stops it.
  Status OnEviction(EvictionCallback fn, ScheduledEventsOptions options = {},
                    bool acknowledge = false);
  // Stops the watcher started by OnEviction (no-op without one).
  void StopEvictionWatcher();

  // <root>/<run>/step-<10-digit step> (direct mode: <store url>/<run>/step-...).
  std::string StepDir(int64_t step) const;
  const Options& options() const;

  class Impl;

 private:
  explicit CheckpointManager(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Reads a single safetensors file (any producer): every tensor, or those
// named. Used by `gantry ckpt export` round trips and tests.
Result<std::vector<Tensor>> ReadSafetensors(const std::string& path,
                                            std::span<const std::string> names = {});
// Writes `tensors` as one safetensors file (atomically: temporary + rename).
Status WriteSafetensors(const std::string& path, std::span<const TensorView> tensors);

}  // namespace gantry::ckpt
