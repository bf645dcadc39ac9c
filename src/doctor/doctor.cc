#include "gantry/doctor/doctor.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <ctime>
#include <future>
#include <map>

#include "gantry/assess/node.h"
#include "gantry/config.h"
#include "gantry/core/log.h"
#include "gantry/core/table.h"
#include "gantry/core/text.h"
#include "gantry/core/units.h"
#include "gantry/health/nvml.h"
#include "gantry/health/profile.h"

namespace gantry::doctor {
namespace {

constexpr int kReportVersion = 1;
// Below this share of memcpy bandwidth, a host collective is slower than the
// machine explains (cores oversubscribed, a bad backend choice, a slow path).
constexpr double kMinBusbwShareOfMemcpy = 0.25;
constexpr double kMinAvailableMemoryShare = 0.10;

std::string Percent(double share) { return fmt::format("{:.0f}%", share * 100); }

std::string Hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Json MeasurementJson(const bench::Measurement& m) {
  Json j;
  j["time_us"] = m.time_us;
  j["algbw_gbs"] = m.algbw_gbs;
  j["busbw_gbs"] = m.busbw_gbs;
  j["wrong"] = m.wrong < 0 ? Json(nullptr) : Json(m.wrong);
  return j;
}

int64_t WrongElements(const bench::Report& r) {
  int64_t wrong = 0;
  for (const bench::Row& row : r.rows) {
    wrong +=
        std::max<int64_t>(row.out_of_place.wrong, 0) + std::max<int64_t>(row.in_place.wrong, 0);
  }
  return wrong;
}

Status ValidateOptions(const DoctorOptions& o) {
  if (o.ranks < 0 || o.ranks == 1) {
    return InvalidArgument(
        fmt::format("ranks: {} is not a valid rank count; pass 0 (automatic) or "
                    "at least 2",
                    o.ranks));
  }
  if (o.bench_min_bytes == 0 || o.bench_max_bytes == 0 || o.bench_min_bytes > o.bench_max_bytes) {
    return InvalidArgument(fmt::format("bench sizes: need 0 < min ({}) <= max ({})",
                                       o.bench_min_bytes, o.bench_max_bytes));
  }
  if (o.bench_step_factor < 2) {
    return InvalidArgument(fmt::format("bench step factor: {} is below 2", o.bench_step_factor));
  }
  if (o.bench_iters < 1) {
    return InvalidArgument(fmt::format("bench iterations: {} is below 1", o.bench_iters));
  }
  if (o.gemm_size < 0 || o.gemm_size > (1 << 16)) {
    return InvalidArgument(
        fmt::format("gemm size: {} must be 0 (automatic) or 1..65536", o.gemm_size));
  }
  if (!(o.gemm_seconds > 0) || !std::isfinite(o.gemm_seconds)) {
    return InvalidArgument(
        fmt::format("gemm seconds: {} is not a positive number", o.gemm_seconds));
  }
  if (!(o.memcpy_seconds > 0) || !std::isfinite(o.memcpy_seconds)) {
    return InvalidArgument(
        fmt::format("memcpy seconds: {} is not a positive number", o.memcpy_seconds));
  }
  return Status::Ok();
}

}  // namespace

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kOk:
      return "ok";
    case Verdict::kWarn:
      return "warn";
    case Verdict::kFail:
      return "fail";
    case Verdict::kSkip:
      return "skip";
  }
  return "unknown";
}

Check CheckCpu(const Result<CpuInfo>& cpu) {
  if (!cpu.ok()) {
    return {"cpu", Verdict::kFail, "unknown",
            cpu.status().message() + " (the benchmark falls back to 2 ranks)"};
  }
  return {
      "cpu", Verdict::kOk,
      fmt::format("{}: {}, {}, {}", cpu->model, Plural(cpu->sockets, "socket", "sockets"),
                  Plural(cpu->cores, "core", "cores"), Plural(cpu->threads, "thread", "threads")),
      ""};
}

Check CheckMemory(const Result<MemoryInfo>& memory) {
  if (!memory.ok()) return {"memory", Verdict::kFail, "unknown", memory.status().message()};
  const double share = memory->total_bytes == 0 ? 0
                                                : static_cast<double>(memory->available_bytes) /
                                                      static_cast<double>(memory->total_bytes);
  Check c{"memory", Verdict::kOk,
          fmt::format("{} total, {} available ({})", FormatSize(memory->total_bytes),
                      FormatSize(memory->available_bytes), Percent(share)),
          ""};
  if (share < kMinAvailableMemoryShare) {
    c.verdict = Verdict::kWarn;
    c.detail = fmt::format(
        "only {} of memory is available (warn below {}): other processes hold the "
        "rest, so large buffers, data loaders and checkpoints may fail",
        Percent(share), Percent(kMinAvailableMemoryShare));
  }
  return c;
}

