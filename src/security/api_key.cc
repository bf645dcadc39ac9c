#include "gantry/security/api_key.h"

#include "gantry/security/crypto.h"

namespace gantry::security {

namespace {
bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }
bool IsB64Url(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}
}  // namespace

NewApiKey GenerateApiKey() {
  NewApiKey k;
  k.id = HexEncode(RandomBytes(kApiKeyIdLen / 2));
  std::string secret = Base64UrlEncode(RandomBytes(32));  // 43 characters
  k.key.reserve(kApiKeyLen);
  k.key.append(kApiKeyPrefix).append(k.id).append("_").append(secret);
  k.salt_hex = HexEncode(RandomBytes(16));
  k.hash_hex = HashApiKeySecret(k.salt_hex, secret);
  return k;
}

Result<PresentedKey> ParseApiKey(std::string_view text) {
  // Messages never include the text: it may be a real secret with a typo.
  if (text.size() != kApiKeyLen) {
    return InvalidArgument("API key has length " + std::to_string(text.size()) + ", expected " +
                           std::to_string(kApiKeyLen) + " (gk_<16 hex>_<43 base64url>)");
  }
  if (text.substr(0, kApiKeyPrefix.size()) != kApiKeyPrefix) {
    return InvalidArgument("API key does not start with \"gk_\"");
  }
  std::string_view id = text.substr(kApiKeyPrefix.size(), kApiKeyIdLen);
  for (char c : id) {
    if (!IsLowerHex(c)) return InvalidArgument("API key id is not 16 lowercase hex characters");
  }
  if (text[kApiKeyPrefix.size() + kApiKeyIdLen] != '_') {
    return InvalidArgument("API key has no '_' after its id");
  }
  std::string_view secret = text.substr(kApiKeyPrefix.size() + kApiKeyIdLen + 1);
  for (char c : secret) {
    if (!IsB64Url(c)) return InvalidArgument("API key secret is not base64url");
  }
  return PresentedKey{id, secret};
}

std::string HashApiKeySecret(std::string_view salt_hex, std::string_view secret) {
  auto salt = HexDecode(salt_hex);
  std::string data = salt.ok() ? std::move(salt).value() : std::string();
  data.append(secret);
  return Sha256Hex(data);
}

bool VerifyApiKeySecret(std::string_view salt_hex, std::string_view hash_hex,
                        std::string_view secret) {
  return ConstantTimeEquals(HashApiKeySecret(salt_hex, secret), hash_hex);
}

}  // namespace gantry::security
