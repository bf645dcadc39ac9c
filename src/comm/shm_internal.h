// Internal constants of the shared-memory engine, shared with the launcher (to
// size /dev/shm) and the tests (to pick counts that reach every path).
#pragma once

#include <cstddef>

namespace gantry::comm::internal {

inline constexpr int kMaxShmRanks = 1024;
// Bytes a rank can publish inside its sync line (the rest of its cache line).
inline constexpr size_t kInlineBytes = 56;

struct ShmTuning {
  // Each rank's staging area is two halves of this size (double buffering); a
  // pipeline step publishes at most one half.
  size_t half_bytes = 256 << 10;
  // Calls whose per-rank input is at most this go straight through the staging
  // halves with one sync per step, even for buffers from Allocate(): below it
  // the second barrier of the single-copy path costs more than the copy saves.
  size_t small_bytes = 2048;
  // Single-copy AllReduce results at least this large are written with
  // non-temporal stores.
  size_t stream_bytes = size_t{512} << 10;
  // From this many ranks, staged reductions split each step across ranks:
  // each rank then pulls 2(n-1)/n of a step from its peers instead of n-1
  // steps, for one extra sync per step.
  int split_ranks = 3;
  size_t split_bytes = 64 << 10;  // and for steps at least this large
  // Pause-loop iterations before a waiting rank starts yielding its CPU.
  int spins = 4096;
  int spins_oversubscribed = 64;
};

// The tuning every rank of a `size`-rank group uses (it must be identical).
ShmTuning DefaultShmTuning(int size);

// Bytes of /dev/shm one rank needs before any Allocate().
inline size_t ShmStagingBytes(int size) { return 2 * DefaultShmTuning(size).half_bytes; }

}  // namespace gantry::comm::internal
