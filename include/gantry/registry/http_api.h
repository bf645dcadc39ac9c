// HTTP API of the registry, shaped after MLflow's model-registry REST
// endpoints, plus content-addressed blob transfer, and a client for it.
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
// Errors are MLflow-shaped {"error_code","message"}: 400 INVALID_PARAMETER_VALUE
// (naming the field), 404 RESOURCE_DOES_NOT_EXIST, 409 RESOURCE_ALREADY_EXISTS /
// CONFLICT, 412, 413 REQUEST_TOO_LARGE. Every change is appended to the audit
// log with the caller's identity ("api_key:<id>" or "jwt:<subject>"); secrets
// are never logged or echoed.
//
// Threading: handlers run on the http::Server loop thread, one at a time, so
// the per-request audit actor set on the Registry cannot interleave.
#pragma once

#include <chrono>
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

// ---- client (plain http only; no TLS) ----
struct RemoteOptions {
  std::string server;      // "http://127.0.0.1:5000"
  std::string credential;  // API key or JWT, sent as "Authorization: Bearer"
  // One hard deadline per request. A blob upload or download gets this plus
  // one second per 10 MB of the file (the slowest link it tolerates is
  // 10 MB/s): 60 s + 20 s for a 200 MB file with the default.
  std::chrono::milliseconds deadline{60000};
};

// The deadline of one blob transfer of `bytes` (see RemoteOptions::deadline).
std::chrono::milliseconds BlobTransferDeadline(std::chrono::milliseconds base, uint64_t bytes);

// Verify-before-use on the client: the server is not trusted for integrity.
struct RemoteDownloadOptions {
  bool overwrite = false;  // replace an existing destination
  // Refuse unless a signature by one of `trusted` covers the manifest. Also
  // turned on when the server's policy requires signatures (a server can
  // only make the client stricter, never looser).
  bool require_signature = false;
  bool write_signature = true;  // write the verified bundle as model.sig into the destination
  // The client's own trust anchors (from local public key files). The
  // server's trusted-key list is never used for this. May be null (none).
  const std::vector<security::DsseVerifier>* trusted = nullptr;
};

class RemoteRegistry {
 public:
  explicit RemoteRegistry(RemoteOptions options) : o_(std::move(options)) {}

  // An MLflow endpoint ("registered-models/search?max_results=100"); the
  // decoded JSON answer, or the server's error as a Status (PermissionDenied
  // for 401/403, NotFound, InvalidArgument, FailedPrecondition for 409/412).
  Result<Json> Call(std::string_view method, std::string_view endpoint, const Json& body = {});
  // The same for a Gantry endpoint under /api/2.0/gantry/ ("policy",
  // "trusted-keys", "signatures?name=N&version=V").
  Result<Json> CallGantry(std::string_view method, std::string_view endpoint,
                          const Json& body = {});
  // The model_version object for "name/3", "name@alias", "name" (latest) or
  // the models:/ spellings.
  Result<Json> GetVersion(std::string_view ref);

  // Hashes `path` (as the local register does), uploads every file, then
  // creates the version from the manifest. Each file is streamed from disk
  // (memory stays bounded by one piece, not by the file); the server stores
  // a blob once (an upload of a blob it has is not rewritten) and hashes
  // every upload itself, so a file changed after hashing is refused
  // (FailedPrecondition "... changed while it was being registered").
  Result<Json> Register(const RegisterRequest& req);
  // `register --from-ckpt` through the server: reads the checkpoint step
  // locally with ReadCheckpointStep (verified, lineage filled in) and
  // registers its directory with Register.
  Result<Json> RegisterCheckpoint(RegisterRequest req, const CheckpointSource& src);
  // Resolves `ref` ("name/3", "name@alias", "name"), downloads the manifest
  // and streams every blob into a temporary sibling directory of `dest`
  // (each to a temporary file, hashed as it arrives, at most its listed size
  // accepted, renamed only once its digest and size match), then renames the
  // directory into place. Memory stays bounded by one piece, not by a file.
  // Checks, in order: the manifest hashes to the recorded digest and
  // lists exactly the server's files (DataLoss "missing file X" / "extra file
  // X" otherwise); the version's DSSE signatures against options.trusted
  // (PermissionDenied for an unsigned version when signatures are required,
  // a signature by an untrusted key, a signature that does not verify or
  // covers another manifest); every downloaded byte against the manifest
  // digests and sizes (DataLoss naming the file; nothing is written). An
  // empty `dest` verifies without writing anything (`verify --server`).
  Result<VerifyReport> Download(std::string_view ref, const std::string& dest,
                                const RemoteDownloadOptions& options);
  Result<VerifyReport> Download(std::string_view ref, const std::string& dest, bool overwrite) {
    RemoteDownloadOptions o;
    o.overwrite = overwrite;
    return Download(ref, dest, o);
  }
  // Signs on the client (the private key never leaves it): fetches the
  // version's manifest, checks it hashes to the recorded digest and matches
  // the server's file list, signs it in a DSSE envelope and uploads the
  // bundle (the server checks it covers exactly its stored manifest).
  // Returns the key id.
  Result<std::string> Sign(std::string_view ref, const security::DsseSigner& signer);

 private:
  Result<Json> CallPath(std::string_view method, const std::string& path, const Json& body);
  // A small GET (a manifest), bounded by kMaxManifestBytes.
  Result<std::string> GetRaw(const std::string& path);
  // Uploads one file (streamed) under its digest.
  Status PutBlob(const std::string& local, const FileEntry& f);
  // Streams one blob into `fd` (owned and closed; -1: only hash it), named
  // `out` in messages, checking its digest and `size`.
  Status FetchBlob(const FileEntry& f, uint64_t size, int fd, const std::string& out,
                   const std::string& label);
  RemoteOptions o_;
};

}  // namespace gantry::registry
