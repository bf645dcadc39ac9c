// Prometheus metrics: counters, gauges and histograms registered by name and
// label set in a Registry, rendered in the Prometheus text exposition format
// 0.0.4 for a GET /metrics endpoint. Used by the gateway and the node agent.
//
// Hot-path operations (Inc, Set, Observe) are lock-free and never allocate.
// Registration (Get*) takes a lock; look metric objects up once and keep the
// pointer: it stays valid for the registry's lifetime.
//
// Naming follows Prometheus conventions: base units (seconds, bytes), counters
// end in `_total` (GetCounter appends it when missing), e.g.
//   gantry_gateway_requests_total{route="/v1/",code="200"}
//   gantry_gateway_request_duration_seconds_bucket{le="0.005"}
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::metrics {

// Label name/value pairs. Order given at registration does not matter: the set
// is sorted by name, so {a,b} and {b,a} name the same series.
using Labels = std::vector<std::pair<std::string, std::string>>;

// Monotonic counter. Inc with a negative or NaN value is ignored (counters only
// go up). Lock-free.
class Counter {
 public:
  void Inc(double v = 1);
  double Value() const;

 private:
  std::atomic<double> value_{0};
};

// Value that goes up and down. Lock-free.
class Gauge {
 public:
  void Set(double v);
  void Inc(double v = 1);
  void Dec(double v = 1);
  double Value() const;

 private:
  std::atomic<double> value_{0};
};

// Histogram with fixed upper bounds (le). An observation v is counted in every
// bucket with v <= le (the rendered buckets are cumulative; v == le counts in
// that bucket). NaN observations are ignored. Lock-free.
class Histogram {
 public:
  // `bounds` must be sorted strictly ascending, finite (the +Inf bucket is
  // implicit); the Registry validates them.
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);

  // Snapshot accessors (for tests and rendering). Bucket counts are per bucket,
  // not cumulative; index bounds().size() is the +Inf overflow bucket.
  const std::vector<double>& bounds() const { return bounds_; }
  uint64_t BucketCount(size_t i) const;
  uint64_t Count() const;  // sum of all buckets
  double Sum() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_.size() + 1
  std::atomic<double> sum_{0};
};

// Seconds, 0.0001 .. 60 (16 bounds), fine below 1 ms for proxy overhead.
std::vector<double> DefaultLatencyBuckets();

// Validity checks: metric names [a-zA-Z_:][a-zA-Z0-9_:]*, label names
// [a-zA-Z_][a-zA-Z0-9_]* not starting with "__" (reserved by Prometheus).
bool ValidMetricName(std::string_view name);

// Exposition-format text pieces, shared with the agent's renderer: a sample
// value (integral values without a fraction, others as the shortest %g-style
// text that round-trips, NaN, +Inf, -Inf) and escaped text (\\ and newline;
// also '"' when `quote`, as label values and OpenMetrics HELP need).
void AppendSampleValue(std::string* out, double v);
void AppendEscaped(std::string* out, std::string_view s, bool quote);
bool ValidLabelName(std::string_view name);

// Thread-safe collection of metric families.
class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Same name + labels -> the same object (stable pointer for the registry's
  // lifetime). InvalidArgument (naming the metric) for: an invalid metric or
  // label name, a duplicate label name, a label named "le" on a histogram, a
  // name already registered with another
  // type, other histogram buckets, or another label-name set, or buckets that are
  // empty / not strictly ascending / not finite. The help text of the first
  // registration wins. Counter names get "_total" appended unless they already
  // end in it, so GetCounter("x") and GetCounter("x_total") are the same family.
  Result<Counter*> GetCounter(std::string_view name, std::string_view help,
                              const Labels& labels = {});
  Result<Gauge*> GetGauge(std::string_view name, std::string_view help, const Labels& labels = {});
  Result<Histogram*> GetHistogram(std::string_view name, std::string_view help,
                                  const Labels& labels, const std::vector<double>& buckets);

  // Hooks run (in registration order, outside the registry lock) at the start
  // of each Render() to refresh gauges computed on demand (e.g. active
  // connections summed over threads). A hook may call Get* and Set.
  void AddCollectHook(std::function<void()> hook);

  // Prometheus text exposition format 0.0.4: families sorted by name, "# HELP"
  // and "# TYPE" once per family, series sorted by label values, label values
  // escaped (\\, \", \n), HELP escaped (\\, \n), histograms as cumulative
  // _bucket{le="..."} including le="+Inf", then _sum and _count.
  std::string Render() const;

  // Content-Type for the rendered text.
  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

 private:
  struct Family;
  Result<void*> GetSeries(int type, std::string_view name, std::string_view help,
                          const Labels& labels, const std::vector<double>* buckets);

  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Family>, std::less<>> families_;
  std::vector<std::function<void()>> hooks_;
  mutable std::mutex hooks_mu_;
};

}  // namespace gantry::metrics
