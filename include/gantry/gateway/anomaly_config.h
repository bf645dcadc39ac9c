// The `anomaly:` section of gateway.yaml: output anomaly detection per model.
//
//   anomaly:
//     enabled: true              # default true when the section is present
//     window: 1m                 # one evaluation per window per model and signal
//     min_requests: 5            # a window with fewer requests is not evaluated
//     signals: [latency, error_rate, response_bytes, completion_tokens, outputs]
//     sensitivity: medium        # high | medium | low (band of 2, 3 or 4.5 robust sigmas)
//     direction: both            # above | below | both
//     seasonality: auto          # auto | none | hourly | daily | weekly
//     min_history: 1h            # learning before the first alert (span of the history)
//     min_samples: 30            # learned windows before the first alert
//     history: 7d                # sliding window the baseline is learned from
//     violations: 3              # fire when 3 ...
//     of: 5                      # ... of the last 5 evaluated windows are outside the band
//     resolve_after: 3           # resolve after 3 clean windows in a row
//     max_models: 100            # (model, version) pairs tracked; more are counted as "other"
//     notify: {sinks: [...]}     # as agent.yaml's notify: (Alertmanager webhook v4, log, ...)
//
// See gantry/alerting/dynamic_threshold.h for the band and
// gantry/alerting/notify.h for the sinks.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "gantry/alerting/dynamic_threshold.h"
#include "gantry/alerting/notify.h"
#include "gantry/core/config.h"
#include "gantry/core/status.h"

namespace gantry::gateway {

// The output signals recorded per (model, version) and window.
enum class Signal {
  kLatency,           // mean seconds from request to the end of the response
  kErrorRate,         // share of answers that were 5xx or failed upstream
  kResponseBytes,     // mean response body bytes
  kCompletionTokens,  // mean completion tokens (OpenAI routes)
  kOutputs,           // KServe: mean, min and max of each numeric output tensor
};
std::string_view SignalName(Signal s);

struct AnomalyConfig {
  bool enabled = false;  // true when the section is present (unless `enabled: false`)
  std::chrono::milliseconds window{60'000};
  uint64_t min_requests = 5;
  std::vector<Signal> signals{Signal::kLatency, Signal::kErrorRate, Signal::kResponseBytes,
                              Signal::kCompletionTokens, Signal::kOutputs};
  // sensitivity, direction, seasonality, minima (gateway defaults: 1h, 30 windows)
  alerting::DynamicThresholdOptions threshold = [] {
    alerting::DynamicThresholdOptions o;
    o.min_history = std::chrono::hours(1);
    o.min_samples = 30;
    return o;
  }();
  std::chrono::milliseconds history{7LL * 24 * 3600 * 1000};
  int violations = 3;
  int of = 5;
  int resolve_after = 3;
  size_t max_models = 100;
  alerting::NotifyConfig notify;  // no sinks: alerts only go to the log and metrics
};

// Parses the map at `key` of gateway.yaml (absent: disabled). Errors are
// InvalidArgument naming file:line and key (unknown keys, an unknown signal
// listing the valid ones, violations > of, a window under 1 s, zero
// min_requests/min_samples/of/resolve_after/max_models, a history shorter
// than min_history + window or holding fewer than min_samples windows, and
// anything ParseNotifyConfig rejects under `<key>.notify`).
Result<AnomalyConfig> ParseAnomalyConfig(const Config& config, std::string_view key = "anomaly");

}  // namespace gantry::gateway
