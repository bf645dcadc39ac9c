#include "gantry/assess/rules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <regex>
#include <set>

#include "gantry/advise/catalog.h"
#include "gantry/assess/node.h"
#include "gantry/core/json.h"
#include "gantry/core/text.h"
#include "rule_util.h"

namespace gantry::assess {
namespace {

using ::testing::HasSubstr;

const std::string kRulesData = std::string(GANTRY_SOURCE_DIR) + "/src/assess/testdata/rules/";
const std::string kStub =
    "/subscriptions/ffffffff-ffff-ffff-ffff-ffffffffffff/resourceGroups/ps-rule-test-rg/providers/";

// The built-in catalog with a reserved price added for one size, so that the
// reserved-capacity rule has something to quote (the shipped catalog has no
// reserved prices). 2.314 is a test value, not a real price.
const advise::Catalog& TestCatalog() {
  static const advise::Catalog cat = [] {
    Result<advise::Catalog> c = advise::Catalog::Default();
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (!c.ok()) return advise::Catalog();
    Result<int> n = c->MergePriceSheetString(
        "size,region,payg,spot,reserved_1y\nStandard_NC24ads_A100_v4,eastus,,,2.314\n", "test");
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return *c;
  }();
  return cat;
}

const advise::Catalog& DefaultCatalog() {
  static const advise::Catalog cat = [] {
    Result<advise::Catalog> c = advise::Catalog::Default();
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? *c : advise::Catalog();
  }();
  return cat;
}

// "Microsoft.X/a/b" + "n1/n2" -> "Microsoft.X/a/n1/b/n2".
std::string IdOf(const std::string& type, const std::string& name) {
  std::vector<std::string> t, n;
  std::string cur;
  for (char c : type + "/") {
    if (c == '/') {
      t.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  for (char c : name + "/") {
    if (c == '/') {
      n.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  std::string out = kStub + t[0];
  for (size_t i = 1; i < t.size(); ++i)
    out += "/" + t[i] + (i - 1 < n.size() ? "/" + n[i - 1] : "");
  return out;
}

// A fixture: ARM resource objects, plus test-only keys read and removed here:
//   "x-gantry-context": true       a resource the rule looks up, not one it judges
//   "x-gantry-unknown": [pointers] Resource::unknown (as a Terraform plan would give)
//   "x-gantry-origin": "live"      Resource::origin
// Resources are built here from the JSON (core's ParseJson), not by the readers.
struct Fixture {
  std::vector<Resource> resources;
  std::vector<bool> context;
};

Resource FromJson(Json obj, bool* context) {
  Resource r;
  r.type = obj.value("type", "");
  r.name = obj.value("name", "");
  r.location = AsciiLower(obj.value("location", ""));
  r.id = obj.contains("id") ? obj["id"].get<std::string>() : IdOf(r.type, r.name);
  if (obj.contains("scope") && obj["scope"].is_string()) r.scope = obj["scope"].get<std::string>();
  *context = obj.value("x-gantry-context", false);
  if (obj.contains("x-gantry-unknown")) {
    for (const Json& p : obj["x-gantry-unknown"]) r.unknown.push_back(p.get<std::string>());
  }
  std::string origin = obj.value("x-gantry-origin", "arm");
  r.origin = origin == "live"        ? Origin::kLive
             : origin == "terraform" ? Origin::kTerraform
                                     : Origin::kArm;
  if (r.type == kNodeType) r.origin = Origin::kNode;
  for (const char* k : {"x-gantry-context", "x-gantry-unknown", "x-gantry-origin"}) obj.erase(k);
  r.body = std::move(obj);
  r.address = r.name;
  return r;
}

Result<Fixture> LoadFixture(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  ASSIGN_OR_RETURN(Json doc, ParseJson(text, path));
  if (!doc.is_array()) return InvalidArgument(path + ": a fixture is an array of resources");
  Fixture f;
  for (Json& obj : doc) {
    bool ctx = false;
    f.resources.push_back(FromJson(std::move(obj), &ctx));
    f.context.push_back(ctx);
  }
  return f;
}

Resource Parse(std::string_view json) {
  Result<Json> j = ParseJson(json, "test");
  EXPECT_TRUE(j.ok()) << j.status().ToString();
  bool ctx = false;
  return FromJson(j.ok() ? *j : Json::object(), &ctx);
}

Verdict Check(std::string_view id, const Resource& r, const std::vector<Resource>& all,
              const advise::Catalog* cat = &TestCatalog(), std::string region = "eastus") {
  const Rule* rule = FindRule(id);
  EXPECT_NE(rule, nullptr) << id;
  if (rule == nullptr) return Verdict::NotApplicable();
  EXPECT_TRUE(rule->AppliesTo(r)) << id << " on " << r.type;
  RuleContext ctx(all, cat, std::move(region));
  return rule->check(r, ctx);
}

Verdict RunOne(std::string_view id, std::string_view json,
               const advise::Catalog* cat = &TestCatalog()) {
  std::vector<Resource> all = {Parse(json)};
  return Check(id, all[0], all, cat);
}

// ------------------------------------------------------------- fixtures --

class RuleFixtures : public ::testing::TestWithParam<std::string> {};

TEST_P(RuleFixtures, EveryResourceGetsTheVerdictItsFileNames) {
  const Rule* rule = FindRule(GetParam());
  ASSERT_NE(rule, nullptr);
  const std::pair<const char*, Outcome> kinds[] = {{"pass", Outcome::kPass},
                                                   {"fail", Outcome::kFail},
                                                   {"unknown", Outcome::kUnknown},
                                                   {"not_applicable", Outcome::kNotApplicable}};
  for (const auto& [kind, want] : kinds) {
    std::string path = kRulesData + rule->id + "." + kind + ".json";
    bool required = want == Outcome::kPass || want == Outcome::kFail;
    if (!std::filesystem::exists(path)) {
      EXPECT_FALSE(required) << "missing fixture " << path;
      continue;
    }
    Result<Fixture> f = LoadFixture(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    RuleContext ctx(f->resources, &TestCatalog(), "eastus");
    int judged = 0;
    for (size_t i = 0; i < f->resources.size(); ++i) {
      if (f->context[i]) continue;
      const Resource& r = f->resources[i];
      SCOPED_TRACE(path + ": " + r.name);
      ASSERT_TRUE(rule->AppliesTo(r)) << r.type << " (mark lookups x-gantry-context)";
      Verdict v = rule->check(r, ctx);
      EXPECT_EQ(OutcomeName(v.outcome), OutcomeName(want)) << v.message;
      if (want == Outcome::kFail || want == Outcome::kUnknown) {
        EXPECT_FALSE(v.message.empty());
      }
      if (want == Outcome::kFail && !v.property.empty()) {
        // The message names the property at fault (or, for a lookup, the resource).
        std::string first = v.property.substr(0, v.property.find('.'));
        EXPECT_THAT(v.message, HasSubstr(first));
      }
      ++judged;
    }
    EXPECT_GT(judged, 0) << path << " judges no resource";
  }
}

std::vector<std::string> AllIds() {
  std::vector<std::string> ids;
  for (const Rule& r : BuiltinRules()) ids.push_back(r.id);
  return ids;
}

INSTANTIATE_TEST_SUITE_P(Builtin, RuleFixtures, ::testing::ValuesIn(AllIds()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string s = p.param;
                           for (char& c : s) {
                             if (c == '-') c = '_';
                           }
                           return s;
                         });

TEST(RuleFixtures, EveryFixtureFileBelongsToARule) {
  std::regex name(R"(^(GANTRY-[A-Z]+-[0-9]{3})\.(pass|fail|unknown|not_applicable)\.json$)");
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(kRulesData)) {
    std::string f = e.path().filename().string();
    std::smatch m;
    ASSERT_TRUE(std::regex_match(f, m, name)) << f;
    EXPECT_NE(FindRule(m[1].str()), nullptr) << f;
    ++files;
  }
  EXPECT_GE(files, 2 * static_cast<int>(BuiltinRules().size()));
}

// -------------------------------------------------------------- metadata --

TEST(BuiltinRules, IdsAreUniqueSortedAndWellFormed) {
  std::regex id(R"(^GANTRY-[A-Z]+-[0-9]{3}$)");
  std::set<std::string> seen;
  std::string prev;
  for (const Rule& r : BuiltinRules()) {
    EXPECT_TRUE(std::regex_match(r.id, id)) << r.id;
    EXPECT_TRUE(seen.insert(r.id).second) << "duplicate " << r.id;
    EXPECT_LT(prev, r.id);
    prev = r.id;
  }
  EXPECT_GE(BuiltinRules().size(), 45u);
  EXPECT_EQ(seen.count("GANTRY-SUP-001"), 0u) << "the engine's expired-suppression rule";
}

TEST(BuiltinRules, EveryFieldIsFilledIn) {
  for (const Rule& r : BuiltinRules()) {
    SCOPED_TRACE(r.id);
    EXPECT_FALSE(r.title.empty());
    EXPECT_FALSE(r.types.empty());
    EXPECT_FALSE(r.condition.empty());
    EXPECT_FALSE(r.rationale.empty());
    EXPECT_FALSE(r.help_uri.empty());
    EXPECT_TRUE(static_cast<bool>(r.check));
    EXPECT_TRUE(r.help_uri.rfind("https://", 0) == 0) << r.help_uri;
    // Only node rules may lack an ARM fix: their fix is on the machine (see the doc).
    bool node = r.types.size() == 1 && r.types[0] == kNodeType;
    if (!node) {
      EXPECT_FALSE(r.fix_arm.empty());
    }
    for (const std::string& ref : r.references) {
      EXPECT_TRUE(ref.rfind("PSRule Azure.", 0) == 0 || ref.rfind("Checkov CKV", 0) == 0 ||
                  ref.rfind("Policy ", 0) == 0)
          << ref;
      if (ref.rfind("Policy ", 0) == 0) {
        EXPECT_TRUE(std::regex_match(ref, std::regex(R"(^Policy [0-9a-f]{8}$)"))) << ref;
      }
    }
    // A fix given as JSON must parse (after a trailing // comment is cut).
    if (!r.fix_arm.empty()) {
      std::string json = r.fix_arm.substr(0, r.fix_arm.find("  //"));
      EXPECT_TRUE(ParseJson(json, r.id).ok()) << r.fix_arm;
    }
  }
}

TEST(BuiltinRules, CoverEveryAnchorOfTheReference) {
  std::set<std::string> refs;
  for (const Rule& r : BuiltinRules()) refs.insert(r.references.begin(), r.references.end());
  for (const char* want : {"PSRule Azure.ML.ComputeIdleShutdown",
                           "PSRule Azure.ML.DisableLocalAuth",
                           "PSRule Azure.ML.ComputeVnet",
                           "PSRule Azure.ML.PublicAccess",
                           "PSRule Azure.ML.UserManagedIdentity",
                           "Checkov CKV_AZURE_142",
                           "Checkov CKV_AZURE_144",
                           "Checkov CKV_AZURE_150",
                           "Checkov CKV2_AZURE_49",
                           "Checkov CKV2_AZURE_50",
                           "Checkov CKV_AZURE_243",
                           "Policy 438c38d2",
                           "Policy ba769a63",
                           "Policy 7f40cee6",
                           "Policy 45e05259",
                           "Policy 5f0c7d88",
                           "Policy 6ddb1705",
                           "Policy e413671a",
                           "Policy afe0c3be",
                           "Policy e96a9a5f",
                           "Policy 7804b5c7",
                           "Policy 679ddf89",
                           "Policy f110a506"}) {
    EXPECT_EQ(refs.count(want), 1u) << want;
  }
}

TEST(BuiltinRules, TheDocListsEveryRuleAndNoOther) {
  Result<std::string> doc = ReadFile(std::string(GANTRY_SOURCE_DIR) + "/docs/assess.md");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  for (const Rule& r : BuiltinRules()) {
    EXPECT_THAT(*doc, HasSubstr("#### " + r.id + ": " + r.title + "\n")) << r.id;
    // The condition word for word, so that the doc follows the table.
    EXPECT_THAT(*doc, HasSubstr(r.condition)) << r.id;
    EXPECT_THAT(*doc, HasSubstr(r.rationale)) << r.id;
  }
  std::regex id(R"(GANTRY-[A-Z]+-[0-9]{3})");
  for (auto it = std::sregex_iterator(doc->begin(), doc->end(), id); it != std::sregex_iterator();
       ++it) {
    std::string s = it->str();
    if (s == "GANTRY-SUP-001" || s == "GANTRY-SUP-002") continue;  // the engine's
    EXPECT_NE(FindRule(s), nullptr) << "the doc names " << s << ", which is no rule";
  }
}

TEST(FindRule, IsCaseInsensitiveAndNullForUnknownIds) {
  ASSERT_NE(FindRule("gantry-ml-001"), nullptr);
  EXPECT_EQ(FindRule("gantry-ml-001")->id, "GANTRY-ML-001");
  EXPECT_EQ(FindRule("GANTRY-ML-999"), nullptr);
  EXPECT_EQ(FindRule(""), nullptr);
}

TEST(Rule, AppliesToComparesTypesIgnoringCase) {
  const Rule* r = FindRule("GANTRY-ML-001");
  ASSERT_NE(r, nullptr);
  Resource ws;
  ws.type = "microsoft.machinelearningservices/WORKSPACES";
  EXPECT_TRUE(r->AppliesTo(ws));
  ws.type = "Microsoft.MachineLearningServices/workspaces/computes";
  EXPECT_FALSE(r->AppliesTo(ws));
}

// ----------------------------------------------------------------- names --

TEST(Names, PillarsRoundTripAndAcceptShortNames) {
  for (Pillar p : {Pillar::kReliability, Pillar::kSecurity, Pillar::kCostOptimization,
                   Pillar::kOperationalExcellence, Pillar::kPerformanceEfficiency}) {
    Result<Pillar> back = ParsePillar(PillarName(p));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, p);
  }
  EXPECT_EQ(PillarName(Pillar::kCostOptimization), "Cost Optimization");
  EXPECT_EQ(*ParsePillar("cost"), Pillar::kCostOptimization);
  EXPECT_EQ(*ParsePillar(" Operations "), Pillar::kOperationalExcellence);
  EXPECT_EQ(*ParsePillar("performance efficiency"), Pillar::kPerformanceEfficiency);
  Result<Pillar> bad = ParsePillar("securty");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("'securty'"));
  EXPECT_THAT(bad.status().message(), HasSubstr("did you mean 'security'"));
  EXPECT_FALSE(ParsePillar("").ok());
}

TEST(Names, SeveritiesRoundTripAndScoreLikeCheckov) {
  EXPECT_EQ(*ParseSeverity("HIGH"), Severity::kHigh);
  EXPECT_EQ(SeverityName(Severity::kCritical), "critical");
  for (Severity s : {Severity::kLow, Severity::kMedium, Severity::kHigh, Severity::kCritical}) {
    EXPECT_EQ(*ParseSeverity(SeverityName(s)), s);
  }
  EXPECT_EQ(SecuritySeverityScore(Severity::kCritical), 9.0);
  EXPECT_EQ(SecuritySeverityScore(Severity::kHigh), 7.0);
  EXPECT_EQ(SecuritySeverityScore(Severity::kMedium), 5.0);
  EXPECT_EQ(SecuritySeverityScore(Severity::kLow), 3.0);
  Result<Severity> bad = ParseSeverity("hihg");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("did you mean 'high'"));
  EXPECT_EQ(OutcomeName(Outcome::kNotApplicable), "not_applicable");
  EXPECT_EQ(OutcomeName(Outcome::kUnknown), "unknown");
}

// --------------------------------------------------------------- context --

TEST(RuleContext, FindsByIdTypeAndNameAndForeignSubscription) {
  std::vector<Resource> rs = {
      Parse(R"({"type": "Microsoft.Network/networkInterfaces", "name": "nic1"})"),
      Parse(
          R"({"type": "Microsoft.MachineLearningServices/workspaces/computes", "name": "ws1/gpu"})"),
  };
  RuleContext ctx(rs, nullptr, "eastus");
  EXPECT_EQ(ctx.Find(rs[0].id), &rs[0]);
  EXPECT_EQ(ctx.Find(AsciiLower(rs[0].id)), &rs[0]);
  EXPECT_EQ(ctx.Find("Microsoft.Network/networkInterfaces/NIC1"), &rs[0]);
  EXPECT_EQ(ctx.Find("/subscriptions/1/resourceGroups/x/providers/Microsoft.Network/"
                     "networkInterfaces/nic1"),
            &rs[0]);
  EXPECT_EQ(ctx.Find("Microsoft.MachineLearningServices/workspaces/computes/ws1/gpu"), &rs[1]);
  EXPECT_EQ(ctx.Find(kStub + "Microsoft.MachineLearningServices/workspaces/ws1/computes/gpu"),
            &rs[1]);
  EXPECT_EQ(ctx.Find("nic1"), nullptr);
  EXPECT_EQ(ctx.Find(""), nullptr);
  EXPECT_EQ(ctx.Find("/providers/"), nullptr);
  EXPECT_EQ(ctx.Find("Microsoft.Network/networkInterfaces/nic2"), nullptr);
}

TEST(RuleContext, ChildrenScopesAndTypes) {
  std::vector<Resource> rs = {
      Parse(R"({"type": "Microsoft.MachineLearningServices/workspaces", "name": "ws1"})"),
      Parse(
          R"({"type": "Microsoft.MachineLearningServices/workspaces/computes", "name": "ws1/a"})"),
      Parse(
          R"({"type": "Microsoft.MachineLearningServices/workspaces/computes", "name": "WS1/b"})"),
      Parse(
          R"({"type": "Microsoft.MachineLearningServices/workspaces/computes", "name": "ws2/c"})"),
      Parse(R"({"type": "Microsoft.Insights/diagnosticSettings", "name": "d1",
                "scope": "/subscriptions/9/resourceGroups/r/providers/Microsoft.MachineLearningServices/workspaces/ws1"})"),
      Parse(R"({"type": "Microsoft.Insights/diagnosticSettings", "name": "d2", "scope": "ws1"})"),
      Parse(R"({"type": "Microsoft.MachineLearningServices/workspaces/providers/diagnosticSettings",
                "name": "ws1/Microsoft.Insights/d3"})"),
      Parse(R"({"type": "Microsoft.Insights/diagnosticSettings", "name": "d4", "scope": "ws2"})"),
  };
  RuleContext ctx(rs, nullptr, "eastus");
  std::vector<const Resource*> kids =
      ctx.ChildrenOf(rs[0], "microsoft.machinelearningservices/workspaces/computes");
  ASSERT_EQ(kids.size(), 2u);
  EXPECT_EQ(kids[0], &rs[1]);
  EXPECT_EQ(kids[1], &rs[2]);
  std::vector<const Resource*> diag = ctx.ScopedTo(rs[0], "Microsoft.Insights/diagnosticSettings");
  ASSERT_EQ(diag.size(), 3u);
  EXPECT_EQ(diag[0], &rs[4]);
  EXPECT_EQ(diag[1], &rs[5]);
  EXPECT_EQ(diag[2], &rs[6]);
  EXPECT_EQ(ctx.OfType("MICROSOFT.MACHINELEARNINGSERVICES/WORKSPACES/COMPUTES").size(), 3u);
  EXPECT_EQ(ctx.OfType("Microsoft.Insights/diagnosticSettings").size(), 4u);
  EXPECT_TRUE(ctx.OfType("Microsoft.Nothing/here").empty());
  EXPECT_EQ(ctx.default_region(), "eastus");
  EXPECT_EQ(ctx.catalog(), nullptr);
}

// ------------------------------------------------------------ cost rules --

constexpr double kH100Payg = 98.32;  // Standard_ND96isr_H100_v5, eastus (data/advise/azure.yaml)
constexpr double kA100Payg = 3.673;  // Standard_NC24ads_A100_v4, eastus
constexpr double kA100Spot = 0.444;
constexpr double kA100Reserved = 2.314;  // TestCatalog()'s overlay

TEST(CostRules, MinNodesPricesTheIdleNodes) {
  Verdict v =
      RunOne("GANTRY-COST-003", R"({"type": "Microsoft.MachineLearningServices/workspaces/computes",
      "name": "ws1/h100", "location": "eastus", "properties": {"computeType": "AmlCompute", "properties": {
      "vmSize": "Standard_ND96isr_H100_v5", "scaleSettings": {"minNodeCount": 2, "maxNodeCount": 8}}}})");
  ASSERT_EQ(v.outcome, Outcome::kFail);
  ASSERT_TRUE(v.monthly_usd.has_value());
  EXPECT_NEAR(*v.monthly_usd, 2 * kH100Payg * 730, 1e-6);  // 143,547.20
  EXPECT_THAT(v.message, HasSubstr("up to $143,547.20/month while idle"));
  EXPECT_THAT(v.message, HasSubstr("minNodeCount is 2"));
  EXPECT_THAT(v.cost_basis, HasSubstr("2 idle nodes x Standard_ND96isr_H100_v5 at $98.32/h"));
  EXPECT_EQ(v.property, "properties.properties.scaleSettings.minNodeCount");
}

