// `gantry bench gemm` on the CPU (OpenBLAS) plus everything the CPU and GPU
// paths share: options, sizes, inputs, the check, peaks and JSON. The cuBLAS
// runner is in gemm_cuda.cc.
#include "gantry/bench/gemm.h"

#include <cblas.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "gantry/config.h"
#include "gantry/core/text.h"
#include "host_memory.h"

namespace gantry::bench {
namespace {

constexpr int64_t kCpuDefaultSize = 2048;
constexpr int64_t kGpuDefaultSize = 8192;
constexpr int64_t kMinAutoSize = 64;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using HostBuffer = std::unique_ptr<void, FreeDeleter>;

HostBuffer Allocate(size_t bytes) {
  void* p = nullptr;
  if (::posix_memalign(&p, 4096, std::max<size_t>(bytes, 1)) != 0) return nullptr;
  return HostBuffer(p);
}

// Output type for an input type: bf16 on the CPU goes through cblas_sbgemm,
// which writes fp32.
GemmType OutputType(GemmType type, GemmDevice device) {
  if (type == GemmType::kBf16 && device == GemmDevice::kCpu) return GemmType::kFp32;
  return type;
}

// Bytes of A, B and C on the host; double so huge sizes cannot overflow.
double HostBytes(const GemmOptions& o) {
  const double ab = static_cast<double>(detail::ElementBytes(o.type));
  const double c = static_cast<double>(detail::ElementBytes(OutputType(o.type, o.device)));
  const double m = static_cast<double>(o.m), n = static_cast<double>(o.n),
               k = static_cast<double>(o.k);
  return (m * k + k * n) * ab + m * n * c;
}

std::string Dims(const GemmOptions& o) { return fmt::format("{}x{}x{}", o.m, o.n, o.k); }

Status Validate(const GemmOptions& o) {
  const int t = static_cast<int>(o.type);
  if (t < 0 || t > static_cast<int>(GemmType::kFp16)) {
    return InvalidArgument(fmt::format("gemm: unknown type value {}", t));
  }
  const int d = static_cast<int>(o.device);
  if (d < 0 || d > static_cast<int>(GemmDevice::kCuda)) {
    return InvalidArgument(fmt::format("gemm: unknown device value {}", d));
  }
  const bool any = o.m != 0 || o.n != 0 || o.k != 0;
  if (any) {
    const int64_t limit = std::numeric_limits<int32_t>::max();  // BLAS dimensions are int
    for (auto [name, v] : {std::pair{"m", o.m}, std::pair{"n", o.n}, std::pair{"k", o.k}}) {
      if (v <= 0 || v > limit) {
        return InvalidArgument(fmt::format(
            "gemm: {} = {} (m={}, n={}, k={}): give all of m, n and k between 1 and {}, or none "
            "of them for the default size",
            name, v, o.m, o.n, o.k, limit));
      }
    }
  }
  if (o.warmup < 0) return InvalidArgument(fmt::format("gemm: warmup {} is negative", o.warmup));
  if (o.iters < 0) {
    return InvalidArgument(
        fmt::format("gemm: iters {} is negative; use 0 to run for min_seconds", o.iters));
  }
  if (o.iters == 0 && !(o.min_seconds > 0 && std::isfinite(o.min_seconds))) {
    return InvalidArgument(
        fmt::format("gemm: min_seconds must be a positive number, got {}", o.min_seconds));
  }
  if (o.threads < 0) return InvalidArgument(fmt::format("gemm: threads {} is negative", o.threads));
  if (o.threads > 0 && o.device == GemmDevice::kCuda) {
    return InvalidArgument("gemm: threads applies to the cpu device only; leave it at 0 for cuda");
  }
  if (o.device == GemmDevice::kCpu && o.type == GemmType::kFp16) {
    return Unimplemented(
        "gemm: fp16 on the CPU is not implemented (CBLAS has no half-precision GEMM); use "
        "fp32, fp64, or fp16 on --device cuda");
  }
  return Status::Ok();
}

// Fills in m, n, k when they are 0: the default size, halved until A, B and C
// take at most a quarter of MemAvailable. Explicit sizes must fit in MemAvailable.
Result<GemmOptions> ResolveSizes(GemmOptions o) {
  const double available = static_cast<double>(internal::MemAvailableBytes());
  if (o.m == 0) {
    int64_t s = o.device == GemmDevice::kCpu ? kCpuDefaultSize : kGpuDefaultSize;
    for (;; s /= 2) {
      o.m = o.n = o.k = s;
      if (HostBytes(o) <= available / 4) break;
      if (s / 2 < kMinAutoSize) {
        return ResourceExhausted(fmt::format(
            "gemm: even {}x{}x{} {} matrices ({:.0f} B) exceed a quarter of MemAvailable "
            "({:.0f} B); free memory or pass a smaller --size",
            s, s, s, GemmTypeName(o.type), HostBytes(o), available));
      }
    }
  } else if (HostBytes(o) > available) {
    return ResourceExhausted(fmt::format(
        "gemm: {} {} needs {:.0f} B of host memory for A, B and C but MemAvailable is {:.0f} B; "
        "pass a smaller size",
        Dims(o), GemmTypeName(o.type), HostBytes(o), available));
  }
  return o;
}

// OpenBLAS, opened on first use. It is not linked: its pthread build starts a
// thread pool when the library loads, and those threads would be created
// before `gantry gateway` blocks its signals, so a SIGTERM meant for the
// drain loop could kill the process. dlopen keeps every other command free
// of BLAS threads.
using SbgemmFn = void (*)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint,
                          blasint, blasint, float, const uint16_t*, blasint, const uint16_t*,
                          blasint, float, float*, blasint);
struct OpenBlas {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&cblas_dgemm) dgemm = nullptr;
  decltype(&openblas_set_num_threads) set_num_threads = nullptr;
  decltype(&openblas_get_num_threads) get_num_threads = nullptr;
  decltype(&openblas_get_config) get_config = nullptr;
  decltype(&openblas_get_corename) get_corename = nullptr;
  // cblas_sbgemm (bf16 in, fp32 out) exists only in builds with
  // BUILD_BFLOAT16; Debian 12's 0.3.21 lacks it.
  SbgemmFn sbgemm = nullptr;
};

