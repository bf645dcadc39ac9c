// The cuBLAS runner of `gantry bench gemm --device cuda`. In a build without
// CUDA (or whose toolkit lacks cuBLAS) it compiles to stubs that say so.
//
// The CUDA runtime and cuBLAS are dlopened on first use (CudaApi below), so
// that `gantry` maps neither unless it runs a GEMM on a GPU; their headers
// give the types and the functions' signatures.
#include "gantry/bench/gemm.h"
#include "gantry/config.h"

#if GANTRY_HAVE_CUDA && defined(GANTRY_GEMM_CUBLAS)
#define GANTRY_GEMM_WITH_CUBLAS 1
#else
#define GANTRY_GEMM_WITH_CUBLAS 0
#endif

#if GANTRY_GEMM_WITH_CUBLAS
// The C API only: cuda_runtime.h would add C++ overloads of cudaMalloc & co.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "gantry/core/plugin.h"
#endif

namespace gantry::bench {

#if GANTRY_GEMM_WITH_CUBLAS

namespace {

// The functions of the CUDA runtime and cuBLAS this file calls, bound by name.
// A name that cublas_v2.h maps to a versioned symbol (cublasCreate ->
// cublasCreate_v2) is bound under that symbol.
#define GANTRY_CUDART_FUNCTIONS(X) \
  X(cudaGetDeviceCount)            \
  X(cudaSetDevice)                 \
  X(cudaGetDeviceProperties)       \
  X(cudaGetErrorString)            \
  X(cudaGetErrorName)              \
  X(cudaMemGetInfo)                \
  X(cudaMalloc)                    \
  X(cudaFree)                      \
  X(cudaMemcpy)                    \
  X(cudaMemset)                    \
  X(cudaDeviceSynchronize)         \
  X(cudaEventCreate)               \
  X(cudaEventDestroy)              \
  X(cudaEventRecord)               \
  X(cudaEventSynchronize)          \
  X(cudaEventElapsedTime)          \
  X(cudaRuntimeGetVersion)
#define GANTRY_CUBLAS_FUNCTIONS(X) \
  X(cublasCreate)                  \
  X(cublasDestroy)                 \
  X(cublasGetStatusString)         \
  X(cublasGetVersion)
#define GANTRY_STRINGIFY_(x) #x
#define GANTRY_STRINGIFY(x) GANTRY_STRINGIFY_(x)

struct CudaApi {
#define GANTRY_MEMBER(f) decltype(&::f) f = nullptr;
  GANTRY_CUDART_FUNCTIONS(GANTRY_MEMBER)
  GANTRY_CUBLAS_FUNCTIONS(GANTRY_MEMBER)
#undef GANTRY_MEMBER
  // Named by hand: cublas_api.h overloads it for C++ (an older computeType).
  cublasStatus_t (*cublasGemmEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                 int, const void*, const void*, cudaDataType, int, const void*,
                                 cudaDataType, int, const void*, void*, cudaDataType, int,
                                 cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
};

const plugin::LibrarySpec& CudartSpec() {
  static const plugin::LibrarySpec spec{
      {"libcudart.so." GANTRY_STRINGIFY(GANTRY_CUDA_MAJOR),
       GANTRY_CUDA_LIBDIR "/libcudart.so." GANTRY_STRINGIFY(GANTRY_CUDA_MAJOR)},
      "bench gemm --device cuda",
      "CUDA runtime",
      "install the CUDA runtime (libcudart" GANTRY_STRINGIFY(
          GANTRY_CUDA_MAJOR) ") or use --device cpu"};
  return spec;
}

const plugin::LibrarySpec& CublasSpec() {
  static const plugin::LibrarySpec spec{
      {"libcublas.so." GANTRY_STRINGIFY(GANTRY_CUDA_MAJOR),
       GANTRY_CUDA_LIBDIR "/libcublas.so." GANTRY_STRINGIFY(GANTRY_CUDA_MAJOR)},
      "bench gemm --device cuda",
      "CUDA cuBLAS",
      "install cuBLAS (libcublas" GANTRY_STRINGIFY(GANTRY_CUDA_MAJOR) ") or use --device cpu"};
  return spec;
}

// The table once LoadCudaApi succeeded (written once, inside its static
// initialisation); every function below runs only after that.
const CudaApi* g_api = nullptr;

// Loads both libraries once; the table lives as long as the process.
Result<const CudaApi*> LoadCudaApi() {
  static const Result<const CudaApi*> loaded = []() -> Result<const CudaApi*> {
    ASSIGN_OR_RETURN(void* cudart, plugin::OpenLibrary(CudartSpec()));
    ASSIGN_OR_RETURN(void* cublas, plugin::OpenLibrary(CublasSpec()));
    auto api = std::make_unique<CudaApi>();
#define GANTRY_BIND_CUDART(f) \
  RETURN_IF_ERROR(plugin::Bind(cudart, CudartSpec(), GANTRY_STRINGIFY(f), &api->f));
#define GANTRY_BIND_CUBLAS(f) \
  RETURN_IF_ERROR(plugin::Bind(cublas, CublasSpec(), GANTRY_STRINGIFY(f), &api->f));
    GANTRY_CUDART_FUNCTIONS(GANTRY_BIND_CUDART)
    GANTRY_CUBLAS_FUNCTIONS(GANTRY_BIND_CUBLAS)
    GANTRY_BIND_CUBLAS(cublasGemmEx)
#undef GANTRY_BIND_CUDART
#undef GANTRY_BIND_CUBLAS
    g_api = api.get();
    return static_cast<const CudaApi*>(api.release());
  }();
  return loaded;
}

Status Check(cudaError_t err, std::string_view what) {
  if (err == cudaSuccess) return Status::Ok();
  return Unavailable(fmt::format("gemm: {}: {} ({})", what, g_api->cudaGetErrorString(err),
                                 g_api->cudaGetErrorName(err)));
}

Status Check(cublasStatus_t s, std::string_view what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Internal(fmt::format("gemm: {}: {}", what, g_api->cublasGetStatusString(s)));
}

struct DeviceMemory {
  void* p = nullptr;
  ~DeviceMemory() {
    if (p != nullptr) g_api->cudaFree(p);
  }
};

struct CublasHandle {
  cublasHandle_t h = nullptr;
  ~CublasHandle() {
    if (h != nullptr) g_api->cublasDestroy(h);
  }
};

struct Event {
  cudaEvent_t e = nullptr;
  ~Event() {
    if (e != nullptr) g_api->cudaEventDestroy(e);
  }
};

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

}  // namespace

bool CudaGemmAvailable() {
  if (!LoadCudaApi().ok()) return false;
  int count = 0;
  return g_api->cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

namespace detail {

Result<GemmResult> RunCudaGemm(const GemmOptions& o) {
  RETURN_IF_ERROR(LoadCudaApi().status());
  int count = 0;
  if (cudaError_t err = g_api->cudaGetDeviceCount(&count); err != cudaSuccess || count == 0) {
    return Unavailable(fmt::format(
        "gemm: no CUDA device visible ({}); check nvidia-smi and CUDA_VISIBLE_DEVICES, or use "
        "--device cpu",
        err == cudaSuccess ? "0 devices" : g_api->cudaGetErrorString(err)));
  }
  RETURN_IF_ERROR(Check(g_api->cudaSetDevice(0), "cudaSetDevice(0)"));
  cudaDeviceProp prop{};
  RETURN_IF_ERROR(Check(g_api->cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties"));

  cudaDataType_t data_type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;  // fp32 accumulation, no TF32
  switch (o.type) {
    case GemmType::kFp32:
      break;
    case GemmType::kFp64:
      data_type = CUDA_R_64F;
      compute = CUBLAS_COMPUTE_64F;
      break;
    case GemmType::kBf16:
      data_type = CUDA_R_16BF;
      break;
    case GemmType::kFp16:
      data_type = CUDA_R_16F;
      break;
  }
  // alpha and beta have the compute type's precision.
  const float alpha32 = 1.0f, beta32 = 0.0f;
  const double alpha64 = 1.0, beta64 = 0.0;
  const bool f64 = o.type == GemmType::kFp64;
  const void* alpha = f64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = f64 ? static_cast<const void*>(&beta64) : &beta32;

  const size_t elem = ElementBytes(o.type);
  const size_t a_count = static_cast<size_t>(o.m) * static_cast<size_t>(o.k);
  const size_t b_count = static_cast<size_t>(o.k) * static_cast<size_t>(o.n);
  const size_t c_count = static_cast<size_t>(o.m) * static_cast<size_t>(o.n);
  const size_t need = (a_count + b_count + c_count) * elem;
  size_t free_bytes = 0, total_bytes = 0;
  RETURN_IF_ERROR(Check(g_api->cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
  if (need > free_bytes) {
    return ResourceExhausted(fmt::format(
        "gemm: {}x{}x{} {} needs {} B of GPU memory, {} B free on {}; pass a smaller size", o.m,
        o.n, o.k, GemmTypeName(o.type), need, free_bytes, prop.name));
  }

  std::unique_ptr<void, FreeDeleter> a(std::malloc(a_count * elem)), b(std::malloc(b_count * elem)),
      c(std::malloc(c_count * elem));
  if (a == nullptr || b == nullptr || c == nullptr) {
    return ResourceExhausted("gemm: cannot allocate the host copies of the matrices");
  }
  FillInputs(o.type, a.get(), a_count, 1);
  FillInputs(o.type, b.get(), b_count, 2);

  DeviceMemory da, db, dc;
  RETURN_IF_ERROR(Check(g_api->cudaMalloc(&da.p, a_count * elem), "cudaMalloc(A)"));
  RETURN_IF_ERROR(Check(g_api->cudaMalloc(&db.p, b_count * elem), "cudaMalloc(B)"));
  RETURN_IF_ERROR(Check(g_api->cudaMalloc(&dc.p, c_count * elem), "cudaMalloc(C)"));
  RETURN_IF_ERROR(
      Check(g_api->cudaMemcpy(da.p, a.get(), a_count * elem, cudaMemcpyHostToDevice), "copying A"));
  RETURN_IF_ERROR(
      Check(g_api->cudaMemcpy(db.p, b.get(), b_count * elem, cudaMemcpyHostToDevice), "copying B"));
  RETURN_IF_ERROR(Check(g_api->cudaMemset(dc.p, 0, c_count * elem), "cudaMemset(C)"));

  CublasHandle handle;
  RETURN_IF_ERROR(Check(g_api->cublasCreate(&handle.h), "cublasCreate"));
  const int m = static_cast<int>(o.m), n = static_cast<int>(o.n), k = static_cast<int>(o.k);
  // cuBLAS is column-major; the matrices are row-major. Row-major C = A x B is
  // column-major C^T = B^T x A^T, so B goes first and m and n swap.
  auto gemm = [&] {
    return Check(g_api->cublasGemmEx(handle.h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, alpha, db.p,
                                     data_type, n, da.p, data_type, k, beta, dc.p, data_type, n,
                                     compute, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  };

  for (int i = 0; i < o.warmup; ++i) RETURN_IF_ERROR(gemm());
  RETURN_IF_ERROR(Check(g_api->cudaDeviceSynchronize(), "warm-up GEMMs"));

  Event start, stop;
  RETURN_IF_ERROR(Check(g_api->cudaEventCreate(&start.e), "cudaEventCreate"));
  RETURN_IF_ERROR(Check(g_api->cudaEventCreate(&stop.e), "cudaEventCreate"));
  // Times `iters` back-to-back GEMMs on the default stream (cuBLAS' stream).
  auto timed = [&](int iters) -> Result<double> {
    RETURN_IF_ERROR(Check(g_api->cudaEventRecord(start.e, nullptr), "cudaEventRecord"));
    for (int i = 0; i < iters; ++i) RETURN_IF_ERROR(gemm());
    RETURN_IF_ERROR(Check(g_api->cudaEventRecord(stop.e, nullptr), "cudaEventRecord"));
    RETURN_IF_ERROR(Check(g_api->cudaEventSynchronize(stop.e), "timed GEMMs"));
    float ms = 0;
    RETURN_IF_ERROR(
        Check(g_api->cudaEventElapsedTime(&ms, start.e, stop.e), "cudaEventElapsedTime"));
    return static_cast<double>(ms) / 1e3;
  };

  int iters = o.iters;
  if (iters == 0) {
    // One GEMM sets how many fit in min_seconds.
    ASSIGN_OR_RETURN(double one, timed(1));
    const double want = std::ceil(o.min_seconds / std::max(one, 1e-6));
    iters = static_cast<int>(std::clamp(want, 1.0, 1e6));
  }
  ASSIGN_OR_RETURN(double seconds, timed(iters));

  RETURN_IF_ERROR(Check(g_api->cudaMemcpy(c.get(), dc.p, c_count * elem, cudaMemcpyDeviceToHost),
                        "copying C back"));

  int cublas_version = 0, runtime_version = 0;
  g_api->cublasGetVersion(handle.h, &cublas_version);
  g_api->cudaRuntimeGetVersion(&runtime_version);

  GemmResult r;
  r.device_name = prop.name;
  r.backend = fmt::format("cuBLAS {}.{}.{} (CUDA runtime {}.{})", cublas_version / 10000,
                          cublas_version % 10000 / 100, cublas_version % 100,
                          runtime_version / 1000, runtime_version % 1000 / 10);
  r.iters = iters;
  r.seconds_per_iter = seconds / iters;
  r.max_rel_error = SampledError(o.type, a.get(), b.get(), o.type, c.get(), o.m, o.n, o.k,
                                 SampleIndices(o.m, o.n));
  return r;
}

}  // namespace detail

#else  // no CUDA / cuBLAS

bool CudaGemmAvailable() { return false; }

namespace detail {

Result<GemmResult> RunCudaGemm(const GemmOptions& /*resolved*/) {
  return Unavailable(
      "gemm: this gantry was built without CUDA/cuBLAS; rebuild with the CUDA toolkit "
      "(GANTRY_WITH_CUDA=ON) or use --device cpu");
}

}  // namespace detail

#endif

}  // namespace gantry::bench
