// Drift and revalidation results as Azure Monitor custom metrics
// (monitor::CustomMetrics), so a scheduled `gantry drift compare|validate`
// lands in Metrics Explorer and metric alert rules next to the resource.
//
//   ASSIGN_OR_RETURN(auto cfg, monitor::ParseAzureMonitorMetrics(config));
//   RETURN_IF_ERROR(monitor::SendCustomMetrics(*cfg, DriftMetrics(report, "churn",
//   cfg->namespace_)));
//
// Every value carries the dimension `model`; per-column values add `column`.
// Names (docs/drift.md, "Azure Monitor custom metrics"):
//   DriftMetrics:    drift_share (the share of drifted features), dataset_drift (0/1),
//                    per column drift_statistic, drift_p_value (tests with a
//                    p-value only), drifted (0/1), null_rate, out_of_range_rate.
//                    A column whose test could not run (a note) sends drifted = 0
//                    and no statistic or p-value.
//   ValidateMetrics: classification accuracy, precision, recall, f1 (macro),
//                    roc_auc (when computed); regression mae, rmse, r2; and
//                    validation_passed (0/1), rows_sent.
// Values that are not finite (NaN, inf) are left out.
#pragma once

#include <string_view>
#include <vector>

#include "gantry/drift/drift.h"
#include "gantry/drift/validate.h"
#include "gantry/monitor/custom_metrics.h"

namespace gantry::drift {

std::vector<monitor::MetricValue> DriftMetrics(const DriftReport& report, std::string_view model,
                                               std::string_view metric_namespace);
std::vector<monitor::MetricValue> ValidateMetrics(const ValidateResult& result,
                                                  std::string_view model,
                                                  std::string_view metric_namespace);

}  // namespace gantry::drift
