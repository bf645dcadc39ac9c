// `gantry agent`: the service that composes the collectors, the local
// History, alert rules, notifications, idle detection and the dashboard behind
// one HTTP server.
//
//   ASSIGN_OR_RETURN(AgentConfig cfg, LoadAgentConfig("agent.yaml"));   // "" = defaults
//   ASSIGN_OR_RETURN(std::unique_ptr<Agent> agent, Agent::Create(cfg));
//   RETURN_IF_ERROR(agent->Start());       // binds, starts the collection thread
//   ... agent->port() ...; agent->Stop();
//
// agent.yaml (every key optional; defaults shown):
//   listen: ":9500"                 # HOST:PORT, :PORT, [IPV6]:PORT
//   hostname: ""                    # "" = gethostname(); the DCGM Hostname label
//   collection:
//     interval: 15s                 # the collection loop: signals -> history, rules, idle
//     cache: 15s                    # /metrics serves a snapshot up to this old and collects
//                                   # anew only when it is older (0 = on every scrape);
//                                   # default: the interval
//     root: /                       # where /proc and /sys are read (e.g. /host in a container)
//     gpu: true                     # NVML metrics when a driver is found
//     nvml_library: ""              # "" = $GANTRY_NVML_LIBRARY or libnvidia-ml.so.1
//     collectors:                   # node_exporter's collector switches over its defaults:
//       textfile: true              #   NAME: true  = --collector.NAME
//       netclass: false             #   NAME: false = --no-collector.NAME
//                                   # names: NodeExporterCollectors() (docs/agent.md); an
//                                   # unknown name is an error
//     textfile_directory: ""        # --collector.textfile.directory: *.prom files served
//   history:
//     path: ""                      # "" = /var/lib/gantry/agent/history.db as root, else
//                                   # ~/.local/state/gantry/agent/history.db; ":memory:" = none on
//                                   disk
//     resolution: 15s
//     retention: 30d
//   alerts:
//     rules_file: ""                # a rules file (gantry/agent/rules.h), and/or
//     rules: [...]                  # rules inline
//   notify: {...}                   # gantry/alerting/notify.h
//   idle: {...}                     # gantry/agent/idle.h (absent = disabled)
//   dashboard:
//     enabled: true
//     health_json: ""               # the last `gantry health --json` output
//     checkpoint_roots: []
//     poll_seconds: 3
//
// HTTP: GET /metrics (Prometheus text 0.0.4, or OpenMetrics 1.0.0 when the
// Accept header asks for it), GET /healthz ({"status":"ok",...}), the
// dashboard at / and /api/v1/... (gantry/agent/dashboard.h).
//
// Threads: the HTTP loop (scrapes, dashboard), the collection loop, the
// notifier's delivery thread. A scrape that finds the cached snapshot stale
// collects under the same lock the loop uses, so collectors only ever run on
// one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gantry/agent/collector.h"
#include "gantry/agent/dashboard.h"
#include "gantry/agent/history.h"
#include "gantry/agent/idle.h"
#include "gantry/agent/rules.h"
#include "gantry/alerting/notify.h"
#include "gantry/core/clock.h"
#include "gantry/core/status.h"
#include "gantry/monitor/shipper.h"

namespace gantry::agent {

// Alerting building blocks live in gantry/alerting (shared with the gateway).
using alerting::Alert;
using alerting::Notifier;
using alerting::NotifyConfig;
using alerting::ParseNotifyConfig;
using alerting::Sink;

struct AgentConfig {
  std::string origin = "<defaults>";  // the config file, for messages
  std::string listen = ":9500";
  std::string hostname;
  std::chrono::milliseconds interval{15000};
  std::chrono::milliseconds cache{15000};
  std::string root = "/";
  bool gpu = true;
  std::string nvml_library;
  std::vector<std::pair<std::string, bool>> collectors;  // collection.collectors, in file order
  std::string textfile_directory;
  std::string history_path;  // "" = the default location (see above)
  HistoryOptions history;
  std::vector<Rule> rules;
  NotifyConfig notify;
  IdleConfig idle;  // enabled = false unless the section exists
  bool dashboard = true;
  std::string health_json;
  std::vector<std::string> checkpoint_roots;
  int poll_seconds = 3;
  // azure_monitor.logs (monitor/shipper.h): the agent's alert notifications
  // also go to Log Analytics, one row per alert (monitor/alert_sink.h).
  std::optional<monitor::LogsShipperOptions> azure_monitor_logs;
};

// Parses agent.yaml (above). Unknown keys, bad durations, a zero interval or
// resolution, and the errors of the rules/notify/idle parsers are
// InvalidArgument naming file, line and key. `path` "" gives the defaults.
Result<AgentConfig> LoadAgentConfig(const std::string& path);
Result<AgentConfig> ParseAgentConfig(std::string_view yaml_text, std::string_view origin);

// Where the history lives when history.path is "" (root vs. user).
std::string DefaultHistoryPath();

class Agent {
 public:
  // Builds the collectors (a missing NVML only logs: the agent runs without
  // GPU metrics), opens the History (creating its directory) and the
  // notifier. Errors name the file or setting at fault.
  static Result<std::unique_ptr<Agent>> Create(const AgentConfig& config,
                                               const Clock& clock = SystemClock());
  ~Agent();  // Stop()
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Binds `listen` and starts the HTTP loop and the collection loop (which
  // collects at once, then every interval).
  Status Start();
  // Stops both loops and flushes notifications for up to 5 s. Idempotent.
  void Stop();
  uint16_t port() const;

  // One tick of the collection loop now, on the caller's thread (tests, and
  // the loop itself): collect, derive signals, append to History, evaluate
  // rules, notify, update idle detection.
  void Tick();

  // The /metrics body a scrape with this format would get now.
  std::string RenderMetrics(ExpositionFormat format);

  LatestSignals Latest() const;
  History* history() const;
  const AgentConfig& config() const;
  bool has_gpu_metrics() const;
  IdleStatus idle_status() const;  // state kActive when idle detection is off

  struct Stats {
    uint64_t ticks = 0;        // collection-loop ticks
    uint64_t scrapes = 0;      // /metrics requests
    uint64_t collections = 0;  // collector runs (ticks + stale scrapes)
  };
  Stats stats() const;

 private:
  struct Impl;
  explicit Agent(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry::agent
