// A client of the Azure Monitor Logs Ingestion API: records (JSON objects)
// posted to a data collection rule's stream, which lands them in a Log
// Analytics table.
//
//   POST {endpoint}/dataCollectionRules/{rule_id}/streams/{stream}?api-version=2023-01-01
//   Authorization: Bearer <token for https://monitor.azure.com>
//   Content-Type: application/json
//   Content-Encoding: gzip            (when gzip is on; the body is then gzip'd)
//   [{"TimeGenerated":"...",...},...]  -> 204 No Content
//
// The API refuses a call over 1 MB (compressed or not) with 413, so records
// are cut into calls whose JSON array is at most max_batch_bytes before
// compression (the compressed body is then smaller still); a 413 anyway (a
// lower limit than documented) halves the call. 429 and 5xx (and 408, and
// transport errors) are retried after Retry-After / retry-after-ms /
// x-ms-retry-after-ms when the service sent one, else after an exponential
// backoff, up to max_attempts per call.
//
//   ASSIGN_OR_RETURN(auto client, monitor::LogsIngestionClient::Create(options,
//   std::move(tokens))); monitor::UploadOutcome out = client->Upload(records);
//   // out.delivered records (a prefix) were accepted; out.status says why the rest were not.
//
// Thread-safety: Upload may be called from one thread at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "gantry/core/clock.h"
#include "gantry/core/https_client.h"
#include "gantry/core/status.h"
#include "gantry/security/azure_credential.h"

namespace gantry::monitor {

inline constexpr char kLogsIngestionApiVersion[] = "2023-01-01";
// The audience of the tokens the Logs Ingestion API accepts.
inline constexpr char kLogsIngestionResource[] = "https://monitor.azure.com";
// The documented limit of one call (Azure Monitor service limits, Logs
// Ingestion API: 1 MB per call, compressed or not).
inline constexpr size_t kMaxCallBytes = 1'000'000;

struct LogsIngestionOptions {
  // The data collection endpoint (or the DCR's own logs ingestion endpoint),
  // e.g. https://my-dce-abcd.westeurope-1.ingest.monitor.azure.com.
  std::string endpoint;
  std::string rule_id;  // the DCR's immutable id, "dcr-0123..."
  std::string stream;   // the DCR's input stream, "Custom-GantryAudit_CL"
  std::string api_version = kLogsIngestionApiVersion;
  bool gzip = true;
  // The JSON array of one call, before compression; 1..kMaxCallBytes.
  size_t max_batch_bytes = kMaxCallBytes;
  std::chrono::milliseconds timeout{30'000};         // one call
  int max_attempts = 5;                              // per call, the first included
  std::chrono::milliseconds retry_backoff{1'000};    // first wait without Retry-After; doubled
  std::chrono::milliseconds max_retry_wait{60'000};  // a longer Retry-After is cut to this
  http::TlsOptions tls;
  // How a retry waits: returns false when the wait was cut short (shutdown),
  // and Upload then stops. Default: the clock's SleepFor (always true).
  std::function<bool(std::chrono::milliseconds)> wait;
};

struct UploadOutcome {
  size_t delivered = 0;  // the first `delivered` records were accepted (2xx)
  size_t calls = 0;      // HTTP requests made, retries included
  // OK when all were delivered. Otherwise (naming the URL and the status):
  //   InvalidArgument   400 and other 4xx the service will not take on retry
  //                     (the records at `delivered` are malformed for the stream),
  //                     or one record alone over max_batch_bytes / refused with 413
  //   PermissionDenied  401/403 (the identity lacks "Monitoring Metrics Publisher"
  //                     on the DCR) or the token source refused
  //   Unavailable / ResourceExhausted / DeadlineExceeded   retries ran out (5xx, 429,
  //                     transport), or the wait was cut short
  //   NotFound          404 (wrong rule id, stream or endpoint)
  Status status;
};

class LogsIngestionClient {
 public:
  // InvalidArgument naming the field: an endpoint that is not http(s)://,
  // an empty rule_id or stream, max_batch_bytes out of range, max_attempts < 1.
  static Result<std::unique_ptr<LogsIngestionClient>> Create(
      LogsIngestionOptions options, std::unique_ptr<security::TokenSource> tokens,
      const Clock& clock = SystemClock());

  // Sends `records` (each one JSON object text, no newline) in order, in as
  // few calls as the bound allows; stops at the first call that fails for
  // good. Records are not parsed: the caller vouches they are JSON objects.
  UploadOutcome Upload(std::span<const std::string> records);

  // The POST URL (for messages and tests).
  const std::string& url() const { return url_; }
  const LogsIngestionOptions& options() const { return options_; }

 private:
  LogsIngestionClient(LogsIngestionOptions options, std::unique_ptr<security::TokenSource> tokens,
                      const Clock& clock);
  // One call for records [begin, end), retried; 413 splits it.
  Status SendRange(std::span<const std::string> records, UploadOutcome& out);
  Status SendOnce(std::span<const std::string> records, UploadOutcome& out, bool* too_large);

  LogsIngestionOptions options_;
  std::unique_ptr<security::TokenSource> tokens_;
  const Clock& clock_;
  std::string url_;
  std::chrono::milliseconds retry_after_{0};  // what the last retriable answer asked for
};

// The JSON array of `records` as sent ("[" r0 "," r1 ... "]").
std::string JsonArray(std::span<const std::string> records);
// gzip (RFC 1952) of `data`; Internal only if zlib fails.
Result<std::string> Gzip(std::string_view data);
// The inverse (tests, the recording server's check). DataLoss for bad input.
Result<std::string> Gunzip(std::string_view data);
// How long the service asked to wait, from Retry-After (seconds; an HTTP date
// is not honoured and gives 0), retry-after-ms or x-ms-retry-after-ms; 0 when none.
std::chrono::milliseconds RetryAfter(const http::Response& response);

}  // namespace gantry::monitor
