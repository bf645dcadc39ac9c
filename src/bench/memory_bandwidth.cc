#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "gantry/bench/memory.h"

namespace gantry::bench {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using HostBuffer = std::unique_ptr<char, FreeDeleter>;

HostBuffer Allocate(uint64_t bytes) {
  void* p = nullptr;
  // Page alignment keeps the copy free of split cache lines at the edges.
  if (::posix_memalign(&p, 4096, bytes) != 0) return nullptr;
  return HostBuffer(static_cast<char*>(p));
}

// Keeps the compiler from treating the copies as dead stores.
inline void Clobber(void* p) { asm volatile("" : : "r"(p) : "memory"); }

}  // namespace

Result<MemcpyResult> MeasureMemcpyBandwidth(uint64_t bytes, double min_seconds) {
  if (bytes < 1024) {
    return InvalidArgument("memcpy bandwidth: buffer size " + std::to_string(bytes) +
                           " B is below the 1 KiB minimum");
  }
  if (!(min_seconds > 0) || !std::isfinite(min_seconds)) {
    return InvalidArgument("memcpy bandwidth: min_seconds must be a positive number, got " +
                           std::to_string(min_seconds));
  }
  // Refuse sizes that cannot fit before asking the allocator, which would
  // otherwise overcommit, or abort under AddressSanitizer.
  const uint64_t physical = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                            static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  if (bytes > physical / 2) {
    return ResourceExhausted("memcpy bandwidth: two buffers of " + std::to_string(bytes) +
                             " B do not fit in " + std::to_string(physical) +
                             " B of physical memory; pass a smaller size");
  }
  HostBuffer src = Allocate(bytes);
  HostBuffer dst = Allocate(bytes);
  if (src == nullptr || dst == nullptr) {
    return ResourceExhausted("memcpy bandwidth: cannot allocate two buffers of " +
                             std::to_string(bytes) + " B");
  }
  // Touch every page so the timed copies measure bandwidth, not page faults.
  std::memset(src.get(), 0x5a, bytes);
  std::memset(dst.get(), 0, bytes);
  std::memcpy(dst.get(), src.get(), bytes);  // warm-up (caches, TLB)
  Clobber(dst.get());

  using Steady = std::chrono::steady_clock;
  const auto start = Steady::now();
  double best = 0;
  int iterations = 0;
  while (true) {
    const auto t0 = Steady::now();
    std::memcpy(dst.get(), src.get(), bytes);
    Clobber(dst.get());
    const auto t1 = Steady::now();
    const double s = std::chrono::duration<double>(t1 - t0).count();
    if (iterations == 0 || s < best) best = s;
    ++iterations;
    if (std::chrono::duration<double>(t1 - start).count() >= min_seconds) break;
  }
  if (dst.get()[bytes - 1] != 0x5a) return Internal("memcpy bandwidth: the copy did not land");
  // A copy faster than the clock can resolve (tiny buffers) still yields a
  // finite bandwidth.
  if (best <= 0) best = 1e-9;

  MemcpyResult r;
  r.bytes = bytes;
  r.iterations = iterations;
  r.seconds = best;
  r.bandwidth_gbs = static_cast<double>(bytes) / best / 1e9;
  return r;
}

}  // namespace gantry::bench
