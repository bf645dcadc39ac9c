// The agent's web dashboard: static assets compiled into the binary
// (data/agent/dashboard/, no CDN, no framework) and a small JSON API that the
// page polls every few seconds.
//
//   agent::DashboardSources src;
//   src.latest = [&] { return collector.LatestSignals(); };
//   src.history = history.get();
//   src.firing_alerts = [&] { return evaluator.FiringJson(); };
//   src.health_json_path = "/var/lib/gantry/health.json";
//   src.checkpoint_roots = {"/mnt/ckpt"};
//   agent::RegisterDashboard(server, std::move(src));  // before server.Start()
//
// Routes (GET and HEAD; anything else 405; every error body is
// {"error": "..."}):
//   /                         index.html (also /index.html)
//   /static/<name>            app.js, style.css; any other name 404 (files are
//                             looked up in the compiled-in table only, so no
//                             request can reach the file system)
//   /api/v1/summary           {"time_ms", "now_ms", "hostname", "poll_seconds",
//                             "history" (bool), "history_resolution_s",
//                             "signals": [{"name", "labels": {..}, "value"}]}
//                             - the latest values (a NaN value is null)
//   /api/v1/series?name=N&since=S[&max_points=K]
//                             {"name", "from_ms", "to_ms", "series": [{"key",
//                             "labels", "points": [[t_ms, v], ...]}]} from
//                             History. `since`: a duration back from now
//                             ("15m", "1h", "7d") or an absolute Unix time in
//                             ms; default 1h. Series longer than max_points
//                             (default 600, at most 5000) are averaged into
//                             max_points buckets. No name: 400 listing the
//                             stored names. No history: 503.
//   /api/v1/alerts            {"alerts": [...]} (the provider's array; [] when
//                             none is configured)
//   /api/v1/health            {"status": "pass|warn|fail|error|unknown", ...}
//                             from the last `gantry health --json` output
//   /api/v1/checkpoints       {"roots": [...], "checkpoints": [{"root", "run",
//                             "step", "path", "committed_unix_s"}], newest
//                             first, "errors": [...]}
//
// Thread-safety: handlers run on the server's loop thread; the providers are
// called from it and must be thread-safe with respect to the agent's own
// threads and quick. The checkpoint listing is cached for 10 s so a large
// checkpoint root is not walked on every poll.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gantry/agent/history.h"
#include "gantry/agent/snapshot.h"
#include "gantry/core/clock.h"
#include "gantry/core/http_server.h"
#include "gantry/core/json.h"

namespace gantry::agent {

// The latest derived signals and when they were taken (Unix ms; 0 = none yet).
struct LatestSignals {
  int64_t time_ms = 0;
  std::vector<Signal> signals;
};

struct DashboardSources {
  // Latest signals; unset or time_ms 0 -> the summary says "no data yet".
  std::function<LatestSignals()> latest;
  // Not owned; must outlive the server. Null -> /api/v1/series answers 503.
  History* history = nullptr;
  // The firing alerts as a JSON array of Alertmanager-style objects
  // ({"labels": {...}, "annotations": {...}, "startsAt" or "starts_at_ms",
  // ...}); unset -> [].
  std::function<Json()> firing_alerts;
  // Where the last `gantry health --json` output is kept; empty or missing
  // file -> status "unknown" with the reason.
  std::string health_json_path;
  // Checkpoint roots (<root>/<run>/step-<N>/COMMITTED, the layout of
  // gantry/ckpt/manager.h); only committed steps are listed.
  std::vector<std::string> checkpoint_roots;
  size_t max_checkpoints = 20;
  // Shown in the page title; empty -> gethostname().
  std::string hostname;
  // Seconds between the page's polls (the page reads it from the summary).
  int poll_seconds = 3;
  const Clock* clock = &SystemClock();
};

// One committed checkpoint step.
struct CheckpointEntry {
  std::string root;
  std::string run;
  int64_t step = 0;
  std::string path;              // the step directory
  int64_t committed_unix_s = 0;  // mtime of its COMMITTED marker
};

// Committed steps under `roots`, newest commit first, at most `limit`.
// Unreadable roots are reported in *errors (one line each, naming the path)
// and skipped. Reads directory entries and marker mtimes only, never manifests.
std::vector<CheckpointEntry> ListCommittedCheckpoints(const std::vector<std::string>& roots,
                                                      size_t limit,
                                                      std::vector<std::string>* errors);

// The /api/v1/health body for the `gantry health --json` output at `path`.
Json HealthStatusJson(const std::string& path, const Clock& clock);

// The dashboard's routes as (prefix, handler) pairs; RegisterDashboard passes
// each to server.Handle. Exposed so tests can call handlers without sockets.
std::vector<std::pair<std::string, http::Handler>> DashboardRoutes(DashboardSources sources);

// Registers every route above on `server` (call before Start).
void RegisterDashboard(http::Server& server, DashboardSources sources);

}  // namespace gantry::agent
