// DSSE (Dead Simple Signing Envelope, secure-systems-lab/dsse v1) with
// Ed25519 or ECDSA P-256 keys: the envelope in-toto attestations and OpenSSF
// model signing use.
//
// What is signed is PAE(payloadType, payload) =
//   "DSSEv1" SP LEN(type) SP type SP LEN(payload) SP payload
// (LEN = decimal byte count, SP = one space), never the raw payload. Ed25519
// signs PAE directly (pure Ed25519); ECDSA P-256 signs SHA-256(PAE) and the
// signature is ASN.1 DER (as the sigstore / model_signing tools write it).
// The JSON envelope carries payload and signatures in standard base64 with
// padding (RFC 4648 section 4); parsing also accepts base64url.
//
// Key ids: the first 16 hex characters of SHA-256 over the public key's DER
// SubjectPublicKeyInfo (stable for a key, independent of the PEM text).
//
// Thread-safety: signers and verifiers are immutable after creation; Sign and
// Verify may be called from many threads. Nothing here throws.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/json.h"
#include "gantry/core/status.h"
#include "gantry/core/text.h"

namespace gantry::security {

enum class KeyAlgorithm { kEd25519, kEcdsaP256 };
// "ed25519" / "ecdsa-p256".
std::string_view KeyAlgorithmName(KeyAlgorithm alg);
// Accepts "ed25519", "ecdsa-p256" (also "p256", "ecdsa"); InvalidArgument names the text.
Result<KeyAlgorithm> ParseKeyAlgorithm(std::string_view text);

struct KeyPairPem {
  std::string private_pem;  // PKCS#8
  std::string public_pem;   // SubjectPublicKeyInfo
};
Result<KeyPairPem> GenerateSigningKey(KeyAlgorithm alg);

// Standard base64 with '=' padding; the decoder also takes base64url and
// missing padding, and refuses anything else (InvalidArgument).
using gantry::Base64Decode;  // gantry/core/text.h: standard or URL-safe, strict
using gantry::Base64Encode;

// The DSSE v1 pre-authentication encoding.
std::string DssePae(std::string_view payload_type, std::string_view payload);

class DsseSigner {
 public:
  // InvalidArgument when `pem` is not an unencrypted Ed25519 or P-256 private key.
  static Result<DsseSigner> FromPrivatePem(std::string_view pem);
  DsseSigner(DsseSigner&&) noexcept;
  DsseSigner& operator=(DsseSigner&&) noexcept;
  ~DsseSigner();

  // Signature bytes over `message` (raw 64 bytes for Ed25519, DER for ECDSA).
  Result<std::string> Sign(std::string_view message) const;
  KeyAlgorithm algorithm() const;
  std::string KeyId() const;
  std::string PublicKeyPem() const;

 private:
  struct Impl;
  explicit DsseSigner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class DsseVerifier {
 public:
  // InvalidArgument when `pem` is not an Ed25519 or P-256 public key.
  static Result<DsseVerifier> FromPublicPem(std::string_view pem);
  DsseVerifier(DsseVerifier&&) noexcept;
  DsseVerifier& operator=(DsseVerifier&&) noexcept;
  ~DsseVerifier();

  bool Verify(std::string_view message, std::string_view signature) const;
  KeyAlgorithm algorithm() const;
  std::string KeyId() const;
  std::string PublicKeyPem() const;

 private:
  struct Impl;
  explicit DsseVerifier(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct DsseSignature {
  std::string keyid;
  std::string sig;  // raw bytes
};
struct DsseEnvelope {
  std::string payload_type;
  std::string payload;  // raw bytes
  std::vector<DsseSignature> signatures;
};

// Signs PAE(payload_type, payload) with `signer`.
Result<DsseEnvelope> SignDsse(std::string_view payload_type, std::string_view payload,
                              const DsseSigner& signer);
// {"payload": b64, "payloadType": ..., "signatures": [{"keyid": ..., "sig": b64}]}.
Json DsseEnvelopeToJson(const DsseEnvelope& env);
// InvalidArgument naming the missing/bad field.
Result<DsseEnvelope> DsseEnvelopeFromJson(const Json& j);

// OK when at least one signature verifies under one of `trusted`; returns the
// key id that verified. PermissionDenied saying why otherwise (no signatures,
// no signature by a trusted key id, or a signature that does not verify).
Result<std::string> VerifyDsse(const DsseEnvelope& env, const std::vector<DsseVerifier>& trusted);

}  // namespace gantry::security