Result<const OpenBlas*> LoadOpenBlas() {
  static const Result<const OpenBlas*> loaded = []() -> Result<const OpenBlas*> {
    void* lib = nullptr;
    for (const char* name : {"libopenblas.so.0", "libopenblas.so"}) {
      lib = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib != nullptr) break;
    }
    if (lib == nullptr) {
      return Unavailable(std::string("gemm: cannot load OpenBLAS (libopenblas.so.0): ") +
                         ::dlerror() + "; install it with scripts/install-deps.sh (Debian: "
                         "libopenblas0)");
    }
    auto* blas = new OpenBlas;  // lives as long as the process, like the library
    auto bind = [&](auto* slot, const char* symbol) {
      *slot = reinterpret_cast<std::remove_pointer_t<decltype(slot)>>(::dlsym(lib, symbol));
      return *slot != nullptr;
    };
    if (!bind(&blas->sgemm, "cblas_sgemm") || !bind(&blas->dgemm, "cblas_dgemm") ||
        !bind(&blas->set_num_threads, "openblas_set_num_threads") ||
        !bind(&blas->get_num_threads, "openblas_get_num_threads") ||
        !bind(&blas->get_config, "openblas_get_config") ||
        !bind(&blas->get_corename, "openblas_get_corename")) {
      return Unavailable("gemm: the OpenBLAS found lacks a CBLAS or openblas_* function; "
                         "reinstall libopenblas0");
    }
    bind(&blas->sbgemm, "cblas_sbgemm");  // optional
    return static_cast<const OpenBlas*>(blas);
  }();
  return loaded;
}

// Restores OpenBLAS' thread count when the measurement ends.
class OpenBlasThreads {
 public:
  OpenBlasThreads(const OpenBlas& blas, int threads)
      : blas_(blas), before_(blas.get_num_threads()) {
    if (threads > 0) blas_.set_num_threads(threads);
  }
  ~OpenBlasThreads() { blas_.set_num_threads(before_); }
  OpenBlasThreads(const OpenBlasThreads&) = delete;
  OpenBlasThreads& operator=(const OpenBlasThreads&) = delete;

