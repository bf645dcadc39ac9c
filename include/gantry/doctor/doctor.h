// `gantry doctor`: one command, one verdict on this node.
//
// RunDoctor() detects the machine (CPU, memory, NUMA, GPUs, /dev/shm), asks
// IMDS for the VM size (concurrently, bounded by the Imds implementation's own
// deadline), measures memcpy bandwidth, runs a short all_reduce sweep on the
// best local backend, and turns each fact into a Check with a verdict.
//
//   AzureImds imds;
//   ASSIGN_OR_RETURN(DoctorReport report, RunDoctor(DoctorOptions{}, imds, SystemClock()));
//   std::cout << report.RenderText();
//   return report.overall == Verdict::kFail ? 1 : 0;
//
// Machine problems are verdicts, not errors: RunDoctor fails only for bad
// options. Not thread-safe with itself (the benchmark forks ranks and uses
// /dev/shm), so run one at a time per process.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/advise/advise.h"
#include "gantry/advise/catalog.h"
#include "gantry/assess/assess.h"
#include "gantry/bench/collectives.h"
#include "gantry/bench/gemm.h"
#include "gantry/bench/memory.h"
#include "gantry/comm/launch.h"
#include "gantry/core/clock.h"
#include "gantry/core/imds.h"
#include "gantry/core/json.h"
#include "gantry/core/status.h"
#include "gantry/health/check.h"
#include "gantry/health/detect.h"

namespace gantry::doctor {

// The machine facts come from the host detection the health checks use.
using health::CpuInfo;
using health::GpuInfo;
using health::MemoryInfo;
using health::ShmInfo;

// In order of severity for the overall verdict: skip < ok < warn < fail.
enum class Verdict { kOk, kWarn, kFail, kSkip };
std::string_view VerdictName(Verdict v);  // "ok", "warn", "fail", "skip"

struct Check {
  // Stable id: "vm", "cpu", "memory", "numa", "gpus", "shm", "memcpy", "gemm", "all_reduce",
  // "advice", "health", "assess", "storage".
  std::string name;
  Verdict verdict = Verdict::kOk;
  std::string value;   // what was found, for people: "AMD EPYC: 1 socket, 2 cores, 2 threads"
  std::string detail;  // why the verdict (always set for warn, fail and skip), or a note
};

struct DoctorOptions {
  std::string root_dir = "/";             // stands for "/" when reading /proc, /sys, /dev/shm
  std::string nvidia_smi = "nvidia-smi";  // fallback GPU lister; "" never runs it
  bool run_bench = true;                  // false: the all_reduce check is "skip"
  int ranks = 0;  // 0: one per GPU on nccl, else min(physical cores, 8) but at least 2
  comm::Backend backend = comm::Backend::kAuto;  // kAuto: see BenchBackend()
  uint64_t bench_min_bytes = 8;
  uint64_t bench_max_bytes = 64ull << 20;  // lowered to what /dev/shm can hold
  uint64_t bench_step_factor = 4;
  int bench_iters = 5;
  uint64_t memcpy_bytes = 256ull << 20;  // lowered to a quarter of available memory; 0 skips it
  double memcpy_seconds = 0.3;
  // Matrix-multiply throughput against the device's peak: bf16 with cuBLAS on
  // a GPU node (CUDA builds), fp32 with OpenBLAS otherwise.
  bool run_gemm = true;
  int64_t gemm_size = 0;  // m = n = k; 0: the bench default (GPU 8192, CPU 2048)
  double gemm_seconds = 0.5;
  // The advice check: this node's entry in `catalog` (nullptr: the built-in
  // one) and, when a workload is given, whether this node suits it.
  const advise::Catalog* catalog = nullptr;
  std::optional<advise::Workload> workload;
  // The health check: `gantry health` with the profile for this VM size (or
  // `health_profile`: a built-in name or a file), reading /proc and /sys under
  // root_dir, without the bandwidth probes the doctor runs itself
  // (memory_bandwidth, collective, gemm).
  bool run_health = true;
  std::string health_profile;
  // The "assess" check: `gantry assess run --node` on this machine (facts under
  // root_dir; the health fact is the health check's verdict above, unknown when
  // it did not run).
  bool run_assess = true;
};

struct DoctorReport {
  std::chrono::system_clock::time_point timestamp;  // Clock::WallNow() at the start
  double elapsed_s = 0;                             // Clock::Now() from start to end
  std::string hostname;                             // gethostname(), "" if unknown

  std::optional<CpuInfo> cpu;  // nullopt when detection failed (see the "cpu" check)
  std::optional<MemoryInfo> memory;
  int numa_nodes = 1;
  GpuInfo gpus;
  std::optional<ShmInfo> shm;
  std::optional<ImdsInfo> vm;  // nullopt off Azure (the "vm" check says why)
  std::optional<bench::MemcpyResult> memcpy;
  std::optional<bench::GemmResult> gemm;
  std::optional<bench::Report> all_reduce;
  comm::Backend bench_backend = comm::Backend::kAuto;  // what the sweep was asked to use
  int bench_ranks = 0;  // ranks the sweep used (or would have used); 0: one per GPU

