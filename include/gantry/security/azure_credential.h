// Bearer tokens for Azure APIs (Resource Manager, Storage, Monitor, ...) from
// Entra ID, the way the Azure SDKs' DefaultAzureCredential finds them.
//
// Identities (AzureIdentity):
//
//   default chain      (the default) tries, in order, and remembers the first
//                      that gives a token:
//                        1. environment: a service principal from AZURE_TENANT_ID,
//                           AZURE_CLIENT_ID and AZURE_CLIENT_SECRET or
//                           AZURE_CLIENT_CERTIFICATE_PATH (AZURE_AUTHORITY_HOST)
//                        2. workload identity: AZURE_FEDERATED_TOKEN_FILE,
//                           AZURE_CLIENT_ID, AZURE_TENANT_ID (AKS, GitHub OIDC)
//                        3. managed identity: IDENTITY_ENDPOINT + IDENTITY_HEADER
//                           (App Service, Container Apps, Functions), else IMDS,
//                           probed first with imds_probe_timeout so that a
//                           machine without one fails in about a second
//                        4. Azure CLI: `az account get-access-token` when az is on PATH
//                      A link whose variables are unset (or az absent) is skipped
//                      at once. When every link fails, the error lists each one,
//                      what it tried and why it failed.
//   managed identity   GET {imds}/metadata/identity/oauth2/token
//                      ?api-version=2018-02-01&resource=R[&client_id=C|object_id=O|
//                      msi_res_id=M] with "Metadata: true"; or, when IDENTITY_ENDPOINT
//                      and IDENTITY_HEADER are set, GET $IDENTITY_ENDPOINT
//                      ?api-version=2019-08-01&resource=R[&client_id=C|principal_id=O|
//                      mi_res_id=M] with "X-IDENTITY-HEADER: $IDENTITY_HEADER"
//   service principal  POST {authority}/{tenant}/oauth2/v2.0/token, form body
//                      grant_type=client_credentials&client_id=C&scope=R/.default and
//                      either client_secret=$<client_secret_env> or, with
//                      certificate_path, a client assertion: a JWT signed (RS256) with
//                      the PEM file's private key, header x5t = base64url SHA-1 of
//                      the certificate, aud = the token URL, iss = sub = C, jti, nbf,
//                      exp (10 minutes)
//   workload identity  the same POST with client_assertion = the federated token
//                      file's content (re-read on every fetch: the kubelet rotates it)
//   Azure CLI          `az account get-access-token --output json --resource R
//                      [--tenant T]` (bounded by `timeout`)
//   environment token  the token in an environment variable, as it is (read on
//                      every call)
//
// Fetched tokens are cached per source and refreshed 5 minutes before they
// expire, minus a random 0..refresh_jitter so that many processes started
// together do not refresh together (expires_in, else expires_on). When a
// refresh fails and the cached token has not expired yet, the cached token is
// handed out and the refresh tried again 30 s later. Token endpoints that answer
// 429, 410 (IMDS while the identity is being set up) or 5xx are retried with
// exponential backoff from 500 ms, honouring Retry-After (seconds), at most
// max_retries times and retry_budget of waiting in all; sleeps go through the
// Clock. A 400/401/403 (invalid_client, unknown identity) is PermissionDenied
// at once. Error messages name the endpoint and the identity (client id,
// tenant, the variable or file), never a secret, an assertion or a token;
// nothing here logs.
//
//   ASSIGN_OR_RETURN(auto source, security::NewAzureTokenSource(
//       {.resource = "https://storage.azure.com"}, SystemClock()));
//   ASSIGN_OR_RETURN(std::string token, source->Token());  // "Authorization: Bearer " + token
//
// Thread-safety: Token() may be called from any thread; one fetch runs at a time.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "gantry/core/clock.h"
#include "gantry/core/config.h"
#include "gantry/core/status.h"

