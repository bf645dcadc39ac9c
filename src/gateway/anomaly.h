// Output anomaly detection: per (model, version), the gateway records what
// each answer looked like; at the end of every window each signal's window
// value is checked against a dynamic threshold learned from its own history
// (gantry/alerting/dynamic_threshold.h), and N violations out of the last M
// evaluated windows fire an alert, which resolves after `resolve_after` clean
// windows in a row. Alerts go to the configured sinks (Alertmanager webhook v4
// JSON, log, ...), to the log, and to metrics.
//
//   ASSIGN_OR_RETURN(auto det, AnomalyDetector::Create(cfg.anomaly, &registry));
//   det->Start();                         // a thread that closes windows
//   det->Record({model, version, ...});   // from the request path, any thread
//
// Window values per signal:
//   latency            mean request seconds
//   error_rate         errors / requests (5xx answers and failed exchanges)
//   response_bytes     mean response body bytes
//   completion_tokens  mean completion tokens (requests that reported usage)
//   outputs            KServe: for each numeric output tensor, three signals
//                      "output:<name>:mean", "output:<name>:min", "output:<name>:max"
//                      (the window's mean of each request's mean/min/max)
// A window with fewer than min_requests requests is skipped (not evaluated,
// not learned). A signal without data in a window is skipped for that window.
//
// Learning. The band of a window is fitted on the history *before* the
// window's value is added; the value is then added whether it violated or not
// (as Azure Monitor learns from everything). So a sustained step change first
// fires (N of M), and only after roughly as many windows as the history held
// before the step does it become the new normal, when the alert resolves.
// Absolute spread floors keep near-constant signals from alerting on noise:
// latency 1 ms, error_rate 0.01 (one percentage point); the others use the
// threshold's relative floor (1% of the centre).
//
// Bounds. At most max_models (model, version) pairs are tracked; records of
// further pairs are aggregated as model "other" (version ""). A pair whose
// history has expired (no traffic for `history`) is forgotten, its alerts
// resolved, and frees its place. At most 8 output
// tensors per pair are tracked (the first names seen). Memory is about 16
// bytes per learned window per signal (7d of 1m windows: ~160 KB a signal).
//
// Alert labels: alertname="GantryModelOutputAnomaly", model, version (when
// known), signal, severity="warning"; annotations: summary, description (the
// value, the band and the baseline's seasonality). Metrics (gauges):
//   gantry_gateway_anomaly_value{model,version,signal}       last window value
//   gantry_gateway_anomaly_band_lower/upper{model,version,signal}
//   gantry_gateway_anomaly_firing{model,version,signal}      0/1
// and the counter gantry_gateway_anomaly_alerts_total{model,signal}. The
// version label is "" when unknown (one label set per family). Series of a
// forgotten pair stay registered with their last values (firing 0).
//
// Cost. CloseWindow fits every signal's band anew (about 1.5 ms for 7d of 1m
// windows), on the window thread; Record never waits for it.
//
// Thread-safety: Record may be called from any thread (a short lock per call,
// striped by model); the rest from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/alerting/notify.h"
#include "gantry/core/clock.h"
#include "gantry/core/json.h"
#include "gantry/core/metrics.h"
#include "gantry/core/status.h"
#include "gantry/gateway/anomaly_config.h"

namespace gantry::gateway {

// Summary of one numeric KServe output tensor of one response.
struct TensorStats {
  std::string name;
  double mean = 0;
  double min = 0;
  double max = 0;
  uint64_t count = 0;  // finite elements seen
};

// Reads a KServe v2 inference response body (JSON: {"outputs":[{"name",
// "datatype","shape","data":[...]}]}; data may be nested lists) and returns
// the stats of each output with a numeric datatype (BOOL counts as 0/1;
// BYTES outputs and non-finite values are skipped: null, and the non-JSON
// NaN / Infinity / -Infinity that Python encoders write). Error
// (InvalidArgument, naming the output by index and name) for a body that is
// not such a JSON document, an unknown datatype, or strings/objects in the
// data of a numeric output; an output with no finite values, or without
// `data` (binary extension), is left out. One pass without a DOM; nesting
// deeper than 40 levels is an error; at most 64 outputs are summarized.
// Never throws.
Result<std::vector<TensorStats>> KserveOutputStats(std::string_view body);

// One answer, as the request path saw it.
struct OutputRecord {
  std::string_view model;
  std::string_view version;  // KServe version or rollout target pool; may be empty
  double latency_s = 0;
  bool error = false;  // 5xx, or the exchange failed
  uint64_t response_bytes = 0;
  int64_t completion_tokens = -1;  // -1: not reported
  const std::vector<TensorStats>* outputs = nullptr;
};

// One signal of one model, for the admin API and tests.
struct SignalState {
  std::string model;
  std::string version;
  std::string signal;
  size_t windows = 0;  // learned window values kept
  bool ready = false;  // enough history to alert
  std::string not_ready_reason;
  double last_value = 0;
  double lower = 0;
  double upper = 0;
  bool firing = false;
  int recent_violations = 0;  // of the last `of` evaluations
};

class AnomalyDetector {
 public:
  // `registry` may be null (no metrics). The sinks of config.notify are built
  // here; errors name the sink.
  // `extra_sink`, when set, makes one more sink for every notifier built
  // (at Create and at each Reconfigure), beside config.notify's: the gateway
  // passes its Azure Monitor sink (monitor/alert_sink.h) this way.
  static Result<std::unique_ptr<AnomalyDetector>> Create(
      const AnomalyConfig& config, metrics::Registry* registry, const Clock& clock = SystemClock(),
      std::function<std::unique_ptr<alerting::Sink>()> extra_sink = nullptr);
  // For tests: alerts go to `sinks` instead of config.notify's.
  AnomalyDetector(const AnomalyConfig& config, metrics::Registry* registry, const Clock& clock,
                  std::vector<std::unique_ptr<alerting::Sink>> sinks);
  ~AnomalyDetector();  // stops the thread; delivers alerts already produced
  AnomalyDetector(const AnomalyDetector&) = delete;
  AnomalyDetector& operator=(const AnomalyDetector&) = delete;

  // Starts the thread that calls CloseWindow() at every window boundary of
  // the clock's wall time (real time).
  void Start();

  void Record(const OutputRecord& r);

  // What one CloseWindow did (for logs and tests).
  struct WindowSummary {
    uint64_t requests = 0;  // requests recorded in the window (all pairs, skipped ones too)
    size_t pairs = 0;       // (model, version) pairs with requests
    size_t skipped = 0;     // ... of which had fewer than min_requests
    size_t evaluated = 0;   // (pair, signal) values checked against a ready band
    size_t learned = 0;     // (pair, signal) values added to the history
    size_t fired = 0;
    size_t resolved = 0;
  };

  // Closes the current window at `now_ms` (Unix ms): evaluates and learns
  // every signal, fires and resolves alerts, hands them to the sinks. Called
  // by the thread; tests call it directly with a FakeClock. Calls are
  // serialized; Record may run concurrently (a record lands in this window or
  // the next, never in none).
  WindowSummary CloseWindow(int64_t now_ms);

  // Applies a new configuration (reload): thresholds, windows and sinks
  // change; learned history is kept.
  Status Reconfigure(const AnomalyConfig& config);

  std::vector<SignalState> States() const;
  // Blocks until alerts produced so far are delivered (tests).
  bool Flush(std::chrono::milliseconds timeout);

  struct Impl;

 private:
  explicit AnomalyDetector(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry::gateway
