// Nvml against the fake NVML (src/health/fake_nvml): every query, error
// mapping, state changes and load failures.
#include "gantry/health/nvml.h"

#include <gtest/gtest.h>

#include "testing/fake_nvml_scenario.h"

namespace gantry::health {
namespace {

using testing::FakeNvmlEnv;
using testing::FakeNvmlPath;
using testing::HealthyNode;

TEST(NvmlTest, ReadsHealthyNode) {
  FakeNvmlEnv env;
  env.Write(HealthyNode(8));
  Result<std::unique_ptr<Nvml>> nvml = Nvml::Load(FakeNvmlPath());
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  Nvml& n = **nvml;
  EXPECT_EQ(n.library(), FakeNvmlPath());
  EXPECT_EQ(*n.DeviceCount(), 8);
  EXPECT_EQ(*n.DriverVersion(), "550.54.15");
  EXPECT_EQ(*n.Name(3), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(*n.Uuid(3), "GPU-fake-3");
  EXPECT_EQ(*n.PciBusId(3), "00000001:03:00.0");
  EXPECT_TRUE(*n.PersistenceMode(0));

  Result<EccCounts> ecc = n.Ecc(0);
  ASSERT_TRUE(ecc.ok()) << ecc.status().ToString();
  EXPECT_EQ(ecc->aggregate_corrected, 3u);
  EXPECT_EQ(ecc->sram_corrected, 1u);
  EXPECT_EQ(ecc->dram_corrected, 2u);
  EXPECT_EQ(ecc->sram_uncorrected, 0u);

  Result<RemappedRows> rows = n.RemappedRowsOf(0);
  ASSERT_TRUE(rows.ok());
  EXPECT_FALSE(rows->pending);
  EXPECT_FALSE(rows->failure);
  EXPECT_FALSE(*n.RetiredPagesPending(0));
  EXPECT_EQ(*n.ClocksEventReasons(0), kClockEventIdle);

  Result<std::vector<bool>> links = n.NvLinkStates(0);
  ASSERT_TRUE(links.ok());
  EXPECT_EQ(links->size(), 18u);

  Result<PcieLink> pcie = n.Pcie(0);
  ASSERT_TRUE(pcie.ok());
  EXPECT_EQ(pcie->gen, 5u);
  EXPECT_EQ(pcie->max_width, 16u);
  EXPECT_EQ(*n.TemperatureC(0), 40u);
  EXPECT_EQ(*n.PowerUsageMw(0), 120000u);
  EXPECT_EQ(*n.PowerLimitMw(0), 700000u);

  Result<GpuClocks> clocks = n.Clocks(0);
  ASSERT_TRUE(clocks.ok());
  EXPECT_EQ(clocks->app_graphics, 1755u);
  EXPECT_EQ(clocks->app_memory, 2619u);
  EXPECT_EQ(clocks->max_graphics, 1980u);
  EXPECT_EQ(clocks->default_app_graphics, 1755u);
}

TEST(NvmlTest, InjectedErrorNamesCallAndGpu) {
  FakeNvmlEnv env;
  nlohmann::json s = HealthyNode(4);
  s["gpus"][3]["errors"]["nvmlDeviceGetRemappedRows"] = 15;  // GPU is lost
  s["gpus"][2]["errors"]["nvmlDeviceGetTemperature"] = 3;    // not supported
  s["gpus"][1]["errors"]["nvmlDeviceGetPowerUsage"] = 4;     // no permission
  env.Write(s);
  auto nvml = Nvml::Load(FakeNvmlPath());
  ASSERT_TRUE(nvml.ok());
  Result<RemappedRows> rows = (*nvml)->RemappedRowsOf(3);
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(rows.status().message(), "nvmlDeviceGetRemappedRows(GPU 3): GPU is lost");
  EXPECT_TRUE((*nvml)->RemappedRowsOf(2).ok());

  Result<unsigned> temp = (*nvml)->TemperatureC(2);
  ASSERT_FALSE(temp.ok());
  EXPECT_EQ(temp.status().code(), StatusCode::kUnimplemented);

  EXPECT_EQ((*nvml)->PowerUsageMw(1).status().code(), StatusCode::kPermissionDenied);
}

TEST(NvmlTest, MissingFeaturesAreUnimplementedOrEmpty) {
  FakeNvmlEnv env;
  nlohmann::json s = HealthyNode(1);
  s["gpus"][0].erase("nvlink");
  s["gpus"][0].erase("remapped_rows");
  s["gpus"][0].erase("ecc");
  env.Write(s);
  auto nvml = Nvml::Load(FakeNvmlPath());
  ASSERT_TRUE(nvml.ok());
  Result<std::vector<bool>> links = (*nvml)->NvLinkStates(0);
  ASSERT_TRUE(links.ok());
  EXPECT_TRUE(links->empty());
  EXPECT_EQ((*nvml)->RemappedRowsOf(0).status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ((*nvml)->Ecc(0).status().code(), StatusCode::kUnimplemented);
  // Out of range index: an NVML error, not a crash.
  EXPECT_FALSE((*nvml)->Name(5).ok());
  EXPECT_EQ((*nvml)->Name(-1).status().code(), StatusCode::kInvalidArgument);
}

TEST(NvmlTest, WithoutLocationCountersDramTakesTheTotals) {
  FakeNvmlEnv env;
  nlohmann::json s = HealthyNode(1);
  auto& ecc = s["gpus"][0]["ecc"];
  ecc.erase("dram_corrected");
  ecc.erase("dram_uncorrected");
  ecc.erase("sram_corrected");
  ecc.erase("sram_uncorrected");
  ecc["aggregate"]["uncorrected"] = 7;
  env.Write(s);
  auto nvml = Nvml::Load(FakeNvmlPath());
  ASSERT_TRUE(nvml.ok());
  Result<EccCounts> e = (*nvml)->Ecc(0);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->dram_corrected, 3u);
  EXPECT_EQ(e->dram_uncorrected, 7u);
  EXPECT_EQ(e->sram_corrected, 0u);
}

TEST(NvmlTest, StateChangesAreLoggedAndVisible) {
  FakeNvmlEnv env;
  nlohmann::json s = HealthyNode(2);
  s["gpus"][1]["persistence"] = 0;
  env.Write(s);
  {
    auto nvml = Nvml::Load(FakeNvmlPath());
    ASSERT_TRUE(nvml.ok());
    Nvml& n = **nvml;
    ASSERT_TRUE(n.SetPersistenceMode(1, true).ok());
    EXPECT_TRUE(*n.PersistenceMode(1));
    ASSERT_TRUE(n.SetApplicationsClocks(0, 2619, 1980).ok());
    EXPECT_EQ(n.Clocks(0)->app_graphics, 1980u);
    ASSERT_TRUE(n.ResetApplicationsClocks(0).ok());
    EXPECT_EQ(n.Clocks(0)->app_graphics, 1755u);
    ASSERT_TRUE(n.SetGpuLockedClocks(0, 1980, 1980).ok());
    ASSERT_TRUE(n.ResetGpuLockedClocks(0).ok());
    // Above the maximum: the fake refuses, as the driver would.
    Status bad = n.SetApplicationsClocks(0, 9999, 1980);
    EXPECT_FALSE(bad.ok());
    EXPECT_NE(bad.message().find("nvmlDeviceSetApplicationsClocks(GPU 0)"), std::string::npos);
  }
  std::vector<nlohmann::json> calls = env.Calls();
  ASSERT_EQ(calls.size(), 8u);
  EXPECT_EQ(calls.front()["call"], "nvmlInit_v2");
  EXPECT_EQ(calls[1],
            (nlohmann::json{{"call", "nvmlDeviceSetPersistenceMode"}, {"gpu", 1}, {"enabled", 1}}));
  EXPECT_EQ(calls[2]["call"], "nvmlDeviceSetApplicationsClocks");
  EXPECT_EQ(calls[2]["memory_mhz"], 2619);
  EXPECT_EQ(calls[2]["graphics_mhz"], 1980);
  EXPECT_EQ(calls[4]["call"], "nvmlDeviceSetGpuLockedClocks");
  EXPECT_EQ(calls[4]["min_mhz"], 1980);
  EXPECT_EQ(calls.back()["call"], "nvmlShutdown");  // the destructor shut NVML down
}

TEST(NvmlTest, InitFailureIsUnavailable) {
  FakeNvmlEnv env;
  nlohmann::json s = HealthyNode(1);
  s["init_error"] = 9;  // driver not loaded
  env.Write(s);
  Result<std::unique_ptr<Nvml>> nvml = Nvml::Load(FakeNvmlPath());
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(nvml.status().message().find("nvmlInit_v2 failed"), std::string::npos);
  EXPECT_NE(nvml.status().message().find("Driver Not Loaded"), std::string::npos);
}

TEST(NvmlTest, MissingLibraryIsUnavailable) {
  Result<std::unique_ptr<Nvml>> nvml = Nvml::Load("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(nvml.status().message().find("/nonexistent/libnvidia-ml.so.1"), std::string::npos);
}

TEST(NvmlTest, LibraryFromEnvironment) {
  FakeNvmlEnv env;
  env.Write(HealthyNode(2));
  setenv("GANTRY_NVML_LIBRARY", FakeNvmlPath().c_str(), 1);
  Result<std::unique_ptr<Nvml>> nvml = Nvml::Load();
  unsetenv("GANTRY_NVML_LIBRARY");
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  EXPECT_EQ(*(*nvml)->DeviceCount(), 2);
}

TEST(NvmlTest, TwoHandlesShareOneInit) {
  FakeNvmlEnv env;
  env.Write(HealthyNode(3));
  auto a = Nvml::Load(FakeNvmlPath());
  auto b = Nvml::Load(FakeNvmlPath());
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  a->reset();
  // NVML is reference counted: b still works after a shut down.
  EXPECT_EQ(*(*b)->DeviceCount(), 3);
}

}  // namespace
}  // namespace gantry::health
