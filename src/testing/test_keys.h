// Test-only: a fresh key pair as PEM text (PKCS#8 private key, SubjectPublicKeyInfo
// public key), for tests that sign and verify JWTs and JWKS.
//
//   gantry::testing::PemKeyPair rsa = gantry::testing::GenerateKeyPair("RSA");
//   gantry::testing::PemKeyPair ec = gantry::testing::GenerateKeyPair("EC");  // P-256
//
// Aborts the test binary when OpenSSL cannot make the key (nothing useful can run without it).
#pragma once

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstdlib>
#include <string>
#include <string_view>

namespace gantry::testing {

struct PemKeyPair {
  std::string priv, pub;
};

// `type` "RSA" (of `rsa_bits`) or "EC" (P-256).
inline PemKeyPair GenerateKeyPair(std::string_view type, size_t rsa_bits = 2048) {
  EVP_PKEY* key = type == "RSA" ? EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", rsa_bits)
                                : EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  if (key == nullptr) std::abort();
  auto pem = [key](bool priv) {
    BIO* b = BIO_new(BIO_s_mem());
    if (priv) {
      PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr);
    } else {
      PEM_write_bio_PUBKEY(b, key);
    }
    char* data = nullptr;
    long n = BIO_get_mem_data(b, &data);
    std::string out(data, static_cast<size_t>(n));
    BIO_free(b);
    return out;
  };
  PemKeyPair out{pem(true), pem(false)};
  EVP_PKEY_free(key);
  return out;
}

}  // namespace gantry::testing
