// The engine on rules defined here and resources built by hand: which verdicts
// are kept, suppressions from the file and from tags, expiry, pillar scores,
// Failed(), the money at stake and the order of findings.
#include "gantry/assess/assess.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gantry::assess {
namespace {

using ::testing::HasSubstr;

constexpr std::string_view kWs = "Microsoft.MachineLearningServices/workspaces";
constexpr std::string_view kVm = "Microsoft.Compute/virtualMachines";

Resource Make(std::string_view type, std::string name, std::string file, int line,
              Json props = Json::object()) {
  Resource r;
  r.type = std::string(type);
  r.name = name;
  r.address = "resources[" + name + "]";
  r.where.file = std::move(file);
  r.where.line = line;
  r.body = {{"type", r.type}, {"name", name}, {"properties", std::move(props)}};
  return r;
}

// Fails when properties.publicNetworkAccess is not "Disabled"; unknown when listed so.
Rule PublicAccessRule() {
  Rule r;
  r.id = "TEST-SEC-001";
  r.title = "Disable public access";
  r.pillar = Pillar::kSecurity;
  r.severity = Severity::kCritical;
  r.types = {std::string(kWs)};
  r.check = [](const Resource& res, const RuleContext&) {
    if (res.IsUnknown("properties.publicNetworkAccess")) {
      return Verdict::Unknown("known after apply", "properties.publicNetworkAccess");
    }
    const Json* v = res.Get("properties.publicNetworkAccess");
    if (v && v->is_string() && *v == "Disabled") return Verdict::Pass();
    return Verdict::Fail("publicNetworkAccess is not Disabled", "properties.publicNetworkAccess");
  };
  return r;
}

// A low-severity cost rule with money at stake; not applicable without "size".
Rule CostRule() {
  Rule r;
  r.id = "TEST-COST-001";
  r.title = "Scale to zero";
  r.pillar = Pillar::kCostOptimization;
  r.severity = Severity::kLow;
  r.types = {std::string(kWs), std::string(kVm)};
  r.check = [](const Resource& res, const RuleContext&) {
    const Json* idle = res.Get("properties.idleNodes");
    if (idle == nullptr) return Verdict::NotApplicable();
    if (idle->get<int>() == 0) return Verdict::Pass();
    Verdict v = Verdict::Fail("idle nodes", "properties.idleNodes");
    v.monthly_usd = 100.0 * idle->get<int>();
    v.cost_basis = fmt::format("{} nodes x $100", idle->get<int>());
    return v;
  };
  return r;
}

// Findings point into the rule list, so it must outlive the assessments.
const std::vector<Rule>& TestRules() {
  static const auto* rules = new std::vector<Rule>{PublicAccessRule(), CostRule()};
  return *rules;
}

AssessOptions Opts() {
  AssessOptions o;
  o.today = "2027-01-15";
  return o;
}

Suppression Sup(std::string rule, std::string resource, std::string expires = "2027-12-31") {
  return {std::move(rule), std::move(resource), "accepted for the test", std::move(expires),
          "sup.yaml:3"};
}

const Finding* FindingOf(const Assessment& a, std::string_view rule, std::string_view name) {
  for (const Finding& f : a.findings) {
    if (f.rule->id == rule && a.resources[f.resource].name == name) return &f;
  }
  return nullptr;
}

TEST(AssessTest, KeepsPassesFailsAndUnknownsButNotInapplicable) {
  std::vector<Resource> rs;
  rs.push_back(Make(kWs, "open", "main.json", 10, {{"publicNetworkAccess", "Enabled"}}));
  rs.push_back(Make(kWs, "closed", "main.json", 20, {{"publicNetworkAccess", "Disabled"}}));
  Resource unknown = Make(kWs, "later", "main.json", 30);
  unknown.unknown = {"/properties/publicNetworkAccess"};
  rs.push_back(unknown);
  rs.push_back(Make(kVm, "vm", "main.json", 40));  // CostRule: not applicable, TEST-SEC: no type
  auto a = Assess(rs, TestRules(), Opts());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->findings.size(), 3u);
  EXPECT_EQ(FindingOf(*a, "TEST-SEC-001", "open")->verdict.outcome, Outcome::kFail);
  EXPECT_EQ(FindingOf(*a, "TEST-SEC-001", "closed")->verdict.outcome, Outcome::kPass);
  EXPECT_EQ(FindingOf(*a, "TEST-SEC-001", "later")->verdict.outcome, Outcome::kUnknown);
  EXPECT_EQ(FindingOf(*a, "TEST-COST-001", "vm"), nullptr);
  EXPECT_TRUE(a->Failed(Severity::kCritical));
  EXPECT_THAT(a->files, ::testing::ElementsAre("main.json"));
  EXPECT_EQ(a->resources.size(), 4u);
}