TEST(CostRules, MinNodesOnLowPriorityUsesTheSpotRate) {
  Verdict v =
      RunOne("GANTRY-COST-003", R"({"type": "Microsoft.MachineLearningServices/workspaces/computes",
      "name": "ws1/a100", "location": "eastus", "properties": {"computeType": "AmlCompute", "properties": {
      "vmSize": "STANDARD_NC24ADS_A100_V4", "vmPriority": "LowPriority",
      "scaleSettings": {"minNodeCount": 1, "maxNodeCount": 8}}}})");
  ASSERT_TRUE(v.monthly_usd.has_value());
  EXPECT_NEAR(*v.monthly_usd, kA100Spot * 730, 1e-6);
  EXPECT_THAT(v.cost_basis, HasSubstr("(spot)"));
}

TEST(CostRules, NoAmountButStillAFailureWhenThePriceIsUnknown) {
  const char* cluster = R"({"type": "Microsoft.MachineLearningServices/workspaces/computes",
      "name": "ws1/x", "location": "%s", "properties": {"computeType": "AmlCompute", "properties": {
      "vmSize": "%s", "scaleSettings": {"minNodeCount": 2, "maxNodeCount": 8}}}})";
  auto make = [&](const char* region, const char* size) {
    char buf[1024];
    std::snprintf(buf, sizeof buf, cluster, region, size);
    return std::string(buf);
  };
  // No catalog.
  Verdict v = RunOne("GANTRY-COST-003", make("eastus", "Standard_ND96isr_H100_v5"), nullptr);
  EXPECT_EQ(v.outcome, Outcome::kFail);
  EXPECT_FALSE(v.monthly_usd.has_value());
  EXPECT_THAT(v.cost_basis, HasSubstr("no price catalog"));
  // A size the catalog lacks.
  v = RunOne("GANTRY-COST-003", make("eastus", "Standard_Z1_v9"));
  EXPECT_EQ(v.outcome, Outcome::kFail);
  EXPECT_FALSE(v.monthly_usd.has_value());
  EXPECT_THAT(v.cost_basis, HasSubstr("Standard_Z1_v9 is not in the price catalog"));
  // A region without prices.
  v = RunOne("GANTRY-COST-003", make("westeurope", "Standard_ND96isr_H100_v5"));
  EXPECT_EQ(v.outcome, Outcome::kFail);
  EXPECT_FALSE(v.monthly_usd.has_value());
  EXPECT_THAT(v.cost_basis, HasSubstr("no payg price for Standard_ND96isr_H100_v5 in westeurope"));
  // No location: the context's default region prices it.
  std::vector<Resource> all = {Parse(make("", "Standard_ND96isr_H100_v5"))};
  v = Check("GANTRY-COST-003", all[0], all, &TestCatalog(), "eastus");
  ASSERT_TRUE(v.monthly_usd.has_value());
  EXPECT_NEAR(*v.monthly_usd, 2 * kH100Payg * 730, 1e-6);
}