Check CheckNuma(int nodes) { return {"numa", Verdict::kOk, Plural(nodes, "node", "nodes"), ""}; }

std::optional<int> ExpectedGpuCount(std::string_view vm_size) {
  // Azure's size tables (MicrosoftDocs azure-compute-docs, sizes/gpu-accelerated).
  static const std::map<std::string, int> kSizes = {
      {"standard_nd96isr_h100_v5", 8},       {"standard_nd96isr_h200_v5", 8},
      {"standard_nd96amsr_a100_v4", 8},      {"standard_nd96asr_v4", 8},
      {"standard_nd128isr_ndr_gb200_v6", 4}, {"standard_nc24ads_a100_v4", 1},
      {"standard_nc48ads_a100_v4", 2},       {"standard_nc96ads_a100_v4", 4},
      {"standard_nc40ads_h100_v5", 1},       {"standard_nc80adis_h100_v5", 2},
      {"standard_nc4as_t4_v3", 1},           {"standard_nc8as_t4_v3", 1},
      {"standard_nc16as_t4_v3", 1},          {"standard_nc64as_t4_v3", 4},
  };
  auto it = kSizes.find(Lower(vm_size));
  if (it == kSizes.end()) return std::nullopt;
  return it->second;
}

Check CheckGpus(const GpuInfo& gpus, const std::optional<ImdsInfo>& vm) {
  Check c{"gpus", Verdict::kOk, "none", ""};
  if (gpus.count > 0) {
    // "8 x NVIDIA H100 80GB HBM3", or one group per model on mixed machines.
    std::vector<std::pair<std::string, int>> groups;
    for (const std::string& m : gpus.models) {
      auto it =
          std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == m; });
      if (it == groups.end()) {
        groups.emplace_back(m, 1);
      } else {
        ++it->second;
      }
    }
    c.value.clear();
    for (const auto& [model, n] : groups) {
      c.value += fmt::format("{}{} x {}", c.value.empty() ? "" : ", ", n, model);
    }
  }
  const std::optional<int> expected = vm ? ExpectedGpuCount(vm->vm_size) : std::nullopt;
  if (expected && gpus.count < *expected) {
    c.verdict = Verdict::kFail;
    c.detail = fmt::format(
        "{} comes with {} but {} visible: a GPU fell off the bus or the driver "
        "is not loaded; check dmesg for Xid errors and reboot or redeploy",
        vm->vm_size, Plural(*expected, "GPU", "GPUs"),
        gpus.count == 1 ? "1 is" : fmt::format("{} are", gpus.count));
    if (!gpus.error.empty()) c.detail += "; " + gpus.error;
    return c;
  }
  if (!gpus.error.empty()) {
    c.verdict = Verdict::kWarn;
    c.detail = "nvidia-smi is installed but failed (is the NVIDIA driver loaded?): " + gpus.error;
    return c;
  }
  if (gpus.count == 0) {
    c.verdict = Verdict::kSkip;
    c.detail = "no NVIDIA GPU found; collectives run in host memory";
    return c;
  }
  c.detail = "from " + gpus.source;
  return c;
}

comm::Backend BenchBackend(comm::Backend requested, const GpuInfo& gpus, bool nccl_compiled) {
  if (requested == comm::Backend::kAuto && gpus.count > 0 && nccl_compiled)
    return comm::Backend::kNccl;
  return requested;
}

uint64_t ShmBytesNeeded(int ranks, uint64_t max_bytes) {
  // Each rank's send and receive buffers live in /dev/shm (peers map them for
  // single-copy transfers), plus the backend's control segment.
  return static_cast<uint64_t>(std::max(ranks, 1)) * 2 * max_bytes + (16ull << 20);
}

Check CheckShm(const Result<ShmInfo>& shm, uint64_t needed_bytes) {
  if (!shm.ok()) return {"shm", Verdict::kFail, "missing", shm.status().message()};
  Check c{"shm", Verdict::kOk,
          fmt::format("{} free of {} at {}", FormatSize(shm->free_bytes),
                      FormatSize(shm->size_bytes), shm->path),
          ""};
  if (shm->free_bytes < needed_bytes) {
    c.verdict = Verdict::kWarn;
    c.detail = fmt::format(
        "less than the about {} the doctor's all_reduce sweep needs (it is shortened to fit); "
        "shared-memory collectives and data loaders are limited by this size "
        "(in a container, raise --shm-size; Docker's default is 64 MiB)",
        FormatSize(needed_bytes));
  }
  return c;
}

