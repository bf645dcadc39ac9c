// The measuring host checks (memory, disk and collective bandwidth, GEMM) on
// this machine with tiny sizes: a pass with no minimum and a fail with an
// impossible one. No timing assertions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "gantry/core/config.h"
#include "gantry/health/check.h"
#include "gantry/health/profile.h"
#include "testing/fake_root.h"

namespace gantry::health {
namespace {

using ::gantry::testing::FakeRoot;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

Result<std::unique_ptr<Check>> Build(const std::string& id, const std::string& checks_yaml) {
  Registry reg;
  RegisterHostChecks(&reg);
  ASSIGN_OR_RETURN(Config c,
                   Config::LoadString("name: t\nchecks:\n" + checks_yaml, "profile.yaml"));
  return reg.factories().at(id)(c, "checks." + id);
}

CheckResult RunCheck(const std::string& id, const std::string& checks_yaml,
                     const Context& ctx = Context{}) {
  auto check = Build(id, checks_yaml);
  EXPECT_TRUE(check.ok()) << check.status().ToString();
  if (!check.ok()) return CheckResult{};
  return (*check)->Run(ctx);
}

std::string Show(const CheckResult& r) {
  return std::string(OutcomeName(r.outcome)) + " | " + r.message + " | " + r.measured + " | " +
         r.threshold + " | " + r.fault_code;
}

size_t Entries(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(MemoryBandwidthCheckTest, PassesWithoutMinimumFailsWithImpossibleOne) {
  CheckResult r = RunCheck("memory_bandwidth", "  memory_bandwidth: {size: 1M, seconds: 0.02}\n");
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  EXPECT_THAT(r.measured, HasSubstr("GB/s"));
  EXPECT_THAT(r.message, HasSubstr("STREAM triad"));
  r = RunCheck("memory_bandwidth", "  memory_bandwidth: {size: 1M, seconds: 20ms, min_gbs: 1e9}\n");
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.threshold, HasSubstr(">= "));
  EXPECT_THAT(r.message, HasSubstr("below"));
}

TEST(DiskBandwidthCheckTest, WritesReadsAndCleansUp) {
  FakeRoot dir;  // a real directory on this machine's disk
  const std::string yaml = "  disk_bandwidth: {path: '" + dir.path() + "', size: 1M}\n";
  CheckResult r = RunCheck("disk_bandwidth", yaml);
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  EXPECT_THAT(r.measured, HasSubstr("write "));
  EXPECT_THAT(r.measured, HasSubstr("read "));
  EXPECT_EQ(Entries(dir.path()), 0u);

  r = RunCheck("disk_bandwidth",
               "  disk_bandwidth: {path: '" + dir.path() + "', size: 1M, min_write_gbs: 1e9}\n");
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("write"));
  r = RunCheck("disk_bandwidth",
               "  disk_bandwidth: {path: '" + dir.path() + "', size: 1M, min_read_gbs: 1e9}\n");
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_EQ(Entries(dir.path()), 0u);
}

TEST(DiskBandwidthCheckTest, DefaultPathScratchDirThenNvmeScratch) {
  FakeRoot root;
  root.Mkdir("/scratch");
  root.Mkdir("/mnt/nvme");
  root.Mkdir("/tmp");
  root.Write("/proc/mounts", "/dev/sda1 / ext4 rw 0 0\n/dev/md0 /mnt/nvme xfs rw 0 0\n");
  Context ctx;
  ctx.root_dir = root.path();
  const std::string nvme = "  nvme: {scratch: /mnt/nvme}\n";
  CheckResult r = RunCheck("disk_bandwidth", nvme + "  disk_bandwidth: {size: 64K}\n", ctx);
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("in /mnt/nvme"));

  ctx.scratch_dir = "/scratch";
  r = RunCheck("disk_bandwidth", nvme + "  disk_bandwidth: {size: 64K}\n", ctx);
  EXPECT_THAT(r.message, HasSubstr("in /scratch")) << Show(r);

  ctx.scratch_dir = "";
  r = RunCheck("disk_bandwidth", "  nvme: {scratch: /mnt/other}\n  disk_bandwidth: {size: 64K}\n",
               ctx);
  EXPECT_THAT(r.message, HasSubstr("in /tmp")) << Show(r);

  r = RunCheck("disk_bandwidth", "  disk_bandwidth: {path: /missing, size: 64K}\n", ctx);
  EXPECT_EQ(r.outcome, Outcome::kError) << Show(r);
  EXPECT_EQ(r.fault_code, "NHCNA");
}

TEST(CollectiveCheckTest, SharedMemoryAllReduce) {
  CheckResult r = RunCheck("collective", "  collective: {size: 64K, ranks: 2}\n");
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("on 2 ranks"));
  EXPECT_THAT(r.measured, HasSubstr("GB/s"));
  r = RunCheck("collective", "  collective: {size: 64K, ranks: 2, min_busbw_gbs: 1e9}\n");
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
}

TEST(GemmCheckTest, CpuFp32) {
  CheckResult r = RunCheck("gemm", "  gemm: {}\n");
  ASSERT_NE(r.outcome, Outcome::kSkip) << "OpenBLAS is a build dependency: " << Show(r);
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  EXPECT_THAT(r.measured, HasSubstr("TFLOPS"));
  EXPECT_THAT(r.message, HasSubstr("fp32 cpu 1024x1024x1024"));
  r = RunCheck("gemm", "  gemm: {min_tflops: 1e9}\n");
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
}

// The shipped generic profile's host checks on this machine, run directly
// (not through the runner): each one runs to an outcome (none is an error:
// a setup problem in the check itself). Prints what it found and how long
// it took, for docs/benchmarks.md; asserts no timing.
TEST(GenericProfileTest, HostChecksRunOnThisMachine) {
  Result<Profile> p = Profile::Builtin("generic");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Registry reg;
  RegisterHostChecks(&reg);
  Context ctx;
  const auto start = std::chrono::steady_clock::now();
  for (const std::string& id : p->check_ids()) {
    auto it = reg.factories().find(id);
    if (it == reg.factories().end()) continue;
    auto check = it->second(p->config(), "checks." + id);
    ASSERT_TRUE(check.ok()) << id << ": " << check.status().ToString();
    const auto t0 = std::chrono::steady_clock::now();
    CheckResult r = (*check)->Run(ctx);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << id << " (" << s << " s): " << Show(r) << "\n";
    EXPECT_NE(r.outcome, Outcome::kError) << Show(r);
    EXPECT_EQ(r.name, id);
  }
  std::cout << "generic host checks, one after another: "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
            << " s\n";
}

}  // namespace
}  // namespace gantry::health
