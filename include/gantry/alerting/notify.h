// Alert notifications of `gantry agent`: an Alert value (filled by the rules
// evaluator and by idle detection), sinks that deliver alerts (an
// Alertmanager-compatible webhook, a real Alertmanager's API, the log, a
// command hook) and a Notifier that fans each batch out to every configured
// sink on its own thread, so that a slow webhook never delays collection.
//
//   ASSIGN_OR_RETURN(NotifyConfig nc, ParseNotifyConfig(config, "notify"));
//   ASSIGN_OR_RETURN(std::unique_ptr<Notifier> notifier, Notifier::Create(nc));
//   notifier->Notify({alert});  // returns at once
//
// agent.yaml:
//   notify:
//     receiver: gantry              # "receiver" of webhook payloads
//     external_url: http://10.0.0.4:9500   # "externalURL"; default http://<hostname>:9500
//     group_by: [alertname]         # labels that group alerts into one webhook payload
//     sinks:
//       - type: webhook             # Alertmanager webhook v4 JSON (webhook_config receivers)
//         url: http://127.0.0.1:5001/hook
//         timeout: 5s               # per attempt
//         retries: 2                # further attempts after a failure (connect error, 5xx, 429)
//         retry_backoff: 500ms      # doubled each retry
//         send_resolved: true
//         max_alerts: 0             # 0 = all; the rest are counted in truncatedAlerts
//         headers: {Authorization: "Bearer ..."}
//       - type: alertmanager        # a real Alertmanager: POST <url>/api/v2/alerts
//         url: http://127.0.0.1:9093
//         resend_interval: 1m       # firing alerts are re-posted this often (0 = never)
//       - type: log                 # one line per alert via spdlog
//       - type: command             # argv; the payload JSON on stdin, GANTRY_ALERT_* env vars
//         command: [/usr/local/bin/page-oncall, --team, ml]
//         timeout: 10s
//
// Thread-safety: Notifier::Notify/Flush/stats may be called from any thread.
// Sinks are used from the Notifier's thread only (one Send at a time).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gantry/core/clock.h"
#include "gantry/core/config.h"
#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry::alerting {

// One alert as Alertmanager models it. `labels` identify it (and should carry
// "alertname"); `annotations` describe it ("summary", "description").
struct Alert {
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  bool firing = true;         // false: resolved
  int64_t starts_at_ms = 0;   // Unix ms; 0 = unknown (sent as the send time)
  int64_t ends_at_ms = 0;     // Unix ms; 0 = not ended (sent as Go's zero time while firing)
  std::string generator_url;  // e.g. http://host:9500/#alerts
  double value = 0;  // the value that triggered it (GANTRY_ALERT_VALUE; not in the webhook)
};

// Alertmanager's identity of a label set: 64-bit FNV-1a over the label names
// in sorted order, each name and value followed by a 0xff byte, as 16 lower
// case hex digits (what Alertmanager puts in "fingerprint").
std::string Fingerprint(const std::map<std::string, std::string>& labels);

// Unix ms as RFC 3339 in UTC with milliseconds ("2027-01-15T08:00:00.250Z");
// 0 gives Go's zero time "0001-01-01T00:00:00Z" as Alertmanager sends it.
std::string FormatRfc3339(int64_t unix_ms);

// What every webhook payload shares.
struct WebhookMeta {
  std::string receiver = "gantry";
  std::string external_url;           // "externalURL"
  std::vector<std::string> group_by;  // labels that form groupLabels/groupKey
  int max_alerts = 0;                 // 0 = all
};

// Splits `alerts` into groups by the values of `meta.group_by` (alerts that
// share them are one group, in first-seen order; an empty group_by makes one
// group) and builds one Alertmanager webhook v4 payload per group:
//   {"receiver","status","alerts":[{"status","labels","annotations","startsAt",
//    "endsAt","generatorURL","fingerprint"}],"groupLabels","commonLabels",
//    "commonAnnotations","externalURL","version":"4","groupKey","truncatedAlerts"}
// status is "firing" when any alert of the group fires, else "resolved".
// `now_ms` replaces a zero starts_at_ms (and a zero ends_at_ms of a resolved alert).
std::vector<Json> WebhookPayloads(const std::vector<Alert>& alerts, const WebhookMeta& meta,
                                  int64_t now_ms);

// The body of Alertmanager's POST /api/v2/alerts (a JSON array of postable
// alerts: labels, annotations, startsAt, endsAt, generatorURL). A firing
// alert without ends_at_ms gets `firing_ends_at_ms` as endsAt, or none when
// that is 0 (then Alertmanager's resolve_timeout applies).
Json AlertmanagerApiPayload(const std::vector<Alert>& alerts, int64_t now_ms,
                            int64_t firing_ends_at_ms = 0);

enum class SinkType { kWebhook, kAlertmanager, kLog, kCommand };

