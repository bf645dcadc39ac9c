// gateway.yaml: everything `gantry gateway run` serves, parsed and validated
// into plain structs. docs/gateway.md documents every key; errors name the
// file, line and key at fault ("gateway.yaml:12:14: key 'routes.0.backend':
// unknown backend 'llm2' (backends: llm, static)").
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/gateway/anomaly_config.h"
#include "gantry/gateway/limits.h"
#include "gantry/monitor/shipper.h"
#include "gantry/security/jwt.h"
#include "gantry/security/rbac.h"

namespace gantry::gateway {

enum class Protocol { kOpenAi, kKserve, kHttp };
std::string_view ProtocolName(Protocol p);

struct ServerLimits {
  uint64_t max_header_bytes = 16 << 10;
  uint64_t max_body_bytes = 8 << 20;
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds body_timeout{60'000};
  std::chrono::milliseconds idle_timeout{60'000};
  // Each write to a client (nginx's send_timeout): a client that stops
  // reading a stream frees its backend connection after this.
  std::chrono::milliseconds send_timeout{60'000};
  std::chrono::milliseconds upstream_connect_timeout{2'000};
  // Time to the first response byte, and between bytes of a streamed body.
  std::chrono::milliseconds upstream_timeout{300'000};
  uint64_t max_connections = 10'000;
};

struct BackendConfig {
  std::string name;
  std::string host;  // numeric address or "localhost"
  uint16_t port = 80;
  std::string host_header;  // "host:port" sent upstream
  uint32_t max_idle = 64;   // pooled keep-alive connections per worker
  std::string zone;         // availability zone label; empty: none
  uint32_t weight = 1;      // share under weighted balancing (1..1000)
  // Circuit breaker: requests in flight to this backend across all workers;
  // beyond it the backend counts as saturated. 0: no limit.
  uint32_t max_concurrent = 0;
  // Added through the admin API (POST /admin/pools/{pool}/backends), not from
  // gateway.yaml. Such a backend starts unhealthy in a pool with health checks
  // and takes traffic once one check passes; it survives reloads while its
  // pool exists and its name is not taken by the file.
  bool added_at_runtime = false;
};

// How a pool spreads requests over the available backends of a tier.
enum class Balance { kLeastRequest, kRoundRobin, kWeighted };
std::string_view BalanceName(Balance b);

// Active health checks: GET `path` on every backend of the pool every
// `interval`; `unhealthy_threshold` failures in a row (a non-2xx status, a
// timeout, a refused connection) mark a backend unhealthy, and
// `healthy_threshold` successes in a row mark it healthy again (and end an
// outlier ejection, as in Envoy).
struct HealthCheckConfig {
  bool enabled = false;
  std::string path = "/health";
  std::chrono::milliseconds interval{5'000};
  std::chrono::milliseconds timeout{1'000};
  uint32_t healthy_threshold = 2;
  uint32_t unhealthy_threshold = 3;
};

// Passive outlier ejection (Envoy's outlier detection): a backend that gives
// `consecutive_5xx` 5xx answers or `consecutive_gateway_errors` gateway errors
// (connect failures, resets, timeouts, 502/503/504) in a row is ejected for
// base_ejection * (times ejected), at most max_ejection. At most
// max_ejection_percent of a pool's backends are ejected at once, but at least
// one may always be.
struct OutlierConfig {
  bool enabled = true;
  uint32_t consecutive_5xx = 5;
  uint32_t consecutive_gateway_errors = 5;
  std::chrono::milliseconds base_ejection{30'000};
  std::chrono::milliseconds max_ejection{300'000};
  uint32_t max_ejection_percent = 10;
};

// Retries. A request is retried (on another backend when there is one) after
// a failure before any response byte reached the client: always after a
// connect failure (nothing was sent); after a reset, a timeout or a 5xx only
// when the route is `idempotent` or the method is (GET, HEAD, OPTIONS, PUT,
// DELETE). Retries in flight are capped by a budget: budget_percent of the
// requests in flight to the pool, but at least min_retry_concurrency. The wait
// before retry n (1-based) is uniform in
// [0, min(backoff_max, backoff_base * 2^(n-1))).
struct RetryConfig {
  uint32_t attempts = 1;  // retries after the first try; 0: none
  double budget_percent = 20;
  uint32_t min_retry_concurrency = 3;
  std::chrono::milliseconds backoff_base{25};
  std::chrono::milliseconds backoff_max{250};
};

// One priority tier of a pool. Tier 0 is the primary; later tiers serve only
// when no backend of an earlier tier can (ejected, unhealthy, draining or at
// max_concurrent), and their answers carry `X-Gantry-Degraded`.
struct TierConfig {
  std::vector<size_t> backends;  // indexes into GatewayConfig::backends
  std::string model;             // rewrite the request's model to this; empty: keep
};

// Scale from zero (`scale_from_zero:` of a pool): while no backend of the pool
// is available (none configured, or none up), new requests are held instead
// of shed: at most `hold` per pool (across workers), each at most
// `hold_timeout`. While anything is held the gateway POSTs `wake` (at most
// once per second, from a thread of its own; failures are logged). Held
// requests are released in arrival order once a backend is available; the
// others get 503 with Retry-After `retry_after_s`.
struct ScaleFromZeroConfig {
  bool enabled = false;
  uint32_t hold = 64;
  std::chrono::milliseconds hold_timeout{60'000};
  std::string wake;  // http://host:port/path; empty: nothing is called
  uint32_t retry_after_s = 5;
};

struct PoolConfig {
  std::string name;
  Balance balance = Balance::kLeastRequest;
  // Prefer backends in the gateway's zone while one of them is available;
  // spill over to the tier's other zones otherwise.
  bool zone_aware = true;
  std::vector<TierConfig> tiers;
  HealthCheckConfig health;
  OutlierConfig outlier;
  RetryConfig retry;
  // Requests that find every tier saturated wait up to pending_timeout for a
  // slot, at most max_pending of them per pool; others are shed with 503.
  uint32_t max_pending = 0;
  std::chrono::milliseconds pending_timeout{0};
  // Retry-After (seconds) on a 503 when nothing can serve.
  uint32_t shed_retry_after_s = 5;
  // With it, tiers may have no backend in gateway.yaml (they are added through
  // the admin API, e.g. by `gantry autoscale`).
  ScaleFromZeroConfig scale_from_zero;
  // A pool made for a route that names a single `backend:` (no health checks,
  // no ejection, no retries beyond a stale pooled connection).
  bool implicit = false;
};

// Where a route (or a model rule) sends requests: a pool, or a rollout that
// splits traffic between pools by weight.
struct Target {
  enum class Kind { kPool, kRollout };
  Kind kind = Kind::kPool;
  size_t index = 0;  // into GatewayConfig::pools or ::rollouts
};

struct RolloutTarget {
  size_t pool = 0;
  uint32_t weight = 0;
};

// A weighted split between pools (canary, A/B; blue-green is 100/0). The
// weights here are the configured start; the admin API changes them at run
// time (`gantry gateway rollout`).
struct RolloutConfig {
  std::string name;
  std::vector<RolloutTarget> targets;
  enum class Sticky { kNone, kKey, kHeader };
  // kKey: the same caller (API key id or JWT subject) always lands on the same
  // target while the weights stay; kHeader: the same value of sticky_header.
  Sticky sticky = Sticky::kNone;
  std::string sticky_header;
};

struct ModelRoute {
  std::string match;  // glob on the model name
  Target target;
};

// Feature limits applied to requests served by a fallback tier.
struct DegradedLimits {
  uint64_t max_tokens = 0;   // cap max_tokens / max_completion_tokens; 0: none
  bool allow_stream = true;  // false: streamed requests get 503 while degraded
};

struct RouteConfig {
  std::string name;    // `name:` or the path/prefix; RBAC resource of http routes
  std::string path;    // exact match when non-empty
  std::string prefix;  // prefix match otherwise
  Protocol protocol = Protocol::kHttp;
  Target target;
  std::vector<ModelRoute> models;
  bool auth_required = true;
  // Time to the first response byte and between body bytes; 0: limits'
  // upstream_timeout.
  std::chrono::milliseconds timeout{0};
  bool idempotent = false;  // requests on this route may be repeated (see RetryConfig)
  DegradedLimits degraded;
};

struct AuditConfig {
  std::string path;  // empty: no audit log
  std::string signing_key_path;
  uint64_t checkpoint_every = 1000;
  double checkpoint_interval_s = 10;
};

struct TlsConfig {
  std::string cert_path;  // empty: plain HTTP
  std::string key_path;
};

struct GatewayConfig {
  std::string source;  // the file it came from
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 8080;
  int workers = 0;  // 0: one per CPU
  TlsConfig tls;
  ServerLimits limits;
  std::string zone;  // this gateway's availability zone (zone-aware balancing)
  std::vector<BackendConfig> backends;
  std::vector<PoolConfig> pools;  // named pools, then one implicit pool per bare `backend:`
  std::vector<RolloutConfig> rollouts;
  std::vector<RouteConfig> routes;
  std::string state_path;  // SQLite for keys and quota usage
  bool api_keys = true;
  std::optional<security::JwtOptions> jwt;
  std::vector<security::Role> roles;
  LimiterConfig limiter;  // rate_limits, quotas, redis (state_path copied in)
  AuditConfig audit;
  // azure_monitor.logs: audit records (and anomaly alerts) shipped to a Log
  // Analytics table through the Logs Ingestion API (monitor/shipper.h).
  std::optional<monitor::LogsShipperOptions> azure_monitor_logs;
  bool forward_credentials = false;  // pass Authorization / x-api-key upstream
  AnomalyConfig anomaly;
};

// Parses and validates. Key files (JWT secrets and public keys) are read here,
// relative to the config file's directory, so that a bad path fails at load
// (and at reload, keeping the old config) rather than at the first request.
Result<GatewayConfig> LoadGatewayConfig(const std::string& path);
Result<GatewayConfig> ParseGatewayConfig(std::string_view yaml, const std::string& origin);

}  // namespace gantry::gateway
