// `gantry gateway run|check|keys|token`: flags, then the gateway library.
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>

#include <ctime>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "gantry/core/http_client.h"
#include "gantry/core/json.h"
#include "gantry/core/log.h"
#include "gantry/core/table.h"
#include "gantry/core/units.h"
#include "gantry/gateway/config.h"
#include "gantry/gateway/server.h"
#include "gantry/security/jwt.h"
#include "gantry/security/key_store.h"

namespace gantry::cli {
namespace {

using nlohmann::json;

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
};

int Fail(const Status& s, int code = kExitUsage) {
  std::cerr << "gantry gateway: " << s.message() << "\n";
  return code;
}

int64_t Now() { return static_cast<int64_t>(std::time(nullptr)); }

int64_t MTime(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

int RunGateway(const GatewayFlags& f) {
  if (f.config.empty()) return Fail(InvalidArgument("--config is required"));
  Result<gateway::GatewayConfig> cfg = gateway::LoadGatewayConfig(f.config);
  if (!cfg.ok()) return Fail(cfg.status());
  // Signals are taken by this thread with sigtimedwait; block them before any
  // thread starts so that none of the workers receives them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Result<std::unique_ptr<gateway::Gateway>> gw = gateway::Gateway::Create(std::move(*cfg));
  if (!gw.ok()) return Fail(gw.status());
  Status s = (*gw)->Start();
  if (!s.ok()) return Fail(s);
  std::cout << "gantry gateway listening on " << (*gw)->url() << std::endl;
  log::info("gateway: listening on {}", (*gw)->url());

  int64_t mtime = MTime(f.config);
  auto reload = [&](const char* why) {
    Result<gateway::GatewayConfig> next = gateway::LoadGatewayConfig(f.config);
    Status r = next.ok() ? (*gw)->Reload(std::move(*next)) : next.status();
    if (r.ok()) {
      log::warn("gateway: configuration reloaded ({})", why);
    } else {
      log::error("gateway: reload ({}) refused, keeping the running configuration: {}", why,
                 r.message());
    }
  };
  for (;;) {
    timespec one_second{1, 0};
    int sig = sigtimedwait(&set, nullptr, &one_second);
    if (sig == SIGTERM || sig == SIGINT) {
      log::warn("gateway: {} received, draining for up to {} ms", sig == SIGTERM ? "SIGTERM" : "SIGINT",
                f.grace_ms);
      break;
    }
    if (sig == SIGHUP) {
      mtime = MTime(f.config);
      reload("SIGHUP");
      continue;
    }
    // Every second: keys edited by another process, and the config file.
    Status k = (*gw)->RefreshKeys();
    if (!k.ok()) log::error("gateway: cannot refresh API keys: {}", k.message());
    int64_t m = MTime(f.config);
    if (m != 0 && m != mtime) {
      mtime = m;
      reload("file changed");
    }
  }
  (*gw)->Stop(f.grace_ms);
  (*gw)->Wait();
  return kExitOk;
}

int RunCheck(const GatewayFlags& f) {
  if (f.config.empty()) return Fail(InvalidArgument("--config is required"));
  Result<gateway::GatewayConfig> cfg = gateway::LoadGatewayConfig(f.config);
  if (!cfg.ok()) return Fail(cfg.status());
  if (f.common.json) {
    std::cout << json{{"ok", true},
                      {"config", f.config},
                      {"routes", cfg->routes.size()},
                      {"backends", cfg->backends.size()},
                      {"roles", cfg->roles.size()}}
                     .dump()
              << "\n";
  } else {
    std::cout << fmt::format("{}: ok ({} routes, {} backends, {} roles, {} rate limits, {} quotas)\n",
                             f.config, cfg->routes.size(), cfg->backends.size(), cfg->roles.size(),
                             cfg->limiter.rate_limits.size(), cfg->limiter.quotas.size());
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

json KeyJson(const security::ApiKeyInfo& k) {
  return json{{"id", k.id},         {"name", k.name},           {"role", k.role},
              {"created", k.created_unix}, {"expires", k.expires_unix}, {"revoked", k.revoked_unix}};
}

// Online: the admin API of a running gateway.
Result<json> Admin(const GatewayFlags& f, std::string method, std::string path, json body) {
  if (f.admin_key.empty()) {
    return InvalidArgument("--admin-key (a key whose role has action 'admin') is required with --url");
  }
  http::Request req;
  req.method = std::move(method);
  req.url = f.url + path;
  req.headers = {{"Authorization", "Bearer " + f.admin_key}, {"Content-Type", "application/json"}};
  if (!body.is_null()) req.body = body.dump();
  req.deadline = std::chrono::seconds(10);
  ASSIGN_OR_RETURN(http::Response resp, http::Send(req));
  json j = json::parse(resp.body, nullptr, false);
  if (resp.status >= 400) {
    std::string msg = resp.body;
    if (!j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_object() &&
        j["error"].contains("message") && j["error"]["message"].is_string()) {
      msg = j["error"]["message"].get<std::string>();
    }
    return Status(resp.status == 404 ? StatusCode::kNotFound : StatusCode::kFailedPrecondition,
                  fmt::format("{} {}: HTTP {}: {}", req.method, path, resp.status, msg));
  }
  if (j.is_discarded()) return DataLoss(fmt::format("{}: response is not JSON", req.url));
  return j;
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
  if (!expires_in.ok()) return Fail(expires_in.status());
  if (!f.url.empty()) {
    json body{{"name", f.name}, {"role", f.role}};
    if (*expires_in > 0) body["expires_in_s"] = *expires_in;
    Result<json> r = Admin(f, "POST", "/admin/keys", body);
    if (!r.ok()) return Fail(r.status(), kExitCheckFailed);
    PrintNewKey(*r, f.common.json);
    return kExitOk;
  }
  Result<std::string> state = StatePath(f);
  if (!state.ok()) return Fail(state.status());
  // Offline, the role is checked against the config when there is one.
  if (!f.config.empty()) {
    Result<gateway::GatewayConfig> cfg = gateway::LoadGatewayConfig(f.config);
    if (!cfg.ok()) return Fail(cfg.status());
    bool known = false;
    for (const auto& r : cfg->roles) known = known || r.name == f.role;
    if (!known) {
      return Fail(InvalidArgument(fmt::format("role '{}' is not defined in {}", f.role, f.config)));
    }
  }
  Result<std::unique_ptr<security::KeyStore>> ks = security::KeyStore::Open(*state);
  if (!ks.ok()) return Fail(ks.status());
  int64_t now = Now();
  auto created = (*ks)->Create(f.name, f.role, *expires_in > 0 ? now + *expires_in : 0, now);
  if (!created.ok()) return Fail(created.status());
  json k = KeyJson(created->first);
  k["key"] = created->second;
  PrintNewKey(k, f.common.json);
  return kExitOk;
}

int RunKeysList(const GatewayFlags& f) {
  if (!f.url.empty()) {
    Result<json> r = Admin(f, "GET", "/admin/keys", nullptr);
    if (!r.ok()) return Fail(r.status(), kExitCheckFailed);
    PrintKeys((*r)["keys"], f.common.json);
    return kExitOk;
  }
  Result<std::string> state = StatePath(f);
  if (!state.ok()) return Fail(state.status());
  Result<std::unique_ptr<security::KeyStore>> ks = security::KeyStore::Open(*state);
  if (!ks.ok()) return Fail(ks.status());
  Result<std::vector<security::ApiKeyInfo>> keys = (*ks)->List();
  if (!keys.ok()) return Fail(keys.status());
  json arr = json::array();
  for (const auto& k : *keys) arr.push_back(KeyJson(k));
  PrintKeys(arr, f.common.json);
  return kExitOk;
}

int RunKeysRotate(const GatewayFlags& f) {
  Result<int64_t> grace = DurationSeconds(f.grace, "--grace");
  if (!grace.ok()) return Fail(grace.status());
  if (!f.url.empty()) {
    Result<json> r = Admin(f, "POST", "/admin/keys/" + f.id + "/rotate", json{{"grace_s", *grace}});
    if (!r.ok()) return Fail(r.status(), kExitCheckFailed);
    PrintNewKey(*r, f.common.json);
    return kExitOk;
  }
  Result<std::string> state = StatePath(f);
  if (!state.ok()) return Fail(state.status());
  Result<std::unique_ptr<security::KeyStore>> ks = security::KeyStore::Open(*state);
  if (!ks.ok()) return Fail(ks.status());
  auto rotated = (*ks)->Rotate(f.id, *grace, Now());
  if (!rotated.ok()) return Fail(rotated.status(), kExitCheckFailed);
  json k = KeyJson(rotated->first);
  k["key"] = rotated->second;
  k["replaces"] = f.id;
  PrintNewKey(k, f.common.json);
  return kExitOk;
}

int RunKeysRevoke(const GatewayFlags& f) {
  if (!f.url.empty()) {
    Result<json> r = Admin(f, "DELETE", "/admin/keys/" + f.id, nullptr);
    if (!r.ok()) return Fail(r.status(), kExitCheckFailed);
  } else {
    Result<std::string> state = StatePath(f);
    if (!state.ok()) return Fail(state.status());
    Result<std::unique_ptr<security::KeyStore>> ks = security::KeyStore::Open(*state);
    if (!ks.ok()) return Fail(ks.status());
    Status s = (*ks)->Revoke(f.id, Now());
    if (!s.ok()) return Fail(s, kExitCheckFailed);
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
    return Fail(InvalidArgument("--key-file is required (HS256 secret or RS256/ES256 private key PEM)"));
  }
  Result<std::string> key = ReadFile(f.key_file);
  if (!key.ok()) return Fail(key.status());
  std::string material = *key;
  if (f.alg == "HS256") {
    while (!material.empty() && (material.back() == '\n' || material.back() == '\r')) {
      material.pop_back();
    }
  }
  Result<int64_t> ttl = DurationSeconds(f.ttl, "--ttl");
  if (!ttl.ok()) return Fail(ttl.status());
  int64_t now = Now();
  json claims{{"iat", now}, {"exp", now + *ttl}};
  if (!f.subject.empty()) claims["sub"] = f.subject;
  if (!f.role.empty()) claims["role"] = f.role;
  if (!f.issuer.empty()) claims["iss"] = f.issuer;
  if (!f.audience.empty()) claims["aud"] = f.audience;
  Result<std::string> token = security::SignJwt(f.alg, material, f.kid, claims);
  if (!token.ok()) return Fail(token.status());
  std::cout << *token << "\n";
  return kExitOk;
}

}  // namespace

void RegisterGateway(CLI::App& app, Action* action) {
  auto flags = std::make_shared<GatewayFlags>();
  CLI::App* gw = app.add_subcommand(
      "gateway",
      "AI inference gateway: run, check a config, manage API keys (gantry gateway --help)");
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
    c->add_option("--url", flags->url, "Admin API of a running gateway, e.g. http://127.0.0.1:8080");
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