  std::vector<Check> checks;
  Verdict overall = Verdict::kOk;

  // Stable keys (see src/doctor/README.md); "version" is the report format's.
  Json ToJson() const;
  // The verdict table, the all_reduce rows when the sweep ran, and the overall
  // verdict, for a terminal.
  std::string RenderText() const;
};

// The verdict rules, one per check. Exposed so that tests can drive them with
// any facts.
Check CheckCpu(const Result<CpuInfo>& cpu);
// warn below 10% available.
Check CheckMemory(const Result<MemoryInfo>& memory);
Check CheckNuma(int nodes);
// fail when an Azure VM size with a known GPU count has fewer GPUs; warn when
// nvidia-smi failed; skip when there are none and none are expected.
Check CheckGpus(const GpuInfo& gpus, const std::optional<ImdsInfo>& vm);
// fail without /dev/shm; warn when its free space is below `needed_bytes`.
Check CheckShm(const Result<ShmInfo>& shm, uint64_t needed_bytes);
// ok with the VM size; skip ("unknown") when IMDS did not answer.
Check CheckVm(const Result<ImdsInfo>& vm);
Check CheckMemcpy(const Result<bench::MemcpyResult>& memcpy);
// fail when the GEMM did not run or its sampled results are wrong; warn below
// 50% of the device's peak (clocks throttled, another job, a slow BLAS);
// ok otherwise, and when the peak is unknown.
Check CheckGemm(const Result<bench::GemmResult>& gemm);
// fail on an error, no rows or any wrong element; on host backends (not nccl),
// warn when the busbw of the largest size (the better of out-of-place and
// in-place) is below 25% of `memcpy_gbs` (when known).
Check CheckAllReduce(const Result<bench::Report>& report, std::optional<double> memcpy_gbs);
// ok with the node's catalog entry (GPUs, peak, memory); with a workload, ok
// when this size suits it (how many VMs, how long) and warn with the reason
// when it does not; skip when the VM size is unknown or not in the catalog.
// With a GPU `gemm` measurement, the detail compares it with the catalog's
// peak for the accelerator (per GPU).
Check CheckAdvice(const std::optional<ImdsInfo>& vm, const advise::Catalog& catalog,
                  const std::optional<advise::Workload>& workload,
                  const std::optional<bench::GemmResult>& gemm = std::nullopt);
// The doctor's summary of a health run: fail on any failed or errored check,
// warn on a warning (or when `vm_size_known` is false for a known VM size),
// ok otherwise; the value reads "N passed, W warnings, F failures: first
// failure <name>: <message>".
Check CheckHealth(const Result<health::HealthReport>& report, const std::string& vm_size,
                  bool profile_known);
// The doctor's summary of the node assessment: warn when an unsuppressed
// failure remains (whatever its severity: the node's fitness for work is the
// health check's verdict), ok otherwise; the value names the failing rule ids ("2 failures:
// GANTRY-NODE-004 (high), GANTRY-NODE-005 (medium)") or counts the passes.
Check CheckNodeAssessment(const Result<assess::Assessment>& assessment);
// Storage credentials: warn when a storage account key (local auth) is
// configured on the node, naming where (assess::FindStorageAccountKeys: the
// variable or config file and key, never the value) and saying to use a
// managed identity with a Storage Blob Data role and disable shared key access;
// ok when there is none.
Check CheckStorageAuth(const std::vector<std::string>& account_keys);
// The worst verdict of `checks` (skip counts as nothing; ok when empty).
Verdict Overall(const std::vector<Check>& checks);

// GPUs an Azure VM size carries, for NVIDIA sizes Gantry knows (ND/NC H100,
// H200, A100, T4, GB200); nullopt otherwise. Case-insensitive.
std::optional<int> ExpectedGpuCount(std::string_view vm_size);

// The backend the sweep runs on: `requested`, except that kAuto becomes kNccl
// when GPUs are visible and NCCL is compiled in (the best backend on a GPU
// node); otherwise kAuto (shared memory on one node).
comm::Backend BenchBackend(comm::Backend requested, const GpuInfo& gpus, bool nccl_compiled);

// /dev/shm bytes an all_reduce of `max_bytes` on `ranks` local ranks needs:
// an estimate of the shm backend's segments (send and receive staging per rank).
uint64_t ShmBytesNeeded(int ranks, uint64_t max_bytes);

// Errors: InvalidArgument naming the option (ranks of 1 or below 0, bench sizes
// of 0 or min > max, a step factor below 2, iterations below 1, a memcpy
// duration that is not positive).
Result<DoctorReport> RunDoctor(const DoctorOptions& options, const Imds& imds, const Clock& clock);

}  // namespace gantry::doctor
