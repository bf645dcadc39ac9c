// Metric sources (metrics.h): a Prometheus instant query, the gateway's and
// the agent's /metrics, a command.
#include "gantry/autoscale/metrics.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <optional>

#include "exposition_text.h"
#include "gantry/core/http_client.h"
#include "gantry/core/https_client.h"
#include "gantry/core/json.h"
#include "gantry/core/subprocess.h"
#include "gantry/core/text.h"

namespace gantry::autoscale {
namespace {

using std::chrono::nanoseconds;

Result<std::string> Fetch(const std::string& url, std::chrono::milliseconds timeout,
                          std::string_view what) {
  // Over libcurl: Prometheus and exporters are often behind a name or TLS.
  http::Request req{.url = url, .deadline = timeout};
  ASSIGN_OR_RETURN(http::Response resp, http::SendTls(req, {}));
  if (resp.status != 200) {
    std::string body = resp.body.substr(0, 200);
    return Unavailable(fmt::format("{} {}: HTTP {} {}", what, url, resp.status, body));
  }
  return std::move(resp.body);
}

// GET <url>/api/v1/query?query=Q: KEDA's Prometheus scaler semantics (one
// element; an empty result is 0 with ignore_null_values).
class PrometheusSource : public MetricSource {
 public:
  explicit PrometheusSource(MetricSourceConfig c) : c_(std::move(c)) {}

  Result<double> Read() override {
    std::string base = c_.url;
    while (!base.empty() && base.back() == '/') base.pop_back();
    std::string url = base + "/api/v1/query?query=" + http::PercentEncode(c_.query);
    ASSIGN_OR_RETURN(std::string body, Fetch(url, c_.timeout, "prometheus"));
    Json doc = Json::parse(body, nullptr, /*allow_exceptions=*/false);
    auto bad = [&](std::string_view what) {
      return Unavailable(fmt::format("prometheus {}: query '{}': {}", c_.url, c_.query, what));
    };
    if (!doc.is_object() || doc.value("status", "") != "success" || !doc.contains("data")) {
      return bad("the answer is not a successful Prometheus API response");
    }
    const Json& data = doc["data"];
    std::string type = data.value("resultType", "");
    const Json* sample = nullptr;
    if (type == "scalar") {
      sample = data.contains("result") ? &data["result"] : nullptr;
    } else if (type == "vector") {
      const Json& result = data["result"];
      if (!result.is_array()) return bad("'result' is not a list");
      if (result.empty()) {
        if (c_.ignore_null_values) return 0.0;
        return bad("returned no series (ignore_null_values is false)");
      }
      if (result.size() > 1) {
        return bad(fmt::format("returned {} series; make it return one (e.g. wrap it in sum())",
                               result.size()));
      }
      sample = result[0].contains("value") ? &result[0]["value"] : nullptr;
    } else {
      return bad(
          fmt::format("result type '{}'; use a query that gives an instant vector or a "
                      "scalar",
                      type));
    }
    double v = 0;
    if (sample == nullptr || !sample->is_array() || sample->size() != 2 ||
        !(*sample)[1].is_string() || !ParseNumber((*sample)[1].get<std::string>(), &v)) {
      // ParseNumber refuses NaN and Inf: a division by zero in PromQL is no data.
      return bad("the sample is not a finite number");
    }
    return v;
  }

 private:
  MetricSourceConfig c_;
};

// A /metrics scrape reduced to one number. Counters become per-second rates
// between two scrapes; the first scrape of a rate is missing.
class ScrapeSource : public MetricSource {
 public:
  ScrapeSource(MetricSourceConfig c, const Clock& clock) : c_(std::move(c)), clock_(clock) {
    std::string base = c_.url;
    while (!base.empty() && base.back() == '/') base.pop_back();
    url_ = base.ends_with("/metrics") ? base : base + "/metrics";
  }

