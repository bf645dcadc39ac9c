// GatherNode on a fake root (src/testing/fake_root.h), a fake IMDS and the
// fake NVML: every fact both ways, and unreadable facts as unknown.
#include "gantry/assess/node.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "gantry/assess/assess.h"
#include "testing/fake_nvml_scenario.h"
#include "testing/fake_root.h"

namespace gantry::assess {
namespace {

namespace fs = std::filesystem;
using ::gantry::testing::FakeRoot;
using ::testing::Contains;
using ::testing::HasSubstr;

std::string Testdata(const std::string& name) {
  return std::string(GANTRY_SOURCE_DIR) + "/src/assess/testdata/node/" + name;
}

ImdsInfo Vm() {
  ImdsInfo i;
  i.vm_size = "Standard_ND96isr_H100_v5";
  i.location = "EastUS";
  i.priority = "Regular";
  i.zone = "2";
  i.network_known = true;
  return i;
}

// An interface under /sys/class/net with a device driver (a symlink named after it).
void Iface(const FakeRoot& root, const std::string& name, const std::string& driver, int type = 1) {
  root.Write("/sys/class/net/" + name + "/type", std::to_string(type) + "\n");
  root.Mkdir("/sys/bus/drivers/" + driver);
  root.Mkdir("/sys/class/net/" + name + "/device");
  fs::create_symlink(root.path() + "/sys/bus/drivers/" + driver,
                     root.path() + "/sys/class/net/" + name + "/device/driver");
}

void Enslave(const FakeRoot& root, const std::string& vf, const std::string& master) {
  fs::create_symlink("../" + master, root.path() + "/sys/class/net/" + vf + "/master");
}

void NvidiaGpu(const FakeRoot& root, const std::string& bdf) {
  root.Write("/sys/bus/pci/devices/" + bdf + "/vendor", "0x10de\n");
  root.Write("/sys/bus/pci/devices/" + bdf + "/class", "0x030200\n");
}

NodeOptions Opts(const FakeRoot& root) {
  NodeOptions o;
  o.root_dir = root.path();
  o.run_health = false;
  o.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  o.environment = std::vector<std::string>{};  // not the test runner's
  return o;
}

bool Unknown(const Resource& r, const std::string& dotted) { return r.IsUnknown(dotted); }

TEST(NodeTest, AnAzureNodeWithEverythingInPlace) {
  FakeRoot root;
  root.Write("/etc/hostname", "gpu-node-07\n");
  Iface(root, "eth0", "hv_netvsc");
  Iface(root, "enP30832s1", "mlx5_core");
  Enslave(root, "enP30832s1", "eth0");
  Iface(root, "ib0", "mlx5_core", 32);  // InfiniBand: not the VF
  root.Write("/usr/bin/apt-get", "#!/bin/sh\necho 'Reading package lists...'\n", true);
  root.Write("/etc/gantry/agent.yaml",
             "idle:\n  idle_for: 30m\n  action: [shutdown, -h, now]\ndashboard:\n  "
             "checkpoint_roots: [/nvme]\n");
  root.Write("/etc/gantry/backup.yaml", "repo: az://acct/backups\n");
  root.Mkdir("/sys/bus/pci/devices");
  auto n = GatherNode(Opts(root), FakeImds(Vm()));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->type, kNodeType);
  EXPECT_EQ(n->name, "gpu-node-07");
  EXPECT_EQ(n->origin, Origin::kNode);
  EXPECT_EQ(n->location, "eastus");
  EXPECT_EQ(*n->Get("properties.vm.size"), "Standard_ND96isr_H100_v5");
  EXPECT_EQ(*n->Get("properties.vm.zone"), "2");
  EXPECT_EQ(*n->Get("properties.network.acceleratedNetworking"), true);
  EXPECT_EQ(*n->Get("properties.network.acceleratedNetworkingVf"), "enP30832s1");
  EXPECT_TRUE(n->Get("properties.network.publicIpAddresses")->empty());
  EXPECT_EQ(*n->Get("properties.os.pendingSecurityUpdates"), 0);
  EXPECT_EQ(*n->Get("properties.os.rebootRequired"), false);
  EXPECT_EQ(*n->Get("properties.gpu.count"), 0);
  EXPECT_EQ(n->Get("properties.gpu.driverLoaded"), nullptr);  // NVML never asked
  EXPECT_EQ(*n->Get("properties.agent.configured"), true);
  EXPECT_EQ(*n->Get("properties.agent.idleShutdown"), true);
  EXPECT_EQ(*n->Get("properties.agent.idleFor"), 1800);
  EXPECT_EQ(*n->Get("properties.ckpt.configured"), true);  // dashboard.checkpoint_roots
  EXPECT_EQ(*n->Get("properties.backup.configured"), true);
  EXPECT_TRUE(Unknown(*n, "properties.health.verdict"));  // run_health off
  EXPECT_FALSE(Unknown(*n, "properties.os.pendingSecurityUpdates"));
}

TEST(NodeTest, AcceleratedNetworkingNeedsAVfBondedToNetvsc) {
  {
    FakeRoot root;  // netvsc alone: Accelerated Networking off
    Iface(root, "eth0", "hv_netvsc");
    auto n = GatherNode(Opts(root), FakeImds(Vm()));
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n->Get("properties.network.acceleratedNetworking"), false);
  }
  {
    FakeRoot root;  // a Mellanox NIC that is not a netvsc slave (bare metal, IB)
    Iface(root, "eth0", "hv_netvsc");
    Iface(root, "eth1", "mlx5_core");
    auto n = GatherNode(Opts(root), FakeImds(Vm()));
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n->Get("properties.network.acceleratedNetworking"), false);
  }
  {
    FakeRoot root;  // mlx4 (older sizes) counts as well
    Iface(root, "eth0", "hv_netvsc");
    Iface(root, "enP1s1", "mlx4_core");
    Enslave(root, "enP1s1", "eth0");
    auto n = GatherNode(Opts(root), FakeImds(Vm()));
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n->Get("properties.network.acceleratedNetworking"), true);
  }
  {
    FakeRoot root;  // not Hyper-V: the question does not apply
    Iface(root, "eno1", "ixgbe");
    auto n = GatherNode(Opts(root), FakeImds(Vm()));
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(n->Get("properties.network.acceleratedNetworking"), nullptr);
    EXPECT_TRUE(Unknown(*n, "properties.network.acceleratedNetworking"));
  }
  {
    FakeRoot root;  // no /sys/class/net at all
    auto n = GatherNode(Opts(root), FakeImds(Vm()));
    ASSERT_TRUE(n.ok());
    EXPECT_TRUE(Unknown(*n, "properties.network.acceleratedNetworking"));
  }
}

