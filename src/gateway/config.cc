#include "gantry/gateway/config.h"

#include <fmt/format.h>

#include <charconv>
#include <filesystem>
#include <thread>

#include "gantry/core/config.h"
#include "gantry/core/http_client.h"
#include "gantry/core/json.h"
#include "gantry/security/oidc.h"

namespace gantry::gateway {
namespace {

namespace fs = std::filesystem;

std::chrono::milliseconds Ms(std::chrono::nanoseconds d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d);
}

Result<std::pair<std::string, uint16_t>> ParseHostPort(const Config& cfg, std::string_view key,
                                                       std::string_view text) {
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return InvalidArgument(fmt::format("{}: expected host:port such as 127.0.0.1:8080, got '{}'",
                                       cfg.Locate(key), text));
  }
  std::string host(text.substr(0, colon));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::string_view port_text = text.substr(colon + 1);
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port > 65535) {
    return InvalidArgument(
        fmt::format("{}: port must be a number 0-65535, got '{}'", cfg.Locate(key), port_text));
  }
  return std::make_pair(host, static_cast<uint16_t>(port));
}

// Paths in the config are relative to the config file's folder.
std::string Resolve(const std::string& origin, const std::string& path) {
  if (path.empty() || fs::path(path).is_absolute() || path == ":memory:") return path;
  fs::path base = fs::path(origin).parent_path();
  return (base / path).string();
}

Result<std::string> ReadKeyFile(const Config& cfg, std::string_view key, const std::string& path) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return InvalidArgument(
        fmt::format("{}: cannot read '{}': {}", cfg.Locate(key), path, text.status().message()));
  }
  return text;
}

Result<Protocol> ParseProtocol(const Config& cfg, std::string_view key, const std::string& v) {
  if (v == "openai") return Protocol::kOpenAi;
  if (v == "kserve") return Protocol::kKserve;
  if (v == "http") return Protocol::kHttp;
  return InvalidArgument(
      fmt::format("{}: unknown protocol '{}' (use openai, kserve or http)", cfg.Locate(key), v));
}

Result<size_t> FindBackend(const Config& cfg, std::string_view key, const GatewayConfig& gw,
                           const std::string& name) {
  std::string names;
  for (size_t i = 0; i < gw.backends.size(); ++i) {
    if (gw.backends[i].name == name) return i;
    names += (names.empty() ? "" : ", ") + gw.backends[i].name;
  }
  return InvalidArgument(fmt::format("{}: unknown backend '{}' (backends: {})", cfg.Locate(key),
                                     name, names.empty() ? "none defined" : names));
}

Status ParseLimits(const Config& cfg, ServerLimits* l) {
  RETURN_IF_ERROR(cfg.CheckKnownKeys(
      "limits",
      {"max_header_bytes", "max_body_bytes", "header_timeout", "body_timeout", "idle_timeout",
       "send_timeout", "upstream_connect_timeout", "upstream_timeout", "max_connections"}));
  ASSIGN_OR_RETURN(l->max_header_bytes,
                   cfg.GetSize("limits.max_header_bytes", l->max_header_bytes));
  ASSIGN_OR_RETURN(l->max_body_bytes, cfg.GetSize("limits.max_body_bytes", l->max_body_bytes));
  if (l->max_header_bytes < 1024 || l->max_header_bytes > (1u << 20)) {
    return InvalidArgument(
        fmt::format("{}: must be between 1KiB and 1MiB", cfg.Locate("limits.max_header_bytes")));
  }
  struct D {
    const char* key;
    std::chrono::milliseconds* out;
  } durations[] = {{"limits.header_timeout", &l->header_timeout},
                   {"limits.body_timeout", &l->body_timeout},
                   {"limits.idle_timeout", &l->idle_timeout},
                   {"limits.send_timeout", &l->send_timeout},
                   {"limits.upstream_connect_timeout", &l->upstream_connect_timeout},
                   {"limits.upstream_timeout", &l->upstream_timeout}};
  for (const D& d : durations) {
    ASSIGN_OR_RETURN(auto v, cfg.GetDuration(d.key, *d.out));
    if (v.count() <= 0)
      return InvalidArgument(fmt::format("{}: must be positive", cfg.Locate(d.key)));
    *d.out = Ms(v);
    if (d.out->count() == 0) *d.out = std::chrono::milliseconds(1);
  }
  ASSIGN_OR_RETURN(int64_t maxc,
                   cfg.GetInt("limits.max_connections", static_cast<int64_t>(l->max_connections)));
  if (maxc < 1) {
    return InvalidArgument(
        fmt::format("{}: must be at least 1", cfg.Locate("limits.max_connections")));
  }
  l->max_connections = static_cast<uint64_t>(maxc);
  return Status::Ok();
}

Status ParseBackends(const Config& cfg, GatewayConfig* gw) {
  ASSIGN_OR_RETURN(size_t n, cfg.ListSize("backends"));
  for (size_t i = 0; i < n; ++i) {
    std::string k = fmt::format("backends.{}", i);
    RETURN_IF_ERROR(
        cfg.CheckKnownKeys(k, {"name", "url", "max_idle", "zone", "weight", "max_concurrent"}));
    BackendConfig b;
    ASSIGN_OR_RETURN(b.name, cfg.GetString(k + ".name", ""));
    ASSIGN_OR_RETURN(std::string url, cfg.GetString(k + ".url", ""));
    if (b.name.empty())
      return InvalidArgument(fmt::format("{}: a backend needs a name", cfg.Locate(k)));
    for (const BackendConfig& other : gw->backends) {
      if (other.name == b.name) {
        return InvalidArgument(
            fmt::format("{}: backend name '{}' is used twice", cfg.Locate(k + ".name"), b.name));
      }
    }
    Result<http::Url> u = http::ParseUrl(url);
    if (!u.ok()) {
      return InvalidArgument(fmt::format("{}: {}", cfg.Locate(k + ".url"), u.status().message()));
    }
    if (u->target != "/") {
      return InvalidArgument(
          fmt::format("{}: a backend URL is scheme://host:port only; put paths in routes",
                      cfg.Locate(k + ".url")));
    }
    b.host = u->host;
    b.port = u->port;
    b.host_header = u->host.find(':') != std::string::npos
                        ? fmt::format("[{}]:{}", u->host, u->port)
                        : fmt::format("{}:{}", u->host, u->port);
    ASSIGN_OR_RETURN(int64_t idle, cfg.GetInt(k + ".max_idle", b.max_idle));
    if (idle < 0 || idle > 100000) {
      return InvalidArgument(fmt::format("{}: must be 0-100000", cfg.Locate(k + ".max_idle")));
    }
    b.max_idle = static_cast<uint32_t>(idle);
    ASSIGN_OR_RETURN(b.zone, cfg.GetString(k + ".zone", ""));
    ASSIGN_OR_RETURN(int64_t weight, cfg.GetInt(k + ".weight", 1));
    if (weight < 1 || weight > 1000) {
      return InvalidArgument(fmt::format("{}: must be 1-1000", cfg.Locate(k + ".weight")));
    }
    b.weight = static_cast<uint32_t>(weight);
    ASSIGN_OR_RETURN(int64_t maxc, cfg.GetInt(k + ".max_concurrent", 0));
    if (maxc < 0 || maxc > 1'000'000) {
      return InvalidArgument(
          fmt::format("{}: must be 0 (no limit) to 1000000", cfg.Locate(k + ".max_concurrent")));
    }
    b.max_concurrent = static_cast<uint32_t>(maxc);
    gw->backends.push_back(std::move(b));
  }
  return Status::Ok();
}