 private:
  const OpenBlas& blas_;
  int before_;
};

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string Trim(const std::string& s) { return std::string(TrimSpace(s)); }

// One "key : value" field per line, processor blocks separated by blank lines.
struct CpuinfoProcessor {
  int processor = -1;
  std::string physical_id, core_id;
  double mhz = 0;
};
struct Cpuinfo {
  std::vector<CpuinfoProcessor> processors;
  std::set<std::string> flags;  // of the first processor
  std::string vendor, model_name;
  int family = -1;
};

Cpuinfo ParseCpuinfo(const std::string& text) {
  Cpuinfo info;
  std::istringstream in(text);
  std::string line;
  bool have_flags = false;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = Trim(line.substr(0, colon));
    const std::string value = Trim(line.substr(colon + 1));
    if (key == "processor") {
      info.processors.emplace_back();
      info.processors.back().processor = std::atoi(value.c_str());
      continue;
    }
    if (info.processors.empty()) info.processors.emplace_back();  // fields before "processor"
    CpuinfoProcessor& p = info.processors.back();
    if (key == "physical id") {
      p.physical_id = value;
    } else if (key == "core id") {
      p.core_id = value;
    } else if (key == "cpu MHz") {
      p.mhz = std::atof(value.c_str());
    } else if (key == "flags" && !have_flags) {
      have_flags = true;
      std::istringstream words(value);
      std::string w;
      while (words >> w) info.flags.insert(w);
    } else if (key == "vendor_id" && info.vendor.empty()) {
      info.vendor = value;
    } else if (key == "model name" && info.model_name.empty()) {
      info.model_name = value;
    } else if (key == "cpu family" && info.family < 0) {
      info.family = std::atoi(value.c_str());
    }
  }
  return info;
}

// The CPUs this thread may run on; empty = no restriction known.
std::set<int> AllowedCpus() {
  std::set<int> allowed;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return allowed;
  for (int i = 0; i < CPU_SETSIZE; ++i) {
    if (CPU_ISSET(i, &set)) allowed.insert(i);
  }
  return allowed;
}

std::string CpuModelName(const std::string& root_dir) {
  Result<std::string> text = ReadFile(root_dir + "/proc/cpuinfo");
  if (!text.ok()) return "cpu";
  Cpuinfo info = ParseCpuinfo(*text);
  return info.model_name.empty() ? "cpu" : info.model_name;
}

// "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..." -> "OpenBLAS 0.3.21": the rest
// is build options; the kernel set chosen for this CPU says more.
std::string OpenBlasVersion(const OpenBlas& blas) {
  std::istringstream config(blas.get_config());
  std::string name, version;
  config >> name >> version;
  return Trim(name + " " + version);
}

