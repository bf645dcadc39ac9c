// Profiles: loading, validation, extends and overlays, built-ins, VM sizes.
#include "gantry/health/profile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace gantry::health {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ProfileTest, LoadsAMinimalProfile) {
  Result<Profile> p = Profile::LoadString(
      "name: site\ndescription: our nodes\nvm_sizes: [Standard_X]\nchecks:\n"
      "  cpu: {sockets: 2}\n  swap: true\n  memory:\n  nvme: false\n"
      "  filesystems: [{path: /}]\n",
      "site.yaml");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->name(), "site");
  EXPECT_EQ(p->description(), "our nodes");
  EXPECT_THAT(p->vm_sizes(), ElementsAre("Standard_X"));
  EXPECT_THAT(p->check_ids(), ElementsAre("cpu", "swap", "memory", "filesystems"));
  EXPECT_EQ(*p->config().GetInt("checks.cpu.sockets", 0), 2);
  EXPECT_EQ(*p->config().ListSize("checks.filesystems"), 1u);
  EXPECT_EQ(*p->config().GetString("checks.filesystems.0.path", ""), "/");
  // `true` and an empty value are "enabled with defaults": a map to read from.
  EXPECT_TRUE(p->config().Keys("checks.swap").ok());
  EXPECT_TRUE(p->config().Keys("checks.memory").ok());
  // The merged text loads back to the same profile.
  Result<Profile> again = Profile::LoadString(p->yaml(), "again.yaml");
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << p->yaml();
  EXPECT_EQ(again->check_ids(), p->check_ids());
}

TEST(ProfileTest, ValidationErrorsNameTheFileAndLine) {
  auto err = [](std::string_view yaml) {
    Result<Profile> p = Profile::LoadString(yaml, "bad.yaml");
    EXPECT_FALSE(p.ok()) << yaml;
    return p.ok() ? std::string() : p.status().message();
  };
  EXPECT_THAT(err("description: x\n"), HasSubstr("bad.yaml: the profile has no 'name'"));
  EXPECT_THAT(err("name: x\nchecks: [cpu]\n"), HasSubstr("bad.yaml:2:"));
  EXPECT_THAT(err("name: x\nchecks: 3\n"), HasSubstr("expected a map of check ids"));
  EXPECT_THAT(err("name: x\nchecks:\n  cpu: fast\n"), HasSubstr("bad.yaml:3:"));
  EXPECT_THAT(err("name: x\nchecks:\n  Cpu.x: {}\n"), HasSubstr("is not a check id"));
  EXPECT_THAT(err("name: x\nchekcs: {}\n"), HasSubstr("did you mean 'checks'?"));
  EXPECT_THAT(err("name: x\nchecks:\n  cpu: {a: 1\n"), HasSubstr("bad.yaml:"));
  EXPECT_THAT(err("name: x\nvm_sizes: {a: 1}\n"), HasSubstr("vm_sizes"));
}

TEST(ProfileTest, ExtendsMergesKeyByKeyAndInOrder) {
  // generic: cpu, memory, swap, filesystems, network, services,
  // memory_bandwidth, disk_bandwidth, collective, gemm.
  Result<Profile> p = Profile::LoadString(
      "name: site\nextends: generic\nchecks:\n"
      "  memory_bandwidth: {min_gbs: 5}\n"  // map: merged key by key
      "  filesystems: [{path: /data}]\n"    // list: replaced
      "  gemm: false\n"                     // removed
      "  services: [sshd]\n"
      "  nvme: {count: 2}\n",  // new: appended
      "site.yaml");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->name(), "site");
  EXPECT_THAT(p->check_ids(),
              ElementsAre("cpu", "memory", "swap", "filesystems", "network", "services",
                          "memory_bandwidth", "disk_bandwidth", "collective", "nvme"));
  const Config& c = p->config();
  EXPECT_EQ(*c.GetDouble("checks.memory_bandwidth.min_gbs", 0), 5);
  EXPECT_EQ(*c.GetString("checks.memory_bandwidth.size", ""), "64M");  // kept from generic
  EXPECT_EQ(*c.ListSize("checks.filesystems"), 1u);
  EXPECT_EQ(*c.GetString("checks.filesystems.0.path", ""), "/data");
  EXPECT_THAT(*c.GetStringList("checks.services"), ElementsAre("sshd"));
  ASSERT_EQ(p->layers().size(), 2u);
  EXPECT_EQ(p->layers()[0]->origin(), "data/health/generic.yaml");
  EXPECT_EQ(p->layers()[1]->origin(), "site.yaml");
}