TEST(NodeTest, PublicIpsComeFromImdsAndAreUnknownWithoutIt) {
  FakeRoot root;
  ImdsInfo vm = Vm();
  vm.public_ips = {"20.1.2.3"};
  auto n = GatherNode(Opts(root), FakeImds(vm));
  ASSERT_TRUE(n.ok());
  EXPECT_THAT(n->Get("properties.network.publicIpAddresses")->get<std::vector<std::string>>(),
              ::testing::ElementsAre("20.1.2.3"));

  vm.network_known = false;
  n = GatherNode(Opts(root), FakeImds(vm));
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(Unknown(*n, "properties.network.publicIpAddresses"));

  n = GatherNode(Opts(root), FakeImds(Unavailable("not an Azure VM")));
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(Unknown(*n, "properties.network.publicIpAddresses"));
  EXPECT_TRUE(Unknown(*n, "properties.vm.size"));
  EXPECT_EQ(n->location, "");
  EXPECT_THAT(n->Get("properties.vm.error")->get<std::string>(), HasSubstr("not an Azure VM"));
}

TEST(NodeTest, SecurityUpdatesFromTheAptSimulation) {
  FakeRoot root;
  // The fake apt-get prints a recorded `apt-get -s dist-upgrade` and checks its arguments.
  root.Write("/usr/bin/apt-get",
             "#!/bin/sh\n[ \"$1 $2 $3\" = \"-s -q dist-upgrade\" ] || exit 64\ncat '" +
                 Testdata("apt-dist-upgrade.txt") + "'\n",
             true);
  root.Write("/var/run/reboot-required", "*** System restart required ***\n");
  auto n = GatherNode(Opts(root), FakeImds(Vm()));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n->Get("properties.os.pendingSecurityUpdates"), 2);  // libssl3 and openssl
  EXPECT_THAT(n->Get("properties.os.securityUpdates")->get<std::vector<std::string>>(),
              ::testing::ElementsAre("libssl3", "openssl"));
  EXPECT_EQ(*n->Get("properties.os.rebootRequired"), true);

  // apt-get failing (locked lists, broken sources) is unknown, not zero.
  root.Write("/usr/bin/apt-get", "#!/bin/sh\necho 'E: lists are broken' >&2\nexit 100\n", true);
  n = GatherNode(Opts(root), FakeImds(Vm()));
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(Unknown(*n, "properties.os.pendingSecurityUpdates"));
  EXPECT_THAT(n->Get("properties.os.updatesError")->get<std::string>(),
              HasSubstr("E: lists are broken"));

  fs::remove(root.path() + "/usr/bin/apt-get");  // not Debian
  n = GatherNode(Opts(root), FakeImds(Vm()));
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(Unknown(*n, "properties.os.pendingSecurityUpdates"));

  // One that hangs is cut off at the timeout.
  root.Write("/usr/bin/apt-get", "#!/bin/sh\nsleep 30\n", true);
  NodeOptions o = Opts(root);
  o.apt_timeout_s = 1;
  n = GatherNode(o, FakeImds(Vm()));
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(Unknown(*n, "properties.os.pendingSecurityUpdates"));
  o.apt_timeout_s = 0;
  EXPECT_EQ(GatherNode(o, FakeImds(Vm())).status().code(), StatusCode::kInvalidArgument);
}

