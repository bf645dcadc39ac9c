// GPU checks against the fake NVML: a healthy 8-GPU H100 node, and each
// failure class (missing GPU, persistence off, driver mismatch, ECC over
// limits, SRAM uncorrectable, row remap pending/failure, Xid in/out of the
// window and in a rotated .gz, clock reasons warn vs fail_on, NVLink down,
// PCIe width degraded, too hot, NVML errors, a hung NVML call).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "gantry/config.h"
#include "gantry/core/clock.h"
#include "gantry/core/config.h"
#include "gantry/health/check.h"
#include "gantry/health/nvml.h"
#include "gantry/health/profile.h"
#include "testing/fake_nvml_scenario.h"

namespace gantry::health {
namespace {

using testing::FakeNvmlEnv;
using testing::FakeNvmlPath;
using ::testing::HasSubstr;
using testing::HealthyNode;
using ::testing::Not;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

const Registry& GpuRegistry() {
  static const Registry* r = [] {
    auto* reg = new Registry;
    RegisterGpuChecks(reg);
    return reg;
  }();
  return *r;
}

Result<std::unique_ptr<Check>> Build(const std::string& id, const std::string& params_yaml) {
  ASSIGN_OR_RETURN(Config c, Config::LoadString("name: t\nchecks:\n  " + id + ": " + params_yaml,
                                                "profile.yaml"));
  auto it = GpuRegistry().factories().find(id);
  if (it == GpuRegistry().factories().end()) return NotFound("no factory for " + id);
  return it->second(c, "checks." + id);
}

std::string Show(const CheckResult& r) {
  return std::string(OutcomeName(r.outcome)) + " | " + r.message + " | " + r.measured + " | " +
         r.threshold + " | " + r.fault_code;
}

// 2026-11-30T04:00:00Z.
std::chrono::system_clock::time_point Now() {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 10;
  tm.tm_mday = 30;
  tm.tm_hour = 4;
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

// A fake node: scenario, loaded fake NVML, a root dir and a clock.
class GpuChecksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Classic syslog timestamps are local time: pin the zone.
    setenv("TZ", "UTC", 1);
    tzset();
    root_ = env_.dir() + "/root";
    fs::create_directories(root_ + "/var/log");
    scenario_ = HealthyNode(8);
  }

  // Loads the fake with the current scenario (again if already loaded).
  void Load() {
    nvml_.reset();
    env_.Write(scenario_);
    auto n = Nvml::Load(FakeNvmlPath());
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    nvml_ = std::move(*n);
  }

  Context Ctx() {
    Context ctx;
    ctx.root_dir = root_;
    ctx.nvml = nvml_.get();
    ctx.clock = &clock_;
    return ctx;
  }

  CheckResult Run(const std::string& id, const std::string& params = "{}") {
    if (!nvml_) Load();
    auto check = Build(id, params);
    EXPECT_TRUE(check.ok()) << check.status().ToString();
    if (!check.ok()) return CheckResult{};
    EXPECT_EQ((*check)->name(), id);
    CheckResult r = (*check)->Run(Ctx());
    EXPECT_EQ(r.name, id);
    return r;
  }

  void WriteFile(const std::string& rel, const std::string& text) {
    fs::create_directories(fs::path(root_ + "/" + rel).parent_path());
    std::ofstream(root_ + "/" + rel) << text;
  }