Result<GemmResult> RunCpuGemm(const GemmOptions& o) {
  ASSIGN_OR_RETURN(const OpenBlas* blas, LoadOpenBlas());
  SbgemmFn sbgemm = nullptr;
  if (o.type == GemmType::kBf16) {
    sbgemm = blas->sbgemm;
    if (sbgemm == nullptr) {
      return InvalidArgument("gemm: bf16 on the CPU needs cblas_sbgemm, which this " +
                             OpenBlasVersion(*blas) +
                             " was built without; use fp32 or fp64, or bf16 on --device cuda");
    }
  }
  const GemmType c_type = OutputType(o.type, o.device);
  const size_t ab = detail::ElementBytes(o.type);
  const size_t cb = detail::ElementBytes(c_type);
  const size_t a_count = static_cast<size_t>(o.m) * static_cast<size_t>(o.k);
  const size_t b_count = static_cast<size_t>(o.k) * static_cast<size_t>(o.n);
  const size_t c_count = static_cast<size_t>(o.m) * static_cast<size_t>(o.n);
  HostBuffer a = Allocate(a_count * ab), b = Allocate(b_count * ab), c = Allocate(c_count * cb);
  if (a == nullptr || b == nullptr || c == nullptr) {
    return ResourceExhausted("gemm: cannot allocate the host matrices for " + Dims(o) +
                             "; pass a smaller size");
  }
  detail::FillInputs(o.type, a.get(), a_count, 1);
  detail::FillInputs(o.type, b.get(), b_count, 2);
  std::memset(c.get(), 0, c_count * cb);  // touch every page before timing

  OpenBlasThreads threads(*blas, o.threads);
  const auto m = static_cast<blasint>(o.m), n = static_cast<blasint>(o.n),
             k = static_cast<blasint>(o.k);
  // Row-major: lda = k, ldb = n, ldc = n.
  auto gemm = [&] {
    switch (o.type) {
      case GemmType::kFp32:
        blas->sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f,
                    static_cast<const float*>(a.get()), k, static_cast<const float*>(b.get()), n,
                    0.0f, static_cast<float*>(c.get()), n);
        break;
      case GemmType::kFp64:
        blas->dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0,
                    static_cast<const double*>(a.get()), k, static_cast<const double*>(b.get()), n,
                    0.0, static_cast<double*>(c.get()), n);
        break;
      case GemmType::kBf16:
        sbgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f,
               static_cast<const uint16_t*>(a.get()), k, static_cast<const uint16_t*>(b.get()), n,
               0.0f, static_cast<float*>(c.get()), n);
        break;
      case GemmType::kFp16:
        break;  // refused by Validate
    }
  };

  for (int i = 0; i < o.warmup; ++i) gemm();
  using Steady = std::chrono::steady_clock;
  const auto start = Steady::now();
  int iters = 0;
  double elapsed = 0;
  while (true) {
    gemm();
    ++iters;
    elapsed = std::chrono::duration<double>(Steady::now() - start).count();
    if (o.iters > 0 ? iters >= o.iters : elapsed >= o.min_seconds) break;
  }

  GemmResult r;
  r.device_name = CpuModelName("/");
  r.threads = blas->get_num_threads();
  r.backend = fmt::format("{} ({} kernels, {} thread{})", OpenBlasVersion(*blas),
                          blas->get_corename(), r.threads, r.threads == 1 ? "" : "s");
  r.iters = iters;
  r.seconds_per_iter = elapsed / iters;
  r.max_rel_error = detail::SampledError(o.type, a.get(), b.get(), c_type, c.get(), o.m, o.n, o.k,
                                         detail::SampleIndices(o.m, o.n));
  return r;
}

// Reads one element of `type` as long double.
long double Load(GemmType type, const void* p, int64_t index) {
  switch (type) {
    case GemmType::kFp32:
      return static_cast<const float*>(p)[index];
    case GemmType::kFp64:
      return static_cast<const double*>(p)[index];
    case GemmType::kBf16:
      return detail::Bf16ToFloat(static_cast<const uint16_t*>(p)[index]);
    case GemmType::kFp16:
      return detail::Fp16ToFloat(static_cast<const uint16_t*>(p)[index]);
  }
  return 0;
}

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

Result<GemmType> ParseGemmType(std::string_view text) {
  for (GemmType t : {GemmType::kFp32, GemmType::kFp64, GemmType::kBf16, GemmType::kFp16}) {
    if (text == GemmTypeName(t)) return t;
  }
  return InvalidArgument("unknown GEMM type '" + std::string(text) +
                         "'; use fp32, fp64, bf16 or fp16");
}

std::string_view GemmTypeName(GemmType type) {
  switch (type) {
    case GemmType::kFp32:
      return "fp32";
    case GemmType::kFp64:
      return "fp64";
    case GemmType::kBf16:
      return "bf16";
    case GemmType::kFp16:
      return "fp16";
  }
  return "?";
}

Result<GemmDevice> ParseGemmDevice(std::string_view text) {
  if (text == "cpu") return GemmDevice::kCpu;
  if (text == "cuda") return GemmDevice::kCuda;
  return InvalidArgument("unknown GEMM device '" + std::string(text) + "'; use cpu or cuda");
}

std::string_view GemmDeviceName(GemmDevice device) {
  return device == GemmDevice::kCuda ? "cuda" : "cpu";
}

