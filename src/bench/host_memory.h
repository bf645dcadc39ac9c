// Memory the benchmarks may allocate on this host, shared by the collective
// engine and the GEMM measurement so both clamp their buffers the same way.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <limits>
#include <string>

namespace gantry::bench::internal {

// MemAvailable from /proc/meminfo (what can be allocated without swapping),
// else free pages from sysconf; UINT64_MAX when neither is known (no limit).
inline uint64_t MemAvailableBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  const long pages = ::sysconf(_SC_AVPHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  return std::numeric_limits<uint64_t>::max();
}

}  // namespace gantry::bench::internal
