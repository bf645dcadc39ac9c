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
#include "gantry/gateway/limits.h"
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
};

struct ModelRoute {
  std::string match;  // glob on the model name
  size_t backend = 0;  // index into GatewayConfig::backends
};

struct RouteConfig {
  std::string name;  // `name:` or the path/prefix; RBAC resource of http routes
  std::string path;  // exact match when non-empty
  std::string prefix;  // prefix match otherwise
  Protocol protocol = Protocol::kHttp;
  size_t backend = 0;
  std::vector<ModelRoute> models;
  bool auth_required = true;
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
  std::vector<BackendConfig> backends;
  std::vector<RouteConfig> routes;
  std::string state_path;  // SQLite for keys and quota usage
  bool api_keys = true;
  std::optional<security::JwtOptions> jwt;
  std::vector<security::Role> roles;
  LimiterConfig limiter;  // rate_limits, quotas, redis (state_path copied in)
  AuditConfig audit;
  bool forward_credentials = false;  // pass Authorization / x-api-key upstream
};

// Parses and validates. Key files (JWT secrets and public keys) are read here,
// relative to the config file's directory, so that a bad path fails at load
// (and at reload, keeping the old config) rather than at the first request.
Result<GatewayConfig> LoadGatewayConfig(const std::string& path);
Result<GatewayConfig> ParseGatewayConfig(std::string_view yaml, const std::string& origin);

}  // namespace gantry::gateway