TEST(NodeTest, GpuFactsThroughTheFakeNvml) {
  health::testing::FakeNvmlEnv env;
  nlohmann::json s = health::testing::HealthyNode(2);
  s["gpus"][1]["persistence"] = 0;
  env.Write(s);
  FakeRoot root;
  NvidiaGpu(root, "0001:00:00.0");
  NvidiaGpu(root, "0002:00:00.0");
  NodeOptions o = Opts(root);
  o.nvml_library = health::testing::FakeNvmlPath();
  auto n = GatherNode(o, FakeImds(Vm()));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n->Get("properties.gpu.count"), 2);
  EXPECT_EQ(*n->Get("properties.gpu.driverLoaded"), true);
  EXPECT_EQ(*n->Get("properties.gpu.driverVersion"), "550.54.15");
  EXPECT_EQ(*n->Get("properties.gpu.persistenceMode"), false);
  EXPECT_EQ(*n->Get("properties.gpu.persistenceOff"), Json::array({1}));

  s["gpus"][1]["persistence"] = 1;
  env.Write(s);
  n = GatherNode(o, FakeImds(Vm()));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n->Get("properties.gpu.persistenceMode"), true);
}

TEST(NodeTest, NvidiaDevicesWithoutADriverAreAFactNotAPass) {
  FakeRoot root;
  NvidiaGpu(root, "0001:00:00.0");
  root.Write("/sys/bus/pci/devices/0003:00:00.0/vendor", "0x8086\n");  // not NVIDIA
  root.Write("/sys/bus/pci/devices/0003:00:00.0/class", "0x030000\n");
  auto n = GatherNode(Opts(root), FakeImds(Vm()));  // the NVML path does not exist
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n->Get("properties.gpu.count"), 1);
  EXPECT_EQ(*n->Get("properties.gpu.driverLoaded"), false);
  EXPECT_TRUE(Unknown(*n, "properties.gpu.driverVersion"));
  EXPECT_TRUE(Unknown(*n, "properties.gpu.persistenceMode"));
  EXPECT_FALSE(n->Get("properties.gpu.error")->get<std::string>().empty());

  FakeRoot bare;  // no /sys/bus/pci: nothing known about GPUs
  n = GatherNode(Opts(bare), FakeImds(Vm()));
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(Unknown(*n, "properties.gpu.count"));
}