TEST(CostRules, IdleShutdownPricesAMonthOfTheInstance) {
  Verdict v =
      RunOne("GANTRY-COST-001", R"({"type": "Microsoft.MachineLearningServices/workspaces/computes",
      "name": "ws1/ci", "location": "eastus", "properties": {"computeType": "ComputeInstance",
      "properties": {"vmSize": "Standard_NC24ads_A100_v4"}}})");
  ASSERT_EQ(v.outcome, Outcome::kFail);
  ASSERT_TRUE(v.monthly_usd.has_value());
  EXPECT_NEAR(*v.monthly_usd, kA100Payg * 730, 1e-6);  // 2,681.29
  EXPECT_THAT(v.message, HasSubstr("$2,681.29/month"));
}

TEST(CostRules, IdleScaleDownStatesTheCostPerIdlePeriod) {
  Verdict v =
      RunOne("GANTRY-COST-004", R"({"type": "Microsoft.MachineLearningServices/workspaces/computes",
      "name": "ws1/h100", "location": "eastus", "properties": {"computeType": "AmlCompute", "properties": {
      "vmSize": "Standard_ND96isr_H100_v5", "scaleSettings": {"maxNodeCount": 4,
      "nodeIdleTimeBeforeScaleDown": "PT1H"}}}})");
  ASSERT_EQ(v.outcome, Outcome::kFail);
  EXPECT_FALSE(v.monthly_usd.has_value());
  // 4 nodes x $98.32/h x 0.5 h beyond the threshold.
  double per_period = 4 * kH100Payg * 0.5;
  EXPECT_NEAR(per_period, 196.64, 1e-9);
  EXPECT_THAT(v.message, HasSubstr("$196.64"));
  EXPECT_THAT(v.cost_basis, HasSubstr("per period"));
}

