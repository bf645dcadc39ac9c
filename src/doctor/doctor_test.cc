#include "gantry/doctor/doctor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include "testing/fake_root.h"

namespace gantry::doctor {
namespace {

using ::gantry::testing::FakeRoot;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

ImdsInfo H100Vm() {
  return *ParseImdsDocument(
      R"({"compute": {"vmSize": "Standard_ND96isr_H100_v5", "location": "eastus",
      "zone": "2", "priority": "Spot", "evictionPolicy": "Deallocate"}})",
      "test");
}

// Two sizes: a cache-resident one at 50 GB/s (the peak) and 64 MiB, where
// in-place reaches `large_busbw` and out-of-place half of it.
bench::Report ShmReport(double large_busbw, int64_t out_of_bounds = 0) {
  bench::Report r;
  r.collective = "all_reduce";
  r.backend = "shm";
  r.nranks = 2;
  bench::Row small;
  small.size_bytes = 256 << 10;
  small.count = small.size_bytes / 4;
  small.op = comm::ReduceOp::kSum;
  small.out_of_place = {5, 50, 50, 0};
  small.in_place = {5, 50, 50, 0};
  bench::Row large = small;
  large.size_bytes = 64 << 20;
  large.count = large.size_bytes / 4;
  large.out_of_place = {200, large_busbw / 2, large_busbw / 2, out_of_bounds > 0 ? 7 : 0};
  large.in_place = {100, large_busbw, large_busbw, 0};
  r.rows = {small, large};
  r.out_of_bounds = out_of_bounds;
  r.avg_busbw_gbs = 30;
  r.peak_busbw_gbs = 50;
  return r;
}

// A small but complete machine: 1 socket, 2 cores, 2 threads, 8 GiB, 1 NUMA node.
void WriteMachine(const FakeRoot& root, uint64_t available_kib = 6ull << 20) {
  root.Write("/proc/cpuinfo",
             "processor\t: 0\nmodel name\t: AMD EPYC 7V12 64-Core Processor\nphysical id\t: 0\n"
             "core id\t\t: 0\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7V12 64-Core Processor\n"
             "physical id\t: 0\ncore id\t\t: 1\n");
  root.Write("/proc/meminfo", "MemTotal: " + std::to_string(8ull << 20) +
                                  " kB\nMemAvailable: " + std::to_string(available_kib) + " kB\n");
  root.Write("/sys/devices/system/node/online", "0\n");
  root.Mkdir("/dev/shm");
}

DoctorOptions QuickOptions(const FakeRoot& root) {
  DoctorOptions o;
  o.root_dir = root.path();
  o.nvidia_smi = "";
  o.run_bench = false;
  o.memcpy_bytes = 64 << 10;
  o.memcpy_seconds = 0.005;
  o.run_gemm = false;  // its verdict depends on the machine's load; see GemmRunsInTheDoctor
  o.gemm_size = 64;
  o.gemm_seconds = 0.005;
  o.run_health = false;  // depends on the machine; see HealthRunsOnTheFakeRoot
  return o;
}

const Check& Find(const DoctorReport& r, std::string_view name) {
  for (const Check& c : r.checks) {
    if (c.name == name) return c;
  }
  throw std::runtime_error("no check " + std::string(name));
}

TEST(VerdictTest, NamesAndOverall) {
  EXPECT_EQ(VerdictName(Verdict::kOk), "ok");
  EXPECT_EQ(VerdictName(Verdict::kWarn), "warn");
  EXPECT_EQ(VerdictName(Verdict::kFail), "fail");
  EXPECT_EQ(VerdictName(Verdict::kSkip), "skip");
  auto with = [](const std::vector<Verdict>& vs) {
    std::vector<Check> checks;
    for (Verdict v : vs) checks.push_back({"x", v, "", ""});
    return Overall(checks);
  };
  EXPECT_EQ(with({}), Verdict::kOk);
  EXPECT_EQ(with({Verdict::kSkip, Verdict::kSkip}), Verdict::kOk);
  EXPECT_EQ(with({Verdict::kOk, Verdict::kWarn, Verdict::kSkip}), Verdict::kWarn);
  EXPECT_EQ(with({Verdict::kFail, Verdict::kWarn, Verdict::kOk}), Verdict::kFail);
  EXPECT_EQ(with({Verdict::kWarn, Verdict::kFail}), Verdict::kFail);
}

