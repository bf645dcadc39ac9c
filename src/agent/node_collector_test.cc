#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <optional>

#include "gantry/agent/collector.h"
#include "testing/fake_root.h"

namespace gantry::agent {
namespace {

using ::gantry::testing::FakeRoot;

// Counts heap allocations while `g_counting` is set (this test binary only).
std::atomic<bool> g_counting{false};
std::atomic<size_t> g_allocations{0};

}  // namespace
}  // namespace gantry::agent

void* operator new(std::size_t n) {
  if (gantry::agent::g_counting.load(std::memory_order_relaxed)) {
    gantry::agent::g_allocations.fetch_add(1, std::memory_order_relaxed);
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace gantry::agent {
namespace {

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
    " 259       2 nvme1n1 1 0 8 1 2 0 16 1 0 2 3 10 1 400 20 5 30\n"
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
  EXPECT_EQ(reads->series.size(), 3u);
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

TEST(NodeCollectorTest, MissingProcfsYieldsOnlyTimeUnameAndScrapeStatus) {
  FakeRoot root;
  auto c = NewNodeCollector({.root = root.path(), .adjtimex = [](::timex*) { return -1; }});
  Snapshot s;
  SnapshotWriter w(&s, 5000);
  c->Collect(&w);
  w.Finish();
  std::vector<std::string> names;
  for (const Family& f : s.families) names.push_back(f.name);
  EXPECT_THAT(names, ::testing::ElementsAre("node_scrape_collector_duration_seconds",
                                            "node_scrape_collector_success",
                                            "node_selinux_enabled",  // 0: no selinuxfs
                                            "node_textfile_scrape_error", "node_time_seconds",
                                            "node_time_zone_offset_seconds", "node_uname_info"));
  EXPECT_EQ(Value(s, "node_scrape_collector_success", {{"collector", "meminfo"}}), 0);
  EXPECT_EQ(Value(s, "node_scrape_collector_success", {{"collector", "timex"}}), 0);
  EXPECT_EQ(Value(s, "node_scrape_collector_success", {{"collector", "time"}}), 1);
  EXPECT_EQ(Value(s, "node_textfile_scrape_error"), 0);  // no directory configured
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
  EXPECT_NE(s.Find("node_netstat_Tcp_InSegs"), nullptr);
  EXPECT_NE(s.Find("node_sockstat_sockets_used"), nullptr);
  EXPECT_NE(s.Find("node_vmstat_pgfault"), nullptr);
  EXPECT_NE(s.Find("node_filefd_allocated"), nullptr);
  EXPECT_NE(s.Find("node_timex_sync_status"), nullptr);
  EXPECT_NE(s.Find("node_softnet_processed_total"), nullptr);
  EXPECT_NE(s.Find("node_network_mtu_bytes"), nullptr);
  EXPECT_EQ(Value(s, "node_scrape_collector_success", {{"collector", "netstat"}}), 1);
  EXPECT_EQ(Value(s, "node_scrape_collector_success", {{"collector", "vmstat"}}), 1);
}

// ------------------------------------------------- the node_exporter parity families

const char* kNetstat =
    "TcpExt: SyncookiesSent SyncookiesRecv SyncookiesFailed EmbryonicRsts ListenOverflows "
    "ListenDrops TCPTimeouts TCPSynRetrans TCPOFOQueue TCPRcvQDrop\n"
    "TcpExt: 1 2 3 4 5 6 7 8 9 10\n"
    "IpExt: InNoRoutes InOctets OutOctets\n"
    "IpExt: 0 123456 654321\n";

const char* kSnmp =
    "Ip: Forwarding DefaultTTL InReceives InHdrErrors\n"
    "Ip: 1 64 1000 0\n"
    "Icmp: InMsgs InErrors OutMsgs\n"
    "Icmp: 10 1 12\n"
    "Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets "
    "CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n"
    "Tcp: 1 200 120000 -1 100 50 3 4 7 10000 9000 11 2 13 0\n"
    "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors "
    "IgnoredMulti MemErrors\n"
    "Udp: 500 5 1 400 0 0 0 0 0\n"
    "UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors "
    "IgnoredMulti MemErrors\n"
    "UdpLite: 0 0 0 0 0 0 0 0 0\n";

const char* kSnmp6 =
    "Ip6InReceives                   \t100\n"
    "Ip6InOctets                     \t2000\n"
    "Ip6OutOctets                    \t3000\n"
    "Icmp6InMsgs                     \t4\n"
    "Icmp6InErrors                   \t1\n"
    "Udp6InDatagrams                 \t50\n"
    "Udp6InErrors                    \t0\n"
    "UdpLite6InErrors                \t0\n";

const char* kConntrackStat =
    "entries  clashres found new invalid ignore delete chainlength insert insert_failed drop "
    "early_drop icmp_error  expect_new expect_create expect_delete search_restart\n"
    "0000000c  00000000 00000001 00000000 00000002 00000003 00000000 00000000 00000000 00000000 "
    "00000004 00000000 00000000  00000000 00000000 00000000 0000000a\n"
    "0000000c  00000000 00000001 00000000 00000002 00000003 00000000 00000000 00000000 00000000 "
    "00000004 00000000 00000000  00000000 00000000 00000000 00000001\n";

const char* kUdp =
    "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout "
    "inode ref pointer drops\n"
    "  123: 00000000:0044 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 "
    "12345 2 0000000000000000 0\n"
    "  456: 0100007F:0035 00000000:0000 07 00000010:00000200 00:00000000 00000000   101        0 "
    "12346 2 0000000000000000 0\n";

void WriteParityFiles(const FakeRoot& root) {
  root.Write("/proc/net/netstat", kNetstat);
  root.Write("/proc/net/snmp", kSnmp);
  root.Write("/proc/net/snmp6", kSnmp6);
  root.Write("/proc/net/sockstat",
             "sockets: used 230\n"
             "TCP: inuse 5 orphan 1 tw 2 alloc 9 mem 3\n"
             "UDP: inuse 4 mem 2\n"
             "UDPLITE: inuse 0\n"
             "RAW: inuse 1\n"
             "FRAG: inuse 0 memory 0\n");
  root.Write("/proc/net/sockstat6",
             "TCP6: inuse 3\nUDP6: inuse 2\nUDPLITE6: inuse 0\nRAW6: inuse 0\n"
             "FRAG6: inuse 0 memory 0\n");
  root.Write("/proc/vmstat",
             "nr_free_pages 12345\npgpgin 1000\npgpgout 2000\npswpin 3\npswpout 4\n"
             "pgfault 50000\npgmajfault 60\noom_kill 2\nnuma_hit 7\n");
  root.Write("/proc/sys/fs/file-nr", "2048\t0\t9223372036854775807\n");
  // Kernel 6.x: 13 columns, the last the CPU number (CPU 1 is offline).
  root.Write("/proc/net/softnet_stat",
             "00000ab0 00000001 00000002 00000000 00000000 00000000 00000000 00000000 00000000 "
             "00000003 00000004 00000005 00000000\n"
             "00000010 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 "
             "00000000 00000000 00000000 00000002\n");
  root.Write("/proc/sys/net/netfilter/nf_conntrack_count", "12\n");
  root.Write("/proc/sys/net/netfilter/nf_conntrack_max", "262144\n");
  root.Write("/proc/net/stat/nf_conntrack", kConntrackStat);
  root.Write("/proc/sys/kernel/random/entropy_avail", "256\n");
  root.Write("/proc/sys/kernel/random/poolsize", "256\n");
  root.Write("/proc/net/arp",
             "IP address       HW type     Flags       HW address            Mask     Device\n"
             "10.0.0.1         0x1         0x2         52:54:00:12:34:56     *        eth0\n"
             "10.0.0.2         0x1         0x2         52:54:00:12:34:57     *        eth0\n"
             "192.168.1.1      0x1         0x2         52:54:00:12:34:58     *        eth1\n");
  root.Write("/proc/net/udp", kUdp);
  root.Write("/sys/class/net/eth0/carrier", "1\n");
  root.Write("/sys/class/net/eth0/mtu", "1500\n");
  root.Write("/sys/class/net/eth0/speed", "10000\n");
  root.Write("/sys/class/net/eth0/flags", "0x1003\n");
  root.Write("/sys/class/net/eth0/ifindex", "2\n");
  root.Write("/sys/class/net/eth0/carrier_changes", "4\n");
  root.Write("/sys/class/net/eth0/address", "52:54:00:12:34:56\n");
  root.Write("/sys/class/net/eth0/duplex", "full\n");
  root.Write("/sys/class/net/eth0/statistics/rx_nohandler", "7\n");
  root.Write("/sys/class/net/lo/mtu", "65536\n");
  root.Write("/sys/class/net/lo/flags", "0x9\n");
  root.Write("/sys/class/net/lo/speed", "-1\n");
}

// A clock that reports fixed adjtimex(2) values.
int FakeAdjtimex(::timex* t) {
  t->offset = 1500;      // microseconds (no STA_NANO)
  t->freq = 65536 * 10;  // 10 ppm, scaled by 2^16
  t->maxerror = 2000;
  t->esterror = 500;
  t->status = 1;  // STA_PLL
  t->constant = 7;
  t->tick = 10000;
  t->tai = 37;
  t->jitcnt = 3;
  return 0;  // TIME_OK
}

Snapshot CollectOnce(const NodeCollectorOptions& o) {
  auto c = NewNodeCollector(o);
  Snapshot s;
  SnapshotWriter w(&s, 1000);
  c->Collect(&w);
  w.Finish();
  return s;
}

TEST(NodeCollectorTest, NetstatSockstatVmstatWithNodeExporterFiltersAndTypes) {
  FakeRoot root;
  WriteNode(root);
  WriteParityFiles(root);
  Snapshot s = CollectOnce({.root = root.path(), .adjtimex = FakeAdjtimex});

  EXPECT_EQ(Value(s, "node_netstat_Tcp_CurrEstab"), 7);
  EXPECT_EQ(Value(s, "node_netstat_Tcp_InErrs"), 2);
  EXPECT_EQ(Value(s, "node_netstat_Tcp_ActiveOpens"), 100);
  EXPECT_EQ(Value(s, "node_netstat_Tcp_OutRsts"), 13);
  EXPECT_EQ(Value(s, "node_netstat_TcpExt_ListenDrops"), 6);
  EXPECT_EQ(Value(s, "node_netstat_TcpExt_SyncookiesFailed"), 3);
  EXPECT_EQ(Value(s, "node_netstat_TcpExt_TCPOFOQueue"), 9);
  EXPECT_EQ(Value(s, "node_netstat_IpExt_InOctets"), 123456);
  EXPECT_EQ(Value(s, "node_netstat_Ip_Forwarding"), 1);
  EXPECT_EQ(Value(s, "node_netstat_Icmp_InErrors"), 1);
  EXPECT_EQ(Value(s, "node_netstat_Udp_InErrors"), 1);
  EXPECT_EQ(Value(s, "node_netstat_UdpLite_InErrors"), 0);
  EXPECT_EQ(Value(s, "node_netstat_Ip6_InOctets"), 2000);
  EXPECT_EQ(Value(s, "node_netstat_Icmp6_InErrors"), 1);
  EXPECT_EQ(Value(s, "node_netstat_Udp6_InDatagrams"), 50);
  EXPECT_EQ(Value(s, "node_netstat_UdpLite6_InErrors"), 0);
  // Left out by the default field filter.
  EXPECT_EQ(s.Find("node_netstat_Tcp_MaxConn"), nullptr);
  EXPECT_EQ(s.Find("node_netstat_TcpExt_TCPRcvQDrop"), nullptr);
  EXPECT_EQ(s.Find("node_netstat_Ip_DefaultTTL"), nullptr);
  EXPECT_EQ(s.Find("node_netstat_Ip6_InReceives"), nullptr);
  const Family* estab = s.Find("node_netstat_Tcp_CurrEstab");
  ASSERT_NE(estab, nullptr);
  EXPECT_EQ(estab->type, MetricType::kUntyped);
  EXPECT_EQ(estab->help, "Statistic TcpCurrEstab.");

  const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  EXPECT_EQ(Value(s, "node_sockstat_sockets_used"), 230);
  EXPECT_EQ(Value(s, "node_sockstat_TCP_inuse"), 5);
  EXPECT_EQ(Value(s, "node_sockstat_TCP_tw"), 2);
  EXPECT_EQ(Value(s, "node_sockstat_TCP_mem"), 3);
  EXPECT_EQ(Value(s, "node_sockstat_TCP_mem_bytes"), 3 * page);
  EXPECT_EQ(Value(s, "node_sockstat_UDP_mem_bytes"), 2 * page);
  EXPECT_EQ(Value(s, "node_sockstat_FRAG_memory"), 0);
  EXPECT_EQ(Value(s, "node_sockstat_TCP6_inuse"), 3);
  EXPECT_EQ(s.Find("node_sockstat_TCP_inuse")->help, "Number of TCP sockets in state inuse.");
  EXPECT_EQ(s.Find("node_sockstat_TCP_inuse")->type, MetricType::kGauge);

  EXPECT_EQ(Value(s, "node_vmstat_pgfault"), 50000);
  EXPECT_EQ(Value(s, "node_vmstat_pgmajfault"), 60);
  EXPECT_EQ(Value(s, "node_vmstat_pgpgin"), 1000);
  EXPECT_EQ(Value(s, "node_vmstat_pswpout"), 4);
  EXPECT_EQ(Value(s, "node_vmstat_oom_kill"), 2);
  EXPECT_EQ(s.Find("node_vmstat_numa_hit"), nullptr);
  EXPECT_EQ(s.Find("node_vmstat_nr_free_pages"), nullptr);
  EXPECT_EQ(s.Find("node_vmstat_pgfault")->help, "/proc/vmstat information field pgfault.");
  EXPECT_EQ(s.Find("node_vmstat_pgfault")->type, MetricType::kUntyped);
}

// The os and selinux collectors and node_disk_info, as node_exporter serves
// them on Debian 12 (values from its output on this project's machines).
TEST(NodeCollectorTest, OsReleaseSelinuxAndDiskInfo) {
  FakeRoot root;
  WriteNode(root);
  root.Write("/etc/os-release",
             "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\n"
             "VERSION_ID=\"12\"\nVERSION=\"12 (bookworm)\"\nVERSION_CODENAME=bookworm\n"
             "ID=debian\n# a comment\nnot a key line\n");
  Snapshot s = CollectOnce({.root = root.path(), .adjtimex = FakeAdjtimex});
  EXPECT_EQ(Value(s, "node_os_info",
                  {{"id", "debian"},
                   {"name", "Debian GNU/Linux"},
                   {"pretty_name", "Debian GNU/Linux 12 (bookworm)"},
                   {"version", "12 (bookworm)"},
                   {"version_codename", "bookworm"},
                   {"version_id", "12"},
                   {"build_id", ""},
                   {"variant", ""}}),
            1);
  EXPECT_EQ(Value(s, "node_os_version", {{"id", "debian"}, {"id_like", ""}}), 12);
  EXPECT_EQ(Value(s, "node_selinux_enabled"), 0);
  EXPECT_EQ(s.Find("node_selinux_current_mode"), nullptr);
  const Family* disk = s.Find("node_disk_info");
  ASSERT_NE(disk, nullptr);
  EXPECT_EQ(Value(s, "node_disk_info", {{"device", "sda"}, {"major", "8"}, {"model", ""}}), 1);

  // /usr/lib/os-release when /etc has none; major.minor of a longer VERSION_ID;
  // SELinux enforcing; udev's properties of the disk.
  FakeRoot other;
  WriteNode(other);
  other.Write("/usr/lib/os-release", "ID=ubuntu\nID_LIKE=debian\nVERSION_ID='22.04.3'\n");
  other.Write("/sys/fs/selinux/enforce", "1\n");
  other.Write("/etc/selinux/config", "# SELINUX=disabled\nSELINUX=permissive\n");
  other.Write("/run/udev/data/b8:0",
              "S:disk/by-id/x\nE:ID_MODEL=Virtual_Disk\nE:ID_SERIAL_SHORT=6002248\n"
              "E:ID_PATH=acpi-VMBUS:00\nE:ID_REVISION=1.0\nE:ID_WWN=0x6002248\n");
  Snapshot t = CollectOnce({.root = other.path(), .adjtimex = FakeAdjtimex});
  EXPECT_EQ(Value(t, "node_os_version", {{"id", "ubuntu"}, {"id_like", "debian"}}), 22.04);
  EXPECT_EQ(Value(t, "node_os_info", {{"version_id", "22.04.3"}}), 1);
  EXPECT_EQ(Value(t, "node_selinux_enabled"), 1);
  EXPECT_EQ(Value(t, "node_selinux_current_mode"), 1);
  EXPECT_EQ(Value(t, "node_selinux_config_mode"), 0);
  EXPECT_EQ(Value(t, "node_disk_info",
                  {{"device", "sda"},
                   {"model", "Virtual_Disk"},
                   {"serial", "6002248"},
                   {"path", "acpi-VMBUS:00"},
                   {"revision", "1.0"},
                   {"wwn", "0x6002248"}}),
            1);
}

TEST(NodeCollectorTest, SmallProcfsCollectors) {
  FakeRoot root;
  WriteNode(root);
  WriteParityFiles(root);
  Snapshot s = CollectOnce({.root = root.path(), .adjtimex = FakeAdjtimex});

  EXPECT_EQ(Value(s, "node_filefd_allocated"), 2048);
  EXPECT_EQ(Value(s, "node_filefd_maximum"), 9223372036854775807.0);

  EXPECT_EQ(Value(s, "node_softnet_processed_total", {{"cpu", "0"}}), 0xab0);
  EXPECT_EQ(Value(s, "node_softnet_dropped_total", {{"cpu", "0"}}), 1);
  EXPECT_EQ(Value(s, "node_softnet_times_squeezed_total", {{"cpu", "0"}}), 2);
  EXPECT_EQ(Value(s, "node_softnet_received_rps_total", {{"cpu", "0"}}), 3);
  EXPECT_EQ(Value(s, "node_softnet_flow_limit_count_total", {{"cpu", "0"}}), 4);
  EXPECT_EQ(Value(s, "node_softnet_backlog_len", {{"cpu", "0"}}), 5);
  EXPECT_EQ(Value(s, "node_softnet_processed_total", {{"cpu", "2"}}), 16);
  EXPECT_EQ(Value(s, "node_softnet_processed_total", {{"cpu", "1"}}), std::nullopt);
  EXPECT_EQ(s.Find("node_softnet_processed_total")->type, MetricType::kCounter);

  EXPECT_EQ(Value(s, "node_nf_conntrack_entries"), 12);
  EXPECT_EQ(Value(s, "node_nf_conntrack_entries_limit"), 262144);
  EXPECT_EQ(Value(s, "node_nf_conntrack_stat_found"), 2);
  EXPECT_EQ(Value(s, "node_nf_conntrack_stat_invalid"), 4);
  EXPECT_EQ(Value(s, "node_nf_conntrack_stat_ignore"), 6);
  EXPECT_EQ(Value(s, "node_nf_conntrack_stat_drop"), 8);
  EXPECT_EQ(Value(s, "node_nf_conntrack_stat_search_restart"), 11);

  EXPECT_EQ(Value(s, "node_entropy_available_bits"), 256);
  EXPECT_EQ(Value(s, "node_entropy_pool_size_bits"), 256);

  EXPECT_EQ(Value(s, "node_arp_entries", {{"device", "eth0"}}), 2);
  EXPECT_EQ(Value(s, "node_arp_entries", {{"device", "eth1"}}), 1);

  EXPECT_EQ(Value(s, "node_udp_queues", {{"ip", "v4"}, {"queue", "tx"}}), 16);
  EXPECT_EQ(Value(s, "node_udp_queues", {{"ip", "v4"}, {"queue", "rx"}}), 512);
  EXPECT_EQ(Value(s, "node_udp_queues", {{"ip", "v6"}, {"queue", "rx"}}), std::nullopt);

  // Discards (kernel 4.18+) and flushes (5.5+) where /proc/diskstats has them.
  EXPECT_EQ(Value(s, "node_disk_discards_completed_total", {{"device", "nvme1n1"}}), 10);
  EXPECT_EQ(Value(s, "node_disk_discards_merged_total", {{"device", "nvme1n1"}}), 1);
  EXPECT_EQ(Value(s, "node_disk_discarded_sectors_total", {{"device", "nvme1n1"}}), 400);
  EXPECT_EQ(Value(s, "node_disk_discard_time_seconds_total", {{"device", "nvme1n1"}}), 0.02);
  EXPECT_EQ(Value(s, "node_disk_flush_requests_total", {{"device", "nvme1n1"}}), 5);
  EXPECT_EQ(Value(s, "node_disk_flush_requests_time_seconds_total", {{"device", "nvme1n1"}}), 0.03);
  EXPECT_EQ(Value(s, "node_disk_discards_completed_total", {{"device", "sda"}}), 0);
  EXPECT_EQ(Value(s, "node_disk_flush_requests_total", {{"device", "sda"}}), std::nullopt);
  EXPECT_EQ(Value(s, "node_disk_discards_completed_total", {{"device", "nvme0n1"}}), std::nullopt);

  for (const char* c : {"arp",        "conntrack",  "cpu",     "diskstats", "entropy",  "filefd",
                        "filesystem", "loadavg",    "meminfo", "netclass",  "netdev",   "netstat",
                        "pressure",   "sockstat",   "softnet", "stat",      "textfile", "time",
                        "timex",      "udp_queues", "uname",   "vmstat"}) {
    EXPECT_EQ(Value(s, "node_scrape_collector_success", {{"collector", c}}), 1) << c;
    EXPECT_TRUE(Value(s, "node_scrape_collector_duration_seconds", {{"collector", c}}).has_value())
        << c;
  }
}

TEST(NodeCollectorTest, NetclassAndNohandler) {
  FakeRoot root;
  WriteNode(root);
  WriteParityFiles(root);
  Snapshot s = CollectOnce({.root = root.path(), .adjtimex = FakeAdjtimex});
  EXPECT_EQ(Value(s, "node_network_carrier", {{"device", "eth0"}}), 1);
  EXPECT_EQ(Value(s, "node_network_mtu_bytes", {{"device", "eth0"}}), 1500);
  EXPECT_EQ(Value(s, "node_network_mtu_bytes", {{"device", "lo"}}), 65536);
  EXPECT_EQ(Value(s, "node_network_speed_bytes", {{"device", "eth0"}}), 10000.0 * 125000);
  EXPECT_EQ(Value(s, "node_network_speed_bytes", {{"device", "lo"}}), -125000);
  EXPECT_EQ(Value(s, "node_network_flags", {{"device", "eth0"}}), 0x1003);
  EXPECT_EQ(Value(s, "node_network_iface_id", {{"device", "eth0"}}), 2);
  EXPECT_EQ(Value(s, "node_network_carrier_changes_total", {{"device", "eth0"}}), 4);
  EXPECT_EQ(Value(s, "node_network_carrier", {{"device", "lo"}}), std::nullopt);  // no file
  EXPECT_EQ(s.Find("node_network_carrier_changes_total")->type, MetricType::kCounter);
  EXPECT_EQ(s.Find("node_network_mtu_bytes")->help, "Network device property: mtu_bytes");
  EXPECT_EQ(Value(s, "node_network_info",
                  {{"address", "52:54:00:12:34:56"},
                   {"device", "eth0"},
                   {"duplex", "full"},
                   {"operstate", "up"}}),
            1);
  EXPECT_EQ(Value(s, "node_network_receive_nohandler_total", {{"device", "eth0"}}), 7);
  EXPECT_EQ(Value(s, "node_network_receive_nohandler_total", {{"device", "lo"}}), std::nullopt);
}

TEST(NodeCollectorTest, TimexFromTheInjectedAdjtimex) {
  FakeRoot root;
  Snapshot s = CollectOnce({.root = root.path(), .adjtimex = FakeAdjtimex});
  EXPECT_EQ(Value(s, "node_timex_offset_seconds"), 0.0015);
  EXPECT_DOUBLE_EQ(*Value(s, "node_timex_frequency_adjustment_ratio"), 1.00001);
  EXPECT_EQ(Value(s, "node_timex_maxerror_seconds"), 0.002);
  EXPECT_EQ(Value(s, "node_timex_estimated_error_seconds"), 0.0005);
  EXPECT_EQ(Value(s, "node_timex_status"), 1);
  EXPECT_EQ(Value(s, "node_timex_loop_time_constant"), 7);
  EXPECT_EQ(Value(s, "node_timex_tick_seconds"), 0.01);
  EXPECT_EQ(Value(s, "node_timex_tai_offset_seconds"), 37);
  EXPECT_EQ(Value(s, "node_timex_pps_jitter_total"), 3);
  EXPECT_EQ(Value(s, "node_timex_sync_status"), 1);
  EXPECT_EQ(s.Find("node_timex_pps_jitter_total")->type, MetricType::kCounter);
  EXPECT_EQ(s.Find("node_timex_offset_seconds")->type, MetricType::kGauge);

  // STA_NANO: offsets in nanoseconds; TIME_ERROR: not synchronised.
  Snapshot nano = CollectOnce({.root = root.path(), .adjtimex = [](::timex* t) {
                                 t->offset = 1500;
                                 t->status = 0x2000;
                                 return 5;
                               }});
  EXPECT_DOUBLE_EQ(*Value(nano, "node_timex_offset_seconds"), 1.5e-6);
  EXPECT_EQ(Value(nano, "node_timex_sync_status"), 0);
}

TEST(NodeCollectorTest, CollectorSwitchesFollowNodeExporterNames) {
  FakeRoot root;
  WriteNode(root);
  WriteParityFiles(root);
  NodeCollectorOptions o{.root = root.path(),
                         .collectors = {{"netstat", false}, {"cpu", false}, {"systemd", true}},
                         .adjtimex = FakeAdjtimex};
  EXPECT_FALSE(NodeCollectorEnabled(o, "netstat"));
  EXPECT_TRUE(NodeCollectorEnabled(o, "systemd"));     // known to node_exporter, not served here
  EXPECT_FALSE(NodeCollectorEnabled(o, "processes"));  // off by default
  EXPECT_TRUE(NodeCollectorEnabled(o, "vmstat"));
  EXPECT_FALSE(NodeCollectorEnabled(o, "no_such_collector"));
  Snapshot s = CollectOnce(o);
  EXPECT_EQ(s.Find("node_netstat_Tcp_CurrEstab"), nullptr);
  EXPECT_EQ(s.Find("node_cpu_seconds_total"), nullptr);
  EXPECT_NE(s.Find("node_boot_time_seconds"), nullptr);  // the stat collector stays on
  EXPECT_EQ(Value(s, "node_scrape_collector_success", {{"collector", "netstat"}}), std::nullopt);
  EXPECT_EQ(Value(s, "node_scrape_collector_success", {{"collector", "systemd"}}), std::nullopt);
  EXPECT_EQ(Value(s, "node_scrape_collector_success", {{"collector", "vmstat"}}), 1);

  // The table: names unique, the implemented ones all on by default.
  std::vector<std::string_view> names;
  for (const NodeCollectorInfo& c : NodeExporterCollectors()) {
    names.push_back(c.name);
    if (c.implemented) {
      EXPECT_TRUE(c.default_on) << c.name;
      EXPECT_FALSE(c.files.empty()) << c.name;
    }
  }
  std::vector<std::string_view> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
  EXPECT_EQ(FindNodeExporterCollector("netclass")->name, "netclass");
  EXPECT_EQ(FindNodeExporterCollector("netklass"), nullptr);
}

// Malformed files: nothing crashes, the collector that read them reports
// success 0, and the others are unaffected.
TEST(NodeCollectorTest, MalformedFilesFailTheirCollectorOnly) {
  FakeRoot root;
  WriteNode(root);
  WriteParityFiles(root);
  root.Write("/proc/net/netstat", "TcpExt: A B C\nTcpExt: 1 2\n");
  root.Write("/proc/net/sockstat", "TCP: inuse x\n");
  root.Write("/proc/vmstat", "pgfault abc\n");
  root.Write("/proc/sys/fs/file-nr", "garbage\n");
  root.Write("/proc/net/softnet_stat", "zz 1 2\n");
  root.Write("/proc/sys/net/netfilter/nf_conntrack_count", "twelve\n");
  root.Write("/proc/sys/kernel/random/entropy_avail", "\n");
  root.Write("/proc/net/arp", "IP address HW type Flags HW address Mask Device\n1.2.3.4 0x1\n");
  root.Write("/proc/net/udp", "header\n  1: 00:00 00:00 07 zz\n");
  root.Write("/proc/diskstats", "   8       0 sda 1 2\n");
  root.Write("/proc/loadavg", "abc\n");
  root.Write("/proc/meminfo", "garbage\n");
  root.Write("/proc/net/dev", "h1\nh2\n  eth0: 1 2 x\n");
  Snapshot s = CollectOnce({.root = root.path(), .adjtimex = FakeAdjtimex});
  for (const char* c :
       {"netstat", "sockstat", "vmstat", "filefd", "softnet", "conntrack", "entropy", "arp",
        "udp_queues", "diskstats", "loadavg", "meminfo", "netdev"}) {
    EXPECT_EQ(Value(s, "node_scrape_collector_success", {{"collector", c}}), 0) << c;
  }
  for (const char* c : {"cpu", "stat", "timex", "netclass", "filesystem", "pressure"}) {
    EXPECT_EQ(Value(s, "node_scrape_collector_success", {{"collector", c}}), 1) << c;
  }
  EXPECT_EQ(s.Find("node_vmstat_pgfault"), nullptr);
  EXPECT_EQ(s.Find("node_filefd_allocated"), nullptr);
  EXPECT_NE(s.Find("node_cpu_seconds_total"), nullptr);
}

// The same garbage in every file the collectors read: no crash, no
// exception, and every file-based collector reports failure or stays
// consistent on the next collection.
TEST(NodeCollectorTest, GarbageEverywhereDoesNotCrash) {
  const std::string garbage[] = {
      "",
      "\n\n\n",
      ":",
      "x: y z\n",
      std::string("\0\0\0\xff\xfe", 5),
      "99999999999999999999999999999 -1 0x 0xzz\n",
      "a:\nb: 1 2 3\n: : :\n",
      std::string(70000, '9'),
      "cpu0 1\nintr\nbtime x\nTcpExt:\nTcpExt: 1\n",
  };
  const char* files[] = {"/proc/stat",
                         "/proc/loadavg",
                         "/proc/meminfo",
                         "/proc/diskstats",
                         "/proc/mounts",
                         "/proc/net/dev",
                         "/proc/pressure/io",
                         "/proc/net/netstat",
                         "/proc/net/snmp",
                         "/proc/net/snmp6",
                         "/proc/net/sockstat",
                         "/proc/net/sockstat6",
                         "/proc/vmstat",
                         "/proc/sys/fs/file-nr",
                         "/proc/net/softnet_stat",
                         "/proc/sys/net/netfilter/nf_conntrack_count",
                         "/proc/sys/net/netfilter/nf_conntrack_max",
                         "/proc/net/stat/nf_conntrack",
                         "/proc/sys/kernel/random/entropy_avail",
                         "/proc/sys/kernel/random/poolsize",
                         "/proc/net/arp",
                         "/proc/net/udp",
                         "/proc/net/udp6",
                         "/sys/class/net/eth0/mtu",
                         "/sys/class/net/eth0/flags",
                         "/sys/class/net/eth0/statistics/rx_nohandler",
                         "/sys/class/net/eth0/operstate"};
  for (const std::string& g : garbage) {
    FakeRoot root;
    for (const char* f : files) root.Write(f, g);
    auto c = NewNodeCollector({.root = root.path(), .adjtimex = FakeAdjtimex});
    Snapshot s;
    for (int round = 0; round < 2; ++round) {
      SnapshotWriter w(&s, 1000 + round);
      c->Collect(&w);
      w.Finish();
    }
    for (const char* name : {"netstat", "sockstat", "vmstat", "filefd", "softnet", "conntrack",
                             "entropy", "loadavg", "meminfo"}) {
      std::optional<double> ok = Value(s, "node_scrape_collector_success", {{"collector", name}});
      ASSERT_TRUE(ok.has_value()) << name;
      if (g.empty() || g == "\n\n\n") continue;  // an empty file is not malformed for all
      EXPECT_EQ(*ok, 0) << name << " on garbage #" << (&g - garbage);
    }
    for (size_t i = 1; i < s.families.size(); ++i) {
      EXPECT_LT(s.families[i - 1].name, s.families[i].name);
    }
  }
}

TEST(NodeCollectorTest, TextfileDirectoryMergesFilesAndReportsBadOnes) {
  FakeRoot root;
  root.Write("/tf/a.prom",
             "# HELP job_last_success_seconds Last success.\n"
             "# TYPE job_last_success_seconds gauge\n"
             "job_last_success_seconds{job=\"backup\"} 1.7e9\n");
  root.Write("/tf/b.prom",
             "# TYPE job_last_success_seconds gauge\n"
             "job_last_success_seconds{job=\"sync\"} 1.8e9\n");
  root.Write("/tf/c.prom", "bad line {{{\n");
  root.Write("/tf/ignored.txt", "not_served 1\n");
  Snapshot s = CollectOnce(
      {.root = root.path(), .textfile_directory = root.path() + "/tf", .adjtimex = FakeAdjtimex});
  const Family* f = s.Find("job_last_success_seconds");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->series.size(), 2u);
  EXPECT_EQ(f->type, MetricType::kGauge);
  EXPECT_EQ(f->help, "Last success.");
  EXPECT_EQ(Value(s, "job_last_success_seconds", {{"job", "sync"}}), 1.8e9);
  EXPECT_EQ(s.Find("not_served"), nullptr);
  EXPECT_EQ(Value(s, "node_textfile_scrape_error"), 1);
  EXPECT_GT(*Value(s, "node_textfile_mtime_seconds", {{"file", root.path() + "/tf/a.prom"}}), 0);
  EXPECT_TRUE(Value(s, "node_textfile_mtime_seconds", {{"file", root.path() + "/tf/b.prom"}}));
  EXPECT_FALSE(Value(s, "node_textfile_mtime_seconds", {{"file", root.path() + "/tf/c.prom"}}));
  EXPECT_EQ(Value(s, "node_scrape_collector_success", {{"collector", "textfile"}}), 1);

  // Fixed, then a missing directory.
  root.Write("/tf/c.prom", "other 2\n");
  auto c = NewNodeCollector(
      {.root = root.path(), .textfile_directory = root.path() + "/tf", .adjtimex = FakeAdjtimex});
  Snapshot t;
  {
    SnapshotWriter w(&t, 1);
    c->Collect(&w);
    w.Finish();
  }
  EXPECT_EQ(Value(t, "node_textfile_scrape_error"), 0);
  EXPECT_EQ(Value(t, "other"), 2);
  EXPECT_EQ(t.Find("other")->type, MetricType::kUntyped);
  Snapshot missing = CollectOnce(
      {.root = root.path(), .textfile_directory = root.path() + "/nope", .adjtimex = FakeAdjtimex});
  EXPECT_EQ(Value(missing, "node_textfile_scrape_error"), 1);
}

// The steady state of the file-based collectors allocates nothing: files
// stay open, names are kept, the snapshot is overwritten in place. (netclass
// and textfile list a directory on each collection and are left out here.)
TEST(NodeCollectorTest, SteadyStateCollectionDoesNotAllocate) {
  FakeRoot root;
  WriteNode(root);
  WriteParityFiles(root);
  auto c = NewNodeCollector({.root = root.path(),
                             .collectors = {{"netclass", false}, {"textfile", false}},
                             .adjtimex = FakeAdjtimex});
  Snapshot s;
  size_t counted = 0;
  for (int round = 0; round < 4; ++round) {
    SnapshotWriter w(&s, 1000 + round);
    g_allocations = 0;
    g_counting = true;
    c->Collect(&w);
    g_counting = false;
    counted = g_allocations;
    w.Finish();
  }
  EXPECT_EQ(counted, 0u);
  EXPECT_NE(s.Find("node_netstat_Tcp_CurrEstab"), nullptr);
  EXPECT_NE(s.Find("node_softnet_processed_total"), nullptr);
}

TEST(NodeCollectorTest, TextfileNamesThatCollideWithCollectorsAreRejected) {
  FakeRoot root;
  WriteNode(root);
  root.Write("/tf/a.prom", "node_load1 99\nnode_scrape_collector_success 1\nmine 3\n");
  Snapshot s = CollectOnce(
      {.root = root.path(), .textfile_directory = root.path() + "/tf", .adjtimex = FakeAdjtimex});
  EXPECT_EQ(Value(s, "node_load1"), 0.52);  // the collector's, once
  size_t load1 = 0;
  for (const Family& f : s.families) load1 += f.name == "node_load1" ? 1 : 0;
  EXPECT_EQ(load1, 1u);
  EXPECT_EQ(Value(s, "mine"), 3);
  EXPECT_EQ(Value(s, "node_textfile_scrape_error"), 1);
  EXPECT_EQ(Value(s, "node_scrape_collector_success", {{"collector", "textfile"}}), 1);
}

TEST(NodeCollectorTest, TimeZoneAndClocksource) {
  FakeRoot root;
  root.Write("/sys/devices/system/clocksource/clocksource0/available_clocksource",
             "tsc kvm-clock \n");
  root.Write("/sys/devices/system/clocksource/clocksource0/current_clocksource", "tsc\n");
  Snapshot s = CollectOnce({.root = root.path(), .adjtimex = FakeAdjtimex});
  EXPECT_EQ(Value(s, "node_time_clocksource_available_info",
                  {{"clocksource", "kvm-clock"}, {"device", "0"}}),
            1);
  EXPECT_EQ(s.Find("node_time_clocksource_available_info")->series.size(), 2u);
  EXPECT_EQ(Value(s, "node_time_clocksource_current_info", {{"clocksource", "tsc"}}), 1);
  const Family* zone = s.Find("node_time_zone_offset_seconds");
  ASSERT_NE(zone, nullptr);
  ASSERT_EQ(zone->series.size(), 1u);
  EXPECT_EQ(zone->series[0].labels[0].first, "time_zone");
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
