// What the gateway decides from a request head alone: the built-in endpoints,
// the route, and the caller's credentials (API key or JWT).
#include <fmt/format.h>

#include <ctime>

#include "gantry/security/api_key.h"
#include "gantry/security/crypto.h"
#include "worker.h"

namespace gantry::gateway::internal {

namespace {

bool StartsWithI(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && http::IEquals(s.substr(0, prefix.size()), prefix);
}

const RouteConfig* MatchRoute(const GatewayConfig& cfg, std::string_view path) {
  for (const RouteConfig& r : cfg.routes) {
    if (!r.path.empty() ? path == r.path : path.starts_with(r.prefix)) return &r;
  }
  return nullptr;
}

}  // namespace

Status Worker::Authenticate(Request& r, std::string* reason) {
  const http::RequestHead& req = r.head;
  const Runtime& rt = *r.rt;
  Identity* who = &r.gate.who;
  std::string_view token;
  if (const http::HeaderView* h = req.Find("authorization")) {
    if (!StartsWithI(h->value, "Bearer ")) {
      *reason = "unsupported_scheme";
      return PermissionDenied("Authorization must be 'Bearer <key or token>'");
    }
    token = h->value.substr(7);
    while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  } else if (const http::HeaderView* k = req.Find("x-api-key")) {
    token = k->value;
  }
  if (token.empty()) {
    *reason = "no_credentials";
    return PermissionDenied("no credentials: send 'Authorization: Bearer <key>' or 'x-api-key'");
  }
  int64_t now = static_cast<int64_t>(std::time(nullptr));
  if (token.starts_with("gk_")) {
    if (!rt.config.api_keys) {
      *reason = "api_keys_disabled";
      return PermissionDenied("API keys are disabled on this gateway");
    }
    const security::ApiKeyInfo* info = nullptr;
    security::KeyCheck check = security::KeyCheck::kMalformed;
    Result<security::PresentedKey> parsed = security::ParseApiKey(token);
    auto cached = parsed.ok() ? key_cache_.find(parsed->id) : key_cache_.end();
    if (cached != key_cache_.end() &&
        security::ConstantTimeEquals(parsed->secret, cached->second.secret)) {
      info = cached->second.info;
      check = info->revoked_unix != 0 && now >= info->revoked_unix   ? security::KeyCheck::kRevoked
              : info->expires_unix != 0 && now >= info->expires_unix ? security::KeyCheck::kExpired
                                                                     : security::KeyCheck::kOk;
    } else {
      check = security::Authenticate(*keys_, token, now, &info);
      if (check == security::KeyCheck::kOk && parsed.ok()) {
        if (key_cache_.size() >= kKeyCacheMax) key_cache_.clear();
        key_cache_[std::string(parsed->id)] = CachedKey{std::string(parsed->secret), info};
      }
    }
    if (check != security::KeyCheck::kOk) {
      *reason = std::string(security::KeyCheckName(check));
      return PermissionDenied(fmt::format("API key rejected: {}", *reason));
    }
    who->kind = "api_key";
    who->key_id.assign(info->id);
    who->roles.resize(1);
    who->roles[0].assign(info->role);
    return Status::Ok();
  }
  if (!rt.jwt) {
    *reason = "malformed";
    return PermissionDenied("credential is not an API key and JWT is not configured");
  }
  Result<security::JwtClaims> claims = rt.jwt->Verify(token, now);
  if (!claims.ok()) {
    *reason = "jwt_" + claims.status().message();
    return PermissionDenied(fmt::format("token rejected: {}", claims.status().message()));
  }
  who->kind = "jwt";
  who->key_id.assign(claims->subject);
  who->roles = std::move(claims->roles);
  return Status::Ok();
}

bool Worker::Gate(Request& r) {
  RequestLog& log = r.log;
  GateResult* g = &r.gate;
  std::string_view path = r.head.path;
  if (path == "/healthz" || path == "/readyz" || path == "/metrics") {
    log.route = std::string(path);
    LocalResponse& resp = r.answer;
    if (path == "/metrics") {
      resp.content_type = metrics::Registry::kContentType;
      resp.body = shared_.registry.Render();
    } else if (path == "/readyz" && shared_.draining.load()) {
      resp = ErrorResponse(503, "draining", "the gateway is shutting down");
    } else {
      resp.body = path == "/healthz" ? "{\"status\":\"ok\"}" : "{\"status\":\"ready\"}";
    }
    return false;
  }
  g->admin = path.starts_with("/admin/") || path == "/admin";
  if (!g->admin) {
    g->route = MatchRoute(r.rt->config, path);
    if (g->route == nullptr) {
      log.decision = "deny";
      log.reason = "no_route";
      r.answer = ErrorResponse(404, "not_found", fmt::format("no route for {}", path));
      return false;
    }
    log.route = g->route->name;
  } else {
    log.route = "admin";
  }
  if (g->admin || g->route->auth_required) {
    std::string reason;
    Status id = Authenticate(r, &reason);
    if (!id.ok()) {
      log.decision = "deny";
      log.reason = reason;
      r.answer = ErrorResponse(401, "unauthorized", id.message());
      r.answer.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"gantry\"");
      return false;
    }
    log.key_id = g->who.key_id;
    log.role = g->who.roles.empty() ? "" : g->who.roles.front();
  }
  return true;
}

}  // namespace gantry::gateway::internal
