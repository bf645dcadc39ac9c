// `gantry gateway run|check|keys|token|backends|drain|undrain|rollout|anomalies`:
// flags, then the gateway library or its admin API.
#include <fmt/format.h>
#include <unistd.h>

#include <charconv>
#include <ctime>
#include <iostream>
#include <memory>
#include <thread>

#include "cli.h"
#include "gantry/core/http_client.h"
#include "gantry/core/json.h"
#include "gantry/core/log.h"
#include "gantry/core/service.h"
#include "gantry/core/table.h"
#include "gantry/core/units.h"
#include "gantry/gateway/admin_client.h"
#include "gantry/gateway/config.h"
#include "gantry/gateway/server.h"
#include "gantry/gateway/service.h"
#include "gantry/security/jwt.h"
#include "gantry/security/key_store.h"

namespace gantry::cli {
namespace {

using json = Json;  // ordered: --json prints keys in the API's order

struct GatewayFlags {
  CommonFlags common;
  std::string config;
  std::string state;
  std::string url;
  std::string admin_key;
  std::string name;
  std::string role;
  std::string expires_in;
  std::string grace = "0s";
  std::string id;
  // token
  std::string alg = "HS256";
  std::string key_file;
  std::string kid;
  std::string subject;
  std::string issuer;
  std::string audience;
  std::string ttl = "1h";
  int grace_ms = 10000;
  // drain, rollout
  std::string backend;
  std::string rollout;
  std::vector<std::string> weights;  // pool=weight
  std::string pool;
  bool no_wait = false;
  std::string wait_timeout = "10m";
};

int64_t Now() { return static_cast<int64_t>(std::time(nullptr)); }

// SIGHUP or an edit of the file reloads; SIGTERM drains for --grace-ms.
int RunGateway(const GatewayFlags& f) {
  ServiceRunner runner({.watch = {f.config}, .grace = std::chrono::milliseconds(f.grace_ms)});
  Result<std::unique_ptr<gateway::GatewayService>> svc = gateway::GatewayService::Create(f.config);
  if (!svc.ok()) return Fail("gateway", svc.status());
  Status s = runner.Run(**svc);
  return s.ok() ? kExitOk : Fail("gateway", s);
}

// Pools written in the config (not the implicit one-backend pools).
size_t NamedPools(const gateway::GatewayConfig& cfg) {
  size_t n = 0;
  for (const gateway::PoolConfig& p : cfg.pools) n += p.implicit ? 0 : 1;
  return n;
}

int RunCheck(const GatewayFlags& f) {
  if (f.config.empty()) return Fail("gateway", InvalidArgument("--config is required"));
  Result<gateway::GatewayConfig> cfg = gateway::LoadGatewayConfig(f.config);
  if (!cfg.ok()) return Fail("gateway", cfg.status());
  if (f.common.json) {
    std::cout << json{{"ok", true},
                      {"config", f.config},
                      {"routes", cfg->routes.size()},
                      {"backends", cfg->backends.size()},
                      {"pools", NamedPools(*cfg)},
                      {"rollouts", cfg->rollouts.size()},
                      {"anomaly", cfg->anomaly.enabled},
                      {"roles", cfg->roles.size()}}
                     .dump()
              << "\n";
  } else {
    std::cout << fmt::format(
        "{}: ok ({} routes, {} backends, {} pools, {} rollouts, {} roles, {} rate limits, {} "
        "quotas, anomaly detection {})\n",
        f.config, cfg->routes.size(), cfg->backends.size(), NamedPools(*cfg), cfg->rollouts.size(),
        cfg->roles.size(), cfg->limiter.rate_limits.size(), cfg->limiter.quotas.size(),
        cfg->anomaly.enabled ? "on" : "off");
  }
  return kExitOk;
}

// The state file: --state, else the one named by --config.
Result<std::string> StatePath(const GatewayFlags& f) {
  if (!f.state.empty()) return f.state;
  if (!f.config.empty()) {
    ASSIGN_OR_RETURN(gateway::GatewayConfig cfg, gateway::LoadGatewayConfig(f.config));
    return cfg.state_path;
  }
  return InvalidArgument("say where the keys are: --state FILE, --config FILE or --url URL");
}

// Online: the admin API of a running gateway (--url, --admin-key).
Result<gateway::AdminClient> Admin(const GatewayFlags& f) {
  return gateway::AdminClient::Create(f.url, f.admin_key);
}

void PrintKeys(const json& keys, bool as_json) {
  if (as_json) {
    std::cout << json{{"keys", keys}}.dump(2) << "\n";
    return;
  }
  Table t({"ID", "NAME", "ROLE", "CREATED", "EXPIRES", "STATE"});
  int64_t now = Now();
  for (const json& k : keys) {
    int64_t exp = k.value("expires", int64_t{0});
    int64_t rev = k.value("revoked", int64_t{0});
    std::string state = rev != 0 ? "revoked" : (exp != 0 && exp <= now) ? "expired" : "active";
    auto when = [](int64_t t) -> std::string {
      if (t == 0) return "-";
      std::time_t tt = t;
      char buf[32];
      std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M", std::gmtime(&tt));
      return buf;
    };
    t.AddRow({k.value("id", ""), k.value("name", ""), k.value("role", ""),
              when(k.value("created", int64_t{0})), when(exp), state});
  }
  std::cout << t.Render();
}

void PrintNewKey(const json& k, bool as_json) {
  if (as_json) {
    std::cout << k.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format("id:   {}\nname: {}\nrole: {}\nkey:  {}\n", k.value("id", ""),
                           k.value("name", ""), k.value("role", ""), k.value("key", ""));
  std::cout << "The key is shown only now; store it in a secret store.\n";
}

Result<int64_t> DurationSeconds(const std::string& text, const char* flag) {
  if (text.empty()) return int64_t{0};
  Result<std::chrono::nanoseconds> d = ParseDuration(text);
  if (!d.ok()) return InvalidArgument(fmt::format("{} '{}': {}", flag, text, d.status().message()));
  return std::chrono::duration_cast<std::chrono::seconds>(*d).count();
}

int RunKeysCreate(const GatewayFlags& f) {
  Result<int64_t> expires_in = DurationSeconds(f.expires_in, "--expires-in");
  if (!expires_in.ok()) return Fail("gateway", expires_in.status());
  if (!f.url.empty()) {
    Result<gateway::AdminClient> admin = Admin(f);
    if (!admin.ok()) return Fail("gateway", admin.status());
    Result<json> r = admin->CreateKey(f.name, f.role, *expires_in);
    if (!r.ok()) return Fail("gateway", r.status());
    PrintNewKey(*r, f.common.json);
    return kExitOk;
  }
  Result<std::string> state = StatePath(f);
  if (!state.ok()) return Fail("gateway", state.status());
  // Offline, the role is checked against the config when there is one.
  if (!f.config.empty()) {
    Result<gateway::GatewayConfig> cfg = gateway::LoadGatewayConfig(f.config);
    if (!cfg.ok()) return Fail("gateway", cfg.status());
    bool known = false;
    for (const auto& r : cfg->roles) known = known || r.name == f.role;
    if (!known) {
      return Fail("gateway",
                  InvalidArgument(fmt::format("role '{}' is not defined in {}", f.role, f.config)));
    }
  }
  Result<std::unique_ptr<security::KeyStore>> ks = security::KeyStore::Open(*state);
  if (!ks.ok()) return Fail("gateway", ks.status());
  int64_t now = Now();
  auto created = (*ks)->Create(f.name, f.role, *expires_in > 0 ? now + *expires_in : 0, now);
  if (!created.ok()) return Fail("gateway", created.status());
  json k = security::PublicKeyJson(created->first);
  k["key"] = created->second;
  PrintNewKey(k, f.common.json);
  return kExitOk;
}

int RunKeysList(const GatewayFlags& f) {
  if (!f.url.empty()) {
    Result<gateway::AdminClient> admin = Admin(f);
    if (!admin.ok()) return Fail("gateway", admin.status());
    Result<json> r = admin->ListKeys();
    if (!r.ok()) return Fail("gateway", r.status());
    PrintKeys((*r)["keys"], f.common.json);
    return kExitOk;
  }
  Result<std::string> state = StatePath(f);
  if (!state.ok()) return Fail("gateway", state.status());
  Result<std::unique_ptr<security::KeyStore>> ks = security::KeyStore::Open(*state);
  if (!ks.ok()) return Fail("gateway", ks.status());
  Result<std::vector<security::ApiKeyInfo>> keys = (*ks)->List();
  if (!keys.ok()) return Fail("gateway", keys.status());
  json arr = json::array();
  for (const auto& k : *keys) arr.push_back(security::PublicKeyJson(k));
  PrintKeys(arr, f.common.json);
  return kExitOk;
}

int RunKeysRotate(const GatewayFlags& f) {
  Result<int64_t> grace = DurationSeconds(f.grace, "--grace");
  if (!grace.ok()) return Fail("gateway", grace.status());
  if (!f.url.empty()) {
    Result<gateway::AdminClient> admin = Admin(f);
    if (!admin.ok()) return Fail("gateway", admin.status());
    Result<json> r = admin->RotateKey(f.id, *grace);
    if (!r.ok()) return Fail("gateway", r.status());
    PrintNewKey(*r, f.common.json);
    return kExitOk;
  }
  Result<std::string> state = StatePath(f);
  if (!state.ok()) return Fail("gateway", state.status());
  Result<std::unique_ptr<security::KeyStore>> ks = security::KeyStore::Open(*state);
  if (!ks.ok()) return Fail("gateway", ks.status());
  auto rotated = (*ks)->Rotate(f.id, *grace, Now());
  if (!rotated.ok()) return Fail("gateway", rotated.status());
  json k = security::PublicKeyJson(rotated->first);
  k["key"] = rotated->second;
  k["replaces"] = f.id;
  PrintNewKey(k, f.common.json);
  return kExitOk;
}

int RunKeysRevoke(const GatewayFlags& f) {
  if (!f.url.empty()) {
    Result<gateway::AdminClient> admin = Admin(f);
    if (!admin.ok()) return Fail("gateway", admin.status());
    Result<json> r = admin->RevokeKey(f.id);
    if (!r.ok()) return Fail("gateway", r.status());
  } else {
    Result<std::string> state = StatePath(f);
    if (!state.ok()) return Fail("gateway", state.status());
    Result<std::unique_ptr<security::KeyStore>> ks = security::KeyStore::Open(*state);
    if (!ks.ok()) return Fail("gateway", ks.status());
    Status s = (*ks)->Revoke(f.id, Now());
    if (!s.ok()) return Fail("gateway", s);
  }
  if (f.common.json) {
    std::cout << json{{"id", f.id}, {"revoked", true}}.dump() << "\n";
  } else {
    std::cout << "revoked " << f.id << "\n";
  }
  return kExitOk;
}

int RunToken(const GatewayFlags& f) {
  if (f.key_file.empty()) {
    return Fail(
        "gateway",
        InvalidArgument("--key-file is required (HS256 secret or RS256/ES256 private key PEM)"));
  }
  Result<std::string> key = ReadFile(f.key_file);
  if (!key.ok()) return Fail("gateway", key.status());
  std::string material = *key;
  if (f.alg == "HS256") {
    while (!material.empty() && (material.back() == '\n' || material.back() == '\r')) {
      material.pop_back();
    }
  }
  Result<int64_t> ttl = DurationSeconds(f.ttl, "--ttl");
  if (!ttl.ok()) return Fail("gateway", ttl.status());
  int64_t now = Now();
  json claims{{"iat", now}, {"exp", now + *ttl}};
  if (!f.subject.empty()) claims["sub"] = f.subject;
  if (!f.role.empty()) claims["role"] = f.role;
  if (!f.issuer.empty()) claims["iss"] = f.issuer;
  if (!f.audience.empty()) claims["aud"] = f.audience;
  Result<std::string> token = security::SignJwt(f.alg, material, f.kid, claims);
  if (!token.ok()) return Fail("gateway", token.status());
  std::cout << *token << "\n";
  return kExitOk;
}

// --- pools, drain, rollouts, anomalies: the admin API of a running gateway ---

std::string BackendState(const json& b) {
  if (b.value("draining", false)) return "draining";
  if (b.value("ejected", false)) {
    return fmt::format("ejected ({}s left)", (b.value("ejected_for_ms", int64_t{0}) + 999) / 1000);
  }
  if (!b.value("healthy", true)) return "unhealthy";
  return "up";
}

void PrintBackends(const json& list) {
  Table t({"BACKEND", "ZONE", "ADDRESS", "STATE", "IN FLIGHT", "REQUESTS", "FAILURES", "EJECTIONS",
           "LAST HEALTH ERROR"});
  for (const json& b : list) {
    t.AddRow({b.value("name", ""), b.value("zone", "") == "" ? "-" : b.value("zone", ""),
              b.value("address", ""), BackendState(b),
              std::to_string(b.value("in_flight", int64_t{0})),
              std::to_string(b.value("requests", uint64_t{0})),
              std::to_string(b.value("failures", uint64_t{0})),
              std::to_string(b.value("ejections", uint64_t{0})),
              b.value("last_health_error", "") == "" ? "-" : b.value("last_health_error", "")});
  }
  std::cout << t.Render();
}

int RunBackends(const GatewayFlags& f) {
  Result<gateway::AdminClient> admin = Admin(f);
  if (!admin.ok()) return Fail("gateway", admin.status());
  Result<json> r = admin->Backends();
  if (!r.ok()) return Fail("gateway", r.status());
  if (f.common.json) {
    std::cout << r->dump(2) << "\n";
  } else {
    PrintBackends((*r)["backends"]);
  }
  return kExitOk;
}

// Stops new requests to a backend, then (unless --no-wait) waits until its
// requests in flight have finished: the backend is then safe to restart.
int RunDrain(const GatewayFlags& f) {
  Result<gateway::AdminClient> admin = Admin(f);
  if (!admin.ok()) return Fail("gateway", admin.status());
  Result<int64_t> timeout_s = DurationSeconds(f.wait_timeout, "--timeout");
  if (!timeout_s.ok()) return Fail("gateway", timeout_s.status());
  bool tty = !f.common.json && ::isatty(2);
  Result<json> r = f.no_wait
                       ? admin->Drain(f.backend)
                       : admin->DrainAndWait(
                             f.backend, std::chrono::seconds(*timeout_s), [&](int64_t in_flight) {
                               if (tty && in_flight > 0) {
                                 std::cerr << fmt::format("\rdraining {}: {} in flight   ",
                                                          f.backend, in_flight);
                               }
                             });
  if (tty) std::cerr << "\r\33[K";
  if (!r.ok()) return Fail("gateway", r.status());
  int64_t in_flight = r->value("in_flight", int64_t{0});
  if (f.common.json) {
    json out = *r;
    out["safe_to_restart"] = in_flight == 0;
    std::cout << out.dump(2) << "\n";
  } else if (in_flight == 0) {
    std::cout << fmt::format(
        "backend '{}' drained: no requests in flight; safe to restart (then: gantry gateway "
        "undrain {})\n",
        f.backend, f.backend);
  } else {
    std::cout << fmt::format("backend '{}' draining: {} requests still in flight\n", f.backend,
                             in_flight);
  }
  return kExitOk;
}

int RunUndrain(const GatewayFlags& f) {
  Result<gateway::AdminClient> admin = Admin(f);
  if (!admin.ok()) return Fail("gateway", admin.status());
  Result<json> r = admin->Undrain(f.backend);
  if (!r.ok()) return Fail("gateway", r.status());
  if (f.common.json) {
    std::cout << r->dump(2) << "\n";
  } else {
    std::cout << fmt::format("backend '{}' back in service ({})\n", f.backend, BackendState(*r));
  }
  return kExitOk;
}

std::string WeightsText(const json& pairs) {
  // [["pool", weight], ...] -> "pool=90 pool2=10"
  std::string out;
  if (!pairs.is_array()) return out;
  for (const json& p : pairs) {
    if (!p.is_array() || p.size() != 2) continue;
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", p[0].get<std::string>(),
                       p[1].get<uint64_t>());
  }
  return out.empty() ? "-" : out;
}

void PrintRollouts(const json& list) {
  Table t({"ROLLOUT", "WEIGHTS", "PREVIOUS", "CONFIGURED", "STICKY", "CHANGES"});
  for (const json& r : list) {
    t.AddRow({r.value("name", ""), WeightsText(r.value("weights", json::array())),
              WeightsText(r.value("previous", json::array())),
              WeightsText(r.value("configured", json::array())), r.value("sticky", "none"),
              std::to_string(r.value("changes", uint64_t{0}))});
  }
  std::cout << t.Render();
}

int PrintRolloutResult(const GatewayFlags& f, const Result<json>& r) {
  if (!r.ok()) return Fail("gateway", r.status());
  if (f.common.json) {
    std::cout << r->dump(2) << "\n";
  } else if (r->contains("rollouts")) {
    PrintRollouts((*r)["rollouts"]);
  } else {
    PrintRollouts(json::array({*r}));
  }
  return kExitOk;
}

int RunRolloutShow(const GatewayFlags& f) {
  Result<gateway::AdminClient> admin = Admin(f);
  if (!admin.ok()) return Fail("gateway", admin.status());
  return PrintRolloutResult(f, f.rollout.empty() ? admin->Rollouts() : admin->Rollout(f.rollout));
}

int RunRolloutSet(const GatewayFlags& f) {
  Result<gateway::AdminClient> admin = Admin(f);
  if (!admin.ok()) return Fail("gateway", admin.status());
  std::vector<std::pair<std::string, uint64_t>> weights;
  for (const std::string& w : f.weights) {
    size_t eq = w.find('=');
    uint64_t v = 0;
    const char* b = w.data() + (eq == std::string::npos ? 0 : eq + 1);
    auto [end, ec] = std::from_chars(b, w.data() + w.size(), v);
    if (eq == std::string::npos || eq == 0 || ec != std::errc() || end != w.data() + w.size()) {
      return Fail("gateway",
                  InvalidArgument(fmt::format(
                      "'{}': weights are POOL=WEIGHT, e.g. llama-v1=90 llama-v2=10", w)));
    }
    weights.emplace_back(w.substr(0, eq), v);
  }
  return PrintRolloutResult(f, admin->SetRolloutWeights(f.rollout, weights));
}

// Blue-green: all traffic to one pool of the rollout at once.
int RunRolloutSwitch(const GatewayFlags& f) {
  Result<gateway::AdminClient> admin = Admin(f);
  if (!admin.ok()) return Fail("gateway", admin.status());
  return PrintRolloutResult(f, admin->SetRolloutWeights(f.rollout, {{f.pool, 100}}));
}

int RunRolloutRollback(const GatewayFlags& f) {
  Result<gateway::AdminClient> admin = Admin(f);
  if (!admin.ok()) return Fail("gateway", admin.status());
  return PrintRolloutResult(f, admin->RollbackRollout(f.rollout));
}

int RunAnomalies(const GatewayFlags& f) {
  Result<gateway::AdminClient> admin = Admin(f);
  if (!admin.ok()) return Fail("gateway", admin.status());
  Result<json> r = admin->Anomalies();
  if (!r.ok()) return Fail("gateway", r.status());
  if (f.common.json) {
    std::cout << r->dump(2) << "\n";
    return kExitOk;
  }
  if (!r->value("enabled", false)) {
    std::cout << "anomaly detection is off (add an `anomaly:` section to the config)\n";
    return kExitOk;
  }
  Table t({"MODEL", "VERSION", "SIGNAL", "VALUE", "BAND", "STATE", "VIOLATIONS", "WINDOWS"});
  for (const json& s : (*r)["signals"]) {
    std::string state = s.value("firing", false)  ? "FIRING"
                        : s.value("ready", false) ? "ok"
                                                  : "learning";
    std::string band =
        s.value("ready", false)
            ? fmt::format("{:.4g} .. {:.4g}", s.value("lower", 0.0), s.value("upper", 0.0))
            : s.value("not_ready_reason", "");
    t.AddRow({s.value("model", ""), s.value("version", "") == "" ? "-" : s.value("version", ""),
              s.value("signal", ""), fmt::format("{:.4g}", s.value("value", 0.0)), band, state,
              std::to_string(s.value("recent_violations", 0)),
              std::to_string(s.value("windows", uint64_t{0}))});
  }
  std::cout << t.Render();
  return kExitOk;
}

}  // namespace

void RegisterGateway(CLI::App& app, Action* action) {
  auto flags = std::make_shared<GatewayFlags>();
  CLI::App* gw = app.add_subcommand(
      "gateway",
      "AI inference gateway: run, check a config, API keys, backends and drain, rollouts, "
      "anomalies (gantry gateway --help)");
  gw->require_subcommand(1);
  auto set = [&](CLI::App* c, int (*fn)(const GatewayFlags&)) {
    AddCommonFlags(c, &flags->common);
    c->callback([flags, action, fn] {
      *action = [flags, fn] {
        if (!ApplyCommonFlags(flags->common)) return kExitUsage;
        return fn(*flags);
      };
    });
  };

  CLI::App* run = gw->add_subcommand(
      "run",
      "Serve: gantry gateway run --config gateway.yaml. Prints 'gantry gateway listening on URL' "
      "when ready; SIGHUP or an edit of the file reloads; SIGTERM drains and stops");
  run->add_option("--config,-c", flags->config, "gateway.yaml (see docs/gateway.md)")->required();
  run->add_option("--grace-ms", flags->grace_ms, "How long SIGTERM waits for in-flight requests")
      ->capture_default_str();
  set(run, RunGateway);

  CLI::App* check = gw->add_subcommand("check", "Validate a config file (exit 2 with the reason)");
  check->add_option("--config,-c", flags->config, "gateway.yaml")->required();
  set(check, RunCheck);

  CLI::App* keys = gw->add_subcommand(
      "keys",
      "API keys: offline on the state file (--state or --config), or online through a running "
      "gateway's admin API (--url and --admin-key)");
  keys->require_subcommand(1);
  auto where = [&](CLI::App* c) {
    c->add_option("--state", flags->state, "SQLite state file of the gateway");
    c->add_option("--config,-c", flags->config, "gateway.yaml (for its state file and roles)");
    c->add_option("--url", flags->url,
                  "Admin API of a running gateway, e.g. http://127.0.0.1:8080");
    c->add_option("--admin-key", flags->admin_key, "Key with the admin action, for --url")
        ->envname("GANTRY_ADMIN_KEY");
  };
  CLI::App* create = keys->add_subcommand("create", "Create a key (shown once)");
  where(create);
  create->add_option("--name", flags->name, "Who or what the key is for")->required();
  create->add_option("--role", flags->role, "A role defined in the config")->required();
  create->add_option("--expires-in", flags->expires_in, "Lifetime, e.g. 90d (default: never)");
  set(create, RunKeysCreate);
  CLI::App* list = keys->add_subcommand("list", "List keys (never the secrets)");
  where(list);
  set(list, RunKeysList);
  CLI::App* rotate = keys->add_subcommand(
      "rotate", "Issue a new key with the same name and role; the old one expires after --grace");
  where(rotate);
  rotate->add_option("id", flags->id, "Key id")->required();
  rotate->add_option("--grace", flags->grace, "How long the old key keeps working, e.g. 1h")
      ->capture_default_str();
  set(rotate, RunKeysRotate);
  CLI::App* revoke = keys->add_subcommand("revoke", "Revoke a key now");
  where(revoke);
  revoke->add_option("id", flags->id, "Key id")->required();
  set(revoke, RunKeysRevoke);

  // The admin API of a running gateway: --url and --admin-key.
  auto online = [&](CLI::App* c) {
    c->add_option("--url", flags->url, "The running gateway, e.g. http://127.0.0.1:8080")
        ->envname("GANTRY_GATEWAY_URL");
    c->add_option("--admin-key", flags->admin_key, "Key with the admin action")
        ->envname("GANTRY_ADMIN_KEY");
  };
  CLI::App* backends = gw->add_subcommand(
      "backends",
      "Backends of the pools: state (up, unhealthy, ejected, draining), load, failures");
  online(backends);
  set(backends, RunBackends);
  CLI::App* drain = gw->add_subcommand(
      "drain",
      "Stop sending new requests to a backend and wait until its requests in flight finish "
      "(then it is safe to restart; exit 1 if --timeout passes first)");
  online(drain);
  drain->add_option("backend", flags->backend, "Backend name from the config")->required();
  drain->add_flag("--no-wait", flags->no_wait, "Return at once instead of waiting");
  drain->add_option("--timeout", flags->wait_timeout, "How long to wait, e.g. 5m")
      ->capture_default_str();
  set(drain, RunDrain);
  CLI::App* undrain = gw->add_subcommand("undrain", "Return a drained backend to service");
  online(undrain);
  undrain->add_option("backend", flags->backend, "Backend name from the config")->required();
  set(undrain, RunUndrain);

  CLI::App* rollout = gw->add_subcommand(
      "rollout", "Traffic split between pools (canary, A/B, blue-green), changed at run time");
  rollout->require_subcommand(1);
  CLI::App* rshow = rollout->add_subcommand("show", "Current, previous and configured weights");
  online(rshow);
  rshow->add_option("name", flags->rollout, "Rollout name (default: all)");
  set(rshow, RunRolloutShow);
  CLI::App* rset = rollout->add_subcommand(
      "set",
      "Set weights: gantry gateway rollout set llama llama-v1=90 llama-v2=10 (others get 0)");
  online(rset);
  rset->add_option("name", flags->rollout, "Rollout name")->required();
  rset->add_option("weights", flags->weights, "POOL=WEIGHT ...")->required();
  set(rset, RunRolloutSet);
  CLI::App* rswitch = rollout->add_subcommand(
      "switch",
      "Blue-green: send all traffic to one pool (gantry gateway rollout switch llama green)");
  online(rswitch);
  rswitch->add_option("name", flags->rollout, "Rollout name")->required();
  rswitch->add_option("pool", flags->pool, "Pool that takes all traffic")->required();
  set(rswitch, RunRolloutSwitch);
  CLI::App* rback =
      rollout->add_subcommand("rollback", "Go back to the weights before the last change");
  online(rback);
  rback->add_option("name", flags->rollout, "Rollout name")->required();
  set(rback, RunRolloutRollback);

  CLI::App* anomalies = gw->add_subcommand(
      "anomalies", "Output anomaly detection: each model signal's value, band and state");
  online(anomalies);
  set(anomalies, RunAnomalies);

  CLI::App* token = gw->add_subcommand("token", "Sign a JWT for testing a gateway's JWT setup");
  token->add_option("--alg", flags->alg, "HS256, RS256 or ES256")->capture_default_str();
  token->add_option("--key-file", flags->key_file, "HS256 secret file or RS256/ES256 private PEM")
      ->required();
  token->add_option("--kid", flags->kid, "Key id header");
  token->add_option("--sub", flags->subject, "Subject claim");
  token->add_option("--role", flags->role, "Role claim");
  token->add_option("--iss", flags->issuer, "Issuer claim");
  token->add_option("--aud", flags->audience, "Audience claim");
  token->add_option("--ttl", flags->ttl, "Lifetime")->capture_default_str();
  set(token, RunToken);
}

}  // namespace gantry::cli
