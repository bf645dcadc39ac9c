#include "gantry/drift/azure_metrics.h"

#include <cmath>
#include <string>

namespace gantry::drift {
namespace {

struct Emit {
  std::vector<monitor::MetricValue>* out;
  std::string ns, model;
  void operator()(std::string metric, double value, const std::string& column = "") const {
    // NaN/inf have no JSON form: the service would refuse the whole call.
    if (!std::isfinite(value)) return;
    monitor::MetricValue v;
    v.metric = std::move(metric);
    v.namespace_ = ns;
    v.dims["model"] = model;
    if (!column.empty()) v.dims["column"] = column;
    v.value = value;
    out->push_back(std::move(v));
  }
};

}  // namespace

std::vector<monitor::MetricValue> DriftMetrics(const DriftReport& report, std::string_view model,
                                               std::string_view metric_namespace) {
  std::vector<monitor::MetricValue> out;
  Emit emit{&out, std::string(metric_namespace), std::string(model)};
  emit("drift_share", report.drifted_share);
  emit("dataset_drift", report.dataset_drift ? 1 : 0);
  for (const ColumnDrift& c : report.columns) {
    emit("drifted", c.drifted ? 1 : 0, c.column);
    emit("null_rate", c.null_rate, c.column);
    emit("out_of_range_rate", c.out_of_range_rate, c.column);
    // A test that did not run has no statistic: sending its 0 would read as
    // "no drift at all" on a chart.
    if (!c.note.empty()) continue;
    emit("drift_statistic", c.statistic, c.column);
    if (c.p_value >= 0) emit("drift_p_value", c.p_value, c.column);
  }
  return out;
}

std::vector<monitor::MetricValue> ValidateMetrics(const ValidateResult& result,
                                                  std::string_view model,
                                                  std::string_view metric_namespace) {
  std::vector<monitor::MetricValue> out;
  Emit emit{&out, std::string(metric_namespace), std::string(model)};
  if (result.classification) {
    const ClassificationQuality& q = *result.classification;
    emit("accuracy", q.accuracy);
    emit("precision", q.precision_macro);
    emit("recall", q.recall_macro);
    emit("f1", q.f1_macro);
    if (q.roc_auc >= 0) emit("roc_auc", q.roc_auc);
  }
  if (result.regression) {
    const RegressionQuality& q = *result.regression;
    emit("mae", q.mae);
    emit("rmse", q.rmse);
    emit("r2", q.r2);
  }
  emit("validation_passed", result.passed ? 1 : 0);
  emit("rows_sent", static_cast<double>(result.sent));
  return out;
}

}  // namespace gantry::drift