namespace gantry::security {

// Something that hands out bearer tokens for one resource.
class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // A token valid for a while yet (at least 5 minutes when the issuer said
  // how long, unless a refresh failed and the cached one is still valid).
  // Errors: PermissionDenied when the identity was refused (bad secret,
  // unknown client id, no identity on the VM, az not logged in);
  // Unavailable, DeadlineExceeded or ResourceExhausted when the endpoint
  // could not answer (transient); FailedPrecondition when a variable or
  // file it needs is unset or missing (the chain: when no link is set up).
  virtual Result<std::string> Token() = 0;
  // The identity for messages: "managed identity (client_id 1234...)",
  // "service principal 1234... in tenant abcd...", "token from $AZURE_TOKEN",
  // "default Azure credential chain (now: managed identity ...)".
  virtual std::string Describe() const = 0;
};

enum class AzureIdentity {
  kManagedIdentity,
  kServicePrincipal,
  kEnvironmentToken,
  kDefaultChain,
  kWorkloadIdentity,
  kAzureCli,
};

// "default", "managed_identity", "service_principal", "workload_identity",
// "azure_cli", "environment_token" (the names ParseAzureCredential accepts).
std::string_view AzureIdentityName(AzureIdentity kind);

struct AzureCredentialOptions {
  AzureIdentity kind = AzureIdentity::kDefaultChain;
  // Managed identity: a user-assigned identity by client id (else object_id,
  // else msi_res_id; none = system-assigned). Service principal and workload
  // identity: the app (client) id. In the chain and for workload identity,
  // empty means $AZURE_CLIENT_ID.
  std::string client_id;
  std::string tenant_id;          // SP, workload identity ("" = $AZURE_TENANT_ID there)
  std::string client_secret_env;  // service principal: the variable holding the secret
  std::string token_env;          // environment token: the variable holding it
  // Service principal: a PEM file holding the certificate and its unencrypted
  // private key (RSA); used instead of client_secret_env when set.
  std::string certificate_path;
  // Workload identity: the federated token file ("" = $AZURE_FEDERATED_TOKEN_FILE).
  std::string federated_token_file;
  std::string object_id;   // managed identity: user-assigned by object (principal) id
  std::string msi_res_id;  // managed identity: user-assigned by ARM resource id
  // The resource the token is for; the v2 scope is "<resource>/.default".
  std::string resource = "https://management.azure.com";
  std::string imds_endpoint = "http://169.254.169.254";
  // Entra ID. The environment and workload identity links (chain or explicit
  // workload identity) use $AZURE_AUTHORITY_HOST instead when it is set.
  std::string authority = "https://login.microsoftonline.com";
  std::chrono::milliseconds timeout{10'000};  // one token request, or one `az` run
  // The chain's first IMDS request (no Metadata header; IMDS answers 400 at
  // once) must be answered within this, else the link fails.
  std::chrono::milliseconds imds_probe_timeout{1'000};
  int max_retries = 4;                             // retries after the first attempt (429/410/5xx)
  std::chrono::milliseconds retry_budget{30'000};  // waiting between retries, in all
  std::chrono::milliseconds refresh_jitter{60'000};  // refresh up to this much earlier
};

// InvalidArgument naming the missing field (client_id and tenant_id and
// client_secret_env or certificate_path for a service principal, the
// variable names, an empty resource, a non-positive timeout, negative
// retries). Nothing is fetched, and the chain reads no variable, until Token().
Result<std::unique_ptr<TokenSource>> NewAzureTokenSource(const AzureCredentialOptions& options,
                                                         const Clock& clock);

// Reads a credential block shared by storage, monitor and autoscale:
//
//   credential:
//     type: default | managed_identity | service_principal | workload_identity |
//           azure_cli | environment_token        (default: default)
//     client_id: ...          tenant_id: ...       client_secret_env: AZURE_CLIENT_SECRET
//     certificate_path: ...   token_env: ...       federated_token_file: ...
//     object_id: ...          msi_res_id: ...      imds_endpoint: ...
//     authority: ...          timeout: 10s
//
// `key` is the block's dotted key ("storage.credential"); an absent block
// gives the defaults (the chain). `resource` is left at its default: the
// caller sets it. InvalidArgument "file:line:col: key '...': ..." for an
// unknown key or type, a value of the wrong type, or a field the type needs
// that is missing (tenant_id for a service principal, ...).
Result<AzureCredentialOptions> ParseAzureCredential(const Config& config, std::string_view key);

}  // namespace gantry::security
