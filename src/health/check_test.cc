// Outcomes, results, the registry and BuildChecks, with test-only checks.
#include "gantry/health/check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gantry/health/profile.h"

namespace gantry::health {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ParamCheck : public Check {
 public:
  ParamCheck(std::string name, int64_t sockets) : name_(std::move(name)), sockets_(sockets) {}
  std::string name() const override { return name_; }
  CheckResult Run(const Context&) const override {
    CheckResult r;
    r.name = name_;
    r.measured = std::to_string(sockets_);
    return r;
  }
  int64_t sockets() const { return sockets_; }

 private:
  std::string name_;
  int64_t sockets_;
};

CheckFactory Factory(std::string id) {
  return [id](const Config& config, const std::string& key) -> Result<std::unique_ptr<Check>> {
    ASSIGN_OR_RETURN(int64_t sockets, config.GetInt(key + ".sockets", 1));
    return std::unique_ptr<Check>(std::make_unique<ParamCheck>(id, sockets));
  };
}

Registry TestRegistry() {
  Registry r;
  for (const char* id : {"cpu", "memory", "swap", "filesystems"}) r.Add(id, Factory(id));
  return r;
}

TEST(CheckTest, OutcomeNames) {
  EXPECT_EQ(OutcomeName(Outcome::kPass), "pass");
  EXPECT_EQ(OutcomeName(Outcome::kWarn), "warn");
  EXPECT_EQ(OutcomeName(Outcome::kFail), "fail");
  EXPECT_EQ(OutcomeName(Outcome::kSkip), "skip");
  EXPECT_EQ(OutcomeName(Outcome::kError), "error");
}

TEST(CheckTest, ResultJsonRoundTrip) {
  CheckResult r;
  r.name = "gpu_count";
  r.outcome = Outcome::kFail;
  r.message = "7 GPUs, expected 8";
  r.measured = "7";
  r.threshold = "== 8";
  r.fault_code = "NHC2009";
  r.seconds = 0.25;
  EXPECT_EQ(r.ToJson().dump(),
            R"({"name":"gpu_count","outcome":"fail","message":"7 GPUs, expected 8","measured":"7",)"
            R"("threshold":"== 8","fault_code":"NHC2009","seconds":0.25})");
  Result<CheckResult> back = CheckResult::FromJson(r.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->name, r.name);
  EXPECT_EQ(back->outcome, r.outcome);
  EXPECT_EQ(back->message, r.message);
  EXPECT_EQ(back->measured, r.measured);
  EXPECT_EQ(back->threshold, r.threshold);
  EXPECT_EQ(back->fault_code, r.fault_code);
  EXPECT_EQ(back->seconds, r.seconds);
}

TEST(CheckTest, ResultFromBadJson) {
  EXPECT_FALSE(CheckResult::FromJson(Json::array()).ok());
  EXPECT_FALSE(CheckResult::FromJson(Json{{"outcome", "pass"}}).ok());
  Result<CheckResult> bad = CheckResult::FromJson(Json{{"name", "x"}, {"outcome", "great"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("'great'"));
  EXPECT_FALSE(CheckResult::FromJson(Json{{"name", 3}, {"outcome", "pass"}}).ok());
  EXPECT_FALSE(
      CheckResult::FromJson(Json{{"name", "x"}, {"outcome", "pass"}, {"seconds", "1"}}).ok());
  Result<CheckResult> minimal = CheckResult::FromJson(Json{{"name", "x"}, {"outcome", "skip"}});
  ASSERT_TRUE(minimal.ok());
  EXPECT_EQ(minimal->outcome, Outcome::kSkip);
}

TEST(CheckTest, OverallIsTheWorstAndSkipCountsAsPass) {
  auto with = [](std::vector<Outcome> os) {
    std::vector<CheckResult> rs;
    for (Outcome o : os) rs.push_back(CheckResult{"x", o});
    return Overall(rs);
  };
  EXPECT_EQ(with({}), Outcome::kPass);
  EXPECT_EQ(with({Outcome::kSkip, Outcome::kSkip}), Outcome::kPass);
  EXPECT_EQ(with({Outcome::kPass, Outcome::kWarn}), Outcome::kWarn);
  EXPECT_EQ(with({Outcome::kWarn, Outcome::kError, Outcome::kPass}), Outcome::kError);
  EXPECT_EQ(with({Outcome::kFail, Outcome::kError}), Outcome::kFail);
  EXPECT_EQ(with({Outcome::kError, Outcome::kFail}), Outcome::kFail);
}

TEST(CheckTest, BuildChecksInProfileOrderWithParameters) {
  Result<Profile> p = Profile::LoadString(
      "name: t\nchecks:\n  swap: {}\n  cpu: {sockets: 2}\n  memory: false\n", "t.yaml");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Registry reg = TestRegistry();
  Result<std::vector<std::unique_ptr<Check>>> checks = BuildChecks(*p, &reg);
  ASSERT_TRUE(checks.ok()) << checks.status().ToString();
  std::vector<std::string> names;
  for (const auto& c : *checks) names.push_back(c->name());
  EXPECT_THAT(names, ElementsAre("swap", "cpu"));
  EXPECT_EQ(static_cast<const ParamCheck&>(*(*checks)[1]).sockets(), 2);
}

TEST(CheckTest, UnknownCheckIsRefusedWithASuggestionNamingTheFile) {
  Result<Profile> p =
      Profile::LoadString("name: t\nchecks:\n  cpu: {}\n  memroy: {}\n", "site.yaml");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Registry reg = TestRegistry();
  auto checks = BuildChecks(*p, &reg);
  ASSERT_FALSE(checks.ok());
  EXPECT_EQ(checks.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(checks.status().message(), HasSubstr("site.yaml:4:"));
  EXPECT_THAT(checks.status().message(), HasSubstr("unknown check 'memroy'"));
  EXPECT_THAT(checks.status().message(), HasSubstr("did you mean 'memory'?"));
}

TEST(CheckTest, FactoryErrorsNameTheUsersFileAndLine) {
  // The user's file extends a built-in; the bad value is on line 4 of it.
  Result<Profile> p = Profile::LoadString(
      "name: t\nextends: generic\nchecks:\n  cpu: {sockets: two}\n", "site.yaml");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Registry reg;
  for (const char* id : {"cpu", "memory", "swap", "filesystems", "network", "services",
                         "memory_bandwidth", "disk_bandwidth", "collective", "gemm"}) {
    reg.Add(id, Factory(id));
  }
  auto checks = BuildChecks(*p, &reg);
  ASSERT_FALSE(checks.ok());
  EXPECT_EQ(checks.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(checks.status().message(), HasSubstr("site.yaml:4:"));
  EXPECT_THAT(checks.status().message(), HasSubstr("checks.cpu.sockets"));
}

TEST(CheckTest, DuplicateRegistrationIsInternal) {
  Registry reg = TestRegistry();
  reg.Add("cpu", Factory("cpu"));
  EXPECT_THAT(reg.duplicates(), ElementsAre("cpu"));
  Result<Profile> p = Profile::LoadString("name: t\nchecks:\n  cpu: {}\n", "t.yaml");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(BuildChecks(*p, &reg).status().code(), StatusCode::kInternal);
}

TEST(CheckTest, FactoryBuildingTheWrongCheckIsInternal) {
  Registry reg;
  reg.Add("cpu", Factory("memory"));
  Result<Profile> p = Profile::LoadString("name: t\nchecks:\n  cpu: {}\n", "t.yaml");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(BuildChecks(*p, &reg).status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace gantry::health