TEST(ProfileTest, ExtendsCycleAndUnknownBaseAreRefused) {
  Result<Profile> self = Profile::LoadString("name: generic\nextends: generic\n", "g.yaml");
  ASSERT_FALSE(self.ok());
  EXPECT_THAT(self.status().message(), HasSubstr("g.yaml:2:"));
  EXPECT_THAT(self.status().message(), HasSubstr("cycle (generic -> generic)"));
  // A chain through a built-in that comes back to the user's name.
  Result<Profile> chain =
      Profile::LoadString("name: nd96isr_h100_v5\nextends: nd96isr_h100_v5\n", "c.yaml");
  ASSERT_FALSE(chain.ok());
  EXPECT_THAT(chain.status().message(), HasSubstr("cycle"));

  Result<Profile> unknown = Profile::LoadString("name: x\nextends: nd96\n", "u.yaml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("u.yaml:2:"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("nd96isr_h100_v5"));
}

TEST(ProfileTest, ExtendAppliesAUsersOverlayWithoutReapplyingSharedBases) {
  Result<Profile> h100 = Profile::Builtin("nd96isr_h100_v5");
  ASSERT_TRUE(h100.ok()) << h100.status().ToString();
  // The overlay extends generic too; generic must not undo H100's cpu numbers.
  Result<Profile> overlay = Profile::LoadString(
      "name: site\nextends: generic\nchecks:\n  filesystems: [{path: /nope}]\n  nvme: false\n",
      "site.yaml");
  ASSERT_TRUE(overlay.ok()) << overlay.status().ToString();
  Result<Profile> merged = h100->Extend(*overlay);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->name(), "site");
  EXPECT_THAT(merged->vm_sizes(), ElementsAre("Standard_ND96isr_H100_v5"));
  EXPECT_EQ(*merged->config().GetInt("checks.cpu.sockets", 0), 2);
  EXPECT_EQ(*merged->config().GetString("checks.filesystems.0.path", ""), "/nope");
  EXPECT_THAT(merged->check_ids(), Contains("gpu_count"));
  EXPECT_THAT(merged->check_ids(), ::testing::Not(Contains("nvme")));
}

TEST(ProfileTest, TurningOffACheckKeepsEveryOtherChecksParameters) {
  // gemm sits in the middle of H100's checks; the checks after it must keep
  // their own parameters when an overlay removes it.
  Result<Profile> h100 = Profile::Builtin("nd96isr_h100_v5");
  ASSERT_TRUE(h100.ok()) << h100.status().ToString();
  Result<Profile> overlay = Profile::LoadString(
      "name: site\nchecks:\n  gemm: false\n  nvme: {count: 2}\n  swap: true\n  memory:\n"
      "  gpu_xid: {window: 4h}\n",
      "site.yaml");
  ASSERT_TRUE(overlay.ok()) << overlay.status().ToString();
  Result<Profile> merged = h100->Extend(*overlay);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_THAT(merged->check_ids(), ::testing::Not(Contains("gemm")));
  const Config& c = merged->config();
  EXPECT_EQ(*c.GetInt("checks.nvme.count", 0), 2);
  EXPECT_FALSE(c.Has("checks.nvme.rate_gbps"));
  EXPECT_EQ(*c.GetInt("checks.infiniband.rate_gbps", 0), 400);
  EXPECT_EQ(*c.GetInt("checks.infiniband.count", 0), 8);
  EXPECT_EQ(*c.GetInt("checks.gpu_count.count", 0), 8);
  EXPECT_TRUE(*c.GetBool("checks.gpu_persistence.required", false));
  EXPECT_EQ(*c.GetInt("checks.gpu_ecc.dram_max", 0), 20000000);
  EXPECT_EQ(*c.GetString("checks.gpu_xid.window", ""), "4h");
  EXPECT_FALSE(c.Has("checks.gpu_thermal.min_h2d_gbs"));
  EXPECT_EQ(*c.GetInt("checks.gpu_bandwidth.min_h2d_gbs", 0), 48);
  EXPECT_EQ(*c.GetSize("checks.swap.max", 1), 0u);               // true keeps the base's parameters
  EXPECT_EQ(*c.GetString("checks.memory.tolerance", ""), "5%");  // so does no value
  // Values name the file they came from.
  EXPECT_EQ(c.Locate("checks.nvme.count"), "site.yaml:4:17: key 'checks.nvme.count'");
  EXPECT_THAT(c.Locate("checks.infiniband.rate_gbps"),
              ::testing::StartsWith("data/health/nd96isr_h100_v5.yaml:"));
  // And the merged text says the same.
  Result<Profile> again = Profile::LoadString(merged->yaml(), "again.yaml");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->check_ids(), merged->check_ids());
  EXPECT_EQ(*again->config().GetInt("checks.infiniband.rate_gbps", 0), 400);
}

