// `gantry registry serve` as a Service for the ServiceRunner (core/service.h):
// the HTTP API (http_api.h) on an http::Server whose handlers run on a pool,
// with API keys and/or JWTs, deny by default.
//
//   ServiceRunner runner({});  // first: the threads started below inherit its signal mask
//   ASSIGN_OR_RETURN(std::unique_ptr<Registry> reg, OpenRegistry(open_options));
//   ASSIGN_OR_RETURN(auto svc, RegistryService::Create(std::move(reg), {.keys_db =
//   "keys.sqlite"})); RETURN_IF_ERROR(runner.Run(*svc));  // until SIGTERM/SIGINT
//
// Keys created or revoked in the key database take effect on the next
// request; other changes need a restart (Reload is Unimplemented).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/http_server.h"
#include "gantry/core/service.h"
#include "gantry/registry/http_api.h"
#include "gantry/registry/registry.h"
#include "gantry/security/jwt.h"
#include "gantry/security/key_store.h"

namespace gantry::registry {

struct RegistryServiceOptions {
  std::string listen = "127.0.0.1:5000";  // HOST:PORT (port 0: any free one)
  // API keys (security::KeyStore database; `gantry gateway keys create`).
  std::string keys_db{};
  // HS256 JWTs signed with the secret in this file (trailing newlines dropped).
  std::string jwt_secret_file{};
  // RS256 (RSA) or ES256 (P-256) JWTs verified with the public key PEM in this file.
  std::string jwt_public_key_file{};
  std::string jwt_issuer{};    // required 'iss' when set
  std::string jwt_audience{};  // required 'aud' when set
  // OpenID Connect JWTs (e.g. Entra ID): RS256/ES256 keys from the issuer's
  // discovery document and JWKS, refetched every jwt_oidc_refresh and on an
  // unknown kid (at most once per jwt_oidc_unknown_kid_refresh); see
  // security/oidc.h. Needs jwt_audience. Exclusive with the two key files.
  std::string jwt_oidc_issuer{};
  std::string jwt_oidc_discovery_url{};    // default: <issuer>/.well-known/openid-configuration
  std::vector<std::string> jwt_tenants{};  // allowed 'tid' (required for common/organizations)
  // "ROLE=VALUE": a token whose app roles ('roles'), scopes ('scp') or 'role'
  // claim hold VALUE gets ROLE (reader|writer|admin). Empty: the 'role' claim.
  std::vector<std::string> jwt_role_map{};
  std::chrono::seconds jwt_oidc_refresh{std::chrono::hours(12)};
  std::chrono::seconds jwt_oidc_unknown_kid_refresh{std::chrono::minutes(5)};
  // Largest blob upload (413 before any byte of a larger one is read).
  uint64_t max_blob_bytes = 256ull << 20;
  std::string spool_dir{};  // uploads in flight and downloads (empty: $TMPDIR)
  // Handler pool size (http::ServerOptions::handler_threads): requests that
  // run SQL or copy blobs do not wait for each other up to this many.
  int handler_threads = 8;
};

// InvalidArgument without any credential source (every request would be
// refused: deny by default) or for a zero max_blob_bytes. Create checks it;
// a caller may check first, before opening the stores.
Status ValidateServiceOptions(const RegistryServiceOptions& options);

class RegistryService final : public Service {
 public:
  // Opens the credential sources and prepares the server (not started).
  // ValidateServiceOptions' errors, InvalidArgument for a JWT key that does
  // not load, the key database's errors.
  static Result<std::unique_ptr<RegistryService>> Create(std::unique_ptr<Registry> registry,
                                                         RegistryServiceOptions options);
  ~RegistryService() override;

  std::string_view name() const override { return "registry"; }
  // Binds and starts serving. Unavailable naming the address when it cannot bind.
  Status Start() override;
  // "serving the registry (MLflow-shaped /api/2.0/mlflow/..., blobs under
  // /api/2.0/gantry/; API keys + JWT, deny by default) on port 5000"
  std::string ReadyMessage() const override;
  // Closes the listener and every connection; handlers already running
  // finish first (uploads in flight are cut off).
  void Stop(std::chrono::milliseconds grace) override;

  uint16_t port() const { return server_.port(); }
  Registry& registry() { return *registry_; }

 private:
  RegistryService(std::unique_ptr<Registry> registry, RegistryServiceOptions options)
      : registry_(std::move(registry)), options_(std::move(options)) {}

  std::unique_ptr<Registry> registry_;
  RegistryServiceOptions options_;
  std::unique_ptr<security::KeyStore> keys_;
  std::unique_ptr<security::JwtVerifier> jwt_;
  http::Server server_;  // last: stopped (its handlers joined) before the rest goes
};

}  // namespace gantry::registry