TEST(CostRules, LowPriorityForInterruptibleTraining) {
  Verdict v =
      RunOne("GANTRY-COST-005", R"({"type": "Microsoft.MachineLearningServices/workspaces/computes",
      "name": "ws1/train", "location": "eastus", "tags": {"workload": "training", "interruptible": "true"},
      "properties": {"computeType": "AmlCompute", "properties": {"vmSize": "Standard_NC24ads_A100_v4",
      "scaleSettings": {"minNodeCount": 0, "maxNodeCount": 8}}}})");
  ASSERT_EQ(v.outcome, Outcome::kFail);
  ASSERT_TRUE(v.monthly_usd.has_value());
  EXPECT_NEAR(*v.monthly_usd, (kA100Payg - kA100Spot) * 8 * 730, 1e-6);  // 18,857.36
  EXPECT_THAT(v.message, HasSubstr("$18,857.36"));
}

TEST(CostRules, SpotForInterruptibleScaleSet) {
  Verdict v = RunOne("GANTRY-COST-006", R"({"type": "Microsoft.Compute/virtualMachineScaleSets",
      "name": "batch", "location": "eastus", "tags": {"interruptible": "true"},
      "sku": {"name": "Standard_NC24ads_A100_v4", "capacity": 3}, "properties": {"virtualMachineProfile": {}}})");
  ASSERT_EQ(v.outcome, Outcome::kFail);
  ASSERT_TRUE(v.monthly_usd.has_value());
  EXPECT_NEAR(*v.monthly_usd, (kA100Payg - kA100Spot) * 3 * 730, 1e-6);
}

