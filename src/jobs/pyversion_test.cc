// PEP 440 versions and specifiers, PEP 508 requirement names and PEP 503
// normalization: known answers from the specifications' rules.
#include "pyversion.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gantry::jobs {
namespace {

PyVersion V(std::string_view text) {
  Result<PyVersion> v = ParsePyVersion(text);
  EXPECT_TRUE(v.ok()) << text << ": " << v.status().ToString();
  return v.ok() ? *v : PyVersion{};
}

TEST(PyVersionTest, ParsesTheParts) {
  PyVersion v = V("1!2.3.4rc5.post6.dev7+ubuntu.8");
  EXPECT_EQ(v.epoch, 1u);
  EXPECT_EQ(v.release, (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(v.pre_kind, 'r');
  EXPECT_EQ(v.pre_number, 5u);
  EXPECT_EQ(v.post, 6u);
  EXPECT_EQ(v.dev, 7u);
  EXPECT_EQ(v.local, (std::vector<std::string>{"ubuntu", "8"}));
  EXPECT_TRUE(v.is_prerelease());
  EXPECT_TRUE(v.is_postrelease());
  EXPECT_EQ(v.Base().ToString(), "1!2.3.4");
  EXPECT_EQ(v.Public().ToString(), "1!2.3.4rc5.post6.dev7");
}

TEST(PyVersionTest, NormalizesTheSpellingsThatPep440Allows) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"1.0", "1.0"},
      {"v1.0", "1.0"},
      {"V1.0", "1.0"},
      {" 1.0 ", "1.0"},
      {"1.0-RC1", "1.0rc1"},
      {"1.0.rc.1", "1.0rc1"},
      {"1.0c1", "1.0rc1"},
      {"1.0pre2", "1.0rc2"},
      {"1.0preview2", "1.0rc2"},
      {"1.0alpha", "1.0a0"},
      {"1.0_beta_3", "1.0b3"},
      {"2.1.0rc1", "2.1.0rc1"},
      {"1.0-1", "1.0.post1"},
      {"1.0.post", "1.0.post0"},
      {"1.0-r2", "1.0.post2"},
      {"1.0rev3", "1.0.post3"},
      {"1.0.dev", "1.0.dev0"},
      {"1.0-dev-4", "1.0.dev4"},
      {"1.13.1+dfsg", "1.13.1+dfsg"},
      {"1.0+Ubuntu-1_2", "1.0+ubuntu.1.2"},
      {"2.1.0+cu118", "2.1.0+cu118"},
      {"0!1.0", "1.0"},
      {"2023.12.25", "2023.12.25"},
      {"1.26.4", "1.26.4"},
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(V(in).ToString(), want) << in;
}

TEST(PyVersionTest, RefusesWhatIsNotAVersion) {
  for (std::string_view bad : {"",
                               "abc",
                               "1.0.",
                               "1..0",
                               ".1",
                               "1.0+",
                               "1.0+a..b",
                               "1.0+a_",
                               "1.0 beta",
                               "1.0-",
                               "1.0_",
                               "1.0a1b2",
                               "1.0.post1.post2",
                               "1.0.dev1a1",
                               "1!",
                               "!1",
                               "1.0+ä",
                               "99999999999999999999999",
                               "1.0-ubuntu1",
                               "1.0~rc1"}) {
    Result<PyVersion> v = ParsePyVersion(bad);
    EXPECT_FALSE(v.ok()) << "'" << bad << "' parsed as " << (v.ok() ? v->ToString() : "");
    if (!v.ok()) {
      EXPECT_NE(v.status().message().find("not a PEP 440 version"), std::string::npos);
    }
  }
}

// Each version sorts strictly before every version after it.
TEST(PyVersionTest, OrdersAsPep440) {
  const std::vector<std::string> sorted = {
      "0.9",         "1.0.dev1",       "1.0.dev2",
      "1.0a1.dev1",  "1.0a1",          "1.0a1.post1.dev1",
      "1.0a1.post1", "1.0a2",          "1.0a10",
      "1.0b1",       "1.0rc1.dev3",    "1.0rc1",
      "1.0",         "1.0+abc",        "1.0+abc.2",
      "1.0+abc.10",  "1.0+abd",        "1.0+2",
      "1.0+10",      "1.0.post1.dev1", "1.0.post1",
      "1.0.post2",   "1.0.1",          "1.1.dev1",
      "1.13.1",      "1.13.1+dfsg",    "2.1.0.dev20230801",
      "2.1.0rc1",    "2.1.0",          "2.1.0+cu118",
      "2.1.0+cu121", "2.1.0.post1",    "10.0",
      "2023.1",      "1!0.1",
  };
  for (size_t i = 0; i < sorted.size(); ++i) {
    PyVersion a = V(sorted[i]);
    EXPECT_EQ(ComparePyVersions(a, a), 0) << sorted[i];
    for (size_t j = i + 1; j < sorted.size(); ++j) {
      PyVersion b = V(sorted[j]);
      EXPECT_LT(ComparePyVersions(a, b), 0) << sorted[i] << " < " << sorted[j];
      EXPECT_GT(ComparePyVersions(b, a), 0) << sorted[j] << " > " << sorted[i];
    }
  }
}

TEST(PyVersionTest, EqualVersionsDifferingOnlyInSpelling) {
  const std::vector<std::pair<std::string, std::string>> same = {
      {"1.0", "1.0.0"},  {"1", "1.0.0.0"},       {"1.0rc1", "1.0-c1"}, {"1.0+01", "1.0+1"},
      {"1.0a", "1.0a0"}, {"1.0.post0", "1.0-0"}, {"0!2", "2.0"}};
  for (const auto& [a, b] : same) EXPECT_EQ(ComparePyVersions(V(a), V(b)), 0) << a << " == " << b;
}

bool Satisfies(std::string_view spec, std::string_view version) {
  Result<SpecifierSet> s = ParseSpecifierSet(spec);
  EXPECT_TRUE(s.ok()) << spec << ": " << s.status().ToString();
  return s.ok() && s->ContainsText(version);
}

struct SpecCase {
  std::string spec, version;
  bool want;
};

TEST(SpecifierTest, KnownAnswers) {
  const std::vector<SpecCase> cases = {
      // Inclusive comparisons look at the public version only.
      {">=2.1", "2.1", true},
      {">=2.1", "2.1.0", true},
      {">=2.1", "2.0.9", false},
      {">=2.1", "2.1.0rc1", false},
      {">=2.1", "2.1.0+cu118", true},
      {">=2.1", "1.13.1+dfsg", false},
      {"<=2.0", "2.0+local", true},
      {"<=2.0", "2.0.post1", false},
      // Exclusive comparisons do not admit pre/post/local builds of the bound.
      {"<3", "2.99", true},
      {"<3", "3.0rc1", false},
      {"<3", "3.0.dev1", false},
      {"<3", "3.0", false},
      {"<3rc2", "3.0rc1", true},
      {"<3", "2.9rc1", true},
      {">1.0", "1.0.1", true},
      {">1.0", "1.0.post1", false},
      {">1.0", "1.0+local", false},
      {">1.0", "1.0", false},
      {">1.0.post1", "1.0.post2", true},
      {">1.0rc1", "1.0", true},
      // Exact and wildcard matches.
      {"==1.0", "1.0.0", true},
      {"==1.0", "1.0+abc", true},
      {"==1.0+abc", "1.0", false},
      {"==1.0+abc", "1.0+abc", true},
      {"==1.0+abc", "1.0+abd", false},
      {"==1.0", "1.0.post1", false},
      {"==6.*", "6.0", true},
      {"==6.*", "6", true},
      {"==6.*", "6.0.1", true},
      {"==6.*", "6.1b1", true},
      {"==6.*", "7.0", false},
      {"==6.*", "60.1", false},
      {"==1.13.*", "1.13.1+dfsg", true},
      {"==1.13.0.*", "1.13", true},
      {"==1!1.0.*", "1!1.0.5", true},
      {"==1!1.0.*", "1.0.5", false},
      {"!=1.2.*", "1.2.3", false},
      {"!=1.2.*", "1.3", true},
      {"!=1.0", "1.0.0", false},
      {"!=1.0", "1.0.1", true},
      // Compatible release: >= V and == V without its last part.*
      {"~=2.2", "2.2", true},
      {"~=2.2", "2.9", true},
      {"~=2.2", "3.0", false},
      {"~=2.2", "2.1", false},
      {"~=1.4.5", "1.4.9", true},
      {"~=1.4.5", "1.5.0", false},
      {"~=1.4.5", "1.4.4", false},
      {"~=2.2.post3", "2.2.post4", true},
      {"~=2.2.0rc1", "2.2.0", true},
      // Sets: every clause must hold.
      {">=2.1,<3", "2.5.1", true},
      {">=2.1,<3", "3.0", false},
      {">=2.1,<3", "1.13.1", false},
      {" >= 1.20 , != 1.24.0 , < 2 ", "1.24.2", true},
      {">=1.20,!=1.24.*", "1.24.2", false},
      {"", "0.0.1", true},
      // Arbitrary equality compares text, and works for non-PEP 440 versions.
      {"===1.0-ubuntu1", "1.0-ubuntu1", true},
      {"===1.0-ubuntu1", "1.0-UBUNTU1", true},
      {"===1.0", "1.0.0", false},
      {">=1.0", "1.0-ubuntu1", false},
  };
  for (const SpecCase& c : cases) {
    EXPECT_EQ(Satisfies(c.spec, c.version), c.want) << c.version << " in '" << c.spec << "'";
  }
}

TEST(SpecifierTest, PrintsTheNormalizedSet) {
  Result<SpecifierSet> s = ParseSpecifierSet(" >= 2.1 ,< 3, ==2.*");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->ToString(), ">=2.1,<3,==2.*");
  ASSERT_EQ(s->clauses.size(), 3u);
  EXPECT_EQ(s->clauses[2].op, SpecOp::kEqual);
  EXPECT_TRUE(s->clauses[2].wildcard);
}

