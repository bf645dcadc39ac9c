// Ships records to Azure Monitor (Logs Ingestion API) from a local spool, at
// least once, without ever making the producer wait on the network.
//
//   producer --Append--> memory queue --writer thread--> Spool (fsync'd)
//                                                          |
//                         sender thread: Peek -> Upload -> Ack (cursor)
//
// Append only copies the record into a bounded memory queue (beyond
// max_queue_bytes it is dropped and counted: a producer is never blocked,
// not even on the disk). The writer thread appends what is queued to the
// spool in groups, one fsync per group. The sender thread reads a batch at
// the spool's cursor, uploads it and moves the cursor past what the service
// accepted (2xx). When the endpoint is down or throttling the spool fills up
// to max_spool_bytes and then loses its oldest records (counted, logged);
// the sender retries every retry_interval. A batch the service refuses as
// malformed (400) is skipped, counted as rejected and logged.
//
// Delivery is at-least-once: after a crash (or a lost response) the batch
// that was in flight is sent again. Every record should therefore carry its
// own id (audit records: RecordId) so that KQL can de-duplicate
// (`summarize arg_max(TimeGenerated, *) by RecordId`). See docs/azure-monitor.md.
//
// Configuration (gateway.yaml and others):
//   azure_monitor:
//     logs:
//       endpoint: https://my-dce-abcd.westeurope-1.ingest.monitor.azure.com
//       rule_id: dcr-00000000000000000000000000000000   # the DCR's immutable id
//       stream: Custom-GantryAudit_CL
//       spool_dir: /var/lib/gantry/monitor-spool         # one per process
//       max_spool_bytes: 256M
//       gzip: true
//       max_batch_bytes: 1000000     # JSON per call before gzip; at most 1000000
//       flush_interval: 1s           # how long records gather before a call
//       retry_interval: 5s           # after a failed call (Retry-After is honoured within it)
//       timeout: 30s                 # one call
//       credential:                  # exactly one; default managed identity
//         managed_identity: true     # [client_id: ...] for a user-assigned one
//         # tenant_id / client_id / client_secret_env   (a service principal)
//         # token_env: AZURE_MONITOR_TOKEN              (a token in a variable)
//
// Thread-safety: Append, Flush and stats may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gantry/core/clock.h"
#include "gantry/core/config.h"
#include "gantry/core/status.h"
#include "gantry/monitor/logs_ingestion.h"
#include "gantry/security/azure_credential.h"

namespace gantry::monitor {

struct LogsShipperOptions {
  LogsIngestionOptions logs;  // `wait` is set by the shipper
  // The identity; `resource` is forced to https://monitor.azure.com.
  security::AzureCredentialOptions credential;
  std::string spool_dir;
  uint64_t max_spool_bytes = 256ull << 20;
  bool fsync = true;
  size_t max_queue_bytes = 16u << 20;  // records waiting for the writer thread
  std::chrono::milliseconds flush_interval{1'000};
  std::chrono::milliseconds retry_interval{5'000};
};

// The `logs` block at `<key>.logs` of `config`, or nullopt when `key` is
// absent. InvalidArgument naming file:line:key for unknown keys (with a
// suggestion), a missing endpoint/rule_id/stream/spool_dir, an endpoint that
// is not https://, bounds out of range, or not exactly one credential. A
// relative spool_dir is resolved against `base_dir` when that is non-empty.
Result<std::optional<LogsShipperOptions>> ParseAzureMonitorLogs(
    const Config& config, std::string_view key = "azure_monitor", std::string_view base_dir = "");

class LogsShipper {
 public:
  // Opens (or resumes) the spool and starts the writer and sender threads.
  // Errors: those of the spool (naming its directory) and of the client and
  // credential options (InvalidArgument). Nothing is sent before the first
  // record arrives; a credential that does not work shows in the logs and in
  // stats().failed_calls, never as a blocked producer.
  static Result<std::unique_ptr<LogsShipper>> Start(LogsShipperOptions options,
                                                    const Clock& clock = SystemClock());
  // Stops both threads: what is queued in memory is written to the spool
  // first (so a restart sends it); a call in flight is finished; no new call
  // is started.
  ~LogsShipper();
  LogsShipper(const LogsShipper&) = delete;
  LogsShipper& operator=(const LogsShipper&) = delete;

  // `record` is one JSON object text without a newline (InvalidArgument
  // logged and counted as rejected otherwise). Never blocks on I/O.
  void Append(std::string record);

  // Waits until everything appended before the call has been accepted by the
  // service (or rejected as malformed), or `timeout` passes (real time). True
  // when nothing is left to send. Does not wait out flush_interval.
  bool Flush(std::chrono::milliseconds timeout);

  struct Stats {
    uint64_t appended = 0;       // records given to Append
    uint64_t queue_dropped = 0;  // dropped because the memory queue was full
    uint64_t spool_dropped = 0;  // lost to the spool's bound (oldest first)
    uint64_t spool_errors = 0;   // records lost because the spool could not be written
    uint64_t sent = 0;           // accepted by the service (2xx)
    uint64_t rejected = 0;       // refused as malformed (400) or too large, not retried
    uint64_t failed_calls = 0;   // uploads that failed after their retries
    uint64_t pending = 0;        // in the spool, not yet accepted
  };
  Stats stats() const;

  const std::string& url() const;

 private:
  struct Impl;
  explicit LogsShipper(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The Log Analytics row for one line of a hash-chained audit log
// (security/audit.h): the line itself, byte for byte, plus the columns a KQL
// query needs to check the chain without parsing it:
//   {"TimeGenerated","Computer","Source","AuditLog","Kind":"record"|"checkpoint",
//    "Seq","Prev","Hash","RecordId","Line"}
// For a checkpoint Seq is its count and Hash its head; RecordId is
// "<Computer>|<AuditLog>|<Kind>|<Seq>", unique per line of a log. Empty when
// `line` is neither a record nor a checkpoint.
std::string AuditRow(std::string_view line, std::string_view source, std::string_view computer,
                     std::string_view audit_log, std::chrono::system_clock::time_point now);

// Feeds an audit log's written lines (security::AuditOptions::on_written) to
// `shipper` as AuditRow rows. The callable keeps the shipper alive.
std::function<void(std::string_view)> AuditForwarder(std::shared_ptr<LogsShipper> shipper,
                                                     std::string source, std::string audit_log,
                                                     const Clock& clock = SystemClock());

}  // namespace gantry::monitor
