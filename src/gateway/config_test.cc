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
  EXPECT_EQ(c->routes[0].models[0].backend, 1u);
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

TEST(GatewayConfig, LineNumbersInErrors) {
  auto r = Parse("backends:\n  - name: a\n    url: 'http://127.0.0.1:1'\nroutes:\n  - prefix: /\n    backend: zz\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("gateway.yaml:6:"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace gantry::gateway