TEST(CheckMemoryTest, WarnsBelowTenPercentAvailable) {
  EXPECT_EQ(CheckMemory(MemoryInfo{1000, 100, std::nullopt}).verdict, Verdict::kOk);
  Check low = CheckMemory(MemoryInfo{1000, 99, std::nullopt});
  EXPECT_EQ(low.verdict, Verdict::kWarn);
  EXPECT_THAT(low.detail, HasSubstr("10%"));
  Check failed = CheckMemory(Result<MemoryInfo>(NotFound("/proc/meminfo: missing")));
  EXPECT_EQ(failed.verdict, Verdict::kFail);
  EXPECT_THAT(failed.detail, HasSubstr("/proc/meminfo"));
}

TEST(CheckShmTest, WarnsWhenTheSweepDoesNotFit) {
  ShmInfo shm{"/dev/shm", 64ull << 20, 64ull << 20};
  EXPECT_EQ(CheckShm(shm, 32ull << 20).verdict, Verdict::kOk);
  Check small = CheckShm(shm, ShmBytesNeeded(2, 64ull << 20));
  EXPECT_EQ(small.verdict, Verdict::kWarn);
  EXPECT_THAT(small.detail, HasSubstr("--shm-size"));
  EXPECT_EQ(CheckShm(Result<ShmInfo>(NotFound("/dev/shm does not exist")), 1).verdict,
            Verdict::kFail);
  EXPECT_GT(ShmBytesNeeded(8, 64ull << 20), ShmBytesNeeded(2, 64ull << 20));
}

TEST(CheckGpusTest, ComparesWithTheVmSize) {
  GpuInfo eight{8, std::vector<std::string>(8, "NVIDIA H100 80GB HBM3"), "/proc/driver/nvidia/gpus",
                ""};
  Check ok = CheckGpus(eight, H100Vm());
  EXPECT_EQ(ok.verdict, Verdict::kOk);
  EXPECT_EQ(ok.value, "8 x NVIDIA H100 80GB HBM3");

  GpuInfo seven = eight;
  seven.count = 7;
  seven.models.pop_back();
  Check missing = CheckGpus(seven, H100Vm());
  EXPECT_EQ(missing.verdict, Verdict::kFail);
  EXPECT_THAT(missing.detail,
              HasSubstr("Standard_ND96isr_H100_v5 comes with 8 GPUs but 7 are visible"));

  GpuInfo none{0, {}, "none", ""};
  EXPECT_EQ(CheckGpus(none, H100Vm()).verdict, Verdict::kFail);
  EXPECT_EQ(CheckGpus(none, std::nullopt).verdict, Verdict::kSkip);
  auto cpu_vm = ParseImdsDocument(R"({"compute": {"vmSize": "Standard_D8s_v5"}})", "test");
  EXPECT_EQ(CheckGpus(none, *cpu_vm).verdict, Verdict::kSkip);

  GpuInfo broken{0, {}, "none", "'nvidia-smi -L' exited with status 9: NVIDIA-SMI has failed"};
  Check warn = CheckGpus(broken, std::nullopt);
  EXPECT_EQ(warn.verdict, Verdict::kWarn);
  EXPECT_THAT(warn.detail, HasSubstr("status 9"));

  GpuInfo mixed{3, {"A", "B", "A"}, "nvidia-smi -L", ""};
  EXPECT_EQ(CheckGpus(mixed, std::nullopt).value, "2 x A, 1 x B");
}

TEST(CheckGpusTest, KnownSizes) {
  EXPECT_EQ(ExpectedGpuCount("Standard_ND96isr_H100_v5"), 8);
  EXPECT_EQ(ExpectedGpuCount("standard_nd96isr_h200_v5"), 8);
  EXPECT_EQ(ExpectedGpuCount("Standard_NC24ads_A100_v4"), 1);
  EXPECT_EQ(ExpectedGpuCount("Standard_NC64as_T4_v3"), 4);
  EXPECT_EQ(ExpectedGpuCount("Standard_D8s_v5"), std::nullopt);
  EXPECT_EQ(ExpectedGpuCount(""), std::nullopt);
}

