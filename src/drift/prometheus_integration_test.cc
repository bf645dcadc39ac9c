// DriftReport::RenderPrometheus: the values and names, and `promtool check
// metrics` accepting the text (Debian package `prometheus`; the test fails,
// not skips, when promtool is missing).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "gantry/drift/drift.h"
#include "testing/promtool.h"

namespace gantry::drift {
namespace {

using ::testing::HasSubstr;

DriftReport Sample() {
  DriftReport r;
  r.reference_rows = 600;
  r.current_rows = 400;
  r.drift_share = 0.5;
  r.drifted_share = 0.5;
  r.dataset_drift = true;
  ColumnDrift age;
  age.column = "age";
  age.test = StatTest::kKs;
  age.statistic = 0.25;
  age.p_value = 1e-6;
  age.threshold = 0.05;
  age.drifted = true;
  age.out_of_range_rate = 0.03;
  ColumnDrift city;
  city.column = "city \"quoted\"\\path";  // label escaping
  city.kind = ColumnKind::kCategorical;
  city.test = StatTest::kJensenShannon;
  city.statistic = 0.02;
  city.p_value = -1;
  city.threshold = 0.1;
  city.null_rate = 0.1;
  r.columns = {age, city};
  ClassificationQuality q;
  q.accuracy = 0.9;
  q.f1_macro = 0.8;
  q.roc_auc = 0.95;
  r.classification = q;
  return r;
}

TEST(DriftPrometheusTest, SeriesAndValues) {
  std::string text = Sample().RenderPrometheus(1764480000);
  EXPECT_THAT(text,
              HasSubstr("# TYPE gantry_drift_dataset_drift gauge\ngantry_drift_dataset_drift 1\n"));
  EXPECT_THAT(text, HasSubstr("gantry_drift_drifted_share 0.5\n"));
  EXPECT_THAT(text, HasSubstr("gantry_drift_column_statistic{column=\"age\",test=\"ks\"} 0.25\n"));
  EXPECT_THAT(text, HasSubstr("gantry_drift_column_drifted{column=\"age\",test=\"ks\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("gantry_drift_column_p_value{column=\"city \\\"quoted\\\"\\\\path\","
                              "test=\"jensenshannon\"} NaN\n"));
  EXPECT_THAT(
      text,
      HasSubstr("gantry_drift_column_null_rate{column=\"city \\\"quoted\\\"\\\\path\"} 0.1\n"));
  EXPECT_THAT(text, HasSubstr("gantry_drift_model_roc_auc 0.95\n"));
  EXPECT_THAT(text, HasSubstr("gantry_drift_last_run_timestamp_seconds 1764480000\n"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("gantry_drift_model_rmse")));
}

TEST(DriftPrometheusTest, PromtoolAcceptsIt) {
  ASSERT_FALSE(testing::PromtoolPath().empty())
      << "promtool not found: run scripts/install-deps.sh (prometheus)";
  const std::string text = Sample().RenderPrometheus(1764480000);
  testing::CliRun r = testing::PromtoolCheckMetrics(text);
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
}

}  // namespace
}  // namespace gantry::drift