Result<std::chrono::milliseconds> PositiveDuration(const Config& cfg, const std::string& key,
                                                   std::chrono::milliseconds fallback,
                                                   bool allow_zero = false) {
  ASSIGN_OR_RETURN(auto v, cfg.GetDuration(key, fallback));
  if (v.count() < 0 || (!allow_zero && v.count() == 0)) {
    return InvalidArgument(fmt::format("{}: must be {}", cfg.Locate(key),
                                       allow_zero ? "zero or positive" : "positive"));
  }
  return std::max(Ms(v),
                  v.count() > 0 ? std::chrono::milliseconds(1) : std::chrono::milliseconds(0));
}

Result<uint32_t> BoundedInt(const Config& cfg, const std::string& key, int64_t fallback, int64_t lo,
                            int64_t hi) {
  ASSIGN_OR_RETURN(int64_t v, cfg.GetInt(key, fallback));
  if (v < lo || v > hi) {
    return InvalidArgument(fmt::format("{}: must be {}-{}, got {}", cfg.Locate(key), lo, hi, v));
  }
  return static_cast<uint32_t>(v);
}

Status ParsePool(const Config& cfg, const std::string& k, GatewayConfig* gw, PoolConfig* p) {
  RETURN_IF_ERROR(cfg.CheckKnownKeys(
      k, {"name", "balance", "zone_aware", "backends", "tiers", "health_check", "outlier", "retry",
          "max_pending", "pending_timeout", "shed_retry_after", "scale_from_zero"}));
  ASSIGN_OR_RETURN(p->name, cfg.GetString(k + ".name", ""));
  if (p->name.empty())
    return InvalidArgument(fmt::format("{}: a pool needs a name", cfg.Locate(k)));
  for (const PoolConfig& other : gw->pools) {
    if (other.name == p->name) {
      return InvalidArgument(
          fmt::format("{}: pool name '{}' is used twice", cfg.Locate(k + ".name"), p->name));
    }
  }
  for (const BackendConfig& b : gw->backends) {
    if (b.name == p->name) {
      return InvalidArgument(
          fmt::format("{}: pool name '{}' is also a backend's name; give the pool its own name",
                      cfg.Locate(k + ".name"), p->name));
    }
  }
  ASSIGN_OR_RETURN(std::string balance, cfg.GetString(k + ".balance", "least_request"));
  if (balance == "least_request") {
    p->balance = Balance::kLeastRequest;
  } else if (balance == "round_robin") {
    p->balance = Balance::kRoundRobin;
  } else if (balance == "weighted") {
    p->balance = Balance::kWeighted;
  } else {
    return InvalidArgument(
        fmt::format("{}: unknown balance '{}' (use least_request, round_robin or weighted)",
                    cfg.Locate(k + ".balance"), balance));
  }
  ASSIGN_OR_RETURN(p->zone_aware, cfg.GetBool(k + ".zone_aware", true));

  // `backends: [a, b]` is the one-tier short form of `tiers: [{backends: [a, b]}]`.
  bool has_backends = cfg.Has(k + ".backends"), has_tiers = cfg.Has(k + ".tiers");
  if (has_backends == has_tiers) {
    return InvalidArgument(fmt::format(
        "{}: a pool needs exactly one of 'backends' (one tier) or 'tiers' (priority tiers)",
        cfg.Locate(k)));
  }
  std::vector<std::string> tier_keys;
  if (has_backends) {
    tier_keys.push_back(k);
  } else {
    ASSIGN_OR_RETURN(size_t nt, cfg.ListSize(k + ".tiers"));
    if (nt == 0)
      return InvalidArgument(fmt::format("{}: needs at least one tier", cfg.Locate(k + ".tiers")));
    for (size_t t = 0; t < nt; ++t) tier_keys.push_back(fmt::format("{}.tiers.{}", k, t));
  }
  std::vector<bool> seen(gw->backends.size(), false);
  for (size_t t = 0; t < tier_keys.size(); ++t) {
    const std::string& tk = tier_keys[t];
    if (!has_backends) RETURN_IF_ERROR(cfg.CheckKnownKeys(tk, {"backends", "model"}));
    TierConfig tier;
    ASSIGN_OR_RETURN(std::vector<std::string> names, cfg.GetStringList(tk + ".backends"));
    // A pool that scales from zero may start empty: its backends come
    // through the admin API.
    if (names.empty() && !(t == 0 && cfg.Has(k + ".scale_from_zero"))) {
      return InvalidArgument(
          fmt::format("{}: a tier needs at least one backend", cfg.Locate(tk + ".backends")));
    }
    for (const std::string& name : names) {
      ASSIGN_OR_RETURN(size_t bi, FindBackend(cfg, tk + ".backends", *gw, name));
      if (seen[bi]) {
        return InvalidArgument(fmt::format("{}: backend '{}' appears twice in pool '{}'",
                                           cfg.Locate(tk + ".backends"), name, p->name));
      }
      seen[bi] = true;
      tier.backends.push_back(bi);
    }
    if (!has_backends) {
      ASSIGN_OR_RETURN(tier.model, cfg.GetString(tk + ".model", ""));
    }
    if (t == 0 && !tier.model.empty()) {
      return InvalidArgument(
          fmt::format("{}: the primary tier serves the model asked for; 'model' rewrites only in "
                      "fallback tiers",
                      cfg.Locate(tk + ".model")));
    }
    p->tiers.push_back(std::move(tier));
  }

  std::string hk = k + ".health_check";
  if (cfg.Has(hk)) {
    RETURN_IF_ERROR(cfg.CheckKnownKeys(
        hk, {"path", "interval", "timeout", "healthy_threshold", "unhealthy_threshold"}));
    HealthCheckConfig& h = p->health;
    h.enabled = true;
    ASSIGN_OR_RETURN(h.path, cfg.GetString(hk + ".path", h.path));
    if (h.path.empty() || h.path.front() != '/' ||
        h.path.find_first_of(" \r\n\t") != std::string::npos) {
      return InvalidArgument(fmt::format("{}: must be a path starting with '/', got '{}'",
                                         cfg.Locate(hk + ".path"), h.path));
    }
    ASSIGN_OR_RETURN(h.interval, PositiveDuration(cfg, hk + ".interval", h.interval));
    ASSIGN_OR_RETURN(h.timeout, PositiveDuration(cfg, hk + ".timeout", h.timeout));
    ASSIGN_OR_RETURN(h.healthy_threshold,
                     BoundedInt(cfg, hk + ".healthy_threshold", h.healthy_threshold, 1, 100));
    ASSIGN_OR_RETURN(h.unhealthy_threshold,
                     BoundedInt(cfg, hk + ".unhealthy_threshold", h.unhealthy_threshold, 1, 100));
  }

  std::string ok = k + ".outlier";
  if (cfg.Has(ok)) {
    if (cfg.IsScalar(ok)) {
      ASSIGN_OR_RETURN(std::string v, cfg.GetString(ok, ""));
      if (v != "off") {
        return InvalidArgument(fmt::format(
            "{}: write 'off' to disable outlier ejection, or a map of settings", cfg.Locate(ok)));
      }
      p->outlier.enabled = false;
    } else {
      RETURN_IF_ERROR(
          cfg.CheckKnownKeys(ok, {"consecutive_5xx", "consecutive_gateway_errors", "base_ejection",
                                  "max_ejection", "max_ejection_percent"}));
      OutlierConfig& o = p->outlier;
      ASSIGN_OR_RETURN(o.consecutive_5xx,
                       BoundedInt(cfg, ok + ".consecutive_5xx", o.consecutive_5xx, 1, 100000));
      ASSIGN_OR_RETURN(o.consecutive_gateway_errors,
                       BoundedInt(cfg, ok + ".consecutive_gateway_errors",
                                  o.consecutive_gateway_errors, 1, 100000));
      ASSIGN_OR_RETURN(o.base_ejection,
                       PositiveDuration(cfg, ok + ".base_ejection", o.base_ejection));
      ASSIGN_OR_RETURN(o.max_ejection, PositiveDuration(cfg, ok + ".max_ejection", o.max_ejection));
      if (o.max_ejection < o.base_ejection) {
        return InvalidArgument(
            fmt::format("{}: must be at least base_ejection", cfg.Locate(ok + ".max_ejection")));
      }
      ASSIGN_OR_RETURN(o.max_ejection_percent, BoundedInt(cfg, ok + ".max_ejection_percent",
                                                          o.max_ejection_percent, 0, 100));
    }
  }

  std::string rk = k + ".retry";
  if (cfg.Has(rk)) {
    RETURN_IF_ERROR(cfg.CheckKnownKeys(rk, {"attempts", "budget_percent", "min_retry_concurrency",
                                            "backoff_base", "backoff_max"}));
    RetryConfig& r = p->retry;
    ASSIGN_OR_RETURN(r.attempts, BoundedInt(cfg, rk + ".attempts", r.attempts, 0, 10));
    ASSIGN_OR_RETURN(r.budget_percent, cfg.GetDouble(rk + ".budget_percent", r.budget_percent));
    if (!(r.budget_percent >= 0 && r.budget_percent <= 100)) {
      return InvalidArgument(fmt::format("{}: must be 0-100", cfg.Locate(rk + ".budget_percent")));
    }
    ASSIGN_OR_RETURN(r.min_retry_concurrency, BoundedInt(cfg, rk + ".min_retry_concurrency",
                                                         r.min_retry_concurrency, 0, 100000));
    ASSIGN_OR_RETURN(r.backoff_base, PositiveDuration(cfg, rk + ".backoff_base", r.backoff_base));
    ASSIGN_OR_RETURN(r.backoff_max, PositiveDuration(cfg, rk + ".backoff_max", r.backoff_max));
    if (r.backoff_max < r.backoff_base) {
      return InvalidArgument(
          fmt::format("{}: must be at least backoff_base", cfg.Locate(rk + ".backoff_max")));
    }
  }
  ASSIGN_OR_RETURN(p->max_pending, BoundedInt(cfg, k + ".max_pending", 0, 0, 1'000'000));
  ASSIGN_OR_RETURN(p->pending_timeout,
                   PositiveDuration(cfg, k + ".pending_timeout", p->pending_timeout, true));
  if (p->max_pending > 0 && p->pending_timeout.count() == 0) {
    return InvalidArgument(fmt::format("{}: max_pending needs a pending_timeout (how long to wait)",
                                       cfg.Locate(k + ".max_pending")));
  }
  ASSIGN_OR_RETURN(auto shed, PositiveDuration(cfg, k + ".shed_retry_after",
                                               std::chrono::seconds(p->shed_retry_after_s)));
  p->shed_retry_after_s = static_cast<uint32_t>(
      std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::seconds>(shed).count()));

  std::string zk = k + ".scale_from_zero";
  if (cfg.Has(zk)) {
    if (!cfg.IsMap(zk)) {
      return InvalidArgument(
          fmt::format("{}: must be a map such as {{hold: 64, hold_timeout: 60s, wake: "
                      "http://127.0.0.1:9310/wake/llm, retry_after: 5s}}",
                      cfg.Locate(zk)));
    }
    RETURN_IF_ERROR(cfg.CheckKnownKeys(zk, {"hold", "hold_timeout", "wake", "retry_after"}));
    ScaleFromZeroConfig& z = p->scale_from_zero;
    z.enabled = true;
    ASSIGN_OR_RETURN(z.hold, BoundedInt(cfg, zk + ".hold", z.hold, 1, 1'000'000));
    ASSIGN_OR_RETURN(z.hold_timeout, PositiveDuration(cfg, zk + ".hold_timeout", z.hold_timeout));
    ASSIGN_OR_RETURN(z.wake, cfg.GetString(zk + ".wake", ""));
    if (!z.wake.empty()) {
      Result<http::Url> u = http::ParseUrl(z.wake);
      if (!u.ok()) {
        return InvalidArgument(
            fmt::format("{}: {}", cfg.Locate(zk + ".wake"), u.status().message()));
      }
    }
    ASSIGN_OR_RETURN(
        auto ra, PositiveDuration(cfg, zk + ".retry_after", std::chrono::seconds(z.retry_after_s)));
    z.retry_after_s = static_cast<uint32_t>(
        std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::seconds>(ra).count()));
  }
  return Status::Ok();
}

