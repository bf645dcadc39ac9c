#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gantry/drift/drift.h"

namespace gantry::drift {
namespace {

using ::testing::HasSubstr;

TEST(SchemaTest, ShortAndLongForms) {
  auto s = Schema::LoadString(R"(columns:
  age: numerical
  country: categorical
  label: {type: categorical, role: target}
  pred: {type: categorical, role: prediction}
  score: {type: numerical, role: score}
  income: {type: numerical, test: psi, threshold: 0.2, binning: quantiles, bins: 7}
drift_share: 0.3
)",
                              "s.yaml");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->columns().size(), 6u);
  EXPECT_EQ(s->columns()[0].name, "age");
  EXPECT_EQ(s->columns()[0].kind, ColumnKind::kNumerical);
  EXPECT_EQ(s->columns()[1].kind, ColumnKind::kCategorical);
  EXPECT_EQ(s->columns()[2].role, Role::kTarget);
  EXPECT_EQ(s->columns()[3].role, Role::kPrediction);
  EXPECT_EQ(s->columns()[4].role, Role::kScore);
  const ColumnSpec* inc = s->Find("income");
  ASSERT_NE(inc, nullptr);
  EXPECT_EQ(inc->test, StatTest::kPsi);
  EXPECT_EQ(inc->threshold, 0.2);
  EXPECT_EQ(inc->binning, Binning::kReferenceQuantiles);
  EXPECT_EQ(inc->bins, 7);
  EXPECT_DOUBLE_EQ(s->drift_share(), 0.3);
  EXPECT_EQ(s->task(), "classification");  // from the categorical target
  EXPECT_FALSE(s->ignore_extra_columns());
  EXPECT_EQ(s->Find("nope"), nullptr);
}

TEST(SchemaTest, RegressionTaskFromNumericalTargetAndNoTaskWithoutTarget) {
  auto s = Schema::LoadString("columns:\n  y: {type: numerical, role: target}\n", "s");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->task(), "regression");
  auto t = Schema::LoadString("columns:\n  x: numerical\nextra_columns: ignore\n", "t");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->task(), "");
  EXPECT_TRUE(t->ignore_extra_columns());
}

TEST(SchemaTest, UnknownTopLevelKeySuggests) {
  auto s = Schema::LoadString("columns:\n  x: numerical\ndrift_shar: 0.5\n", "s.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("drift_shar"));
  EXPECT_THAT(s.status().message(), HasSubstr("drift_share"));
  EXPECT_THAT(s.status().message(), HasSubstr("s.yaml:3"));
}

TEST(SchemaTest, UnknownColumnKeySuggests) {
  auto s = Schema::LoadString("columns:\n  x: {type: numerical, treshold: 0.1}\n", "s.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("treshold"));
  EXPECT_THAT(s.status().message(), HasSubstr("threshold"));
  EXPECT_THAT(s.status().message(), HasSubstr("s.yaml:2"));
}

TEST(SchemaTest, BadValuesNameFileLineAndFix) {
  struct Case {
    const char* yaml;
    const char* want;
  } cases[] = {
      {"columns:\n  x: numeric-ish\n", "unknown column type 'numeric-ish'"},
      {"columns:\n  x: {type: numerical, role: boss}\n", "unknown role 'boss'"},
      {"columns:\n  x: {type: numerical, test: tt}\n", "unknown test 'tt'"},
      {"columns:\n  x: {type: numerical, test: chisquare}\n", "does not apply to a numerical"},
      {"columns:\n  x: {type: categorical, test: ks}\n", "does not apply to a categorical"},
      {"columns:\n  x: {type: numerical, threshold: -1}\n", "threshold must be > 0"},
      {"columns:\n  x: {type: numerical, threshold: abc}\n", "x.threshold"},
      {"columns:\n  x: {type: numerical, binning: magic}\n", "unknown binning 'magic'"},
      {"columns:\n  x: {type: numerical, bins: 0}\n", "bins must be in 1..10000"},
      {"columns:\n  x: {role: target}\n", "has no type"},
      {"columns:\n  x: numerical\ndrift_share: 1.5\n", "drift_share must be in (0, 1]"},
      {"columns:\n  x: numerical\ntask: ranking\n", "task must be classification or regression"},
      {"columns:\n  x: numerical\nextra_columns: maybe\n", "extra_columns must be"},
      {"columns:\n  s: {type: categorical, role: score}\n", "must be numerical"},
      {"columns:\n  a: {type: numerical, role: target}\n  b: {type: numerical, role: target}\n",
       "at most one column"},
      {"drift_share: 0.5\n", "no 'columns' map"},
  };
  for (const Case& c : cases) {
    auto s = Schema::LoadString(c.yaml, "bad.yaml");
    ASSERT_FALSE(s.ok()) << c.yaml;
    EXPECT_THAT(s.status().message(), HasSubstr(c.want)) << c.yaml;
    EXPECT_THAT(s.status().message(), HasSubstr("bad.yaml")) << c.yaml;
  }
}

TEST(SchemaTest, LoadFileMissingIsNotFound) {
  auto s = Schema::LoadFile("/nonexistent/schema.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(s.status().message(), HasSubstr("/nonexistent/schema.yaml"));
}

TEST(SchemaTest, ExampleSchemaLoads) {
  auto s = Schema::LoadFile(std::string(GANTRY_SOURCE_DIR) + "/examples/drift/schema.yaml");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_GE(s->columns().size(), 4u);
}

}  // namespace
}  // namespace gantry::drift
