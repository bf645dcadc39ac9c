// The end of every request, however it ended: per-route metrics (requests by
// status, duration) and the audit record; and the per-worker caches of metric
// series that the request path bumps.
#include <chrono>
#include <cmath>

#include "worker.h"

namespace gantry::gateway::internal {

namespace {

// `ms` (>= 0) with three decimals, as "{:.3f}" (rounded to the microsecond).
void AppendMillis(double ms, std::string* out) {
  const int64_t us = std::llround(std::max(0.0, ms) * 1000);
  AppendInt(us / 1000, out);
  const int frac = static_cast<int>(us % 1000);
  const char digits[4] = {'.', static_cast<char>('0' + frac / 100),
                          static_cast<char>('0' + frac / 10 % 10),
                          static_cast<char>('0' + frac % 10)};
  out->append(digits, 4);
}

std::string LabelKey(std::string_view name, const metrics::Labels& labels) {
  std::string k(name);
  for (const auto& [n, v] : labels) {
    k += '\x1f';
    k += v;
  }
  return k;
}

// Looks `key` up in a per-worker cache, registering the series with `make`
// the first time (nullptr when the registry refuses it; metrics never fail a
// request).
template <typename T, typename Make>
T* CachedSeries(std::unordered_map<std::string, T*>& cache, std::string key, Make make) {
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Result<T*> r = make();
  T* p = r.ok() ? *r : nullptr;
  cache.emplace(std::move(key), p);
  return p;
}

}  // namespace

void AppendJsonEscaped(std::string_view s, std::string* out) {
  // Runs of characters that need no escape are appended whole.
  size_t run = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      default: {
        static constexpr char kHex[] = "0123456789abcdef";
        const char u[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        out->append(u, 6);
      }
    }
  }
  out->append(s.data() + run, s.size() - run);
}

metrics::Counter* Worker::CounterFor(std::string_view name, std::string_view help,
                                     const metrics::Labels& labels) {
  return CachedSeries(counters_, LabelKey(name, labels),
                      [&] { return shared_.registry.GetCounter(name, help, labels); });
}

metrics::Histogram* Worker::HistogramFor(std::string_view name, std::string_view help,
                                         const metrics::Labels& labels) {
  return CachedSeries(histograms_, LabelKey(name, labels), [&] {
    return shared_.registry.GetHistogram(name, help, labels, metrics::DefaultLatencyBuckets());
  });
}

void Worker::Finish(Request& r) {
  const http::RequestHead* req = r.has_head ? &r.head : nullptr;
  RequestLog& log = r.log;
  double seconds = Seconds(Clk::now() - r.start);
  auto it = route_stats_.find(log.route);
  if (it == route_stats_.end()) {
    it = route_stats_.emplace(log.route, RouteStats{}).first;
    it->second.duration = HistogramFor(
        "gantry_gateway_request_duration_seconds",
        "Time from the end of the request head to the end of the response", {{"route", log.route}});
  }
  RouteStats& rs = it->second;
  size_t code = log.status >= 0 && log.status < 600 ? static_cast<size_t>(log.status) : 0;
  if (rs.by_status[code] == nullptr) {
    rs.by_status[code] = CounterFor("gantry_gateway_requests_total", "Requests by route and status",
                                    {{"route", log.route}, {"status", std::to_string(code)}});
  }
  if (rs.by_status[code] != nullptr) rs.by_status[code]->Inc();
  if (rs.duration != nullptr) rs.duration->Observe(seconds);
  if (!shared_.audit) return;
  // Built in a per-worker buffer that keeps its capacity; Append copies it.
  std::string& rec = audit_rec_;
  rec.clear();
  auto field = [&rec](std::string_view name, std::string_view value) {
    rec += ",\"";
    rec += name;
    rec += "\":\"";
    AppendJsonEscaped(value, &rec);
    rec += '"';
  };
  auto now = std::chrono::system_clock::now();
  int64_t ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  rec += "{\"time_ms\":";
  AppendInt(ms, &rec);
  field("request_id", log.request_id);
  field("key_id", log.key_id);
  field("role", log.role);
  field("method", req ? req->method : std::string_view());
  field("path", req ? req->path : std::string_view());
  field("route", log.route);
  field("model", log.model);
  field("backend", log.backend);
  field("decision", log.decision);
  field("reason", log.reason);
  field("client", log.client);
  rec += ",\"status\":";
  AppendInt(log.status, &rec);
  rec += ",\"latency_ms\":";
  AppendMillis(seconds * 1e3, &rec);
  rec += ",\"upstream_ms\":";
  AppendMillis(log.upstream_s < 0 ? 0.0 : log.upstream_s * 1e3, &rec);
  rec += ",\"prompt_tokens\":";
  AppendInt(log.prompt_tokens, &rec);
  rec += ",\"completion_tokens\":";
  AppendInt(log.completion_tokens, &rec);
  rec += ",\"bytes_in\":";
  AppendInt(static_cast<int64_t>(log.bytes_in), &rec);
  rec += ",\"bytes_out\":";
  AppendInt(static_cast<int64_t>(log.bytes_out), &rec);
  rec += '}';
  shared_.audit->Append(rec);
}

}  // namespace gantry::gateway::internal