TEST(SpecifierTest, RefusesMalformedSpecifiers) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"=>2.1", "starts with"},
      {"2.1", "starts with"},
      {">=", "no version"},
      {">=2.*", "only with == or !="},
      {"~=2.*", "only with == or !="},
      {"~=2", "at least two release numbers"},
      {">=1.0+local", "local version label"},
      {"~=1.0+local", "local version label"},
      {"==1.0rc1.*", "release numbers only"},
      {"==1.*.0", "not a PEP 440 version"},
      {">=2.1,,<3", "empty clause"},
      {">=2.1,", "empty clause"},
      {"==abc", "not a PEP 440 version"},
      {"=== a b", "no spaces"},
  };
  for (const auto& [spec, want] : cases) {
    Result<SpecifierSet> s = ParseSpecifierSet(spec);
    ASSERT_FALSE(s.ok()) << spec;
    EXPECT_NE(s.status().message().find(want), std::string::npos)
        << spec << ": " << s.status().message();
  }
}

TEST(RequirementTest, ParsesNameExtrasAndSpecifiers) {
  Result<Requirement> r = ParseRequirement("torch>=2.1,<3");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->name, "torch");
  EXPECT_EQ(r->specifiers.ToString(), ">=2.1,<3");

  r = ParseRequirement("  PyYAML == 6.* ");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->name, "PyYAML");
  EXPECT_EQ(r->specifiers.ToString(), "==6.*");

  r = ParseRequirement("requests[socks, security] (>=2.0)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->name, "requests");
  EXPECT_EQ(r->extras, (std::vector<std::string>{"socks", "security"}));
  EXPECT_EQ(r->specifiers.ToString(), ">=2.0");

  r = ParseRequirement("zope.interface");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->name, "zope.interface");
  EXPECT_TRUE(r->specifiers.empty());
}