TEST(AssessTest, FileSuppressionMatchesRuleAndResourceGlobsOnNameOrAddress) {
  std::vector<Resource> rs;
  rs.push_back(Make(kWs, "ws-research-1", "main.json", 10));
  rs.push_back(Make(kWs, "ws-prod", "main.json", 20));
  rs.push_back(Make(kWs, "other", "main.json", 30));
  AssessOptions o = Opts();
  o.suppressions = {Sup("test-sec-*", "WS-RESEARCH*"),         // globs are case-insensitive
                    Sup("TEST-SEC-001", "resources[other]")};  // the address
  auto a = Assess(rs, TestRules(), o);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(FindingOf(*a, "TEST-SEC-001", "ws-research-1")->suppressed);
  EXPECT_EQ(FindingOf(*a, "TEST-SEC-001", "ws-research-1")->suppressed->origin, "sup.yaml:3");
  EXPECT_TRUE(FindingOf(*a, "TEST-SEC-001", "other")->suppressed);
  EXPECT_FALSE(FindingOf(*a, "TEST-SEC-001", "ws-prod")->suppressed);
  EXPECT_TRUE(a->Failed(Severity::kCritical));  // ws-prod

  // Suppress everything: nothing fails any more, but the findings stay.
  o.suppressions = {Sup("TEST-*", "*")};
  a = Assess(rs, TestRules(), o);
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->Failed(Severity::kLow));
  EXPECT_EQ(a->findings.size(), 3u);
  EXPECT_EQ(a->scores[1].suppressed, 3);
  EXPECT_EQ(a->scores[1].failed, 0);
  EXPECT_DOUBLE_EQ(a->scores[1].score, 100);
}

TEST(AssessTest, SuppressionAppliesThroughItsExpiryDateAndLapsesTheDayAfter) {
  std::vector<Resource> rs = {Make(kWs, "ws", "main.json", 10)};
  AssessOptions o = Opts();
  o.suppressions = {Sup("TEST-SEC-001", "*", "2027-01-15")};
  auto a = Assess(rs, TestRules(), o);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->findings[0].suppressed);
  EXPECT_TRUE(a->expired.empty());

  o.today = "2027-01-16";
  a = Assess(rs, TestRules(), o);
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->expired.size(), 1u);
  const Finding* sec = FindingOf(*a, "TEST-SEC-001", "ws");
  ASSERT_NE(sec, nullptr);
  EXPECT_FALSE(sec->suppressed) << "an expired suppression must not apply";
  // The lapse is a finding of its own, located at the entry in the file.
  const Finding* lapse = nullptr;
  for (const Finding& f : a->findings) {
    if (f.rule == &ExpiredSuppressionRule()) lapse = &f;
  }
  ASSERT_NE(lapse, nullptr);
  EXPECT_EQ(lapse->rule->id, "GANTRY-SUP-001");
  EXPECT_EQ(lapse->verdict.outcome, Outcome::kFail);
  EXPECT_THAT(lapse->verdict.message, HasSubstr("expired on 2027-01-15"));
  const Resource& at = a->resources[lapse->resource];
  EXPECT_EQ(at.type, "Gantry/suppression");
  EXPECT_EQ(at.where.file, "sup.yaml");
  EXPECT_EQ(at.where.line, 3);
  EXPECT_THAT(a->files, ::testing::ElementsAre("main.json"));  // not an input
}