Result<GemmResult> MeasureGemm(const GemmOptions& options) {
  RETURN_IF_ERROR(Validate(options));
  if (options.device == GemmDevice::kCuda && !GANTRY_HAVE_CUDA) {
    return Unavailable(
        "gemm: this gantry was built without CUDA; rebuild on a machine with the CUDA toolkit "
        "(GANTRY_WITH_CUDA=ON) or use --device cpu");
  }
  ASSIGN_OR_RETURN(GemmOptions o, ResolveSizes(options));
  ASSIGN_OR_RETURN(GemmResult r,
                   o.device == GemmDevice::kCpu ? RunCpuGemm(o) : detail::RunCudaGemm(o));
  r.type = o.type;
  r.device = o.device;
  r.m = o.m;
  r.n = o.n;
  r.k = o.k;
  r.tflops = detail::GemmTflops(o.m, o.n, o.k, r.seconds_per_iter);
  r.tolerance = detail::GemmTolerance(o.type, o.k);
  r.verified = r.max_rel_error <= r.tolerance;  // false for NaN and +inf too

  Result<CpuPeak> peak = o.device == GemmDevice::kCpu
                             ? CpuPeakTflops(o.type)
                             : detail::GpuPeakTflops(r.device_name, o.type);
  if (peak.ok()) {
    double tflops = peak->tflops;
    r.peak_source = peak->how;
    // OpenBLAS may run fewer threads than there are cores (--threads,
    // OPENBLAS_NUM_THREADS); the peak of the cores it cannot use is not owed.
    if (o.device == GemmDevice::kCpu && r.threads > 0 && r.threads < peak->cores) {
      tflops = tflops * r.threads / peak->cores;
      r.peak_source += fmt::format("; scaled to the {} of {} cores OpenBLAS uses = {:.3g} TFLOPS",
                                   r.threads, peak->cores, tflops);
    }
    r.peak_tflops = tflops;
    if (tflops > 0) r.mfu = r.tflops / tflops;
  } else {
    r.peak_source = "peak unknown: " + peak.status().message();
  }
  return r;
}

