#include <gtest/gtest.h>

#include <algorithm>

#include "gantry/agent/snapshot.h"

namespace gantry::agent {
namespace {

// Builds a snapshot from (family, labels, value) triples; families sorted.
class SnapBuilder {
 public:
  explicit SnapBuilder(int64_t time_ms) { snap_.time_ms = time_ms; }
  SnapBuilder& Add(const std::string& family, metrics::Labels labels, double value,
                   MetricType type = MetricType::kGauge) {
    std::sort(labels.begin(), labels.end());
    auto it = std::find_if(snap_.families.begin(), snap_.families.end(),
                           [&](const Family& f) { return f.name == family; });
    if (it == snap_.families.end()) {
      snap_.families.push_back(Family{family, "", type, {}});
      it = snap_.families.end() - 1;
    }
    it->series.push_back(Series{std::move(labels), value});
    return *this;
  }
  Snapshot Build() {
    std::sort(snap_.families.begin(), snap_.families.end(),
              [](const Family& a, const Family& b) { return a.name < b.name; });
    return snap_;
  }

 private:
  Snapshot snap_;
};

const Signal* FindSignal(const std::vector<Signal>& sigs, std::string_view name,
                         const metrics::Labels& labels = {}) {
  for (const Signal& s : sigs) {
    if (s.name == name && s.labels == labels) return &s;
  }
  return nullptr;
}

void AddCpu(SnapBuilder& b, int cpu, double user, double idle, double iowait, double steal) {
  const std::string c = std::to_string(cpu);
  b.Add("node_cpu_seconds_total", {{"cpu", c}, {"mode", "user"}}, user, MetricType::kCounter);
  b.Add("node_cpu_seconds_total", {{"cpu", c}, {"mode", "idle"}}, idle, MetricType::kCounter);
  b.Add("node_cpu_seconds_total", {{"cpu", c}, {"mode", "iowait"}}, iowait, MetricType::kCounter);
  b.Add("node_cpu_seconds_total", {{"cpu", c}, {"mode", "steal"}}, steal, MetricType::kCounter);
}

TEST(DeriveSignals, CpuUtilizationFromModeDeltas) {
  SnapBuilder a(1'000'000);
  AddCpu(a, 0, 100, 1000, 10, 0);
  AddCpu(a, 1, 100, 1000, 10, 0);
  SnapBuilder b(1'010'000);
  // cpu0: 6 s user, 2 s idle, 1 s iowait, 1 s steal; cpu1: 10 s idle.
  AddCpu(b, 0, 106, 1002, 11, 1);
  AddCpu(b, 1, 100, 1010, 10, 0);
  Snapshot pa = a.Build(), pb = b.Build();
  auto sigs = DeriveSignals(&pa, pb);
  const Signal* cpu = FindSignal(sigs, "cpu_utilization");
  ASSERT_NE(cpu, nullptr);
  EXPECT_DOUBLE_EQ(cpu->value, 30.0);  // 6 busy of 20 seconds
}

TEST(DeriveSignals, NoRatesWithoutPreviousSnapshot) {
  SnapBuilder b(1000);
  AddCpu(b, 0, 1, 1, 1, 1);
  b.Add("node_network_receive_bytes_total", {{"device", "eth0"}}, 100, MetricType::kCounter);
  b.Add("node_load1", {}, 0.5);
  Snapshot s = b.Build();
  auto sigs = DeriveSignals(nullptr, s);
  EXPECT_EQ(FindSignal(sigs, "cpu_utilization"), nullptr);
  EXPECT_EQ(FindSignal(sigs, "network_receive_bytes_per_second", {{"device", "eth0"}}), nullptr);
  const Signal* load = FindSignal(sigs, "load1");
  ASSERT_NE(load, nullptr);
  EXPECT_DOUBLE_EQ(load->value, 0.5);
}

TEST(DeriveSignals, CounterResetGivesNoCpuValue) {
  SnapBuilder a(0);
  AddCpu(a, 0, 100, 100, 0, 0);
  SnapBuilder b(10'000);
  AddCpu(b, 0, 5, 5, 0, 0);
  Snapshot pa = a.Build(), pb = b.Build();
  EXPECT_EQ(FindSignal(DeriveSignals(&pa, pb), "cpu_utilization"), nullptr);
}

TEST(DeriveSignals, MemoryAndSwap) {
  SnapBuilder b(0);
  b.Add("node_memory_MemTotal_bytes", {}, 1000);
  b.Add("node_memory_MemAvailable_bytes", {}, 250);
  b.Add("node_memory_SwapTotal_bytes", {}, 0);
  b.Add("node_memory_SwapFree_bytes", {}, 0);
  Snapshot s = b.Build();
  auto sigs = DeriveSignals(nullptr, s);
  const Signal* mem = FindSignal(sigs, "memory_used_percent");
  ASSERT_NE(mem, nullptr);
  EXPECT_DOUBLE_EQ(mem->value, 75.0);
  EXPECT_EQ(FindSignal(sigs, "swap_used_percent"), nullptr) << "no swap configured";

  SnapBuilder c(0);
  c.Add("node_memory_SwapTotal_bytes", {}, 400);
  c.Add("node_memory_SwapFree_bytes", {}, 300);
  Snapshot sc = c.Build();
  auto swap_sigs = DeriveSignals(nullptr, sc);
  const Signal* swap = FindSignal(swap_sigs, "swap_used_percent");
  ASSERT_NE(swap, nullptr);
  EXPECT_DOUBLE_EQ(swap->value, 25.0);
}

TEST(DeriveSignals, NetworkAndDiskRatesSkipLoopbackAndResets) {
  SnapBuilder a(0);
  a.Add("node_network_receive_bytes_total", {{"device", "eth0"}}, 1000, MetricType::kCounter);
  a.Add("node_network_receive_bytes_total", {{"device", "lo"}}, 1000, MetricType::kCounter);
  a.Add("node_network_transmit_bytes_total", {{"device", "eth0"}}, 500, MetricType::kCounter);
  a.Add("node_network_transmit_bytes_total", {{"device", "ib0"}}, 900, MetricType::kCounter);
  a.Add("node_disk_read_bytes_total", {{"device", "nvme0n1"}}, 0, MetricType::kCounter);
  a.Add("node_disk_written_bytes_total", {{"device", "nvme0n1"}}, 100, MetricType::kCounter);
  SnapBuilder b(4'000);
  b.Add("node_network_receive_bytes_total", {{"device", "eth0"}}, 5000, MetricType::kCounter);
  b.Add("node_network_receive_bytes_total", {{"device", "lo"}}, 9000, MetricType::kCounter);
  b.Add("node_network_transmit_bytes_total", {{"device", "eth0"}}, 900, MetricType::kCounter);
  b.Add("node_network_transmit_bytes_total", {{"device", "ib0"}}, 100, MetricType::kCounter);
  b.Add("node_disk_read_bytes_total", {{"device", "nvme0n1"}}, 8192, MetricType::kCounter);
  b.Add("node_disk_written_bytes_total", {{"device", "nvme0n1"}}, 4100, MetricType::kCounter);
  Snapshot pa = a.Build(), pb = b.Build();
  auto sigs = DeriveSignals(&pa, pb);
  const Signal* rx = FindSignal(sigs, "network_receive_bytes_per_second", {{"device", "eth0"}});
  ASSERT_NE(rx, nullptr);
  EXPECT_DOUBLE_EQ(rx->value, 1000.0);
  EXPECT_EQ(FindSignal(sigs, "network_receive_bytes_per_second", {{"device", "lo"}}), nullptr);
  const Signal* tx = FindSignal(sigs, "network_transmit_bytes_per_second", {{"device", "eth0"}});
  ASSERT_NE(tx, nullptr);
  EXPECT_DOUBLE_EQ(tx->value, 100.0);
  EXPECT_EQ(FindSignal(sigs, "network_transmit_bytes_per_second", {{"device", "ib0"}}), nullptr)
      << "a counter that went down is a reset";
  const Signal* rd = FindSignal(sigs, "disk_read_bytes_per_second", {{"device", "nvme0n1"}});
  ASSERT_NE(rd, nullptr);
  EXPECT_DOUBLE_EQ(rd->value, 2048.0);
  const Signal* wr = FindSignal(sigs, "disk_write_bytes_per_second", {{"device", "nvme0n1"}});
  ASSERT_NE(wr, nullptr);
  EXPECT_DOUBLE_EQ(wr->value, 1000.0);
}

TEST(DeriveSignals, FilesystemUsedPercentPerMountpoint) {
  SnapBuilder b(0);
  metrics::Labels root{{"device", "/dev/sda1"}, {"fstype", "ext4"}, {"mountpoint", "/"}};
  metrics::Labels data{{"device", "/dev/md0"}, {"fstype", "xfs"}, {"mountpoint", "/data"}};
  metrics::Labels proc{{"device", "proc"}, {"fstype", "proc"}, {"mountpoint", "/proc"}};
  b.Add("node_filesystem_size_bytes", root, 100);
  b.Add("node_filesystem_size_bytes", data, 1000);
  b.Add("node_filesystem_size_bytes", proc, 0);
  b.Add("node_filesystem_avail_bytes", root, 10);
  b.Add("node_filesystem_avail_bytes", data, 500);
  b.Add("node_filesystem_avail_bytes", proc, 0);
  Snapshot s = b.Build();
  auto sigs = DeriveSignals(nullptr, s);
  const Signal* r = FindSignal(sigs, "filesystem_used_percent", {{"mountpoint", "/"}});
  ASSERT_NE(r, nullptr);
  EXPECT_DOUBLE_EQ(r->value, 90.0);
  const Signal* d = FindSignal(sigs, "filesystem_used_percent", {{"mountpoint", "/data"}});
  ASSERT_NE(d, nullptr);
  EXPECT_DOUBLE_EQ(d->value, 50.0);
  EXPECT_EQ(FindSignal(sigs, "filesystem_used_percent", {{"mountpoint", "/proc"}}), nullptr);
}

TEST(DeriveSignals, GpuSignalsKeyedByGpuLabel) {
  SnapBuilder b(0);
  for (int g = 0; g < 2; ++g) {
    metrics::Labels l{{"gpu", std::to_string(g)},
                      {"UUID", "GPU-" + std::to_string(g)},
                      {"device", "nvidia" + std::to_string(g)},
                      {"modelName", "NVIDIA H100 80GB HBM3"}};
    b.Add("DCGM_FI_DEV_GPU_UTIL", l, 90 + g);
    b.Add("DCGM_FI_DEV_FB_USED", l, 20 * 1024 * (g + 1));
    b.Add("DCGM_FI_DEV_FB_FREE", l, 80 * 1024 - 20 * 1024 * (g + 1));
    b.Add("DCGM_FI_DEV_POWER_USAGE", l, 650.5);
    b.Add("DCGM_FI_DEV_GPU_TEMP", l, 70 + g);
    b.Add("DCGM_FI_DEV_XID_ERRORS", l, g == 1 ? 79 : 0);
  }
  Snapshot s = b.Build();
  auto sigs = DeriveSignals(nullptr, s);
  const Signal* u1 = FindSignal(sigs, "gpu_utilization", {{"gpu", "1"}});
  ASSERT_NE(u1, nullptr);
  EXPECT_DOUBLE_EQ(u1->value, 91);
  const Signal* m1 = FindSignal(sigs, "gpu_memory_used_percent", {{"gpu", "1"}});
  ASSERT_NE(m1, nullptr);
  EXPECT_DOUBLE_EQ(m1->value, 50.0);
  const Signal* m0 = FindSignal(sigs, "gpu_memory_used_percent", {{"gpu", "0"}});
  ASSERT_NE(m0, nullptr);
  EXPECT_DOUBLE_EQ(m0->value, 25.0);
  const Signal* p = FindSignal(sigs, "gpu_power_watts", {{"gpu", "0"}});
  ASSERT_NE(p, nullptr);
  EXPECT_DOUBLE_EQ(p->value, 650.5);
  const Signal* t = FindSignal(sigs, "gpu_temperature_celsius", {{"gpu", "1"}});
  ASSERT_NE(t, nullptr);
  EXPECT_DOUBLE_EQ(t->value, 71);
  const Signal* x = FindSignal(sigs, "gpu_xid_errors", {{"gpu", "1"}});
  ASSERT_NE(x, nullptr);
  EXPECT_DOUBLE_EQ(x->value, 79);
}

TEST(DeriveSignals, ZeroIntervalGivesNoRates) {
  SnapBuilder a(5000);
  a.Add("node_network_receive_bytes_total", {{"device", "eth0"}}, 1, MetricType::kCounter);
  SnapBuilder b(5000);
  b.Add("node_network_receive_bytes_total", {{"device", "eth0"}}, 2, MetricType::kCounter);
  Snapshot pa = a.Build(), pb = b.Build();
  EXPECT_TRUE(DeriveSignals(&pa, pb).empty());
}

}  // namespace
}  // namespace gantry::agent