  FakeNvmlEnv env_;
  nlohmann::json scenario_;
  std::unique_ptr<Nvml> nvml_;
  std::string root_;
  FakeClock clock_{std::chrono::seconds(1000), Now()};
};

TEST(GpuChecksRegistryTest, RegistersEveryGpuCheckOnce) {
  Registry r;
  RegisterGpuChecks(&r);
  EXPECT_TRUE(r.duplicates().empty());
  for (const char* id :
       {"gpu_count", "gpu_persistence", "gpu_driver", "gpu_ecc", "gpu_row_remap", "gpu_xid",
        "gpu_clocks", "gpu_nvlink", "gpu_pcie", "gpu_thermal", "gpu_bandwidth"}) {
    EXPECT_EQ(r.factories().count(id), 1u) << id;
  }
  EXPECT_EQ(r.factories().size(), 11u);
}

TEST(GpuChecksRegistryTest, NvmlChecksAreIsolated) {
  for (const char* id : {"gpu_persistence", "gpu_driver", "gpu_ecc", "gpu_row_remap", "gpu_xid",
                         "gpu_clocks", "gpu_nvlink", "gpu_pcie", "gpu_thermal", "gpu_bandwidth"}) {
    auto c = Build(id, "{}");
    ASSERT_TRUE(c.ok()) << id << ": " << c.status().ToString();
    EXPECT_TRUE((*c)->isolate()) << id;
  }
  auto count = Build("gpu_count", "{count: 8}");
  ASSERT_TRUE(count.ok());
  EXPECT_TRUE((*count)->isolate());
}

TEST(GpuChecksRegistryTest, ParameterErrorsNameTheKey) {
  auto missing = Build("gpu_count", "{}");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("'count' is required"));
  auto typo = Build("gpu_ecc", "{dram_mx: 5}");
  ASSERT_FALSE(typo.ok());
  EXPECT_THAT(typo.status().message(), HasSubstr("dram_mx"));
  auto reason = Build("gpu_clocks", "{fail_on: [hw_slowdwn]}");
  ASSERT_FALSE(reason.ok());
  EXPECT_THAT(reason.status().message(), HasSubstr("hw_slowdwn"));
  auto code = Build("gpu_xid", "{codes: [79, x]}");
  ASSERT_FALSE(code.ok());
  EXPECT_THAT(code.status().message(), HasSubstr("'x' is not an Xid number"));
  // `true` means all defaults.
  EXPECT_TRUE(Build("gpu_ecc", "true").ok());
}

TEST_F(GpuChecksTest, HealthyNodePassesEveryNvmlCheck) {
  EXPECT_EQ(Run("gpu_count", "{count: 8}").outcome, Outcome::kPass);
  for (const char* id : {"gpu_persistence", "gpu_driver", "gpu_ecc", "gpu_row_remap", "gpu_clocks",
                         "gpu_nvlink", "gpu_pcie", "gpu_thermal"}) {
    CheckResult r = Run(id);
    EXPECT_EQ(r.outcome, Outcome::kPass) << id << ": " << Show(r);
  }
  CheckResult driver = Run("gpu_driver", "{version: 550.54.15}");
  EXPECT_EQ(driver.outcome, Outcome::kPass) << Show(driver);
  EXPECT_EQ(driver.measured, "550.54.15");
}

TEST(GpuChecksProfileTest, EveryBuiltinProfileBuilds) {
  for (const std::string& name : Profile::BuiltinNames()) {
    Result<Profile> p = Profile::Builtin(name);
    ASSERT_TRUE(p.ok()) << name << ": " << p.status().ToString();
    auto checks = BuildChecks(*p);
    EXPECT_TRUE(checks.ok()) << name << ": " << checks.status().ToString();
  }
}

TEST_F(GpuChecksTest, HealthyNodePassesTheNdH100Profile) {
  Result<Profile> p = Profile::Builtin("nd96isr_h100_v5");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto checks = BuildChecks(*p);
  ASSERT_TRUE(checks.ok()) << checks.status().ToString();
  Load();
  int gpu_checks = 0;
  for (const auto& c : *checks) {
    if (c->name().rfind("gpu_", 0) != 0) continue;
    ++gpu_checks;
    CheckResult r = c->Run(Ctx());
    EXPECT_TRUE(r.outcome == Outcome::kPass || r.outcome == Outcome::kSkip) << Show(r);
  }
  EXPECT_EQ(gpu_checks, 11);
}

