#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>

#include "gantry/agent/collector.h"
#include "gantry/health/nvml.h"
#include "testing/fake_nvml_scenario.h"

namespace gantry::agent {
namespace {

using health::testing::FakeNvmlEnv;
using health::testing::FakeNvmlPath;
using health::testing::HealthyNode;

std::optional<double> Value(const Snapshot& s, std::string_view name, std::string_view gpu) {
  const Family* f = s.Find(name);
  if (f == nullptr) return std::nullopt;
  for (const Series& x : f->series) {
    for (const auto& [k, v] : x.labels) {
      if (k == "gpu" && v == gpu) return x.value;
    }
  }
  return std::nullopt;
}

Snapshot Collect(Collector* c) {
  Snapshot s;
  SnapshotWriter w(&s, 1);
  c->Collect(&w);
  w.Finish();
  return s;
}

TEST(GpuCollectorTest, DcgmNamesLabelsAndUnits) {
  FakeNvmlEnv env;
  nlohmann::json s = HealthyNode(2);
  auto& g1 = s["gpus"][1];
  g1["utilization"] = {{"gpu", 97}, {"memory", 41}};
  g1["memory_info"] = {{"total", 80ull << 30}, {"used", 30ull << 30}};
  g1["power_mw"] = 612345;
  g1["energy_mj"] = 987654321;
  g1["temperature_c"] = 71;
  g1["clocks"]["sm"] = 1755;
  g1["clocks"]["memory"] = 2619;
  g1["pcie_replay"] = 12;
  g1["remapped_rows"] = {{"corrected", 2}, {"uncorrected", 1}, {"pending", 0}, {"failure", 1}};
  g1["ecc"]["volatile"] = {{"corrected", 5}, {"uncorrected", 3}};
  g1["xids"] = {48, 79};
  env.Write(s);
  auto c = NewGpuCollector({.nvml_library = FakeNvmlPath(), .hostname = "node-7"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Snapshot snap = Collect(c->get());

  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_GPU_UTIL", "1"), 97);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_GPU_UTIL", "0"), 0);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_MEM_COPY_UTIL", "1"), 41);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_FB_USED", "1"), 30 * 1024);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_FB_FREE", "1"), 50 * 1024);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_POWER_USAGE", "1"), 612.345);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "1"), 987654321);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_GPU_TEMP", "1"), 71);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_SM_CLOCK", "1"), 1755);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_MEM_CLOCK", "1"), 2619);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "1"), 12);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "1"), 2);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "1"), 1);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_ROW_REMAP_FAILURE", "1"), 1);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "1"), 5);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "1"), 3);
  // The last Xid of each GPU; 0 for none.
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_XID_ERRORS", "1"), 79);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_XID_ERRORS", "0"), 0);
  EXPECT_EQ(snap.Find("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")->type, MetricType::kCounter);
  EXPECT_EQ(snap.Find("DCGM_FI_DEV_GPU_UTIL")->type, MetricType::kGauge);

  const Family* util = snap.Find("DCGM_FI_DEV_GPU_UTIL");
  ASSERT_EQ(util->series.size(), 2u);
  EXPECT_EQ(util->series[1].labels, (metrics::Labels{{"Hostname", "node-7"},
                                                     {"UUID", "GPU-fake-1"},
                                                     {"device", "nvidia1"},
                                                     {"gpu", "1"},
                                                     {"modelName", "NVIDIA H100 80GB HBM3"},
                                                     {"pci_bus_id", "00000001:01:00.0"}}));

  // Xids are events: a later collection keeps the last value.
  Snapshot again = Collect(c->get());
  EXPECT_EQ(Value(again, "DCGM_FI_DEV_XID_ERRORS", "1"), 79);
}

TEST(GpuCollectorTest, UnsupportedFieldsAreLeftOutAndNotAskedAgain) {
  FakeNvmlEnv env;
  nlohmann::json s = HealthyNode(1);
  s["gpus"][0].erase("ecc");
  s["gpus"][0].erase("energy_mj");
  s["gpus"][0]["errors"] = {{"nvmlDeviceGetPowerUsage", 15}};  // GPU is lost: transient
  env.Write(s);
  auto c = NewGpuCollector({.nvml_library = FakeNvmlPath(), .hostname = "h"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Snapshot snap = Collect(c->get());
  EXPECT_EQ(snap.Find("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"), nullptr);
  EXPECT_EQ(snap.Find("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"), nullptr);
  EXPECT_EQ(snap.Find("DCGM_FI_DEV_POWER_USAGE"), nullptr);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_GPU_TEMP", "0"), 40);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_FB_USED", "0"), 4);
}

TEST(GpuCollectorTest, NoNvmlIsUnavailable) {
  auto c = NewGpuCollector({.nvml_library = "/nonexistent/libnvidia-ml.so.1", .hostname = ""});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
}

TEST(NvmlAgentCallsTest, NewCallsReadTheScenario) {
  FakeNvmlEnv env;
  nlohmann::json s = HealthyNode(1);
  s["gpus"][0]["memory_info"] = {{"total", 1000}, {"used", 300}, {"free", 600}};
  s["gpus"][0]["xids"] = {13};
  env.Write(s);
  auto nvml = health::Nvml::Load(FakeNvmlPath());
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  auto mem = (*nvml)->MemoryInfo(0);
  ASSERT_TRUE(mem.ok());
  EXPECT_EQ(mem->free, 600u);  // explicit free wins over total - used
  EXPECT_EQ((*nvml)->SmClockMhz(0).value_or(0), 1980u);
  EXPECT_EQ((*nvml)->MemClockMhz(0).value_or(0), 2619u);
  EXPECT_EQ((*nvml)->TotalEnergyMj(0).value_or(0), 1000000u);
  EXPECT_EQ((*nvml)->PcieReplayCounter(0).value_or(9), 0u);
  auto xids = (*nvml)->PollXids();
  ASSERT_TRUE(xids.ok()) << xids.status().ToString();
  ASSERT_EQ(xids->size(), 1u);
  EXPECT_EQ((*xids)[0].gpu, 0);
  EXPECT_EQ((*xids)[0].xid, 13u);
  EXPECT_TRUE((*nvml)->PollXids()->empty());                                  // delivered once
  EXPECT_EQ((*nvml)->Utilization(5).status().code(), StatusCode::kInternal);  // bad index
}

}  // namespace
}  // namespace gantry::agent
