// The renderings: the table's content and width, JSON keys, SARIF shape and
// its validation against the SARIF 2.1.0 schema, JUnit structure and XML
// escaping, the Markdown comment.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gantry/assess/assess.h"
#include "gantry/core/subprocess.h"
#include "testing/temp_dir.h"

namespace gantry::assess {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::string_view kWs = "Microsoft.MachineLearningServices/workspaces";
constexpr std::string_view kCluster = "Microsoft.MachineLearningServices/workspaces/computes";

Rule SecRule() {
  Rule r;
  r.id = "TEST-ML-001";
  r.title = "Disable public network access to workspaces";
  r.pillar = Pillar::kSecurity;
  r.severity = Severity::kCritical;
  r.types = {std::string(kWs)};
  r.condition = "properties.publicNetworkAccess is 'Disabled'";
  r.rationale = "Workspaces behind private endpoints are not reachable from the internet.";
  r.fix_arm = "\"publicNetworkAccess\": \"Disabled\"";
  r.fix_terraform = "public_network_access_enabled = false";
  r.references = {"PSRule Azure.ML.PublicAccess", "Checkov CKV_AZURE_144"};
  r.help_uri = "https://learn.microsoft.com/azure/machine-learning/how-to-configure-private-link";
  r.check = [](const Resource& res, const RuleContext&) {
    const Json* v = res.Get("properties.publicNetworkAccess");
    if (v && *v == "Disabled") return Verdict::Pass();
    return Verdict::Fail("properties.publicNetworkAccess is 'Enabled'; set it to 'Disabled'",
                         "properties.publicNetworkAccess");
  };
  return r;
}

Rule CostRule() {
  Rule r;
  r.id = "TEST-COST-001";
  r.title = "Let compute clusters scale to zero";
  r.pillar = Pillar::kCostOptimization;
  r.severity = Severity::kMedium;
  r.types = {std::string(kCluster)};
  r.rationale = "Idle nodes bill by the hour.";
  r.fix_arm = "\"scaleSettings\": {\"minNodeCount\": 0}";
  r.check = [](const Resource& res, const RuleContext&) {
    const Json* v = res.Get("properties.properties.scaleSettings.minNodeCount");
    if (v == nullptr || *v == 0) return Verdict::Pass();
    Verdict out = Verdict::Fail(
        "min nodes 2 -> 0 on Standard_ND96isr_H100_v5: the nodes bill while the cluster is idle",
        "properties.properties.scaleSettings.minNodeCount");
    out.monthly_usd = 143547.2;
    out.cost_basis = "2 idle nodes x $98.32/h x 730 h";
    return out;
  };
  return r;
}

Rule LowRule() {
  Rule r;
  r.id = "TEST-OPS-001";
  r.title = "Send workspace logs somewhere";
  r.pillar = Pillar::kOperationalExcellence;
  r.severity = Severity::kLow;
  r.types = {std::string(kWs)};
  r.check = [](const Resource&, const RuleContext&) {
    return Verdict::Unknown("no diagnostic settings known");
  };
  return r;
}

const std::vector<Rule>& Rules() {
  static const auto* rules = new std::vector<Rule>{SecRule(), CostRule(), LowRule()};
  return *rules;
}

Resource Make(std::string_view type, std::string name, std::string file, int line, Json props) {
  Resource r;
  r.type = std::string(type);
  r.name = name;
  r.address = name;
  r.id = "/subscriptions/x/resourceGroups/rg/providers/" + r.type + "/" + name;
  r.where.file = std::move(file);
  r.where.line = line;
  r.body = {{"type", r.type}, {"name", name}, {"properties", std::move(props)}};
  return r;
}

// Two files: an open workspace, a closed one suppressed by tag on another
// rule, a cluster with idle nodes, a hostile name; one expired suppression.
Assessment Sample() {
  std::vector<Resource> rs;
  rs.push_back(Make(kWs, "ws-open", "infra/main.json", 12, {{"publicNetworkAccess", "Enabled"}}));
  rs.push_back(
      Make(kWs, "ws-closed", "infra/main.json", 40, {{"publicNetworkAccess", "Disabled"}}));
  rs.push_back(Make(kWs, "ws-old", "infra/main.json", 50, {{"publicNetworkAccess", "Enabled"}}));
  Resource tagged = Make(kWs, "ws-lab", "infra/lab.json", 7, {{"publicNetworkAccess", "Enabled"}});
  tagged.body["tags"] = {{std::string(kSuppressTag), "TEST-ML-001: lab, synthetic data only"}};
  rs.push_back(tagged);
  rs.push_back(Make(kCluster, "ws-open/gpu", "infra/main.json", 60,
                    {{"properties", {{"scaleSettings", {{"minNodeCount", 2}}}}}}));
  rs.push_back(
      Make(kWs, "ws<&\"'>|x", "infra/main.json", 80, {{"publicNetworkAccess", "Enabled"}}));
  AssessOptions o;
  o.today = "2027-01-15";
  o.suppressions = {{"TEST-ML-001", "ws-old", "old decision", "2026-12-31", "sup.yaml:4"},
                    {"TEST-COST-*", "nothing-*", "file suppression", "2027-06-30", "sup.yaml:9"}};
  o.suppressions.push_back({"TEST-ML-001", "ws<*", "escaping test", "2027-06-30", "sup.yaml:14"});
  auto a = Assess(rs, Rules(), o);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return *a;
}

TEST(ReportTest, TableHasScoresFailuresCostAndSummaryInOneHundredColumns) {
  const std::string t = RenderTable(Sample());
  EXPECT_THAT(t, HasSubstr("6 resources in 2 files"));
  EXPECT_THAT(t, HasSubstr("Security"));
  EXPECT_THAT(t, HasSubstr("Cost Optimization"));
  EXPECT_THAT(t, HasSubstr("CRITICAL  TEST-ML-001  ws-open"));
  EXPECT_THAT(t, HasSubstr("at infra/main.json:12"));
  EXPECT_THAT(t, HasSubstr("properties.publicNetworkAccess is 'Enabled'; set it to 'Disabled'"));
  EXPECT_THAT(t, HasSubstr("at stake: $143,547/month (2 idle nodes x $98.32/h x 730 h)"));
  EXPECT_THAT(t, HasSubstr("Expired suppressions"));
  EXPECT_THAT(t, HasSubstr("sup.yaml:4"));
  // 2 critical (ws-open, ws-old whose suppression expired), 1 medium cost,
  // 1 medium expired suppression; ws-lab and the hostile name are suppressed.
  EXPECT_THAT(t, HasSubstr("\n4 failures (2 critical, 2 medium), 1 passed, 2 suppressed, "
                           "5 unknown; $143,547/month at stake; 1\nexpired suppression\n"));
  EXPECT_THAT(t, HasSubstr("MEDIUM    GANTRY-SUP-001  suppression of TEST-ML-001 on ws-old\n"
                           "            at sup.yaml:4\n"));
  EXPECT_THAT(t,
              HasSubstr("Security                    60%       1       2        0           2\n"));
  EXPECT_THAT(t, Not(HasSubstr("ws-lab\n")));  // suppressed: not in the failure list
  std::istringstream in(t);
  std::string line;
  while (std::getline(in, line)) EXPECT_LE(line.size(), 100u) << line;
}

TEST(ReportTest, TableNamesResourcesWhoseAddressIsAPosition) {
  Resource r;
  r.type = "Microsoft.MachineLearningServices/workspaces/computes";
  r.name = "mlw-prod/gpu-000";
  r.address = "resources[4].resources[0][0]";
  r.where = {"infra/main.json", 110, "/resources/4/resources/0"};
  r.body = {{"type", r.type}, {"name", r.name}};
  Rule rule;
  rule.id = "TEST-ML-009";
  rule.title = "Fail everything";
  rule.types = {r.type};
  rule.check = [](const Resource&, const RuleContext&) { return Verdict::Fail("always"); };
  const std::vector<Rule> rules = {rule};  // findings point into it
  Result<Assessment> a = Assess({r}, rules, AssessOptions{.today = "2027-01-15"});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_THAT(RenderTable(*a), HasSubstr("  TEST-ML-009  resources[4].resources[0][0]\n"
                                         "            at infra/main.json:110 (computes "
                                         "'mlw-prod/gpu-000')\n"));
}

TEST(ReportTest, JsonHasTheDocumentedKeys) {
  Json j = ToJson(Sample());
  EXPECT_EQ(j["report"], "gantry.assess");
  EXPECT_EQ(j["version"], 1);
  std::vector<std::string> keys;
  for (const auto& [k, v] : j["summary"].items()) keys.push_back(k);
  EXPECT_THAT(keys, ::testing::ElementsAre("resources", "files", "checks", "passed", "failed",
                                           "unknown", "suppressed", "failed_by_severity",
                                           "monthly_usd_at_stake", "expired_suppressions"));
  EXPECT_EQ(j["summary"]["failed"], 4);
  EXPECT_EQ(j["summary"]["failed_by_severity"]["critical"], 2);
  EXPECT_EQ(j["scores"].size(), 5u);
  EXPECT_EQ(j["scores"][1]["pillar"], "Security");
  const Json& f = j["findings"][0];
  keys.clear();
  for (const auto& [k, v] : f.items()) keys.push_back(k);
  EXPECT_THAT(keys, ::testing::ElementsAre("rule", "title", "pillar", "severity", "outcome",
                                           "message", "property", "resource", "monthly_usd",
                                           "cost_basis", "suppressed"));
  bool saw_tag = false, saw_cost = false;
  for (const Json& x : j["findings"]) {
    if (x["suppressed"].is_object() && x["suppressed"]["kind"] == "tag") saw_tag = true;
    if (x["monthly_usd"].is_number()) saw_cost = true;
  }
  EXPECT_TRUE(saw_tag);
  EXPECT_TRUE(saw_cost);
  EXPECT_EQ(j["expired_suppressions"][0]["origin"], "sup.yaml:4");
}

TEST(ReportTest, SarifHasTheShapeCodeScanningReads) {
  Json s = ToSarif(Sample(), "9.9.9");
  EXPECT_EQ(s["version"], "2.1.0");
  EXPECT_EQ(s["$schema"], "https://json.schemastore.org/sarif-2.1.0.json");
  ASSERT_EQ(s["runs"].size(), 1u);
  const Json& run = s["runs"][0];
  const Json& driver = run["tool"]["driver"];
  EXPECT_EQ(driver["name"], "gantry-assess");
  EXPECT_EQ(driver["version"], "9.9.9");
  EXPECT_TRUE(driver["informationUri"].is_string());
  // Rules that produced a result, in id order; the unknown-only rule is absent.
  std::vector<std::string> ids;
  for (const Json& r : driver["rules"]) ids.push_back(r["id"]);
  EXPECT_THAT(ids, ::testing::ElementsAre("GANTRY-SUP-001", "TEST-COST-001", "TEST-ML-001"));
  const Json& ml = driver["rules"][2];
  EXPECT_EQ(ml["properties"]["security-severity"], "9.0");
  EXPECT_THAT(ml["properties"]["tags"].get<std::vector<std::string>>(),
              ::testing::ElementsAre("Security", "security", "well-architected"));
  EXPECT_EQ(ml["defaultConfiguration"]["level"], "error");
  EXPECT_THAT(ml["help"]["markdown"].get<std::string>(), HasSubstr("```hcl"));
  EXPECT_THAT(ml["help"]["text"].get<std::string>(), HasSubstr("Checkov CKV_AZURE_144"));
  EXPECT_TRUE(ml["helpUri"].is_string());
  EXPECT_EQ(driver["rules"][1]["properties"]["security-severity"], "5.0");
  EXPECT_EQ(driver["rules"][1]["defaultConfiguration"]["level"], "warning");

  EXPECT_TRUE(run["originalUriBaseIds"]["%SRCROOT%"]["uri"].get<std::string>().ends_with("/"));
  const Json& results = run["results"];
  ASSERT_EQ(results.size(), 6u);  // 4 open failures + 2 suppressed
  int in_source = 0, external = 0;
  for (const Json& r : results) {
    EXPECT_EQ(driver["rules"][r["ruleIndex"].get<int>()]["id"], r["ruleId"]);
    const Json& loc = r["locations"][0]["physicalLocation"];
    EXPECT_EQ(loc["artifactLocation"]["uriBaseId"], "%SRCROOT%");
    EXPECT_GE(loc["region"]["startLine"].get<int>(), 1);
    EXPECT_TRUE(r["partialFingerprints"]["gantryAssess/v1"].is_string());
    if (r.contains("suppressions")) {
      (r["suppressions"][0]["kind"] == "inSource" ? in_source : external)++;
      EXPECT_FALSE(r["suppressions"][0]["justification"].get<std::string>().empty());
    }
  }
  EXPECT_EQ(in_source, 1);         // the tag
  EXPECT_EQ(external, 1);          // the file
  const Json& first = results[0];  // infra/lab.json sorts first
  EXPECT_EQ(first["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], "infra/lab.json");
  EXPECT_EQ(first["locations"][0]["physicalLocation"]["region"]["startLine"], 7);
  bool cost = false;
  for (const Json& r : results) {
    if (r["ruleId"] == "TEST-COST-001") {
      cost = true;
      EXPECT_DOUBLE_EQ(r["properties"]["monthly_usd"].get<double>(), 143547.2);
      EXPECT_EQ(r["level"], "warning");
    }
  }
  EXPECT_TRUE(cost);
  // Fingerprints depend on rule and address only: the same on every run.
  EXPECT_EQ(ToSarif(Sample(), "1.0")["runs"][0]["results"], results);
}

TEST(ReportTest, SarifPathsAreRelativeToTheWorkingDirectory) {
  std::vector<Resource> rs;
  const std::string cwd = std::filesystem::current_path().string();
  rs.push_back(
      Make(kWs, "a", cwd + "/deploy/my main.json", 3, {{"publicNetworkAccess", "Enabled"}}));
  rs.push_back(Make(kWs, "b", "./deploy/x.json", 3, {{"publicNetworkAccess", "Enabled"}}));
  rs.push_back(Make(kWs, "c", "/elsewhere/y.json", 3, {{"publicNetworkAccess", "Enabled"}}));
  AssessOptions o;
  o.today = "2027-01-15";
  auto a = Assess(rs, Rules(), o);
  ASSERT_TRUE(a.ok());
  std::vector<std::string> uris;
  const Json sarif = ToSarif(*a, "1");
  for (const Json& r : sarif["runs"][0]["results"]) {
    uris.push_back(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]);
  }
  if (cwd != "/") {
    EXPECT_THAT(uris, ::testing::UnorderedElementsAre("deploy/my%20main.json", "deploy/x.json",
                                                      "file:///elsewhere/y.json"));
  }
}

// node + ajv from package-lock.json (scripts/install-deps.sh).
TEST(ReportTest, SarifValidatesAgainstTheSarif210Schema) {
  const std::string root = GANTRY_SOURCE_DIR;
  ASSERT_TRUE(std::filesystem::exists(root + "/node_modules/ajv/package.json") &&
              std::filesystem::exists(root + "/node_modules/@microsoft/jest-sarif/lib/schemas/"
                                             "sarif-2.1.0-rtm.5.json"))
      << "the SARIF schema and ajv are missing: run scripts/install-deps.sh (npm ci)";
  gantry::testing::TempDir dir;
  const std::string good = dir.path() + "/good.sarif";
  std::ofstream(good) << ToSarif(Sample(), "1.2.3").dump(2);
  // An empty assessment is a valid log too.
  AssessOptions o;
  o.today = "2027-01-15";
  const std::string empty = dir.path() + "/empty.sarif";
  std::ofstream(empty) << ToSarif(*Assess({}, Rules(), o), "1.2.3").dump(2);
  // The validator must be able to say no.
  Json broken = ToSarif(Sample(), "1.2.3");
  broken["runs"][0]["results"][0]["level"] = "critical";
  const std::string bad = dir.path() + "/bad.sarif";
  std::ofstream(bad) << broken.dump(2);

  const std::string script = root + "/src/assess/testdata/report/validate-sarif.cjs";
  auto ok = RunSubprocess({"node", script, root, good, empty}, std::chrono::seconds(60));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->exit_code, 0) << ok->out << ok->err;
  auto no = RunSubprocess({"node", script, root, bad}, std::chrono::seconds(60));
  ASSERT_TRUE(no.ok());
  EXPECT_EQ(no->exit_code, 1) << no->out << no->err;
  EXPECT_THAT(no->out, HasSubstr("/runs/0/results/0/level"));
}

TEST(ReportTest, JUnitHasOneSuitePerFileAndEscapes) {
  const std::string x = ToJUnit(Sample());
  EXPECT_THAT(x, HasSubstr("<testsuite name=\"infra/main.json\""));
  EXPECT_THAT(x, HasSubstr("<testsuite name=\"infra/lab.json\""));
  EXPECT_THAT(x, HasSubstr("<testsuite name=\"sup.yaml\""));
  EXPECT_THAT(x, HasSubstr("name=\"[CRITICAL][TEST-ML-001] Disable public network access to "
                           "workspaces\" classname=\"infra/main.json.ws-open\" "
                           "file=\"infra/main.json\" line=\"12\""));
  EXPECT_THAT(x, HasSubstr("<failure message=\"properties.publicNetworkAccess is "
                           "&apos;Enabled&apos;; set it to &apos;Disabled&apos;\" "
                           "type=\"critical\">"));
  EXPECT_THAT(x, HasSubstr("<skipped message=\"suppressed (tag on ws-lab): lab, synthetic data "
                           "only\"/>"));
  EXPECT_THAT(x, HasSubstr("classname=\"infra/main.json.ws&lt;&amp;&quot;&apos;&gt;|x\""));
  EXPECT_THAT(x, Not(HasSubstr("ws<&")));
  // A well-formed document, as an XML parser sees it.
  gantry::testing::TempDir dir;
  const std::string path = dir.path() + "/junit.xml";
  std::ofstream(path) << x;
  auto r = RunSubprocess({"python3", "-c",
                          "import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); "
                          "print(len(d.getElementsByTagName('testsuite')), "
                          "len(d.getElementsByTagName('testcase')), "
                          "len(d.getElementsByTagName('failure')), "
                          "len(d.getElementsByTagName('skipped')))",
                          path},
                         std::chrono::seconds(60));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->exit_code, 0) << r->err;
  // 3 suites; 5 workspaces x 2 rules + 1 cluster + 1 expired = 12 cases;
  // 4 failures; 2 suppressed + 5 unknown skipped.
  EXPECT_EQ(r->out, "3 12 4 7\n");
}