Check CheckVm(const Result<ImdsInfo>& vm) {
  if (!vm.ok()) {
    return {"vm", Verdict::kSkip, "unknown", "IMDS did not answer: " + vm.status().message()};
  }
  Check c{"vm", Verdict::kOk, vm->vm_size, ""};
  std::vector<std::string> notes;
  if (!vm->location.empty()) notes.push_back(vm->location);
  if (!vm->zone.empty()) notes.push_back("zone " + vm->zone);
  if (vm->spot()) {
    notes.push_back(fmt::format(
        "{} VM{}: Azure may evict it with 30 s notice, so checkpoint often", vm->priority,
        vm->eviction_policy.empty() ? "" : " (" + vm->eviction_policy + ")"));
  }
  for (const std::string& n : notes) c.detail += (c.detail.empty() ? "" : ", ") + n;
  return c;
}

namespace {
constexpr double kMinGemmShareOfPeak = 0.5;
}  // namespace

Check CheckGemm(const Result<bench::GemmResult>& gemm) {
  if (!gemm.ok()) return {"gemm", Verdict::kFail, "did not run", gemm.status().message()};
  Check c{"gemm", Verdict::kOk,
          fmt::format("{:.3g} TFLOPS {} on {}", gemm->tflops, bench::GemmTypeName(gemm->type),
                      gemm->device == bench::GemmDevice::kCuda ? "GPU 0" : "CPU"),
          ""};
  if (!gemm->verified) {
    c.verdict = Verdict::kFail;
    c.detail = fmt::format("wrong results: sampled relative error {:.3g} above {:.3g} ({})",
                           gemm->max_rel_error, gemm->tolerance, gemm->backend);
    return c;
  }
  if (!gemm->mfu) {
    c.detail = fmt::format("{}; peak unknown: {}", gemm->backend, gemm->peak_source);
    return c;
  }
  c.value += fmt::format(", {:.0f}% of peak", *gemm->mfu * 100);
  c.detail = fmt::format("{}x{}x{}, {}; peak {:.3g} TFLOPS: {}", gemm->m, gemm->n, gemm->k,
                         gemm->backend, *gemm->peak_tflops, gemm->peak_source);
  if (*gemm->mfu < kMinGemmShareOfPeak) {
    c.verdict = Verdict::kWarn;
    c.detail = fmt::format(
                   "below {:.0f}% of peak: clocks throttled, another job, or a slow BLAS "
                   "build; ",
                   kMinGemmShareOfPeak * 100) +
               c.detail;
  }
  return c;
}

Check CheckAdvice(const std::optional<ImdsInfo>& vm, const advise::Catalog& catalog,
                  const std::optional<advise::Workload>& workload,
                  const std::optional<bench::GemmResult>& gemm) {
  const std::string_view suffix =
      workload ? "; `gantry advise --workload` ranks every size for it" : "";
  if (!vm || vm->vm_size.empty()) {
    return {
        "advice", Verdict::kSkip, "unknown VM size",
        fmt::format("IMDS gave no VM size, so the catalog cannot describe this node{}", suffix)};
  }
  const advise::VmSize* size = catalog.FindSize(vm->vm_size);
  if (size == nullptr) {
    return {"advice", Verdict::kSkip, vm->vm_size,
            fmt::format("not in the catalog {} (`gantry advise catalog` lists it; --catalog adds "
                        "sizes){}",
                        catalog.origin(), suffix)};
  }
  Check c{"advice", Verdict::kOk, "", ""};
  if (const advise::Accelerator* acc = catalog.AcceleratorOf(*size)) {
    std::optional<double> peak = acc->PeakTflops(advise::NumberFormat::kBf16);
    if (!peak) peak = acc->PeakTflops(advise::NumberFormat::kFp16);
    c.value =
        fmt::format("{}: {:g} x {} ({} GiB{})", size->name, size->gpus, acc->name, acc->memory_gib,
                    peak ? fmt::format(", {:g} TFLOPS 16-bit peak each", *peak) : "");
  } else {
    c.value =
        fmt::format("{}: {} vCPU, {:g} GiB (CPU size)", size->name, size->vcpus, size->ram_gib);
  }
  std::string measured;
  if (const advise::Accelerator* acc = catalog.AcceleratorOf(*size);
      acc && gemm && gemm->device == bench::GemmDevice::kCuda) {
    std::optional<double> peak;
    switch (gemm->type) {
      case bench::GemmType::kBf16:
        peak = acc->PeakTflops(advise::NumberFormat::kBf16);
        break;
      case bench::GemmType::kFp16:
        peak = acc->PeakTflops(advise::NumberFormat::kFp16);
        break;
      case bench::GemmType::kFp32:
        peak = acc->PeakTflops(advise::NumberFormat::kFp32);
        break;
      case bench::GemmType::kFp64:
        break;
    }
    if (peak) {
      measured =
          fmt::format("measured {:.3g} TFLOPS {} GEMM per GPU = {:.0f}% of the catalog peak",
                      gemm->tflops, bench::GemmTypeName(gemm->type), 100 * gemm->tflops / *peak);
    }
  } else if (gemm && !acc) {
    measured = fmt::format("measured {:.3g} TFLOPS {} GEMM (the catalog has no CPU peak)",
                           gemm->tflops, bench::GemmTypeName(gemm->type));
  }
  auto with_measured = [&](std::string detail) {
    return measured.empty() ? detail : measured + "; " + detail;
  };
  if (!workload) {
    c.detail = with_measured("pass --workload to check whether this node suits a workload");
    return c;
  }
  advise::AdviseOptions options;
  options.only_sizes = {size->name};
  Result<advise::Advice> advice = advise::Recommend(*workload, catalog, options);
  const std::string name = workload->name.empty() ? "the workload" : workload->name;
  if (!advice.ok()) {
    c.verdict = Verdict::kWarn;
    c.detail = fmt::format("{}: {}", name, advice.status().message());
    return c;
  }
  if (advice->ranked.empty()) {
    c.verdict = Verdict::kWarn;
    const advise::Candidate& r = advice->rejected.front();
    c.detail = fmt::format("does not suit {}: {}", name,
                           r.reasons_out.empty() ? "ruled out" : r.reasons_out.front());
    return c;
  }
  const advise::Candidate& best = advice->ranked.front();
  std::vector<std::string> parts;
  parts.push_back(best.nodes == 1 ? "on this VM alone"
                                  : fmt::format("on {} VMs like it", best.nodes));
  if (best.training_memory) {
    parts.push_back(fmt::format("ZeRO-{}, {:.1f} of {:.1f} GiB per {}", best.zero_stage,
                                best.memory_needed / (1 << 30), best.memory_usable / (1 << 30),
                                best.accelerator ? "GPU" : "VM"));
  }
  if (best.hours) parts.push_back(fmt::format("about {:.1f} h", *best.hours));
  if (best.perf) {
    parts.push_back(fmt::format("tensor parallel {}, {:.1f} ms per token", best.tensor_parallel,
                                best.perf->per_token_s * 1000));
  }
  c.detail = with_measured(fmt::format("suits {}: {}", name, fmt::join(parts, ", ")));
  return c;
}

