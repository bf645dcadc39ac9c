#include "gantry/security/crypto.h"

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "openssl_util.h"

namespace gantry::security {

std::array<uint8_t, 32> Sha256(std::string_view data) {
  // Fetch the implementation once and keep one context per thread: the
  // one-shot SHA256() looks the implementation up and EVP_Digest allocates a
  // context on every call, which dominates for the short inputs hashed on hot
  // paths (audit records, API keys).
  static EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  struct CtxFree {
    void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
  };
  thread_local std::unique_ptr<EVP_MD_CTX, CtxFree> ctx(EVP_MD_CTX_new());
  std::array<uint8_t, 32> out{};
  if (md == nullptr || ctx == nullptr || EVP_DigestInit_ex2(ctx.get(), md, nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), data.data(), data.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), out.data(), nullptr) != 1) {
    SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.data());
  }
  return out;
}

std::string Sha256Hex(std::string_view data) {
  auto d = Sha256(data);
  return HexEncode(std::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(bytes.size() * 2, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto b = static_cast<uint8_t>(bytes[i]);
    out[2 * i] = kDigits[b >> 4];
    out[2 * i + 1] = kDigits[b & 15];
  }
  return out;
}

namespace {
int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// -1 for characters outside the base64url alphabet.
int B64UrlValue(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}
}  // namespace

Result<std::string> HexDecode(std::string_view hex) {
  if (hex.size() % 2 != 0) {
    return InvalidArgument("hex string has odd length " + std::to_string(hex.size()));
  }
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = HexValue(hex[2 * i]);
    int lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      return InvalidArgument("hex string has a non-hex character at offset " +
                             std::to_string(hi < 0 ? 2 * i : 2 * i + 1));
    }
    out[i] = static_cast<char>((hi << 4) | lo);
  }
  return out;
}

std::string Base64UrlEncode(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve((bytes.size() * 4 + 2) / 3);
  size_t i = 0;
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = (uint32_t{p[i]} << 16) | (uint32_t{p[i + 1]} << 8) | p[i + 2];
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(kAlphabet[(v >> 6) & 63]);
    out.push_back(kAlphabet[v & 63]);
  }
  size_t rest = bytes.size() - i;
  if (rest == 1) {
    uint32_t v = uint32_t{p[i]} << 16;
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
  } else if (rest == 2) {
    uint32_t v = (uint32_t{p[i]} << 16) | (uint32_t{p[i + 1]} << 8);
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(kAlphabet[(v >> 6) & 63]);
  }
  return out;
}

Result<std::string> Base64UrlDecode(std::string_view text) {
  if (text.size() % 4 == 1) {
    return InvalidArgument("base64url text has an impossible length " +
                           std::to_string(text.size()));
  }
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    int v = B64UrlValue(text[i]);
    if (v < 0) {
      return InvalidArgument("base64url text has an invalid character at offset " +
                             std::to_string(i) + " (padding '=' is not accepted)");
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  // Leftover bits must be zero so that every byte string has one encoding
  // (otherwise a signed token could be re-encoded into a different string).
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0) {
    return InvalidArgument("base64url text has non-zero trailing bits");
  }
  return out;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (n == 0) return out;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    std::fprintf(stderr,
                 "gantry: RAND_bytes failed (%s); refusing to continue without a "
                 "working random number generator\n",
                 internal::OpenSslError().c_str());
    std::abort();
  }
  return out;
}

Result<Ed25519KeyPair> GenerateEd25519() {
  internal::PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  if (!key) return Internal("Ed25519 key generation failed: " + internal::OpenSslError());
  Ed25519KeyPair out;
  ASSIGN_OR_RETURN(out.private_pem, internal::PrivateKeyToPem(key.get()));
  ASSIGN_OR_RETURN(out.public_pem, internal::PublicKeyToPem(key.get()));
  return out;
}

namespace {
std::string RawPublicKeyId(EVP_PKEY* key) {
  unsigned char raw[32];
  size_t len = sizeof(raw);
  if (EVP_PKEY_get_raw_public_key(key, raw, &len) != 1 || len != 32) return "";
  return Sha256Hex(std::string_view(reinterpret_cast<const char*>(raw), len)).substr(0, 16);
}
}  // namespace

struct Ed25519Signer::Impl {
  internal::PkeyPtr key;
  std::string key_id;
};

Ed25519Signer::Ed25519Signer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Ed25519Signer::Ed25519Signer(Ed25519Signer&&) noexcept = default;
Ed25519Signer& Ed25519Signer::operator=(Ed25519Signer&&) noexcept = default;
Ed25519Signer::~Ed25519Signer() = default;

Result<Ed25519Signer> Ed25519Signer::FromPrivatePem(std::string_view pem) {
  ASSIGN_OR_RETURN(internal::PkeyPtr key, internal::ReadPrivateKeyPem(pem));
  if (EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519) {
    return InvalidArgument("the private key is not an Ed25519 key (it is " +
                           std::string(internal::KeyTypeName(key.get())) +
                           "); create one with `gantry audit keygen --out PREFIX`");
  }
  auto impl = std::make_unique<Impl>();
  impl->key_id = RawPublicKeyId(key.get());
  impl->key = std::move(key);
  return Ed25519Signer(std::move(impl));
}

Result<std::string> Ed25519Signer::Sign(std::string_view message) const {
  internal::MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, impl_->key.get()) != 1) {
    return Internal("Ed25519 sign init failed: " + internal::OpenSslError());
  }
  std::string sig(64, '\0');
  size_t len = sig.size();
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1 ||
      len != 64) {
    return Internal("Ed25519 sign failed: " + internal::OpenSslError());
  }
  return sig;
}

std::string Ed25519Signer::PublicKeyPem() const {
  auto pem = internal::PublicKeyToPem(impl_->key.get());
  return pem.ok() ? *pem : std::string();
}

std::string Ed25519Signer::KeyId() const { return impl_->key_id; }

struct Ed25519Verifier::Impl {
  internal::PkeyPtr key;
  std::string key_id;
};

Ed25519Verifier::Ed25519Verifier(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Ed25519Verifier::Ed25519Verifier(Ed25519Verifier&&) noexcept = default;
Ed25519Verifier& Ed25519Verifier::operator=(Ed25519Verifier&&) noexcept = default;
Ed25519Verifier::~Ed25519Verifier() = default;

Result<Ed25519Verifier> Ed25519Verifier::FromPublicPem(std::string_view pem) {
  ASSIGN_OR_RETURN(internal::PkeyPtr key, internal::ReadPublicKeyPem(pem));
  if (EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519) {
    return InvalidArgument("the public key is not an Ed25519 key (it is " +
                           std::string(internal::KeyTypeName(key.get())) +
                           "); pass the PREFIX.pub written by `gantry audit keygen`");
  }
  auto impl = std::make_unique<Impl>();
  impl->key_id = RawPublicKeyId(key.get());
  impl->key = std::move(key);
  return Ed25519Verifier(std::move(impl));
}

bool Ed25519Verifier::Verify(std::string_view message, std::string_view signature) const {
  if (signature.size() != 64) return false;
  internal::MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, impl_->key.get()) != 1) {
    return false;
  }
  return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                          signature.size(), reinterpret_cast<const unsigned char*>(message.data()),
                          message.size()) == 1;
}

std::string Ed25519Verifier::KeyId() const { return impl_->key_id; }

}  // namespace gantry::security