TEST(NodeTest, AgentCkptAndBackupConfigs) {
  FakeRoot root;
  {
    auto n = GatherNode(Opts(root), FakeImds(Vm()));  // none of them
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n->Get("properties.agent.configured"), false);
    EXPECT_EQ(*n->Get("properties.agent.idleShutdown"), false);
    EXPECT_EQ(*n->Get("properties.ckpt.configured"), false);
    EXPECT_EQ(*n->Get("properties.backup.configured"), false);
  }
  // Idle detection that only notifies is not idle shutdown.
  root.Write("/etc/gantry/agent.yaml", "idle:\n  idle_for: 45m\n");
  root.Write("/etc/gantry/ckpt.yaml", "root: /nvme/ckpt\nrun: llm\n");
  {
    auto n = GatherNode(Opts(root), FakeImds(Vm()));
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n->Get("properties.agent.configured"), true);
    EXPECT_EQ(*n->Get("properties.agent.idleShutdown"), false);
    EXPECT_EQ(*n->Get("properties.ckpt.configured"), true);
  }
  root.Write("/etc/gantry/agent.yaml", "idle:\n  enabled: false\n  action: [shutdown]\n");
  {
    auto n = GatherNode(Opts(root), FakeImds(Vm()));
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n->Get("properties.agent.idleShutdown"), false);
  }
  // A config that does not load: configured false, the reason kept, idle unknown.
  root.Write("/etc/gantry/agent.yaml", "idle:\n  idle_for: 5m\n  action: [shutdown]\n");
  root.Write("/etc/gantry/ckpt.yaml", "root: [unclosed\n");
  root.Write("/etc/gantry/backup.yaml", "- just a list\n");
  {
    auto n = GatherNode(Opts(root), FakeImds(Vm()));
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n->Get("properties.agent.configured"), false);
    EXPECT_THAT(n->Get("properties.agent.error")->get<std::string>(), HasSubstr("15"));
    EXPECT_TRUE(Unknown(*n, "properties.agent.idleShutdown"));
    EXPECT_EQ(*n->Get("properties.ckpt.configured"), false);
    EXPECT_THAT(n->Get("properties.ckpt.error")->get<std::string>(), HasSubstr("ckpt.yaml"));
    EXPECT_EQ(*n->Get("properties.backup.configured"), false);
    EXPECT_THAT(n->Get("properties.backup.error")->get<std::string>(),
                HasSubstr("backup.yaml:1:1: expected a map"));
  }
  // Explicit paths win over the defaults.
  NodeOptions o = Opts(root);
  o.agent_config = root.Write("/srv/agent.yaml", "idle:\n  action: [poweroff]\n");
  auto n = GatherNode(o, FakeImds(Vm()));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n->Get("properties.agent.idleShutdown"), true);
}

TEST(NodeTest, HealthVerdictFromTheHealthChecks) {
  FakeRoot root;  // an empty root: the host checks cannot read /proc and fail
  NodeOptions o = Opts(root);
  o.run_health = true;
  auto n = GatherNode(o, FakeImds(Vm()));
  ASSERT_TRUE(n.ok());
  ASSERT_NE(n->Get("properties.health.verdict"), nullptr);
  EXPECT_EQ(*n->Get("properties.health.verdict"), "fail");
  EXPECT_FALSE(n->Get("properties.health.failed")->empty());
  EXPECT_FALSE(Unknown(*n, "properties.health.verdict"));
}

TEST(NodeTest, TheNodeRulesJudgeTheGatheredFacts) {
  FakeRoot root;
  Iface(root, "eth0", "hv_netvsc");  // no VF
  root.Write("/usr/bin/apt-get", "#!/bin/sh\ncat '" + Testdata("apt-dist-upgrade.txt") + "'\n",
             true);
  root.Mkdir("/sys/bus/pci/devices");
  ImdsInfo vm = Vm();
  vm.vm_size = "Standard_D4s_v5";
  vm.public_ips = {"20.1.2.3"};
  auto n = GatherNode(Opts(root), FakeImds(vm));
  ASSERT_TRUE(n.ok());
  AssessOptions ao;
  ao.today = "2027-01-15";
  auto a = Assess({*n}, BuiltinRules(), ao);
  ASSERT_TRUE(a.ok());
  std::vector<std::string> failed;
  for (const Finding& f : a->findings) {
    if (f.verdict.outcome == Outcome::kFail) failed.push_back(f.rule->id);
  }
  EXPECT_FALSE(failed.empty());
  // Accelerated networking, public IP and security updates are all facts here.
  int node_rules = 0;
  for (const Finding& f : a->findings) node_rules += f.rule->id.starts_with("GANTRY-NODE-");
  EXPECT_GE(node_rules, 3);
  EXPECT_TRUE(a->Failed(Severity::kLow));
}