TEST_F(GpuChecksTest, MissingGpuFailsWithNhc2009) {
  scenario_["gpus"].erase(7);
  scenario_["gpus"].erase(6);
  CheckResult r = Run("gpu_count", "{count: 8}");
  EXPECT_EQ(r.outcome, Outcome::kFail);
  EXPECT_EQ(r.fault_code, "NHC2009");
  EXPECT_THAT(r.message, HasSubstr("expected 8 GPUs, NVML sees 6"));
  EXPECT_EQ(r.measured, "6");
}

TEST_F(GpuChecksTest, NoNvmlFailsCountAndSkipsTheRest) {
  auto count = Build("gpu_count", "{count: 8}");
  ASSERT_TRUE(count.ok());
  Context ctx;
  ctx.root_dir = root_;
  ctx.clock = &clock_;
  CheckResult r = (*count)->Run(ctx);
  EXPECT_EQ(r.outcome, Outcome::kFail);
  EXPECT_EQ(r.fault_code, "NHC2009");
  EXPECT_THAT(r.message, HasSubstr("NVML is not loaded"));
  auto ecc = Build("gpu_ecc", "{}");
  ASSERT_TRUE(ecc.ok());
  EXPECT_EQ((*ecc)->Run(ctx).outcome, Outcome::kSkip);
  // No GPUs expected, no driver: fine.
  auto zero = Build("gpu_count", "{count: 0}");
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ((*zero)->Run(ctx).outcome, Outcome::kPass);
}

TEST_F(GpuChecksTest, PersistenceOff) {
  scenario_["gpus"][2]["persistence"] = 0;
  CheckResult r = Run("gpu_persistence");
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("GPU 2"));
  EXPECT_THAT(r.message, HasSubstr("gantry tune --apply"));
  EXPECT_EQ(Run("gpu_persistence", "{required: false}").outcome, Outcome::kPass);
}

TEST_F(GpuChecksTest, DriverVersionMismatch) {
  scenario_["driver_version"] = "535.104.05";
  CheckResult r = Run("gpu_driver", "{version: 550.54.15}");
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("535.104.05"));
  EXPECT_THAT(r.message, HasSubstr("expects 550.54.15"));
}

TEST_F(GpuChecksTest, DriverLibraryAndKernelModuleDisagree) {
  WriteFile("proc/driver/nvidia/version",
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC "
            "2024\nGCC version:  gcc version 12.2.0\n");
  CheckResult r = Run("gpu_driver");
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("kernel module is 550.90.07"));
  WriteFile("proc/driver/nvidia/version",
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build\n");
  EXPECT_EQ(Run("gpu_driver").outcome, Outcome::kPass);
}

TEST_F(GpuChecksTest, DriverMixedGpuModels) {
  scenario_["gpus"][5]["name"] = "NVIDIA A100-SXM4-80GB";
  CheckResult r = Run("gpu_driver");
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("NVIDIA A100-SXM4-80GB (GPU 5)"));
}

TEST_F(GpuChecksTest, EccDramOverLimit) {
  scenario_["gpus"][1]["ecc"]["dram_corrected"] = 25000000;
  CheckResult r = Run("gpu_ecc");
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_EQ(r.fault_code, "NHC2019");
  EXPECT_THAT(r.message, HasSubstr("GPU 1 (00000001:01:00.0)"));
  // A profile with a higher limit passes.
  EXPECT_EQ(Run("gpu_ecc", "{dram_max: 30000000}").outcome, Outcome::kPass);
}

TEST_F(GpuChecksTest, EccSramUncorrectableAlwaysFails) {
  scenario_["gpus"][4]["ecc"]["sram_uncorrected"] = 1;
  CheckResult r = Run("gpu_ecc", "{dram_max: 30000000, sram_correctable_max: 100000}");
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_EQ(r.fault_code, "NHC2019");
  EXPECT_THAT(r.message, HasSubstr("uncorrectable SRAM"));
}

