// Pieces of the gateway shared by the request path (worker.h and the files
// it names), the lifecycle (server.cc) and the admin API (admin.cc). Not a
// public interface.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "anomaly.h"
#include "gantry/core/http_parser.h"
#include "gantry/core/metrics.h"
#include "gantry/gateway/config.h"
#include "gantry/gateway/limits.h"
#include "gantry/security/audit.h"
#include "gantry/security/jwt.h"
#include "gantry/security/key_store.h"
#include "gantry/security/rbac.h"
#include "pool.h"

namespace gantry::gateway::internal {

// Everything derived from one configuration; immutable once published, so
// workers read it without locks. A reload publishes a new one.
struct Runtime {
  GatewayConfig config;
  security::Policy policy;
  std::unique_ptr<security::JwtVerifier> jwt;  // null when JWT is off
};

// Metric handles that do not depend on per-request labels. The handles are
// set once at Create; the series behind them are atomics.
struct Metrics {
  metrics::Histogram* request_seconds = nullptr;
  metrics::Gauge* active_connections = nullptr;
  metrics::Counter* connections_total = nullptr;
  metrics::Counter* connections_rejected = nullptr;
  metrics::Gauge* redis_up = nullptr;
  metrics::Gauge* redis_configured = nullptr;
  metrics::Counter* redis_errors = nullptr;
  metrics::Counter* audit_records = nullptr;
  metrics::Counter* audit_dropped = nullptr;
  metrics::Counter* reloads_ok = nullptr;
  metrics::Counter* reloads_failed = nullptr;
  metrics::Gauge* keys_loaded = nullptr;
  metrics::Counter* tls_handshake_errors = nullptr;
};

// Process-wide state, shared by all workers (each on its own thread) and the
// threads that call Gateway's methods. Thread-safe as noted per member;
// members without a note are set before the workers start and then only read.
struct Shared {
  std::mutex mu;  // guards runtime, keys
  std::shared_ptr<const Runtime> runtime;
  std::shared_ptr<const security::KeyTable> keys;
  std::atomic<uint64_t> generation{1};  // bumped when runtime or keys change

  std::unique_ptr<security::KeyStore> key_store;  // internally locked
  std::unique_ptr<Limiter> limiter;               // thread-safe; one LimiterLoop per worker
  // Declared before `audit`, whose writer feeds it, so that it outlives the log.
  std::shared_ptr<monitor::LogsShipper> shipper;  // null unless azure_monitor.logs is set
  std::unique_ptr<security::AuditLog> audit;      // null when audit is off; Append is thread-safe
  std::unique_ptr<Balancer> balancer;  // pools, rollouts, drain (internally synchronised)
  // Output anomaly detection; null when `anomaly:` is absent. Replaced only
  // while workers are stopped; Reconfigure()d on reload.
  std::unique_ptr<AnomalyDetector> anomaly;
  metrics::Registry registry;  // thread-safe (series are atomics)
  Metrics m;
  std::atomic<int64_t> connections{0};
  std::atomic<bool> draining{false};
  std::string instance;  // random hex, prefix of request ids

  // Backends added through the admin API, laid over the file's configuration
  // (server.cc). edit_mu guards `base` and `added` and serialises Reload with
  // the admin API's pool changes, each of which builds and publishes a new
  // Runtime (the file's backends, then the added ones in the order they came).
  struct AddedBackend {
    std::string pool;
    BackendConfig backend;
  };
  std::mutex edit_mu;
  GatewayConfig base;  // the file's configuration as last loaded
  std::vector<AddedBackend> added;

  void Publish(std::shared_ptr<const Runtime> rt, std::shared_ptr<const security::KeyTable> kt) {
    std::lock_guard<std::mutex> lock(mu);
    if (rt) runtime = std::move(rt);
    if (kt) keys = std::move(kt);
    generation.fetch_add(1, std::memory_order_release);
  }
};

// Who is calling, once authenticated.
struct Identity {
  std::string_view kind;  // "api_key", "jwt", "anonymous" (static strings)
  std::string key_id;     // API key id, or JWT subject
  std::vector<std::string> roles;
};

// A response produced inside the gateway (errors, admin API, health).
struct LocalResponse {
  int status = 200;
  std::string_view content_type = "application/json";  // a static string
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// {"error":{"code":...,"message":...,"type":...}} — the OpenAI error shape,
// which clients of OpenAI-compatible servers already parse (session.cc).
LocalResponse ErrorResponse(int status, std::string_view code, std::string_view message);

// Escapes `s` as the inside of a JSON string (access_log.cc): '"', '\\',
// \n, \r and \t as two-character escapes, other control bytes as \u00XX,
// everything else (UTF-8 included) as it is.
void AppendJsonEscaped(std::string_view s, std::string* out);
// The same bytes written at `out`, which must have room for 6 * s.size()
// bytes; returns the end of what it wrote. Sets *non_ascii (when given) if `s`
// holds a byte >= 0x80, and leaves it alone otherwise.
char* EscapeJsonTo(std::string_view s, char* out, bool* non_ascii = nullptr);

// server.cc: pool changes of the admin API. AddPoolBackend appends `backend`
// to tier 0 of `pool` (NotFound for an unknown pool, AlreadyExists for a name
// that a backend or pool has); RemovePoolBackend takes out a backend added
// that way (NotFound; FailedPrecondition for one from gateway.yaml, or one
// with requests in flight unless `force`). Both publish a new Runtime;
// requests in flight keep the one they started with, so a removed backend's
// configuration lives until they finish.
Status AddPoolBackend(Shared& shared, std::string_view pool, BackendConfig backend);
Status RemovePoolBackend(Shared& shared, std::string_view pool, std::string_view name, bool force);

// admin.cc: handles /admin/... for an authenticated identity. `req` and
// `body` are the client's request.
LocalResponse HandleAdmin(Shared& shared, const Runtime& rt, const Identity& who,
                          const http::RequestHead& req, std::string_view body);

}  // namespace gantry::gateway::internal
