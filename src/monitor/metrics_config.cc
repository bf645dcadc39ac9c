// ParseAzureMonitorMetrics (the `azure_monitor.metrics` block) and
// SendCustomMetrics, the one-shot send used by batch commands (gantry drift).
#include <fmt/format.h>

#include <string>
#include <utility>

#include "gantry/monitor/custom_metrics.h"

namespace gantry::monitor {
namespace {

Status Bad(const Config& c, std::string_view key, std::string_view what) {
  return InvalidArgument(fmt::format("{}: {}", c.Locate(key), what));
}

// A bearer token may go over plain HTTP only to this machine (test servers).
bool LoopbackHttp(std::string_view url) {
  if (!url.starts_with("http://")) return false;
  std::string_view rest = url.substr(7);
  std::string_view host = rest.substr(0, rest.find('/'));
  if (host.starts_with("[::1]")) return true;
  host = host.substr(0, host.find(':'));
  return host == "127.0.0.1" || host == "localhost";
}

}  // namespace

Result<std::optional<AzureMonitorMetricsConfig>> ParseAzureMonitorMetrics(const Config& config,
                                                                          std::string_view key) {
  using Out = std::optional<AzureMonitorMetricsConfig>;
  if (!config.Has(key)) return Out();
  ASSIGN_OR_RETURN(Config top, config.Sub(key));
  // `logs` is ParseAzureMonitorLogs's (shipper.h): one file may hold both.
  RETURN_IF_ERROR(top.CheckKnownKeys("", {"logs", "metrics"}));
  if (!top.Has("metrics")) return Out();
  ASSIGN_OR_RETURN(Config c, top.Sub("metrics"));
  RETURN_IF_ERROR(c.CheckKnownKeys(
      "", {"endpoint", "resource_id", "namespace", "timeout", "max_attempts", "credential"}));
  AzureMonitorMetricsConfig o;
  ASSIGN_OR_RETURN(o.options.endpoint, c.GetString("endpoint", ""));
  if (o.options.endpoint.empty()) {
    return Bad(c, "endpoint",
               "is required (the regional metrics endpoint of the resource, "
               "https://<region>.monitoring.azure.com)");
  }
  if (!o.options.endpoint.starts_with("https://") && !LoopbackHttp(o.options.endpoint)) {
    return Bad(c, "endpoint",
               fmt::format("'{}' is not an https:// URL (write "
                           "https://<region>.monitoring.azure.com; plain http:// only to "
                           "127.0.0.1 or localhost)",
                           o.options.endpoint));
  }
  ASSIGN_OR_RETURN(o.options.resource_id, c.GetString("resource_id", ""));
  if (o.options.resource_id.empty()) {
    return Bad(c, "resource_id",
               "is required (the ARM id of the resource the metrics are for, "
               "/subscriptions/<sub>/resourceGroups/<rg>/providers/...)");
  }
  if (!o.options.resource_id.starts_with("/subscriptions/")) {
    return Bad(c, "resource_id",
               fmt::format("'{}' does not start with /subscriptions/ (copy the resource's ARM id, "
                           "e.g. from `az resource show --query id`)",
                           o.options.resource_id));
  }
  ASSIGN_OR_RETURN(o.namespace_, c.GetString("namespace", o.namespace_));
  if (o.namespace_.empty()) return Bad(c, "namespace", "must not be empty (default gantry/drift)");
  ASSIGN_OR_RETURN(std::chrono::nanoseconds timeout, c.GetDuration("timeout", o.options.timeout));
  if (timeout.count() <= 0) return Bad(c, "timeout", "must be positive, e.g. 10s");
  o.options.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  ASSIGN_OR_RETURN(int64_t attempts, c.GetInt("max_attempts", o.options.max_attempts));
  if (attempts < 1 || attempts > 20) {
    return Bad(c, "max_attempts", fmt::format("{} is out of range 1..20", attempts));
  }
  o.options.max_attempts = static_cast<int>(attempts);
  ASSIGN_OR_RETURN(o.credential, security::ParseAzureCredential(
                                     config, fmt::format("{}.metrics.credential", key)));
  o.credential.resource = kCustomMetricsResource;
  return Out(std::move(o));
}

Status SendCustomMetrics(const AzureMonitorMetricsConfig& config,
                         const std::vector<MetricValue>& values, const Clock& clock) {
  ASSIGN_OR_RETURN(auto tokens, security::NewAzureTokenSource(config.credential, clock));
  ASSIGN_OR_RETURN(auto metrics, CustomMetrics::Create(config.options, std::move(tokens), clock));
  const auto now = clock.WallNow();
  for (const MetricValue& v : values) metrics->Record(v, now);
  RETURN_IF_ERROR(metrics->Flush(now, /*everything=*/true));
  if (metrics->refused() > 0) {
    // Refusals are not retried (CustomMetrics::Post): report the last one with
    // its code (PermissionDenied for 401/403, NotFound for 404, ...).
    return metrics->last_refusal().WithContext(
        fmt::format("{} of {} series refused", metrics->refused(), values.size()));
  }
  if (metrics->dropped() > 0) {
    return ResourceExhausted(fmt::format("{} series dropped (over max_pending_series {})",
                                         metrics->dropped(), config.options.max_pending_series));
  }
  return Status::Ok();
}

}  // namespace gantry::monitor
