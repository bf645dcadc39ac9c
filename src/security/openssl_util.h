// Private helpers over OpenSSL shared by the security sources (not installed).
#pragma once

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <memory>
#include <string>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry::security::internal {

struct PkeyDeleter {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
};
struct BioDeleter {
  void operator()(BIO* p) const { BIO_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyDeleter>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;
using BioPtr = std::unique_ptr<BIO, BioDeleter>;

// Drains the thread's OpenSSL error queue into one line ("unknown" when empty).
inline std::string OpenSslError() {
  std::string out;
  unsigned long e;
  while ((e = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

inline const char* KeyTypeName(EVP_PKEY* key) {
  const char* n = EVP_PKEY_get0_type_name(key);
  return n ? n : "unknown";
}

inline Result<PkeyPtr> ReadPrivateKeyPem(std::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  // A null password callback with an empty passphrase: encrypted keys fail
  // instead of prompting on the terminal.
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, const_cast<char*>("")));
  if (!key) {
    ERR_clear_error();
    return InvalidArgument("not a readable unencrypted PEM private key");
  }
  return key;
}

inline Result<PkeyPtr> ReadPublicKeyPem(std::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  PkeyPtr key(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    ERR_clear_error();
    return InvalidArgument(
        "not a readable PEM public key (expected \"-----BEGIN PUBLIC KEY-----\")");
  }
  return key;
}

inline std::string BioToString(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, n > 0 ? static_cast<size_t>(n) : 0);
}

inline Result<std::string> PrivateKeyToPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return Internal("writing a private key PEM failed: " + OpenSslError());
  }
  return BioToString(bio.get());
}

inline Result<std::string> PublicKeyToPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PUBKEY(bio.get(), key) != 1) {
    return Internal("writing a public key PEM failed: " + OpenSslError());
  }
  return BioToString(bio.get());
}

}  // namespace gantry::security::internal