Result<CpuPeak> CpuPeakTflops(GemmType type, const std::string& root_dir) {
  const std::string cpuinfo_path = root_dir + "/proc/cpuinfo";
  Result<std::string> text = ReadFile(cpuinfo_path);
  if (!text.ok()) {
    return NotFound("CPU peak: cannot read " + cpuinfo_path + " (" + text.status().message() + ")");
  }
  const Cpuinfo info = ParseCpuinfo(*text);
  const std::set<int> allowed = root_dir == "/" ? AllowedCpus() : std::set<int>{};
  auto usable = [&](int cpu) { return allowed.empty() || allowed.count(cpu) > 0; };

  // Physical cores: SMT siblings share one thread_siblings_list.
  const std::string sys_cpu = root_dir + "/sys/devices/system/cpu";
  std::set<std::string> cores;
  std::vector<int> cpus;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(sys_cpu, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() < 4 || name.compare(0, 3, "cpu") != 0 ||
        name.find_first_not_of("0123456789", 3) != std::string::npos) {
      continue;
    }
    const int cpu = std::atoi(name.c_str() + 3);
    if (!usable(cpu)) continue;
    const std::string siblings =
        Trim(ReadFirstLine(entry.path() / "topology/thread_siblings_list"));
    if (siblings.empty()) continue;  // offline CPUs have no topology
    cores.insert(siblings);
    cpus.push_back(cpu);
  }
  std::string cores_from = "sysfs topology";
  if (cores.empty()) {
    for (const CpuinfoProcessor& p : info.processors) {
      if (p.processor < 0 || !usable(p.processor)) continue;
      cores.insert(p.core_id.empty() ? "cpu" + std::to_string(p.processor)
                                     : p.physical_id + "/" + p.core_id);
    }
    cores_from = "/proc/cpuinfo";
  }
  if (cores.empty()) return NotFound("CPU peak: no processors listed in " + cpuinfo_path);

  // Clock: cpufreq's maximum when the kernel exposes it, else "cpu MHz".
  double khz = 0;
  for (int cpu : cpus) {
    const std::string f =
        Trim(ReadFirstLine(fmt::format("{}/cpu{}/cpufreq/cpuinfo_max_freq", sys_cpu, cpu)));
    if (!f.empty()) khz = std::max(khz, std::atof(f.c_str()));
  }
  std::string clock_from = "cpufreq cpuinfo_max_freq";
  if (khz <= 0) {
    for (const CpuinfoProcessor& p : info.processors) {
      if (p.processor >= 0 && !usable(p.processor)) continue;
      khz = std::max(khz, p.mhz * 1000);
    }
    clock_from = "/proc/cpuinfo 'cpu MHz' (the current or nominal clock, not max boost)";
  }
  if (khz <= 0) {
    return NotFound("CPU peak: no clock: neither " + sys_cpu +
                    "/cpuN/cpufreq/cpuinfo_max_freq nor a 'cpu MHz' line in " + cpuinfo_path);
  }

  auto has = [&](const char* flag) { return info.flags.count(flag) > 0; };
  int fp32 = 8;
  std::string isa = "SSE, no FMA";
  if (has("avx512f")) {
    const bool zen4 = info.vendor == "AuthenticAMD" && info.family == 25;
    fp32 = zen4 ? 32 : 64;
    isa = zen4 ? "AVX-512 on Zen 4's 256-bit FMA units" : "AVX-512, 2 FMA units assumed";
  } else if (has("avx2") && has("fma")) {
    fp32 = 32;
    isa = "AVX2+FMA, 2 FMA units assumed";
  }
  int per_cycle = fp32;
  switch (type) {
    case GemmType::kFp32:
      break;
    case GemmType::kFp64:
      per_cycle = fp32 / 2;
      isa += ", fp64 at half the fp32 rate";
      break;
    case GemmType::kBf16:
      if (!has("avx512_bf16")) {
        return Unimplemented("CPU peak: bf16 peak unknown without the avx512_bf16 flag in " +
                             cpuinfo_path);
      }
      per_cycle = fp32 * 2;
      isa += ", bf16 dot products at twice the fp32 rate";
      break;
    case GemmType::kFp16:
      return Unimplemented("CPU peak: fp16 peak unknown (no fp16 GEMM on the CPU)");
  }

  CpuPeak peak;
  peak.cores = static_cast<int>(cores.size());
  peak.ghz = khz / 1e6;
  peak.flops_per_cycle = per_cycle;
  peak.tflops = peak.cores * peak.ghz * per_cycle / 1e3;
  peak.how = fmt::format(
      "{} core{} x {:.2f} GHz x {} FLOP/cycle ({}) = {:.3g} TFLOPS {}; cores from {}, clock from "
      "{}",
      peak.cores, peak.cores == 1 ? "" : "s", peak.ghz, per_cycle, isa, peak.tflops,
      GemmTypeName(type), cores_from, clock_from);
  return peak;
}

Json GemmResultJson(const GemmResult& r) {
  auto finite_or_null = [](double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); };
  Json j;
  j["device"] = GemmDeviceName(r.device);
  j["device_name"] = r.device_name;
  j["backend"] = r.backend;
  j["type"] = GemmTypeName(r.type);
  j["m"] = r.m;
  j["n"] = r.n;
  j["k"] = r.k;
  j["threads"] = r.threads;
  j["iters"] = r.iters;
  j["seconds_per_iter"] = r.seconds_per_iter;
  j["tflops"] = r.tflops;
  j["peak_tflops"] = r.peak_tflops ? Json(*r.peak_tflops) : Json(nullptr);
  j["peak_source"] = r.peak_source;
  j["mfu"] = r.mfu ? finite_or_null(*r.mfu) : Json(nullptr);
  j["max_rel_error"] = finite_or_null(r.max_rel_error);
  j["tolerance"] = r.tolerance;
  j["verified"] = r.verified;
  return j;
}

