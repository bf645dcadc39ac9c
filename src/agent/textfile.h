// The textfile collector's parser: the Prometheus text format 0.0.4 as
// node_exporter's --collector.textfile.directory reads it (no client-side
// timestamps). Internal to src/agent; tested by textfile_test.cc.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gantry/agent/snapshot.h"
#include "gantry/core/status.h"

namespace gantry::agent {

struct TextSample {
  std::vector<std::pair<std::string, std::string>> labels;  // sorted by name
  double value = 0;
};

// One metric family of a text file. A histogram's or summary's samples
// (x_bucket, x_sum, x_count, x{quantile}) are kept as untyped families of
// their own sample names, with the declared family's HELP.
struct TextFamily {
  std::string name;
  std::string help;
  MetricType type = MetricType::kUntyped;
  std::vector<TextSample> samples;
};

// Appends the families of `text` to *out (families already there are
// extended, so several files merge). All or nothing: on error *out is left
// as it was, and the error says "<origin>:<line>: what" (a bad name, label,
// value, a timestamp, a sample seen twice, a family whose TYPE differs from
// an earlier file's).
Status ParsePrometheusText(std::string_view text, std::string_view origin,
                           std::vector<TextFamily>* out);

}  // namespace gantry::agent
