// Internal to gantry_autoscale: a reader of the Prometheus text exposition
// format (version 0.0.4), enough to pick samples out of a /metrics scrape.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::autoscale {

struct ExpositionSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // unescaped values
  double value = 0;
  // The value of label `key`, or "" when absent.
  std::string Label(std::string_view key) const;
};

// Comments (# HELP, # TYPE) and blank lines are skipped; timestamps ignored.
// NaN and ±Inf values are kept out (skipped): they are no usable signal.
// InvalidArgument "line N: ..." on a malformed line; at most 1,000,000 samples.
Result<std::vector<ExpositionSample>> ParseExpositionText(std::string_view text);

}  // namespace gantry::autoscale
