#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>

#include "gantry/agent/collector.h"
#include "testing/fake_root.h"

namespace gantry::agent {
namespace {

using ::gantry::testing::FakeRoot;

std::optional<double> Value(const Snapshot& s, std::string_view name,
                            const metrics::Labels& labels = {}) {
  const Family* f = s.Find(name);
  if (f == nullptr) return std::nullopt;
  for (const Series& x : f->series) {
    bool match = true;
    for (const auto& l : labels) {
      bool found = false;
      for (const auto& m : x.labels) found = found || m == l;
      match = match && found;
    }
    if (match) return x.value;
  }
  return std::nullopt;
}

const char* kStat =
    "cpu  1000 20 300 40000 500 6 70 8 90 10\n"
    "cpu0 600 10 200 20000 250 3 35 4 50 5\n"
    "cpu1 400 10 100 20000 250 3 35 4 40 5\n"
    "intr 123456 1 2 3\n"
    "ctxt 987654\n"
    "btime 1764480000\n"
    "processes 4242\n"
    "procs_running 3\n"
    "procs_blocked 1\n";

const char* kMeminfo =
    "MemTotal:       16000000 kB\n"
    "MemFree:         2000000 kB\n"
    "MemAvailable:    8000000 kB\n"
    "Buffers:          100000 kB\n"
    "Cached:          4000000 kB\n"
    "SwapTotal:       1000000 kB\n"
    "SwapFree:         900000 kB\n"
    "Active(anon):     123 kB\n"
    "HugePages_Total:       4\n";

const char* kDiskstats =
    "   8       0 sda 100 5 2000 300 50 6 4000 700 2 900 1000 0 0 0 0\n"
    "   8       1 sda1 90 5 1800 280 40 6 3000 600 0 800 900 0 0 0 0\n"
    " 259       0 nvme0n1 10 0 80 5 20 0 160 9 0 12 14\n"
    " 259       1 nvme0n1p1 10 0 80 5 20 0 160 9 0 12 14\n"
    "   7       0 loop0 1 0 2 0 0 0 0 0 0 0 0\n";

const char* kNetDev =
    "Inter-|   Receive                                                |  Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs "
    "drop fifo colls carrier compressed\n"
    "    lo:   5000      50    0    0    0     0          0         0     5000      50    0    "
    "0    0     0       0          0\n"
    "  eth0: 123456789 1000 1 2 0 0 0 7 987654321 2000 3 4 0 0 0 0\n";

void WriteNode(const FakeRoot& root) {
  root.Write("/proc/stat", kStat);
  root.Write("/proc/loadavg", "0.52 1.50 2.25 2/345 6789\n");
  root.Write("/proc/pressure/cpu",
             "some avg10=0.00 avg60=0.00 avg300=0.00 total=1500000\n"
             "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
  root.Write("/proc/pressure/io",
             "some avg10=0.00 avg60=0.00 avg300=0.00 total=2000000\n"
             "full avg10=0.00 avg60=0.00 avg300=0.00 total=1000000\n");
  root.Write("/proc/pressure/memory",
             "some avg10=0.00 avg60=0.00 avg300=0.00 total=3000000\n"
             "full avg10=0.00 avg60=0.00 avg300=0.00 total=2500000\n");
  root.Write("/proc/meminfo", kMeminfo);
  root.Write("/proc/diskstats", kDiskstats);
  root.Write("/proc/mounts",
             "/dev/sda1 / ext4 rw,relatime 0 0\n"
             "proc /proc proc rw,nosuid 0 0\n"
             "sysfs /sys sysfs rw 0 0\n"
             "/dev/sdb1 /mnt/my\\040data xfs ro,relatime 0 0\n"
             "/dev/sdc1 /mnt/gone ext4 rw 0 0\n"
             "overlay /var/lib/docker/overlay2/x/merged overlay rw 0 0\n"
             "/dev/sda1 / ext4 rw,relatime 0 0\n");
  root.Mkdir("/mnt/my data");
  root.Write("/proc/net/dev", kNetDev);
  root.Write("/sys/class/net/eth0/operstate", "up\n");
  root.Write("/sys/class/net/lo/operstate", "unknown\n");
}

TEST(NodeCollectorTest, NodeExporterNamesLabelsAndUnits) {
  FakeRoot root;
  WriteNode(root);
  auto c = NewNodeCollector({.root = root.path()});
  Snapshot s;
  SnapshotWriter w(&s, 1764480123456);
  c->Collect(&w);
  w.Finish();

  const double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  EXPECT_EQ(Value(s, "node_cpu_seconds_total", {{"cpu", "0"}, {"mode", "user"}}), 600 / hz);
  EXPECT_EQ(Value(s, "node_cpu_seconds_total", {{"cpu", "1"}, {"mode", "steal"}}), 4 / hz);
  EXPECT_EQ(Value(s, "node_cpu_seconds_total", {{"cpu", "1"}, {"mode", "idle"}}), 20000 / hz);
  EXPECT_EQ(Value(s, "node_cpu_guest_seconds_total", {{"cpu", "0"}, {"mode", "nice"}}), 5 / hz);
  EXPECT_EQ(s.Find("node_cpu_seconds_total")->series.size(), 16u);  // 2 CPUs x 8 modes, no "cpu"
  EXPECT_EQ(s.Find("node_cpu_seconds_total")->type, MetricType::kCounter);
  EXPECT_EQ(Value(s, "node_boot_time_seconds"), 1764480000);
  EXPECT_EQ(Value(s, "node_context_switches_total"), 987654);
  EXPECT_EQ(Value(s, "node_intr_total"), 123456);
  EXPECT_EQ(Value(s, "node_forks_total"), 4242);
  EXPECT_EQ(Value(s, "node_procs_running"), 3);
  EXPECT_EQ(Value(s, "node_procs_blocked"), 1);
  EXPECT_EQ(Value(s, "node_time_seconds"), 1764480123.456);

  EXPECT_EQ(Value(s, "node_load1"), 0.52);
  EXPECT_EQ(Value(s, "node_load5"), 1.5);
  EXPECT_EQ(Value(s, "node_load15"), 2.25);

  EXPECT_EQ(Value(s, "node_pressure_cpu_waiting_seconds_total"), 1.5);
  EXPECT_EQ(s.Find("node_pressure_cpu_stalled_seconds_total"), nullptr);
  EXPECT_EQ(Value(s, "node_pressure_io_waiting_seconds_total"), 2.0);
  EXPECT_EQ(Value(s, "node_pressure_io_stalled_seconds_total"), 1.0);
  EXPECT_EQ(Value(s, "node_pressure_memory_waiting_seconds_total"), 3.0);
  EXPECT_EQ(Value(s, "node_pressure_memory_stalled_seconds_total"), 2.5);

  EXPECT_EQ(Value(s, "node_memory_MemTotal_bytes"), 16000000.0 * 1024);
  EXPECT_EQ(Value(s, "node_memory_MemAvailable_bytes"), 8000000.0 * 1024);
  EXPECT_EQ(Value(s, "node_memory_SwapFree_bytes"), 900000.0 * 1024);
  EXPECT_EQ(Value(s, "node_memory_Active_anon_bytes"), 123.0 * 1024);
  EXPECT_EQ(Value(s, "node_memory_HugePages_Total"), 4);  // no unit, no _bytes
  EXPECT_EQ(s.Find("node_memory_MemTotal_bytes")->type, MetricType::kGauge);

  // Whole disks only: partitions and loop devices are left out, as node_exporter does.
  const Family* reads = s.Find("node_disk_reads_completed_total");
  ASSERT_NE(reads, nullptr);
  EXPECT_EQ(reads->series.size(), 2u);
  EXPECT_EQ(Value(s, "node_disk_reads_completed_total", {{"device", "sda"}}), 100);
  EXPECT_EQ(Value(s, "node_disk_writes_completed_total", {{"device", "sda"}}), 50);
  EXPECT_EQ(Value(s, "node_disk_read_bytes_total", {{"device", "sda"}}), 2000.0 * 512);
  EXPECT_EQ(Value(s, "node_disk_written_bytes_total", {{"device", "sda"}}), 4000.0 * 512);
  EXPECT_EQ(Value(s, "node_disk_io_time_seconds_total", {{"device", "sda"}}), 0.9);
  EXPECT_EQ(Value(s, "node_disk_io_now", {{"device", "sda"}}), 2);
  EXPECT_EQ(Value(s, "node_disk_io_time_seconds_total", {{"device", "nvme0n1"}}), 0.012);
  EXPECT_EQ(Value(s, "node_disk_reads_completed_total", {{"device", "sda1"}}), std::nullopt);

  // Filesystems: pseudo and container mounts excluded, duplicates once,
  // octal escapes decoded, unreachable mounts flagged.
  const Family* size = s.Find("node_filesystem_size_bytes");
  ASSERT_NE(size, nullptr);
  EXPECT_EQ(size->series.size(), 2u);
  EXPECT_GT(*Value(s, "node_filesystem_size_bytes",
                   {{"device", "/dev/sda1"}, {"fstype", "ext4"}, {"mountpoint", "/"}}),
            0);
  EXPECT_EQ(Value(s, "node_filesystem_readonly", {{"mountpoint", "/mnt/my data"}}), 1);
  EXPECT_EQ(Value(s, "node_filesystem_readonly", {{"mountpoint", "/"}}), 0);
  EXPECT_EQ(Value(s, "node_filesystem_device_error", {{"mountpoint", "/mnt/gone"}}), 1);
  EXPECT_EQ(Value(s, "node_filesystem_size_bytes", {{"mountpoint", "/mnt/gone"}}), std::nullopt);
  EXPECT_TRUE(Value(s, "node_filesystem_avail_bytes", {{"mountpoint", "/"}}).has_value());
  EXPECT_TRUE(Value(s, "node_filesystem_files", {{"mountpoint", "/"}}).has_value());
  EXPECT_TRUE(Value(s, "node_filesystem_free_bytes", {{"mountpoint", "/"}}).has_value());

  EXPECT_EQ(Value(s, "node_network_receive_bytes_total", {{"device", "eth0"}}), 123456789);
  EXPECT_EQ(Value(s, "node_network_receive_packets_total", {{"device", "eth0"}}), 1000);
  EXPECT_EQ(Value(s, "node_network_receive_errs_total", {{"device", "eth0"}}), 1);
  EXPECT_EQ(Value(s, "node_network_receive_drop_total", {{"device", "eth0"}}), 2);
  EXPECT_EQ(Value(s, "node_network_receive_multicast_total", {{"device", "eth0"}}), 7);
  EXPECT_EQ(Value(s, "node_network_transmit_bytes_total", {{"device", "eth0"}}), 987654321);
  EXPECT_EQ(Value(s, "node_network_transmit_packets_total", {{"device", "eth0"}}), 2000);
  EXPECT_EQ(Value(s, "node_network_transmit_errs_total", {{"device", "eth0"}}), 3);
  EXPECT_EQ(Value(s, "node_network_transmit_drop_total", {{"device", "eth0"}}), 4);
  EXPECT_EQ(Value(s, "node_network_receive_bytes_total", {{"device", "lo"}}), 5000);
  EXPECT_EQ(Value(s, "node_network_up", {{"device", "eth0"}}), 1);
  EXPECT_EQ(Value(s, "node_network_up", {{"device", "lo"}}), 0);

  const Family* uname = s.Find("node_uname_info");
  ASSERT_NE(uname, nullptr);
  ASSERT_EQ(uname->series.size(), 1u);
  EXPECT_EQ(uname->series[0].labels.size(), 6u);
  EXPECT_EQ(uname->series[0].labels[4].first, "sysname");
  EXPECT_EQ(uname->series[0].labels[4].second, "Linux");

  // Sorted by name, each series' labels sorted by name.
  for (size_t i = 1; i < s.families.size(); ++i) {
    EXPECT_LT(s.families[i - 1].name, s.families[i].name);
  }
}

TEST(NodeCollectorTest, ReusedSnapshotFollowsChangesAndMissingFiles) {
  FakeRoot root;
  WriteNode(root);
  auto c = NewNodeCollector({.root = root.path()});
  Snapshot s;
  {
    SnapshotWriter w(&s, 1000);
    c->Collect(&w);
    w.Finish();
  }
  size_t families = s.families.size();
  // Counters move, a NIC appears, PSI disappears, a larger file than the
  // first read buffer is read whole.
  std::string stat = "cpu  1 1 1 1 1 1 1 1 1 1\n";
  for (int i = 0; i < 300; ++i) {
    stat += "cpu" + std::to_string(i) + " 700 10 200 20000 250 3 35 4 50 5\n";
  }
  root.Write("/proc/stat", stat + "btime 1764480000\n");
  root.Write("/proc/net/dev",
             std::string(kNetDev) + "  ib0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n");
  // (Files stay open between reads, so an emptied file stands for a kernel
  // that stopped reporting.)
  root.Write("/proc/pressure/cpu", "");
  root.Write("/proc/pressure/io", "");
  root.Write("/proc/pressure/memory", "");
  {
    SnapshotWriter w(&s, 2000);
    c->Collect(&w);
    w.Finish();
  }
  const double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  EXPECT_EQ(s.Find("node_cpu_seconds_total")->series.size(), 300u * 8);
  EXPECT_EQ(Value(s, "node_cpu_seconds_total", {{"cpu", "299"}, {"mode", "user"}}), 700 / hz);
  EXPECT_EQ(Value(s, "node_network_transmit_compressed_total", {{"device", "ib0"}}), 16);
  EXPECT_EQ(s.Find("node_pressure_io_waiting_seconds_total"), nullptr);
  EXPECT_EQ(s.Find("node_context_switches_total"), nullptr);  // gone from /proc/stat
  EXPECT_EQ(s.families.size(), families - 5 - 1 - 1 - 1 - 1 - 1);
  EXPECT_EQ(Value(s, "node_time_seconds"), 2.0);
  for (size_t i = 1; i < s.families.size(); ++i) {
    EXPECT_LT(s.families[i - 1].name, s.families[i].name);
  }
}

TEST(NodeCollectorTest, MissingProcfsYieldsOnlyTimeAndUname) {
  FakeRoot root;
  auto c = NewNodeCollector({.root = root.path()});
  Snapshot s;
  SnapshotWriter w(&s, 5000);
  c->Collect(&w);
  w.Finish();
  std::vector<std::string> names;
  for (const Family& f : s.families) names.push_back(f.name);
  EXPECT_THAT(names, ::testing::ElementsAre("node_time_seconds", "node_uname_info"));
}

TEST(NodeCollectorTest, CollectsFromTheRealProc) {
  auto c = NewNodeCollector({});
  Snapshot s;
  SnapshotWriter w(&s, 1);
  c->Collect(&w);
  w.Finish();
  EXPECT_NE(s.Find("node_cpu_seconds_total"), nullptr);
  EXPECT_NE(s.Find("node_memory_MemTotal_bytes"), nullptr);
  EXPECT_NE(s.Find("node_load1"), nullptr);
  EXPECT_NE(s.Find("node_network_receive_bytes_total"), nullptr);
}

TEST(FileReaderTest, RereadsAndReportsMissingFiles) {
  FakeRoot root;
  std::string path = root.Write("/f", "one");
  FileReader r(path);
  ASSERT_NE(r.Read(), nullptr);
  EXPECT_EQ(*r.Read(), "one");
  root.Write("/f", std::string(10000, 'x'));
  ASSERT_NE(r.Read(), nullptr);
  EXPECT_EQ(r.Read()->size(), 10000u);
  FileReader missing(root.path() + "/nope");
  EXPECT_EQ(missing.Read(), nullptr);
}

}  // namespace
}  // namespace gantry::agent
