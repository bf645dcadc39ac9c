// DriftReport::RenderPrometheus: the report as Prometheus metrics, through the
// same registry (and so the same escaping and ordering) as the gateway's /metrics.
#include <cmath>
#include <string>

#include "gantry/core/metrics.h"
#include "gantry/drift/drift.h"

namespace gantry::drift {
namespace {

void Set(metrics::Registry& r, std::string_view name, std::string_view help, double value,
         const metrics::Labels& labels = {}) {
  // NaN (a column that could not be tested) is a valid sample value in the
  // exposition format; names and labels here are fixed and valid.
  Result<metrics::Gauge*> g = r.GetGauge(name, help, labels);
  if (g.ok()) (*g)->Set(value);
}

}  // namespace

std::string DriftReport::RenderPrometheus(double unix_time) const {
  metrics::Registry r;
  Set(r, "gantry_drift_dataset_drift",
      "1 when the share of drifted feature columns reaches drift_share", dataset_drift ? 1 : 0);
  Set(r, "gantry_drift_drifted_share", "Share of feature columns that drifted", drifted_share);
  Set(r, "gantry_drift_drift_share", "The dataset drift rule's share", drift_share);
  Set(r, "gantry_drift_reference_rows", "Rows of the reference profile",
      static_cast<double>(reference_rows));
  Set(r, "gantry_drift_current_rows", "Rows of the current window",
      static_cast<double>(current_rows));
  for (const ColumnDrift& c : columns) {
    const metrics::Labels labels = {{"column", c.column}, {"test", std::string(StatTestName(c.test))}};
    Set(r, "gantry_drift_column_statistic", "The column's test statistic or distance",
        c.statistic, labels);
    Set(r, "gantry_drift_column_p_value", "The column's p-value (NaN for distances)",
        c.p_value < 0 ? std::nan("") : c.p_value, labels);
    Set(r, "gantry_drift_column_threshold", "The column's drift threshold", c.threshold, labels);
    Set(r, "gantry_drift_column_drifted", "1 when the column drifted", c.drifted ? 1 : 0, labels);
    const metrics::Labels column = {{"column", c.column}};
    Set(r, "gantry_drift_column_null_rate", "Share of nulls in the current window", c.null_rate,
        column);
    Set(r, "gantry_drift_column_out_of_range_rate",
        "Share of current values outside the reference range or category set",
        c.out_of_range_rate, column);
  }
  if (classification) {
    Set(r, "gantry_drift_model_accuracy", "Classification accuracy", classification->accuracy);
    Set(r, "gantry_drift_model_f1_macro", "Classification macro F1", classification->f1_macro);
    if (classification->roc_auc >= 0) {
      Set(r, "gantry_drift_model_roc_auc", "Binary ROC-AUC", classification->roc_auc);
    }
  }
  if (regression) {
    Set(r, "gantry_drift_model_mae", "Regression mean absolute error", regression->mae);
    Set(r, "gantry_drift_model_rmse", "Regression root mean squared error", regression->rmse);
    Set(r, "gantry_drift_model_r2", "Regression R2", regression->r2);
  }
  Set(r, "gantry_drift_last_run_timestamp_seconds", "When this comparison ran (Unix time)",
      unix_time);
  return r.Render();
}

}  // namespace gantry::drift
