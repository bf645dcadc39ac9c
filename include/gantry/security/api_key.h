// Gantry API keys.
//
// Key text: "gk_" + id + "_" + secret, where id is 16 lowercase hex characters
// (8 random bytes; public, used for lookup and logs) and secret is 43 base64url
// characters (32 random bytes, no padding). Total length 63. Only a salted
// SHA-256 of the secret is stored; the plaintext key is shown once.
#pragma once

#include <string>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry::security {

inline constexpr std::string_view kApiKeyPrefix = "gk_";
inline constexpr size_t kApiKeyIdLen = 16;
inline constexpr size_t kApiKeySecretLen = 43;
inline constexpr size_t kApiKeyLen = 3 + kApiKeyIdLen + 1 + kApiKeySecretLen;  // 63

struct NewApiKey {
  std::string id;        // 16 lowercase hex
  std::string key;       // full key text, shown once
  std::string salt_hex;  // 16 random bytes as hex
  std::string hash_hex;  // HashApiKeySecret(salt_hex, secret)
};
// A fresh random key with its salt and hash.
NewApiKey GenerateApiKey();

// Views into the presented text (valid as long as that text is).
struct PresentedKey {
  std::string_view id;
  std::string_view secret;
};
// Strict format check without allocation: exact length, "gk_" prefix, lowercase
// hex id, '_' separator, base64url secret. InvalidArgument otherwise (the message
// never echoes the secret).
Result<PresentedKey> ParseApiKey(std::string_view text);

// Lowercase hex SHA-256(salt_bytes || secret). An undecodable salt hashes as an
// empty salt (callers store salts produced by GenerateApiKey()).
std::string HashApiKeySecret(std::string_view salt_hex, std::string_view secret);
// Recomputes the hash and compares it in constant time with `hash_hex`.
bool VerifyApiKeySecret(std::string_view salt_hex, std::string_view hash_hex,
                        std::string_view secret);

}  // namespace gantry::security