TEST(AssessTest, TagSuppressionNeedsIdsAndAJustification) {
  std::vector<Resource> rs;
  Resource good = Make(kWs, "tagged", "main.json", 10, {{"idleNodes", 2}});
  good.body["tags"] = {{"Gantry-Assess-Suppress", "TEST-SEC-001, TEST-COST-*: research only"}};
  Resource bare = Make(kWs, "bare", "main.json", 20);
  bare.body["tags"] = {{std::string(kSuppressTag), "TEST-SEC-001"}};
  Resource empty = Make(kWs, "empty", "main.json", 30);
  empty.body["tags"] = {{std::string(kSuppressTag), ": because"}};
  rs = {good, bare, empty};
  auto a = Assess(rs, TestRules(), Opts());
  ASSERT_TRUE(a.ok());
  const Finding* sec = FindingOf(*a, "TEST-SEC-001", "tagged");
  ASSERT_TRUE(sec->suppressed);
  EXPECT_EQ(sec->suppressed->justification, "research only");
  EXPECT_TRUE(sec->suppressed->expires.empty());  // tags have no expiry: SARIF inSource
  EXPECT_EQ(sec->suppressed->origin, "tag on resources[tagged]");
  EXPECT_TRUE(FindingOf(*a, "TEST-COST-001", "tagged")->suppressed);
  EXPECT_DOUBLE_EQ(a->MonthlyUsdAtStake(), 0);  // the suppressed cost does not count

  // Without a justification (or without ids) the tag suppresses nothing and says so.
  EXPECT_FALSE(FindingOf(*a, "TEST-SEC-001", "bare")->suppressed);
  const Finding* why = FindingOf(*a, "GANTRY-SUP-002", "bare");
  ASSERT_NE(why, nullptr);
  EXPECT_THAT(why->verdict.message, HasSubstr("no justification"));
  EXPECT_FALSE(FindingOf(*a, "TEST-SEC-001", "empty")->suppressed);
  ASSERT_NE(FindingOf(*a, "GANTRY-SUP-002", "empty"), nullptr);
  EXPECT_THAT(FindingOf(*a, "GANTRY-SUP-002", "empty")->verdict.message,
              HasSubstr("names no rule id"));
}

TEST(AssessTest, ScoresAreWeightedBySeverityAndLeaveUnknownsOut) {
  std::vector<Resource> rs;
  // Security: one critical pass (8) and one critical fail (8) -> 50.
  rs.push_back(
      Make(kWs, "a", "m.json", 1, {{"publicNetworkAccess", "Disabled"}, {"idleNodes", 0}}));
  rs.push_back(Make(kWs, "b", "m.json", 2, {{"idleNodes", 3}}));
  Resource u = Make(kWs, "c", "m.json", 3);
  u.unknown = {"/properties"};
  rs.push_back(u);
  auto a = Assess(rs, TestRules(), Opts());
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->scores.size(), 5u);
  EXPECT_EQ(a->scores[0].pillar, Pillar::kReliability);
  EXPECT_DOUBLE_EQ(a->scores[0].score, 100);  // nothing evaluated
  const PillarScore& sec = a->scores[1];
  EXPECT_EQ(sec.pillar, Pillar::kSecurity);
  EXPECT_EQ(sec.passed, 1);
  EXPECT_EQ(sec.failed, 1);
  EXPECT_EQ(sec.unknown, 1);
  EXPECT_DOUBLE_EQ(sec.score, 50);
  const PillarScore& cost = a->scores[2];
  EXPECT_EQ(cost.passed, 1);
  EXPECT_EQ(cost.failed, 1);
  EXPECT_DOUBLE_EQ(cost.score, 50);
  EXPECT_DOUBLE_EQ(a->MonthlyUsdAtStake(), 300);

  // Mixed severities: a critical pass (8) and a low fail (1) -> 8/9.
  std::vector<Rule> rules = TestRules();
  rules[1].pillar = Pillar::kSecurity;
  a = Assess({Make(kWs, "d", "m.json", 1, {{"publicNetworkAccess", "Disabled"}, {"idleNodes", 1}})},
             rules, Opts());
  ASSERT_TRUE(a.ok());
  EXPECT_NEAR(a->scores[1].score, 100.0 * 8 / 9, 1e-9);
}