TEST(CheckVmTest, SizeOrUnknown) {
  Check spot = CheckVm(H100Vm());
  EXPECT_EQ(spot.verdict, Verdict::kOk);
  EXPECT_EQ(spot.value, "Standard_ND96isr_H100_v5");
  EXPECT_THAT(spot.detail, HasSubstr("eastus, zone 2, Spot VM (Deallocate)"));
  Check off_azure = CheckVm(Result<ImdsInfo>(DeadlineExceeded("no answer within 2000 ms")));
  EXPECT_EQ(off_azure.verdict, Verdict::kSkip);
  EXPECT_EQ(off_azure.value, "unknown");
  EXPECT_THAT(off_azure.detail, HasSubstr("no answer within 2000 ms"));
}

TEST(CheckAllReduceTest, WrongResultsFail) {
  Check c = CheckAllReduce(ShmReport(5.0, /*out_of_bounds=*/1), 10.0);
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_THAT(c.detail, HasSubstr("7 wrong elements"));
}

TEST(CheckAllReduceTest, ComparesLargeSizeBusbwWithMemcpy) {
  // The 50 GB/s cache-resident peak must not hide a slow large size.
  Check slow = CheckAllReduce(ShmReport(2.4), 10.0);
  EXPECT_EQ(slow.verdict, Verdict::kWarn);
  EXPECT_THAT(slow.detail, HasSubstr("busbw at 64 MiB is 24% of memcpy"));
  EXPECT_EQ(slow.value, "busbw 2.40 GB/s at 64 MiB (peak 50.00; shm, 2 ranks)");
  Check fine = CheckAllReduce(ShmReport(2.5), 10.0);
  EXPECT_EQ(fine.verdict, Verdict::kOk);
  EXPECT_THAT(fine.detail, HasSubstr("25% of memcpy"));
  EXPECT_EQ(CheckAllReduce(ShmReport(0.1), std::nullopt).verdict, Verdict::kOk);
  bench::Report nccl = ShmReport(0.1);
  nccl.backend = "nccl";
  EXPECT_EQ(CheckAllReduce(nccl, 10.0).verdict, Verdict::kOk);
  Check failed =
      CheckAllReduce(Result<bench::Report>(ResourceExhausted("no room in /dev/shm")), 10.0);
  EXPECT_EQ(failed.verdict, Verdict::kFail);
  EXPECT_THAT(failed.detail, HasSubstr("no room"));
  bench::Report empty = ShmReport(5.0);
  empty.rows.clear();
  EXPECT_EQ(CheckAllReduce(empty, 10.0).verdict, Verdict::kFail);
}

TEST(BenchBackendTest, NcclWhenGpusAndCompiled) {
  GpuInfo gpus{2, {"A", "A"}, "/proc/driver/nvidia/gpus", ""};
  GpuInfo none{0, {}, "none", ""};
  EXPECT_EQ(BenchBackend(comm::Backend::kAuto, gpus, true), comm::Backend::kNccl);
  EXPECT_EQ(BenchBackend(comm::Backend::kAuto, gpus, false), comm::Backend::kAuto);
  EXPECT_EQ(BenchBackend(comm::Backend::kAuto, none, true), comm::Backend::kAuto);
  EXPECT_EQ(BenchBackend(comm::Backend::kShm, gpus, true), comm::Backend::kShm);
}

TEST(CheckCpuTest, ValueOrFail) {
  Check ok = CheckCpu(CpuInfo{"AMD EPYC", 1, 2, 2});
  EXPECT_EQ(ok.value, "AMD EPYC: 1 socket, 2 cores, 2 threads");
  EXPECT_EQ(CheckCpu(Result<CpuInfo>(NotFound("/proc/cpuinfo"))).verdict, Verdict::kFail);
  EXPECT_EQ(CheckNuma(2).value, "2 nodes");
}

