// Matrix-multiply throughput: `gantry bench gemm`. Times C = A x B with the
// vendor BLAS (OpenBLAS on the CPU, cuBLAS on a GPU when the build has CUDA),
// reports TFLOPS and the fraction of the device's peak that it reached (MFU),
// and checks a sample of the result against a long-double reference. It answers
// "is this node as fast as it should be", not "how fast is my model".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry::bench {

enum class GemmType { kFp32, kFp64, kBf16, kFp16 };
enum class GemmDevice { kCpu, kCuda };

// "fp32", "fp64", "bf16", "fp16" (case-sensitive); InvalidArgument naming the
// text and the accepted names otherwise.
Result<GemmType> ParseGemmType(std::string_view text);
std::string_view GemmTypeName(GemmType type);
// "cpu", "cuda".
Result<GemmDevice> ParseGemmDevice(std::string_view text);
std::string_view GemmDeviceName(GemmDevice device);

struct GemmOptions {
  GemmType type = GemmType::kFp32;
  GemmDevice device = GemmDevice::kCpu;
  // C (m x n) = A (m x k) x B (k x n). All three 0: automatic, CPU 2048 (halved
  // until the three matrices fit in a quarter of MemAvailable), GPU 8192.
  // Otherwise all three must be positive and at most INT32_MAX.
  int64_t m = 0, n = 0, k = 0;
  int warmup = 1;            // untimed GEMMs first (>= 0)
  int iters = 0;             // timed GEMMs; 0: as many as fit in min_seconds (at least 1)
  double min_seconds = 1.0;  // used when iters == 0; must be > 0
  int threads = 0;           // CPU: OpenBLAS threads, 0 = OpenBLAS' default. Must be 0 for cuda.
};

struct GemmResult {
  std::string device_name;  // CPU model name, or the GPU's name
  std::string backend;      // "OpenBLAS 0.3.21 ... (2 threads)", "cuBLAS 13000"
  GemmType type = GemmType::kFp32;
  GemmDevice device = GemmDevice::kCpu;
  int64_t m = 0, n = 0, k = 0;
  int threads = 0;                    // CPU: OpenBLAS threads used; 0 on a GPU
  int iters = 0;                      // timed GEMMs
  double seconds_per_iter = 0;        // mean over the timed GEMMs
  double tflops = 0;                  // 2*m*n*k / seconds_per_iter / 1e12
  std::optional<double> peak_tflops;  // empty when the device's peak is not known
  std::string peak_source;            // how the peak was obtained, or why there is none
  std::optional<double> mfu;  // tflops / peak_tflops (may exceed 1 when the peak is an estimate)
  double max_rel_error = 0;   // see detail::SampledError; +inf for non-finite outputs
  double tolerance = 0;       // detail::GemmTolerance(type, k)
  bool verified = false;      // max_rel_error <= tolerance
};

// Runs warm-up GEMMs, the timed GEMMs, then the check. Inputs are random
// multiples of 1/256 in [-1, 1), exact in every type, so the reference sees
// exactly the values the BLAS saw.
// Errors: InvalidArgument for bad sizes or counts, or a type the device cannot
// run (bf16 on a CPU whose OpenBLAS lacks cblas_sbgemm, as Debian 12's does);
// Unimplemented for fp16 on the CPU (CBLAS has no fp16 GEMM); Unavailable for
// kCuda in a build without CUDA or without a visible device; ResourceExhausted
// when the matrices do not fit in memory; Internal/Unavailable for BLAS/CUDA
// failures. A wrong result is not an error: it is verified == false.
// On the CPU it sets OpenBLAS' process-wide thread count for its duration (and
// restores it), so do not run two CPU measurements at once.
Result<GemmResult> MeasureGemm(const GemmOptions& options);

// True when this build has CUDA and at least one CUDA device is visible (the
// CLI's default device).
bool CudaGemmAvailable();

