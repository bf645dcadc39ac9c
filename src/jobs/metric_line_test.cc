// The two metric line formats a trial may write, and the lines refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "gantry/jobs/sweep.h"

namespace gantry::jobs {
namespace {

using ::testing::HasSubstr;

TEST(MetricLineTest, PairsWithStep) {
  Result<MetricLine> m = ParseMetricLine("accuracy=0.91 loss=3e-1\tstep=4");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->step, 4);
  ASSERT_EQ(m->values.size(), 2u);
  EXPECT_EQ(m->values[0].first, "accuracy");
  EXPECT_DOUBLE_EQ(m->values[0].second, 0.91);
  EXPECT_EQ(m->values[1].first, "loss");
  EXPECT_DOUBLE_EQ(m->values[1].second, 0.3);
}

TEST(MetricLineTest, PairsWithoutStepAndNames) {
  Result<MetricLine> m = ParseMetricLine("  val/loss=-2 top-1.acc=+7  ");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_FALSE(m->step.has_value());
  ASSERT_EQ(m->values.size(), 2u);
  EXPECT_EQ(m->values[0].first, "val/loss");
  EXPECT_EQ(m->values[0].second, -2);
  EXPECT_EQ(m->values[1].second, 7);
}

TEST(MetricLineTest, NaNIsAValue) {
  Result<MetricLine> m = ParseMetricLine("loss=nan acc=NaN x=-nan");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  for (const auto& [name, v] : m->values) EXPECT_TRUE(std::isnan(v)) << name;
}

TEST(MetricLineTest, JsonObject) {
  Result<MetricLine> m = ParseMetricLine(R"({"accuracy": 0.5, "step": 12, "n": 3})");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->step, 12);
  ASSERT_EQ(m->values.size(), 2u);
  EXPECT_EQ(m->values[0].first, "accuracy");
  EXPECT_EQ(m->values[0].second, 0.5);
  EXPECT_EQ(m->values[1].first, "n");
}

TEST(MetricLineTest, JsonNaNSpellings) {
  // Python's json.dumps writes a bare NaN; null and "nan" mean the same.
  Result<MetricLine> m = ParseMetricLine(R"({"a": NaN, "b": null, "c": "nan", "d": "NaN x"})");
  ASSERT_FALSE(m.ok());  // "NaN x" is a string, not a number
  EXPECT_THAT(m.status().message(), HasSubstr("'d'"));
  m = ParseMetricLine(R"({"a": NaN, "b": null, "c": "nan", "note NaN": 1})");
  EXPECT_FALSE(m.ok());  // a key with a space is no metric name
  m = ParseMetricLine(R"({"a": NaN, "b": null, "c": "nan", "step": 2.0})");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->step, 2);
  ASSERT_EQ(m->values.size(), 3u);
  for (const auto& [name, v] : m->values) EXPECT_TRUE(std::isnan(v)) << name;
}

TEST(MetricLineTest, Refused) {
  struct Case {
    const char* line;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {"", "empty"},
           {"   ", "empty"},
           {"accuracy", "not name=value"},
           {"accuracy=high", "'high' is not a finite number"},
           {"accuracy=", "'' is not a finite number"},
           {"accuracy=inf", "not a finite number"},
           {"acc=1 acc=2", "given twice"},
           {"=1", "not a metric name"},
           {"1x=1", "not a metric name"},
           {"acc=1 step=2.5", "step must be a non-negative integer"},
           {"acc=1 step=-1", "step must be a non-negative integer"},
           {"acc=1 step=nan", "step must be a non-negative integer"},
           {"acc=1 step=1 step=2", "given twice"},
           {"step=3", "no metric values"},
           {"[1, 2]", "not name=value"},
           {"{\"acc\": 1", "metric line"},
           {"{\"acc\": [1]}", "expected a number"},
           {"{\"acc\": true}", "expected a number"},
           {"{\"acc\": 1, \"step\": 1.5}", "step must be"},
           {"{\"acc\": 1, \"step\": \"3\"}", "'step' is \"3\""},
           {"{\"acc\": 1, \"step\": null}", "'step' is null"},
           {"{}", "no metric values"},
       }) {
    Result<MetricLine> m = ParseMetricLine(c.line);
    ASSERT_FALSE(m.ok()) << c.line;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument) << c.line;
    EXPECT_THAT(m.status().message(), HasSubstr(c.says)) << c.line;
  }
}

}  // namespace
}  // namespace gantry::jobs