TEST(CostRules, ReservedCapacityForASteadyScaleSet) {
  std::string vmss = R"({"type": "Microsoft.Compute/virtualMachineScaleSets", "name": "serve",
      "location": "eastus", "sku": {"name": "Standard_NC24ads_A100_v4", "capacity": 4},
      "properties": {"virtualMachineProfile": {}}})";
  Verdict v = RunOne("GANTRY-COST-007", vmss);
  ASSERT_EQ(v.outcome, Outcome::kFail);
  ASSERT_TRUE(v.monthly_usd.has_value());
  EXPECT_NEAR(*v.monthly_usd, (kA100Payg - kA100Reserved) * 4 * 730, 1e-6);  // 3,968.28
  EXPECT_THAT(v.message, HasSubstr("saves $3,968.28/month"));
  EXPECT_THAT(v.message, HasSubstr("no autoscale setting"));
  // The shipped catalog has no reserved prices: still a failure, with no amount.
  v = RunOne("GANTRY-COST-007", vmss, &DefaultCatalog());
  EXPECT_EQ(v.outcome, Outcome::kFail);
  EXPECT_FALSE(v.monthly_usd.has_value());
  EXPECT_THAT(v.cost_basis, HasSubstr("no reserved_1y price"));
  // Autoscale pinned at min == max == 3: three steady instances.
  std::vector<Resource> all = {
      Parse(vmss),
      Parse(R"({"type": "Microsoft.Insights/autoscalesettings", "name": "as", "properties": {
          "enabled": true, "targetResourceUri": "/subscriptions/1/resourceGroups/r/providers/Microsoft.Compute/virtualMachineScaleSets/serve",
          "profiles": [{"name": "a", "capacity": {"minimum": "3", "maximum": "3", "default": "3"}},
                       {"name": "b", "capacity": {"minimum": "5", "maximum": "5", "default": "5"}}]}})")};
  v = Check("GANTRY-COST-007", all[0], all);
  ASSERT_TRUE(v.monthly_usd.has_value());
  EXPECT_NEAR(*v.monthly_usd, (kA100Payg - kA100Reserved) * 3 * 730, 1e-6);
}

