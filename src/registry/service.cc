// RegistryService: `gantry registry serve` on the ServiceRunner (see service.h).
#include "gantry/registry/service.h"

#include "gantry/core/json.h"
#include "gantry/core/log.h"
#include "gantry/security/oidc.h"

namespace gantry::registry {

Status ValidateServiceOptions(const RegistryServiceOptions& o) {
  // Deny by default: without a credential source every request would be 401,
  // so refuse to start instead of serving a useless (or misconfigured) API.
  bool oidc = !o.jwt_oidc_issuer.empty() || !o.jwt_oidc_discovery_url.empty();
  if (o.keys_db.empty() && o.jwt_secret_file.empty() && o.jwt_public_key_file.empty() && !oidc) {
    return InvalidArgument(
        "no credentials configured: pass --keys-db PATH (API "
        "keys: `gantry gateway keys create --state PATH --name N --role reader|writer|admin`) "
        "and/or --jwt-secret-file / --jwt-public-key / --jwt-oidc-issuer");
  }
  if (oidc && (!o.jwt_secret_file.empty() || !o.jwt_public_key_file.empty())) {
    return InvalidArgument(
        "--jwt-oidc-issuer takes the keys from the issuer: drop --jwt-secret-file / "
        "--jwt-public-key");
  }
  if (oidc && o.jwt_audience.empty()) {
    return InvalidArgument(
        "--jwt-oidc-issuer needs --jwt-audience (the app's client id or api:// URI): the "
        "issuer signs tokens for every app with the same keys");
  }
  for (const std::string& m : o.jwt_role_map) {
    size_t eq = m.find('=');
    if (eq == 0 || eq == std::string::npos || eq + 1 == m.size()) {
      return InvalidArgument("--jwt-role-map '" + m +
                             "': expected ROLE=VALUE, e.g. writer=Gantry.Writer");
    }
  }
  if (o.max_blob_bytes == 0) {
    return InvalidArgument("the largest blob upload must be at least 1 byte");
  }
  return Status::Ok();
}

Result<std::unique_ptr<RegistryService>> RegistryService::Create(std::unique_ptr<Registry> registry,
                                                                 RegistryServiceOptions o) {
  RETURN_IF_ERROR(ValidateServiceOptions(o));
  if (registry == nullptr) return InvalidArgument("RegistryService::Create needs a registry");
  auto svc = std::unique_ptr<RegistryService>(new RegistryService(std::move(registry), o));
  if (!o.keys_db.empty()) {
    ASSIGN_OR_RETURN(svc->keys_, security::KeyStore::Open(o.keys_db));
    RETURN_IF_ERROR(svc->keys_->Snapshot().status());
  }
  bool oidc = !o.jwt_oidc_issuer.empty() || !o.jwt_oidc_discovery_url.empty();
  if (!o.jwt_secret_file.empty() || !o.jwt_public_key_file.empty() || oidc) {
    security::JwtOptions jo;
    jo.issuer = o.jwt_issuer;
    if (!o.jwt_audience.empty()) jo.audiences.push_back(o.jwt_audience);
    jo.tenants = o.jwt_tenants;
    for (const std::string& m : o.jwt_role_map) {
      size_t eq = m.find('=');
      jo.role_map[m.substr(0, eq)].push_back(m.substr(eq + 1));
    }
    if (oidc) {
      security::OidcOptions oo;
      oo.issuer = o.jwt_oidc_issuer;
      oo.discovery_url = o.jwt_oidc_discovery_url;
      oo.refresh = o.jwt_oidc_refresh;
      oo.unknown_kid_refresh = o.jwt_oidc_unknown_kid_refresh;
      ASSIGN_OR_RETURN(jo.key_provider, security::OidcKeySet::Create(std::move(oo)));
    }
    if (!o.jwt_secret_file.empty()) {
      ASSIGN_OR_RETURN(std::string secret, ReadFile(o.jwt_secret_file));
      while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
      jo.keys.push_back({.alg = "HS256", .kid = "", .secret = secret, .public_pem = ""});
    }
    if (!o.jwt_public_key_file.empty()) {
      ASSIGN_OR_RETURN(std::string pem, ReadFile(o.jwt_public_key_file));
      // The algorithm follows the key type (RSA: RS256, P-256: ES256).
      security::JwtOptions probe;
      probe.keys.push_back({.alg = "RS256", .kid = "", .secret = "", .public_pem = pem});
      std::string alg = security::JwtVerifier::Create(probe).ok() ? "RS256" : "ES256";
      jo.keys.push_back({.alg = alg, .kid = "", .secret = "", .public_pem = pem});
    }
    ASSIGN_OR_RETURN(svc->jwt_, security::JwtVerifier::Create(jo));
  }
  return svc;
}

RegistryService::~RegistryService() { server_.Stop(); }

Status RegistryService::Start() {
  HttpApiOptions api;
  if (keys_) {
    ASSIGN_OR_RETURN(api.keys, keys_->Snapshot());
    api.key_store = keys_.get();
  }
  api.jwt = jwt_.get();
  api.audit = registry_->audit_log();
  // Blob uploads stream to a spool file (never held in memory), bounded here.
  api.max_blob_bytes = options_.max_blob_bytes;
  api.spool_dir = options_.spool_dir;
  AddHttpRoutes(*registry_, std::move(api), server_);
  http::ServerOptions so;
  so.listen = options_.listen;
  // Only JSON bodies (at most a signature bundle) are buffered.
  so.max_body_bytes = kMaxBufferedBodyBytes;
  // A request must arrive within this; a streamed blob upload only has to
  // keep moving (the limit then counts from the last bytes received).
  so.read_timeout = std::chrono::seconds(600);
  // SQL and blob copies run on the pool, never on the loop thread.
  so.handler_threads = options_.handler_threads;
  RETURN_IF_ERROR(server_.Start(so));
  log::info("registry: serving on port {}", server_.port());
  return Status::Ok();
}

std::string RegistryService::ReadyMessage() const {
  std::string auth = keys_ ? "API keys" : "";
  if (keys_ && jwt_) auth += " + ";
  if (jwt_) auth += "JWT";
  return "serving the registry (MLflow-shaped /api/2.0/mlflow/..., blobs under "
         "/api/2.0/gantry/; " +
         auth + ", deny by default) on port " + std::to_string(server_.port());
}

void RegistryService::Stop(std::chrono::milliseconds) { server_.Stop(); }

}  // namespace gantry::registry