namespace detail {

double GemmTflops(int64_t m, int64_t n, int64_t k, double seconds) {
  if (!(seconds > 0)) return 0;
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / seconds /
         1e12;
}

size_t ElementBytes(GemmType type) {
  switch (type) {
    case GemmType::kFp32:
      return 4;
    case GemmType::kFp64:
      return 8;
    case GemmType::kBf16:
    case GemmType::kFp16:
      return 2;
  }
  return 4;
}

void FillInputs(GemmType type, void* dst, size_t count, uint64_t seed) {
  uint64_t state = seed * 0x2545f4914f6cdd1dull + 1;
  for (size_t i = 0; i < count; ++i) {
    // Multiples of 1/256 in [-1, 1): |q| <= 256 needs at most 8 significant
    // bits, so every value is exact in bf16 and fp16 too, and every product of
    // two is exact in fp32.
    const int q = static_cast<int>(SplitMix64(state) >> 55) - 256;  // [-256, 256)
    const float v = static_cast<float>(q) / 256.0f;
    switch (type) {
      case GemmType::kFp32:
        static_cast<float*>(dst)[i] = v;
        break;
      case GemmType::kFp64:
        static_cast<double*>(dst)[i] = v;
        break;
      case GemmType::kBf16:
        static_cast<uint16_t*>(dst)[i] = FloatToBf16(v);
        break;
      case GemmType::kFp16:
        static_cast<uint16_t*>(dst)[i] = FloatToFp16(v);
        break;
    }
  }
}

float Bf16ToFloat(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

uint16_t FloatToBf16(float value) {
  uint32_t u;
  std::memcpy(&u, &value, sizeof(u));
  if (std::isnan(value)) return static_cast<uint16_t>((u >> 16) | 0x40);  // stay a (quiet) NaN
  u += 0x7fff + ((u >> 16) & 1);  // round to nearest, ties to even
  return static_cast<uint16_t>(u >> 16);
}

float Fp16ToFloat(uint16_t bits) {
  const int sign = bits >> 15;
  const int exp = (bits >> 10) & 0x1f;
  const int mant = bits & 0x3ff;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);  // zero or subnormal
  } else if (exp == 31) {
    v = mant == 0 ? std::numeric_limits<float>::infinity()
                  : std::numeric_limits<float>::quiet_NaN();
  } else {
    v = std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
  }
  return sign ? -v : v;
}

