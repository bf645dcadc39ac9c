// Bearer tokens for Azure APIs (Resource Manager, ...) from one of three
// identities:
//
//   managed identity   GET {imds}/metadata/identity/oauth2/token
//                      ?api-version=2018-02-01&resource=R[&client_id=C]
//                      with "Metadata: true" (the VM's system- or user-assigned identity)
//   service principal  POST {authority}/{tenant}/oauth2/v2.0/token, form body
//                      grant_type=client_credentials&client_id=C&client_secret=S
//                      &scope=R/.default (the secret read from an environment variable)
//   environment token  the token in an environment variable, as it is
//                      (`az account get-access-token`, tests)
//
// Tokens from IMDS and Entra ID are cached until 5 minutes before they expire
// (expires_in, else expires_on); an environment token is read on every call.
// Error messages name the endpoint and the identity (client id, tenant, the
// variable), never a secret or a token.
//
//   ASSIGN_OR_RETURN(auto source, security::NewAzureTokenSource(
//       {.kind = AzureIdentity::kManagedIdentity, .resource = "https://management.azure.com"},
//       SystemClock()));
//   ASSIGN_OR_RETURN(std::string token, source->Token());  // "Authorization: Bearer " + token
//
// Thread-safety: Token() may be called from any thread; one fetch runs at a time.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "gantry/core/clock.h"
#include "gantry/core/status.h"

namespace gantry::security {

// Something that hands out bearer tokens for one resource.
class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // A token valid for a while yet (at least 5 minutes when the issuer said
  // how long). Errors: PermissionDenied when the identity was refused (bad
  // secret, unknown client id, no identity on the VM); Unavailable,
  // DeadlineExceeded or ResourceExhausted when the endpoint could not answer
  // (transient); FailedPrecondition when a variable it needs is unset.
  virtual Result<std::string> Token() = 0;
  // The identity for messages: "managed identity (client_id 1234...)",
  // "service principal 1234... in tenant abcd...", "token from $AZURE_TOKEN".
  virtual std::string Describe() const = 0;
};

enum class AzureIdentity { kManagedIdentity, kServicePrincipal, kEnvironmentToken };

struct AzureCredentialOptions {
  AzureIdentity kind = AzureIdentity::kManagedIdentity;
  std::string client_id;          // user-assigned identity (optional), or the SP's app id
  std::string tenant_id;          // service principal
  std::string client_secret_env;  // service principal: the variable holding the secret
  std::string token_env;          // environment token: the variable holding it
  // The resource the token is for; the v2 scope is "<resource>/.default".
  std::string resource = "https://management.azure.com";
  std::string imds_endpoint = "http://169.254.169.254";
  std::string authority = "https://login.microsoftonline.com";
  std::chrono::milliseconds timeout{10'000};  // one token request
};

// InvalidArgument naming the missing field (client_id and tenant_id for a
// service principal, the variable names, an empty resource). Nothing is
// fetched until Token().
Result<std::unique_ptr<TokenSource>> NewAzureTokenSource(const AzureCredentialOptions& options,
                                                         const Clock& clock);

}  // namespace gantry::security
