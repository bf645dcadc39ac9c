// The registry HTTP API's access control and its glue to http::Server (see
// http_api.h): authenticate, find the route (http_routes.h), check the role it
// needs and the body size, run its handler with a per-request registry handle.
//
// Threads: with http::ServerOptions::handler_threads the handlers run
// concurrently on the server's pool. What they share is thread-safe (the
// Registry's stores, the audit log, the JWT verifier) except the API-key
// table, which ServedApi swaps under a mutex when the key store changes.
// Changes are audited through a Registry::ForCaller handle per request, never
// by changing the shared registry's actor.
#include "gantry/registry/http_api.h"

#include <mutex>
#include <optional>

#include "blob_spool.h"
#include "gantry/security/api_key.h"
#include "gantry/security/rbac.h"
#include "http_routes.h"
#include "wire.h"

namespace gantry::registry {
namespace {

using routes::Call;
using routes::MatchRoute;
using routes::ReplyError;
using routes::ReplyStatus;
using routes::RouteMatch;

// Roles nest; the policy is the shared RBAC code so the matching rules are
// the gateway's.
const security::Policy& RolePolicy() {
  static const security::Policy p = [] {
    auto r = security::Policy::Create({
        {"reader", {{"registry:read"}}},
        {"writer", {{"registry:read"}, {"registry:write"}}},
        {"admin", {{"registry:*"}}},
    });
    return *r;
  }();
  return p;
}

// Status PermissionDenied here means "no valid credential" (401).
Result<Caller> Authenticate(const HttpApiOptions& o, const security::KeyTable* keys,
                            const http::ServerRequest& req, int64_t now) {
  std::string token;
  if (const std::string* h = req.Header("authorization")) {
    if (h->size() < 7 || !(std::string_view(*h).substr(0, 7) == "Bearer " ||
                           std::string_view(*h).substr(0, 7) == "bearer ")) {
      return PermissionDenied("Authorization must be 'Bearer <API key or JWT>'");
    }
    token = h->substr(7);
    while (!token.empty() && token.front() == ' ') token.erase(0, 1);
  } else if (const std::string* k = req.Header("x-api-key")) {
    token = *k;
  }
  if (token.empty()) {
    return PermissionDenied(
        "no credentials: send 'X-API-Key: <key>' or 'Authorization: Bearer <key or JWT>'");
  }
  Caller c;
  if (token.starts_with(security::kApiKeyPrefix)) {
    if (keys == nullptr) {
      return PermissionDenied("API keys are not configured on this server (--keys-db)");
    }
    const security::ApiKeyInfo* info = nullptr;
    security::KeyCheck check = security::Authenticate(*keys, token, now, &info);
    if (check != security::KeyCheck::kOk) {
      return PermissionDenied("API key rejected: " + std::string(security::KeyCheckName(check)));
    }
    c.actor = "api_key:" + info->id;
    c.roles = {info->role};
    return c;
  }
  if (o.jwt == nullptr) {
    return PermissionDenied("credential is not an API key and JWT is not configured");
  }
  auto claims = o.jwt->Verify(token, now);
  if (!claims.ok()) return PermissionDenied("token rejected: " + claims.status().message());
  c.actor = "jwt:" + claims->subject;
  c.roles = claims->roles;
  return c;
}

bool Allowed(const Caller& c, std::string_view action) {
  for (const auto& r : c.roles)
    if (RolePolicy().Allowed(r, action, "*")) return true;
  return false;
}

int64_t NowSeconds(const HttpApiOptions& o) {
  const Clock* clock = o.clock ? o.clock : &SystemClock();
  return std::chrono::duration_cast<std::chrono::seconds>(clock->WallNow().time_since_epoch())
      .count();
}

// Authenticates; on failure fills `resp` with the 401 answer (with the
// Bearer challenge).
std::optional<Caller> AuthenticateOrReply(const HttpApiOptions& o, const security::KeyTable* keys,
                                          const http::ServerRequest& req, int64_t now,
                                          http::ServerResponse* resp) {
  auto who = Authenticate(o, keys, req, now);
  if (!who.ok()) {
    resp->headers.emplace_back("WWW-Authenticate", "Bearer realm=\"gantry-registry\"");
    ReplyError(resp, 401, "UNAUTHENTICATED", who.status().message());
    return std::nullopt;
  }
  return *std::move(who);
}

// True when the caller's role allows `action`; else fills `resp` with the 403.
bool AllowedOrReply(const Caller& who, std::string_view action, const http::ServerRequest& req,
                    http::ServerResponse* resp) {
  if (Allowed(who, action)) return true;
  std::string roles;
  for (const auto& r : who.roles) roles += (roles.empty() ? "" : ",") + r;
  std::string_view role = routes::RoleFor(action);
  routes::Reply(resp, 403,
                Json{{"error_code", "PERMISSION_DENIED"},
                     {"required_role", role},
                     {"message", req.method + " " + req.path + " needs role '" + std::string(role) +
                                     "' (caller " + who.actor + " has '" + roles + "')"}});
  return false;
}

void Handle(Registry& reg, const HttpApiOptions& o, const security::KeyTable* keys,
            const http::ServerRequest& req, http::ServerResponse* resp) {
  int64_t now = NowSeconds(o);
  std::string_view path = req.path;
  if (!path.starts_with(wire::kMlflow) && !path.starts_with(wire::kGantry)) {
    return ReplyStatus(resp, NotFound("unknown path " + req.path));
  }
  // Credentials first, so that nobody unauthenticated learns which paths exist.
  auto who = AuthenticateOrReply(o, keys, req, now, resp);
  if (!who) return;
  RouteMatch m = MatchRoute(req.method, path);
  if (m.route == nullptr) {
    if (m.allowed.empty()) {
      return ReplyStatus(resp, NotFound("unknown endpoint " + req.method + " " + req.path));
    }
    resp->headers.emplace_back("Allow", m.allowed);
    return ReplyError(resp, 405, "METHOD_NOT_ALLOWED",
                      req.method + " " + req.path + " is not supported; use " + m.allowed);
  }
  if (!AllowedOrReply(*who, m.route->action, req, resp)) return;
  // JSON bodies are bounded per route; blob uploads by max_blob_bytes (streamed).
  if (!m.route->streamed && req.body.size() > m.route->max_body) {
    return ReplyError(resp, 413, "REQUEST_TOO_LARGE",
                      "request body of " + std::to_string(req.body.size()) +
                          " bytes is over the limit of " + std::to_string(m.route->max_body));
  }
  Registry acting = reg.ForCaller(o.audit, who->actor);
  Call c{acting, o, *who, now, req, std::move(m.param), resp};
  Status s = m.route->handler(c);
  if (!s.ok()) ReplyStatus(resp, s);
}

// What the routes added by AddHttpRoutes share. The key table is re-read
// from the key store whenever it changed (a revoked or new key takes effect
// on the next request); handlers on several threads swap it under `mu`.
class ServedApi {
 public:
  ServedApi(Registry& reg, HttpApiOptions o) : reg_(reg), o_(std::move(o)), keys_(o_.keys) {}