TEST(NodeTest, StorageAccountKeysAreFoundAndNamedWithoutTheirValues) {
  FakeRoot root;
  const std::string key = "c2VjcmV0LWtleS12YWx1ZS10aGF0LW11c3Qtbm90LWxlYWs=";
  root.Write("/etc/environment", "PATH=/usr/bin\nAZURE_STORAGE_KEY=\"" + key + "\"\n");
  root.Write("/etc/gantry/backup.yaml",
             "# AccountKey= in a comment is no key\nrepo: \"DefaultEndpointsProtocol=https;"
             "AccountName=a;AccountKey=" +
                 key + "\"\n");
  root.Write("/etc/gantry/ckpt.yaml", "persist:\n  account_key: " + key +
                                          "\n  targets:\n    - \"AccountName=b;AccountKey=" + key +
                                          ";BlobEndpoint=https://b\"\n");
  NodeOptions o = Opts(root);
  o.environment = std::vector<std::string>{
      "HOME=/root", "AZURE_STORAGE_CONNECTION_STRING=AccountName=a;AccountKey=" + key,
      "AZURE_STORAGE_SAS_TOKEN=sv=1&sig=2"};
  std::vector<std::string> found = FindStorageAccountKeys(o);
  EXPECT_THAT(found, ::testing::ElementsAre(
                         "$AZURE_STORAGE_CONNECTION_STRING", "/etc/environment: AZURE_STORAGE_KEY",
                         "/etc/gantry/ckpt.yaml:2 account_key", "/etc/gantry/ckpt.yaml:4 (a value)",
                         "/etc/gantry/backup.yaml:2 repo"));
  for (const std::string& f : found) EXPECT_EQ(f.find(key.substr(0, 12)), std::string::npos) << f;

  auto n = GatherNode(o, FakeImds(Vm()));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  ASSERT_NE(n->Get("properties.storage.accountKeys"), nullptr);
  EXPECT_EQ(n->Get("properties.storage.accountKeys")->size(), 5u);
  auto a = Assess({*n}, BuiltinRules(), {});
  ASSERT_TRUE(a.ok());
  bool flagged = false;
  for (const Finding& f : a->findings) {
    if (f.rule->id != "GANTRY-NODE-011") continue;
    flagged = f.verdict.outcome == Outcome::kFail;
    EXPECT_THAT(f.verdict.message, HasSubstr("local auth"));
    EXPECT_THAT(f.verdict.message, HasSubstr("/etc/environment: AZURE_STORAGE_KEY"));
    EXPECT_THAT(f.verdict.message, HasSubstr("managed identity"));
    EXPECT_THAT(f.verdict.message, HasSubstr("Storage Blob Data Contributor"));
    EXPECT_THAT(f.verdict.message, HasSubstr("disable shared key access"));
  }
  EXPECT_TRUE(flagged);

  // Azurite's development connection string and an empty key are not account keys.
  FakeRoot clean;
  NodeOptions c = Opts(clean);
  c.environment = std::vector<std::string>{
      "AZURE_STORAGE_CONNECTION_STRING=UseDevelopmentStorage=true;AccountKey=x",
      "AZURE_STORAGE_KEY="};
  EXPECT_TRUE(FindStorageAccountKeys(c).empty());
  auto cn = GatherNode(c, FakeImds(Vm()));
  ASSERT_TRUE(cn.ok());
  EXPECT_TRUE(cn->Get("properties.storage.accountKeys")->empty());
}

}  // namespace
}  // namespace gantry::assess