Result<size_t> FindPool(const Config& cfg, std::string_view key, const GatewayConfig& gw,
                        const std::string& name) {
  std::string names;
  for (size_t i = 0; i < gw.pools.size(); ++i) {
    if (gw.pools[i].implicit) continue;
    if (gw.pools[i].name == name) return i;
    names += (names.empty() ? "" : ", ") + gw.pools[i].name;
  }
  return InvalidArgument(fmt::format("{}: unknown pool '{}' (pools: {})", cfg.Locate(key), name,
                                     names.empty() ? "none defined" : names));
}

Status ParsePools(const Config& cfg, GatewayConfig* gw) {
  ASSIGN_OR_RETURN(size_t n, cfg.ListSize("pools"));
  for (size_t i = 0; i < n; ++i) {
    PoolConfig p;
    RETURN_IF_ERROR(ParsePool(cfg, fmt::format("pools.{}", i), gw, &p));
    gw->pools.push_back(std::move(p));
  }
  return Status::Ok();
}

Status ParseRollouts(const Config& cfg, GatewayConfig* gw) {
  ASSIGN_OR_RETURN(size_t n, cfg.ListSize("rollouts"));
  for (size_t i = 0; i < n; ++i) {
    std::string k = fmt::format("rollouts.{}", i);
    RETURN_IF_ERROR(cfg.CheckKnownKeys(k, {"name", "targets", "sticky"}));
    RolloutConfig r;
    ASSIGN_OR_RETURN(r.name, cfg.GetString(k + ".name", ""));
    if (r.name.empty())
      return InvalidArgument(fmt::format("{}: a rollout needs a name", cfg.Locate(k)));
    for (const RolloutConfig& other : gw->rollouts) {
      if (other.name == r.name) {
        return InvalidArgument(
            fmt::format("{}: rollout name '{}' is used twice", cfg.Locate(k + ".name"), r.name));
      }
    }
    ASSIGN_OR_RETURN(std::string sticky, cfg.GetString(k + ".sticky", "none"));
    if (sticky == "none") {
      r.sticky = RolloutConfig::Sticky::kNone;
    } else if (sticky == "key") {
      r.sticky = RolloutConfig::Sticky::kKey;
    } else if (sticky.starts_with("header:") && sticky.size() > 7) {
      r.sticky = RolloutConfig::Sticky::kHeader;
      r.sticky_header = sticky.substr(7);
    } else {
      return InvalidArgument(
          fmt::format("{}: unknown sticky '{}' (use none, key, or header:<Header-Name>)",
                      cfg.Locate(k + ".sticky"), sticky));
    }
    ASSIGN_OR_RETURN(size_t nt, cfg.ListSize(k + ".targets"));
    if (nt < 1) {
      return InvalidArgument(fmt::format("{}: a rollout needs targets ({{pool, weight}} each)",
                                         cfg.Locate(k + ".targets")));
    }
    uint64_t total = 0;
    for (size_t j = 0; j < nt; ++j) {
      std::string tk = fmt::format("{}.targets.{}", k, j);
      RETURN_IF_ERROR(cfg.CheckKnownKeys(tk, {"pool", "weight"}));
      RolloutTarget t;
      ASSIGN_OR_RETURN(std::string pool, cfg.GetString(tk + ".pool", ""));
      ASSIGN_OR_RETURN(t.pool, FindPool(cfg, tk + ".pool", *gw, pool));
      for (const RolloutTarget& other : r.targets) {
        if (other.pool == t.pool) {
          return InvalidArgument(fmt::format("{}: pool '{}' is named twice in rollout '{}'",
                                             cfg.Locate(tk + ".pool"), pool, r.name));
        }
      }
      ASSIGN_OR_RETURN(t.weight, BoundedInt(cfg, tk + ".weight", 0, 0, 1'000'000));
      total += t.weight;
      r.targets.push_back(t);
    }
    if (total == 0 || total > 1'000'000) {
      return InvalidArgument(fmt::format("{}: weights must sum to 1-1000000, got {}",
                                         cfg.Locate(k + ".targets"), total));
    }
    gw->rollouts.push_back(std::move(r));
  }
  return Status::Ok();
}

