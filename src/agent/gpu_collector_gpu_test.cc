// The GPU collector on a real NVIDIA driver (label gpu: `make test-gpu`, needs
// a GPU and libnvidia-ml.so.1). Checks that the struct layouts and versions
// Gantry declares (health/nvml_abi.h) are the driver's: every
// dcgm-exporter default counter is served for GPU 0, values in range, and on
// a GPU with GPM (Hopper and later) the DCGM_FI_PROF_* ratios are 0..1.
// Expects an SXM board on bare metal (NVLink and the vGPU status present).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "gantry/agent/collector.h"
#include "gantry/health/nvml.h"

namespace gantry::agent {
namespace {

const Series* Gpu0(const Snapshot& s, std::string_view name) {
  const Family* f = s.Find(name);
  if (f == nullptr) return nullptr;
  for (const Series& x : f->series) {
    for (const auto& [k, v] : x.labels) {
      if (k == "gpu" && v == "0") return &x;
    }
  }
  return nullptr;
}

TEST(GpuCollectorGpuTest, RealDriverServesTheDefaultCounters) {
  auto nvml = health::Nvml::Load("libnvidia-ml.so.1");
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  bool gpm = (*nvml)->GpmSupported(0).value_or(false);
  nvml->reset();

  auto c = NewGpuCollector({.nvml_library = "libnvidia-ml.so.1", .hostname = "gpu-test"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Snapshot snap;
  for (int round = 0; round < 2; ++round) {  // the second one over a 1 s GPM interval
    if (round == 1) std::this_thread::sleep_for(std::chrono::seconds(1));
    SnapshotWriter w(&snap, round);
    (*c)->Collect(&w);
    w.Finish();
  }
  std::ifstream in(std::string(GANTRY_SOURCE_DIR) +
                   "/tests/agent/dcgm-exporter-default-counters.txt");
  std::string name;
  while (std::getline(in, name)) {
    if (name.empty() || name[0] == '#' || name == "DCGM_FI_DRIVER_VERSION") continue;
    if (!gpm && name.rfind("DCGM_FI_PROF_", 0) == 0) continue;  // absent by design
    const Series* s = Gpu0(snap, name);
    if (s == nullptr) {
      ADD_FAILURE() << name << " missing for GPU 0";
      continue;
    }
    std::printf("%s = %g\n", name.c_str(), s->value);
    if (name.rfind("DCGM_FI_PROF_", 0) == 0 && name.find("ACTIVE") != std::string::npos) {
      EXPECT_GE(s->value, 0.0) << name;
      EXPECT_LE(s->value, 1.0) << name;
    }
  }
  const Series* reserved = Gpu0(snap, "DCGM_FI_DEV_FB_RESERVED");
  ASSERT_NE(reserved, nullptr);
  const Series* used = Gpu0(snap, "DCGM_FI_DEV_FB_USED");
  ASSERT_NE(used, nullptr);
  EXPECT_GT(reserved->value + used->value, 0);  // a real GPU reserves some framebuffer
  const Series* mt = Gpu0(snap, "DCGM_FI_DEV_MEMORY_TEMP");
  if (mt != nullptr) {
    EXPECT_GT(mt->value, 0);
    EXPECT_LT(mt->value, 150);
  }
}

}  // namespace
}  // namespace gantry::agent
