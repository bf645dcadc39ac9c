// Host checks on fake /proc, /sys, /dev and /etc trees: a pass and each failure
// class per check, and parameter errors. The measuring probes are in
// host_checks_probes_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
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
using ::testing::Not;
namespace fs = std::filesystem;

const Registry& HostRegistry() {
  static const Registry* r = [] {
    auto* reg = new Registry;
    RegisterHostChecks(reg);
    return reg;
  }();
  return *r;
}

// Builds check `id` from a profile whose `checks:` section is `checks_yaml`
// (already indented by two spaces).
Result<std::unique_ptr<Check>> Build(const std::string& id, const std::string& checks_yaml) {
  ASSIGN_OR_RETURN(Config c,
                   Config::LoadString("name: t\nchecks:\n" + checks_yaml, "profile.yaml"));
  auto it = HostRegistry().factories().find(id);
  if (it == HostRegistry().factories().end()) return NotFound("no factory for " + id);
  return it->second(c, "checks." + id);
}

CheckResult RunCheck(const std::string& id, const std::string& checks_yaml, const Context& ctx) {
  auto check = Build(id, checks_yaml);
  EXPECT_TRUE(check.ok()) << check.status().ToString();
  if (!check.ok()) return CheckResult{};
  EXPECT_EQ((*check)->name(), id);
  CheckResult r = (*check)->Run(ctx);
  EXPECT_EQ(r.name, id);
  return r;
}

Context Ctx(const FakeRoot& root) {
  Context ctx;
  ctx.root_dir = root.path();
  return ctx;
}

std::string Show(const CheckResult& r) {
  return std::string(OutcomeName(r.outcome)) + " | " + r.message + " | " + r.measured + " | " +
         r.threshold + " | " + r.fault_code;
}

TEST(HostChecksTest, RegistersEveryHostCheckOnce) {
  Registry r;
  RegisterHostChecks(&r);
  EXPECT_TRUE(r.duplicates().empty());
  for (const char* id : {"cpu", "memory", "swap", "filesystems", "nvme", "network",
                         "accelerated_networking", "infiniband", "services", "containers",
                         "memory_bandwidth", "disk_bandwidth", "collective", "gemm"}) {
    EXPECT_EQ(r.factories().count(id), 1u) << id;
  }
  EXPECT_EQ(r.factories().size(), 14u);
}

// ---------------------------------------------------------------------------
// cpu

void WriteCpus(const FakeRoot& root) {
  // 2 sockets x 2 cores, no SMT.
  std::string cpuinfo;
  for (int i = 0; i < 4; ++i) {
    cpuinfo += "processor\t: " + std::to_string(i) +
               "\nmodel name\t: Test CPU\nphysical id\t: " + std::to_string(i / 2) +
               "\ncore id\t\t: " + std::to_string(i % 2) + "\n\n";
    const std::string topo = "/sys/devices/system/cpu/cpu" + std::to_string(i) + "/topology/";
    root.Write(topo + "physical_package_id", std::to_string(i / 2) + "\n");
    root.Write(topo + "core_id", std::to_string(i % 2) + "\n");
  }
  root.Write("/proc/cpuinfo", cpuinfo);
  root.Write("/sys/devices/system/cpu/online", "0-3\n");
}