TEST(RunDoctorTest, FakeMachineOnAnH100VmWithoutGpusFails) {
  ::unsetenv("AZURE_STORAGE_KEY");  // the storage check reads the environment too
  ::unsetenv("AZURE_STORAGE_CONNECTION_STRING");
  FakeRoot root;
  WriteMachine(root);
  FakeImds imds(H100Vm());
  FakeClock clock;
  auto report = RunDoctor(QuickOptions(root), imds, clock);
  ASSERT_TRUE(report.ok()) << report.status().ToString();

  std::vector<std::string> names;
  for (const Check& c : report->checks) names.push_back(c.name);
  EXPECT_THAT(names, ElementsAre("vm", "cpu", "memory", "numa", "gpus", "shm", "memcpy", "gemm",
                                 "all_reduce", "advice", "health", "assess", "storage"));
  EXPECT_EQ(Find(*report, "storage").verdict, Verdict::kOk);
  EXPECT_EQ(Find(*report, "health").verdict, Verdict::kSkip);
  // The fake root has no agent, ckpt or backup config: the node assessment says so.
  EXPECT_NE(Find(*report, "assess").verdict, Verdict::kSkip);
  EXPECT_THAT(Find(*report, "assess").value, ::testing::HasSubstr("GANTRY-NODE-"));
  EXPECT_EQ(Find(*report, "vm").value, "Standard_ND96isr_H100_v5");
  EXPECT_EQ(Find(*report, "cpu").value,
            "AMD EPYC 7V12 64-Core Processor: 1 socket, 2 cores, 2 threads");
  EXPECT_EQ(Find(*report, "memory").verdict, Verdict::kOk);
  EXPECT_EQ(Find(*report, "numa").value, "1 node");
  EXPECT_EQ(Find(*report, "gpus").verdict, Verdict::kFail);
  EXPECT_EQ(Find(*report, "memcpy").verdict, Verdict::kOk);
  EXPECT_EQ(Find(*report, "all_reduce").verdict, Verdict::kSkip);
  EXPECT_EQ(report->overall, Verdict::kFail);
  EXPECT_EQ(report->bench_ranks, 2);
  ASSERT_TRUE(report->memcpy.has_value());
  EXPECT_EQ(report->memcpy->bytes, 64u << 10);
  EXPECT_FALSE(report->all_reduce.has_value());

  std::string text = report->RenderText();
  EXPECT_THAT(text, HasSubstr("2027-01-15 08:00:00 UTC"));
  EXPECT_THAT(text, HasSubstr("check       verdict"));
  // The assess check warns: the fake root has no agent, ckpt or backup config.
  EXPECT_THAT(text, HasSubstr("verdict: FAIL (1 warning, 1 failure)"));
}

TEST(CheckStorageAuthTest, AccountKeysAreLocalAuthWarnings) {
  Check ok = CheckStorageAuth({});
  EXPECT_EQ(ok.name, "storage");
  EXPECT_EQ(ok.verdict, Verdict::kOk);
  Check warn = CheckStorageAuth({"$AZURE_STORAGE_KEY", "/etc/gantry/backup.yaml:2 repo"});
  EXPECT_EQ(warn.verdict, Verdict::kWarn);
  EXPECT_EQ(warn.value,
            "local auth: account key in $AZURE_STORAGE_KEY, /etc/gantry/backup.yaml:2 repo");
  EXPECT_THAT(warn.detail, HasSubstr("managed identity"));
  EXPECT_THAT(warn.detail, HasSubstr("Storage Blob Data Contributor"));
  EXPECT_THAT(warn.detail, HasSubstr("disable shared key access"));
}

TEST(RunDoctorTest, AccountKeyInTheEnvironmentWarnsNamingTheVariable) {
  ::unsetenv("AZURE_STORAGE_KEY");
  ::setenv("AZURE_STORAGE_CONNECTION_STRING",
           "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=c2VjcmV0", 1);
  FakeRoot root;
  WriteMachine(root);
  root.Write("/etc/environment", "AZURE_STORAGE_KEY=c2VjcmV0\n");
  FakeImds imds(H100Vm());
  FakeClock clock;
  DoctorOptions o = QuickOptions(root);
  o.memcpy_bytes = 0;
  o.run_assess = false;
  auto report = RunDoctor(o, imds, clock);
  ::unsetenv("AZURE_STORAGE_CONNECTION_STRING");
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const Check& c = Find(*report, "storage");
  EXPECT_EQ(c.verdict, Verdict::kWarn);
  EXPECT_EQ(c.value,
            "local auth: account key in $AZURE_STORAGE_CONNECTION_STRING, /etc/environment: "
            "AZURE_STORAGE_KEY");
  EXPECT_THAT(report->RenderText(), HasSubstr("local auth: account key in"));
  EXPECT_EQ(report->RenderText().find("c2VjcmV0"), std::string::npos) << "the key leaked";
  EXPECT_EQ(report->ToJson().dump().find("c2VjcmV0"), std::string::npos) << "the key leaked";
}

