// libFuzzer target for the gateway's admin API (admin.cc HandleAdmin): the
// JSON bodies, paths and query strings an operator (or anyone holding an
// admin key) sends to /admin/... Each input gets a fresh gateway state (an
// in-memory key store and quota store, the pools and rollout of kConfig, one
// API key), so that it replays alone. Input: byte 0 picks the caller's role
// (admin, user with usage:read, none), then "METHOD target\n" and the body;
// "{id}" in the target becomes the existing key's id. Every answer is one of
// the statuses the API documents, with a JSON body; nothing crashes, throws
// or overflows.
#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>

#include "gantry/core/json.h"
#include "gantry/gateway/config.h"
#include "internal.h"

namespace {

namespace gw = gantry::gateway;
namespace in = gantry::gateway::internal;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

constexpr const char* kConfig =
    "state: ':memory:'\n"
    "backends:\n"
    "  - {name: a1, url: 'http://127.0.0.1:9001'}\n"
    "  - {name: v2, url: 'http://127.0.0.1:9002'}\n"
    "pools:\n"
    "  - {name: llm, backends: [a1]}\n"
    "  - {name: llm-v2, backends: [v2]}\n"
    "  - {name: cold, backends: [], scale_from_zero: {hold: 4, hold_timeout: 1s}}\n"
    "rollouts:\n"
    "  - {name: canary, targets: [{pool: llm, weight: 90}, {pool: llm-v2, weight: 10}]}\n"
    "routes:\n"
    "  - {prefix: /v1/, protocol: openai, rollout: canary}\n"
    "roles:\n"
    "  admin: [{action: '*'}]\n"
    "  user: ['usage:read']\n"
    "quotas:\n"
    "  - {scope: key, calls_per_day: 100}\n";

const gw::GatewayConfig& BaseConfig() {
  static const gw::GatewayConfig config = [] {
    auto c = gw::ParseGatewayConfig(kConfig, "/nonexistent-gantry-fuzz/gateway.yaml");
    Check(c.ok());
    return *c;
  }();
  return config;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t role = data[0] % 3;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t nl = text.find('\n');
  std::string_view line = text.substr(0, nl);
  std::string body(nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1));
  size_t sp = line.find(' ');
  if (sp == std::string_view::npos) return 0;

  const gw::GatewayConfig& config = BaseConfig();
  in::Shared sh;
  auto ks = gantry::security::KeyStore::Open(":memory:");
  Check(ks.ok());
  sh.key_store = std::move(*ks);
  int64_t now = static_cast<int64_t>(std::time(nullptr));
  auto existing = sh.key_store->Create("ops", "admin", 0, now);
  Check(existing.ok());
  auto limiter = gw::Limiter::Create(config.limiter, nullptr);
  Check(limiter.ok());
  sh.limiter = std::move(*limiter);
  sh.balancer = std::make_unique<gw::Balancer>();
  sh.balancer->Configure(config);
  sh.base = config;
  auto gauge = sh.registry.GetGauge("gantry_gateway_api_keys", "keys");
  Check(gauge.ok());
  sh.m.keys_loaded = *gauge;
  auto rt = std::make_shared<in::Runtime>();
  auto policy = gantry::security::Policy::Create(config.roles);
  Check(policy.ok());
  rt->policy = std::move(*policy);
  rt->config = config;
  auto keys = sh.key_store->Snapshot();
  Check(keys.ok());
  sh.Publish(rt, *keys);

  std::string method(line.substr(0, sp));
  std::string target(line.substr(sp + 1));
  for (size_t at = target.find("{id}"); at != std::string::npos; at = target.find("{id}", at + 1)) {
    target.replace(at, 4, existing->first.id);
  }
  gantry::http::RequestHead req;  // views of `method` and `target`
  req.method = method;
  req.target = target;
  size_t q = target.find('?');
  req.path = req.target.substr(0, q);
  req.query = q == std::string::npos ? std::string_view() : req.target.substr(q + 1);

  in::Identity who;
  who.kind = "api_key";
  who.key_id = existing->first.id;
  if (role == 0) who.roles = {"admin"};
  if (role == 1) who.roles = {"user"};

  in::LocalResponse r = in::HandleAdmin(sh, *rt, who, req, body);
  Check(r.status == 200 || r.status == 201 || r.status == 400 || r.status == 403 ||
        r.status == 404 || r.status == 405 || r.status == 409);
  if (role == 2) Check(r.status == 403);
  gantry::Result<gantry::Json> j = gantry::ParseJson(r.body, "admin answer");
  Check(j.ok() && j->is_object());
  return 0;
}
