// DSSE envelopes with Ed25519 / ECDSA P-256 (see dsse.h).
#include "gantry/security/dsse.h"

#include <openssl/ec.h>
#include <openssl/x509.h>

#include <array>

#include "gantry/security/crypto.h"
#include "openssl_util.h"

namespace gantry::security {

using internal::MdCtxPtr;
using internal::OpenSslError;
using internal::PkeyPtr;

std::string_view KeyAlgorithmName(KeyAlgorithm alg) {
  return alg == KeyAlgorithm::kEd25519 ? "ed25519" : "ecdsa-p256";
}

Result<KeyAlgorithm> ParseKeyAlgorithm(std::string_view text) {
  if (text == "ed25519") return KeyAlgorithm::kEd25519;
  if (text == "ecdsa-p256" || text == "p256" || text == "ecdsa") return KeyAlgorithm::kEcdsaP256;
  return InvalidArgument("unknown key algorithm '" + std::string(text) +
                         "'; use ed25519 or ecdsa-p256");
}

namespace {

// Which of the two supported algorithms `key` is; InvalidArgument otherwise
// (RSA, other curves) so that a verifier never runs with an unexpected scheme.
Result<KeyAlgorithm> AlgorithmOf(EVP_PKEY* key) {
  if (EVP_PKEY_is_a(key, "ED25519")) return KeyAlgorithm::kEd25519;
  if (EVP_PKEY_is_a(key, "EC")) {
    char group[64] = {0};
    size_t len = 0;
    if (EVP_PKEY_get_group_name(key, group, sizeof(group), &len) == 1 &&
        (std::string_view(group) == "prime256v1" || std::string_view(group) == "P-256")) {
      return KeyAlgorithm::kEcdsaP256;
    }
    return InvalidArgument(std::string("EC key on curve '") + group +
                           "' is not supported; use P-256 (prime256v1) or Ed25519");
  }
  return InvalidArgument(std::string("key type '") + internal::KeyTypeName(key) +
                         "' is not supported; use Ed25519 or ECDSA P-256");
}

std::string KeyIdOf(EVP_PKEY* key) {
  unsigned char* der = nullptr;
  int n = i2d_PUBKEY(key, &der);
  if (n <= 0) return "";
  std::string bytes(reinterpret_cast<char*>(der), static_cast<size_t>(n));
  OPENSSL_free(der);
  return Sha256Hex(bytes).substr(0, 16);
}

// Ed25519 takes no digest (pure EdDSA over the whole message); ECDSA uses SHA-256.
const EVP_MD* DigestFor(KeyAlgorithm alg) {
  return alg == KeyAlgorithm::kEd25519 ? nullptr : EVP_sha256();
}

}  // namespace

Result<KeyPairPem> GenerateSigningKey(KeyAlgorithm alg) {
  PkeyPtr key(alg == KeyAlgorithm::kEd25519 ? EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519")
                                            : EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) return Internal("key generation failed: " + OpenSslError());
  KeyPairPem out;
  ASSIGN_OR_RETURN(out.private_pem, internal::PrivateKeyToPem(key.get()));
  ASSIGN_OR_RETURN(out.public_pem, internal::PublicKeyToPem(key.get()));
  return out;
}

std::string DssePae(std::string_view payload_type, std::string_view payload) {
  std::string out = "DSSEv1 ";
  out += std::to_string(payload_type.size());
  out += ' ';
  out += payload_type;
  out += ' ';
  out += std::to_string(payload.size());
  out += ' ';
  out += payload;
  return out;
}

namespace {

// What a signer and a verifier both keep of their key.
struct LoadedKey {
  PkeyPtr key;
  KeyAlgorithm alg;
  std::string keyid;
  std::string public_pem;
};

Result<LoadedKey> Describe(PkeyPtr key) {
  LoadedKey k;
  ASSIGN_OR_RETURN(k.alg, AlgorithmOf(key.get()));
  k.keyid = KeyIdOf(key.get());
  ASSIGN_OR_RETURN(k.public_pem, internal::PublicKeyToPem(key.get()));
  k.key = std::move(key);
  return k;
}

}  // namespace

struct DsseSigner::Impl : LoadedKey {};

DsseSigner::DsseSigner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DsseSigner::DsseSigner(DsseSigner&&) noexcept = default;
DsseSigner& DsseSigner::operator=(DsseSigner&&) noexcept = default;
DsseSigner::~DsseSigner() = default;

Result<DsseSigner> DsseSigner::FromPrivatePem(std::string_view pem) {
  ASSIGN_OR_RETURN(PkeyPtr key, internal::ReadPrivateKeyPem(pem));
  ASSIGN_OR_RETURN(LoadedKey k, Describe(std::move(key)));
  return DsseSigner(std::make_unique<Impl>(Impl{std::move(k)}));
}

Result<std::string> DsseSigner::Sign(std::string_view message) const {
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, DigestFor(impl_->alg), nullptr,
                                 impl_->key.get()) != 1) {
    return Internal("signing init failed: " + OpenSslError());
  }
  size_t len = 0;
  auto* msg = reinterpret_cast<const unsigned char*>(message.data());
  if (EVP_DigestSign(ctx.get(), nullptr, &len, msg, message.size()) != 1) {
    return Internal("signing failed: " + OpenSslError());
  }
  std::string sig(len, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len, msg,
                     message.size()) != 1) {
    return Internal("signing failed: " + OpenSslError());
  }
  sig.resize(len);
  return sig;
}

