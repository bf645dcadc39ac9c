// The suppression file: what it reads, and every refusal naming file:line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gantry/assess/assess.h"

namespace gantry::assess {
namespace {

using ::testing::HasSubstr;

std::string Testdata(const std::string& name) {
  return std::string(GANTRY_SOURCE_DIR) + "/src/assess/testdata/suppress/" + name;
}

TEST(SuppressTest, ReadsTheFileWithOrigins) {
  auto s = LoadSuppressions(Testdata("valid.yaml"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->size(), 2u);
  const Suppression& a = (*s)[0];
  EXPECT_EQ(a.rule, "GANTRY-ML-004");
  EXPECT_EQ(a.resource, "ws-research*");
  EXPECT_EQ(a.justification, "research workspace, no customer data");
  EXPECT_EQ(a.expires, "2027-03-31");
  EXPECT_EQ(a.origin, Testdata("valid.yaml") + ":3");
  EXPECT_EQ((*s)[1].rule, "GANTRY-COST-*");
  EXPECT_EQ((*s)[1].expires, "2027-06-30");
  EXPECT_EQ((*s)[1].origin, Testdata("valid.yaml") + ":7");
}

TEST(SuppressTest, EmptyFilesSuppressNothing) {
  for (const char* text : {"", "# nothing yet\n", "suppressions: []\n", "suppressions:\n"}) {
    auto s = ParseSuppressions(text, "s.yaml");
    ASSERT_TRUE(s.ok()) << text << ": " << s.status().ToString();
    EXPECT_TRUE(s->empty()) << text;
  }
}

struct Bad {
  const char* yaml;
  const char* message;  // a substring of the error
};

TEST(SuppressTest, RefusesBadEntriesNamingFileLineAndKey) {
  const Bad cases[] = {
      {"suppressions:\n  - rule: A\n    resource: '*'\n    expires: 2027-01-01\n",
       "s.yaml:2:5: key 'suppressions.0': missing 'justification'"},
      {"suppressions:\n  - rule: A\n    resource: '*'\n    justification: '  '\n    expires: "
       "2027-01-01\n",
       "s.yaml:4:20: key 'suppressions.0.justification': must not be empty"},
      {"suppressions:\n  - rule: A\n    resource: '*'\n    justification: x\n    expires: "
       "2027-02-30\n",
       "s.yaml:5:14: key 'suppressions.0.expires': '2027-02-30' is not a date"},
      {"suppressions:\n  - rule: A\n    resource: '*'\n    justification: x\n    expires: "
       "31/12/2027\n",
       "'31/12/2027' is not a date; write YYYY-MM-DD"},
      {"suppressions:\n  - rule: A\n    resource: '*'\n    justifcation: x\n    expires: "
       "2027-01-01\n",
       "s.yaml:4:5: unknown key 'suppressions.0.justifcation' (did you mean "
       "'suppressions.0.justification'?)"},
      {"supressions: []\n", "unknown key 'supressions' (did you mean 'suppressions'?)"},
      {"suppressions: {rule: A}\n", "s.yaml:1:15: key 'suppressions': expected a list"},
      {"suppressions:\n  - GANTRY-ML-004\n", "key 'suppressions.0': a suppression is a map"},
      {"- rule: A\n", "expected a map with the key 'suppressions'"},
      {"suppressions:\n  - rule: [A, B]\n    resource: '*'\n    justification: x\n    expires: "
       "2027-01-01\n",
       "key 'suppressions.0.rule': expected a string"},
      {"suppressions:\n  - resource: '*'\n    justification: x\n    expires: 2027-01-01\n",
       "missing 'rule'"},
      {"suppressions:\n  - rule: A\n    justification: x\n    expires: 2027-01-01\n",
       "missing 'resource'"},
      {"suppressions:\n  - rule: A\n    resource: '*'\n    justification: x\n",
       "missing 'expires'"},
      {"suppressions: [\n", "s.yaml:"},
  };
  for (const Bad& c : cases) {
    auto s = ParseSuppressions(c.yaml, "s.yaml");
    ASSERT_FALSE(s.ok()) << c.yaml;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << c.yaml;
    EXPECT_THAT(s.status().message(), HasSubstr(c.message)) << c.yaml;
  }
}

TEST(SuppressTest, AMissingFileIsNotFound) {
  auto s = LoadSuppressions(Testdata("absent.yaml"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(s.status().message(), HasSubstr("absent.yaml"));
}

TEST(SuppressTest, RuleIdsMustNameARule) {
  Rule r;
  r.id = "GANTRY-ML-004";
  std::vector<Rule> rules = {r};
  Suppression ok{"GANTRY-ML-004", "*", "x", "2027-01-01", "s.yaml:3"};
  Suppression glob{"gantry-ml-*", "*", "x", "2027-01-01", "s.yaml:8"};
  Suppression sup{"GANTRY-SUP-001", "*", "x", "2027-01-01", "s.yaml:9"};
  EXPECT_TRUE(CheckSuppressionRules({ok, glob, sup}, rules).ok());

  Suppression typo{"GANTRY-ML-04", "*", "x", "2027-01-01", "s.yaml:12"};
  Status s = CheckSuppressionRules({ok, typo}, rules);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("s.yaml:12: unknown rule 'GANTRY-ML-04' (did you mean "
                                     "'GANTRY-ML-004'?)"));
  Suppression lower{"gantry-ml-04", "*", "x", "2027-01-01", "s.yaml:13"};
  EXPECT_THAT(CheckSuppressionRules({lower}, rules).message(), HasSubstr("did you mean"));
  Suppression none{"GANTRY-KV-*", "*", "x", "2027-01-01", "s.yaml:14"};
  EXPECT_THAT(CheckSuppressionRules({none}, rules).message(),
              HasSubstr("s.yaml:14: rule 'GANTRY-KV-*' matches no rule"));
}

}  // namespace
}  // namespace gantry::assess
