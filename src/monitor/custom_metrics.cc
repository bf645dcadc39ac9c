#include "gantry/monitor/custom_metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <utility>

#include "gantry/core/json.h"
#include "gantry/core/log.h"
#include "gantry/monitor/logs_ingestion.h"

namespace gantry::monitor {
namespace {

std::string TrimSlash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

int64_t MinuteOf(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::minutes>(t.time_since_epoch()).count();
}

std::string MinuteTime(int64_t minute) {
  time_t secs = static_cast<time_t>(minute * 60);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:00Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min);
}

}  // namespace

Result<std::unique_ptr<CustomMetrics>> CustomMetrics::Create(
    CustomMetricsOptions options, std::unique_ptr<security::TokenSource> tokens,
    const Clock& clock) {
  if (!options.endpoint.starts_with("https://") && !options.endpoint.starts_with("http://")) {
    return InvalidArgument(
        fmt::format("custom metrics: endpoint '{}' must be https://<region>.monitoring.azure.com",
                    options.endpoint));
  }
  if (options.resource_id.empty() || options.resource_id[0] != '/') {
    return InvalidArgument(
        fmt::format("custom metrics: resource_id '{}' must be a resource id, /subscriptions/...",
                    options.resource_id));
  }
  if (options.max_attempts < 1) return InvalidArgument("custom metrics: max_attempts must be >= 1");
  if (options.max_series_per_call < 1) {
    return InvalidArgument("custom metrics: max_series_per_call must be >= 1");
  }
  if (tokens == nullptr) return InvalidArgument("custom metrics: no token source");
  return std::unique_ptr<CustomMetrics>(
      new CustomMetrics(std::move(options), std::move(tokens), clock));
}

CustomMetrics::CustomMetrics(CustomMetricsOptions options,
                             std::unique_ptr<security::TokenSource> tokens, const Clock& clock)
    : options_(std::move(options)), tokens_(std::move(tokens)), clock_(clock) {
  url_ = TrimSlash(options_.endpoint) + TrimSlash(options_.resource_id) + "/metrics";
}

void CustomMetrics::Record(const MetricValue& v, std::chrono::system_clock::time_point at) {
  std::vector<std::string> names, values;
  for (const auto& [k, val] : v.dims) {
    names.push_back(k);
    values.push_back(val);
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto& series = pending_[Key{MinuteOf(at), v.metric, v.namespace_, names}];
  auto it = series.find(values);
  if (it == series.end()) {
    if (series_ >= options_.max_pending_series) {
      ++dropped_;
      return;
    }
    ++series_;
    series.emplace(values, Agg{v.value, v.value, v.value, 1});
    return;
  }
  Agg& a = it->second;
  a.min = std::min(a.min, v.value);
  a.max = std::max(a.max, v.value);
  a.sum += v.value;
  ++a.count;
}

Status CustomMetrics::Flush(std::chrono::system_clock::time_point now, bool everything) {
  const int64_t current = MinuteOf(now);
  Status first;
  while (true) {
    Key key;
    std::map<std::vector<std::string>, Agg> series;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pending_.begin();
      if (it == pending_.end() || (!everything && std::get<0>(it->first) >= current)) break;
      key = it->first;
      series = std::move(it->second);
      series_ -= series.size();
      pending_.erase(it);
    }
    const auto& [minute, metric, ns, dim_names] = key;
    std::vector<std::pair<std::vector<std::string>, Agg>> all(series.begin(), series.end());
    std::vector<std::pair<std::vector<std::string>, Agg>> kept;
    Status failed;
    for (size_t at = 0; at < all.size(); at += options_.max_series_per_call) {
      size_t end = std::min(all.size(), at + options_.max_series_per_call);
      Json s = Json::array();
      for (size_t i = at; i < end; ++i) {
        Json one;
        one["dimValues"] = all[i].first;
        one["min"] = all[i].second.min;
        one["max"] = all[i].second.max;
        one["sum"] = all[i].second.sum;
        one["count"] = all[i].second.count;
        s.push_back(std::move(one));
      }
      Json base;
      base["metric"] = metric;
      base["namespace"] = ns;
      base["dimNames"] = dim_names;
      base["series"] = std::move(s);
      Json body;
      body["time"] = MinuteTime(minute);
      body["data"]["baseData"] = std::move(base);
      Status st = Post(body.dump());
      if (st.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        ++posted_;
      } else if (st.code() == StatusCode::kInvalidArgument ||
                 st.code() == StatusCode::kPermissionDenied || st.code() == StatusCode::kNotFound) {
        log::warn("custom metrics: {} series of {} refused: {}", end - at, metric, st.message());
        std::lock_guard<std::mutex> lock(mu_);
        refused_ += end - at;
        last_refusal_ = st;
      } else {
        for (size_t i = at; i < end; ++i) kept.push_back(all[i]);
        if (failed.ok()) failed = st;
      }
    }
    if (!kept.empty()) {
      // Kept for the next Flush; stop here so the order of minutes holds.
      std::lock_guard<std::mutex> lock(mu_);
      auto& back = pending_[key];
      for (auto& [vals, agg] : kept) {
        if (back.emplace(vals, agg).second) ++series_;
      }
      return failed;
    }
  }
  return first;
}

Status CustomMetrics::Post(const std::string& body) {
  std::chrono::milliseconds backoff = options_.retry_backoff;
  Status last;
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    Result<std::string> token = tokens_->Token();
    if (!token.ok()) {
      return token.status().WithContext(fmt::format("{}: token for {} from {}", url_,
                                                    kCustomMetricsResource, tokens_->Describe()));
    }
    http::Request req;
    req.method = "POST";
    req.url = url_;
    req.deadline = options_.timeout;
    req.headers = {{"Authorization", "Bearer " + *token}, {"Content-Type", "application/json"}};
    req.body = body;
    Result<http::Response> resp = http::SendTls(req, options_.tls);
    std::chrono::milliseconds wait = backoff;
    if (!resp.ok()) {
      last = Unavailable(resp.status().message());
    } else if (resp->status >= 200 && resp->status < 300) {
      return Status::Ok();
    } else {
      std::string what =
          fmt::format("{}: HTTP {}: {}", url_, resp->status, resp->body.substr(0, 300));
      if (resp->status == 429 || resp->status >= 500) {
        last = resp->status == 429 ? ResourceExhausted(what) : Unavailable(what);
        std::chrono::milliseconds ra = RetryAfter(*resp);
        if (ra.count() > 0) wait = ra;
      } else if (resp->status == 401 || resp->status == 403) {
        return PermissionDenied(
            what + " (the identity needs Monitoring Metrics Publisher on the resource)");
      } else if (resp->status == 404) {
        return NotFound(what + " (check the region and resource_id)");
      } else {
        return InvalidArgument(what);
      }
    }
    if (attempt == options_.max_attempts) break;
    clock_.SleepFor(std::min(wait, options_.max_retry_wait));
    backoff = std::min(backoff * 2, options_.max_retry_wait);
  }
  return last.WithContext(fmt::format("after {} attempts", options_.max_attempts));
}

uint64_t CustomMetrics::posted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return posted_;
}
uint64_t CustomMetrics::refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}
Status CustomMetrics::last_refusal() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_refusal_;
}
uint64_t CustomMetrics::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

}  // namespace gantry::monitor