// A route or model rule names exactly one of backend, pool or rollout. A bare
// backend gets a pool of its own (made once, shared by every rule naming it)
// with no health checks, ejection or retries: the behaviour of a single
// upstream in nginx.
Result<Target> ParseTarget(const Config& cfg, const std::string& k, GatewayConfig* gw,
                           const Target* fallback) {
  ASSIGN_OR_RETURN(std::string backend, cfg.GetString(k + ".backend", ""));
  ASSIGN_OR_RETURN(std::string pool, cfg.GetString(k + ".pool", ""));
  ASSIGN_OR_RETURN(std::string rollout, cfg.GetString(k + ".rollout", ""));
  int named = !backend.empty() + !pool.empty() + !rollout.empty();
  if (named == 0 && fallback != nullptr) return *fallback;
  if (named != 1) {
    return InvalidArgument(
        fmt::format("{}: needs exactly one of 'backend', 'pool' or 'rollout'", cfg.Locate(k)));
  }
  Target t;
  if (!rollout.empty()) {
    t.kind = Target::Kind::kRollout;
    std::string names;
    for (size_t i = 0; i < gw->rollouts.size(); ++i) {
      if (gw->rollouts[i].name == rollout) {
        t.index = i;
        return t;
      }
      names += (names.empty() ? "" : ", ") + gw->rollouts[i].name;
    }
    return InvalidArgument(fmt::format("{}: unknown rollout '{}' (rollouts: {})",
                                       cfg.Locate(k + ".rollout"), rollout,
                                       names.empty() ? "none defined" : names));
  }
  t.kind = Target::Kind::kPool;
  if (!pool.empty()) {
    ASSIGN_OR_RETURN(t.index, FindPool(cfg, k + ".pool", *gw, pool));
    return t;
  }
  ASSIGN_OR_RETURN(size_t bi, FindBackend(cfg, k + ".backend", *gw, backend));
  for (size_t i = 0; i < gw->pools.size(); ++i) {
    if (gw->pools[i].implicit && gw->pools[i].tiers[0].backends[0] == bi) {
      t.index = i;
      return t;
    }
  }
  PoolConfig p;
  p.name = gw->backends[bi].name;
  p.implicit = true;
  p.tiers.push_back(TierConfig{{bi}, ""});
  p.outlier.enabled = false;
  p.retry.attempts = 0;
  gw->pools.push_back(std::move(p));
  t.index = gw->pools.size() - 1;
  return t;
}

