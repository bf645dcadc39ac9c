// Every shipped profile builds with the real checks (DefaultRegistry: the
// host and GPU checks), so a profile parameter the checks do not accept is
// caught here, not on a node.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gantry/health/check.h"
#include "gantry/health/profile.h"

namespace gantry::health {
namespace {

using ::testing::IsEmpty;

TEST(BuiltinProfilesTest, DefaultRegistryHasEveryCheckOnce) {
  const Registry& reg = DefaultRegistry();
  EXPECT_THAT(reg.duplicates(), IsEmpty());
  for (const char* id : {"cpu",
                         "memory",
                         "swap",
                         "filesystems",
                         "nvme",
                         "network",
                         "accelerated_networking",
                         "infiniband",
                         "services",
                         "containers",
                         "memory_bandwidth",
                         "disk_bandwidth",
                         "collective",
                         "gemm",
                         "gpu_count",
                         "gpu_persistence",
                         "gpu_driver",
                         "gpu_ecc",
                         "gpu_row_remap",
                         "gpu_xid",
                         "gpu_clocks",
                         "gpu_nvlink",
                         "gpu_pcie",
                         "gpu_thermal",
                         "gpu_bandwidth"}) {
    EXPECT_EQ(reg.factories().count(id), 1u) << id;
  }
}

TEST(BuiltinProfilesTest, EveryBuiltinProfileLoadsAndBuilds) {
  for (const std::string& name : Profile::BuiltinNames()) {
    Result<Profile> p = Profile::Builtin(name);
    ASSERT_TRUE(p.ok()) << name << ": " << p.status().ToString();
    auto checks = BuildChecks(*p);
    ASSERT_TRUE(checks.ok()) << name << ": " << checks.status().ToString();
    ASSERT_EQ(checks->size(), p->check_ids().size()) << name;
    for (size_t i = 0; i < checks->size(); ++i) {
      EXPECT_EQ((*checks)[i]->name(), p->check_ids()[i]) << name;
    }
  }
}

TEST(BuiltinProfilesTest, UnknownCheckInAUsersFileIsRefusedWithASuggestion) {
  Result<Profile> p = Profile::LoadString(
      "name: site\nextends: nd96isr_h100_v5\nchecks:\n  gpu_eccc: {dram_max: 1}\n", "site.yaml");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto checks = BuildChecks(*p);
  ASSERT_FALSE(checks.ok());
  EXPECT_EQ(checks.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(checks.status().message(), ::testing::HasSubstr("site.yaml:4:"));
  EXPECT_THAT(checks.status().message(), ::testing::HasSubstr("did you mean 'gpu_ecc'?"));
}

}  // namespace
}  // namespace gantry::health