TEST(CostRules, NodeIdleShutdownPricesTheNode) {
  Verdict v =
      RunOne("GANTRY-NODE-008", R"({"type": "Gantry/node", "name": "n1", "location": "eastus",
      "properties": {"vm": {"size": "Standard_ND96isr_H100_v5", "priority": "Regular"},
      "agent": {"configured": true, "idleShutdown": false}}})");
  ASSERT_EQ(v.outcome, Outcome::kFail);
  ASSERT_TRUE(v.monthly_usd.has_value());
  EXPECT_NEAR(*v.monthly_usd, kH100Payg * 730, 1e-6);
  EXPECT_EQ(v.property, "properties.agent.idleShutdown");
}

TEST(CostRules, NonCostRulesStateNoAmount) {
  for (const Rule& r : BuiltinRules()) {
    if (r.pillar == Pillar::kCostOptimization) continue;
    for (const char* f : {"fail"}) {
      Result<Fixture> fx = LoadFixture(kRulesData + r.id + "." + f + ".json");
      ASSERT_TRUE(fx.ok()) << fx.status().ToString();
      RuleContext ctx(fx->resources, &TestCatalog(), "eastus");
      for (size_t i = 0; i < fx->resources.size(); ++i) {
        if (fx->context[i]) continue;
        EXPECT_FALSE(r.check(fx->resources[i], ctx).monthly_usd.has_value()) << r.id;
      }
    }
  }
}

// ------------------------------------------- where the anchors disagree --

TEST(Disagreements, AbsentPublicAccessFailsLikeCkvAzure144) {
  Verdict v = RunOne("GANTRY-ML-001",
                     R"({"type": "Microsoft.MachineLearningServices/workspaces", "name": "ws"})");
  EXPECT_EQ(v.outcome, Outcome::kFail);
  EXPECT_THAT(v.message, HasSubstr("properties.publicNetworkAccess is absent"));
  EXPECT_THAT(v.message, HasSubstr("set it to 'Disabled'"));
}

TEST(Disagreements, ManagedNetworkComputesPassTheVnetRule) {
  std::vector<Resource> all = {
      Parse(R"({"type": "Microsoft.MachineLearningServices/workspaces", "name": "ws",
                "properties": {"managedNetwork": {"isolationMode": "AllowOnlyApprovedOutbound"}}})"),
      Parse(R"({"type": "Microsoft.MachineLearningServices/workspaces/computes", "name": "ws/gpu",
                "properties": {"computeType": "AmlCompute", "properties": {}}})")};
  EXPECT_EQ(Check("GANTRY-COMPUTE-002", all[1], all).outcome, Outcome::kPass);
  all[0].body["properties"]["managedNetwork"]["isolationMode"] = "Disabled";
  EXPECT_EQ(Check("GANTRY-COMPUTE-002", all[1], all).outcome, Outcome::kFail);
}