Check CheckMemcpy(const Result<bench::MemcpyResult>& memcpy) {
  if (!memcpy.ok()) return {"memcpy", Verdict::kFail, "not measured", memcpy.status().message()};
  return {"memcpy", Verdict::kOk, fmt::format("{:.2f} GB/s", memcpy->bandwidth_gbs),
          fmt::format("best of {} copies of {} on one core", memcpy->iterations,
                      FormatSize(memcpy->bytes))};
}

Check CheckAllReduce(const Result<bench::Report>& report, std::optional<double> memcpy_gbs) {
  if (!report.ok()) return {"all_reduce", Verdict::kFail, "did not run", report.status().message()};
  if (report->rows.empty())
    return {"all_reduce", Verdict::kFail, "no results", "the sweep returned no rows"};
  // The largest size is the one that leaves the caches, so it is the one that
  // compares with memcpy bandwidth; small sizes can beat memcpy from cache.
  const bench::Row& largest = *std::max_element(
      report->rows.begin(), report->rows.end(),
      [](const bench::Row& a, const bench::Row& b) { return a.size_bytes < b.size_bytes; });
  const double busbw = std::max(largest.out_of_place.busbw_gbs, largest.in_place.busbw_gbs);
  Check c{"all_reduce", Verdict::kOk,
          fmt::format("busbw {:.2f} GB/s at {} (peak {:.2f}; {}, {})", busbw,
                      FormatSize(largest.size_bytes), report->peak_busbw_gbs, report->backend,
                      Plural(report->nranks, "rank", "ranks")),
          ""};
  if (report->wrong_results()) {
    c.verdict = Verdict::kFail;
    c.detail = fmt::format(
        "{} wrong elements in {} checks: the {} backend returns incorrect sums; "
        "do not trust collectives on this node",
        WrongElements(*report), report->out_of_bounds, report->backend);
    return c;
  }
  // Host memory bandwidth bounds host collectives only; NCCL runs on the GPUs.
  if (memcpy_gbs && *memcpy_gbs > 0 && report->backend != "nccl") {
    const double share = busbw / *memcpy_gbs;
    if (share < kMinBusbwShareOfMemcpy) {
      c.verdict = Verdict::kWarn;
      c.detail = fmt::format(
          "busbw at {} is {} of memcpy bandwidth (warn below {}): ranks may share "
          "cores with other work, or this backend is slow here",
          FormatSize(largest.size_bytes), Percent(share), Percent(kMinBusbwShareOfMemcpy));
    } else {
      c.detail = fmt::format("busbw at {} is {} of memcpy bandwidth",
                             FormatSize(largest.size_bytes), Percent(share));
    }
  }
  return c;
}

