#include "gantry/monitor/logs_ingestion.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

namespace gantry::monitor {
namespace {

std::string TrimSlash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

// Statuses worth another try: the service is busy or failing, not refusing
// the records (Logs Ingestion API: 429 throttled, 5xx; 408 a slow upload).
bool Retriable(int status) { return status == 408 || status == 429 || status >= 500; }

bool RetriableTransport(StatusCode c) {
  return c == StatusCode::kUnavailable || c == StatusCode::kDeadlineExceeded ||
         c == StatusCode::kDataLoss || c == StatusCode::kIoError;
}

// The service's own words, shortened: its error JSON says which field of
// which record is wrong, which is what an operator needs.
std::string Excerpt(const std::string& body) {
  std::string s = body.substr(0, 300);
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

}  // namespace

std::string JsonArray(std::span<const std::string> records) {
  size_t n = 2;
  for (const std::string& r : records) n += r.size() + 1;
  std::string out;
  out.reserve(n);
  out += '[';
  for (size_t i = 0; i < records.size(); ++i) {
    if (i > 0) out += ',';
    out += records[i];
  }
  out += ']';
  return out;
}

Result<std::string> Gzip(std::string_view data) {
  z_stream z{};
  // 15 + 16: a gzip wrapper (header and CRC), not raw zlib, as
  // Content-Encoding: gzip means.
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return Internal("zlib deflateInit2 failed");
  }
  std::string out(deflateBound(&z, data.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&z, Z_FINISH);
  size_t produced = z.total_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return Internal("zlib deflate did not finish");
  out.resize(produced);
  return out;
}

Result<std::string> Gunzip(std::string_view data) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) return Internal("zlib inflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char buf[65536];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&z);
      return DataLoss("not valid gzip data");
    }
    out.append(buf, sizeof buf - z.avail_out);
    if (rc == Z_OK && z.avail_in == 0 && z.avail_out != 0) {
      inflateEnd(&z);
      return DataLoss("gzip data ends early");
    }
  }
  inflateEnd(&z);
  return out;
}

std::chrono::milliseconds RetryAfter(const http::Response& response) {
  auto number = [](const std::string* v) -> long long {
    if (v == nullptr || v->empty()) return -1;
    char* end = nullptr;
    long long n = std::strtoll(v->c_str(), &end, 10);
    if (end == v->c_str() || *end != '\0' || n < 0) return -1;
    return n;
  };
  for (const char* h : {"retry-after-ms", "x-ms-retry-after-ms"}) {
    long long ms = number(response.FindHeader(h));
    if (ms >= 0) return std::chrono::milliseconds(ms);
  }
  long long s = number(response.FindHeader("Retry-After"));
  if (s >= 0) return std::chrono::milliseconds(s * 1000);
  return std::chrono::milliseconds(0);
}

Result<std::unique_ptr<LogsIngestionClient>> LogsIngestionClient::Create(
    LogsIngestionOptions options, std::unique_ptr<security::TokenSource> tokens,
    const Clock& clock) {
  if (!options.endpoint.starts_with("https://") && !options.endpoint.starts_with("http://")) {
    return InvalidArgument(fmt::format(
        "logs ingestion: endpoint '{}' must be an https:// URL (the data collection endpoint's "
        "logs ingestion URL)",
        options.endpoint));
  }
  if (options.rule_id.empty()) {
    return InvalidArgument("logs ingestion: rule_id (the DCR's immutable id, dcr-...) is empty");
  }
  if (options.stream.empty()) {
    return InvalidArgument("logs ingestion: stream (e.g. Custom-GantryAudit_CL) is empty");
  }
  if (options.max_batch_bytes < 2 || options.max_batch_bytes > kMaxCallBytes) {
    return InvalidArgument(fmt::format(
        "logs ingestion: max_batch_bytes {} is out of range 2..{} (the API refuses larger calls)",
        options.max_batch_bytes, kMaxCallBytes));
  }
  if (options.max_attempts < 1) {
    return InvalidArgument("logs ingestion: max_attempts must be at least 1");
  }
  if (options.timeout.count() <= 0)
    return InvalidArgument("logs ingestion: timeout must be positive");
  if (tokens == nullptr) return InvalidArgument("logs ingestion: no token source");
  return std::unique_ptr<LogsIngestionClient>(
      new LogsIngestionClient(std::move(options), std::move(tokens), clock));
}

LogsIngestionClient::LogsIngestionClient(LogsIngestionOptions options,
                                         std::unique_ptr<security::TokenSource> tokens,
                                         const Clock& clock)
    : options_(std::move(options)), tokens_(std::move(tokens)), clock_(clock) {
  url_ =
      fmt::format("{}/dataCollectionRules/{}/streams/{}?api-version={}",
                  TrimSlash(options_.endpoint), http::PercentEncode(options_.rule_id),
                  http::PercentEncode(options_.stream), http::PercentEncode(options_.api_version));
  if (!options_.wait) {
    const Clock* c = &clock_;
    options_.wait = [c](std::chrono::milliseconds d) {
      c->SleepFor(d);
      return true;
    };
  }
}