TEST(CheckGemmTest, VerdictsFromTheMeasurement) {
  bench::GemmResult r;
  r.type = bench::GemmType::kBf16;
  r.device = bench::GemmDevice::kCuda;
  r.m = r.n = r.k = 8192;
  r.backend = "cuBLAS";
  r.tflops = 700;
  r.peak_tflops = 989.4;
  r.mfu = 700 / 989.4;
  r.verified = true;
  Check ok = CheckGemm(r);
  EXPECT_EQ(ok.verdict, Verdict::kOk);
  EXPECT_EQ(ok.value, "700 TFLOPS bf16 on GPU 0, 71% of peak");
  r.tflops = 300;
  r.mfu = 300 / 989.4;
  Check slow = CheckGemm(r);
  EXPECT_EQ(slow.verdict, Verdict::kWarn);
  EXPECT_THAT(slow.detail, HasSubstr("below 50% of peak"));
  r.verified = false;
  r.max_rel_error = 0.5;
  EXPECT_EQ(CheckGemm(r).verdict, Verdict::kFail);
  EXPECT_EQ(CheckGemm(Result<bench::GemmResult>(Internal("x"))).verdict, Verdict::kFail);
  r.verified = true;
  r.peak_tflops.reset();
  r.mfu.reset();
  r.peak_source = "unknown GPU";
  EXPECT_EQ(CheckGemm(r).verdict, Verdict::kOk);
}

TEST(CheckAdviceTest, ComparesAGpuGemmWithTheCatalogPeak) {
  Result<advise::Catalog> cat = advise::Catalog::Default();
  ASSERT_TRUE(cat.ok());
  bench::GemmResult r;
  r.type = bench::GemmType::kBf16;
  r.device = bench::GemmDevice::kCuda;
  r.tflops = 742;
  r.verified = true;
  Check c = CheckAdvice(H100Vm(), *cat, std::nullopt, r);
  EXPECT_THAT(c.detail,
              HasSubstr("measured 742 TFLOPS bf16 GEMM per GPU = 75% of the catalog peak"));
}

TEST(CheckAdviceTest, DescribesTheNodeAndJudgesTheWorkload) {
  Result<advise::Catalog> cat = advise::Catalog::Default();
  ASSERT_TRUE(cat.ok()) << cat.status().ToString();
  ImdsInfo vm = H100Vm();

  Check plain = CheckAdvice(vm, *cat, std::nullopt);
  EXPECT_EQ(plain.verdict, Verdict::kOk);
  EXPECT_EQ(plain.value,
            "Standard_ND96isr_H100_v5: 8 x H100-SXM-80GB (80 GiB, 989.4 TFLOPS 16-bit peak each)");
  EXPECT_THAT(plain.detail, HasSubstr("--workload"));

  advise::Workload small;  // 1.5B params, 10B tokens: fits one VM at ZeRO-0
  small.name = "gpt2-xl";
  small.model.params = 1.5e9;
  small.tokens = 1e10;
  Check fits = CheckAdvice(vm, *cat, small);
  EXPECT_EQ(fits.verdict, Verdict::kOk);
  EXPECT_THAT(fits.detail, HasSubstr("suits gpt2-xl: on this VM alone, ZeRO-0"));
  EXPECT_THAT(fits.detail, HasSubstr("h"));

  advise::Workload huge = small;  // 2T params: more than 16 VMs can hold
  huge.name = "huge";
  huge.model.params = 2e12;
  Check no = CheckAdvice(vm, *cat, huge);
  EXPECT_EQ(no.verdict, Verdict::kWarn);
  EXPECT_THAT(no.detail, HasSubstr("does not suit huge: does not fit"));

  advise::Workload bad = small;
  bad.tokens = 0;
  EXPECT_EQ(CheckAdvice(vm, *cat, bad).verdict, Verdict::kWarn);

  EXPECT_EQ(CheckAdvice(std::nullopt, *cat, small).verdict, Verdict::kSkip);
  ImdsInfo other = vm;
  other.vm_size = "Standard_B2s";
  Check unknown = CheckAdvice(other, *cat, std::nullopt);
  EXPECT_EQ(unknown.verdict, Verdict::kSkip);
  EXPECT_THAT(unknown.detail, HasSubstr("not in the catalog"));
  other.vm_size = "Standard_E96s_v5";
  EXPECT_EQ(CheckAdvice(other, *cat, std::nullopt).value,
            "Standard_E96s_v5: 96 vCPU, 672 GiB (CPU size)");
}