Check CheckHealth(const Result<health::HealthReport>& report, const std::string& vm_size,
                  bool profile_known) {
  Check c{"health", Verdict::kOk, "", ""};
  if (!report.ok()) {
    c.verdict = Verdict::kFail;
    c.value = "did not run";
    c.detail = report.status().message();
    return c;
  }
  int passed = 0, warnings = 0, failures = 0;
  for (const health::CheckResult& r : report->results) {
    switch (r.outcome) {
      case health::Outcome::kPass:
      case health::Outcome::kSkip:
        ++passed;
        break;
      case health::Outcome::kWarn:
        ++warnings;
        break;
      case health::Outcome::kFail:
      case health::Outcome::kError:
        ++failures;
        break;
    }
  }
  c.value = fmt::format("{} passed, {}, {}", passed, Plural(warnings, "warning", "warnings"),
                        Plural(failures, "failure", "failures"));
  if (const health::CheckResult* first = report->FirstProblem()) {
    c.value += fmt::format(": first failure {}: {}", first->name, first->message);
  }
  c.detail = fmt::format("profile {} (gantry health --profile {} for the details)", report->profile,
                         report->profile);
  if (failures > 0) {
    c.verdict = Verdict::kFail;
  } else if (warnings > 0) {
    c.verdict = Verdict::kWarn;
  }
  if (!profile_known && !vm_size.empty()) {
    if (c.verdict == Verdict::kOk) c.verdict = Verdict::kWarn;
    c.detail = fmt::format("VM size {} has no health profile; ran generic", vm_size);
  }
  return c;
}

namespace {

// `gantry health` inside the doctor, without the bandwidth probes the doctor
// measures itself.
Check RunHealthCheck(const DoctorOptions& options, const std::optional<ImdsInfo>& vm,
                     const Clock& clock) {
  const std::string vm_size = vm ? vm->vm_size : "";
  bool known = true;
  Result<health::Profile> profile = health::Profile::Builtin("generic");
  if (options.health_profile.empty()) {
    profile = health::Profile::ForVmSize(vm_size, &known);
  } else {
    std::vector<std::string> names = health::Profile::BuiltinNames();
    profile = std::find(names.begin(), names.end(), options.health_profile) != names.end()
                  ? health::Profile::Builtin(options.health_profile)
                  : health::Profile::LoadFile(options.health_profile);
  }
  if (!profile.ok()) return CheckHealth(profile.status(), vm_size, known);
  auto checks = health::BuildChecks(*profile);
  if (!checks.ok()) return CheckHealth(checks.status(), vm_size, known);
  Result<std::unique_ptr<health::Nvml>> nvml = health::Nvml::Load();
  health::Context ctx;
  ctx.root_dir = options.root_dir;
  ctx.profile = &*profile;
  ctx.nvml = nvml.ok() ? nvml->get() : nullptr;
  ctx.clock = &clock;
  ctx.vm = vm;
  health::RunOptions run;
  run.watchdog = std::chrono::seconds(30);
  for (const auto& c : *checks) {
    const std::string id = c->name();
    if (id == "memory_bandwidth" || id == "collective" || id == "gemm") run.skip.push_back(id);
  }
  return CheckHealth(health::RunHealth(*checks, ctx, run), vm_size, known);
}

// `gantry assess run --node` without a second health run: the doctor's own
// health verdict stands in for the health fact.
Check RunAssessCheck(const DoctorOptions& options, const Result<ImdsInfo>& vm,
                     const Check& health_check) {
  assess::NodeOptions no;
  no.root_dir = options.root_dir;
  no.run_health = false;
  const FakeImds answered = vm.ok() ? FakeImds(*vm) : FakeImds(vm.status());
  Result<assess::Resource> node = assess::GatherNode(no, answered);
  if (!node.ok()) return CheckNodeAssessment(node.status());
  if (health_check.verdict != Verdict::kSkip) {
    const char* verdict = health_check.verdict == Verdict::kOk     ? "pass"
                          : health_check.verdict == Verdict::kWarn ? "warn"
                                                                   : "fail";
    node->body["properties"]["health"]["verdict"] = verdict;
    std::erase(node->unknown, std::string("/properties/health/verdict"));
  }
  std::vector<assess::Resource> rs;
  rs.push_back(std::move(*node));
  return CheckNodeAssessment(assess::Assess(std::move(rs), assess::BuiltinRules(), {}));
}

}  // namespace