Status ParseRoutes(const Config& cfg, GatewayConfig* gw) {
  ASSIGN_OR_RETURN(size_t n, cfg.ListSize("routes"));
  for (size_t i = 0; i < n; ++i) {
    std::string k = fmt::format("routes.{}", i);
    RETURN_IF_ERROR(
        cfg.CheckKnownKeys(k, {"name", "path", "prefix", "protocol", "backend", "pool", "rollout",
                               "models", "auth", "timeout", "idempotent", "degraded"}));
    RouteConfig r;
    ASSIGN_OR_RETURN(r.path, cfg.GetString(k + ".path", ""));
    ASSIGN_OR_RETURN(r.prefix, cfg.GetString(k + ".prefix", ""));
    if (r.path.empty() == r.prefix.empty()) {
      return InvalidArgument(fmt::format(
          "{}: a route needs exactly one of 'path' (exact) or 'prefix'", cfg.Locate(k)));
    }
    const std::string& p = r.path.empty() ? r.prefix : r.path;
    if (p.front() != '/') {
      return InvalidArgument(fmt::format("{}: must start with '/', got '{}'",
                                         cfg.Locate(k + (r.path.empty() ? ".prefix" : ".path")),
                                         p));
    }
    ASSIGN_OR_RETURN(r.name, cfg.GetString(k + ".name", p));
    ASSIGN_OR_RETURN(std::string proto, cfg.GetString(k + ".protocol", "http"));
    ASSIGN_OR_RETURN(r.protocol, ParseProtocol(cfg, k + ".protocol", proto));
    ASSIGN_OR_RETURN(r.target, ParseTarget(cfg, k, gw, nullptr));
    ASSIGN_OR_RETURN(r.timeout, PositiveDuration(cfg, k + ".timeout", r.timeout, true));
    ASSIGN_OR_RETURN(r.idempotent, cfg.GetBool(k + ".idempotent", false));
    if (cfg.Has(k + ".degraded")) {
      std::string dk = k + ".degraded";
      RETURN_IF_ERROR(cfg.CheckKnownKeys(dk, {"max_tokens", "stream"}));
      ASSIGN_OR_RETURN(int64_t mt, cfg.GetInt(dk + ".max_tokens", 0));
      if (mt < 0)
        return InvalidArgument(
            fmt::format("{}: must be 0 (no cap) or more", cfg.Locate(dk + ".max_tokens")));
      r.degraded.max_tokens = static_cast<uint64_t>(mt);
      ASSIGN_OR_RETURN(r.degraded.allow_stream, cfg.GetBool(dk + ".stream", true));
    }
    ASSIGN_OR_RETURN(std::string auth, cfg.GetString(k + ".auth", "required"));
    if (auth != "required" && auth != "none") {
      return InvalidArgument(
          fmt::format("{}: must be 'required' or 'none', got '{}'", cfg.Locate(k + ".auth"), auth));
    }
    r.auth_required = auth == "required";
    ASSIGN_OR_RETURN(size_t m, cfg.ListSize(k + ".models"));
    if (m > 0 && r.protocol == Protocol::kHttp) {
      return InvalidArgument(fmt::format(
          "{}: model routing needs protocol openai or kserve (http routes carry no model name)",
          cfg.Locate(k + ".models")));
    }
    for (size_t j = 0; j < m; ++j) {
      std::string mk = fmt::format("{}.models.{}", k, j);
      RETURN_IF_ERROR(cfg.CheckKnownKeys(mk, {"match", "backend", "pool", "rollout"}));
      ModelRoute mr;
      ASSIGN_OR_RETURN(mr.match, cfg.GetString(mk + ".match", ""));
      if (mr.match.empty())
        return InvalidArgument(fmt::format("{}: needs 'match'", cfg.Locate(mk)));
      ASSIGN_OR_RETURN(mr.target, ParseTarget(cfg, mk, gw, &r.target));
      r.models.push_back(std::move(mr));
    }
    gw->routes.push_back(std::move(r));
  }
  return Status::Ok();
}

