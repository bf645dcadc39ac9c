// HTTP API of the registry, shaped after MLflow's model-registry REST
// endpoints, plus content-addressed blob transfer (the server side; the
// client is RemoteClient in remote_client.h).
//
// Reads (role reader), prefix /api/2.0/mlflow/:
//   GET registered-models/get?name=N              {"registered_model": {...}}
//   GET registered-models/search?max_results=K    {"registered_models": [...]}
//   GET model-versions/get?name=N&version=V       {"model_version": {...}}
//   GET model-versions/search?name=N[&run_id=R]   {"model_versions": [...]}
//       also alias, name_like, tag=K[=V], dataset, source, commit, parent, max_results
//   GET registered-models/alias?name=N&alias=A    {"model_version": {...}}
//   GET /api/2.0/gantry/blobs/sha256/<hex>        the blob bytes
//   GET /api/2.0/gantry/manifests/sha256/<hex>    a version's statement text
// Writes (role writer), JSON bodies:
//   POST registered-models/create {name, description?}          409 when it exists
//   POST registered-models/update {name, description}
//   PUT  /api/2.0/gantry/blobs/sha256/<hex>  raw bytes, streamed to a spool
//        file while hashed; the SHA-256 is checked before anything is stored
//        (400 on mismatch); idempotent; 413 over max_blob_bytes.
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
//   POST /api/2.0/gantry/signatures {name, version, bundle}: a signature made
//        on the client over the stored manifest (see Registry::AddSignatureBundle).
// More reads: GET /api/2.0/gantry/signatures?name=N&version=V
//   {"signatures":[{keyid, bundle}]}, GET /api/2.0/gantry/policy
//   {"require_signatures"}, GET /api/2.0/gantry/trusted-keys {"trusted_keys":[...]}.
// Admin (role admin): DELETE registered-models/delete {name} and
//   DELETE model-versions/delete {name, version} (JSON body as MLflow sends
//   it, or query parameters) -> {"deleted": {name, versions, aliases_removed,
//   blobs_removed, manifests_removed, gc_errors}};
//   POST /api/2.0/gantry/policy {require_signatures: bool},
//   POST /api/2.0/gantry/trusted-keys {public_pem, comment?},
//   DELETE /api/2.0/gantry/trusted-keys?keyid=K.
//
// Access control: deny by default. Credentials: "X-API-Key: gk_..." or
// "Authorization: Bearer <API key | JWT>". API keys come from the security
// key store (role column); JWTs from security::JwtVerifier (role claim).
// Roles nest: reader < writer < admin. No/invalid credential: 401 with
// "WWW-Authenticate: Bearer realm=\"gantry-registry\""; a role without the
// permission: 403 {"error_code":"PERMISSION_DENIED","required_role":R,...}.
// Errors are MLflow-shaped {"error_code","message"} with the HTTP status of
// core's Status/HTTP map (http_status.h): 400 INVALID_PARAMETER_VALUE (naming
// the field), 404 RESOURCE_DOES_NOT_EXIST, 409 RESOURCE_ALREADY_EXISTS /
// CONFLICT, 500 DATA_LOSS, ...; and from the API itself 405
// METHOD_NOT_ALLOWED, 412 BLOB_MISSING, 413 REQUEST_TOO_LARGE. Every change
// is appended to the audit log with the caller's identity ("api_key:<id>" or
// "jwt:<subject>"); secrets are never logged or echoed.
//
// Every route is one row of a table (src/registry/http_routes.cc) giving its
// method, path, the action it needs (registry:read|write|admin for the roles
// above) and its handler; an unknown path under the API is 404 and a known
// path with another method 405 (with Allow), after authentication.
//
// Threading: the handlers are safe to run concurrently; serve them with
// http::ServerOptions::handler_threads > 0 so that SQL and blob copies stay
// off the server's loop thread (RegistryService does). Each request's
// changes are audited through its own Registry::ForCaller handle.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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
// Except signature uploads, which carry a whole manifest (base64) and so may
// reach this. An http::Server for the API should allow at least this much
// (ServerOptions::max_body_bytes): it bounds every buffered body, while blob
// uploads are streamed and bounded by HttpApiOptions::max_blob_bytes.
inline constexpr size_t kMaxBufferedBodyBytes = kMaxManifestBytes / 3 * 4 + (1u << 20);

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
  // Blob uploads through AddHttpRoutes are streamed to a temporary file in
  // `spool_dir` (empty: the system temp directory), hashed as they arrive,
  // never held in memory. Larger ones get 413 REQUEST_TOO_LARGE before any
  // byte is read; so do callers without the writer role (401/403), so an
  // anonymous client cannot fill the disk.
  uint64_t max_blob_bytes = 256ull << 20;
  std::string spool_dir;
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
// points at must outlive the server. Blob uploads are streamed (see
// HttpApiOptions::max_blob_bytes); the server's max_body_bytes bounds the
// other (buffered) bodies.
void AddHttpRoutes(Registry& reg, HttpApiOptions options, http::Server& server);

}  // namespace gantry::registry
