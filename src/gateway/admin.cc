// The admin API: API keys, usage, backends (drain), rollouts and anomalies. Runs on the worker that
// received the request; the key store is SQLite and takes a few hundred microseconds per write,
// which is fine for an operator's calls but is why it is never on the proxy path.
#include <arpa/inet.h>
#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <ctime>
#include <nlohmann/json.hpp>

#include "anomaly.h"
#include "gantry/core/log.h"
#include "internal.h"
#include "pool.h"

namespace gantry::gateway::internal {
namespace {

using nlohmann::json;

LocalResponse Json(int status, const json& j) {
  LocalResponse r;
  r.status = status;
  r.body = j.dump();
  return r;
}

// The pool and rollout views are built as ordered JSON (gantry::Json).
LocalResponse OrderedJson(int status, const gantry::Json& j) {
  LocalResponse r;
  r.status = status;
  r.body = j.dump();
  return r;
}

LocalResponse FromStatus(const Status& s) {
  switch (s.code()) {
    case StatusCode::kNotFound:
      return ErrorResponse(404, "not_found", s.message());
    case StatusCode::kInvalidArgument:
      return ErrorResponse(400, "invalid_request", s.message());
    case StatusCode::kFailedPrecondition:
    case StatusCode::kAlreadyExists:
      return ErrorResponse(409, "conflict", s.message());
    default:
      return ErrorResponse(500, "internal", s.message());
  }
}

bool Allowed(const Runtime& rt, const Identity& who, std::string_view action) {
  for (const std::string& r : who.roles) {
    if (rt.policy.Allowed(r, action, "*")) return true;
  }
  return false;
}

// Publishes the key table right away so a new key works on the next request
// and a revoked one stops working, on every worker.
void RepublishKeys(Shared& shared) {
  Result<std::shared_ptr<const security::KeyTable>> t = shared.key_store->Snapshot();
  if (t.ok()) {
    shared.m.keys_loaded->Set(static_cast<double>((*t)->size()));
    shared.Publish(nullptr, std::move(*t));
  }
}

// The longest key lifetime or rotation grace the API accepts (100 years): now +
// a larger value could overflow int64 seconds.
constexpr int64_t kMaxSeconds = int64_t{100} * 365 * 24 * 3600;

Result<json> ParseBody(std::string_view body) {
  if (body.empty()) return json::object();
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("body must be a JSON object");
  return j;
}

// "/admin/keys/<id>[/rotate]" -> id and the rest.
bool SplitKeyPath(std::string_view path, std::string_view* id, std::string_view* rest) {
  constexpr std::string_view kPrefix = "/admin/keys/";
  if (!path.starts_with(kPrefix)) return false;
  path.remove_prefix(kPrefix.size());
  size_t slash = path.find('/');
  *id = path.substr(0, slash);
  *rest = slash == std::string_view::npos ? std::string_view() : path.substr(slash);
  return !id->empty();
}

std::string QueryValue(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view kv = query.substr(0, amp);
    size_t eq = kv.find('=');
    if (kv.substr(0, eq) == name && eq != std::string_view::npos) {
      return std::string(kv.substr(eq + 1));
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return "";
}

// "/admin/<kind>/<name>[/<verb>]" -> name and verb.
bool SplitNamePath(std::string_view path, std::string_view prefix, std::string_view* name,
                   std::string_view* verb) {
  if (!path.starts_with(prefix)) return false;
  path.remove_prefix(prefix.size());
  size_t slash = path.find('/');
  *name = path.substr(0, slash);
  *verb = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
  return !name->empty() && verb->find('/') == std::string_view::npos;
}

// /admin/backends[/{name}[/drain|/undrain]]: what `gantry gateway drain` uses.
LocalResponse HandleBackends(Shared& shared, std::string_view path, std::string_view method) {
  Balancer& bal = *shared.balancer;
  if (path == "/admin/backends") {
    if (method != "GET") return ErrorResponse(405, "method_not_allowed", "use GET");
    gantry::Json out = gantry::Json::array();
    for (const BackendStatus& b : bal.Backends()) out.push_back(BackendStatusJson(b));
    return OrderedJson(200, gantry::Json{{"backends", out}});
  }
  std::string_view name, verb;
  if (!SplitNamePath(path, "/admin/backends/", &name, &verb)) {
    return ErrorResponse(404, "not_found", fmt::format("no admin endpoint {}", path));
  }
  if (verb.empty()) {
    if (method != "GET") return ErrorResponse(405, "method_not_allowed", "use GET");
  } else if (verb == "drain" || verb == "undrain") {
    if (method != "POST") return ErrorResponse(405, "method_not_allowed", "use POST");
    Status s = bal.SetDraining(name, verb == "drain");
    if (!s.ok()) return FromStatus(s);
    log::info("gateway: backend '{}' {} by the admin API", name,
              verb == "drain" ? "drained" : "returned to service");
  } else {
    return ErrorResponse(404, "not_found",
                         fmt::format("no admin endpoint {} (drain or undrain)", path));
  }
  Result<BackendStatus> b = bal.Backend(name);
  if (!b.ok()) return FromStatus(b.status());
  return OrderedJson(200, BackendStatusJson(*b));
}

// A backend of POST /admin/pools/{pool}/backends: {"name", "address":
// "host:port"[, "zone", "weight"]}. InvalidArgument naming the field.
Result<BackendConfig> BackendFromJson(const json& j) {
  for (const auto& [key, value] : j.items()) {
    if (key != "name" && key != "address" && key != "zone" && key != "weight") {
      return InvalidArgument(
          fmt::format("unknown field '{}' (a backend has name, address, zone and weight)", key));
    }
  }
  BackendConfig b;
  if (!j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>().empty()) {
    return InvalidArgument("`name` is required: a non-empty string such as \"llm-20001\"");
  }
  b.name = j["name"].get<std::string>();
  for (char c : b.name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return InvalidArgument(
          fmt::format("`name` '{}' may hold only letters, digits, '-', '_' and '.'", b.name));
    }
  }
  if (b.name.size() > 128) return InvalidArgument("`name` is longer than 128 characters");
  if (!j.contains("address") || !j["address"].is_string()) {
    return InvalidArgument("`address` is required: \"host:port\" such as \"127.0.0.1:20001\"");
  }
  std::string address = j["address"].get<std::string>();
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgument(
        fmt::format("`address` must be host:port such as 127.0.0.1:20001, got '{}'", address));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::string_view port_text = std::string_view(address).substr(colon + 1);
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 ||
      port > 65535) {
    return InvalidArgument(
        fmt::format("`address` '{}': the port must be a number 1-65535", address));
  }
  unsigned char buf[16];
  bool v6 = ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
  if (host != "localhost" && !v6 && ::inet_pton(AF_INET, host.c_str(), buf) != 1) {
    return InvalidArgument(fmt::format(
        "`address` '{}': the host must be a numeric IP address or localhost (names are not "
        "resolved)",
        address));
  }
  b.host = host;
  b.port = static_cast<uint16_t>(port);
  b.host_header = v6 ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
  if (j.contains("zone")) {
    if (!j["zone"].is_string()) return InvalidArgument("`zone` must be a string");
    b.zone = j["zone"].get<std::string>();
  }
  if (j.contains("weight")) {
    if (!j["weight"].is_number_integer() || j["weight"].get<int64_t>() < 1 ||
        j["weight"].get<int64_t>() > 1000) {
      return InvalidArgument("`weight` must be an integer 1-1000");
    }
    b.weight = static_cast<uint32_t>(j["weight"].get<int64_t>());
  }
  return b;
}

// /admin/pools[/{pool}[/backends[/{name}]]]: what `gantry autoscale`'s gateway
// actuator uses to add and remove backends at run time.
LocalResponse HandlePools(Shared& shared, const http::RequestHead& req, std::string_view body) {
  std::string_view path = req.path;
  std::string_view method = req.method;
  Balancer& bal = *shared.balancer;
  if (path == "/admin/pools") {
    if (method != "GET") return ErrorResponse(405, "method_not_allowed", "use GET");
    gantry::Json out = gantry::Json::array();
    for (const PoolStatus& p : bal.Pools()) out.push_back(PoolStatusJson(p));
    return OrderedJson(200, gantry::Json{{"pools", out}});
  }
  constexpr std::string_view kPrefix = "/admin/pools/";
  std::string_view rest = path.substr(kPrefix.size());
  size_t slash = rest.find('/');
  std::string_view pool = rest.substr(0, slash);
  std::string_view sub = slash == std::string_view::npos ? "" : rest.substr(slash);
  if (pool.empty())
    return ErrorResponse(404, "not_found", fmt::format("no admin endpoint {}", path));
  auto pool_json = [&]() -> LocalResponse {
    for (const PoolStatus& p : bal.Pools()) {
      if (p.name == pool) return OrderedJson(200, PoolStatusJson(p));
    }
    return ErrorResponse(404, "not_found", fmt::format("no pool '{}'", pool));
  };
  if (sub.empty()) {
    if (method != "GET") return ErrorResponse(405, "method_not_allowed", "use GET");
    return pool_json();
  }
  if (sub == "/backends") {
    if (method != "POST") {
      return ErrorResponse(405, "method_not_allowed",
                           "use POST /admin/pools/{pool}/backends with {\"name\", \"address\"}");
    }
    Result<json> j = ParseBody(body);
    if (!j.ok()) return FromStatus(j.status());
    Result<BackendConfig> b = BackendFromJson(*j);
    if (!b.ok()) return FromStatus(b.status());
    std::string name = b->name;
    Status s = AddPoolBackend(shared, pool, std::move(*b));
    if (!s.ok()) return FromStatus(s);
    Result<BackendStatus> st = bal.Backend(name);
    if (!st.ok()) return FromStatus(st.status());
    gantry::Json out = BackendStatusJson(*st);
    out["pool"] = std::string(pool);
    LocalResponse r = OrderedJson(201, out);
    return r;
  }
  constexpr std::string_view kBackends = "/backends/";
  if (sub.starts_with(kBackends) && sub.size() > kBackends.size() &&
      sub.substr(kBackends.size()).find('/') == std::string_view::npos) {
    std::string_view name = sub.substr(kBackends.size());
    if (method != "DELETE") {
      return ErrorResponse(405, "method_not_allowed",
                           "use DELETE /admin/pools/{pool}/backends/{name}[?force=true]");
    }
    std::string force = QueryValue(req.query, "force");
    if (!force.empty() && force != "true" && force != "false") {
      return ErrorResponse(400, "invalid_request", "`force` must be true or false");
    }
    Status s = RemovePoolBackend(shared, pool, name, force == "true");
    if (!s.ok()) return FromStatus(s);
    return Json(200, json{{"pool", std::string(pool)}, {"removed", std::string(name)}});
  }
  return ErrorResponse(404, "not_found", fmt::format("no admin endpoint {}", path));
}

// /admin/rollouts[/{name}[/rollback]]: weights of canary / blue-green splits.
LocalResponse HandleRollouts(Shared& shared, std::string_view path, std::string_view method,
                             std::string_view body) {
  Balancer& bal = *shared.balancer;
  if (path == "/admin/rollouts") {
    if (method != "GET") return ErrorResponse(405, "method_not_allowed", "use GET");
    gantry::Json out = gantry::Json::array();
    for (const RolloutStatus& r : bal.Rollouts()) out.push_back(RolloutStatusJson(r));
    return OrderedJson(200, gantry::Json{{"rollouts", out}});
  }
  std::string_view name, verb;
  if (!SplitNamePath(path, "/admin/rollouts/", &name, &verb)) {
    return ErrorResponse(404, "not_found", fmt::format("no admin endpoint {}", path));
  }
  if (verb == "rollback") {
    if (method != "POST") return ErrorResponse(405, "method_not_allowed", "use POST");
    Status s = bal.RollbackRollout(name);
    if (!s.ok()) return FromStatus(s);
    log::info("gateway: rollout '{}' rolled back by the admin API", name);
  } else if (!verb.empty()) {
    return ErrorResponse(404, "not_found", fmt::format("no admin endpoint {} (rollback)", path));
  } else if (method == "PUT") {
    // {"weights": {"pool-a": 90, "pool-b": 10}}; pools not named get 0.
    Result<json> j = ParseBody(body);
    if (!j.ok()) return FromStatus(j.status());
    if (!j->contains("weights") || !(*j)["weights"].is_object() || (*j)["weights"].empty()) {
      return ErrorResponse(400, "invalid_request",
                           "body must be {\"weights\": {\"<pool>\": <weight>, ...}}");
    }
    std::vector<std::pair<std::string, uint32_t>> weights;
    for (auto it = (*j)["weights"].begin(); it != (*j)["weights"].end(); ++it) {
      if (!it.value().is_number_unsigned() || it.value().get<uint64_t>() > 1'000'000) {
        return ErrorResponse(400, "invalid_request",
                             fmt::format("weight of '{}' must be an integer 0-1000000", it.key()));
      }
      weights.emplace_back(it.key(), static_cast<uint32_t>(it.value().get<uint64_t>()));
    }
    Status s = bal.SetRolloutWeights(name, weights);
    if (!s.ok()) return FromStatus(s);
    std::string desc;
    for (const auto& [pool, w] : weights)
      desc += fmt::format("{}{}={}", desc.empty() ? "" : " ", pool, w);
    log::info("gateway: rollout '{}' set to {} by the admin API", name, desc);
  } else if (method != "GET") {
    return ErrorResponse(405, "method_not_allowed", "use GET or PUT");
  }
  Result<RolloutStatus> r = bal.Rollout(name);
  if (!r.ok()) return FromStatus(r.status());
  return OrderedJson(200, RolloutStatusJson(*r));
}

LocalResponse HandleAnomalies(Shared& shared, std::string_view method) {
  if (method != "GET") return ErrorResponse(405, "method_not_allowed", "use GET");
  json out = json::array();
  if (shared.anomaly) {
    for (const SignalState& s : shared.anomaly->States()) {
      out.push_back({{"model", s.model},
                     {"version", s.version},
                     {"signal", s.signal},
                     {"windows", s.windows},
                     {"ready", s.ready},
                     {"not_ready_reason", s.not_ready_reason},
                     {"value", s.last_value},
                     {"lower", s.lower},
                     {"upper", s.upper},
                     {"firing", s.firing},
                     {"recent_violations", s.recent_violations}});
    }
  }
  return Json(200, json{{"enabled", shared.anomaly != nullptr}, {"signals", out}});
}

}  // namespace