// The theoretical peak of the CPU cores this process may use, from /proc and
// /sys under root_dir (tests pass a fake tree):
//   physical cores (distinct sys/devices/system/cpu/cpuN/topology/thread_siblings_list,
//   else distinct (physical id, core id) in proc/cpuinfo, else its processors)
//   x max clock (cpufreq/cpuinfo_max_freq when present, else the largest "cpu MHz")
//   x FLOP/cycle/core from the cpuinfo flags: avx512f 64 fp32 (2 FMA units x 16 lanes x 2;
//   32 on AMD family 25, Zen 4, whose AVX-512 runs on 256-bit units), avx2+fma 32,
//   otherwise 8 (SSE); fp64 half of fp32; bf16 2x fp32 with avx512_bf16.
// When root_dir is "/", only CPUs in this thread's affinity mask count.
// Errors: NotFound naming proc/cpuinfo when it is missing, or when no clock is
// found; Unimplemented for bf16 without avx512_bf16 and for fp16 (peak unknown).
struct CpuPeak {
  double tflops = 0;
  std::string how;  // "2 cores x 2.80 GHz x 64 FLOP/cycle (AVX-512, 2 FMA units assumed) ..."
  int cores = 0;
  double ghz = 0;
  int flops_per_cycle = 0;  // for the requested type
};
Result<CpuPeak> CpuPeakTflops(GemmType type, const std::string& root_dir = "/");

// The result as JSON (`gantry bench gemm --json`): every field of GemmResult,
// types and devices by name; unknown peak/mfu and an infinite error are null.
Json GemmResultJson(const GemmResult& result);

// Internal pieces, exposed for gemm_cuda.cc and for tests. Not a stable API.
namespace detail {

// 2*m*n*k / seconds / 1e12; 0 when seconds <= 0.
double GemmTflops(int64_t m, int64_t n, int64_t k, double seconds);

// Bytes of one element of `type` as the BLAS stores it (bf16/fp16: 2).
size_t ElementBytes(GemmType type);

// Fills `count` elements of `type` at `dst` with deterministic (seeded) random
// multiples of 1/256 in [-1, 1). bf16/fp16 are raw IEEE bit patterns (uint16_t).
void FillInputs(GemmType type, void* dst, size_t count, uint64_t seed);

// bf16/fp16 <-> float for raw bit patterns (round to nearest even).
float Bf16ToFloat(uint16_t bits);
uint16_t FloatToBf16(float value);
float Fp16ToFloat(uint16_t bits);
uint16_t FloatToFp16(float value);

// The output elements the check recomputes: the four corners plus pseudo-random
// ones (fixed seed), about `count` in all; every element when m*n <= count.
// Row-major flat indices i*n + j.
std::vector<int64_t> SampleIndices(int64_t m, int64_t n, int count = 64);

// Max over `indices` of |C[i,j] - ref| / sum_p |A[i,p] * B[p,j]|, with ref the
// long-double dot product of row i of A and column j of B. A (m x k), B (k x n)
// and C (m x n) are row-major; A and B hold `ab_type`, C holds `c_type`.
// Normalising by sum|a*b| rather than |ref| keeps outputs that cancel to
// nearly zero from looking wrong: a floating-point dot product's error bound
// is proportional to that sum, not to the result. Non-finite outputs give +inf.
double SampledError(GemmType ab_type, const void* a, const void* b, GemmType c_type, const void* c,
                    int64_t m, int64_t n, int64_t k, const std::vector<int64_t>& indices);

// The largest SampledError still accepted for a GEMM of `type` with inner
// size k (see gemm.cc for the reasoning).
double GemmTolerance(GemmType type, int64_t k);

// The datasheet dense peak (TFLOPS) of a known GPU for `type`, with the entry
// used in `how`; NotFound for a GPU or type not in the table.
Result<CpuPeak> GpuPeakTflops(std::string_view device_name, GemmType type);

// gemm_cuda.cc: runs the warm-up, timed GEMMs and the check on CUDA device 0
// for options whose sizes are already resolved; fills device_name, backend,
// iters, seconds_per_iter and max_rel_error. Unavailable in a build without CUDA.
Result<GemmResult> RunCudaGemm(const GemmOptions& resolved);

}  // namespace detail
}  // namespace gantry::bench
