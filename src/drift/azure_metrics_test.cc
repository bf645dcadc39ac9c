// DriftMetrics / ValidateMetrics: which values a report becomes, with which
// dimensions.
#include "gantry/drift/azure_metrics.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace gantry::drift {
namespace {

// "metric{column}" -> value (column "" for model-level values).
std::map<std::string, double> ByName(const std::vector<monitor::MetricValue>& values) {
  std::map<std::string, double> out;
  for (const auto& v : values) {
    EXPECT_EQ(v.namespace_, "ns/x");
    EXPECT_EQ(v.dims.at("model"), "churn");
    auto col = v.dims.find("column");
    std::string key = v.metric + "{" + (col == v.dims.end() ? "" : col->second) + "}";
    EXPECT_TRUE(out.emplace(key, v.value).second) << "duplicate " << key;
  }
  return out;
}

TEST(DriftMetrics, ReportBecomesModelAndColumnValues) {
  DriftReport r;
  r.drifted_share = 0.5;
  r.dataset_drift = true;
  auto col = [](std::string name, StatTest test, double statistic, double p, bool drifted) {
    ColumnDrift c;
    c.column = std::move(name);
    c.test = test;
    c.statistic = statistic;
    c.p_value = p;
    c.drifted = drifted;
    return c;
  };
  ColumnDrift ks = col("age", StatTest::kKs, 0.31, 0.001, true);
  ks.null_rate = 0.02;
  ColumnDrift psi = col("tenure", StatTest::kPsi, 0.1, -1, false);
  psi.out_of_range_rate = 0.25;
  ColumnDrift none = col("empty", StatTest::kKs, 0, -1, false);
  none.note = "no non-null current values";
  r.columns = {ks, psi, none};
  auto m = ByName(DriftMetrics(r, "churn", "ns/x"));
  EXPECT_EQ(m.at("drift_share{}"), 0.5);
  EXPECT_EQ(m.at("dataset_drift{}"), 1);
  EXPECT_EQ(m.at("drift_statistic{age}"), 0.31);
  EXPECT_EQ(m.at("drift_p_value{age}"), 0.001);
  EXPECT_EQ(m.at("drifted{age}"), 1);
  EXPECT_EQ(m.at("null_rate{age}"), 0.02);
  EXPECT_EQ(m.at("drift_statistic{tenure}"), 0.1);
  EXPECT_EQ(m.count("drift_p_value{tenure}"), 0u) << "a distance has no p-value";
  EXPECT_EQ(m.at("drifted{tenure}"), 0);
  EXPECT_EQ(m.at("out_of_range_rate{tenure}"), 0.25);
  EXPECT_EQ(m.count("drift_statistic{empty}"), 0u) << "a test that did not run";
  EXPECT_EQ(m.at("drifted{empty}"), 0);
  EXPECT_EQ(m.size(), 2u + 5 + 4 + 3);
}

TEST(ValidateMetrics, ClassificationAndRegression) {
  ValidateResult c;
  c.sent = 90;
  c.passed = false;
  c.classification = ClassificationQuality{
      .accuracy = 0.9, .precision_macro = 0.8, .recall_macro = 0.7, .f1_macro = 0.75};
  auto m = ByName(ValidateMetrics(c, "churn", "ns/x"));
  EXPECT_EQ(m.at("accuracy{}"), 0.9);
  EXPECT_EQ(m.at("precision{}"), 0.8);
  EXPECT_EQ(m.at("recall{}"), 0.7);
  EXPECT_EQ(m.at("f1{}"), 0.75);
  EXPECT_EQ(m.count("roc_auc{}"), 0u) << "not computed (-1)";
  EXPECT_EQ(m.at("validation_passed{}"), 0);
  EXPECT_EQ(m.at("rows_sent{}"), 90);

  ValidateResult g;
  g.regression = RegressionQuality{.mae = 1, .mse = 4, .rmse = 2, .r2 = 0.5};
  auto n = ByName(ValidateMetrics(g, "churn", "ns/x"));
  EXPECT_EQ(n.at("rmse{}"), 2);
  EXPECT_EQ(n.at("mae{}"), 1);
  EXPECT_EQ(n.at("r2{}"), 0.5);
  EXPECT_EQ(n.at("validation_passed{}"), 1);
  EXPECT_EQ(n.count("accuracy{}"), 0u);
}

}  // namespace
}  // namespace gantry::drift