Check CheckNodeAssessment(const Result<assess::Assessment>& a) {
  Check c{"assess", Verdict::kOk, "", "gantry assess run --node for the details and fixes"};
  if (!a.ok()) {
    c.verdict = Verdict::kWarn;
    c.value = "not assessed";
    c.detail = a.status().message();
    return c;
  }
  std::vector<std::string> failed;
  int passed = 0, unknown = 0;
  for (const assess::Finding& f : a->findings) {
    if (f.verdict.outcome == assess::Outcome::kPass) ++passed;
    if (f.verdict.outcome == assess::Outcome::kUnknown) ++unknown;
    if (f.verdict.outcome == assess::Outcome::kFail && !f.suppressed) {
      failed.push_back(fmt::format("{} ({})", f.rule->id, assess::SeverityName(f.rule->severity)));
    }
  }
  if (failed.empty()) {
    c.value = fmt::format("{} passed, {} unknown", passed, unknown);
    return c;
  }
  // Warn, never fail: whether the node can take work is the health check's
  // verdict (already a check of its own); pending updates or a missing backup
  // config are findings to fix, not a broken node.
  c.verdict = Verdict::kWarn;
  c.value =
      fmt::format("{}: {}", Plural(static_cast<int64_t>(failed.size()), "failure", "failures"),
                  Join(failed, ", "));
  return c;
}

Check CheckStorageAuth(const std::vector<std::string>& account_keys) {
  if (account_keys.empty()) {
    return {"storage", Verdict::kOk, "no storage account keys",
            "Blob stores use Entra ID (managed identity) unless a key or SAS is configured"};
  }
  return {"storage", Verdict::kWarn,
          fmt::format("local auth: account key in {}", Join(account_keys, ", ")),
          "storage account keys (SharedKey) grant full access to the account and cannot be "
          "scoped or attributed: give the VM a managed identity with the 'Storage Blob Data "
          "Contributor' role (or 'Storage Blob Data Reader' where it only reads), remove the "
          "keys (Gantry then uses Entra ID tokens), and disable shared key access on the account "
          "(az storage account update --allow-shared-key-access false)"};
}

Verdict Overall(const std::vector<Check>& checks) {
  Verdict worst = Verdict::kOk;
  for (const Check& c : checks) {
    if (c.verdict == Verdict::kFail) return Verdict::kFail;
    if (c.verdict == Verdict::kWarn) worst = Verdict::kWarn;
  }
  return worst;
}