TEST(ProfileTest, EmptyChecksInAnOverlayChangeNothing) {
  Result<Profile> p = Profile::LoadString("name: site\nextends: generic\nchecks:\n", "site.yaml");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Result<Profile> generic = Profile::Builtin("generic");
  ASSERT_TRUE(generic.ok());
  EXPECT_EQ(p->check_ids(), generic->check_ids());
}

TEST(ProfileTest, ForVmSize) {
  bool known = false;
  Result<Profile> h100 = Profile::ForVmSize("standard_nd96isr_h100_v5", &known);
  ASSERT_TRUE(h100.ok()) << h100.status().ToString();
  EXPECT_TRUE(known);
  EXPECT_EQ(h100->name(), "nd96isr_h100_v5");

  Result<Profile> nc = Profile::ForVmSize("Standard_NC80adis_H100_v5", &known);
  ASSERT_TRUE(nc.ok());
  EXPECT_TRUE(known);
  EXPECT_EQ(nc->name(), "nc80adis_h100_v5");

  known = true;
  Result<Profile> other = Profile::ForVmSize("Standard_D8s_v5", &known);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(known);
  EXPECT_EQ(other->name(), "generic");

  known = true;
  ASSERT_TRUE(Profile::ForVmSize("", &known).ok());
  EXPECT_FALSE(known);
}

TEST(ProfileTest, EveryBuiltinLoadsWithItsOwnName) {
  std::vector<std::string> names = Profile::BuiltinNames();
  EXPECT_THAT(names, Contains("generic"));
  for (const char* n :
       {"nd96isr_h100_v5", "nd96isr_h200_v5", "nd96asr_v4", "nd96amsr_a100_v4", "nc24ads_a100_v4",
        "nc48ads_a100_v4", "nc96ads_a100_v4", "nc40ads_h100_v5", "nc80adis_h100_v5", "nc4as_t4_v3",
        "nc8as_t4_v3", "nc16as_t4_v3", "nc64as_t4_v3"}) {
    EXPECT_THAT(names, Contains(n));
  }
  std::set<std::string> sizes;
  for (const std::string& name : names) {
    Result<Profile> p = Profile::Builtin(name);
    ASSERT_TRUE(p.ok()) << name << ": " << p.status().ToString();
    EXPECT_EQ(p->name(), name);
    EXPECT_FALSE(p->description().empty()) << name;
    for (const std::string& s : p->vm_sizes()) {
      EXPECT_TRUE(sizes.insert(s).second) << s << " is in two profiles";
    }
    if (name != "generic") {
      EXPECT_THAT(p->check_ids(), Contains("gpu_count")) << name;
      EXPECT_THAT(p->check_ids(), Contains("filesystems")) << name;  // from generic
      EXPECT_EQ(p->vm_sizes().size(), 1u) << name;
    }
  }
  EXPECT_EQ(Profile::Builtin("nope").status().code(), StatusCode::kNotFound);
}

TEST(ProfileTest, BuiltinThresholdsFromTheReference) {
  Result<Profile> h200 = Profile::Builtin("nd96isr_h200_v5");
  ASSERT_TRUE(h200.ok());
  const Config& c = h200->config();
  EXPECT_EQ(*c.GetInt("checks.gpu_count.count", 0), 8);
  EXPECT_EQ(*c.GetInt("checks.gpu_ecc.dram_max", 0), 20000000);
  EXPECT_EQ(*c.GetInt("checks.gpu_ecc.sram_correctable_max", 0), 10000);
  EXPECT_EQ(*c.GetInt("checks.infiniband.rate_gbps", 0), 400);
  EXPECT_EQ(*c.GetInt("checks.nvme.count", 0), 8);
  EXPECT_EQ(*c.GetDouble("checks.collective.min_busbw_gbs", 0), 431);
  EXPECT_EQ(*c.GetSize("checks.swap.max", 1), 0u);
  Result<Profile> t4 = Profile::Builtin("nc64as_t4_v3");
  ASSERT_TRUE(t4.ok());
  EXPECT_EQ(*t4->config().GetInt("checks.gpu_count.count", 0), 4);
}

}  // namespace
}  // namespace gantry::health
