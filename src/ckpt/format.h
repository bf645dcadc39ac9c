// On-disk format pieces shared by the manager, the CLI and tests: safetensors
// headers, the manifest and the checksums. Internal to src/ckpt.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/ckpt/manager.h"
#include "gantry/core/json.h"
#include "gantry/storage/filesystem.h"

namespace gantry::ckpt::internal {

inline constexpr std::string_view kManifestName = "manifest.json";
inline constexpr std::string_view kCommitName = "COMMITTED";
inline constexpr std::string_view kStepPrefix = "step-";
inline constexpr std::string_view kTmpPrefix = ".tmp-";
inline constexpr std::string_view kLockName = ".writer.lock";
inline constexpr size_t kMaxHeaderBytes = 100u << 20;  // the safetensors limit
// Largest checksum chunk a manifest may declare; readers allocate one chunk.
inline constexpr uint64_t kMaxChunkBytes = 1ull << 30;
// Size limits for the small files of a step (readers refuse larger ones).
inline constexpr uint64_t kMaxMarkerBytes = 4u << 10;
inline constexpr uint64_t kMaxManifestBytes = 256u << 20;

// "step-0000000042"; the step must be in [0, 10^10).
std::string StepName(int64_t step);
// Parses "step-0000000042"; false for anything else.
bool ParseStepName(std::string_view name, int64_t* step);
std::string ShardName(int rank, int world_size);

// Validates a tensor list: names unique, non-empty and valid UTF-8 (JSON
// needs it), bytes match shape.
Status ValidateTensors(std::span<const TensorView> tensors);

// Product of `shape` times the dtype size; false when a dimension is
// negative or the product does not fit in 64 bits.
bool ShapeBytes(const std::vector<int64_t>& shape, DType dtype, uint64_t* bytes);
// True when `text` is well-formed UTF-8.
bool IsValidUtf8(std::string_view text);

// A tensor as recorded in the manifest.
struct TensorEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  int shard = 0;        // rank that wrote it
  uint64_t offset = 0;  // absolute byte offset in the shard file
  uint64_t length = 0;
  std::vector<uint64_t> chunks;  // XXH3-64 of each chunk_bytes piece
};

struct ShardEntry {
  std::string file;
  int rank = 0;
  uint64_t bytes = 0;  // file size
};

struct Manifest {
  int format_version = kFormatVersion;
  int64_t step = 0;
  std::string created;
  int64_t created_unix_s = 0;
  std::string creator;
  int world_size = 1;
  uint64_t chunk_bytes = 0;
  Json metadata = Json::object();
  std::vector<ShardEntry> shards;
  std::vector<TensorEntry> tensors;
};

Json ManifestToJson(const Manifest& m);
// Errors are DataLoss naming `origin`.
Result<Manifest> ManifestFromJson(const Json& j, const std::string& origin);
// The per-rank part (one shard and its tensors), exchanged through the
// temporary directory before rank 0 commits.
Json RankPartToJson(const ShardEntry& shard, const std::vector<TensorEntry>& tensors);
Status RankPartFromJson(const Json& j, const std::string& origin, ShardEntry* shard,
                        std::vector<TensorEntry>* tensors);

// Safetensors header for tensors laid out back to back in `tensors` order,
// padded with spaces so that the data starts at a multiple of `align`.
// Returns the full prefix (8-byte length + JSON + padding).
std::string SafetensorsPrefix(std::span<const TensorView> tensors, size_t align,
                              const Json& metadata);

struct SafetensorsEntry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // relative to the data start
  uint64_t end = 0;
};
// Parses the header of an open safetensors file; *data_start is 8 + N.
// Every entry lies inside the file and its byte range matches its shape and
// dtype; anything else is DataLoss naming `path` and the tensor.
Result<std::vector<SafetensorsEntry>> ReadSafetensorsHeader(storage::ReadableFile& f,
                                                            const std::string& path,
                                                            uint64_t* data_start);

// WriteSafetensors on `fs` (which must be the local filesystem underneath:
// the final rename replaces `path`); the parent directory is synced after
// the rename.
Status WriteSafetensorsTo(storage::FileSystem& fs, const std::string& path,
                          std::span<const TensorView> tensors);

uint64_t Xxh3(const void* data, size_t bytes);
// Chunk checksums of one tensor's bytes.
std::vector<uint64_t> ChunkChecksums(const void* data, size_t bytes, size_t chunk_bytes);
std::string HexU64(uint64_t v);
std::string Sha256Hex(std::string_view data);

// ISO-8601 UTC ("2026-11-30T01:02:03Z").
std::string IsoTime(int64_t unix_s);
// Seconds since the epoch on `clock`'s wall time (manifest times, retention).
int64_t NowUnix(const Clock& clock);

}  // namespace gantry::ckpt::internal
