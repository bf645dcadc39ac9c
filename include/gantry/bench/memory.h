// Memory bandwidth of this machine: the ceiling a shared-memory collective can
// reach, printed beside collective results ("large-size busbw is N% of memcpy").
#pragma once

#include <cstdint>

#include "gantry/core/status.h"

namespace gantry::bench {

struct MemcpyResult {
  uint64_t bytes = 0;        // buffer size copied per iteration
  int iterations = 0;
  double seconds = 0;        // best (minimum) time of one copy
  double bandwidth_gbs = 0;  // bytes / seconds / 1e9: one copy's read+write rate as nccl-tests counts
                             // bytes (bytes copied, not bytes moved)
};

// Copies `bytes` (default 256 MiB, at least 1 KiB) from one buffer to another with
// memcpy on the calling thread, repeating for about `min_seconds`, and reports the
// best copy. Buffers are touched before timing so page faults are not measured.
// ResourceExhausted when the buffers cannot be allocated.
Result<MemcpyResult> MeasureMemcpyBandwidth(uint64_t bytes = 256ull << 20, double min_seconds = 0.5);

}  // namespace gantry::bench
