// Prerequisites against this machine's real Python environment: the Debian
// interpreter's installed distributions, and our PEP 440 implementation
// compared with the `packaging` library (pip's) on every version installed
// here plus hand-picked edge cases.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "gantry/core/json.h"
#include "gantry/core/subprocess.h"
#include "gantry/jobs/prereq.h"
#include "pyversion.h"

namespace gantry::jobs {
namespace {

constexpr char kPython[] = "/usr/bin/python3";

Result<PythonProbe> SystemDistributions() {
  PythonProbeRequest req;
  req.interpreter = kPython;
  req.distributions = true;
  return RunPythonProbe(req);
}

TEST(SystemPythonTest, AllowlistFlagsEveryOtherInstalledDistribution) {
  ASSERT_TRUE(std::filesystem::exists(kPython))
      << "no " << kPython << " (Debian python3; scripts/install-deps.sh)";
  Result<PythonProbe> probe = SystemDistributions();
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  ASSERT_GE(probe->distributions.size(), 2u) << "expected a few Debian Python packages";
  const InstalledDistribution& first = probe->distributions[0];

  Prerequisites p;
  p.packages = std::vector<std::string>{first.name};
  std::vector<PrereqResult> rs = PrereqChecker().Check(p, PrereqContext{});
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_FALSE(rs[0].ok);
  EXPECT_EQ(rs[0].details.size(), probe->distributions.size() - 1) << rs[0].message;
  for (const std::string& d : rs[0].details) {
    EXPECT_TRUE(d.ends_with(": not in the allowlist")) << d;
    EXPECT_FALSE(d.starts_with(first.name + " ")) << d;
  }
  // Allowing every one of them, at its own version, passes.
  std::vector<std::string> all;
  for (const InstalledDistribution& d : probe->distributions) {
    all.push_back(d.name + (ParsePyVersion(d.version).ok() ? "==" : "===") + d.version);
  }
  p.packages = all;
  rs = PrereqChecker().Check(p, PrereqContext{});
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_TRUE(rs[0].ok) << rs[0].message;
}

// Asks `packaging` for the order of `versions` (a rank per version, equal
// ranks for equal versions) and for each (specifier, version) whether the
// version is contained, pre-releases allowed.
constexpr char kOracle[] = R"PY(
import json, sys
from packaging.version import Version
from packaging.specifiers import SpecifierSet
req = json.loads(sys.argv[1])
vs = [Version(v) for v in req["versions"]]
order = sorted(set(vs))
rank = [order.index(v) for v in vs]
contains = [[SpecifierSet(s).contains(v, prereleases=True) for v in vs] for s in req["specs"]]
print(json.dumps({"rank": rank, "contains": contains, "normalized": [str(v) for v in vs]}))
)PY";

TEST(Pep440OracleTest, AgreesWithPackagingOnInstalledAndEdgeVersions) {
  ASSERT_TRUE(std::filesystem::exists(kPython))
      << "no " << kPython << " (Debian python3; scripts/install-deps.sh)";
  Result<SubprocessResult> has =
      RunSubprocess({kPython, "-c", "import packaging.version"}, std::chrono::seconds(30));
  ASSERT_TRUE(has.ok() && has->exit_code == 0)
      << "python3-packaging is not installed (scripts/install-deps.sh installs it)";

  std::vector<std::string> versions = {
      "1.0.dev0",    "1.0a1",       "1.0b2.post3",    "1.0rc1.dev2", "1.0",      "1.0+local.7",
      "1.0+local.a", "1.0.post1",   "1.0.post1.dev1", "1!0.5",       "2.1.0rc1", "2.1.0",
      "2.1.0+cu121", "1.13.1+dfsg", "1.26.4",         "3.0.dev1",    "3.0rc1",   "0.0.1",
      "2023.12.1",   "6.0",         "6.0.1",          "1.24.2",      "2.99",     "V1.0-RC.2"};
  Result<PythonProbe> probe = SystemDistributions();
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  for (const InstalledDistribution& d : probe->distributions) {
    if (ParsePyVersion(d.version).ok()) versions.push_back(d.version);
  }
  const std::vector<std::string> specs = {">=2.1",
                                          "<3",
                                          ">1.0",
                                          "<=1.0",
                                          "==1.0",
                                          "==1.0+local.7",
                                          "!=1.0",
                                          "==6.*",
                                          "!=1.*",
                                          "~=1.0",
                                          "~=2.1.0",
                                          ">=1.0,<2",
                                          "==2.1.*",
                                          ">1.0.post1",
                                          "<3.0rc2",
                                          "==1!0.*",
                                          ">=2.0,!=2.1.0,<2023",
                                          "~=1.24.0"};

  Json req = {{"versions", versions}, {"specs", specs}};
  Result<SubprocessResult> run =
      RunSubprocess({kPython, "-c", kOracle, req.dump()}, std::chrono::seconds(60));
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->exit_code, 0) << run->err;
  Result<Json> answer = ParseJson(run->out, "packaging oracle");
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();

  std::vector<PyVersion> parsed;
  for (size_t i = 0; i < versions.size(); ++i) {
    Result<PyVersion> v = ParsePyVersion(versions[i]);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(v->ToString(), (*answer)["normalized"][i].get<std::string>()) << versions[i];
    parsed.push_back(*v);
  }
  const Json& rank = (*answer)["rank"];
  for (size_t i = 0; i < parsed.size(); ++i) {
    for (size_t j = 0; j < parsed.size(); ++j) {
      const int want = rank[i].get<int>() < rank[j].get<int>()   ? -1
                       : rank[i].get<int>() > rank[j].get<int>() ? 1
                                                                 : 0;
      const int got = ComparePyVersions(parsed[i], parsed[j]);
      ASSERT_EQ((got > 0) - (got < 0), want) << versions[i] << " vs " << versions[j];
    }
  }
  for (size_t s = 0; s < specs.size(); ++s) {
    Result<SpecifierSet> set = ParseSpecifierSet(specs[s]);
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    for (size_t i = 0; i < parsed.size(); ++i) {
      EXPECT_EQ(set->Contains(parsed[i]), (*answer)["contains"][s][i].get<bool>())
          << versions[i] << " in " << specs[s];
    }
  }
  std::cout << "compared " << versions.size() << " versions (" << probe->distributions.size()
            << " installed distributions) and " << specs.size() << " specifier sets\n";
}

}  // namespace
}  // namespace gantry::jobs