TEST(Disagreements, AttachedKubernetesIsLeftOutOfLocalAuthAndVnet) {
  for (const char* type : {"Kubernetes", "AKS"}) {
    std::string json =
        std::string(R"({"type": "Microsoft.MachineLearningServices/workspaces/computes",
        "name": "ws/k", "properties": {"computeType": ")") +
        type + R"("}})";
    EXPECT_EQ(RunOne("GANTRY-COMPUTE-001", json).outcome, Outcome::kNotApplicable) << type;
    EXPECT_EQ(RunOne("GANTRY-COMPUTE-002", json).outcome, Outcome::kNotApplicable) << type;
  }
}

TEST(Disagreements, V1LegacyModeOnFailsThoughPolicyAsksForIt) {
  Verdict v = RunOne("GANTRY-ML-009", R"({"type": "Microsoft.MachineLearningServices/workspaces",
      "name": "ws", "properties": {"v1LegacyMode": true}})");
  EXPECT_EQ(v.outcome, Outcome::kFail);
  EXPECT_THAT(v.message, HasSubstr("properties.v1LegacyMode is true"));
}

// ---------------------------------------------------------- unknown input --

TEST(Unknowns, ValuesKnownOnlyAfterApplyAreUnknownNotFailures) {
  struct Case {
    const char* rule;
    const char* json;
  } cases[] = {
      {"GANTRY-ML-007", R"({"type": "Microsoft.MachineLearningServices/workspaces", "name": "ws",
          "x-gantry-unknown": ["/properties/managedNetwork"]})"},
      {"GANTRY-ML-003", R"({"type": "Microsoft.MachineLearningServices/workspaces", "name": "ws",
          "identity": {"type": "UserAssigned"}, "x-gantry-unknown": ["/identity/userAssignedIdentities"]})"},
      {"GANTRY-COMPUTE-001", R"({"type": "Microsoft.MachineLearningServices/workspaces/computes",
          "name": "ws/c", "properties": {"computeType": "AmlCompute"},
          "x-gantry-unknown": ["/properties/disableLocalAuth"]})"},
      {"GANTRY-COMPUTE-002", R"({"type": "Microsoft.MachineLearningServices/workspaces/computes",
          "name": "ws/c", "properties": {"computeType": "AmlCompute"},
          "x-gantry-unknown": ["/properties/properties/subnet"]})"},
      {"GANTRY-COMPUTE-001", R"({"type": "Microsoft.MachineLearningServices/workspaces/computes",
          "name": "ws/c", "x-gantry-unknown": ["/properties/computeType"]})"},
      {"GANTRY-COST-003", R"({"type": "Microsoft.MachineLearningServices/workspaces/computes",
          "name": "ws/c", "properties": {"computeType": "AmlCompute"},
          "x-gantry-unknown": ["/properties/properties/scaleSettings/minNodeCount"]})"},
      {"GANTRY-VM-004", R"({"type": "Microsoft.Compute/virtualMachines", "name": "vm",
          "properties": {"osProfile": {"linuxConfiguration": {}}},
          "x-gantry-unknown": ["/properties/osProfile/linuxConfiguration/disablePasswordAuthentication"]})"},
      {"GANTRY-STORAGE-001", R"({"type": "Microsoft.Storage/storageAccounts", "name": "st",
          "x-gantry-unknown": ["/properties/allowBlobPublicAccess"]})"},
      {"GANTRY-KV-001", R"({"type": "Microsoft.KeyVault/vaults", "name": "kv",
          "x-gantry-unknown": ["/properties"]})"},
      {"GANTRY-NODE-004", R"({"type": "Gantry/node", "name": "n",
          "x-gantry-unknown": ["/properties/os/pendingSecurityUpdates"]})"},
  };
  for (const Case& c : cases) {
    Verdict v = RunOne(c.rule, c.json);
    EXPECT_EQ(OutcomeName(v.outcome), "unknown") << c.rule << ": " << v.message;
    EXPECT_FALSE(v.message.empty()) << c.rule;
  }
}

// ---------------------------------------------------------- hostile input --

