// One way to use a model registry, whether it is opened here or served by
// `gantry registry serve`: every `gantry registry` command is written once
// against Client, and `--server` only picks the implementation.
//
//   LocalClient local(std::move(registry));            // the stores themselves
//   RemoteClient remote({.server = "http://10.0.0.5:5000", .credential = key});
//   Client& c = use_server ? static_cast<Client&>(remote) : local;
//   ASSIGN_OR_RETURN(ModelVersion v, c.Resolve("llama@prod"));
//
// Both implementations return the same typed values and the same Status codes
// for the same situations (client_suite.h checks this against both):
// InvalidArgument for a bad name, reference or argument, NotFound for a
// model, version, alias or key that does not exist, FailedPrecondition for a
// compare-and-set that lost, AlreadyExists for an existing download
// destination, PermissionDenied for a signature refused (or, remotely, a
// credential or role refused), DataLoss for stored bytes that do not match.
//
// Where they differ is where trust lives: LocalClient verifies against the
// registry's trusted keys; RemoteClient never trusts the server and verifies
// every downloaded byte and signature itself, against the client's own keys
// (RemoteOptions::trusted). A RemoteClient's ListModels returns at most the
// server's page limit (1000).
//
// Thread-safety: a client may be used from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/registry/registry.h"
#include "gantry/security/dsse.h"

namespace gantry::registry {

class Client {
 public:
  virtual ~Client() = default;

  // ---- register ----
  // Hashes `req.path` and stores a new version (see Registry::Register).
  virtual Result<ModelVersion> Register(const RegisterRequest& req) = 0;
  // Registers a checkpoint step, read here (see ReadCheckpointStep).
  virtual Result<ModelVersion> RegisterCheckpoint(RegisterRequest req,
                                                  const CheckpointSource& src) = 0;

  // ---- read ----
  virtual Result<std::vector<RegisteredModel>> ListModels() = 0;
  virtual Result<RegisteredModel> GetModel(std::string_view name) = 0;
  // "name/3", "name@alias", "name" (latest), "models:/name/3", "models:/name@alias".
  virtual Result<ModelVersion> Resolve(std::string_view ref) = 0;
  // Every version of the model, oldest first.
  virtual Result<std::vector<ModelVersion>> ListVersions(std::string_view name) = 0;
  // Newest first within each model (see SearchQuery).
  virtual Result<std::vector<ModelVersion>> Search(const SearchQuery& query) = 0;

  // ---- aliases (compare-and-set: `expected` 0 = must not exist) ----
  virtual Status SetAlias(std::string_view name, std::string_view alias, int64_t version,
                          std::optional<int64_t> expected) = 0;
  virtual Status DeleteAlias(std::string_view name, std::string_view alias,
                             std::optional<int64_t> expected) = 0;

  // ---- integrity ----
  // Signs the version's stored manifest (remotely: on this machine, the
  // private key never leaving it). Returns the key id.
  virtual Result<std::string> Sign(std::string_view ref, const security::DsseSigner& signer) = 0;
  // Checks the manifest, every stored byte and the signatures without
  // writing anything; `require_signature` (or the registry's policy) makes an
  // unsigned version PermissionDenied.
  virtual Result<VerifyReport> Verify(std::string_view ref, bool require_signature) = 0;
  // Verify, writing the files into `dest` (see Registry::Export); nothing
  // appears under `dest` unless every check passed. InvalidArgument for an
  // empty `dest`.
  virtual Result<VerifyReport> Download(std::string_view ref, const std::string& dest,
                                        const ExportOptions& options) = 0;

  // ---- delete ----
  virtual Result<DeleteReport> DeleteVersion(std::string_view name, int64_t version) = 0;
  virtual Result<DeleteReport> DeleteModel(std::string_view name) = 0;

  // ---- trust and policy ----
  virtual Result<std::vector<TrustedKey>> TrustedKeys() = 0;
  virtual Result<TrustedKey> TrustKey(std::string_view public_pem, std::string_view comment) = 0;
  virtual Status UntrustKey(std::string_view keyid) = 0;
  virtual Result<bool> SignaturesRequired() = 0;
  virtual Status SetSignaturesRequired(bool on) = 0;
};

// A Client over a Registry opened in this process.
class LocalClient final : public Client {
 public:
  // Borrows `registry`, which must outlive the client.
  explicit LocalClient(Registry& registry) : reg_(&registry) {}
  explicit LocalClient(std::unique_ptr<Registry> registry)
      : owned_(std::move(registry)), reg_(owned_.get()) {}

  Registry& registry() { return *reg_; }

  Result<ModelVersion> Register(const RegisterRequest& req) override;
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
  Result<std::string> Sign(std::string_view ref, const security::DsseSigner& signer) override;
  Result<VerifyReport> Verify(std::string_view ref, bool require_signature) override;
  Result<VerifyReport> Download(std::string_view ref, const std::string& dest,
                                const ExportOptions& options) override;
  Result<DeleteReport> DeleteVersion(std::string_view name, int64_t version) override;
  Result<DeleteReport> DeleteModel(std::string_view name) override;
  Result<std::vector<TrustedKey>> TrustedKeys() override;
  Result<TrustedKey> TrustKey(std::string_view public_pem, std::string_view comment) override;
  Status UntrustKey(std::string_view keyid) override;
  Result<bool> SignaturesRequired() override;
  Status SetSignaturesRequired(bool on) override;

 private:
  std::unique_ptr<Registry> owned_;
  Registry* reg_;
};

}  // namespace gantry::registry
