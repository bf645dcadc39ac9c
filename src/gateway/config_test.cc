#include "gantry/gateway/config.h"

#include <gtest/gtest.h>

#include <string>

namespace gantry::gateway {
namespace {

constexpr const char* kBase =
    "listen: 127.0.0.1:9090\n"
    "workers: 3\n"
    "state: ':memory:'\n"
    "backends:\n"
    "  - {name: llm, url: 'http://127.0.0.1:9000'}\n"
    "  - {name: big, url: 'http://127.0.0.1:9001', max_idle: 8}\n"
    "routes:\n"
    "  - prefix: /v1/\n"
    "    protocol: openai\n"
    "    backend: llm\n"
    "    models: [{match: 'big-*', backend: big}]\n"
    "  - {path: /v2/health/ready, protocol: kserve, backend: llm, auth: none}\n"
    "roles:\n"
    "  user: [{action: 'model:invoke', resource: 'tiny-*'}, 'usage:read']\n"
    "  admin: [{action: '*'}]\n"
    "rate_limits:\n"
    "  - {scope: key, requests: 10, per: 1s, burst: 20}\n"
    "  - {scope: key, tokens_per_minute: 1000}\n"
    "quotas:\n"
    "  - {scope: key, calls_per_day: 100}\n"
    "limits: {header_timeout: 2s, max_body_bytes: 1MiB}\n";

Result<GatewayConfig> Parse(const std::string& yaml) {
  return ParseGatewayConfig(yaml, "/etc/gantry/gateway.yaml");
}

TEST(GatewayConfig, ParsesEverySection) {
  auto c = Parse(kBase);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->listen_port, 9090);
  EXPECT_EQ(c->workers, 3);
  ASSERT_EQ(c->backends.size(), 2u);
  EXPECT_EQ(c->backends[1].host_header, "127.0.0.1:9001");
  EXPECT_EQ(c->backends[1].max_idle, 8u);
  ASSERT_EQ(c->routes.size(), 2u);
  EXPECT_EQ(c->routes[0].protocol, Protocol::kOpenAi);
  ASSERT_EQ(c->routes[0].models.size(), 1u);
  // A bare `backend:` gets an implicit pool of its own, shared by every rule naming it.
  const Target& mt = c->routes[0].models[0].target;
  EXPECT_EQ(mt.kind, Target::Kind::kPool);
  ASSERT_LT(mt.index, c->pools.size());
  EXPECT_TRUE(c->pools[mt.index].implicit);
  EXPECT_EQ(c->pools[mt.index].tiers[0].backends, std::vector<size_t>{1});
  EXPECT_FALSE(c->pools[mt.index].outlier.enabled);
  EXPECT_EQ(c->pools[mt.index].retry.attempts, 0u);
  EXPECT_EQ(c->routes[1].target.index, c->routes[0].target.index);
  EXPECT_FALSE(c->routes[1].auth_required);
  EXPECT_EQ(c->routes[1].name, "/v2/health/ready");
  ASSERT_EQ(c->roles.size(), 2u);
  EXPECT_EQ(c->roles[0].permissions[1].action, "usage:read");
  EXPECT_EQ(c->limiter.rate_limits.size(), 2u);
  EXPECT_DOUBLE_EQ(c->limiter.rate_limits[0].burst, 20);
  EXPECT_EQ(c->limiter.quotas[0].calls_per_day, 100);
  EXPECT_EQ(c->limits.header_timeout.count(), 2000);
  EXPECT_EQ(c->limits.max_body_bytes, 1u << 20);
  EXPECT_EQ(c->state_path, ":memory:");
}

TEST(GatewayConfig, RelativePathsFollowTheConfigFile) {
  auto c = Parse(std::string(kBase) + "audit: {path: audit.jsonl}\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->audit.path, "/etc/gantry/audit.jsonl");
}

// Each bad config must fail with a message that points at the place.
TEST(GatewayConfig, ErrorsNameTheKey) {
  struct Case {
    std::string yaml;
    std::string expect;
  } cases[] = {
      {"listen: nowhere\n", "listen"},
      {"listen: 1.2.3.4:99999\n", "port"},
      {"backends: [{name: a, url: 'https://x:1'}]\n", "backends.0.url"},
      {"backends: [{name: a, url: 'http://127.0.0.1:1/path'}]\n", "scheme://host:port only"},
      {"backends: [{name: a, url: 'http://127.0.0.1:1'}, {name: a, url: 'http://127.0.0.1:2'}]\n",
       "used twice"},
      {"backends: [{name: a, url: 'http://127.0.0.1:1'}]\nroutes: [{prefix: /, backend: b}]\n",
       "unknown backend 'b' (backends: a)"},
      {"backends: [{name: a, url: 'http://127.0.0.1:1'}]\nroutes: [{backend: a}]\n",
       "exactly one of 'path'"},
      {"backends: [{name: a, url: 'http://127.0.0.1:1'}]\nroutes: [{prefix: v1, backend: a}]\n",
       "must start with '/'"},
      {"backends: [{name: a, url: 'http://127.0.0.1:1'}]\nroutes: [{prefix: /, backend: a, "
       "protocol: grpc}]\n",
       "unknown protocol 'grpc'"},
      {"backends: [{name: a, url: 'http://127.0.0.1:1'}]\nroutes: [{prefix: /, backend: a, "
       "models: [{match: x}]}]\n",
       "model routing needs protocol"},
      {"routse: []\n", "did you mean 'routes'"},
      {"limits: {header_timeout: soon}\n", "limits.header_timeout"},
      {"auth: {jwt: {keys: [{alg: none}]}}\n", "alg must be HS256, RS256 or ES256"},
      {"auth: {jwt: {keys: [{alg: HS256, secret_file: /nonexistent/secret}]}}\n",
       "cannot read '/nonexistent/secret'"},
      {"auth: {jwt: {audience: x, oidc: {issuer: 'http://idp.example/t/v2.0'}}}\n",
       "must be an https:// URL"},
      {"auth: {jwt: {audience: x, oidc: {tenants: [t]}}}\n", "needs issuer"},
      {"auth: {jwt: {oidc: {issuer: 'https://login.microsoftonline.com/t/v2.0'}}}\n",
       "needs auth.jwt.audience"},
      {"auth: {jwt: {audience: x, oidc: {issuer: "
       "'https://login.microsoftonline.com/organizations/v2.0'}}}\n",
       "list the allowed tenant ids under auth.jwt.oidc.tenants"},
      {"auth: {jwt: {audience: x, oidc: {issuer: 'https://login.microsoftonline.com/t/v2.0', "
       "refersh: 1h}}}\n",
       "did you mean 'auth.jwt.oidc.refresh'"},
      {"auth: {jwt: {audience: x, oidc: {issuer: 'https://login.microsoftonline.com/t/v2.0', "
       "refresh: 0s}}}\n",
       "auth.jwt.oidc.refresh'"},
      {"auth: {jwt: {audience: x, oidc: {issuer: 'https://login.microsoftonline.com/t/v2.0'}, "
       "keys: [{alg: HS256, secret_file: s}]}}\n",
       "not both"},
      {"auth: {jwt: {audience: x, role_map: {admin: []}, oidc: {issuer: "
       "'https://login.microsoftonline.com/t/v2.0'}}}\n",
       "grant role 'admin'"},
      {"auth: {jwt: {audience: x}}\n", "or an issuer (auth.jwt.oidc)"},
      {"redis: {address: '127.0.0.1:6379', failure_mode: maybe}\n", "failure_mode"},
      {"redis: {address: '127.0.0.1:6379', password_file: /nonexistent/pw}\n",
       "cannot read '/nonexistent/pw'"},
      {"roles: {user: [{resource: x}]}\n", "needs an action"},
      {"workers: -1\n", "workers"},
  };
  for (const Case& c : cases) {
    auto r = Parse(c.yaml);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos)
        << c.yaml << " -> " << r.status().message();
  }
}

TEST(GatewayConfig, JwtOidcForm) {
  auto r = Parse(
      "auth:\n"
      "  jwt:\n"
      "    audience: [api://gantry, 7d3c0b1e-client-id]\n"
      "    role_map: {admin: [Gantry.Admin], user: [user_impersonation, Gantry.User]}\n"
      "    oidc:\n"
      "      issuer: https://login.microsoftonline.com/organizations/v2.0\n"
      "      tenants: [11111111-2222-3333-4444-555555555555]\n"
      "      refresh: 6h\n"
      "      unknown_kid_refresh: 1m\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->jwt.has_value());
  EXPECT_NE(r->jwt->key_provider, nullptr);
  EXPECT_TRUE(r->jwt->keys.empty());
  EXPECT_EQ(r->jwt->tenants, std::vector<std::string>{"11111111-2222-3333-4444-555555555555"});
  EXPECT_EQ(r->jwt->audiences.size(), 2u);
  EXPECT_EQ(r->jwt->role_map.at("user"),
            (std::vector<std::string>{"user_impersonation", "Gantry.User"}));
  EXPECT_EQ(r->jwt->role_map.at("admin"), std::vector<std::string>{"Gantry.Admin"});
  // Errors name the file, line and key.
  auto bad = Parse(
      "auth:\n  jwt:\n    audience: x\n    oidc:\n      issuer: https://x/t\n"
      "      unknown_kid_refresh: soon\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("gateway.yaml:6:"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("unknown_kid_refresh"), std::string::npos);
}

TEST(GatewayConfig, LineNumbersInErrors) {
  auto r = Parse(
      "backends:\n  - name: a\n    url: 'http://127.0.0.1:1'\nroutes:\n  - prefix: /\n    backend: "
      "zz\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("gateway.yaml:6:"), std::string::npos)
      << r.status().message();
}

constexpr const char* kPools =
    "state: ':memory:'\n"
    "zone: z1\n"
    "backends:\n"
    "  - {name: a1, url: 'http://127.0.0.1:9001', zone: z1, weight: 3, max_concurrent: 8}\n"
    "  - {name: a2, url: 'http://127.0.0.1:9002', zone: z2}\n"
    "  - {name: small, url: 'http://127.0.0.1:9003', zone: z1}\n"
    "  - {name: v2, url: 'http://127.0.0.1:9004'}\n"
    "pools:\n"
    "  - name: llm\n"
    "    balance: round_robin\n"
    "    tiers:\n"
    "      - backends: [a1, a2]\n"
    "      - {backends: [small], model: tiny-small}\n"
    "    health_check: {path: /v2/health/ready, interval: 2s, timeout: 500ms, unhealthy_threshold: "
    "2}\n"
    "    outlier: {consecutive_5xx: 3, base_ejection: 10s, max_ejection: 1m, max_ejection_percent: "
    "50}\n"
    "    retry: {attempts: 2, budget_percent: 50, backoff_base: 10ms, backoff_max: 100ms}\n"
    "    max_pending: 16\n"
    "    pending_timeout: 2s\n"
    "    shed_retry_after: 7s\n"
    "  - {name: llm-v2, backends: [v2], outlier: off}\n"
    "rollouts:\n"
    "  - name: canary\n"
    "    sticky: 'header:X-User'\n"
    "    targets: [{pool: llm, weight: 90}, {pool: llm-v2, weight: 10}]\n"
    "routes:\n"
    "  - prefix: /v1/\n"
    "    protocol: openai\n"
    "    pool: llm\n"
    "    timeout: 30s\n"
    "    degraded: {max_tokens: 64, stream: false}\n"
    "    models: [{match: 'canary-*', rollout: canary}]\n"
    "  - {prefix: /v2/, protocol: kserve, rollout: canary, idempotent: true}\n";

TEST(GatewayConfig, ParsesPoolsRolloutsAndRouteTargets) {
  auto c = Parse(kPools);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->zone, "z1");
  EXPECT_EQ(c->backends[0].zone, "z1");
  EXPECT_EQ(c->backends[0].weight, 3u);
  EXPECT_EQ(c->backends[0].max_concurrent, 8u);
  ASSERT_EQ(c->pools.size(), 2u);  // no bare backend: no implicit pool
  const PoolConfig& p = c->pools[0];
  EXPECT_EQ(p.balance, Balance::kRoundRobin);
  ASSERT_EQ(p.tiers.size(), 2u);
  EXPECT_EQ(p.tiers[0].backends, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(p.tiers[1].model, "tiny-small");
  EXPECT_TRUE(p.health.enabled);
  EXPECT_EQ(p.health.path, "/v2/health/ready");
  EXPECT_EQ(p.health.timeout, std::chrono::milliseconds(500));
  EXPECT_EQ(p.health.unhealthy_threshold, 2u);
  EXPECT_EQ(p.health.healthy_threshold, 2u);  // default
  EXPECT_EQ(p.outlier.consecutive_5xx, 3u);
  EXPECT_EQ(p.outlier.consecutive_gateway_errors, 5u);  // Envoy's default
  EXPECT_EQ(p.outlier.max_ejection, std::chrono::minutes(1));
  EXPECT_EQ(p.retry.attempts, 2u);
  EXPECT_EQ(p.retry.backoff_base, std::chrono::milliseconds(10));
  EXPECT_EQ(p.max_pending, 16u);
  EXPECT_EQ(p.shed_retry_after_s, 7u);
  EXPECT_FALSE(c->pools[1].outlier.enabled);
  ASSERT_EQ(c->rollouts.size(), 1u);
  EXPECT_EQ(c->rollouts[0].sticky, RolloutConfig::Sticky::kHeader);
  EXPECT_EQ(c->rollouts[0].sticky_header, "X-User");
  EXPECT_EQ(c->rollouts[0].targets[1].pool, 1u);
  EXPECT_EQ(c->rollouts[0].targets[1].weight, 10u);
  EXPECT_EQ(c->routes[0].target.kind, Target::Kind::kPool);
  EXPECT_EQ(c->routes[0].timeout, std::chrono::seconds(30));
  EXPECT_EQ(c->routes[0].degraded.max_tokens, 64u);
  EXPECT_FALSE(c->routes[0].degraded.allow_stream);
  EXPECT_EQ(c->routes[0].models[0].target.kind, Target::Kind::kRollout);
  EXPECT_EQ(c->routes[1].target.kind, Target::Kind::kRollout);
  EXPECT_TRUE(c->routes[1].idempotent);
}

TEST(GatewayConfig, PoolErrorsNameTheKey) {
  auto err = [](const std::string& from, const std::string& to) {
    std::string y = kPools;
    size_t at = y.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    y.replace(at, from.size(), to);
    auto c = ParseGatewayConfig(y, "/etc/gantry/gateway.yaml");
    EXPECT_FALSE(c.ok()) << "accepted: " << to;
    return c.ok() ? std::string() : c.status().message();
  };
  EXPECT_NE(err("backends: [a1, a2]", "backends: [a1, nope]").find("unknown backend 'nope'"),
            std::string::npos);
  EXPECT_NE(err("backends: [a1, a2]", "backends: [a1, a1]").find("appears twice"),
            std::string::npos);
  EXPECT_NE(err("balance: round_robin", "balance: random").find("least_request, round_robin"),
            std::string::npos);
  EXPECT_NE(err("{name: llm-v2, backends: [v2], outlier: off}",
                "{name: llm-v2, backends: [v2], outlier: maybe}")
                .find("'off'"),
            std::string::npos);
  EXPECT_NE(err("{name: llm-v2, backends: [v2], outlier: off}", "{name: a1, backends: [v2]}")
                .find("also a backend's name"),
            std::string::npos);
  EXPECT_NE(err("      - backends: [a1, a2]\n", "      - {backends: [a1, a2], model: x}\n")
                .find("fallback tiers"),
            std::string::npos);
  EXPECT_NE(err("max_ejection: 1m", "max_ejection: 1s").find("at least base_ejection"),
            std::string::npos);
  EXPECT_NE(err("pending_timeout: 2s", "pending_timeout: 0s").find("pending_timeout"),
            std::string::npos);
  EXPECT_NE(
      err("{pool: llm-v2, weight: 10}", "{pool: llm-v3, weight: 10}").find("unknown pool 'llm-v3'"),
      std::string::npos);
  EXPECT_NE(err("weight: 90}, {pool: llm-v2, weight: 10}", "weight: 0}, {pool: llm-v2, weight: 0}")
                .find("sum to"),
            std::string::npos);
  EXPECT_NE(err("sticky: 'header:X-User'", "sticky: cookie").find("header:<Header-Name>"),
            std::string::npos);
  EXPECT_NE(err("    pool: llm\n    timeout", "    pool: llm\n    backend: a1\n    timeout")
                .find("exactly one of 'backend', 'pool' or 'rollout'"),
            std::string::npos);
  EXPECT_NE(err("rollout: canary, idempotent", "rollout: blue, idempotent")
                .find("unknown rollout 'blue'"),
            std::string::npos);
  EXPECT_NE(err("max_concurrent: 8", "max_concurrent: -1").find("max_concurrent"),
            std::string::npos);
  EXPECT_NE(err("weight: 3,", "weight: 0,").find("1-1000"), std::string::npos);
  // The line of the fault is named.
  EXPECT_NE(err("retry: {attempts: 2,", "retry: {attempts: 99,").find("gateway.yaml:"),
            std::string::npos);
}

constexpr const char* kScaleFromZero =
    "backends:\n"
    "  - {name: fixed, url: 'http://127.0.0.1:9001'}\n"
    "pools:\n"
    "  - name: llm\n"
    "    backends: []\n"
    "    health_check: {path: /healthz, interval: 1s}\n"
    "    scale_from_zero: {hold: 16, hold_timeout: 30s, wake: 'http://127.0.0.1:9310/wake/llm', "
    "retry_after: 3s}\n"
    "  - {name: other, backends: [fixed]}\n"
    "routes:\n"
    "  - {prefix: /v1/, protocol: openai, pool: llm}\n";

TEST(GatewayConfig, ParsesScaleFromZeroAndAllowsAnEmptyPool) {
  auto c = Parse(kScaleFromZero);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const PoolConfig& p = c->pools[0];
  EXPECT_TRUE(p.scale_from_zero.enabled);
  EXPECT_EQ(p.scale_from_zero.hold, 16u);
  EXPECT_EQ(p.scale_from_zero.hold_timeout, std::chrono::seconds(30));
  EXPECT_EQ(p.scale_from_zero.wake, "http://127.0.0.1:9310/wake/llm");
  EXPECT_EQ(p.scale_from_zero.retry_after_s, 3u);
  ASSERT_EQ(p.tiers.size(), 1u);
  EXPECT_TRUE(p.tiers[0].backends.empty());
  EXPECT_FALSE(c->pools[1].scale_from_zero.enabled);

  // Defaults.
  std::string y = kScaleFromZero;
  std::string from =
      "{hold: 16, hold_timeout: 30s, wake: 'http://127.0.0.1:9310/wake/llm', "
      "retry_after: 3s}";
  y.replace(y.find(from), from.size(), "{}");
  auto d = Parse(y);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->pools[0].scale_from_zero.enabled);
  EXPECT_EQ(d->pools[0].scale_from_zero.hold, 64u);
  EXPECT_EQ(d->pools[0].scale_from_zero.hold_timeout, std::chrono::seconds(60));
  EXPECT_TRUE(d->pools[0].scale_from_zero.wake.empty());
  EXPECT_EQ(d->pools[0].scale_from_zero.retry_after_s, 5u);
}

TEST(GatewayConfig, ScaleFromZeroErrorsNameTheKey) {
  auto err = [](const std::string& from, const std::string& to) {
    std::string y = kScaleFromZero;
    size_t at = y.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    y.replace(at, from.size(), to);
    auto c = ParseGatewayConfig(y, "/etc/gantry/gateway.yaml");
    EXPECT_FALSE(c.ok()) << "accepted: " << to;
    return c.ok() ? std::string() : c.status().message();
  };
  EXPECT_NE(err("hold: 16", "hold: 0").find("pools.0.scale_from_zero.hold"), std::string::npos);
  EXPECT_NE(
      err("hold_timeout: 30s", "hold_timeout: 0s").find("pools.0.scale_from_zero.hold_timeout"),
      std::string::npos);
  EXPECT_NE(err("wake: 'http://127.0.0.1:9310/wake/llm'", "wake: 'https://scaler/wake'")
                .find("pools.0.scale_from_zero.wake"),
            std::string::npos);
  EXPECT_NE(err("retry_after: 3s", "retry_after: soon").find("pools.0.scale_from_zero.retry_after"),
            std::string::npos);
  EXPECT_NE(err("retry_after: 3s", "retry_afterr: 3s").find("retry_afterr"), std::string::npos);
  EXPECT_NE(err("{hold: 16, hold_timeout: 30s, wake: 'http://127.0.0.1:9310/wake/llm', "
                "retry_after: 3s}",
                "5")
                .find("must be a map"),
            std::string::npos);
  // Without scale_from_zero a pool still needs a backend.
  std::string y = kScaleFromZero;
  size_t at = y.find("    scale_from_zero:");
  y.erase(at, y.find('\n', at) - at + 1);
  auto c = ParseGatewayConfig(y, "/etc/gantry/gateway.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("pools.0.backends"), std::string::npos)
      << c.status().message();
}

}  // namespace
}  // namespace gantry::gateway