Result<DoctorReport> RunDoctor(const DoctorOptions& options, const Imds& imds, const Clock& clock) {
  RETURN_IF_ERROR(ValidateOptions(options));
  DoctorReport report;
  report.timestamp = clock.WallNow();
  report.hostname = Hostname();
  const auto start = clock.Now();

  // IMDS can take its whole deadline off Azure; ask it while the rest runs.
  // The task must not log: the benchmark forks ranks while it may be running,
  // and a child must not inherit a held logger lock.
  std::future<Result<ImdsInfo>> vm_future =
      std::async(std::launch::async, [&imds] { return imds.Fetch(); });

  const std::string& root = options.root_dir;
  Result<CpuInfo> cpu = health::DetectCpu(root);
  Result<MemoryInfo> memory = health::DetectMemory(root);
  report.numa_nodes = health::DetectNumaNodes(root);
  report.gpus = health::DetectGpus(root, options.nvidia_smi);
  Result<ShmInfo> shm = health::DetectShm(root);
  if (cpu.ok()) report.cpu = *cpu;
  if (memory.ok()) report.memory = *memory;
  if (shm.ok()) report.shm = *shm;

  report.bench_backend =
      BenchBackend(options.backend, report.gpus, comm::BackendCompiled(comm::Backend::kNccl));
  const bool on_gpus = report.bench_backend == comm::Backend::kNccl;
  if (options.ranks > 0) {
    report.bench_ranks = options.ranks;
  } else {
    // On GPUs the launcher starts one rank per GPU; on the host, one per core.
    report.bench_ranks = on_gpus ? 0 : std::clamp(cpu.ok() ? cpu->cores : 2, 2, 8);
  }
  // NCCL keeps collective buffers in device memory; /dev/shm then only needs
  // the control segment.
  const uint64_t shm_needed =
      ShmBytesNeeded(report.bench_ranks, on_gpus ? 0 : options.bench_max_bytes);
  uint64_t max_bytes = options.bench_max_bytes;
  if (shm.ok() && !on_gpus) {
    while (max_bytes / options.bench_step_factor >= options.bench_min_bytes &&
           ShmBytesNeeded(report.bench_ranks, max_bytes) > shm->free_bytes) {
      max_bytes /= options.bench_step_factor;
    }
  }

  Check memcpy_check{"memcpy", Verdict::kSkip, "not measured", "memcpy measurement turned off"};
  if (options.memcpy_bytes > 0) {
    uint64_t bytes = options.memcpy_bytes;
    // Two buffers must fit comfortably in what is free right now.
    if (memory.ok()) bytes = std::min(bytes, std::max<uint64_t>(memory->available_bytes / 4, 1024));
    log::info("doctor: measuring memcpy bandwidth with {}", FormatSize(bytes));
    Result<bench::MemcpyResult> memcpy =
        bench::MeasureMemcpyBandwidth(bytes, options.memcpy_seconds);
    if (memcpy.ok()) report.memcpy = *memcpy;
    memcpy_check = CheckMemcpy(memcpy);
  }

  Check bench_check{"all_reduce", Verdict::kSkip, "not run", "benchmark skipped (--skip-bench)"};
  if (options.run_bench) {
    comm::LaunchOptions launch;
    launch.backend = report.bench_backend;
    launch.ranks = report.bench_ranks;
    bench::BenchOptions bench_options;
    bench_options.min_bytes = options.bench_min_bytes;
    bench_options.max_bytes = max_bytes;
    bench_options.step_factor = options.bench_step_factor;
    bench_options.iters = options.bench_iters;
    bench_options.warmup_iters = 1;
    bench_options.check_iters = 1;
    bench_options.program = "gantry doctor";
    log::info("doctor: all_reduce {}..{} x{} on {} ranks ({} backend)",
              FormatSize(options.bench_min_bytes), FormatSize(max_bytes), options.bench_step_factor,
              report.bench_ranks, comm::BackendName(report.bench_backend));
    Result<bench::Report> sweep =
        bench::RunBenchmarkLocal(launch, bench::Collective::kAllReduce, bench_options);
    if (sweep.ok()) report.all_reduce = *sweep;
    bench_check = CheckAllReduce(
        sweep, report.memcpy ? std::optional<double>(report.memcpy->bandwidth_gbs) : std::nullopt);
  }

  // After the sweep: the sweep forks ranks, and the BLAS library starts a
  // thread pool when it loads.
  Check gemm_check{"gemm", Verdict::kSkip, "not measured", "GEMM measurement turned off"};
  if (options.run_gemm) {
    bench::GemmOptions g;
    const bool gpu = report.gpus.count > 0 && bench::CudaGemmAvailable();
    g.device = gpu ? bench::GemmDevice::kCuda : bench::GemmDevice::kCpu;
    g.type = gpu ? bench::GemmType::kBf16 : bench::GemmType::kFp32;
    g.m = g.n = g.k = options.gemm_size;
    g.min_seconds = options.gemm_seconds;
    log::info("doctor: measuring {} GEMM on the {}", bench::GemmTypeName(g.type),
              bench::GemmDeviceName(g.device));
    Result<bench::GemmResult> gemm = bench::MeasureGemm(g);
    if (gemm.ok()) report.gemm = *gemm;
    gemm_check = CheckGemm(gemm);
  }

  Result<ImdsInfo> vm = vm_future.get();
  if (vm.ok()) {
    report.vm = *vm;
  } else {
    log::info("doctor: no VM metadata: {}", vm.status().ToString());
  }

  const advise::Catalog* catalog = options.catalog;
  Result<advise::Catalog> builtin = advise::Catalog();
  if (catalog == nullptr) {
    builtin = advise::Catalog::Default();
    if (builtin.ok()) catalog = &*builtin;
  }
  Check advice_check =
      catalog ? CheckAdvice(report.vm, *catalog, options.workload, report.gemm)
              : Check{"advice", Verdict::kSkip, "no catalog", builtin.status().message()};

  Check health_check{"health", Verdict::kSkip, "not run", "health checks turned off"};
  if (options.run_health) health_check = RunHealthCheck(options, report.vm, clock);

  Check assess_check{"assess", Verdict::kSkip, "not run", "node assessment turned off"};
  if (options.run_assess) assess_check = RunAssessCheck(options, vm, health_check);

  assess::NodeOptions storage_node;
  storage_node.root_dir = root;
  Check storage_check = CheckStorageAuth(assess::FindStorageAccountKeys(storage_node));

  report.checks = {CheckVm(vm),
                   CheckCpu(cpu),
                   CheckMemory(memory),
                   CheckNuma(report.numa_nodes),
                   CheckGpus(report.gpus, report.vm),
                   CheckShm(shm, shm_needed),
                   memcpy_check,
                   gemm_check,
                   bench_check,
                   advice_check,
                   health_check,
                   assess_check,
                   storage_check};
  report.overall = Overall(report.checks);
  report.elapsed_s = std::chrono::duration<double>(clock.Now() - start).count();
  return report;
}