TEST(RunDoctorTest, GemmRunsInTheDoctor) {
  FakeRoot root;
  WriteMachine(root);
  FakeImds imds(Unavailable("off Azure"));
  FakeClock clock;
  DoctorOptions o = QuickOptions(root);
  o.run_gemm = true;
  auto report = RunDoctor(o, imds, clock);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_TRUE(report->gemm.has_value());
  EXPECT_TRUE(report->gemm->verified);
  EXPECT_EQ(report->gemm->m, 64);
  EXPECT_GT(report->gemm->tflops, 0);
  // ok or warn by the machine's load; never fail for a correct result.
  EXPECT_NE(Find(*report, "gemm").verdict, Verdict::kFail) << Find(*report, "gemm").detail;
  EXPECT_EQ(report->ToJson()["gemm"]["m"], 64);
  EXPECT_EQ(Find(*RunDoctor(QuickOptions(root), imds, clock), "gemm").verdict, Verdict::kSkip);
}

TEST(RunDoctorTest, OffAzureLowMemoryWarns) {
  FakeRoot root;
  WriteMachine(root, /*available_kib=*/512 << 10);  // 0.5 of 8 GiB: 6%
  FakeImds imds(Unavailable("connecting to 169.254.169.254: Network is unreachable"));
  FakeClock clock;
  auto report = RunDoctor(QuickOptions(root), imds, clock);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(Find(*report, "vm").verdict, Verdict::kSkip);
  EXPECT_EQ(Find(*report, "vm").value, "unknown");
  EXPECT_EQ(Find(*report, "gpus").verdict, Verdict::kSkip);
  EXPECT_EQ(Find(*report, "memory").verdict, Verdict::kWarn);
  EXPECT_EQ(report->overall, Verdict::kWarn);
  EXPECT_FALSE(report->vm.has_value());
}

TEST(RunDoctorTest, BrokenMachineIsVerdictsNotErrors) {
  FakeRoot root;  // empty: no /proc, /sys or /dev/shm
  FakeImds imds(Unavailable("off Azure"));
  FakeClock clock;
  DoctorOptions options = QuickOptions(root);
  options.memcpy_bytes = 0;
  auto report = RunDoctor(options, imds, clock);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(Find(*report, "cpu").verdict, Verdict::kFail);
  EXPECT_EQ(Find(*report, "memory").verdict, Verdict::kFail);
  EXPECT_EQ(Find(*report, "shm").verdict, Verdict::kFail);
  EXPECT_EQ(Find(*report, "memcpy").verdict, Verdict::kSkip);
  EXPECT_EQ(report->numa_nodes, 1);
  EXPECT_EQ(report->bench_ranks, 2);
  EXPECT_EQ(report->overall, Verdict::kFail);
  Json j = report->ToJson();
  EXPECT_TRUE(j["machine"]["cpu"].is_null());
  EXPECT_TRUE(j["machine"]["memory"].is_null());
  EXPECT_TRUE(j["machine"]["shm"].is_null());
  EXPECT_TRUE(j["memcpy"].is_null());
}