UploadOutcome LogsIngestionClient::Upload(std::span<const std::string> records) {
  UploadOutcome out;
  size_t i = 0;
  while (i < records.size()) {
    // The longest run from i whose JSON array fits the bound.
    size_t bytes = 2 + records[i].size();
    if (bytes > options_.max_batch_bytes) {
      out.status = InvalidArgument(fmt::format(
          "{}: record {} is {} bytes, over the {}-byte bound of one call; it cannot be sent", url_,
          i, records[i].size(), options_.max_batch_bytes));
      return out;
    }
    size_t j = i + 1;
    while (j < records.size() && bytes + 1 + records[j].size() <= options_.max_batch_bytes) {
      bytes += 1 + records[j].size();
      ++j;
    }
    Status s = SendRange(records.subspan(i, j - i), out);
    if (!s.ok()) {
      out.status = std::move(s);
      return out;
    }
    i = j;
  }
  return out;
}

Status LogsIngestionClient::SendRange(std::span<const std::string> records, UploadOutcome& out) {
  std::chrono::milliseconds backoff = options_.retry_backoff;
  Status last;
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    bool too_large = false;
    std::chrono::milliseconds wait{0};
    Status s = SendOnce(records, out, &too_large);
    if (s.ok()) {
      out.delivered += records.size();
      return s;
    }
    if (too_large) {
      // The service's limit is lower than ours: halve and try each half.
      if (records.size() == 1) {
        return InvalidArgument(fmt::format("{}: one record of {} bytes was refused with 413", url_,
                                           records[0].size()));
      }
      size_t half = records.size() / 2;
      RETURN_IF_ERROR(SendRange(records.first(half), out));
      return SendRange(records.subspan(half), out);
    }
    // Retriable failures come back as Unavailable/ResourceExhausted/... with
    // the wait stashed by SendOnce; anything else is final.
    if (s.code() != StatusCode::kUnavailable && s.code() != StatusCode::kResourceExhausted &&
        s.code() != StatusCode::kDeadlineExceeded && s.code() != StatusCode::kDataLoss &&
        s.code() != StatusCode::kIoError) {
      return s;
    }
    last = s;
    if (attempt == options_.max_attempts) break;
    wait = retry_after_.count() > 0 ? retry_after_ : backoff;
    wait = std::min(wait, options_.max_retry_wait);
    backoff = std::min(backoff * 2, options_.max_retry_wait);
    if (!options_.wait(wait)) {
      return Unavailable(
          fmt::format("{}: stopped while waiting to retry ({})", url_, last.message()));
    }
  }
  return last.WithContext(fmt::format("after {} attempts", options_.max_attempts));
}

Status LogsIngestionClient::SendOnce(std::span<const std::string> records, UploadOutcome& out,
                                     bool* too_large) {
  retry_after_ = std::chrono::milliseconds(0);
  Result<std::string> token = tokens_->Token();
  if (!token.ok()) {
    // A refused identity is final for this call; an IMDS that did not answer is not.
    return token.status().WithContext(
        fmt::format("{}: token for {} from {}", url_, kLogsIngestionResource, tokens_->Describe()));
  }
  http::Request req;
  req.method = "POST";
  req.url = url_;
  req.deadline = options_.timeout;
  req.max_body_bytes = 1 << 20;
  req.headers = {{"Authorization", "Bearer " + *token}, {"Content-Type", "application/json"}};
  std::string body = JsonArray(records);
  if (options_.gzip) {
    ASSIGN_OR_RETURN(req.body, Gzip(body));
    req.headers.emplace_back("Content-Encoding", "gzip");
  } else {
    req.body = std::move(body);
  }
  ++out.calls;
  Result<http::Response> resp = http::SendTls(req, options_.tls);
  if (!resp.ok()) {
    if (RetriableTransport(resp.status().code())) return Unavailable(resp.status().message());
    return resp.status();
  }
  const int st = resp->status;
  if (st >= 200 && st < 300) return Status::Ok();
  std::string what = fmt::format("{}: HTTP {} {}: {}", url_, st, resp->reason, Excerpt(resp->body));
  if (st == 413) {
    *too_large = true;
    return InvalidArgument(what);
  }
  if (Retriable(st)) {
    retry_after_ = RetryAfter(*resp);
    return st == 429 ? ResourceExhausted(what) : Unavailable(what);
  }
  if (st == 401 || st == 403) {
    return PermissionDenied(what +
                            " (the identity needs the Monitoring Metrics Publisher role on the "
                            "data collection rule)");
  }
  if (st == 404) return NotFound(what + " (check endpoint, rule_id and stream)");
  return InvalidArgument(what);
}

}  // namespace gantry::monitor