struct SinkConfig {
  SinkType type = SinkType::kLog;
  std::string name;  // for messages: "webhook[0]" etc. unless set with `name:`
  // webhook, alertmanager
  std::string url;  // plain http to a numeric host (see core/http_client.h)
  std::vector<std::pair<std::string, std::string>> headers;
  int retries = 2;
  std::chrono::milliseconds retry_backoff{500};
  int max_alerts = 0;
  // alertmanager: like Prometheus, firing alerts are posted again every
  // resend_interval with endsAt = now + 4 * resend_interval, so Alertmanager
  // keeps them while the agent runs and resolves them if the agent dies.
  // 0: posted once, without endsAt.
  std::chrono::milliseconds resend_interval{60000};
  // webhook, alertmanager, command
  std::chrono::milliseconds timeout{5000};
  bool send_resolved = true;
  // command
  std::vector<std::string> command;
};

struct NotifyConfig {
  WebhookMeta meta;
  std::vector<SinkConfig> sinks;  // empty: nothing is sent anywhere
  size_t queue_capacity = 256;    // batches waiting; beyond it the oldest is dropped
};

// Parses the map at `key` of `config` (the `notify:` section of agent.yaml);
// an absent key gives the defaults (no sinks). Errors are InvalidArgument
// naming file, line and key: unknown keys, an unknown sink type (listing the
// valid ones), a webhook without url or with a url http_client cannot reach
// (https, a host name), a command sink without command, negative retries.
Result<NotifyConfig> ParseNotifyConfig(const Config& config, std::string_view key = "notify");

// Delivers one batch. Called from one thread at a time.
class Sink {
 public:
  virtual ~Sink() = default;
  virtual const std::string& name() const = 0;
  // `now_ms` is the wall time of the send. An error names the sink and target.
  virtual Status Send(const std::vector<Alert>& alerts, int64_t now_ms) = 0;
  // Sinks that repeat firing alerts say how often (0 = never); the Notifier
  // then calls Resend at least that often (real time) when it has nothing
  // queued, and the sink decides what is due.
  virtual std::chrono::milliseconds resend_interval() const { return std::chrono::milliseconds(0); }
  virtual Status Resend(int64_t /*now_ms*/) { return Status::Ok(); }
};

// The sink a SinkConfig describes. Errors as ParseNotifyConfig's for a config
// built by hand.
Result<std::unique_ptr<Sink>> MakeSink(const SinkConfig& sink, const WebhookMeta& meta);

// Result of RunCommand.
struct CommandResult {
  int exit_code = 0;  // 128 + signal when killed by a signal
  bool timed_out = false;
  std::string output;  // stdout and stderr together, at most 64 KiB
};

// Runs argv (argv[0] searched in $PATH; no shell) with `stdin_text` on its
// stdin and the current environment plus `env`, in a process group of its own
// that is killed (SIGKILL) when it runs longer than `timeout`. Used by the
// command sink and the idle action. Errors: InvalidArgument for an empty argv,
// Unavailable naming the program when it cannot be started. A non-zero exit
// or a timeout is a successful run (see the result).
Result<CommandResult> RunCommand(const std::vector<std::string>& argv, std::string_view stdin_text,
                                 const std::vector<std::pair<std::string, std::string>>& env,
                                 std::chrono::milliseconds timeout);

class Notifier {
 public:
  // Builds the sinks of `config` and starts the delivery thread.
  // `extra` sinks (built by modules above alerting, such as the Azure Monitor
  // sink) are added after the configured ones.
  static Result<std::unique_ptr<Notifier>> Create(const NotifyConfig& config,
                                                  const Clock& clock = SystemClock(),
                                                  std::vector<std::unique_ptr<Sink>> extra = {});
  // With ready-made sinks (tests, embedding).
  Notifier(std::vector<std::unique_ptr<Sink>> sinks, size_t queue_capacity,
           const Clock& clock = SystemClock());
  // Stops the thread: a batch being sent finishes; queued batches are dropped
  // (call Flush first to deliver them).
  ~Notifier();
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  // Queues a batch for every sink and returns at once. An empty batch is
  // ignored; with a full queue the oldest batch is dropped (counted, logged).
  void Notify(std::vector<Alert> alerts);

  // Waits until every batch queued so far has been handed to every sink, or
  // `timeout` passes (real time). True when everything was delivered or failed.
  bool Flush(std::chrono::milliseconds timeout);

  struct Stats {
    uint64_t batches = 0;  // batches accepted by Notify
    uint64_t sent = 0;     // (batch, sink) deliveries that succeeded
    uint64_t failed = 0;   // ... that failed after retries (logged as warnings)
    uint64_t dropped = 0;  // batches dropped because the queue was full
  };
  Stats stats() const;

  size_t sink_count() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gantry::alerting
