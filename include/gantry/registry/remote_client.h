// RemoteClient: the registry Client over the HTTP API of `gantry registry
// serve` (http_api.h), plain http only (no TLS).
//
// It does not trust the server for integrity: downloads and verification
// check that the manifest hashes to the recorded digest and lists exactly the
// server's files (DataLoss "missing file X" / "extra file X" otherwise),
// check the version's DSSE signatures against the client's own keys
// (RemoteOptions::trusted; PermissionDenied for an unsigned version when
// signatures are required, a signature by an untrusted key, one that does not
// verify or covers another manifest), and re-hash every downloaded byte
// (DataLoss naming the file; nothing is written). The server's signature
// policy can make the client stricter, never looser.
//
// Errors the server answers come back as the Status the server had (the
// HTTP status and MLflow error_code map back to it), with "METHOD /path:
// HTTP <status>: <message>"; PermissionDenied also for 401 (no valid
// credential) and 403 (role).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/json.h"
#include "gantry/registry/client.h"
#include "gantry/security/dsse.h"

namespace gantry::registry {

struct RemoteOptions {
  std::string server;      // "http://127.0.0.1:5000"
  std::string credential;  // API key or JWT, sent as "Authorization: Bearer"
  // One hard deadline per request. A blob upload or download gets this plus
  // one second per 10 MB of the file (the slowest link it tolerates is
  // 10 MB/s): 60 s + 20 s for a 200 MB file with the default.
  std::chrono::milliseconds deadline{60000};
  // The client's own trust anchors for Verify and Download (from local public
  // key files). The server's trusted-key list is never used for this.
  std::vector<security::DsseVerifier> trusted{};
};

// The deadline of one blob transfer of `bytes` (see RemoteOptions::deadline).
std::chrono::milliseconds BlobTransferDeadline(std::chrono::milliseconds base, uint64_t bytes);

class RemoteClient final : public Client {
 public:
  explicit RemoteClient(RemoteOptions options);

  const std::string& server() const { return o_.server; }

  // Hashes `req.path` here (as the local register does), uploads every file,
  // then creates the version from the manifest. Each file is streamed from
  // disk (memory stays bounded by one piece, not by the file); the server
  // stores a blob once and hashes every upload itself, so a file changed
  // after hashing is refused (FailedPrecondition "... changed while it was
  // being registered").
  Result<ModelVersion> Register(const RegisterRequest& req) override;
  // Reads the checkpoint step here with ReadCheckpointStep (verified, lineage
  // filled in) and registers its directory with Register.
  Result<ModelVersion> RegisterCheckpoint(RegisterRequest req,
                                          const CheckpointSource& src) override;
  Result<std::vector<RegisteredModel>> ListModels() override;
  Result<RegisteredModel> GetModel(std::string_view name) override;
  Result<ModelVersion> Resolve(std::string_view ref) override;
  Result<std::vector<ModelVersion>> ListVersions(std::string_view name) override;
  Result<std::vector<ModelVersion>> Search(const SearchQuery& query) override;
  Status SetAlias(std::string_view name, std::string_view alias, int64_t version,
                  std::optional<int64_t> expected) override;
  Status DeleteAlias(std::string_view name, std::string_view alias,
                     std::optional<int64_t> expected) override;
  // Signs here: fetches the version's manifest, checks it hashes to the
  // recorded digest and matches the server's file list, signs it in a DSSE
  // envelope and uploads the bundle (the server checks it covers exactly its
  // stored manifest).
  Result<std::string> Sign(std::string_view ref, const security::DsseSigner& signer) override;
  // Everything Download checks, streaming and hashing every blob, writing
  // nothing.
  Result<VerifyReport> Verify(std::string_view ref, bool require_signature) override;
  // Streams every blob into a temporary sibling directory of `dest` (each to
  // a temporary file, hashed as it arrives, at most its listed size accepted,
  // renamed only once its digest and size match), then renames the directory
  // into place. Memory stays bounded by one piece, not by a file.
  Result<VerifyReport> Download(std::string_view ref, const std::string& dest,
                                const ExportOptions& options) override;
  Result<DeleteReport> DeleteVersion(std::string_view name, int64_t version) override;
  Result<DeleteReport> DeleteModel(std::string_view name) override;
  Result<std::vector<TrustedKey>> TrustedKeys() override;
  Result<TrustedKey> TrustKey(std::string_view public_pem, std::string_view comment) override;
  Status UntrustKey(std::string_view keyid) override;
  Result<bool> SignaturesRequired() override;
  Status SetSignaturesRequired(bool on) override;

  // Any endpoint, for what the Client interface does not cover: an MLflow
  // endpoint ("registered-models/search?max_results=100") or one under
  // /api/2.0/gantry/ ("policy"). The decoded JSON answer, or the server's
  // error as a Status.
  Result<Json> Call(std::string_view method, std::string_view endpoint, const Json& body = {});
  Result<Json> CallGantry(std::string_view method, std::string_view endpoint,
                          const Json& body = {});

 private:
  struct Fetched;  // a version's checked manifest (remote_client.cc)
  Result<Json> CallPath(std::string_view method, const std::string& path, const Json& body);
  Result<Fetched> FetchVersion(std::string_view ref);
  // A small GET (a manifest), bounded by kMaxManifestBytes.
  Result<std::string> GetRaw(const std::string& path);
  // Uploads one file (streamed) under its digest.
  Status PutBlob(const std::string& local, const FileEntry& f);
  // Streams one blob into `fd` (owned and closed; -1: only hash it), named
  // `out` in messages, checking its digest and `size`.
  Status FetchBlob(const FileEntry& f, uint64_t size, int fd, const std::string& out,
                   const std::string& label);
  // Verify (empty `dest`) or Download.
  Result<VerifyReport> Fetch(std::string_view ref, const std::string& dest,
                             const ExportOptions& options);
  RemoteOptions o_;
};

}  // namespace gantry::registry
