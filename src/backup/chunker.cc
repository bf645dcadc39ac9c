// Gear-hash content-defined chunking (see include/gantry/backup/chunker.h).
#include "gantry/backup/chunker.h"

#include <bit>
#include <string>

namespace gantry::backup {

Status ValidateChunkerParams(const ChunkerParams& p) {
  if (p.min_bytes < 64) {
    return InvalidArgument("chunker min_bytes " + std::to_string(p.min_bytes) +
                           " is below 64; use at least 64 bytes");
  }
  if (!std::has_single_bit(p.avg_bytes)) {
    return InvalidArgument("chunker avg_bytes " + std::to_string(p.avg_bytes) +
                           " is not a power of two");
  }
  if (!(p.min_bytes < p.avg_bytes && p.avg_bytes < p.max_bytes)) {
    return InvalidArgument("chunker sizes must satisfy min < avg < max, got min " +
                           std::to_string(p.min_bytes) + ", avg " + std::to_string(p.avg_bytes) +
                           ", max " + std::to_string(p.max_bytes));
  }
  if (p.max_bytes > (256u << 20)) {
    return InvalidArgument("chunker max_bytes " + std::to_string(p.max_bytes) +
                           " is above 256 MiB");
  }
  return Status::Ok();
}

namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A mask of `bits` ones in the high end of the word: the gear hash shifts left,
// so its high bits depend on the most bytes (up to 64) of the window.
uint64_t HighMask(int bits) {
  if (bits <= 0) return 0;
  if (bits >= 64) return ~0ull;
  return ~0ull << (64 - bits);
}

}  // namespace

Chunker::Chunker(const ChunkerParams& p) : p_(p) {
  int bits = std::countr_zero(p.avg_bytes);
  // Normalisation level 2 as in FastCDC: the cut probability is 4x lower before
  // the average size and 4x higher after it, which narrows the size spread.
  mask_small_ = HighMask(bits + 2);
  mask_large_ = HighMask(bits - 2);
  uint64_t state = p.seed;
  for (auto& g : gear_) g = SplitMix64(state);
}

size_t Chunker::NextCut(std::span<const uint8_t> data, bool at_end) const {
  size_t n = data.size();
  if (n == 0) return 0;
  if (n <= p_.min_bytes) return n;  // only valid at the end; a caller passing less is at_end
  size_t limit = n < p_.max_bytes ? n : p_.max_bytes;
  size_t normal = p_.avg_bytes < limit ? p_.avg_bytes : limit;
  uint64_t h = 0;
  // Skip the first min_bytes - 64 bytes: they cannot host a cut, and 64 bytes
  // of warm-up fill the hash window exactly, so results do not depend on the
  // skipped prefix.
  size_t i = p_.min_bytes - 64;
  for (; i < p_.min_bytes; ++i) h = (h << 1) + gear_[data[i]];
  for (; i < normal; ++i) {
    h = (h << 1) + gear_[data[i]];
    if ((h & mask_small_) == 0) return i + 1;
  }
  for (; i < limit; ++i) {
    h = (h << 1) + gear_[data[i]];
    if ((h & mask_large_) == 0) return i + 1;
  }
  (void)at_end;  // no cut found: either max_bytes or the whole tail
  return limit;
}

}  // namespace gantry::backup