TEST(RequirementTest, RefusesMalformedRequirements) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "package name"},
      {">=2.1", "package name"},
      {"-torch", "package name"},
      {"torch-", "package name"},
      {"torch>=2.1; python_version<'3.12'", "markers"},
      {"torch @ https://example.com/t.whl", "URL"},
      {"torch[cuda", "unclosed '['"},
      {"torch[]", "malformed extra"},
      {"torch (>=2", "unclosed '('"},
      {"torch 2.1", "starts with"},
      {"torch>=two", "not a PEP 440 version"},
  };
  for (const auto& [text, want] : cases) {
    Result<Requirement> r = ParseRequirement(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(want), std::string::npos)
        << text << ": " << r.status().message();
  }
}

TEST(PackageNameTest, NormalizesAsPep503) {
  EXPECT_EQ(NormalizePackageName("PyYAML"), "pyyaml");
  EXPECT_EQ(NormalizePackageName("zope.interface"), "zope-interface");
  EXPECT_EQ(NormalizePackageName("Foo__Bar--.baz"), "foo-bar-baz");
  EXPECT_EQ(NormalizePackageName("ruamel.yaml.clib"), "ruamel-yaml-clib");
  EXPECT_EQ(NormalizePackageName("typing_extensions"), "typing-extensions");
  EXPECT_TRUE(IsValidPackageName("a"));
  EXPECT_TRUE(IsValidPackageName("azure-mgmt-compute"));
  EXPECT_FALSE(IsValidPackageName("_private"));
  EXPECT_FALSE(IsValidPackageName("a b"));
  EXPECT_FALSE(IsValidPackageName(""));
}

}  // namespace
}  // namespace gantry::jobs
