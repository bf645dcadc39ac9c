// HTTP API of the registry, shaped after MLflow's model-registry REST
// endpoints, plus content-addressed blob transfer, and a client for it.
//
// Reads (role reader), prefix /api/2.0/mlflow/:
//   GET registered-models/get?name=N              {"registered_model": {...}}
//   GET registered-models/search?max_results=K    {"registered_models": [...]}
//   GET model-versions/get?name=N&version=V       {"model_version": {...}}
//   GET model-versions/search?name=N[&run_id=R]   {"model_versions": [...]}
//   GET registered-models/alias?name=N&alias=A    {"model_version": {...}}
//   GET /api/2.0/gantry/blobs/sha256/<hex>        the blob bytes
//   GET /api/2.0/gantry/manifests/sha256/<hex>    a version's statement text
// Writes (role writer), JSON bodies:
//   POST registered-models/create {name, description?}          409 when it exists
//   POST registered-models/update {name, description}
//   PUT  /api/2.0/gantry/blobs/sha256/<hex>  raw bytes; the SHA-256 is checked
//        before anything is stored (400 on mismatch); idempotent.
//   POST model-versions/create {name, description?, files:[{path,sha256,size}],
//        tags?:{k:v}, run_id?, lineage?:{source,code_commit,dataset_digests,parent,metrics}}
//        every blob must already be stored with that size (412 naming the
//        missing file otherwise); the manifest is written, then the version row,
//        so nothing is visible before everything is stored.
//   POST model-versions/update {name, version, description}
//   POST model-versions/set-tag {name, version, key, value}
//   POST registered-models/set-tag {name, key, value}
//   POST registered-models/alias {name, alias, version, expected_version?}
//        expected_version "0"/0 = must not exist; a mismatch is 409.
//   DELETE registered-models/alias?name=N&alias=A[&expected_version=V]
// Admin (role admin): POST /api/2.0/gantry/policy {require_signatures: bool},
//   POST /api/2.0/gantry/trusted-keys {public_pem, comment?},
//   DELETE /api/2.0/gantry/trusted-keys?keyid=K.
//
// Access control: deny by default. Credentials: "X-API-Key: gk_..." or
// "Authorization: Bearer <API key | JWT>". API keys come from the security
// key store (role column); JWTs from security::JwtVerifier (role claim).
// Roles nest: reader < writer < admin. No/invalid credential: 401 with
// "WWW-Authenticate: Bearer realm=\"gantry-registry\""; a role without the
// permission: 403 {"error_code":"PERMISSION_DENIED","required_role":R,...}.
// Errors are MLflow-shaped {"error_code","message"}: 400 INVALID_PARAMETER_VALUE
// (naming the field), 404 RESOURCE_DOES_NOT_EXIST, 409 RESOURCE_ALREADY_EXISTS /
// CONFLICT, 412, 413 REQUEST_TOO_LARGE. Every change is appended to the audit
// log with the caller's identity ("api_key:<id>" or "jwt:<subject>"); secrets
// are never logged or echoed.
//
// Threading: handlers run on the http::Server loop thread, one at a time, so
// the per-request audit actor set on the Registry cannot interleave.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "gantry/core/clock.h"
#include "gantry/core/http_server.h"
#include "gantry/core/json.h"
#include "gantry/registry/registry.h"
#include "gantry/security/audit.h"
#include "gantry/security/jwt.h"
#include "gantry/security/key_store.h"

namespace gantry::registry {

// JSON request bodies larger than this are refused with 413.
inline constexpr size_t kMaxJsonBodyBytes = 1u << 20;

struct HttpApiOptions {
  // API keys (may be null: API keys refused). Looked up with security::Authenticate.
  std::shared_ptr<const security::KeyTable> keys;
  // When set, AddHttpRoutes re-reads `keys` from this store whenever it
  // changed (a revoked or new key takes effect on the next request). Must
  // outlive the routes.
  security::KeyStore* key_store = nullptr;
  // JWT verifier (may be null: JWTs refused). Must outlive the routes.
  const security::JwtVerifier* jwt = nullptr;
  // Audit log for changes (may be null: not audited). Must outlive the routes.
  security::AuditLog* audit = nullptr;
  const Clock* clock = nullptr;  // null: the system clock
};

// Who made a request (after authentication).
struct Caller {
  std::string actor;  // "api_key:<id>" / "jwt:<subject>"
  std::vector<std::string> roles;
};

// Handles one request without a socket (the unit tests call this directly).
void HandleHttpRequest(Registry& reg, const HttpApiOptions& options, const http::ServerRequest& req,
                       http::ServerResponse* resp);

// Adds the routes to `server` (before Start). `reg` and everything `options`
// points at must outlive the server. The server's max_body_bytes bounds blob
// uploads (bodies are held in memory).
void AddHttpRoutes(Registry& reg, HttpApiOptions options, http::Server& server);

// ---- client (plain http only; no TLS) ----
struct RemoteOptions {
  std::string server;      // "http://127.0.0.1:5000"
  std::string credential;  // API key or JWT, sent as "Authorization: Bearer"
  std::chrono::milliseconds deadline{60000};
};

class RemoteRegistry {
 public:
  explicit RemoteRegistry(RemoteOptions options) : o_(std::move(options)) {}

  // An MLflow endpoint ("registered-models/search?max_results=100"); the
  // decoded JSON answer, or the server's error as a Status (PermissionDenied
  // for 401/403, NotFound, InvalidArgument, FailedPrecondition for 409/412).
  Result<Json> Call(std::string_view method, std::string_view endpoint, const Json& body = {});

  // Hashes `path` (as the local register does), uploads the blobs the server
  // does not have, then creates the version from the manifest.
  Result<Json> Register(const RegisterRequest& req);
  // Resolves `ref` ("name/3", "name@alias", "name"), downloads the manifest
  // and every blob into a temporary sibling of `dest`, verifying the manifest
  // digest and every file's SHA-256 and size, then renames into place.
  Result<VerifyReport> Download(std::string_view ref, const std::string& dest, bool overwrite);

 private:
  Result<std::string> GetRaw(const std::string& path);
  RemoteOptions o_;
};

}  // namespace gantry::registry
