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
using health::testing::HopperNode;

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
  EXPECT_EQ(util->series[1].labels, (metrics::Labels{{"DCGM_FI_DRIVER_VERSION", "550.54.15"},
                                                     {"Hostname", "node-7"},
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

constexpr double kMiB = 1024.0 * 1024.0;

std::optional<std::string> LabelOf(const Snapshot& s, std::string_view name, std::string_view key) {
  const Family* f = s.Find(name);
  if (f == nullptr || f->series.empty()) return std::nullopt;
  for (const auto& [k, v] : f->series[0].labels) {
    if (k == key) return v;
  }
  return std::nullopt;
}

TEST(GpuCollectorTest, RemainingDcgmDefaultFieldsFromHopperGpu) {
  FakeNvmlEnv env;
  env.Write(HopperNode(2));
  auto c = NewGpuCollector({.nvml_library = FakeNvmlPath(), .hostname = "h"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Snapshot snap = Collect(c->get());

  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_MEMORY_TEMP", "0"), 45);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_MEMORY_TEMP", "1"), 46);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_ENC_UTIL", "0"), 3);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_DEC_UTIL", "0"), 4);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_FB_RESERVED", "0"), 512);
  // v2 semantics: free = total - used - reserved (85520809984 B total, 4 MiB used).
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_FB_FREE", "0"), (85520809984ull - (516ull << 20)) >> 20);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "1"), 1001 + 2000);
  EXPECT_EQ(Value(snap, "DCGM_FI_DEV_VGPU_LICENSE_STATUS", "0"), 0);
  EXPECT_EQ(LabelOf(snap, "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DRIVER_VERSION"), "550.54.15");
  EXPECT_EQ(LabelOf(snap, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DRIVER_VERSION"), "550.54.15");

  // The first collection already has a GPM interval (sampled at creation):
  // percent -> ratio, MiB/s -> bytes/s.
  EXPECT_DOUBLE_EQ(Value(snap, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "0").value_or(-1), 0.55);
  EXPECT_DOUBLE_EQ(Value(snap, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "0").value_or(-1), 0.20);
  EXPECT_DOUBLE_EQ(Value(snap, "DCGM_FI_PROF_DRAM_ACTIVE", "0").value_or(-1), 0.30);
  EXPECT_DOUBLE_EQ(Value(snap, "DCGM_FI_PROF_PCIE_TX_BYTES", "0").value_or(-1), 100 * kMiB);
  EXPECT_DOUBLE_EQ(Value(snap, "DCGM_FI_PROF_PCIE_RX_BYTES", "1").value_or(-1), 200 * kMiB);

  EXPECT_EQ(snap.Find("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL")->type, MetricType::kCounter);
  EXPECT_EQ(snap.Find("DCGM_FI_PROF_PCIE_TX_BYTES")->type, MetricType::kGauge);
  EXPECT_EQ(snap.Find("DCGM_FI_PROF_GR_ENGINE_ACTIVE")->help,
            "Ratio of time the graphics engine is active.");
  EXPECT_EQ(snap.Find("DCGM_FI_DEV_FB_RESERVED")->help, "Framebuffer memory reserved (in MiB).");

  // The next collection reports the next interval, against the kept sample.
  Snapshot again = Collect(c->get());
  EXPECT_EQ(Value(again, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "0"), 0);
  EXPECT_DOUBLE_EQ(Value(again, "DCGM_FI_PROF_PCIE_TX_BYTES", "0").value_or(-1), 0.5 * kMiB);
  EXPECT_DOUBLE_EQ(Value(again, "DCGM_FI_PROF_PCIE_RX_BYTES", "0").value_or(-1), 0.25 * kMiB);
}

TEST(GpuCollectorTest, GpuWithoutGpmHasNoProfilingSeries) {
  FakeNvmlEnv env;
  nlohmann::json s = HopperNode(3);
  s["gpus"][1].erase("gpm");             // e.g. an A100: no GPM at all
  s["gpus"][2]["gpm"]["supported"] = 0;  // GPM API present, device not supported
  env.Write(s);
  auto c = NewGpuCollector({.nvml_library = FakeNvmlPath(), .hostname = "h"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  for (int round = 0; round < 2; ++round) {
    Snapshot snap = Collect(c->get());
    for (std::string_view name :
         {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
          "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES"}) {
      EXPECT_TRUE(Value(snap, name, "0").has_value()) << name;
      EXPECT_EQ(Value(snap, name, "1"), std::nullopt) << name << " must be absent, not 0";
      EXPECT_EQ(Value(snap, name, "2"), std::nullopt) << name << " must be absent, not 0";
    }
    EXPECT_EQ(Value(snap, "DCGM_FI_DEV_MEMORY_TEMP", "1"), 46);  // the rest is unaffected
  }
}

TEST(GpuCollectorTest, FailingNewCallsLeaveTheirSeriesOut) {
  FakeNvmlEnv env;
  nlohmann::json s = HopperNode(3);
  s["gpus"][0]["errors"] = {{"nvmlGpmSampleGet", 15},  // GPU is lost
                            {"nvmlDeviceGetFieldValues", 999},
                            {"nvmlDeviceGetEncoderUtilization", 15},
                            {"nvmlDeviceGetDecoderUtilization", 3},
                            {"nvmlDeviceGetVirtualizationMode", 999}};
  s["gpus"][1]["errors"] = {{"nvmlGpmMetricsGet", 999}};
  s["gpus"][1].erase("memory_temp_c");                      // this one field NOT_SUPPORTED
  s["gpus"][1]["gpm"]["metrics"][0].erase("dram_bw_util");  // one GPM metric not reported
  s["gpus"][2]["virtualization_mode"] = 2;                  // a vGPU guest
  s["gpus"][2]["memory_info"].erase("reserved");            // driver without _v2: v1 fallback
  env.Write(s);
  auto c = NewGpuCollector({.nvml_library = FakeNvmlPath(), .hostname = "h"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  for (int round = 0; round < 2; ++round) {
    Snapshot snap = Collect(c->get());
    EXPECT_EQ(Value(snap, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "0"), std::nullopt);
    EXPECT_EQ(Value(snap, "DCGM_FI_DEV_MEMORY_TEMP", "0"), std::nullopt);
    EXPECT_EQ(Value(snap, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "0"), std::nullopt);
    EXPECT_EQ(Value(snap, "DCGM_FI_DEV_ENC_UTIL", "0"), std::nullopt);
    EXPECT_EQ(Value(snap, "DCGM_FI_DEV_DEC_UTIL", "0"), std::nullopt);
    EXPECT_EQ(Value(snap, "DCGM_FI_DEV_VGPU_LICENSE_STATUS", "0"), std::nullopt);
    EXPECT_EQ(Value(snap, "DCGM_FI_DEV_GPU_TEMP", "0"), 40);  // the old fields still there

    EXPECT_EQ(Value(snap, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "1"), std::nullopt);
    EXPECT_EQ(Value(snap, "DCGM_FI_DEV_MEMORY_TEMP", "1"), std::nullopt);
    EXPECT_EQ(Value(snap, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "1"), 3001);

    EXPECT_EQ(Value(snap, "DCGM_FI_DEV_VGPU_LICENSE_STATUS", "2"), std::nullopt);
    EXPECT_EQ(Value(snap, "DCGM_FI_DEV_FB_RESERVED", "2"), std::nullopt);
    EXPECT_EQ(Value(snap, "DCGM_FI_DEV_FB_USED", "2"), 4);
    EXPECT_TRUE(Value(snap, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "2").has_value());
  }
}

TEST(GpuCollectorTest, OneGpmMetricMissingLeavesOnlyThatSeriesOut) {
  FakeNvmlEnv env;
  nlohmann::json s = HopperNode(1);
  s["gpus"][0]["gpm"]["metrics"] = {{{"graphics_util", 10.0}, {"pcie_rx_mib_s", 1.0}}};
  env.Write(s);
  auto c = NewGpuCollector({.nvml_library = FakeNvmlPath(), .hostname = "h"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Snapshot snap = Collect(c->get());
  EXPECT_DOUBLE_EQ(Value(snap, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "0").value_or(-1), 0.10);
  EXPECT_DOUBLE_EQ(Value(snap, "DCGM_FI_PROF_PCIE_RX_BYTES", "0").value_or(-1), kMiB);
  EXPECT_EQ(snap.Find("DCGM_FI_PROF_DRAM_ACTIVE"), nullptr);
  EXPECT_EQ(snap.Find("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"), nullptr);
  EXPECT_EQ(snap.Find("DCGM_FI_PROF_PCIE_TX_BYTES"), nullptr);
}

TEST(GpuCollectorTest, NoDriverVersionMeansNoDriverLabel) {
  FakeNvmlEnv env;
  nlohmann::json s = HopperNode(1);
  s["errors"] = {{"nvmlSystemGetDriverVersion", 999}};
  env.Write(s);
  auto c = NewGpuCollector({.nvml_library = FakeNvmlPath(), .hostname = "h"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Snapshot snap = Collect(c->get());
  EXPECT_EQ(LabelOf(snap, "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DRIVER_VERSION"), std::nullopt);
  EXPECT_EQ(LabelOf(snap, "DCGM_FI_DEV_GPU_TEMP", "UUID"), "GPU-fake-0");
}

TEST(NvmlAgentCallsTest, FieldValuesGpmAndMemoryV2) {
  FakeNvmlEnv env;
  nlohmann::json s = HopperNode(2);
  s["gpus"][1]["memory_info"].erase("reserved");
  env.Write(s);
  auto nvml = health::Nvml::Load(FakeNvmlPath());
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  health::Nvml& n = **nvml;

  auto fields = n.FieldValues(
      0,
      {health::FieldRequest(health::kFieldMemoryTemp),
       health::FieldRequest(health::kFieldNvLinkThroughputDataRx, health::kFieldScopeAllLinks),
       health::FieldRequest(health::kFieldNvLinkThroughputDataTx, 3), health::FieldRequest(9999)});
  ASSERT_TRUE(fields.ok()) << fields.status().ToString();
  ASSERT_EQ(fields->size(), 4u);
  EXPECT_TRUE((*fields)[0].status.ok());
  EXPECT_EQ((*fields)[0].value, 45);
  EXPECT_EQ((*fields)[1].value, 2000);
  EXPECT_EQ((*fields)[2].status.code(), StatusCode::kUnimplemented);  // per-link: not modelled
  EXPECT_EQ((*fields)[3].status.code(), StatusCode::kUnimplemented);

  auto v2 = n.MemoryInfo(0);
  ASSERT_TRUE(v2.ok());
  EXPECT_TRUE(v2->has_reserved);
  EXPECT_EQ(v2->reserved, 512ull << 20);
  auto v1 = n.MemoryInfo(1);
  ASSERT_TRUE(v1.ok());
  EXPECT_FALSE(v1->has_reserved);

  EXPECT_EQ(n.EncoderUtilization(0).value_or(99), 3u);
  EXPECT_EQ(n.DecoderUtilization(0).value_or(99), 4u);
  EXPECT_EQ(n.VirtualizationMode(0).value_or(99), 0);

  EXPECT_EQ(n.GpmSupported(0).value_or(false), true);
  auto first = n.GpmCollect(0);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->has_value());  // one sample: no interval yet
  auto second = n.GpmCollect(0);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ASSERT_TRUE(second->has_value());
  EXPECT_EQ((*second)->graphics_util, 55.0);
  EXPECT_EQ((*second)->pcie_rx_mib_s, 200.0);
  auto third = n.GpmCollect(0);
  ASSERT_TRUE(third.ok() && third->has_value());
  EXPECT_EQ((*third)->pcie_tx_mib_s, 0.5);
  // GPU 1's samples are its own: its first call has no interval either.
  auto other = n.GpmCollect(1);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->has_value());
}

// A driver from before nvmlDeviceGetFieldValues, _v2 memory info and GPM:
// the missing symbols leave their series out, the rest is served.
TEST(GpuCollectorTest, OldDriverWithoutNewSymbolsLeavesTheirSeriesOut) {
  FakeNvmlEnv env;
  env.Write(HopperNode(1));
  auto c = NewGpuCollector(
      {.nvml_library = std::string(GANTRY_BINARY_DIR) + "/lib/libgantry_fake_nvml_old.so",
       .hostname = "h"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  for (int round = 0; round < 2; ++round) {
    Snapshot snap = Collect(c->get());
    for (std::string_view name :
         {"DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL",
          "DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
          "DCGM_FI_DEV_VGPU_LICENSE_STATUS", "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
          "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
          "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES"}) {
      EXPECT_EQ(snap.Find(name), nullptr) << name;
    }
    EXPECT_EQ(Value(snap, "DCGM_FI_DEV_FB_USED", "0"), 4);  // v1 fallback
    EXPECT_EQ(Value(snap, "DCGM_FI_DEV_GPU_TEMP", "0"), 40);
    EXPECT_EQ(LabelOf(snap, "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DRIVER_VERSION"), "550.54.15");
  }
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
