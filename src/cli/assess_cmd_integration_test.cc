// `gantry assess` end to end through the real binary: exit codes (0 clean or
// all suppressed, 1 a finding at or above --fail-on, 2 usage and unreadable
// input), the --json shape, --output files, rules/explain, and --node on a
// fake root.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "gantry/core/json.h"
#include "testing/fake_root.h"
#include "testing/gantry_cli.h"
#include "testing/temp_dir.h"

namespace gantry::testing {
namespace {

using ::testing::HasSubstr;

std::string Data(const std::string& name) {
  return std::string(GANTRY_SOURCE_DIR) + "/src/assess/testdata/engine/" + name;
}

CliRun Assess(std::vector<std::string> args) {
  args.insert(args.begin(), {"assess", "run"});
  args.push_back("--today");
  args.push_back("2027-01-15");
  return RunGantry(args);
}

TEST(AssessCli, FindingsAtOrAboveFailOnExitOne) {
  CliRun r = Assess({Data("workspace.json")});
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_THAT(r.out, HasSubstr("GANTRY-COST-003"));
  EXPECT_THAT(r.out, HasSubstr("workspace.json:17"));
  EXPECT_THAT(r.out, HasSubstr("/month at stake"));
  // Only low findings count at --fail-on low; at critical nothing does here.
  EXPECT_EQ(Assess({Data("workspace.json"), "--fail-on", "critical"}).rc, 0);
  EXPECT_EQ(Assess({Data("workspace.json"), "--fail-on", "low"}).rc, 1);
}

TEST(AssessCli, SuppressedFindingsDoNotFailTheRun) {
  CliRun r = Assess({Data("workspace.json"), "--suppressions", Data("accept-all.yaml")});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("0 failures"));
  // After the expiry date the same file suppresses nothing and is itself a finding.
  CliRun late = RunGantry({"assess", "run", Data("workspace.json"), "--suppressions",
                           Data("accept-all.yaml"), "--today", "2027-07-01", "--json"});
  EXPECT_EQ(late.rc, 1);
  Json j = late.json();
  EXPECT_EQ(j["summary"]["expired_suppressions"], 1);
  bool lapse = false;
  for (const Json& f : j["findings"]) lapse |= f["rule"] == "GANTRY-SUP-001";
  EXPECT_TRUE(lapse);
}

TEST(AssessCli, JsonShape) {
  CliRun r = Assess({Data("workspace.json"), "--json"});
  ASSERT_EQ(r.rc, 1) << r.err;
  Json j = r.json();
  EXPECT_EQ(j["report"], "gantry.assess");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["summary"]["resources"], 2);
  EXPECT_EQ(j["summary"]["files"].size(), 1u);
  EXPECT_GT(j["summary"]["failed"].get<int>(), 0);
  EXPECT_GT(j["summary"]["monthly_usd_at_stake"].get<double>(), 0);
  ASSERT_EQ(j["scores"].size(), 5u);
  for (const Json& s : j["scores"]) {
    EXPECT_TRUE(s["pillar"].is_string());
    EXPECT_GE(s["score"].get<double>(), 0);
    EXPECT_LE(s["score"].get<double>(), 100);
  }
  ASSERT_FALSE(j["findings"].empty());
  for (const Json& f : j["findings"]) {
    for (const char* k : {"rule", "title", "pillar", "severity", "outcome", "message", "property",
                          "resource", "monthly_usd", "cost_basis", "suppressed"}) {
      EXPECT_TRUE(f.contains(k)) << k;
    }
    EXPECT_EQ(f["resource"]["file"], Data("workspace.json"));
  }
  // --format json is the same document.
  EXPECT_EQ(Assess({Data("workspace.json"), "--format", "json"}).json(), j);
}

TEST(AssessCli, OutputFilesInEveryFormat) {
  TempDir dir;
  for (const char* format : {"table", "json", "sarif", "junit", "markdown"}) {
    const std::string out = dir.path() + "/out." + format;
    CliRun r = Assess({Data("workspace.json"), "--format", format, "--output", out});
    EXPECT_EQ(r.rc, 1) << format << ": " << r.err;
    std::ifstream in(out);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_FALSE(text.empty()) << format;
    if (std::string(format) == "table") {
      EXPECT_THAT(text, HasSubstr("pillar"));
      EXPECT_TRUE(r.out.empty()) << "the table went to the file";
    } else {
      EXPECT_THAT(r.out, HasSubstr("pillar")) << "stdout shows the table with --output";
    }
    if (std::string(format) == "sarif") {
      Json s = Json::parse(text);
      EXPECT_EQ(s["version"], "2.1.0");
      EXPECT_EQ(s["runs"][0]["tool"]["driver"]["name"], "gantry-assess");
    }
    if (std::string(format) == "junit") EXPECT_THAT(text, HasSubstr("<testsuites"));
    if (std::string(format) == "markdown") EXPECT_THAT(text, HasSubstr("## Gantry assess"));
  }
}