KeyAlgorithm DsseSigner::algorithm() const { return impl_->alg; }
std::string DsseSigner::KeyId() const { return impl_->keyid; }
std::string DsseSigner::PublicKeyPem() const { return impl_->public_pem; }

struct DsseVerifier::Impl : LoadedKey {};

DsseVerifier::DsseVerifier(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DsseVerifier::DsseVerifier(DsseVerifier&&) noexcept = default;
DsseVerifier& DsseVerifier::operator=(DsseVerifier&&) noexcept = default;
DsseVerifier::~DsseVerifier() = default;

Result<DsseVerifier> DsseVerifier::FromPublicPem(std::string_view pem) {
  ASSIGN_OR_RETURN(PkeyPtr key, internal::ReadPublicKeyPem(pem));
  ASSIGN_OR_RETURN(LoadedKey k, Describe(std::move(key)));
  return DsseVerifier(std::make_unique<Impl>(Impl{std::move(k)}));
}

bool DsseVerifier::Verify(std::string_view message, std::string_view signature) const {
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, DigestFor(impl_->alg), nullptr,
                                   impl_->key.get()) != 1) {
    ERR_clear_error();
    return false;
  }
  int rc = EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                            signature.size(),
                            reinterpret_cast<const unsigned char*>(message.data()), message.size());
  ERR_clear_error();
  return rc == 1;
}

KeyAlgorithm DsseVerifier::algorithm() const { return impl_->alg; }
std::string DsseVerifier::KeyId() const { return impl_->keyid; }
std::string DsseVerifier::PublicKeyPem() const { return impl_->public_pem; }

Result<DsseEnvelope> SignDsse(std::string_view payload_type, std::string_view payload,
                              const DsseSigner& signer) {
  DsseEnvelope env;
  env.payload_type = std::string(payload_type);
  env.payload = std::string(payload);
  ASSIGN_OR_RETURN(std::string sig, signer.Sign(DssePae(payload_type, payload)));
  env.signatures.push_back({signer.KeyId(), std::move(sig)});
  return env;
}

Json DsseEnvelopeToJson(const DsseEnvelope& env) {
  Json j = Json::object();
  j["payload"] = Base64Encode(env.payload);
  j["payloadType"] = env.payload_type;
  Json sigs = Json::array();
  for (const auto& s : env.signatures) {
    Json o = Json::object();
    o["keyid"] = s.keyid;
    o["sig"] = Base64Encode(s.sig);
    sigs.push_back(std::move(o));
  }
  j["signatures"] = std::move(sigs);
  return j;
}

Result<DsseEnvelope> DsseEnvelopeFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("DSSE envelope: expected a JSON object");
  auto str = [&](const char* k) -> Result<std::string> {
    auto it = j.find(k);
    if (it == j.end() || !it->is_string()) {
      return InvalidArgument(std::string("DSSE envelope: missing string field '") + k + "'");
    }
    return it->get<std::string>();
  };
  DsseEnvelope env;
  ASSIGN_OR_RETURN(env.payload_type, str("payloadType"));
  ASSIGN_OR_RETURN(std::string payload_b64, str("payload"));
  auto payload = Base64Decode(payload_b64);
  if (!payload.ok()) return payload.status().WithContext("DSSE envelope field 'payload'");
  env.payload = *std::move(payload);
  auto it = j.find("signatures");
  if (it == j.end() || !it->is_array()) {
    return InvalidArgument("DSSE envelope: missing array field 'signatures'");
  }
  for (const auto& s : *it) {
    if (!s.is_object() || !s.contains("sig") || !s["sig"].is_string()) {
      return InvalidArgument("DSSE envelope: a signature has no string field 'sig'");
    }
    DsseSignature sig;
    if (s.contains("keyid") && s["keyid"].is_string()) sig.keyid = s["keyid"].get<std::string>();
    auto raw = Base64Decode(s["sig"].get<std::string>());
    if (!raw.ok()) return raw.status().WithContext("DSSE envelope signature 'sig'");
    sig.sig = *std::move(raw);
    env.signatures.push_back(std::move(sig));
  }
  return env;
}

Result<std::string> VerifyDsse(const DsseEnvelope& env, const std::vector<DsseVerifier>& trusted) {
  if (env.signatures.empty()) return PermissionDenied("the DSSE envelope has no signatures");
  if (trusted.empty()) {
    return PermissionDenied("no trusted public keys are configured; add one before verifying");
  }
  std::string pae = DssePae(env.payload_type, env.payload);
  std::string tried;
  for (const auto& s : env.signatures) {
    for (const auto& v : trusted) {
      // An empty keyid is allowed by DSSE (model_signing writes ""): then try every key.
      if (!s.keyid.empty() && s.keyid != v.KeyId()) continue;
      if (v.Verify(pae, s.sig)) return v.KeyId();
      tried += (tried.empty() ? "" : ", ") + v.KeyId();
    }
  }
  if (tried.empty()) {
    std::string ids;
    for (const auto& s : env.signatures) ids += (ids.empty() ? "" : ", ") + s.keyid;
    return PermissionDenied("signed by key id(s) " + ids +
                            ", none of which is a trusted key; add the signer's public key");
  }
  return PermissionDenied("signature does not verify under trusted key(s) " + tried +
                          " (wrong key or the payload was modified)");
}

}  // namespace gantry::security
