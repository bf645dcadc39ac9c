// `gantry ckpt bench`: times the checkpoint engine on one directory so the
// numbers can be compared with the disk's own limit (fio/dd in bench/ckpt.sh).
#pragma once

#include <cstdint>
#include <string>

#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry::ckpt {

struct BenchOptions {
  std::string dir;  // scratch directory; a run "gantry-ckpt-bench" is created and removed
  uint64_t state_bytes = 1ull << 30;
  int tensors = 16;    // fp32 tensors of equal size
  int iterations = 3;  // the best of each measurement is reported
};

struct BenchResult {
  uint64_t state_bytes = 0;
  double raw_write_s = 0;    // O_DIRECT 16 MiB writes + fsync of the same bytes (the limit)
  double save_s = 0;         // Save(): stage, write, fsync, commit
  double async_block_s = 0;  // SaveAsync() until it returns (training is blocked)
  double async_total_s = 0;  // SaveAsync() + Wait()
  double load_cold_s = 0;    // Load() after dropping the files from the page cache
  double load_warm_s = 0;    // Load() with the files cached
  Json ToJson() const;
  std::string RenderText() const;
};

Result<BenchResult> RunBench(const BenchOptions& options);

}  // namespace gantry::ckpt
