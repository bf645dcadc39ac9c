// The end of every request, however it ended: per-route metrics (requests by
// status, duration) and the audit record; and the per-worker caches of metric
// series that the request path bumps.
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>

#include "gantry/core/text.h"
#include "worker.h"

namespace gantry::gateway::internal {

namespace {

// `ms` (>= 0) with three decimals, as "{:.3f}" (rounded to the microsecond),
// at `p`; returns the end (at most 24 bytes).
char* PutMillis(char* p, double ms) {
  const int64_t us = std::llround(std::max(0.0, ms) * 1000);
  p = std::to_chars(p, p + 20, us / 1000).ptr;
  const int frac = static_cast<int>(us % 1000);
  *p++ = '.';
  *p++ = static_cast<char>('0' + frac / 100);
  *p++ = static_cast<char>('0' + frac / 10 % 10);
  *p++ = static_cast<char>('0' + frac % 10);
  return p;
}

char* PutInt(char* p, int64_t v) { return std::to_chars(p, p + 20, v).ptr; }

// A literal without its NUL.
template <size_t N>
char* Put(char* p, const char (&s)[N]) {
  std::memcpy(p, s, N - 1);
  return p + N - 1;
}

// `prefix` (`,"name":"`), `value` escaped, and the closing quote.
template <size_t N>
char* PutField(char* p, const char (&prefix)[N], std::string_view value, bool* non_ascii) {
  p = EscapeJsonTo(value, Put(p, prefix), non_ascii);
  *p++ = '"';
  return p;
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

namespace {
// Control bytes, '"' and '\\': one load per byte on the short fields, where
// the word-at-a-time path does not apply.
constexpr std::array<bool, 256> kNeedsEscape = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[c] = true;
  t['"'] = t['\\'] = true;
  return t;
}();
}  // namespace

char* EscapeJsonTo(std::string_view s, char* out, bool* non_ascii) {
  const char* p = s.data();
  const char* const end = p + s.size();
  while (p != end) {
    if (end - p >= 8) {
      // Plain ASCII a word at a time; the 8 bytes are copied whole (there is
      // room: at least 6 per byte still to come) and the count kept.
      const size_t plain = JsonPlainPrefix8(p);
      std::memcpy(out, p, 8);
      out += plain;
      p += plain;
      if (plain == 8) continue;
    }
    const auto c = static_cast<unsigned char>(*p++);
    if (!kNeedsEscape[c]) {
      *out++ = static_cast<char>(c);  // includes UTF-8 bytes, passed through
      if (c >= 0x80 && non_ascii != nullptr) *non_ascii = true;
      continue;
    }
    *out++ = '\\';
    switch (c) {
      case '"':
        *out++ = '"';
        break;
      case '\\':
        *out++ = '\\';
        break;
      case '\n':
        *out++ = 'n';
        break;
      case '\r':
        *out++ = 'r';
        break;
      case '\t':
        *out++ = 't';
        break;
      default: {
        static constexpr char kHex[] = "0123456789abcdef";
        const char u[5] = {'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        std::memcpy(out, u, 5);
        out += 5;
      }
    }
  }
  return out;
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
  const std::string_view method = req ? req->method : std::string_view();
  const std::string_view path = req ? req->path : std::string_view();
  const std::string_view values[] = {log.request_id, log.key_id, log.role,  method,
                                     path,           log.route,  log.model, log.backend,
                                     log.decision,   log.reason, log.client};
  size_t value_bytes = 0;
  for (std::string_view v : values) value_bytes += v.size();
  // Written in place into a per-worker buffer that keeps its capacity (Append
  // copies it): names and punctuation are under 300 bytes, the 8 numbers
  // under 24 each, and escaping at most sextuples a value.
  Buffer& rec = audit_rec_;
  rec.Clear();
  size_t avail = 0;
  char* const start = rec.Prepare(512 + 6 * value_bytes, &avail);
  auto now = std::chrono::system_clock::now();
  int64_t ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  bool non_ascii = false;  // a field with UTF-8 (or stray) bytes: the writer checks it
  char* p = PutInt(Put(start, "{\"time_ms\":"), ms);
  p = PutField(p, ",\"request_id\":\"", log.request_id, &non_ascii);
  p = PutField(p, ",\"key_id\":\"", log.key_id, &non_ascii);
  p = PutField(p, ",\"role\":\"", log.role, &non_ascii);
  p = PutField(p, ",\"method\":\"", method, &non_ascii);
  p = PutField(p, ",\"path\":\"", path, &non_ascii);
  p = PutField(p, ",\"route\":\"", log.route, &non_ascii);
  p = PutField(p, ",\"model\":\"", log.model, &non_ascii);
  p = PutField(p, ",\"backend\":\"", log.backend, &non_ascii);
  p = PutField(p, ",\"decision\":\"", log.decision, &non_ascii);
  p = PutField(p, ",\"reason\":\"", log.reason, &non_ascii);
  p = PutField(p, ",\"client\":\"", log.client, &non_ascii);
  p = PutInt(Put(p, ",\"status\":"), log.status);
  p = PutMillis(Put(p, ",\"latency_ms\":"), seconds * 1e3);
  p = PutMillis(Put(p, ",\"upstream_ms\":"), log.upstream_s < 0 ? 0.0 : log.upstream_s * 1e3);
  p = PutInt(Put(p, ",\"prompt_tokens\":"), log.prompt_tokens);
  p = PutInt(Put(p, ",\"completion_tokens\":"), log.completion_tokens);
  p = PutInt(Put(p, ",\"bytes_in\":"), static_cast<int64_t>(log.bytes_in));
  p = PutInt(Put(p, ",\"bytes_out\":"), static_cast<int64_t>(log.bytes_out));
  *p++ = '}';
  rec.Commit(static_cast<size_t>(p - start));
  // Every string above went through EscapeJsonTo and the names are fixed, so
  // an ASCII record is a well-formed object the writer need not parse again.
  if (non_ascii) {
    shared_.audit->Append(rec.view());
  } else {
    shared_.audit->AppendWellFormed(rec.view());
  }
}

}  // namespace gantry::gateway::internal