  Result<double> Read() override {
    std::string what = c_.kind == MetricSourceConfig::Kind::kGateway ? "gateway" : "agent";
    ASSIGN_OR_RETURN(std::string body, Fetch(url_, c_.timeout, what));
    nanoseconds now = clock_.Now();
    ASSIGN_OR_RETURN(std::vector<ExpositionSample> samples, ParseExpositionText(body));
    auto sum = [&](std::string_view name, bool* found) {
      double total = 0;
      *found = false;
      for (const ExpositionSample& s : samples) {
        if (s.name != name) continue;
        if (c_.kind == MetricSourceConfig::Kind::kGateway && s.Label("pool") != c_.pool) continue;
        total += s.value;
        *found = true;
      }
      return total;
    };
    auto missing = [&](std::string_view metric) {
      return NotFound(fmt::format(
          "{} {}: no {} series{}; is this a gantry {} new enough to "
          "export it?",
          what, url_, metric, c_.pool.empty() ? "" : fmt::format(" for pool '{}'", c_.pool), what));
    };
    bool found = false;
    const std::string& sig = c_.signal;
    if (c_.kind == MetricSourceConfig::Kind::kGateway) {
      if (sig == "in_flight" || sig == "pending" || sig == "held") {
        std::string metric = "gantry_gateway_pool_" + sig;
        double v = sum(metric, &found);
        if (!found) return missing(metric);
        return v;
      }
      if (sig == "in_flight_and_pending") {
        bool f1 = false, f2 = false, f3 = false;
        double v = sum("gantry_gateway_pool_in_flight", &f1) +
                   sum("gantry_gateway_pool_pending", &f2) + sum("gantry_gateway_pool_held", &f3);
        if (!f1) return missing("gantry_gateway_pool_in_flight");
        return v;
      }
      std::string metric =
          sig == "request_rate" ? "gantry_gateway_requests_total" : "gantry_gateway_shed_total";
      double v = sum(metric, &found);
      // A pool that has served nothing yet has no counter series: a rate of 0
      // once the pool itself is known.
      if (!found) {
        bool pool_known = false;
        sum("gantry_gateway_pool_in_flight", &pool_known);
        if (!pool_known) return missing("gantry_gateway_pool_in_flight");
      }
      return Rate(v, now, metric);
    }
    // The agent: node_exporter's and dcgm-exporter's names.
    if (sig == "gpu_utilization") {
      double total = 0;
      int n = 0;
      for (const ExpositionSample& s : samples) {
        if (s.name == "DCGM_FI_DEV_GPU_UTIL") total += s.value, ++n;
      }
      if (n == 0) return missing("DCGM_FI_DEV_GPU_UTIL");
      return total / n;
    }
    if (sig == "gpu_memory_used_ratio") {
      bool fu = false, ff = false;
      double used = sum("DCGM_FI_DEV_FB_USED", &fu), free = sum("DCGM_FI_DEV_FB_FREE", &ff);
      if (!fu || !ff || used + free <= 0) return missing("DCGM_FI_DEV_FB_USED/FB_FREE");
      return used / (used + free);
    }
    // cpu_utilization: the busy share of node_cpu_seconds_total between two
    // scrapes, in percent (what the HPA's CPU utilisation means).
    double idle = 0, all = 0;
    for (const ExpositionSample& s : samples) {
      if (s.name != "node_cpu_seconds_total") continue;
      found = true;
      all += s.value;
      std::string mode = s.Label("mode");
      if (mode == "idle" || mode == "iowait") idle += s.value;
    }
    if (!found) return missing("node_cpu_seconds_total");
    std::optional<std::pair<double, double>> prev = cpu_prev_;
    cpu_prev_ = std::make_pair(idle, all);
    if (!prev) return Unavailable(fmt::format("agent {}: first scrape (a rate needs two)", url_));
    double d_all = all - prev->second, d_idle = idle - prev->first;
    if (d_all <= 0) return Unavailable(fmt::format("agent {}: CPU counters did not move", url_));
    return 100.0 * (1.0 - d_idle / d_all);
  }

 private:
  Result<double> Rate(double value, nanoseconds now, std::string_view metric) {
    std::optional<std::pair<double, nanoseconds>> prev = rate_prev_;
    rate_prev_ = std::make_pair(value, now);
    if (!prev) {
      return Unavailable(
          fmt::format("gateway {}: first scrape of {} (a rate needs two)", url_, metric));
    }
    double dt = std::chrono::duration<double>(now - prev->second).count();
    if (dt <= 0) return Unavailable(fmt::format("gateway {}: two scrapes at the same time", url_));
    // A counter that went down is a restarted gateway: count from zero.
    double delta = value >= prev->first ? value - prev->first : value;
    return delta / dt;
  }

  MetricSourceConfig c_;
  const Clock& clock_;
  std::string url_;
  std::optional<std::pair<double, nanoseconds>> rate_prev_;
  std::optional<std::pair<double, double>> cpu_prev_;
};

class CommandSource : public MetricSource {
 public:
  explicit CommandSource(MetricSourceConfig c) : c_(std::move(c)) {}

  Result<double> Read() override {
    ASSIGN_OR_RETURN(SubprocessResult r, RunSubprocess(c_.command, c_.timeout));
    if (r.exit_code != 0) {
      return Unavailable(fmt::format("command {}: exit {}: {}", c_.command[0], r.exit_code,
                                     TrimSpace(r.err.substr(0, 300))));
    }
    std::string_view out = TrimSpace(r.out);
    std::string_view first = out.substr(0, out.find_first_of(" \t\r\n"));
    double v = 0;
    if (!ParseNumber(first, &v)) {
      return Unavailable(fmt::format("command {}: printed '{}', expected a number first",
                                     c_.command[0], first.substr(0, 60)));
    }
    return v;
  }

 private:
  MetricSourceConfig c_;
};

}  // namespace

Result<std::unique_ptr<MetricSource>> NewMetricSource(const MetricSourceConfig& config,
                                                      const Clock& clock) {
  switch (config.kind) {
    case MetricSourceConfig::Kind::kPrometheus:
      return std::unique_ptr<MetricSource>(new PrometheusSource(config));
    case MetricSourceConfig::Kind::kGateway:
    case MetricSourceConfig::Kind::kAgent:
      return std::unique_ptr<MetricSource>(new ScrapeSource(config, clock));
    case MetricSourceConfig::Kind::kCommand:
      if (config.command.empty()) {
        return InvalidArgument(fmt::format("metric '{}': the command is empty", config.name));
      }
      return std::unique_ptr<MetricSource>(new CommandSource(config));
  }
  return Internal("unknown metric kind");
}

}  // namespace gantry::autoscale
