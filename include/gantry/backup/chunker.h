// Content-defined chunking for `gantry backup`: a gear rolling hash with
// FastCDC-style normalised cut points, so that inserting or changing bytes in
// the middle of a large file only changes the one or two chunks around the
// edit; every other chunk keeps its boundaries (and therefore its name) and is
// deduplicated.
//
// Contract: cut points depend only on the bytes and the parameters (including
// the seed of the gear table), never on how the input is split into reads.
// Every chunk is at least `min_bytes` long (except the last chunk of a file)
// and at most `max_bytes` long.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "gantry/core/status.h"

namespace gantry::backup {

struct ChunkerParams {
  size_t min_bytes = 512u << 10;
  size_t avg_bytes = 1u << 20;  // a power of two
  size_t max_bytes = 8u << 20;
  uint64_t seed = 0x67616e7472794344ull;  // selects the gear table; stored in the repo config
};

// InvalidArgument naming the field unless 64 <= min < avg < max and avg is a power of two.
Status ValidateChunkerParams(const ChunkerParams& p);

class Chunker {
 public:
  // Precondition: ValidateChunkerParams(p).ok().
  explicit Chunker(const ChunkerParams& p);

  // Length of the first chunk of `data`. `data` holds the next unchunked bytes;
  // callers pass at least max_bytes of them unless the input ends sooner
  // (`at_end`), in which case a tail shorter than max_bytes with no cut point is
  // returned whole. Returns 0 only for empty `data`.
  size_t NextCut(std::span<const uint8_t> data, bool at_end) const;

  const ChunkerParams& params() const { return p_; }

 private:
  ChunkerParams p_;
  uint64_t mask_small_;  // more bits set: harder to cut before avg (normalisation)
  uint64_t mask_large_;  // fewer bits set: easier to cut after avg
  std::array<uint64_t, 256> gear_;
};

}  // namespace gantry::backup