TEST(RunDoctorTest, RejectsBadOptions) {
  FakeRoot root;
  FakeImds imds(Unavailable("off Azure"));
  FakeClock clock;
  auto bad = [&](auto mutate) {
    DoctorOptions o = QuickOptions(root);
    mutate(o);
    return RunDoctor(o, imds, clock).status().code();
  };
  EXPECT_EQ(bad([](DoctorOptions& o) { o.ranks = 1; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](DoctorOptions& o) { o.ranks = -2; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](DoctorOptions& o) { o.bench_min_bytes = 0; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](DoctorOptions& o) { o.bench_min_bytes = 1 << 20, o.bench_max_bytes = 1024; }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](DoctorOptions& o) { o.bench_step_factor = 1; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](DoctorOptions& o) { o.bench_iters = 0; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](DoctorOptions& o) { o.memcpy_seconds = 0; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](DoctorOptions& o) { o.gemm_size = -1; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](DoctorOptions& o) { o.gemm_seconds = 0; }), StatusCode::kInvalidArgument);
}

TEST(DoctorReportTest, JsonShape) {
  FakeRoot root;
  WriteMachine(root);
  FakeImds imds(H100Vm());
  FakeClock clock;
  auto report = RunDoctor(QuickOptions(root), imds, clock);
  ASSERT_TRUE(report.ok());
  report->all_reduce = ShmReport(3.0);  // as if the sweep had run
  Json j = report->ToJson();

  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_THAT(keys, ElementsAre("report", "version", "gantry_version", "timestamp", "elapsed_s",
                                "overall", "checks", "machine", "memcpy", "gemm", "bench"));
  EXPECT_EQ(j["report"], "gantry.doctor");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["timestamp"], "2027-01-15T08:00:00Z");
  EXPECT_EQ(j["overall"], "fail");
  ASSERT_EQ(j["checks"].size(), 13u);
  EXPECT_EQ(j["checks"][0]["name"], "vm");
  EXPECT_EQ(j["checks"][0]["verdict"], "ok");
  for (const auto& c : j["checks"]) {
    for (const char* key : {"name", "verdict", "value", "detail"})
      EXPECT_TRUE(c.contains(key)) << key;
  }

  const Json& m = j["machine"];
  EXPECT_EQ(m["cpu"]["cores"], 2);
  EXPECT_EQ(m["cpu"]["sockets"], 1);
  EXPECT_EQ(m["memory"]["total_bytes"], 8ull << 30);
  EXPECT_EQ(m["numa_nodes"], 1);
  EXPECT_EQ(m["gpus"]["count"], 0);
  EXPECT_EQ(m["gpus"]["source"], "none");
  EXPECT_TRUE(m["shm"]["free_bytes"].is_number_unsigned());
  EXPECT_EQ(m["vm"]["vm_size"], "Standard_ND96isr_H100_v5");
  EXPECT_EQ(j["memcpy"]["bytes"], 64 << 10);

  const Json& b = j["bench"];
  EXPECT_EQ(b["collective"], "all_reduce");
  EXPECT_EQ(b["backend"], "shm");
  EXPECT_EQ(b["ranks"], 2);
  EXPECT_EQ(b["peak_busbw_gbs"], 50.0);
  ASSERT_EQ(b["rows"].size(), 2u);
  EXPECT_EQ(b["rows"][1]["size_bytes"], 64 << 20);
  EXPECT_EQ(b["rows"][1]["count"], 16 << 20);
  EXPECT_EQ(b["rows"][1]["type"], "float");
  EXPECT_EQ(b["rows"][1]["op"], "sum");
  EXPECT_EQ(b["rows"][1]["out_of_place"]["busbw_gbs"], 1.5);
  EXPECT_EQ(b["rows"][1]["in_place"]["busbw_gbs"], 3.0);
  EXPECT_EQ(b["rows"][1]["in_place"]["wrong"], 0);
  report->all_reduce->rows[1].in_place.wrong = -1;
  EXPECT_TRUE(report->ToJson()["bench"]["rows"][1]["in_place"]["wrong"].is_null());

  std::string text = report->RenderText();
  EXPECT_THAT(text, HasSubstr("all_reduce on shm, 2 ranks"));
  EXPECT_THAT(text, HasSubstr("64 MiB"));
  EXPECT_THAT(text, HasSubstr("N/A"));
}