  std::shared_ptr<const security::KeyTable> Keys() {
    std::lock_guard lock(mu_);
    if (o_.key_store != nullptr) {
      auto changed = o_.key_store->ChangedSinceSnapshot();
      if (changed.ok() && *changed) {
        auto snap = o_.key_store->Snapshot();
        if (snap.ok()) keys_ = *snap;
      }
    }
    return keys_;
  }

  void Serve(const http::ServerRequest& req, http::ServerResponse* resp) {
    std::shared_ptr<const security::KeyTable> keys = Keys();
    Handle(reg_, o_, keys.get(), req, resp);
  }

  // Blob uploads stream to a spool file. Credentials, role and size are
  // checked from the head, before a byte of the body is accepted.
  std::shared_ptr<http::BodySink> Open(const http::ServerRequest& head, uint64_t length,
                                       http::ServerResponse* reject) {
    RouteMatch m = MatchRoute(head.method, head.path);
    if (m.route == nullptr || !m.route->streamed) return nullptr;
    std::shared_ptr<const security::KeyTable> keys = Keys();
    auto who = AuthenticateOrReply(o_, keys.get(), head, NowSeconds(o_), reject);
    if (!who || !AllowedOrReply(*who, m.route->action, head, reject)) return nullptr;
    if (length > o_.max_blob_bytes) {
      ReplyError(reject, 413, "REQUEST_TOO_LARGE",
                 "blob upload of " + std::to_string(length) +
                     " bytes is over this server's limit of " + std::to_string(o_.max_blob_bytes) +
                     " bytes (gantry registry serve --max-upload-mb)");
      return nullptr;
    }
    auto sink = SpooledBlob::Create(o_.spool_dir);
    if (!sink.ok()) {
      ReplyStatus(reject, sink.status());
      return nullptr;
    }
    return *std::move(sink);
  }

 private:
  Registry& reg_;
  const HttpApiOptions o_;
  std::mutex mu_;
  std::shared_ptr<const security::KeyTable> keys_;  // guarded by mu_
};

}  // namespace

void HandleHttpRequest(Registry& reg, const HttpApiOptions& options, const http::ServerRequest& req,
                       http::ServerResponse* resp) {
  Handle(reg, options, options.keys.get(), req, resp);
}

void AddHttpRoutes(Registry& reg, HttpApiOptions options, http::Server& server) {
  auto api = std::make_shared<ServedApi>(reg, std::move(options));
  auto handle = [api](const http::ServerRequest& req, http::ServerResponse* resp) {
    api->Serve(req, resp);
  };
  server.Handle("/api/", handle);
  server.HandleStreaming(
      std::string(wire::kBlobs),
      [api](const http::ServerRequest& head, uint64_t length, http::ServerResponse* reject) {
        return api->Open(head, length, reject);
      },
      handle);
}

}  // namespace gantry::registry