TEST(CpuCheckTest, PassesOnExactCounts) {
  FakeRoot root;
  WriteCpus(root);
  CheckResult r = RunCheck("cpu", "  cpu: {sockets: 2, cores: 4, threads: 4}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  EXPECT_EQ(r.measured, "2 sockets, 4 cores, 4 threads");
  EXPECT_THAT(r.threshold, HasSubstr("2 sockets"));
}

TEST(CpuCheckTest, FailsOnWrongThreadsOrSockets) {
  FakeRoot root;
  WriteCpus(root);
  CheckResult r = RunCheck("cpu", "  cpu: {threads: 8}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("4 threads (expected 8)"));
  r = RunCheck("cpu", "  cpu: {sockets: 1, cores: 4}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("2 sockets (expected 1)"));
  EXPECT_THAT(r.message, Not(HasSubstr("cores (expected")));
}

TEST(CpuCheckTest, CpuinfoFallbackAndOfflineCpu) {
  FakeRoot root;
  WriteCpus(root);
  // CPU 3 offline: 3 threads; sysfs topology of the rest still gives 2 sockets, 3 cores.
  root.Write("/sys/devices/system/cpu/online", "0-2\n");
  CheckResult r = RunCheck("cpu", "  cpu: {sockets: 2, cores: 4, threads: 4}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_EQ(r.measured, "2 sockets, 3 cores, 3 threads");
  // No sysfs at all: /proc/cpuinfo's physical id / core id decide.
  FakeRoot bare;
  bare.Write("/proc/cpuinfo",
             "processor : 0\nphysical id : 0\ncore id : 0\n\nprocessor : 1\nphysical id : 0\n"
             "core id : 0\n\n");
  r = RunCheck("cpu", "  cpu: {sockets: 1, cores: 1, threads: 2}\n", Ctx(bare));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
}

TEST(CpuCheckTest, MissingCpuinfoIsAnError) {
  FakeRoot root;
  CheckResult r = RunCheck("cpu", "  cpu: {threads: 4}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kError) << Show(r);
  EXPECT_EQ(r.fault_code, "NHCNA");
}

// ---------------------------------------------------------------------------
// memory and swap

void WriteMeminfo(const FakeRoot& root, uint64_t total_kib, uint64_t swap_kib) {
  root.Write("/proc/meminfo", "MemTotal:       " + std::to_string(total_kib) +
                                  " kB\nMemFree:         1000 kB\nMemAvailable:    2000 kB\n"
                                  "SwapTotal:      " +
                                  std::to_string(swap_kib) + " kB\nSwapFree:  0 kB\n");
}

TEST(MemoryCheckTest, WithinTolerancePasses) {
  FakeRoot root;
  WriteMeminfo(root, 16000 * 1024, 0);  // 16000 MiB
  CheckResult r = RunCheck("memory", "  memory: {min: 16000M, max: 16000M}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  // 3% below the minimum is still fine by default.
  r = RunCheck("memory", "  memory: {min: 16400M}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  // A wider tolerance accepts more.
  r = RunCheck("memory", "  memory: {min: 17000M, tolerance: 10%}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
}

TEST(MemoryCheckTest, OutOfToleranceFails) {
  FakeRoot root;
  WriteMeminfo(root, 16000 * 1024, 0);
  CheckResult r = RunCheck("memory", "  memory: {min: 17000M, max: 17000M}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("below"));
  r = RunCheck("memory", "  memory: {min: 15000M, max: 15000M, tolerance: 3%}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("above"));
  // Zero tolerance: exact.
  r = RunCheck("memory", "  memory: {min: 16001M, tolerance: 0%}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
}

TEST(SwapCheckTest, NoSwapPassesSwapFails) {
  FakeRoot root;
  WriteMeminfo(root, 1024, 0);
  CheckResult r = RunCheck("swap", "  swap: {max: 0}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  WriteMeminfo(root, 1024, 2 * 1024 * 1024);
  // Without max the check only reports.
  r = RunCheck("swap", "  swap: true\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  EXPECT_EQ(r.threshold, "");
  r = RunCheck("swap", "  swap: {max: 0}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("swapoff"));
  EXPECT_EQ(r.measured, "2 GiB");
  r = RunCheck("swap", "  swap: {max: 4G}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
}

// ---------------------------------------------------------------------------
// filesystems

void WriteMounts(const FakeRoot& root) {
  root.Write("/proc/mounts",
             "/dev/sda1 / ext4 rw,relatime 0 0\n"
             "proc /proc proc rw,nosuid 0 0\n"
             "/dev/md0 /data xfs rw,noatime 0 0\n"
             "/dev/sdb1 /ro ext4 ro,relatime 0 0\n"
             "nfs:/export /my\\040share nfs4 rw,vers=4.1 0 0\n");
  root.Mkdir("/data/sub");
  root.Mkdir("/ro");
  root.Mkdir("/scratch");
  root.Mkdir("/my share");
}

TEST(FilesystemsCheckTest, MountedRwWithSpacePasses) {
  FakeRoot root;
  WriteMounts(root);
  CheckResult r = RunCheck("filesystems",
                           "  filesystems:\n"
                           "    - {path: /data, min_free: 1M}\n"
                           "    - {path: /data/sub, min_free: 0%}\n"
                           "    - {path: /ro, rw: false}\n"
                           "    - /my share\n",
                           Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  EXPECT_THAT(r.measured, HasSubstr("/data: xfs rw"));
  EXPECT_THAT(r.measured, HasSubstr("/my share: nfs4 rw"));
}

TEST(FilesystemsCheckTest, MissingMountFails) {
  FakeRoot root;
  WriteMounts(root);
  // /scratch exists and lies on "/", which is enough for a plain directory...
  CheckResult r = RunCheck("filesystems", "  filesystems: [{path: /scratch}]\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  EXPECT_THAT(r.measured, HasSubstr("(on /)"));
  // ...but not when /etc/fstab says it is a mount point of its own.
  root.Write("/etc/fstab",
             "# comment\nUUID=1 / ext4 defaults 0 1\n/dev/md0 /scratch xfs defaults,nofail 0 2\n"
             "/swapfile none swap sw 0 0\n");
  r = RunCheck("filesystems", "  filesystems: [{path: /scratch}, {path: /data}]\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("/scratch is in /etc/fstab but not mounted"));
  EXPECT_THAT(r.message, Not(HasSubstr("/data")));
  // A path that does not exist at all.
  r = RunCheck("filesystems", "  filesystems: [{path: /shared/home}]\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("/shared/home does not exist"));
  // A mount table without "/" leaves paths on no filesystem.
  root.Write("/proc/mounts", "/dev/md0 /data xfs rw 0 0\n");
  r = RunCheck("filesystems", "  filesystems: [{path: /ro}]\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("no mounted filesystem"));
}

TEST(FilesystemsCheckTest, ReadOnlyMountFails) {
  FakeRoot root;
  WriteMounts(root);
  CheckResult r = RunCheck("filesystems", "  filesystems: [{path: /ro}]\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("read-only"));
}

TEST(FilesystemsCheckTest, LowFreeSpaceFails) {
  FakeRoot root;
  WriteMounts(root);
  CheckResult r =
      RunCheck("filesystems", "  filesystems: [{path: /data, min_free: 1000T}]\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("below 1000 TiB"));
  r = RunCheck("filesystems", "  filesystems: [{path: /, min_free: 100%}]\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
}

TEST(FilesystemsCheckTest, EmptyListSkips) {
  FakeRoot root;
  WriteMounts(root);
  EXPECT_EQ(RunCheck("filesystems", "  filesystems: []\n", Ctx(root)).outcome, Outcome::kSkip);
  EXPECT_TRUE(Build("filesystems", "  filesystems: [{path: /}]\n").value()->isolate());
}

// ---------------------------------------------------------------------------
// nvme

TEST(NvmeCheckTest, CountsNamespacesAndScratch) {
  FakeRoot root;
  for (const char* d : {"/dev/nvme0", "/dev/nvme0n1", "/dev/nvme0n1p1", "/dev/nvme1n1",
                        "/dev/nvme1n2", "/dev/sda"}) {
    root.Write(d, "");
  }
  root.Write("/proc/mounts", "/dev/sda1 / ext4 rw 0 0\n/dev/md0 /mnt/nvme xfs rw 0 0\n");
  CheckResult r = RunCheck("nvme", "  nvme: {count: 2, scratch: /mnt/nvme}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  EXPECT_THAT(r.measured, HasSubstr("2 NVMe"));
  EXPECT_THAT(r.message, HasSubstr("/dev/md0"));

  r = RunCheck("nvme", "  nvme: {count: 3}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_EQ(r.fault_code, "NHC2023");

  r = RunCheck("nvme", "  nvme: {count: 2, scratch: /mnt/resource_nvme}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("not mounted"));
  EXPECT_EQ(r.fault_code, "");
}

TEST(NvmeCheckTest, FallsBackToSysfsControllers) {
  FakeRoot root;
  root.Mkdir("/dev");
  root.Mkdir("/sys/class/nvme/nvme0");
  root.Mkdir("/sys/class/nvme/nvme1");
  CheckResult r = RunCheck("nvme", "  nvme: {count: 2}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("/sys/class/nvme"));
  r = RunCheck("nvme", "  nvme: {count: 8}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
}

// ---------------------------------------------------------------------------
// network and accelerated networking

void WriteIf(const FakeRoot& root, const std::string& name, const std::string& state, int type,
             const std::string& flags = "0x1003") {
  root.Write("/sys/class/net/" + name + "/operstate", state + "\n");
  root.Write("/sys/class/net/" + name + "/type", std::to_string(type) + "\n");
  root.Write("/sys/class/net/" + name + "/flags", flags + "\n");
}

void LinkDriver(const FakeRoot& root, const std::string& ifname, const std::string& driver) {
  root.Mkdir("/sys/bus/pci/drivers/" + driver);
  const std::string dev = "/sys/class/net/" + ifname + "/device";
  root.Mkdir(dev);
  fs::create_directory_symlink(root.path() + "/sys/bus/pci/drivers/" + driver,
                               root.path() + dev + "/driver");
}

TEST(NetworkCheckTest, ListedInterfacesUpOrDown) {
  FakeRoot root;
  WriteIf(root, "lo", "unknown", 772, "0x9");
  WriteIf(root, "eth0", "up", 1);
  WriteIf(root, "ib0", "down", 32, "0x1002");
  WriteIf(root, "tun0", "unknown", 65534, "0x1091");
  CheckResult r = RunCheck("network", "  network: {up: [eth0, lo, tun0]}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  r = RunCheck("network", "  network: {up: [eth0, ib0]}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("ib0 is down"));
  r = RunCheck("network", "  network: {up: [eth9]}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("eth9 does not exist"));
}

TEST(NetworkCheckTest, EmptyListNeedsOneNonLoopbackUp) {
  FakeRoot root;
  WriteIf(root, "lo", "unknown", 772, "0x9");
  WriteIf(root, "eth0", "up", 1);
  CheckResult r = RunCheck("network", "  network: {}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("eth0"));
  WriteIf(root, "eth0", "down", 1, "0x1002");
  r = RunCheck("network", "  network: true\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
}

TEST(AcceleratedNetworkingCheckTest, FindsTheMellanoxVf) {
  FakeRoot root;
  WriteIf(root, "eth0", "up", 1);
  LinkDriver(root, "eth0", "hv_netvsc");
  WriteIf(root, "ib0", "up", 32);
  LinkDriver(root, "ib0", "mlx5_core");  // InfiniBand, not the Ethernet VF
  CheckResult r = RunCheck("accelerated_networking", "  accelerated_networking: {}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("Accelerated Networking"));
  r = RunCheck("accelerated_networking", "  accelerated_networking: {required: false}\n",
               Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);

  WriteIf(root, "enP30832s1", "up", 1);
  LinkDriver(root, "enP30832s1", "mlx5_core");
  r = RunCheck("accelerated_networking", "  accelerated_networking: {required: true}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  EXPECT_THAT(r.measured, HasSubstr("enP30832s1 (mlx5_core)"));
  EXPECT_THAT(r.measured, Not(HasSubstr("ib0")));
}

// ---------------------------------------------------------------------------
// infiniband

void WritePort(const FakeRoot& root, const std::string& dev, int port, const std::string& state,
               const std::string& rate) {
  const std::string dir = "/sys/class/infiniband/" + dev + "/ports/" + std::to_string(port);
  root.Write(dir + "/state", state + "\n");
  root.Write(dir + "/rate", rate + "\n");
}

TEST(InfinibandCheckTest, ActivePortsAtRatePass) {
  FakeRoot root;
  for (int i = 0; i < 4; ++i) {
    WritePort(root, "mlx5_ib" + std::to_string(i), 1, "4: ACTIVE", "400 Gb/sec (4X NDR)");
  }
  WritePort(root, "mlx5_an0", 1, "4: ACTIVE", "100 Gb/sec (4X EDR)");
  CheckResult r = RunCheck(
      "infiniband", "  infiniband: {rate_gbps: 400, count: 4, ports: 'mlx5_ib*:1'}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  EXPECT_THAT(r.measured, HasSubstr("4 of 4 active"));
  // Without the glob, mlx5_an0 at 100 Gb/s is below 400.
  r = RunCheck("infiniband", "  infiniband: {rate_gbps: 400}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_EQ(r.fault_code, "NHC2003");
}

TEST(InfinibandCheckTest, PortDownAndSlowPortFail) {
  FakeRoot root;
  WritePort(root, "mlx5_ib0", 1, "4: ACTIVE", "400 Gb/sec (4X NDR)");
  WritePort(root, "mlx5_ib1", 1, "1: DOWN", "10 Gb/sec (4X SDR)");
  CheckResult r = RunCheck("infiniband", "  infiniband: {rate_gbps: 400, count: 2}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("mlx5_ib1:1 1: DOWN"));
  // No count: every matching port must be active.
  r = RunCheck("infiniband", "  infiniband: {}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  // A count the active ports meet passes even with one down.
  r = RunCheck("infiniband", "  infiniband: {count: 1}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);

  WritePort(root, "mlx5_ib1", 1, "4: ACTIVE", "200 Gb/sec (4X HDR)");
  r = RunCheck("infiniband", "  infiniband: {rate_gbps: 400, count: 2}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_EQ(r.fault_code, "NHC2003");
  EXPECT_THAT(r.message, HasSubstr("mlx5_ib1:1 at 200 Gb/s"));
}

TEST(InfinibandCheckTest, NoDevices) {
  FakeRoot root;
  EXPECT_EQ(RunCheck("infiniband", "  infiniband: {}\n", Ctx(root)).outcome, Outcome::kSkip);
  CheckResult r = RunCheck("infiniband", "  infiniband: {count: 8}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
}

// ---------------------------------------------------------------------------
// services

TEST(ServicesCheckTest, SystemdThroughSystemctl) {
  FakeRoot root;
  root.Mkdir("/run/systemd/system");
  const std::string bin = root.path() + "/fakebin";
  root.Write("/fakebin/systemctl",
             "#!/bin/sh\n"
             "[ \"$1\" = is-active ] || exit 64\n"
             "case \"$2\" in\n"
             "  sshd|munge) echo active; exit 0;;\n"
             "  *) echo inactive; exit 3;;\n"
             "esac\n",
             /*executable=*/true);
  Context ctx = Ctx(root);
  ctx.bin_dir = bin;
  CheckResult r = RunCheck("services", "  services: [sshd, munge]\n", ctx);
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  EXPECT_THAT(r.measured, HasSubstr("2 of 2 running (systemd)"));
  r = RunCheck("services", "  services: [sshd, slurmd]\n", ctx);
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("slurmd is inactive"));
  EXPECT_THAT(r.message, Not(HasSubstr("sshd is")));
}

TEST(ServicesCheckTest, WithoutSystemdLooksForProcesses) {
  FakeRoot root;
  root.Write("/proc/1/comm", "init\n");
  root.Write("/proc/42/comm", "munged\n");
  root.Write("/proc/77/comm", "nvidia-persiste\n");  // comm keeps 15 characters
  CheckResult r =
      RunCheck("services", "  services: [munged.service, nvidia-persistenced]\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  r = RunCheck("services", "  services: [munged, slurmd]\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("slurmd"));
}

// ---------------------------------------------------------------------------
// containers

TEST(ContainersCheckTest, ToolkitMissingThenPresent) {
  FakeRoot root;
  CheckResult r = RunCheck("containers", "  containers: {}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("nvidia-container-toolkit is missing"));

  root.Write("/usr/bin/nvidia-ctk", "#!/bin/sh\n", /*executable=*/true);
  r = RunCheck("containers", "  containers: {nvidia_toolkit: true}\n", Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  EXPECT_THAT(r.measured, HasSubstr("/usr/bin/nvidia-ctk"));

  FakeRoot dpkg;
  dpkg.Write("/var/lib/dpkg/info/nvidia-container-toolkit.list", "/usr/bin/nvidia-ctk\n");
  r = RunCheck("containers", "  containers: {nvidia_toolkit: true}\n", Ctx(dpkg));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
}

TEST(ContainersCheckTest, EnrootAndPyxis) {
  FakeRoot root;
  root.Write("/usr/bin/nvidia-container-cli", "", true);
  const std::string yaml = "  containers: {enroot: true, pyxis: true}\n";
  CheckResult r = RunCheck("containers", yaml, Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("enroot is missing"));
  EXPECT_THAT(r.message, HasSubstr("pyxis is missing"));

  root.Write("/usr/bin/enroot", "", true);
  // A commented-out plugstack line does not count.
  root.Write("/etc/slurm/plugstack.conf", "# required /usr/lib/slurm/spank_pyxis.so\n");
  r = RunCheck("containers", yaml, Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kFail) << Show(r);
  EXPECT_THAT(r.message, HasSubstr("pyxis is missing"));
  EXPECT_THAT(r.message, Not(HasSubstr("enroot is missing")));

  root.Write("/etc/slurm/plugstack.conf.d/pyxis.conf",
             "required /usr/local/lib/slurm/spank_pyxis.so runtime_path=/run/pyxis\n");
  r = RunCheck("containers", yaml, Ctx(root));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);

  FakeRoot so;
  so.Write("/usr/bin/nvidia-ctk", "", true);
  so.Write("/usr/lib/x86_64-linux-gnu/slurm/spank_pyxis.so", "");
  r = RunCheck("containers", "  containers: {pyxis: true}\n", Ctx(so));
  EXPECT_EQ(r.outcome, Outcome::kPass) << Show(r);
  EXPECT_THAT(r.measured, HasSubstr("spank_pyxis.so"));
}

// ---------------------------------------------------------------------------
// Parameter errors

TEST(HostCheckParamsTest, UnknownKeyGetsASuggestion) {
  auto r = Build("cpu", "  cpu: {socket: 2}\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("profile.yaml:3:"));
  EXPECT_THAT(r.status().message(), HasSubstr("unknown key 'checks.cpu.socket'"));
  EXPECT_THAT(r.status().message(), HasSubstr("did you mean 'checks.cpu.sockets'"));

  r = Build("filesystems", "  filesystems:\n    - {path: /, min_fre: 5%}\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("did you mean 'checks.filesystems.0.min_free'"));
}

TEST(HostCheckParamsTest, WrongTypeNamesFileLineAndKey) {
  auto r = Build("cpu", "  cpu:\n    sockets: two\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("profile.yaml:4:"));
  EXPECT_THAT(r.status().message(), HasSubstr("checks.cpu.sockets"));

  r = Build("memory", "  memory:\n    min: lots\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("profile.yaml:4:"));
  EXPECT_THAT(r.status().message(), HasSubstr("checks.memory.min"));

  r = Build("memory", "  memory:\n    tolerance: 0.03\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("profile.yaml:4:"));
  EXPECT_THAT(r.status().message(), HasSubstr("percentage"));

  r = Build("filesystems", "  filesystems:\n    - {path: /, min_free: plenty}\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("checks.filesystems.0.min_free"));

  r = Build("network", "  network: {up: eth0}\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("checks.network.up"));

  r = Build("accelerated_networking", "  accelerated_networking: {required: maybe}\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("checks.accelerated_networking.required"));
}

TEST(HostCheckParamsTest, ShapeAndRangeErrors) {
  EXPECT_TRUE(Build("cpu", "  cpu: true\n").ok());
  EXPECT_TRUE(Build("cpu", "  cpu:\n").ok());  // null: all defaults
  EXPECT_FALSE(Build("cpu", "  cpu: 4\n").ok());
  EXPECT_FALSE(Build("cpu", "  cpu: [1, 2]\n").ok());
  EXPECT_FALSE(Build("cpu", "  cpu: {threads: 0}\n").ok());
  EXPECT_FALSE(Build("memory", "  memory: {min: 2G, max: 1G}\n").ok());
  EXPECT_FALSE(Build("memory", "  memory: {tolerance: 150%}\n").ok());
  EXPECT_FALSE(Build("filesystems", "  filesystems: {path: /}\n").ok());
  EXPECT_FALSE(Build("filesystems", "  filesystems: [{rw: true}]\n").ok());
  EXPECT_FALSE(Build("filesystems", "  filesystems: [{path: data}]\n").ok());
  EXPECT_FALSE(Build("nvme", "  nvme: {scratch: mnt}\n").ok());
  EXPECT_FALSE(Build("infiniband", "  infiniband: {rate_gbps: -1}\n").ok());
  EXPECT_FALSE(Build("services", "  services: {names: [a]}\n").ok());
  EXPECT_FALSE(Build("services", "  services: ['--now']\n").ok());
  EXPECT_FALSE(Build("memory_bandwidth", "  memory_bandwidth: {seconds: 0}\n").ok());
  EXPECT_FALSE(Build("memory_bandwidth", "  memory_bandwidth: {min_gbs: fast}\n").ok());
  EXPECT_FALSE(Build("disk_bandwidth", "  disk_bandwidth: {path: tmp}\n").ok());
  EXPECT_FALSE(Build("collective", "  collective: {ranks: 1}\n").ok());
  EXPECT_FALSE(Build("gemm", "  gemm: {min_share_of_peak: 2}\n").ok());
  EXPECT_TRUE(Build("gemm", "  gemm: {min_share_of_peak: 60%}\n").ok());
  EXPECT_TRUE(Build("gemm", "  gemm: {min_share_of_peak: 0.6, type: bf16}\n").ok());
  auto r = Build("gemm", "  gemm: {type: fp8}\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("checks.gemm.type"));
}

TEST(HostCheckParamsTest, RunnerHints) {
  EXPECT_TRUE(Build("nvme", "  nvme: {}\n").value()->isolate());
  EXPECT_TRUE(Build("disk_bandwidth", "  disk_bandwidth: {}\n").value()->isolate());
  EXPECT_FALSE(Build("disk_bandwidth", "  disk_bandwidth: {}\n").value()->parallel_safe());
  EXPECT_FALSE(Build("memory_bandwidth", "  memory_bandwidth: {}\n").value()->parallel_safe());
  EXPECT_FALSE(Build("collective", "  collective: {}\n").value()->parallel_safe());
  EXPECT_FALSE(Build("gemm", "  gemm: {}\n").value()->parallel_safe());
  EXPECT_TRUE(Build("cpu", "  cpu: {}\n").value()->parallel_safe());
  EXPECT_FALSE(Build("cpu", "  cpu: {}\n").value()->isolate());
}

// Every shipped profile's host-check parameters must build (the profiles and
// the checks are written separately; this is where they meet).
TEST(HostCheckParamsTest, ShippedProfilesBuild) {
  const auto names = Profile::BuiltinNames();
  ASSERT_FALSE(names.empty());
  int built = 0;
  for (const std::string& name : names) {
    Result<Profile> p = Profile::Builtin(name);
    ASSERT_TRUE(p.ok()) << name << ": " << p.status().ToString();
    for (const std::string& id : p->check_ids()) {
      auto it = HostRegistry().factories().find(id);
      if (it == HostRegistry().factories().end()) continue;  // a GPU check
      auto check = it->second(p->config(), "checks." + id);
      EXPECT_TRUE(check.ok()) << name << " " << id << ": " << check.status().ToString();
      ++built;
    }
  }
  EXPECT_GT(built, 0);
}

}  // namespace
}  // namespace gantry::health