TEST(CheckHealthTest, SummarisesAHealthReport) {
  health::HealthReport r;
  r.profile = "nd96isr_h100_v5";
  auto result = [](std::string name, health::Outcome o, std::string message) {
    health::CheckResult c;
    c.name = std::move(name);
    c.outcome = o;
    c.message = std::move(message);
    return c;
  };
  r.results = {result("cpu", health::Outcome::kPass, "ok"),
               result("swap", health::Outcome::kSkip, "skipped (--skip)"),
               result("memory", health::Outcome::kWarn, "low"),
               result("gpu_count", health::Outcome::kFail, "7 GPUs, expected 8"),
               result("nvme", health::Outcome::kError, "timed out")};
  Check c = CheckHealth(r, "Standard_ND96isr_H100_v5", true);
  EXPECT_EQ(c.name, "health");
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_EQ(c.value,
            "2 passed, 1 warning, 2 failures: first failure gpu_count: 7 GPUs, expected 8");

  r.results.resize(3);
  c = CheckHealth(r, "Standard_ND96isr_H100_v5", true);
  EXPECT_EQ(c.verdict, Verdict::kWarn);
  EXPECT_EQ(c.value, "2 passed, 1 warning, 0 failures");

  r.results.resize(2);
  EXPECT_EQ(CheckHealth(r, "", false).verdict, Verdict::kOk);  // off Azure: generic, no warning
  Check unknown = CheckHealth(r, "Standard_D8s_v5", false);
  EXPECT_EQ(unknown.verdict, Verdict::kWarn);
  EXPECT_EQ(unknown.detail, "VM size Standard_D8s_v5 has no health profile; ran generic");

  EXPECT_EQ(CheckHealth(Result<health::HealthReport>(InvalidArgument("bad")), "", true).verdict,
            Verdict::kFail);
}

TEST(RunDoctorTest, HealthRunsOnTheFakeRoot) {
  // The H100 profile against a 2-core fake machine: the cpu check (first in
  // the profile) fails, and the doctor says so.
  FakeRoot root;
  WriteMachine(root);
  FakeImds imds(H100Vm());
  FakeClock clock;
  DoctorOptions o = QuickOptions(root);
  o.run_health = true;
  auto report = RunDoctor(o, imds, clock);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const Check& h = Find(*report, "health");
  EXPECT_EQ(h.verdict, Verdict::kFail) << h.value;
  EXPECT_THAT(h.value, ::testing::HasSubstr(": first failure cpu: ")) << h.value;
  EXPECT_EQ(h.detail,
            "profile nd96isr_h100_v5 (gantry health --profile nd96isr_h100_v5 for the details)");
}

TEST(CheckNodeAssessmentTest, WarnsOnUnsuppressedFailuresOfAnySeverity) {
  assess::Rule high, low;
  high.id = "T-NODE-1";
  high.severity = assess::Severity::kHigh;
  low.id = "T-NODE-2";
  low.severity = assess::Severity::kLow;
  assess::Assessment a;
  a.findings.push_back({&low, 0, assess::Verdict::Fail("x"), std::nullopt});
  Check warn = CheckNodeAssessment(a);
  EXPECT_EQ(warn.verdict, Verdict::kWarn);
  EXPECT_EQ(warn.value, "1 failure: T-NODE-2 (low)");
  a.findings.push_back({&high, 0, assess::Verdict::Fail("y"), std::nullopt});
  EXPECT_EQ(CheckNodeAssessment(a).verdict, Verdict::kWarn);
  EXPECT_EQ(CheckNodeAssessment(a).value, "2 failures: T-NODE-2 (low), T-NODE-1 (high)");
  a.findings[0].suppressed = assess::Suppression{"T-NODE-2", "*", "ok", "2099-01-01", "s:1"};
  a.findings[1].suppressed = assess::Suppression{"T-NODE-1", "*", "ok", "2099-01-01", "s:1"};
  EXPECT_EQ(CheckNodeAssessment(a).verdict, Verdict::kOk);
  assess::Assessment clean;
  clean.findings.push_back({&high, 0, assess::Verdict::Pass(), std::nullopt});
  EXPECT_EQ(CheckNodeAssessment(clean).verdict, Verdict::kOk);
  EXPECT_EQ(CheckNodeAssessment(clean).value, "1 passed, 0 unknown");
  EXPECT_EQ(CheckNodeAssessment(Result<assess::Assessment>(InvalidArgument("bad"))).verdict,
            Verdict::kWarn);
}

}  // namespace
}  // namespace gantry::doctor