Status ParseAuth(const Config& cfg, GatewayConfig* gw) {
  RETURN_IF_ERROR(cfg.CheckKnownKeys("auth", {"api_keys", "jwt", "forward_credentials"}));
  ASSIGN_OR_RETURN(gw->api_keys, cfg.GetBool("auth.api_keys", true));
  ASSIGN_OR_RETURN(gw->forward_credentials, cfg.GetBool("auth.forward_credentials", false));
  if (!cfg.Has("auth.jwt")) return Status::Ok();
  RETURN_IF_ERROR(cfg.CheckKnownKeys(
      "auth.jwt", {"issuer", "audience", "role_claim", "leeway", "keys", "oidc", "role_map"}));
  security::JwtOptions o;
  ASSIGN_OR_RETURN(o.issuer, cfg.GetString("auth.jwt.issuer", ""));
  if (cfg.IsScalar("auth.jwt.audience")) {
    ASSIGN_OR_RETURN(std::string aud, cfg.GetString("auth.jwt.audience", ""));
    o.audiences.push_back(aud);
  } else {
    ASSIGN_OR_RETURN(o.audiences, cfg.GetStringList("auth.jwt.audience"));
  }
  ASSIGN_OR_RETURN(o.role_claim, cfg.GetString("auth.jwt.role_claim", "role"));
  ASSIGN_OR_RETURN(auto leeway, cfg.GetDuration("auth.jwt.leeway", std::chrono::seconds(30)));
  o.leeway_s = std::chrono::duration_cast<std::chrono::seconds>(leeway).count();
  // role_map is keyed by the Gantry role (claim values such as "Gantry.Admin"
  // hold dots, which config keys cannot).
  ASSIGN_OR_RETURN(std::vector<std::string> mapped, cfg.Keys("auth.jwt.role_map"));
  for (const std::string& role : mapped) {
    std::string rk = "auth.jwt.role_map." + role;
    std::vector<std::string> values;
    if (cfg.IsScalar(rk)) {
      ASSIGN_OR_RETURN(std::string v, cfg.GetString(rk, ""));
      values.push_back(v);
    } else {
      ASSIGN_OR_RETURN(values, cfg.GetStringList(rk));
    }
    std::erase(values, std::string());
    if (values.empty()) {
      return InvalidArgument(
          fmt::format("{}: list the claim values (app roles or scopes) that grant role '{}', e.g. "
                      "[Gantry.Admin]",
                      cfg.Locate(rk), role));
    }
    o.role_map[role] = std::move(values);
  }
  ASSIGN_OR_RETURN(size_t n, cfg.ListSize("auth.jwt.keys"));
  if (cfg.Has("auth.jwt.oidc")) {
    if (n > 0) {
      return InvalidArgument(
          fmt::format("{}: use either auth.jwt.oidc (keys from the issuer) or auth.jwt.keys "
                      "(static keys), not both",
                      cfg.Locate("auth.jwt.keys")));
    }
    if (o.audiences.empty()) {
      // Every tenant's tokens are signed with the same Entra keys: without an
      // audience any app's token would do.
      return InvalidArgument(fmt::format(
          "{}: OpenID Connect needs auth.jwt.audience (the app's client id or api:// URI)",
          cfg.Locate("auth.jwt")));
    }
    RETURN_IF_ERROR(
        cfg.CheckKnownKeys("auth.jwt.oidc", {"issuer", "discovery_url", "tenants", "refresh",
                                             "unknown_kid_refresh", "timeout", "ca_file"}));
    security::OidcOptions oo;
    ASSIGN_OR_RETURN(oo.issuer, cfg.GetString("auth.jwt.oidc.issuer", ""));
    ASSIGN_OR_RETURN(oo.discovery_url, cfg.GetString("auth.jwt.oidc.discovery_url", ""));
    if (oo.issuer.empty() && oo.discovery_url.empty()) {
      return InvalidArgument(fmt::format(
          "{}: needs issuer (e.g. https://login.microsoftonline.com/<tenant id>/v2.0) or "
          "discovery_url",
          cfg.Locate("auth.jwt.oidc")));
    }
    ASSIGN_OR_RETURN(o.tenants, cfg.GetStringList("auth.jwt.oidc.tenants"));
    for (const char* multi : {"/common/", "/organizations/"}) {
      if ((oo.issuer + oo.discovery_url).find(multi) != std::string::npos && o.tenants.empty()) {
        return InvalidArgument(fmt::format(
            "{}: a multi-tenant issuer ({}) accepts tokens from any tenant; list the allowed "
            "tenant ids under auth.jwt.oidc.tenants",
            cfg.Locate("auth.jwt.oidc"), multi));
      }
    }
    ASSIGN_OR_RETURN(auto refresh,
                     cfg.GetDuration("auth.jwt.oidc.refresh", std::chrono::hours(12)));
    ASSIGN_OR_RETURN(auto kid_refresh,
                     cfg.GetDuration("auth.jwt.oidc.unknown_kid_refresh", std::chrono::minutes(5)));
    ASSIGN_OR_RETURN(auto timeout,
                     cfg.GetDuration("auth.jwt.oidc.timeout", std::chrono::seconds(10)));
    if (refresh < std::chrono::seconds(1)) {
      return InvalidArgument(
          fmt::format("{}: must be at least 1s", cfg.Locate("auth.jwt.oidc.refresh")));
    }
    if (timeout < std::chrono::milliseconds(1)) {
      return InvalidArgument(
          fmt::format("{}: must be at least 1ms", cfg.Locate("auth.jwt.oidc.timeout")));
    }
    oo.refresh = std::chrono::duration_cast<std::chrono::seconds>(refresh);
    oo.unknown_kid_refresh = std::chrono::duration_cast<std::chrono::seconds>(kid_refresh);
    oo.fetch_deadline = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
    ASSIGN_OR_RETURN(std::string ca_file, cfg.GetString("auth.jwt.oidc.ca_file", ""));
    if (!ca_file.empty()) oo.tls.ca_file = Resolve(gw->source, ca_file);
    Result<std::shared_ptr<security::OidcKeySet>> ks = security::OidcKeySet::Create(oo);
    if (!ks.ok()) {
      return InvalidArgument(
          fmt::format("{}: {}", cfg.Locate("auth.jwt.oidc"), ks.status().message()));
    }
    o.key_provider = *std::move(ks);
  } else if (n == 0) {
    return InvalidArgument(
        fmt::format("{}: jwt needs at least one key (auth.jwt.keys) or an issuer (auth.jwt.oidc)",
                    cfg.Locate("auth.jwt")));
  }
  for (size_t i = 0; i < n; ++i) {
    std::string k = fmt::format("auth.jwt.keys.{}", i);
    RETURN_IF_ERROR(cfg.CheckKnownKeys(k, {"alg", "kid", "secret_file", "public_key_file"}));
    security::JwtKey key;
    ASSIGN_OR_RETURN(key.alg, cfg.GetString(k + ".alg", ""));
    ASSIGN_OR_RETURN(key.kid, cfg.GetString(k + ".kid", ""));
    ASSIGN_OR_RETURN(std::string secret_file, cfg.GetString(k + ".secret_file", ""));
    ASSIGN_OR_RETURN(std::string pub_file, cfg.GetString(k + ".public_key_file", ""));
    if (key.alg == "HS256") {
      if (secret_file.empty()) {
        return InvalidArgument(fmt::format("{}: HS256 needs secret_file", cfg.Locate(k)));
      }
      ASSIGN_OR_RETURN(key.secret,
                       ReadKeyFile(cfg, k + ".secret_file", Resolve(gw->source, secret_file)));
      // A trailing newline from `echo secret > file` is not part of the secret.
      while (!key.secret.empty() && (key.secret.back() == '\n' || key.secret.back() == '\r')) {
        key.secret.pop_back();
      }
    } else if (key.alg == "RS256" || key.alg == "ES256") {
      if (pub_file.empty()) {
        return InvalidArgument(fmt::format("{}: {} needs public_key_file", cfg.Locate(k), key.alg));
      }
      ASSIGN_OR_RETURN(key.public_pem,
                       ReadKeyFile(cfg, k + ".public_key_file", Resolve(gw->source, pub_file)));
    } else {
      return InvalidArgument(fmt::format("{}: alg must be HS256, RS256 or ES256, got '{}'",
                                         cfg.Locate(k + ".alg"), key.alg));
    }
    o.keys.push_back(std::move(key));
  }
  // Build once here so that a bad key fails the load, not the first request.
  Result<std::unique_ptr<security::JwtVerifier>> v = security::JwtVerifier::Create(o);
  if (!v.ok()) {
    return InvalidArgument(fmt::format("{}: {}", cfg.Locate("auth.jwt"), v.status().message()));
  }
  gw->jwt = std::move(o);
  return Status::Ok();
}