uint16_t FloatToFp16(float value) {
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  const float a = std::fabs(value);
  if (std::isnan(value)) return sign | 0x7e00;
  if (a >= 65520.0f) return sign | 0x7c00;  // rounds to infinity
  if (a < std::ldexp(1.0f, -14)) {
    // Subnormal (or zero): units of 2^-24, rounded to nearest even by nearbyint.
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  int e;
  const float frac = std::frexp(a, &e);  // a = frac * 2^e, frac in [0.5, 1)
  // 11 significant bits: mantissa in [1024, 2048); a carry to 2048 bumps the exponent.
  int mant = static_cast<int>(std::nearbyint(std::ldexp(frac, 11)));
  int exp = e - 1 + 15;
  if (mant == 2048) {
    mant = 1024;
    ++exp;
  }
  if (exp >= 31) return sign | 0x7c00;
  return sign | static_cast<uint16_t>(exp << 10) | static_cast<uint16_t>(mant - 1024);
}

std::vector<int64_t> SampleIndices(int64_t m, int64_t n, int count) {
  std::vector<int64_t> out;
  if (m <= 0 || n <= 0) return out;
  const int64_t total = m * n;
  if (total <= count) {
    for (int64_t i = 0; i < total; ++i) out.push_back(i);
    return out;
  }
  std::set<int64_t> picked = {0, n - 1, (m - 1) * n, total - 1};
  uint64_t state = 0x5eed;
  while (static_cast<int>(picked.size()) < count) {
    picked.insert(static_cast<int64_t>(SplitMix64(state) % static_cast<uint64_t>(total)));
  }
  out.assign(picked.begin(), picked.end());
  return out;
}

double SampledError(GemmType ab_type, const void* a, const void* b, GemmType c_type, const void* c,
                    int64_t m, int64_t n, int64_t k, const std::vector<int64_t>& indices) {
  double worst = 0;
  for (int64_t index : indices) {
    if (index < 0 || index >= m * n) continue;
    const int64_t i = index / n, j = index % n;
    long double ref = 0, scale = 0;
    for (int64_t p = 0; p < k; ++p) {
      const long double prod = Load(ab_type, a, i * k + p) * Load(ab_type, b, p * n + j);
      ref += prod;
      scale += std::fabs(prod);
    }
    const long double got = Load(c_type, c, index);
    if (!std::isfinite(static_cast<double>(got))) return std::numeric_limits<double>::infinity();
    const long double diff = std::fabs(got - ref);
    // All-zero rows or columns make scale 0: then any difference is an error.
    const double e = static_cast<double>(scale > 0 ? diff / scale : diff);
    worst = std::max(worst, e);
  }
  return worst;
}

// Tolerances. Inputs are exact in every type, so all error comes from the
// arithmetic. Any summation order of k products in a precision with unit
// roundoff u errs by at most about k*u*sum|a*b| (Higham, "Accuracy and
// Stability of Numerical Algorithms", 3.1); rounding the result to a narrower
// output type adds u_out*|c| <= u_out*sum|a*b|. SampledError divides by
// sum|a*b|, so a correct GEMM stays below u_out + k*u_acc whatever the sizes.
// Real errors grow like sqrt(k)*u, far below that bound, so the floors (fp32
// 1e-3, fp64 1e-10, bf16 1e-2, fp16 2e-3; above the bound for k <= 8192) are
// never reached by a correct BLAS, while a wrong element is typically off by
// O(|c|) ~ O(sqrt(k)) against sum|a*b| ~ k/4, i.e. by far more.
// bf16/fp16 accumulate in fp32 (CUBLAS_COMPUTE_32F, cblas_sbgemm).
double GemmTolerance(GemmType type, int64_t k) {
  const double kd = static_cast<double>(std::max<int64_t>(k, 1));
  const double u32 = std::ldexp(1.0, -24), u64 = std::ldexp(1.0, -53);
  switch (type) {
    case GemmType::kFp32:
      return std::max(1e-3, kd * u32);
    case GemmType::kFp64:
      return std::max(1e-10, kd * u64);
    case GemmType::kBf16:
      return std::max(1e-2, std::ldexp(1.0, -8) + kd * u32);
    case GemmType::kFp16:
      return std::max(2e-3, std::ldexp(1.0, -11) + kd * u32);
  }
  return 0;
}

Result<CpuPeak> GpuPeakTflops(std::string_view device_name, GemmType type) {
  // Dense (no sparsity) datasheet peaks at boost clock, TFLOPS. fp32 is the
  // non-tensor rate (CUBLAS_COMPUTE_32F does not use TF32); fp64 is the FP64
  // tensor-core rate that cuBLAS DGEMM uses on these parts; bf16/fp16 are
  // tensor-core rates with fp32 accumulation. First match wins, so the more
  // specific names come first.
  struct Entry {
    std::string_view match;  // substring of cudaDeviceProp::name
    std::string_view label;
    double fp32, fp64, bf16, fp16;
  };
  static constexpr Entry kTable[] = {
      {"H100 PCIe", "H100 PCIe", 51.2, 51.2, 756.0, 756.0},
      {"GH200", "GH200", 66.9, 66.9, 989.4, 989.4},
      {"H200", "H200 SXM", 66.9, 66.9, 989.4, 989.4},
      {"H100", "H100 SXM", 66.9, 66.9, 989.4, 989.4},
      {"A100", "A100", 19.5, 19.5, 312.0, 312.0},
  };
  for (const Entry& e : kTable) {
    if (device_name.find(e.match) == std::string_view::npos) continue;
    double v = 0;
    switch (type) {
      case GemmType::kFp32:
        v = e.fp32;
        break;
      case GemmType::kFp64:
        v = e.fp64;
        break;
      case GemmType::kBf16:
        v = e.bf16;
        break;
      case GemmType::kFp16:
        v = e.fp16;
        break;
    }
    CpuPeak peak;
    peak.tflops = v;
    peak.how = fmt::format("{} datasheet dense {} peak {:.4g} TFLOPS (at boost clock)", e.label,
                           GemmTypeName(type), v);
    return peak;
  }
  return NotFound("no peak table entry for GPU '" + std::string(device_name) +
                  "' (known: A100, H100 SXM/PCIe, H200, GH200)");
}

}  // namespace detail
}  // namespace gantry::bench
