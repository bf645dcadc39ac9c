// `gantry tune` end to end through the real binary on the fake NVML library
// (src/health/fake_nvml): the read-only table and --json, --apply --dry-run,
// --apply (the NVML calls it makes), an NVML failure, and the exit codes
// (1 no GPU or a failed NVML call, 2 usage).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "testing/fake_nvml_scenario.h"
#include "testing/gantry_cli.h"

namespace gantry::testing {
namespace {

using health::testing::FakeNvmlEnv;
using health::testing::FakeNvmlPath;
using health::testing::HealthyNode;
using ::testing::HasSubstr;

class TuneCli : public ::testing::Test {
 protected:
  void SetUp() override {
    nlohmann::json s = HealthyNode(2);
    s["gpus"][1]["persistence"] = 0;  // one GPU to switch on, both below max clocks
    env_.Write(s);
  }
  CliRun Tune(std::vector<std::string> args) {
    args.insert(args.begin(), {"tune", "--nvml", FakeNvmlPath()});
    return RunGantry(args);
  }
  FakeNvmlEnv env_;
};

TEST_F(TuneCli, ShowsClocksAsTableAndJson) {
  CliRun table = Tune({});
  ASSERT_EQ(table.rc, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("H100"));
  EXPECT_THAT(table.out, HasSubstr("1980"));  // the maximum graphics clock
  CliRun js = Tune({"--json"});
  ASSERT_EQ(js.rc, 0) << js.err;
  Json j = js.json();
  EXPECT_EQ(j["report"], "gantry.tune");
  ASSERT_EQ(j["gpus"].size(), 2u);
  EXPECT_EQ(j["gpus"][0]["clocks_mhz"]["max_graphics"], 1980);
  EXPECT_EQ(j["gpus"][1]["persistence"], false);
  EXPECT_TRUE(env_.SetCalls().empty()) << "a read-only run changed the GPUs";
}

TEST_F(TuneCli, DryRunListsTheCallsAndMakesNone) {
  CliRun dry = Tune({"--apply", "--dry-run", "--json"});
  ASSERT_EQ(dry.rc, 0) << dry.err;
  Json j = dry.json();
  EXPECT_EQ(j["mode"], "apply");
  EXPECT_EQ(j["dry_run"], true);
  EXPECT_EQ(j["ok"], true);
  std::vector<std::string> calls;
  for (const Json& c : j["calls"]) calls.push_back(c["call"]);
  EXPECT_THAT(calls, ::testing::Contains("nvmlDeviceSetPersistenceMode"));
  EXPECT_THAT(calls, ::testing::Contains("nvmlDeviceSetApplicationsClocks"));
  EXPECT_TRUE(env_.SetCalls().empty());
}

TEST_F(TuneCli, ApplyMakesTheNvmlCallsOrNeedsRoot) {
  CliRun apply = Tune({"--apply", "--json"});
  if (::geteuid() != 0) {
    EXPECT_EQ(apply.rc, 2) << apply.err;
    EXPECT_THAT(apply.err, HasSubstr("needs root"));
    return;
  }
  ASSERT_EQ(apply.rc, 0) << apply.err;
  EXPECT_EQ(apply.json()["ok"], true);
  bool persistence = false, clocks = false;
  for (const nlohmann::json& c : env_.SetCalls()) {
    if (c["call"] == "nvmlDeviceSetPersistenceMode" && c["gpu"] == 1) persistence = true;
    if (c["call"] == "nvmlDeviceSetApplicationsClocks" && c["graphics_mhz"] == 1980) clocks = true;
  }
  EXPECT_TRUE(persistence && clocks) << "calls made: " << env_.Calls().size();
}

TEST_F(TuneCli, ANvmlFailureExits1AndUsageErrorsExit2) {
  if (::geteuid() == 0) {
    nlohmann::json s = HealthyNode(1);
    s["gpus"][0]["errors"]["nvmlDeviceSetApplicationsClocks"] = 999;  // NVML_ERROR_UNKNOWN
    env_.Write(s);
    CliRun failed = Tune({"--apply"});
    EXPECT_EQ(failed.rc, 1) << failed.err;
    EXPECT_THAT(failed.err, HasSubstr("nvmlDeviceSetApplicationsClocks"));
  }
  CliRun nogpu = RunGantry({"tune", "--nvml", "/nonexistent/libnvidia-ml.so.1"});
  EXPECT_EQ(nogpu.rc, 1);
  EXPECT_THAT(nogpu.err, HasSubstr("no NVIDIA GPU"));
  EXPECT_EQ(Tune({"--apply", "--reset"}).rc, 2);
  EXPECT_EQ(Tune({"--lock"}).rc, 2);
  EXPECT_EQ(Tune({"--dry-run"}).rc, 2);
  EXPECT_EQ(Tune({"--log-level", "loud"}).rc, 2);
}

}  // namespace
}  // namespace gantry::testing