Status ParseRoles(const Config& cfg, GatewayConfig* gw) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, cfg.Keys("roles"));
  for (const std::string& name : names) {
    std::string k = "roles." + name;
    security::Role role;
    role.name = name;
    ASSIGN_OR_RETURN(size_t n, cfg.ListSize(k));
    for (size_t i = 0; i < n; ++i) {
      std::string pk = fmt::format("{}.{}", k, i);
      security::Permission p;
      if (cfg.IsScalar(pk)) {
        ASSIGN_OR_RETURN(p.action, cfg.GetString(pk, ""));
      } else {
        RETURN_IF_ERROR(cfg.CheckKnownKeys(pk, {"action", "resource"}));
        ASSIGN_OR_RETURN(p.action, cfg.GetString(pk + ".action", ""));
        ASSIGN_OR_RETURN(p.resource, cfg.GetString(pk + ".resource", "*"));
      }
      if (p.action.empty()) {
        return InvalidArgument(fmt::format("{}: a permission needs an action", cfg.Locate(pk)));
      }
      role.permissions.push_back(std::move(p));
    }
    gw->roles.push_back(std::move(role));
  }
  Result<security::Policy> policy = security::Policy::Create(gw->roles);
  if (!policy.ok()) {
    return InvalidArgument(fmt::format("{}: {}", cfg.Locate("roles"), policy.status().message()));
  }
  return Status::Ok();
}

Status ParseRateLimits(const Config& cfg, GatewayConfig* gw) {
  ASSIGN_OR_RETURN(size_t n, cfg.ListSize("rate_limits"));
  for (size_t i = 0; i < n; ++i) {
    std::string k = fmt::format("rate_limits.{}", i);
    RETURN_IF_ERROR(
        cfg.CheckKnownKeys(k, {"scope", "match", "requests", "per", "burst", "tokens_per_minute"}));
    RateLimitRule r;
    ASSIGN_OR_RETURN(r.scope, cfg.GetString(k + ".scope", "key"));
    ASSIGN_OR_RETURN(r.match, cfg.GetString(k + ".match", "*"));
    ASSIGN_OR_RETURN(r.requests, cfg.GetDouble(k + ".requests", 0));
    ASSIGN_OR_RETURN(auto per, cfg.GetDuration(k + ".per", std::chrono::seconds(60)));
    r.per_s = std::chrono::duration<double>(per).count();
    ASSIGN_OR_RETURN(r.burst, cfg.GetDouble(k + ".burst", 0));
    ASSIGN_OR_RETURN(r.tokens_per_minute, cfg.GetDouble(k + ".tokens_per_minute", 0));
    gw->limiter.rate_limits.push_back(std::move(r));
  }
  ASSIGN_OR_RETURN(n, cfg.ListSize("quotas"));
  for (size_t i = 0; i < n; ++i) {
    std::string k = fmt::format("quotas.{}", i);
    RETURN_IF_ERROR(cfg.CheckKnownKeys(k, {"scope", "match", "calls_per_day", "calls_per_month",
                                           "tokens_per_day", "tokens_per_month"}));
    QuotaRule q;
    ASSIGN_OR_RETURN(q.scope, cfg.GetString(k + ".scope", "key"));
    ASSIGN_OR_RETURN(q.match, cfg.GetString(k + ".match", "*"));
    ASSIGN_OR_RETURN(q.calls_per_day, cfg.GetInt(k + ".calls_per_day", 0));
    ASSIGN_OR_RETURN(q.calls_per_month, cfg.GetInt(k + ".calls_per_month", 0));
    ASSIGN_OR_RETURN(q.tokens_per_day, cfg.GetInt(k + ".tokens_per_day", 0));
    ASSIGN_OR_RETURN(q.tokens_per_month, cfg.GetInt(k + ".tokens_per_month", 0));
    gw->limiter.quotas.push_back(std::move(q));
  }
  if (cfg.Has("redis")) {
    RETURN_IF_ERROR(cfg.CheckKnownKeys(
        "redis", {"address", "timeout", "failure_mode", "prefix", "password_file"}));
    RedisOptions r;
    ASSIGN_OR_RETURN(std::string addr, cfg.GetString("redis.address", "127.0.0.1:6379"));
    ASSIGN_OR_RETURN(auto hp, ParseHostPort(cfg, "redis.address", addr));
    r.host = hp.first;
    r.port = hp.second;
    ASSIGN_OR_RETURN(auto t, cfg.GetDuration("redis.timeout", std::chrono::milliseconds(20)));
    r.timeout_s = std::chrono::duration<double>(t).count();
    ASSIGN_OR_RETURN(std::string mode, cfg.GetString("redis.failure_mode", "open"));
    if (mode != "open" && mode != "closed") {
      return InvalidArgument(fmt::format("{}: must be 'open' or 'closed', got '{}'",
                                         cfg.Locate("redis.failure_mode"), mode));
    }
    r.fail_closed = mode == "closed";
    ASSIGN_OR_RETURN(r.prefix, cfg.GetString("redis.prefix", "gantry:"));
    ASSIGN_OR_RETURN(std::string password_file, cfg.GetString("redis.password_file", ""));
    if (!password_file.empty()) {
      ASSIGN_OR_RETURN(r.password,
                       ReadKeyFile(cfg, "redis.password_file", Resolve(gw->source, password_file)));
      while (!r.password.empty() && (r.password.back() == '\n' || r.password.back() == '\r')) {
        r.password.pop_back();
      }
      if (r.password.empty()) {
        return InvalidArgument(
            fmt::format("{}: the password file is empty", cfg.Locate("redis.password_file")));
      }
    }
    gw->limiter.redis = std::move(r);
  }
  gw->limiter.state_path = gw->state_path;
  Status s = Limiter::Validate(gw->limiter);
  if (!s.ok()) return InvalidArgument(fmt::format("{}: {}", gw->source, s.message()));
  return Status::Ok();
}

}  // namespace

