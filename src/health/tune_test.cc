// `gantry tune` library: state, plans, idempotent apply, reset, root check,
// errors; asserted on the fake NVML's call log.
#include "gantry/health/tune.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/fake_nvml_scenario.h"

namespace gantry::health {
namespace {

using testing::FakeNvmlEnv;
using testing::FakeNvmlPath;
using ::testing::HasSubstr;
using testing::HealthyNode;
using Kind = TuneCall::Kind;

class TuneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scenario_ = HealthyNode(2);
    scenario_["gpus"][1]["persistence"] = 0;
  }
  Nvml& Load() {
    nvml_.reset();
    env_.Write(scenario_);
    auto n = Nvml::Load(FakeNvmlPath());
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    nvml_ = std::move(*n);
    return *nvml_;
  }
  std::vector<GpuTuneState> State() {
    auto s = ReadTuneState(*nvml_);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : std::vector<GpuTuneState>{};
  }

  FakeNvmlEnv env_;
  nlohmann::json scenario_;
  std::unique_ptr<Nvml> nvml_;
};

TEST_F(TuneTest, ReadsStateAndRendersTable) {
  Load();
  std::vector<GpuTuneState> gpus = State();
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_TRUE(gpus[0].persistence);
  EXPECT_FALSE(gpus[1].persistence);
  EXPECT_EQ(gpus[0].clocks.app_graphics, 1755u);
  EXPECT_FALSE(gpus[0].AtMax());
  std::string table = RenderTuneTable(gpus);
  EXPECT_THAT(table, HasSubstr("1755/2619 MHz"));
  EXPECT_THAT(table, HasSubstr("1980/2619 MHz"));
  EXPECT_THAT(table, HasSubstr("below max"));
  Json j = gpus[1].ToJson();
  EXPECT_EQ(j["persistence"], false);
  EXPECT_EQ(j["clocks_mhz"]["max_graphics"], 1980);
}

TEST_F(TuneTest, PlanApplyAndCallText) {
  Load();
  TunePlan plan = PlanTune(State(), TuneOptions{});
  std::vector<TuneCall> want = {{Kind::kSetApplicationsClocks, 0, 2619, 1980},
                                {Kind::kSetPersistenceMode, 1, 1},
                                {Kind::kSetApplicationsClocks, 1, 2619, 1980}};
  EXPECT_EQ(plan.calls, want);
  EXPECT_EQ(plan.calls[0].ToString(),
            "nvmlDeviceSetApplicationsClocks(GPU 0, mem 2619 MHz, graphics 1980 MHz)");
  EXPECT_EQ(plan.calls[1].ToString(), "nvmlDeviceSetPersistenceMode(GPU 1, enabled)");
  EXPECT_EQ(plan.calls[0].ToJson()["call"], "nvmlDeviceSetApplicationsClocks");
}

TEST_F(TuneTest, ApplyIsIdempotent) {
  Load();
  ASSERT_TRUE(ApplyTune(*nvml_, PlanTune(State(), TuneOptions{})).ok());
  std::vector<nlohmann::json> first = env_.SetCalls();
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[0], (nlohmann::json{{"call", "nvmlDeviceSetApplicationsClocks"},
                                      {"gpu", 0},
                                      {"memory_mhz", 2619},
                                      {"graphics_mhz", 1980}}));
  EXPECT_EQ(first[1]["call"], "nvmlDeviceSetPersistenceMode");

  // The state changed; a second apply plans and makes no call.
  std::vector<GpuTuneState> after = State();
  EXPECT_TRUE(after[0].AtMax());
  EXPECT_TRUE(after[1].persistence);
  TunePlan again = PlanTune(after, TuneOptions{});
  EXPECT_TRUE(again.calls.empty());
  EXPECT_EQ(again.notes.size(), 2u);
  ASSERT_TRUE(ApplyTune(*nvml_, again).ok());
  EXPECT_EQ(env_.SetCalls().size(), 3u);
}

TEST_F(TuneTest, LockUsesLockedClocks) {
  Load();
  TuneOptions o;
  o.lock = true;
  TunePlan plan = PlanTune(State(), o);
  ASSERT_EQ(plan.calls.size(), 3u);
  EXPECT_EQ(plan.calls[0], (TuneCall{Kind::kSetGpuLockedClocks, 0, 1980, 1980}));
  EXPECT_EQ(plan.calls[0].ToString(),
            "nvmlDeviceSetGpuLockedClocks(GPU 0, min 1980 MHz, max 1980 MHz)");
  ASSERT_TRUE(ApplyTune(*nvml_, plan).ok());
  EXPECT_EQ(env_.SetCalls()[0]["call"], "nvmlDeviceSetGpuLockedClocks");
}

TEST_F(TuneTest, ResetRestoresDefaultsAndKeepsPersistence) {
  scenario_["gpus"][0]["clocks"]["app_graphics"] = 1980;
  Load();
  TuneOptions o;
  o.mode = TuneMode::kReset;
  TunePlan plan = PlanTune(State(), o);
  std::vector<TuneCall> want = {{Kind::kResetApplicationsClocks, 0},
                                {Kind::kResetGpuLockedClocks, 0},
                                {Kind::kResetGpuLockedClocks, 1}};
  EXPECT_EQ(plan.calls, want);
  ASSERT_TRUE(ApplyTune(*nvml_, plan).ok());
  std::vector<GpuTuneState> after = State();
  EXPECT_EQ(after[0].clocks.app_graphics, 1755u);
  EXPECT_FALSE(after[1].persistence);  // left as it was
  for (const auto& c : env_.SetCalls()) EXPECT_NE(c["call"], "nvmlDeviceSetPersistenceMode");
}

TEST_F(TuneTest, NotRootIsPermissionDenied) {
  Status s = RequireRoot(1000, "gantry tune --apply");
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("needs root"));
  EXPECT_THAT(s.message(), HasSubstr("--dry-run"));
  EXPECT_TRUE(RequireRoot(0, "gantry tune --apply").ok());
}

TEST_F(TuneTest, CallErrorsAreReportedAllTogether) {
  scenario_["gpus"][0]["errors"]["nvmlDeviceSetApplicationsClocks"] = 4;  // no permission
  scenario_["gpus"][1]["errors"]["nvmlDeviceSetApplicationsClocks"] = 15;
  Load();
  Status s = ApplyTune(*nvml_, PlanTune(State(), TuneOptions{}));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("nvmlDeviceSetApplicationsClocks(GPU 0)"));
  EXPECT_THAT(s.message(), HasSubstr("nvmlDeviceSetApplicationsClocks(GPU 1): GPU is lost"));
}

TEST_F(TuneTest, GpuWithoutApplicationClocksIsLeftAlone) {
  scenario_["gpus"][1].erase("clocks");
  Load();
  std::vector<GpuTuneState> gpus = State();
  EXPECT_FALSE(gpus[1].clocks_known);
  EXPECT_FALSE(gpus[1].problem.empty());
  TunePlan plan = PlanTune(gpus, TuneOptions{});
  std::vector<TuneCall> want = {{Kind::kSetApplicationsClocks, 0, 2619, 1980},
                                {Kind::kSetPersistenceMode, 1, 1}};
  EXPECT_EQ(plan.calls, want);
  EXPECT_THAT(plan.notes.back(), HasSubstr("GPU 1: clocks not readable"));
}

}  // namespace
}  // namespace gantry::health