TEST(AssessTest, FailedHonoursTheThreshold) {
  std::vector<Resource> rs = {
      Make(kWs, "w", "m.json", 1, {{"publicNetworkAccess", "Disabled"}, {"idleNodes", 1}})};
  auto a = Assess(rs, TestRules(), Opts());  // only the low cost rule fails
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->Failed(Severity::kLow));
  EXPECT_FALSE(a->Failed(Severity::kMedium));
  EXPECT_FALSE(a->Failed(Severity::kHigh));
  EXPECT_FALSE(a->Failed(Severity::kCritical));
}

TEST(AssessTest, FindingsAreOrderedByFileLineAndRule) {
  std::vector<Resource> rs;
  rs.push_back(Make(kWs, "z", "b.json", 5, {{"idleNodes", 1}}));
  rs.push_back(Make(kWs, "y", "a.json", 9, {{"idleNodes", 1}}));
  rs.push_back(Make(kWs, "x", "a.json", 2, {{"idleNodes", 1}}));
  // Rules given in reverse id order must still come out by id.
  std::vector<Rule> rules = {CostRule(), PublicAccessRule()};
  auto a = Assess(rs, rules, Opts());
  ASSERT_TRUE(a.ok());
  std::vector<std::string> order;
  for (const Finding& f : a->findings) {
    const Resource& r = a->resources[f.resource];
    order.push_back(fmt::format("{}:{}:{}", r.where.file, r.where.line, f.rule->id));
  }
  EXPECT_THAT(order, ::testing::ElementsAre("a.json:2:TEST-COST-001", "a.json:2:TEST-SEC-001",
                                            "a.json:9:TEST-COST-001", "a.json:9:TEST-SEC-001",
                                            "b.json:5:TEST-COST-001", "b.json:5:TEST-SEC-001"));
}

TEST(AssessTest, ABadTodayIsInvalidArgument) {
  for (const char* bad : {"2027-13-01", "2027-02-29", "27-01-01", "2027/01/01", "tomorrow"}) {
    AssessOptions o;
    o.today = bad;
    auto a = Assess({}, TestRules(), o);
    ASSERT_FALSE(a.ok()) << bad;
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(a.status().message(), HasSubstr(bad));
  }
  AssessOptions now;  // "" = today's UTC date
  EXPECT_TRUE(Assess({}, TestRules(), now).ok());
}

TEST(AssessTest, DatesAreRealCalendarDays) {
  EXPECT_TRUE(IsValidDate("2028-02-29"));
  EXPECT_TRUE(IsValidDate("2000-02-29"));
  EXPECT_FALSE(IsValidDate("1900-02-29"));
  EXPECT_FALSE(IsValidDate("2027-02-29"));
  EXPECT_FALSE(IsValidDate("2027-04-31"));
  EXPECT_TRUE(IsValidDate("2027-12-31"));
  EXPECT_FALSE(IsValidDate("2027-00-10"));
  EXPECT_FALSE(IsValidDate("2027-01-00"));
  EXPECT_FALSE(IsValidDate("2027-1-01"));
  EXPECT_FALSE(IsValidDate(" 2027-01-01"));
  EXPECT_FALSE(IsValidDate(""));
}

TEST(AssessTest, BuiltinRulesRunOnAHandMadeWorkspace) {
  // The engine with the real rule set: an open workspace fails at least one
  // critical or high security rule.
  std::vector<Resource> rs = {
      Make(kWs, "ws1", "main.json", 3, {{"publicNetworkAccess", "Enabled"}})};
  rs[0].body["location"] = "eastus";
  auto a = Assess(rs, BuiltinRules(), Opts());
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->Failed(Severity::kHigh));
  bool named = false;
  for (const Finding& f : a->findings) {
    if (f.verdict.outcome == Outcome::kFail &&
        f.verdict.property.find("publicNetworkAccess") != std::string::npos) {
      named = true;
    }
  }
  EXPECT_TRUE(named) << "no failure names properties.publicNetworkAccess";
}

}  // namespace
}  // namespace gantry::assess
