// JWT (RFC 7519) bearer token verification: HS256, RS256 and ES256 only.
//
// The algorithm is taken from the configured key, never trusted from the token:
// a token whose "alg" differs from the matched key's alg is rejected
// (alg_not_allowed), which rules out "none" and HS256-with-a-public-key
// confusion.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::security {

struct JwtKey {
  std::string alg;         // HS256 | RS256 | ES256
  std::string kid;         // empty: matches any kid
  std::string secret;      // HS256
  std::string public_pem;  // RS256 / ES256
};

// An immutable, parsed set of verification keys (shared between verifiers and
// the key provider that published it).
class JwtKeySet {
 public:
  // InvalidArgument naming the key at fault, as JwtVerifier::Create. An empty
  // list is allowed here (a JWKS may publish none we can use).
  static Result<std::shared_ptr<const JwtKeySet>> Create(const std::vector<JwtKey>& keys);
  ~JwtKeySet();
  size_t size() const;
  // True when a key has exactly this kid (keys without a kid match none).
  bool HasKid(std::string_view kid) const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit JwtKeySet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// What a key provider publishes: keys, plus the issuers whose tokens they
// sign (may contain "{tenantid}", see JwtOptions::issuers). `generation`
// changes whenever the keys or issuers do, so verified-token caches know to
// re-check.
struct JwtKeySnapshot {
  std::shared_ptr<const JwtKeySet> keys;
  std::vector<std::string> issuers;
  uint64_t generation = 0;
};

// Keys that change at runtime, e.g. an OpenID Connect JWKS (see oidc.h).
// Implementations must be thread-safe: every request calls Current().
class JwtKeyProvider {
 public:
  virtual ~JwtKeyProvider() = default;
  // The keys to verify with now (cheap: no I/O once keys are loaded).
  // Unavailable when none could be loaded yet.
  virtual Result<std::shared_ptr<const JwtKeySnapshot>> Current() = 0;
  // A token names `kid`, which Current() lacks: the provider may refetch
  // (rate-limited; concurrent callers share one fetch) and returns what is
  // current afterwards, which may still lack `kid`.
  virtual Result<std::shared_ptr<const JwtKeySnapshot>> RefreshForKid(std::string_view kid) = 0;
};

struct JwtOptions {
  std::vector<JwtKey> keys;
  // Keys that change at runtime; when set, `keys` must be empty. Its
  // snapshots' issuers are accepted in addition to `issuer`/`issuers`.
  std::shared_ptr<JwtKeyProvider> key_provider;
  std::string issuer;  // empty: not checked
  // More accepted issuers. "{tenantid}" in one is replaced by the token's
  // "tid" claim (Entra ID multi-tenant documents), which then must be in
  // `tenants`; a templated issuer with no `tenants` accepts no token.
  std::vector<std::string> issuers;
  // Allowed "tid" values (Entra tenant ids); empty: not checked. A token whose
  // tid is missing or not listed is refused (tenant_not_allowed).
  std::vector<std::string> tenants;
  // Gantry role -> claim values that grant it. When non-empty, roles come from
  // the values of `role_claim`, "roles" (Entra app roles, array) and "scp"
  // (space-separated delegated scopes) that appear here; unlisted values are
  // ignored. Empty: `role_claim`'s values are the roles as they are.
  std::map<std::string, std::vector<std::string>> role_map;
  std::vector<std::string> audiences;  // empty: not checked; else "aud" must contain one
  int64_t leeway_s = 30;
  std::string role_claim = "role";  // string or array of strings
  bool require_exp = true;
  size_t cache_size = 4096;  // verified tokens kept until exp; 0 disables
};

struct JwtClaims {
  std::string subject, issuer;
  std::vector<std::string> roles;
  int64_t exp = 0, nbf = 0, iat = 0;  // 0 = absent
};

// Thread-safe. Keeps a bounded cache of verified tokens (time claims are
// re-checked on every hit).
class JwtVerifier {
 public:
  // Parses every key once. InvalidArgument naming the kid/alg at fault for an
  // unknown alg, an HS256 secret shorter than 32 bytes (RFC 7518 3.2), a PEM that
  // is not an RSA (>= 2048 bit) / P-256 public key, or no keys at all (and no
  // key_provider). With a key_provider nothing is fetched here.
  static Result<std::unique_ptr<JwtVerifier>> Create(JwtOptions options);
  ~JwtVerifier();

  // PermissionDenied whose message is exactly one short reason: "malformed",
  // "alg_not_allowed", "unknown_kid", "bad_signature", "expired",
  // "not_yet_valid", "issuer_mismatch", "audience_mismatch", "missing_exp",
  // "no_role", "tenant_not_allowed", "keys_unavailable" (the provider has
  // none yet). With a key_provider an unknown kid asks it to refresh once.
  Result<JwtClaims> Verify(std::string_view token, int64_t now_unix) const;

  // Verified tokens held in the cache now (at most options.cache_size).
  size_t cached_tokens() const;

 private:
  struct Impl;
  explicit JwtVerifier(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// For tests and the CLI: a compact JWS over `claims`. HS256: key_material is
// the secret; RS256 / ES256: a private key PEM. `kid` is omitted when empty.
// ES256 signatures are raw R||S (64 bytes) as JWS requires.
Result<std::string> SignJwt(std::string_view alg, std::string_view key_material,
                            std::string_view kid, const nlohmann::json& claims);

}  // namespace gantry::security