TEST(AssessCli, UnreadableInputAndUsageExitTwo) {
  CliRun malformed = Assess({Data("malformed.json")});
  EXPECT_EQ(malformed.rc, 2);
  EXPECT_THAT(malformed.err, HasSubstr("malformed.json:3"));
  CliRun missing = Assess({Data("absent.json")});
  EXPECT_EQ(missing.rc, 2);
  EXPECT_THAT(missing.err, HasSubstr("absent.json"));
  EXPECT_EQ(Assess({Data("workspace.json"), "--format", "yaml"}).rc, 2);
  EXPECT_EQ(Assess({Data("workspace.json"), "--fail-on", "severe"}).rc, 2);
  EXPECT_EQ(Assess({}).rc, 2);  // nothing to assess
  CliRun bad_day = RunGantry({"assess", "run", Data("workspace.json"), "--today", "2027-02-30"});
  EXPECT_EQ(bad_day.rc, 2);
  EXPECT_THAT(bad_day.err, HasSubstr("2027-02-30"));

  TempDir dir;
  const std::string sup = dir.path() + "/s.yaml";
  std::ofstream(sup) << "suppressions:\n  - rule: GANTRY-ML-01\n    resource: '*'\n"
                        "    justification: x\n    expires: 2027-06-30\n";
  CliRun typo = Assess({Data("workspace.json"), "--suppressions", sup});
  EXPECT_EQ(typo.rc, 2);
  EXPECT_THAT(typo.err, HasSubstr(":2: unknown rule 'GANTRY-ML-01' (did you mean"));
  std::ofstream(sup) << "suppressions:\n  - rule: GANTRY-ML-001\n    resource: '*'\n"
                        "    expires: 2027-06-30\n";
  CliRun no_why = Assess({Data("workspace.json"), "--suppressions", sup});
  EXPECT_EQ(no_why.rc, 2);
  EXPECT_THAT(no_why.err, HasSubstr("missing 'justification'"));
}

TEST(AssessCli, TheDefaultSuppressionFileIsPickedUp) {
  TempDir dir;
  std::filesystem::copy_file(Data("accept-all.yaml"), dir.path() + "/.gantry-assess.yaml");
  CliRun r = RunShell("cd '" + dir.path() + "' && '" + GantryBinary() + "' assess run '" +
                      Data("workspace.json") + "' --today 2027-01-15");
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  CliRun ignored = RunShell("cd '" + dir.path() + "' && '" + GantryBinary() + "' assess run '" +
                            Data("workspace.json") + "' --today 2027-01-15 --no-suppressions");
  EXPECT_EQ(ignored.rc, 1);
}

TEST(AssessCli, RulesAndExplain) {
  CliRun rules = RunGantry({"assess", "rules", "--json"});
  ASSERT_EQ(rules.rc, 0) << rules.err;
  Json j = rules.json();
  ASSERT_TRUE(j.is_array());
  EXPECT_GT(j.size(), 30u);
  bool sup = false;
  for (const Json& r : j) {
    EXPECT_TRUE(r["id"].get<std::string>().starts_with("GANTRY-"));
    sup |= r["id"] == "GANTRY-SUP-001";
  }
  EXPECT_TRUE(sup);
  CliRun explain = RunGantry({"assess", "explain", "gantry-cost-003"});
  EXPECT_EQ(explain.rc, 0) << explain.err;
  EXPECT_THAT(explain.out, HasSubstr("GANTRY-COST-003"));
  EXPECT_THAT(explain.out, HasSubstr("Fix (ARM/Bicep):"));
  CliRun unknown = RunGantry({"assess", "explain", "GANTRY-COST-03"});
  EXPECT_EQ(unknown.rc, 2);
  EXPECT_THAT(unknown.err, HasSubstr("did you mean 'GANTRY-COST-003'"));
}

TEST(AssessCli, NodeOnAFakeRoot) {
  FakeRoot root;
  root.Write("/etc/hostname", "fake-node\n");
  root.Write("/var/run/reboot-required", "");
  root.Mkdir("/sys/bus/pci/devices");
  CliRun r = RunGantry({"assess", "run", "--node", "--node-root", root.path(), "--skip-health",
                        "--json", "--today", "2027-01-15"},
                       {{"GANTRY_IMDS_ENDPOINT", "http://127.0.0.1:1"}});
  ASSERT_TRUE(r.rc == 0 || r.rc == 1) << r.err;
  Json j = r.json();
  EXPECT_EQ(j["summary"]["resources"], 1);
  bool reboot = false;
  for (const Json& f : j["findings"]) {
    EXPECT_EQ(f["resource"]["type"], "Gantry/node");
    EXPECT_EQ(f["resource"]["name"], "fake-node");
    if (f["outcome"] == "fail" &&
        f["property"].get<std::string>().find("rebootRequired") != std::string::npos) {
      reboot = true;
    }
  }
  EXPECT_TRUE(reboot) << r.out;
}

}  // namespace
}  // namespace gantry::testing