TEST(ReportTest, MarkdownIsAPullRequestComment) {
  const std::string md = ToMarkdown(Sample());
  EXPECT_THAT(md, HasSubstr("| Pillar | Score | Passed | Failed | Unknown | Suppressed |"));
  EXPECT_THAT(md, HasSubstr("### Critical (2)"));
  EXPECT_THAT(md, HasSubstr("### Medium (2)"));
  EXPECT_THAT(md, HasSubstr("| `TEST-ML-001` | `ws-open` | infra/main.json:12 |"));
  EXPECT_THAT(md, HasSubstr("(at stake: $143,547/month)"));
  EXPECT_THAT(md, HasSubstr("<details><summary>How to fix</summary>"));
  EXPECT_THAT(md, HasSubstr("```hcl\npublic_network_access_enabled = false\n```"));
  EXPECT_THAT(md, HasSubstr("### Expired suppressions"));
  // Critical comes before medium.
  EXPECT_LT(md.find("### Critical"), md.find("### Medium"));
}

TEST(ReportTest, MarkdownStaysWithinACommentForHugeAssessments) {
  std::vector<Resource> rs;
  for (int i = 0; i < 5000; ++i) {
    rs.push_back(Make(kWs, fmt::format("ws-{}|pipe", i), "big.json", i + 1,
                      {{"publicNetworkAccess", "Enabled"}}));
  }
  AssessOptions o;
  o.today = "2027-01-15";
  auto a = Assess(rs, Rules(), o);
  ASSERT_TRUE(a.ok());
  const std::string md = ToMarkdown(*a);
  EXPECT_LT(md.size(), 65536u);
  EXPECT_THAT(md, HasSubstr("4900 more failures are not listed here"));
  EXPECT_THAT(md, HasSubstr("ws-0\\|pipe"));  // pipes escaped in table cells
}

TEST(ReportTest, NothingToReport) {
  AssessOptions o;
  o.today = "2027-01-15";
  auto a = Assess({}, Rules(), o);
  ASSERT_TRUE(a.ok());
  EXPECT_THAT(RenderTable(*a), HasSubstr("0 failures, 0 passed, 0 suppressed, 0 unknown"));
  EXPECT_THAT(ToMarkdown(*a), HasSubstr("No failures."));
  EXPECT_THAT(ToJUnit(*a), HasSubstr("<testsuites name=\"gantry-assess\" tests=\"0\""));
  EXPECT_TRUE(ToSarif(*a, "1")["runs"][0]["results"].empty());
}

}  // namespace
}  // namespace gantry::assess