TEST_F(GpuChecksTest, EccSramCorrectableOverLimit) {
  scenario_["gpus"][0]["ecc"]["sram_corrected"] = 10001;
  EXPECT_EQ(Run("gpu_ecc").outcome, Outcome::kFail);
  EXPECT_EQ(Run("gpu_ecc", "{sram_correctable_max: 20000}").outcome, Outcome::kPass);
}

TEST_F(GpuChecksTest, RowRemapPendingAndFailure) {
  scenario_["gpus"][3]["remapped_rows"]["pending"] = 1;
  CheckResult pending = Run("gpu_row_remap");
  EXPECT_EQ(pending.outcome, Outcome::kFail) << Show(pending);
  EXPECT_EQ(pending.fault_code, "NHC2007");
  EXPECT_THAT(pending.message, HasSubstr("pending"));

  scenario_["gpus"][3]["remapped_rows"]["pending"] = 0;
  scenario_["gpus"][6]["remapped_rows"]["failure"] = 1;
  Load();
  CheckResult failure = Run("gpu_row_remap");
  EXPECT_EQ(failure.outcome, Outcome::kFail);
  EXPECT_THAT(failure.message, HasSubstr("GPU 6"));
  EXPECT_THAT(failure.message, HasSubstr("replacement"));
}

TEST_F(GpuChecksTest, PreAmpereUsesRetiredPages) {
  for (auto& g : scenario_["gpus"]) g.erase("remapped_rows");
  EXPECT_EQ(Run("gpu_row_remap").outcome, Outcome::kPass);
  scenario_["gpus"][2]["retired_pages_pending"] = 1;
  Load();
  CheckResult r = Run("gpu_row_remap");
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("pending retirement"));
}

TEST_F(GpuChecksTest, XidInWindowFails) {
  WriteFile(
      "var/log/kern.log",
      "Nov 30 03:10:00 node kernel: [123.4] NVRM: Xid (PCI:0000:01:00): 79, pid=1234, GPU has "
      "fallen off the bus.\n"
      "Nov 30 03:20:00 node kernel: NVRM: Xid (PCI:0000:02:00): 13, Graphics Exception\n");
  CheckResult r = Run("gpu_xid");
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("Xid 79 on PCI:0000:01:00"));
  EXPECT_THAT(r.message, HasSubstr("ignored Xid 13"));
}

TEST_F(GpuChecksTest, XidOutsideWindowPasses) {
  // 3 hours old with the default 2 h window; an ISO 8601 line 5 h old.
  WriteFile("var/log/syslog",
            "Nov 30 01:00:00 node kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=1\n"
            "2026-11-29T23:00:00.123456+00:00 node kernel: NVRM: Xid (PCI:0000:03:00): 48, "
            "DBE\n");
  CheckResult r = Run("gpu_xid");
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  // A wider window finds both.
  CheckResult wide = Run("gpu_xid", "{window: 6h}");
  EXPECT_EQ(wide.outcome, Outcome::kFail) << Show(wide);
  EXPECT_THAT(wide.message, HasSubstr("Xid 48 on PCI:0000:03:00"));
}

TEST_F(GpuChecksTest, XidIsoTimestampWithOffset) {
  // 05:30+02:00 is 03:30Z: inside the window.
  WriteFile("var/log/messages",
            "2026-11-30T05:30:00+02:00 node kernel: NVRM: Xid (PCI:0000:04:00): 94, contained\n");
  CheckResult r = Run("gpu_xid", "{codes: [94]}");
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("Xid 94"));
}

TEST_F(GpuChecksTest, XidInRotatedGzipLog) {
  std::string path = root_ + "/var/log/kern.log.2.gz";
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  std::string line = "Nov 30 02:30:00 node kernel: NVRM: Xid (PCI:0000:05:00): 63, row remap\n";
  gzwrite(gz, line.data(), static_cast<unsigned>(line.size()));
  gzclose(gz);
  CheckResult r = Run("gpu_xid");
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("Xid 63 on PCI:0000:05:00"));
}

