// Azure Monitor custom metrics (the REST API behind "Send custom metrics for
// an Azure resource"): values pre-aggregated per minute and per dimension
// set, one POST per metric and minute.
//
//   POST https://{region}.monitoring.azure.com{resourceId}/metrics
//   Authorization: Bearer <token for https://monitoring.azure.com/>
//   Content-Type: application/json
//   {"time":"2026-12-01T10:04:00Z",
//    "data":{"baseData":{"metric":"drift_share","namespace":"gantry/drift",
//      "dimNames":["model"],"series":[{"dimValues":["m1"],"min":0.1,"max":0.3,"sum":0.4,"count":2}]}}}
//
//   CustomMetrics m(options, std::move(tokens));
//   m.Record({.metric = "drift_share", .namespace_ = "gantry/drift",
//             .dims = {{"model", "m1"}}, .value = 0.2}, clock.WallNow());
//   Status s = m.Flush(clock.WallNow());  // posts every minute that is over
//
// Thread-safety: Record may be called from any thread; Flush from one at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "gantry/core/clock.h"
#include "gantry/core/config.h"
#include "gantry/core/https_client.h"
#include "gantry/core/status.h"
#include "gantry/security/azure_credential.h"

namespace gantry::monitor {

inline constexpr char kCustomMetricsResource[] = "https://monitoring.azure.com/";

struct CustomMetricsOptions {
  // "https://westeurope.monitoring.azure.com" (tests: a loopback URL).
  std::string endpoint;
  // The resource the metrics are for, "/subscriptions/.../resourceGroups/.../providers/...".
  std::string resource_id;
  std::chrono::milliseconds timeout{10'000};
  int max_attempts = 4;
  std::chrono::milliseconds retry_backoff{1'000};
  std::chrono::milliseconds max_retry_wait{30'000};
  // Series per POST; more are sent in further POSTs for the same minute.
  size_t max_series_per_call = 50;
  size_t max_pending_series = 10'000;  // beyond: new series dropped and counted
  http::TlsOptions tls;
};

struct MetricValue {
  std::string metric;
  std::string namespace_;
  std::map<std::string, std::string> dims;  // names sorted: the set is the key
  double value = 0;
};

class CustomMetrics {
 public:
  // InvalidArgument for an endpoint that is not http(s)://, an empty
  // resource_id (or one not starting with '/'), max_attempts < 1.
  static Result<std::unique_ptr<CustomMetrics>> Create(
      CustomMetricsOptions options, std::unique_ptr<security::TokenSource> tokens,
      const Clock& clock = SystemClock());

  // Adds `v` to the minute `at` falls in (min, max, sum, count).
  void Record(const MetricValue& v, std::chrono::system_clock::time_point at);

  // Posts every minute before the one `now` falls in (all of them when
  // `everything`), oldest first; a minute is forgotten once posted or refused
  // (4xx other than 429: logged, counted in refused()). 429/5xx/transport
  // errors are retried (Retry-After honoured); when retries run out the
  // minute is kept for the next Flush and the error returned.
  Status Flush(std::chrono::system_clock::time_point now, bool everything = false);

  uint64_t posted() const;   // POSTs accepted
  uint64_t refused() const;  // series refused by the service (not retried)
  uint64_t dropped() const;  // series dropped over max_pending_series
  // The last refusal (PermissionDenied, NotFound or InvalidArgument, the
  // message naming the URL and the HTTP answer); OK when none.
  Status last_refusal() const;

  const std::string& url() const { return url_; }

 private:
  CustomMetrics(CustomMetricsOptions options, std::unique_ptr<security::TokenSource> tokens,
                const Clock& clock);
  struct Agg {
    double min = 0, max = 0, sum = 0;
    uint64_t count = 0;
  };
  // (minute, metric, namespace, dim names) -> dim values -> aggregate
  using Key = std::tuple<int64_t, std::string, std::string, std::vector<std::string>>;
  Status Post(const std::string& body);

  CustomMetricsOptions options_;
  std::unique_ptr<security::TokenSource> tokens_;
  const Clock& clock_;
  std::string url_;
  mutable std::mutex mu_;
  std::map<Key, std::map<std::vector<std::string>, Agg>> pending_;
  size_t series_ = 0;
  uint64_t posted_ = 0, refused_ = 0, dropped_ = 0;
  Status last_refusal_;
};

// The `metrics` block of an Azure Monitor config file (the same file as the
// `logs` block of ParseAzureMonitorLogs):
//
//   azure_monitor:
//     metrics:
//       endpoint: https://westeurope.monitoring.azure.com   # the resource's region
//       resource_id: /subscriptions/<sub>/resourceGroups/<rg>/providers/<provider>/<type>/<name>
//       namespace: gantry/drift          # default
//       timeout: 10s                     # one POST (default 10s)
//       max_attempts: 4                  # 429/5xx/transport errors (default 4)
//       credential: {type: managed_identity, ...}   # security::ParseAzureCredential
struct AzureMonitorMetricsConfig {
  CustomMetricsOptions options;
  // The identity; `resource` is kCustomMetricsResource.
  security::AzureCredentialOptions credential;
  std::string namespace_ = "gantry/drift";
};

// The block at `<key>.metrics`, or nullopt when there is none. InvalidArgument
// "file:line:col: key '...': ..." for unknown keys (with a suggestion), a
// missing endpoint or resource_id, an endpoint that is not https:// (http://
// only to a loopback host, for tests), a resource_id not starting with
// "/subscriptions/", an empty namespace, a non-positive timeout,
// max_attempts < 1, or a bad credential block.
Result<std::optional<AzureMonitorMetricsConfig>> ParseAzureMonitorMetrics(
    const Config& config, std::string_view key = "azure_monitor");

// Records `values` at `now`, posts them all (Flush(now, true)) and turns any
// refused series into an error: PermissionDenied / NotFound / InvalidArgument
// with the service's answer (naming the URL), or what Flush returned
// (Unavailable, ResourceExhausted, ... after the retries).
Status SendCustomMetrics(const AzureMonitorMetricsConfig& config,
                         const std::vector<MetricValue>& values,
                         const Clock& clock = SystemClock());

}  // namespace gantry::monitor