Json DoctorReport::ToJson() const {
  Json j;
  j["report"] = "gantry.doctor";
  j["version"] = kReportVersion;
  j["gantry_version"] = GANTRY_VERSION;
  j["timestamp"] = FormatUtc(timestamp, "%Y-%m-%dT%H:%M:%SZ");
  j["elapsed_s"] = elapsed_s;
  j["overall"] = VerdictName(overall);

  Json checks_json = Json::array();
  for (const Check& c : checks) {
    Json cj;
    cj["name"] = c.name;
    cj["verdict"] = VerdictName(c.verdict);
    cj["value"] = c.value;
    cj["detail"] = c.detail;
    checks_json.push_back(std::move(cj));
  }
  j["checks"] = std::move(checks_json);

  Json machine;
  machine["hostname"] = hostname;
  if (cpu) {
    machine["cpu"] = {{"model", cpu->model},
                      {"sockets", cpu->sockets},
                      {"cores", cpu->cores},
                      {"threads", cpu->threads}};
  } else {
    machine["cpu"] = nullptr;
  }
  if (memory) {
    machine["memory"] = {{"total_bytes", memory->total_bytes},
                         {"available_bytes", memory->available_bytes}};
  } else {
    machine["memory"] = nullptr;
  }
  machine["numa_nodes"] = numa_nodes;
  machine["gpus"] = {{"count", gpus.count},
                     {"models", gpus.models},
                     {"source", gpus.source},
                     {"error", gpus.error}};
  if (shm) {
    machine["shm"] = {
        {"path", shm->path}, {"size_bytes", shm->size_bytes}, {"free_bytes", shm->free_bytes}};
  } else {
    machine["shm"] = nullptr;
  }
  machine["vm"] = vm ? vm->ToJson() : Json(nullptr);
  j["machine"] = std::move(machine);

  if (memcpy) {
    j["memcpy"] = {{"bytes", memcpy->bytes},
                   {"iterations", memcpy->iterations},
                   {"seconds", memcpy->seconds},
                   {"bandwidth_gbs", memcpy->bandwidth_gbs}};
  } else {
    j["memcpy"] = nullptr;
  }
  j["gemm"] = gemm ? bench::GemmResultJson(*gemm) : Json(nullptr);

  if (all_reduce) {
    Json bench;
    bench["collective"] = all_reduce->collective;
    bench["backend"] = all_reduce->backend;
    bench["ranks"] = all_reduce->nranks;
    bench["peak_busbw_gbs"] = all_reduce->peak_busbw_gbs;
    bench["avg_busbw_gbs"] = all_reduce->avg_busbw_gbs;
    bench["out_of_bounds"] = all_reduce->out_of_bounds;
    Json rows = Json::array();
    for (const bench::Row& row : all_reduce->rows) {
      Json r;
      r["size_bytes"] = row.size_bytes;
      r["count"] = row.count;
      r["type"] = comm::DataTypeName(row.type);
      r["op"] = row.op ? Json(comm::ReduceOpName(*row.op)) : Json(nullptr);
      r["out_of_place"] = MeasurementJson(row.out_of_place);
      r["in_place"] = MeasurementJson(row.in_place);
      rows.push_back(std::move(r));
    }
    bench["rows"] = std::move(rows);
    j["bench"] = std::move(bench);
  } else {
    j["bench"] = nullptr;
  }
  return j;
}

std::string DoctorReport::RenderText() const {
  std::string out = fmt::format("gantry doctor {} on {}, {} UTC, {:.1f} s\n\n", GANTRY_VERSION,
                                hostname.empty() ? "this node" : hostname,
                                FormatUtc(timestamp, "%Y-%m-%d %H:%M:%S"), elapsed_s);
  Table checks_table({"check", "verdict", "value", "detail"});
  for (const Check& c : checks) {
    checks_table.AddRow({c.name, std::string(VerdictName(c.verdict)), c.value, c.detail});
  }
  out += checks_table.Render();

  if (all_reduce && !all_reduce->rows.empty()) {
    out += fmt::format("\nall_reduce on {}, {} (float sum, out-of-place | in-place)\n",
                       all_reduce->backend, Plural(all_reduce->nranks, "rank", "ranks"));
    Table rows({"size", "time_us", "busbw_GB/s", "#wrong", "time_us", "busbw_GB/s", "#wrong"});
    for (size_t col = 1; col < 7; ++col) rows.SetAlign(col, Table::Align::kRight);
    rows.SetAlign(0, Table::Align::kRight);
    auto wrong = [](int64_t w) { return w < 0 ? std::string("N/A") : std::to_string(w); };
    for (const bench::Row& row : all_reduce->rows) {
      rows.AddRow({FormatSize(row.size_bytes), fmt::format("{:.1f}", row.out_of_place.time_us),
                   fmt::format("{:.2f}", row.out_of_place.busbw_gbs), wrong(row.out_of_place.wrong),
                   fmt::format("{:.1f}", row.in_place.time_us),
                   fmt::format("{:.2f}", row.in_place.busbw_gbs), wrong(row.in_place.wrong)});
    }
    out += rows.Render();
  }

  int warns = 0, fails = 0;
  for (const Check& c : checks) {
    warns += c.verdict == Verdict::kWarn;
    fails += c.verdict == Verdict::kFail;
  }
  const std::string verdict = AsciiUpper(VerdictName(overall));
  out += fmt::format("\nverdict: {} ({}, {})\n", verdict, Plural(warns, "warning", "warnings"),
                     Plural(fails, "failure", "failures"));
  return out;
}

}  // namespace gantry::doctor
