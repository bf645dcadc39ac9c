// Internal: pieces the comparison and the revalidation share: a cell as text
// (labels and predictions may be numbers or categories) and the JSON of the
// model quality metrics.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <string>

#include "gantry/core/json.h"
#include "gantry/drift/drift.h"

namespace gantry::drift::internal {

// nullopt for nulls; numbers formatted with fmt's shortest round-trip form.
inline std::optional<std::string> CellText(const Column& c, size_t row) {
  if (c.spec.kind == ColumnKind::kCategorical) {
    int32_t code = c.codes[row];
    if (code < 0) return std::nullopt;
    return c.dictionary[code];
  }
  double v = c.numbers[row];
  if (std::isnan(v)) return std::nullopt;
  return fmt::format("{}", v);
}

// Metric keys of `gantry drift compare --json` ("quality") and `validate`.
// Non-finite values (R2 of constant labels) become null.
inline Json QualityMetricsJson(const std::optional<ClassificationQuality>& classification,
                               const std::optional<RegressionQuality>& regression) {
  auto num = [](double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); };
  Json q = Json::object();
  if (classification) {
    const ClassificationQuality& c = *classification;
    q["accuracy"] = c.accuracy;
    q["precision_macro"] = c.precision_macro;
    q["recall_macro"] = c.recall_macro;
    q["f1_macro"] = c.f1_macro;
    q["precision_weighted"] = c.precision_weighted;
    q["recall_weighted"] = c.recall_weighted;
    q["f1_weighted"] = c.f1_weighted;
    q["roc_auc"] = c.roc_auc < 0 ? Json(nullptr) : Json(c.roc_auc);
  } else if (regression) {
    q["mae"] = regression->mae;
    q["mse"] = regression->mse;
    q["rmse"] = regression->rmse;
    q["r2"] = num(regression->r2);
  }
  return q;
}

}  // namespace gantry::drift::internal