LocalResponse HandleAdmin(Shared& shared, const Runtime& rt, const Identity& who,
                          const http::RequestHead& req, std::string_view body) {
  std::string_view path = req.path;
  std::string_view method = req.method;
  int64_t now = static_cast<int64_t>(std::time(nullptr));

  if (path == "/admin/usage") {
    if (!Allowed(rt, who, "usage:read") && !Allowed(rt, who, "admin")) {
      return ErrorResponse(403, "forbidden", "reading usage needs action 'usage:read' or 'admin'");
    }
    if (method != "GET") return ErrorResponse(405, "method_not_allowed", "use GET");
    std::string key = QueryValue(req.query, "key");
    Status flushed = shared.limiter->Flush();
    (void)flushed;  // usage is read from memory too; a failed flush only delays persistence
    Result<std::vector<UsageRow>> rows = shared.limiter->Usage(key.empty() ? "" : "key:" + key);
    if (!rows.ok()) return FromStatus(rows.status());
    json out = json::array();
    for (const UsageRow& r : *rows) {
      out.push_back(
          {{"subject", r.subject}, {"period", r.period}, {"calls", r.calls}, {"tokens", r.tokens}});
    }
    return Json(200, json{{"usage", out}});
  }

  if (!Allowed(rt, who, "admin")) {
    return ErrorResponse(403, "forbidden", "the admin API needs a role with action 'admin'");
  }

  if (path == "/admin/backends" || path.starts_with("/admin/backends/")) {
    return HandleBackends(shared, path, method);
  }
  if (path == "/admin/rollouts" || path.starts_with("/admin/rollouts/")) {
    return HandleRollouts(shared, path, method, body);
  }
  if (path == "/admin/anomalies") return HandleAnomalies(shared, method);
  if (path == "/admin/pools" || path.starts_with("/admin/pools/")) {
    return HandlePools(shared, req, body);
  }

  if (path == "/admin/keys") {
    if (method == "GET") {
      Result<std::vector<security::ApiKeyInfo>> keys = shared.key_store->List();
      if (!keys.ok()) return FromStatus(keys.status());
      json out = json::array();
      for (const auto& k : *keys) out.push_back(json(security::PublicKeyJson(k)));
      return Json(200, json{{"keys", out}});
    }
    if (method == "POST") {
      Result<json> j = ParseBody(body);
      if (!j.ok()) return FromStatus(j.status());
      for (const char* field : {"name", "role"}) {
        if (j->contains(field) && !(*j)[field].is_string()) {
          return ErrorResponse(400, "invalid_request", fmt::format("`{}` must be a string", field));
        }
      }
      std::string name = j->contains("name") ? (*j)["name"].get<std::string>() : "";
      std::string role = j->contains("role") ? (*j)["role"].get<std::string>() : "";
      int64_t expires_in = 0;
      if (j->contains("expires_in_s")) {
        const json& v = (*j)["expires_in_s"];
        if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > kMaxSeconds) ||
            v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxSeconds) {
          return ErrorResponse(400, "invalid_request",
                               fmt::format("expires_in_s must be an integer 0-{}", kMaxSeconds));
        }
        expires_in = (*j)["expires_in_s"].get<int64_t>();
      }
      if (name.empty() || role.empty()) {
        return ErrorResponse(400, "invalid_request", "name and role are required");
      }
      if (!rt.policy.HasRole(role)) {
        return ErrorResponse(400, "invalid_request",
                             fmt::format("role '{}' is not defined in the config's roles", role));
      }
      auto created =
          shared.key_store->Create(name, role, expires_in > 0 ? now + expires_in : 0, now);
      if (!created.ok()) return FromStatus(created.status());
      RepublishKeys(shared);
      json out = json(security::PublicKeyJson(created->first));
      out["key"] = created->second;
      return Json(201, out);
    }
    return ErrorResponse(405, "method_not_allowed", "use GET or POST");
  }

  std::string_view id, rest;
  if (SplitKeyPath(path, &id, &rest)) {
    if (rest.empty() && method == "DELETE") {
      Status s = shared.key_store->Revoke(id, now);
      if (!s.ok()) return FromStatus(s);
      RepublishKeys(shared);
      return Json(200, json{{"id", std::string(id)}, {"revoked", now}});
    }
    if (rest.empty() && method == "GET") {
      Result<security::ApiKeyInfo> k = shared.key_store->Get(id);
      if (!k.ok()) return FromStatus(k.status());
      return Json(200, json(security::PublicKeyJson(*k)));
    }
    if (rest == "/rotate" && method == "POST") {
      Result<json> j = ParseBody(body);
      if (!j.ok()) return FromStatus(j.status());
      int64_t grace = 0;
      if (j->contains("grace_s")) {
        const json& v = (*j)["grace_s"];
        if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > kMaxSeconds) ||
            v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxSeconds) {
          return ErrorResponse(400, "invalid_request",
                               fmt::format("grace_s must be an integer 0-{}", kMaxSeconds));
        }
        grace = (*j)["grace_s"].get<int64_t>();
      }
      auto rotated = shared.key_store->Rotate(id, grace, now);
      if (!rotated.ok()) return FromStatus(rotated.status());
      RepublishKeys(shared);
      json out = json(security::PublicKeyJson(rotated->first));
      out["key"] = rotated->second;
      out["replaces"] = std::string(id);
      return Json(201, out);
    }
    return ErrorResponse(405, "method_not_allowed",
                         "use GET or DELETE /admin/keys/{id}, POST /admin/keys/{id}/rotate");
  }
  return ErrorResponse(404, "not_found", fmt::format("no admin endpoint {}", path));
}

}  // namespace gantry::gateway::internal