std::string_view BalanceName(Balance b) {
  switch (b) {
    case Balance::kLeastRequest:
      return "least_request";
    case Balance::kRoundRobin:
      return "round_robin";
    case Balance::kWeighted:
      return "weighted";
  }
  return "least_request";
}

std::string_view ProtocolName(Protocol p) {
  switch (p) {
    case Protocol::kOpenAi:
      return "openai";
    case Protocol::kKserve:
      return "kserve";
    case Protocol::kHttp:
      return "http";
  }
  return "http";
}

Result<GatewayConfig> ParseGatewayConfig(std::string_view yaml, const std::string& origin) {
  ASSIGN_OR_RETURN(Config cfg, Config::LoadString(yaml, origin));
  RETURN_IF_ERROR(
      cfg.CheckKnownKeys("", {"listen", "workers", "tls", "limits", "zone", "backends", "pools",
                              "rollouts", "routes", "state", "auth", "roles", "rate_limits",
                              "quotas", "redis", "audit", "anomaly", "azure_monitor"}));
  GatewayConfig gw;
  gw.source = origin;
  ASSIGN_OR_RETURN(std::string listen, cfg.GetString("listen", "127.0.0.1:8080"));
  ASSIGN_OR_RETURN(auto hp, ParseHostPort(cfg, "listen", listen));
  gw.listen_host = hp.first;
  gw.listen_port = hp.second;
  ASSIGN_OR_RETURN(int64_t workers, cfg.GetInt("workers", 0));
  if (workers < 0 || workers > 1024) {
    return InvalidArgument(
        fmt::format("{}: must be 0 (one per CPU) to 1024", cfg.Locate("workers")));
  }
  gw.workers = static_cast<int>(workers);
  if (gw.workers == 0)
    gw.workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (cfg.Has("tls")) {
    RETURN_IF_ERROR(cfg.CheckKnownKeys("tls", {"cert", "key"}));
    ASSIGN_OR_RETURN(gw.tls.cert_path, cfg.GetString("tls.cert", ""));
    ASSIGN_OR_RETURN(gw.tls.key_path, cfg.GetString("tls.key", ""));
    if (gw.tls.cert_path.empty() || gw.tls.key_path.empty()) {
      return InvalidArgument(fmt::format("{}: tls needs both cert and key", cfg.Locate("tls")));
    }
    gw.tls.cert_path = Resolve(origin, gw.tls.cert_path);
    gw.tls.key_path = Resolve(origin, gw.tls.key_path);
  }
  RETURN_IF_ERROR(ParseLimits(cfg, &gw.limits));
  ASSIGN_OR_RETURN(gw.zone, cfg.GetString("zone", ""));
  RETURN_IF_ERROR(ParseBackends(cfg, &gw));
  RETURN_IF_ERROR(ParsePools(cfg, &gw));
  RETURN_IF_ERROR(ParseRollouts(cfg, &gw));
  RETURN_IF_ERROR(ParseRoutes(cfg, &gw));
  ASSIGN_OR_RETURN(gw.anomaly, ParseAnomalyConfig(cfg, "anomaly"));
  ASSIGN_OR_RETURN(gw.state_path, cfg.GetString("state", "gateway.db"));
  gw.state_path = Resolve(origin, gw.state_path);
  RETURN_IF_ERROR(ParseAuth(cfg, &gw));
  RETURN_IF_ERROR(ParseRoles(cfg, &gw));
  RETURN_IF_ERROR(ParseRateLimits(cfg, &gw));
  if (cfg.Has("audit")) {
    RETURN_IF_ERROR(cfg.CheckKnownKeys(
        "audit", {"path", "signing_key", "checkpoint_every", "checkpoint_interval"}));
    ASSIGN_OR_RETURN(gw.audit.path, cfg.GetString("audit.path", ""));
    if (gw.audit.path.empty()) {
      return InvalidArgument(fmt::format("{}: audit needs a path", cfg.Locate("audit")));
    }
    gw.audit.path = Resolve(origin, gw.audit.path);
    ASSIGN_OR_RETURN(gw.audit.signing_key_path, cfg.GetString("audit.signing_key", ""));
    gw.audit.signing_key_path = Resolve(origin, gw.audit.signing_key_path);
    ASSIGN_OR_RETURN(int64_t every, cfg.GetInt("audit.checkpoint_every", 1000));
    if (every < 1) {
      return InvalidArgument(
          fmt::format("{}: must be at least 1", cfg.Locate("audit.checkpoint_every")));
    }
    gw.audit.checkpoint_every = static_cast<uint64_t>(every);
    ASSIGN_OR_RETURN(auto iv,
                     cfg.GetDuration("audit.checkpoint_interval", std::chrono::seconds(10)));
    gw.audit.checkpoint_interval_s = std::chrono::duration<double>(iv).count();
  }
  ASSIGN_OR_RETURN(gw.azure_monitor_logs,
                   monitor::ParseAzureMonitorLogs(cfg, "azure_monitor",
                                                  fs::path(origin).parent_path().string()));
  return gw;
}

Result<GatewayConfig> LoadGatewayConfig(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseGatewayConfig(text, path);
}

}  // namespace gantry::gateway