TEST_F(GpuChecksTest, XidFromJournalctlCountedOnce) {
  std::string bin = env_.dir() + "/bin";
  fs::create_directories(bin);
  std::string line =
      "2026-11-30T03:45:00+0000 node kernel: NVRM: Xid (PCI:0000:06:00): 74, NVLink\n";
  {
    std::ofstream s(bin + "/journalctl");
    s << "#!/bin/sh\nprintf '%s' '" << line << "'\n";
  }
  chmod((bin + "/journalctl").c_str(), 0755);
  WriteFile("var/log/kern.log", line);  // the same event in syslog too
  if (!nvml_) Load();
  auto check = Build("gpu_xid", "{}");
  ASSERT_TRUE(check.ok());
  Context ctx = Ctx();
  ctx.bin_dir = bin;
  CheckResult r = (*check)->Run(ctx);
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("Xid 74 on PCI:0000:06:00 (1x"));
}

TEST_F(GpuChecksTest, XidWithoutAnyLogSkips) {
  fs::remove_all(root_ + "/var/log");
  CheckResult r = Run("gpu_xid");
  EXPECT_EQ(r.outcome, Outcome::kSkip) << Show(r);
}

TEST_F(GpuChecksTest, ClockReasonsWarnUnlessListed) {
  scenario_["gpus"][1]["clocks_event_reasons"] = kClockEventHwThermal | kClockEventSwPowerCap;
  CheckResult warn = Run("gpu_clocks");
  EXPECT_EQ(warn.outcome, Outcome::kWarn) << Show(warn);
  EXPECT_THAT(warn.message, HasSubstr("hw_thermal"));
  CheckResult fail = Run("gpu_clocks", "{fail_on: [hw_thermal]}");
  EXPECT_EQ(fail.outcome, Outcome::kFail) << Show(fail);
  // SW power cap and application clock setting are normal under load.
  scenario_["gpus"][1]["clocks_event_reasons"] = kClockEventSwPowerCap | kClockEventAppSetting;
  Load();
  EXPECT_EQ(Run("gpu_clocks", "{fail_on: [hw_thermal]}").outcome, Outcome::kPass);
}

TEST_F(GpuChecksTest, NvLinkDown) {
  scenario_["gpus"][7]["nvlink"][4] = 0;
  CheckResult r = Run("gpu_nvlink");
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_EQ(r.fault_code, "NHC2016");
  EXPECT_THAT(r.message, HasSubstr("NVLink 4 down"));
  // NC H100 v5 style: fewer links active by design, min_active says how many.
  EXPECT_EQ(Run("gpu_nvlink", "{min_active: 12}").outcome, Outcome::kPass);
  EXPECT_EQ(Run("gpu_nvlink", "{min_active: 18}").outcome, Outcome::kFail);
}

TEST_F(GpuChecksTest, NoNvLinkIsNotAFailure) {
  for (auto& g : scenario_["gpus"]) g.erase("nvlink");
  CheckResult r = Run("gpu_nvlink");
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("no GPU reports NVLink"));
}

TEST_F(GpuChecksTest, PcieWidthDegradedFailsGenOnlyWarns) {
  scenario_["gpus"][2]["pcie"]["width"] = 8;
  CheckResult r = Run("gpu_pcie");
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("x8, expected x16"));

  scenario_["gpus"][2]["pcie"]["width"] = 16;
  scenario_["gpus"][2]["pcie"]["gen"] = 1;  // idle downshift
  Load();
  CheckResult gen = Run("gpu_pcie");
  EXPECT_EQ(gen.outcome, Outcome::kWarn) << Show(gen);
  EXPECT_THAT(gen.message, HasSubstr("idle"));
}