TEST(HostileInput, EveryRuleCopesWithValuesOfTheWrongShape) {
  // Each rule's own types, with properties of every wrong shape, plus lookups
  // (NICs, autoscale, endpoints, diagnostic settings) just as broken.
  const char* shapes[] = {
      R"({"properties": "a string"})",
      R"({"properties": [1, 2, 3], "tags": "nope", "zones": "1", "sku": 3, "identity": []})",
      R"({"properties": {"properties": 5, "computeType": ["AmlCompute"], "encryption": "x",
          "managedNetwork": {"isolationMode": "AllowOnlyApprovedOutbound", "outboundRules": [1, null, "x"]},
          "privateEndpointConnections": [null, 1, {"properties": []}], "logs": {"a": 1},
          "storageAccount": 7, "scaleSettings": {"scaleType": "TargetUtilization", "minInstances": "many"}}})",
      R"({"properties": {"computeType": "AmlCompute", "properties": {"scaleSettings": [],
          "subnet": "x", "vmSize": 1, "vmPriority": null, "schedules": {"computeStartStop": [1, "x"]},
          "remoteLoginPortPublicAccess": 3, "idleTimeBeforeShutdown": 60}},
          "tags": {"interruptible": "true", "workload": "batch-inference", "environment": 5}})",
      R"({"properties": {"computeType": "ComputeInstance", "properties": {"idleTimeBeforeShutdown": "P",
          "osImageMetadata": [], "sshSettings": "x"}}, "x-gantry-origin": "live"})",
      R"({"properties": {"virtualMachineProfile": {"priority": "Spot", "billingProfile": {"maxPrice": "lots"},
          "networkProfile": {"networkInterfaceConfigurations": [null, 1, {"properties": 2}]},
          "osProfile": {"linuxConfiguration": "x"}}, "priority": "Spot", "evictionPolicy": 1,
          "networkProfile": {"networkInterfaces": [null, {"id": 5}, {"id": "/x/y"}]},
          "osProfile": {"linuxConfiguration": []}, "storageProfile": {"dataDisks": [null, 1]}},
          "tags": {"interruptible": "true"}, "sku": {"capacity": "x"}})",
      R"({"properties": {"health": {"verdict": 1, "failed": "x"}, "gpu": {"count": "eight"},
          "network": {"publicIpAddresses": "20.1.2.3", "acceleratedNetworking": "maybe"},
          "os": {"pendingSecurityUpdates": [], "rebootRequired": {}}, "agent": {"configured": "1"}}})",
  };
  std::vector<Resource> lookups;
  for (
      const char* j : {
          R"({"type": "Microsoft.Insights/autoscalesettings", "name": "as", "properties": {"targetResourceUri": 5, "profiles": "x"}})",
          R"({"type": "Microsoft.Insights/autoscalesettings", "name": "as2", "properties": {"targetResourceUri": "x", "profiles": [null, {"capacity": []}]}})",
          R"({"type": "Microsoft.Network/privateEndpoints", "name": "pe", "properties": {"privateLinkServiceConnections": [null, {"properties": 1}, {"properties": {"privateLinkServiceId": 3}}]}})",
          R"({"type": "Microsoft.Insights/diagnosticSettings", "name": "d", "scope": "x", "properties": {"logs": [null, {"enabled": true, "retentionPolicy": "x"}]}})",
          R"({"type": "Microsoft.Network/networkInterfaces", "name": "y", "properties": []})",
          R"({"type": "Microsoft.MachineLearningServices/workspaces/batchEndpoints/deployments", "name": "x/e/d", "properties": {"compute": 4}})",
          R"({"type": "Microsoft.MachineLearningServices/workspaces/providers/diagnosticSettings", "name": "x"})",
          R"({"type": "a/b/providers/c", "name": "x/y/z"})",
      }) {
    lookups.push_back(Parse(j));
  }
  int runs = 0;
  for (const Rule& rule : BuiltinRules()) {
    for (const std::string& type : rule.types) {
      for (const char* shape : shapes) {
        Result<Json> j = ParseJson(shape, "shape");
        ASSERT_TRUE(j.ok());
        (*j)["type"] = type;
        (*j)["name"] = "x/y/z";
        std::vector<Resource> all = lookups;
        bool ctxflag = false;
        all.push_back(FromJson(*j, &ctxflag));
        RuleContext ctx(all, &TestCatalog(), "eastus");
        Verdict v;
        EXPECT_NO_THROW(v = rule.check(all.back(), ctx)) << rule.id << " " << shape;
        if (v.outcome == Outcome::kFail || v.outcome == Outcome::kUnknown) {
          EXPECT_FALSE(v.message.empty()) << rule.id;
        }
        ++runs;
      }
    }
  }
  EXPECT_GT(runs, 300);
}

// --------------------------------------------------------------- helpers --

TEST(Helpers, IsoDurations) {
  using rule::ParseIsoDuration;
  EXPECT_EQ(ParseIsoDuration("PT30M"), 1800);
  EXPECT_EQ(ParseIsoDuration("PT120S"), 120);
  EXPECT_EQ(ParseIsoDuration("pt1h30m"), 5400);
  EXPECT_EQ(ParseIsoDuration("P1DT2H"), 93600);
  EXPECT_EQ(ParseIsoDuration("P1W"), 7 * 86400);
  EXPECT_EQ(ParseIsoDuration("PT0.5S"), 0.5);
  for (const char* bad : {"", "P", "PT", "30M", "PT30", "P1M", "P1Y", "PTM", "PT1H1D", "PT-1M",
                          "P1DT", "PTTM", "PT1X"}) {
    EXPECT_FALSE(ParseIsoDuration(bad).has_value()) << bad;
  }
}

TEST(Helpers, MoneyAndReferences) {
  EXPECT_EQ(rule::Usd(143547.2), "$143,547.20");
  EXPECT_EQ(rule::Usd(0.444), "$0.44");
  EXPECT_EQ(rule::Usd(1000), "$1,000.00");
  EXPECT_EQ(rule::Usd(999.999), "$1,000.00");
  EXPECT_EQ(rule::Usd(-12.5), "-$12.50");
  EXPECT_EQ(rule::LastSegment("azureml:gpu"), "gpu");
  EXPECT_EQ(rule::LastSegment("/a/b/computes/gpu/"), "gpu");
  Resource ws = Parse(R"({"type": "Microsoft.MachineLearningServices/workspaces", "name": "ws1"})");
  EXPECT_TRUE(rule::RefersTo(ws,
                             "/subscriptions/x/resourceGroups/y/providers/"
                             "Microsoft.MachineLearningServices/workspaces/WS1"));
  EXPECT_FALSE(rule::RefersTo(ws,
                              "/subscriptions/x/resourceGroups/y/providers/"
                              "Microsoft.MachineLearningServices/workspaces/xws1"));
  EXPECT_TRUE(rule::RefersTo(ws, "Microsoft.MachineLearningServices/workspaces/ws1"));
  EXPECT_TRUE(rule::RefersTo(ws, "ws1"));
  EXPECT_FALSE(rule::RefersTo(ws, ""));
}

}  // namespace
}  // namespace gantry::assess
