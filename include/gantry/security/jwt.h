// JWT (RFC 7519) bearer token verification: HS256, RS256 and ES256 only.
//
// The algorithm is taken from the configured key, never trusted from the token:
// a token whose "alg" differs from the matched key's alg is rejected
// (alg_not_allowed), which rules out "none" and HS256-with-a-public-key
// confusion.
#pragma once

#include <cstdint>
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

struct JwtOptions {
  std::vector<JwtKey> keys;
  std::string issuer;                  // empty: not checked
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
  // is not an RSA (>= 2048 bit) / P-256 public key, or no keys at all.
  static Result<std::unique_ptr<JwtVerifier>> Create(JwtOptions options);
  ~JwtVerifier();

  // PermissionDenied whose message is exactly one short reason: "malformed",
  // "alg_not_allowed", "unknown_kid", "bad_signature", "expired",
  // "not_yet_valid", "issuer_mismatch", "audience_mismatch", "missing_exp",
  // "no_role".
  Result<JwtClaims> Verify(std::string_view token, int64_t now_unix) const;

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
