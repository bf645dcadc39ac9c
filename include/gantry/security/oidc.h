// OpenID Connect signing keys for JwtVerifier: the issuer's discovery document
// (<issuer>/.well-known/openid-configuration) names its JWKS (jwks_uri), whose
// RSA and P-256 keys verify RS256 / ES256 tokens. Keys are refetched on a
// schedule and when a token names a kid we have not seen (keys rotate), at most
// once per `unknown_kid_refresh`; a failed fetch keeps the keys we have.
//
// Entra ID: for a tenant's issuer (https://login.microsoftonline.com/{tid}/v2.0)
// the v1 form (https://sts.windows.net/{tid}/) is accepted too, and the other
// way round. The multi-tenant documents (common, organizations) publish the
// issuer https://login.microsoftonline.com/{tenantid}/v2.0, where the verifier
// substitutes the token's "tid" and checks JwtOptions::tenants.
//
//   ASSIGN_OR_RETURN(auto keys, OidcKeySet::Create({.issuer =
//       "https://login.microsoftonline.com/<tid>/v2.0"}));
//   JwtOptions o{.key_provider = keys, .audiences = {"api://gantry"}};
//   ASSIGN_OR_RETURN(auto verifier, JwtVerifier::Create(std::move(o)));
//
// Thread-safety: OidcKeySet is safe to use from any number of threads.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/clock.h"
#include "gantry/core/https_client.h"
#include "gantry/core/status.h"
#include "gantry/security/jwt.h"

namespace gantry::security {

struct OidcOptions {
  // The expected issuer. The discovery document is fetched from
  // issuer + "/.well-known/openid-configuration" unless discovery_url is set,
  // and its "issuer" must equal this one (unless it is an Entra multi-tenant
  // template containing "{tenantid}"). Empty: discovery_url is required and
  // the document's issuer is trusted.
  std::string issuer;
  std::string discovery_url;
  // Keys are refetched this long after the last successful fetch; a failed
  // scheduled fetch is retried after unknown_kid_refresh (at least 5 s).
  std::chrono::seconds refresh{std::chrono::hours(12)};
  // At most one refetch per this interval for tokens with an unknown kid (so
  // junk tokens cannot make us hammer the issuer).
  std::chrono::seconds unknown_kid_refresh{std::chrono::minutes(5)};
  // Deadline of each of the two GETs.
  std::chrono::milliseconds fetch_deadline{std::chrono::seconds(10)};
  size_t max_document_bytes = 1 << 20;
  http::TlsOptions tls;
  // Runs the scheduled refresh on a thread of its own (started on first use).
  // Off: only RefreshIfDue() / Refresh() / unknown kids fetch (tests).
  bool background_refresh = true;
  const Clock* clock = nullptr;  // null: SystemClock()
};

// The parts of a discovery document we use.
struct OidcDiscovery {
  std::string issuer, jwks_uri;
};

// Parses a discovery document. InvalidArgument naming `where` (the URL) when it
// is not a JSON object or lacks a string "issuer" / "jwks_uri".
Result<OidcDiscovery> ParseDiscovery(std::string_view json, std::string_view where);

// Parses a JWKS ({"keys": [...]}) into RS256 / ES256 keys with their kid.
// Keys that cannot verify our tokens are skipped, one line each in *skipped
// (may be null) naming `where`, the index and kid: "use" other than "sig", a
// kty other than RSA/EC, a curve other than P-256, an "alg" other than
// RS256/ES256, missing or bad n/e/x/y, RSA under 2048 bits. (Skipped, not
// fatal: one odd key must not stop a rotation.) InvalidArgument naming `where`
// for a document that is not a JSON object, has no "keys" array, or holds a
// key that is not an object.
Result<std::vector<JwtKey>> ParseJwks(std::string_view json, std::string_view where,
                                      std::vector<std::string>* skipped);

// The public JWK (kty, kid, use "sig", alg, n/e or crv/x/y) of an RSA or P-256
// public key PEM: for tests and local issuers.
Result<nlohmann::json> PublicKeyToJwk(std::string_view public_pem, std::string_view kid);

// The issuers Entra ID uses for the same tenant: `issuer` itself, plus the v1
// form for a v2 issuer (https://login.microsoftonline.com/T/v2.0 ->
// https://sts.windows.net/T/) and the v2 form for a v1 issuer. Other issuers:
// just `issuer`.
std::vector<std::string> EntraIssuerAliases(std::string_view issuer);

// InvalidArgument unless `url` is https://..., or http:// to a 127.0.0.0/8
// address (local test issuers). `what` names the setting in the message.
Status CheckOidcUrl(std::string_view url, std::string_view what);

class OidcKeySet : public JwtKeyProvider {
 public:
  // Checks the options (URLs, intervals); fetches nothing.
  static Result<std::shared_ptr<OidcKeySet>> Create(OidcOptions options);
  ~OidcKeySet() override;  // stops the refresh thread

  // The current keys; the first call fetches them (callers at the same time
  // share that fetch; after a failure the next try waits 5 s). Unavailable
  // (naming the URL and cause) while none could be loaded.
  Result<std::shared_ptr<const JwtKeySnapshot>> Current() override;
  Result<std::shared_ptr<const JwtKeySnapshot>> RefreshForKid(std::string_view kid) override;

  // Fetches the discovery document and JWKS now (joining a fetch already in
  // flight). On failure the previous keys stay. Errors name the URL: HTTP
  // status, deadline, malformed document, issuer mismatch, no usable keys.
  Status Refresh();
  // Refreshes when the schedule says so (what the background thread runs).
  void RefreshIfDue();

  struct Stats {
    uint64_t fetches = 0;   // attempts (each one discovery + JWKS)
    uint64_t failures = 0;  // attempts that failed
    uint64_t generation = 0;
    size_t keys = 0;
  };
  Stats stats() const;

 private:
  struct Impl;
  explicit OidcKeySet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry::security
