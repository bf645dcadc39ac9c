// libFuzzer target for gateway.yaml (ParseGatewayConfig). Every input either
// loads or fails with InvalidArgument; nothing crashes or throws. A config
// that loads is one the gateway can serve without a bounds check: every
// route, model rule, rollout and tier names a pool, rollout or backend that
// exists, and its roles make a valid RBAC policy. Parsing is deterministic.
// The origin's folder does not exist, so relative key files never resolve.
#include <cstdint>
#include <string>
#include <string_view>

#include "gantry/gateway/config.h"
#include "gantry/security/rbac.h"

namespace {

namespace gw = gantry::gateway;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

void CheckTarget(const gw::GatewayConfig& c, const gw::Target& t) {
  if (t.kind == gw::Target::Kind::kPool) {
    Check(t.index < c.pools.size());
  } else {
    Check(t.index < c.rollouts.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string origin = "/nonexistent-gantry-fuzz/gateway.yaml";
  gantry::Result<gw::GatewayConfig> c = gw::ParseGatewayConfig(text, origin);
  if (!c.ok()) {
    Check(c.status().code() == gantry::StatusCode::kInvalidArgument);
    gantry::Result<gw::GatewayConfig> again = gw::ParseGatewayConfig(text, origin);
    Check(!again.ok() && again.status().message() == c.status().message());
    return 0;
  }
  for (const gw::RouteConfig& r : c->routes) {
    CheckTarget(*c, r.target);
    for (const gw::ModelRoute& m : r.models) CheckTarget(*c, m.target);
  }
  for (const gw::RolloutConfig& r : c->rollouts) {
    for (const gw::RolloutTarget& t : r.targets) Check(t.pool < c->pools.size());
  }
  for (const gw::PoolConfig& p : c->pools) {
    for (const gw::TierConfig& tier : p.tiers) {
      for (size_t b : tier.backends) Check(b < c->backends.size());
    }
  }
  Check(gantry::security::Policy::Create(c->roles).ok());

  gantry::Result<gw::GatewayConfig> again = gw::ParseGatewayConfig(text, origin);
  Check(again.ok());
  Check(again->listen_port == c->listen_port && again->backends.size() == c->backends.size() &&
        again->pools.size() == c->pools.size() && again->routes.size() == c->routes.size() &&
        again->rollouts.size() == c->rollouts.size() && again->roles.size() == c->roles.size());
  return 0;
}
