// The staging pool (internal to src/ckpt): one page-aligned buffer, reused by
// every save of a manager, that holds this rank's next shard exactly as its
// file (safetensors prefix, then the tensors back to back, zero padding up to
// the next 4096 bytes), so writers issue large aligned writes or one Put
// straight from it.
//
// A save is Layout (validates, places the prefix), then the tensor bytes by
// one of two paths: CopyAndHash (copy and checksum chunk by chunk, publishing
// progress: Save runs it on a helper thread while the writer writes) or
// ParallelCopy followed by HashStaged (SaveAsync: the caller waits only for
// the copy, checksums run on the background writer).
//
// Threads: one save at a time (the facade waits for the previous one before
// Layout). Layout, ParallelCopy, HashStaged and shard() are for the thread
// that owns the save; CopyAndHash may run on one other thread meanwhile.
// WaitReady is the only synchronised call: once WaitReady(end) returned,
// bytes [0, end) of data() are final, and after WaitReady(shard().file_bytes)
// so are shard().entries (checksums included). No lock is expected of callers.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "format.h"
#include "gantry/ckpt/manager.h"
#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry::ckpt::internal {

// One rank's shard as laid out in the pool.
struct StagedShard {
  int64_t step = 0;
  Json metadata;          // a JSON object (a null metadata becomes {})
  size_t file_bytes = 0;  // exact shard size (no padding)
  // In save order; offsets are absolute in the file, shard is the rank and
  // chunks are filled by the copy (CopyAndHash or HashStaged).
  std::vector<TensorEntry> entries;
};

class StagingPool {
 public:
  // `rank` goes into every entry's shard; `chunk_bytes` is the checksum granularity.
  StagingPool(int rank, size_t chunk_bytes) : rank_(rank), chunk_bytes_(chunk_bytes) {}
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // Allocates `bytes` (rounded up to storage::kDirectIoAlignment) now, so
  // that the first save does not (Options::staging_bytes). ResourceExhausted
  // when the memory is not there.
  Status Reserve(size_t bytes);

  // Validates the request (step in [0, 9999999999], metadata a JSON object or
  // null and writable as JSON, tensors as internal::ValidateTensors) and lays
  // the shard out: grows the pool when it is too small (freeing the old one
  // first: the peak stays one pool), writes the safetensors prefix, zeroes the
  // padding after the file's end and computes every tensor's offset. Copies
  // no tensor bytes. InvalidArgument names the bad value; nothing changes then.
  Status Layout(int64_t step, std::span<const TensorView> tensors, const Json& metadata);

  // Copies `tensors` (those given to Layout) tensor by tensor, one checksum
  // chunk at a time, hashing each chunk while it is in cache and publishing
  // progress to WaitReady as it goes.
  void CopyAndHash(std::span<const TensorView> tensors);
  // Copies `tensors` (those given to Layout) with up to 8 threads, then
  // publishes the whole file; checksums are left to HashStaged.
  void ParallelCopy(std::span<const TensorView> tensors);
  // Fills every entry's chunk checksums from the pool (after ParallelCopy).
  void HashStaged();

  // Blocks until bytes [0, end) of the file are in the pool.
  void WaitReady(size_t end);

  const StagedShard& shard() const { return staged_; }
  const char* data() const { return static_cast<const char*>(buf_.data()); }
  // Bytes allocated (the padded size of the largest shard so far).
  size_t capacity() const { return buf_.size(); }

 private:
  void MarkReady(size_t end);

  const int rank_;
  const size_t chunk_bytes_;
  AlignedBuffer buf_;
  StagedShard staged_;
  std::mutex progress_mu_;  // guards ready_
  std::condition_variable progress_cv_;
  size_t ready_ = 0;  // bytes of the shard file staged so far
};

// The manifest fields known once a shard is staged (step, creation time
// `now_unix_s`, creator, world size, chunk size, metadata); the caller adds
// shards and tensors. Shared by the local and the direct commit.
Manifest BaseManifest(const StagedShard& s, int world_size, size_t chunk_bytes, int64_t now_unix_s);

}  // namespace gantry::ckpt::internal
