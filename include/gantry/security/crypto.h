// Cryptographic building blocks shared by the security module and its users:
// SHA-256, hex and base64url codecs, constant-time comparison, randomness and
// Ed25519 signing. All functions are thread-safe; nothing here throws.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry::security {

// SHA-256 of `data`.
std::array<uint8_t, 32> Sha256(std::string_view data);
// SHA-256 of `data` as 64 lowercase hex characters.
std::string Sha256Hex(std::string_view data);

// Lowercase hex of `bytes` (2 characters per byte).
std::string HexEncode(std::string_view bytes);
// Decodes hex (upper or lower case). InvalidArgument on odd length or a non-hex character.
Result<std::string> HexDecode(std::string_view hex);

// RFC 4648 section 5 base64url, without '=' padding (the JWT form).
std::string Base64UrlEncode(std::string_view bytes);
// Decodes unpadded base64url. InvalidArgument on '=' padding, characters outside
// [A-Za-z0-9_-], an impossible length (len % 4 == 1) or non-zero trailing bits
// (so each byte string has exactly one accepted encoding).
Result<std::string> Base64UrlDecode(std::string_view text);

// Compares in time that depends only on the length (CRYPTO_memcmp). False when
// the lengths differ (the length is not treated as secret).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// `n` bytes from the OpenSSL CSPRNG (RAND_bytes). Aborts the process if the
// generator fails: continuing with weak randomness is worse than stopping.
std::string RandomBytes(size_t n);

struct Ed25519KeyPair {
  std::string private_pem;  // PKCS#8 "-----BEGIN PRIVATE KEY-----"
  std::string public_pem;   // SubjectPublicKeyInfo "-----BEGIN PUBLIC KEY-----"
};
// A fresh Ed25519 key pair.
Result<Ed25519KeyPair> GenerateEd25519();

// Signs with an Ed25519 private key. Movable, not copyable; Sign() is const and
// thread-safe (each call uses its own EVP_MD_CTX).
class Ed25519Signer {
 public:
  // InvalidArgument when `pem` is not a PEM Ed25519 private key.
  static Result<Ed25519Signer> FromPrivatePem(std::string_view pem);

  Ed25519Signer(Ed25519Signer&&) noexcept;
  Ed25519Signer& operator=(Ed25519Signer&&) noexcept;
  ~Ed25519Signer();

  // The 64-byte raw Ed25519 signature of `message` (pure Ed25519, no prehash).
  Result<std::string> Sign(std::string_view message) const;
  // The matching public key as SubjectPublicKeyInfo PEM.
  std::string PublicKeyPem() const;
  // First 16 hex characters of SHA-256 of the raw 32-byte public key.
  std::string KeyId() const;

 private:
  struct Impl;
  explicit Ed25519Signer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Verifies Ed25519 signatures. Movable, not copyable; Verify() is const and thread-safe.
class Ed25519Verifier {
 public:
  // InvalidArgument when `pem` is not a PEM Ed25519 public key.
  static Result<Ed25519Verifier> FromPublicPem(std::string_view pem);

  Ed25519Verifier(Ed25519Verifier&&) noexcept;
  Ed25519Verifier& operator=(Ed25519Verifier&&) noexcept;
  ~Ed25519Verifier();

  // True only when `signature` is a valid 64-byte signature of `message`.
  bool Verify(std::string_view message, std::string_view signature) const;
  // Same definition as Ed25519Signer::KeyId().
  std::string KeyId() const;

 private:
  struct Impl;
  explicit Ed25519Verifier(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry::security