TEST_F(GpuChecksTest, TooHotOrOverPower) {
  scenario_["gpus"][0]["temperature_c"] = 91;
  CheckResult hot = Run("gpu_thermal");
  EXPECT_EQ(hot.outcome, Outcome::kFail) << Show(hot);
  EXPECT_THAT(hot.message, HasSubstr("91 C"));
  EXPECT_EQ(Run("gpu_thermal", "{max_temp_c: 95}").outcome, Outcome::kPass);

  scenario_["gpus"][0]["temperature_c"] = 40;
  scenario_["gpus"][1]["power_mw"] = 710000;
  Load();
  CheckResult power = Run("gpu_thermal");
  EXPECT_EQ(power.outcome, Outcome::kFail) << Show(power);
  EXPECT_THAT(power.message, HasSubstr("710 W"));
}

TEST_F(GpuChecksTest, NvmlCallErrorIsAnError) {
  scenario_["gpus"][5]["errors"]["nvmlDeviceGetTotalEccErrors"] = 999;
  CheckResult r = Run("gpu_ecc");
  EXPECT_EQ(r.outcome, Outcome::kError) << Show(r);
  EXPECT_EQ(r.fault_code, "NHCNA");
  EXPECT_THAT(r.message, HasSubstr("nvmlDeviceGetTotalEccErrors(GPU 5)"));
  scenario_["errors"]["nvmlDeviceGetCount_v2"] = 999;
  Load();
  EXPECT_EQ(Run("gpu_thermal").outcome, Outcome::kError);
}

TEST_F(GpuChecksTest, LostGpuIsAMissingGpu) {
  scenario_["gpus"][3]["errors"]["nvmlDeviceGetRemappedRows"] = 15;
  CheckResult r = Run("gpu_row_remap");
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_EQ(r.fault_code, "NHC2009");
  EXPECT_THAT(r.message, HasSubstr("GPU is lost"));
}

TEST_F(GpuChecksTest, BandwidthNeedsCuda) {
  CheckResult r = Run("gpu_bandwidth", "{min_h2d_gbs: 48, min_d2h_gbs: 48}");
#if !GANTRY_HAVE_CUDA
  EXPECT_EQ(r.outcome, Outcome::kSkip) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("needs a CUDA build"));
#else
  EXPECT_NE(r.outcome, Outcome::kError) << Show(r);
#endif
}

// The runner must kill an isolated check stuck in a driver call.
class ShortTimeout : public Check {
 public:
  explicit ShortTimeout(std::unique_ptr<Check> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  bool isolate() const override { return inner_->isolate(); }
  std::chrono::milliseconds timeout() const override { return 300ms; }
  CheckResult Run(const Context& ctx) const override { return inner_->Run(ctx); }

 private:
  std::unique_ptr<Check> inner_;
};

TEST_F(GpuChecksTest, HungNvmlCallIsKilledByTheRunner) {
  scenario_["gpus"][2]["hang"] = {"nvmlDeviceGetTemperature"};
  Load();
  auto thermal = Build("gpu_thermal", "{}");
  ASSERT_TRUE(thermal.ok());
  std::vector<std::unique_ptr<Check>> checks;
  checks.push_back(std::make_unique<ShortTimeout>(std::move(*thermal)));
  auto ecc = Build("gpu_ecc", "{}");
  ASSERT_TRUE(ecc.ok());
  checks.push_back(std::move(*ecc));
  RunOptions options;
  options.watchdog = 30s;
  Context ctx = Ctx();
  ctx.clock = &SystemClock();
  Result<HealthReport> report = RunHealth(checks, ctx, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->results.size(), 2u);
  EXPECT_EQ(report->results[0].name, "gpu_thermal");
  EXPECT_EQ(report->results[0].outcome, Outcome::kError) << Show(report->results[0]);
  EXPECT_THAT(report->results[0].message, HasSubstr("timed out"));
  EXPECT_EQ(report->results[1].outcome, Outcome::kPass) << Show(report->results[1]);
}

}  // namespace
}  // namespace gantry::health
