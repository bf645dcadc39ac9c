#include "gantry/security/jwt.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/hmac.h>

#include <cmath>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "gantry/security/crypto.h"
#include "openssl_util.h"

namespace gantry::security {

namespace {

using internal::PkeyPtr;
using Json = nlohmann::json;

constexpr size_t kMaxTokenBytes = 16 * 1024;

enum class Alg { kHS256, kRS256, kES256 };

bool ParseAlg(std::string_view s, Alg* out) {
  if (s == "HS256")
    *out = Alg::kHS256;
  else if (s == "RS256")
    *out = Alg::kRS256;
  else if (s == "ES256")
    *out = Alg::kES256;
  else
    return false;
  return true;
}

struct ParsedKey {
  Alg alg;
  std::string kid;
  std::string secret;  // HS256
  PkeyPtr pkey;        // RS256 / ES256
};

Status Denied(const char* reason) { return PermissionDenied(reason); }

std::string HmacSha256(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

// Raw R||S (JWS, RFC 7518 3.4) -> DER ECDSA-Sig-Value for OpenSSL.
bool RawToDer(std::string_view raw, std::string* der) {
  if (raw.size() != 64) return false;
  ECDSA_SIG* sig = ECDSA_SIG_new();
  if (!sig) return false;
  BIGNUM* r = BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data()), 32, nullptr);
  BIGNUM* s = BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data()) + 32, 32, nullptr);
  if (!r || !s || ECDSA_SIG_set0(sig, r, s) != 1) {
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(sig);
    return false;
  }
  int n = i2d_ECDSA_SIG(sig, nullptr);
  bool ok = n > 0;
  if (ok) {
    der->resize(static_cast<size_t>(n));
    auto* p = reinterpret_cast<unsigned char*>(der->data());
    ok = i2d_ECDSA_SIG(sig, &p) == n;
  }
  ECDSA_SIG_free(sig);
  return ok;
}

// DER ECDSA-Sig-Value -> raw R||S, each left-padded to 32 bytes.
bool DerToRaw(std::string_view der, std::string* raw) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  ECDSA_SIG* sig = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der.size()));
  if (!sig) return false;
  const BIGNUM* r = nullptr;
  const BIGNUM* s = nullptr;
  ECDSA_SIG_get0(sig, &r, &s);
  raw->assign(64, '\0');
  bool ok = BN_bn2binpad(r, reinterpret_cast<unsigned char*>(raw->data()), 32) == 32 &&
            BN_bn2binpad(s, reinterpret_cast<unsigned char*>(raw->data()) + 32, 32) == 32;
  ECDSA_SIG_free(sig);
  return ok;
}

bool VerifyDigest(EVP_PKEY* key, std::string_view data, std::string_view sig) {
  internal::MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key) != 1) {
    ERR_clear_error();
    return false;
  }
  bool ok =
      EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                       reinterpret_cast<const unsigned char*>(data.data()), data.size()) == 1;
  if (!ok) ERR_clear_error();
  return ok;
}

bool VerifyWith(const ParsedKey& k, std::string_view signing_input, std::string_view sig) {
  switch (k.alg) {
    case Alg::kHS256:
      return ConstantTimeEquals(HmacSha256(k.secret, signing_input), sig);
    case Alg::kRS256:
      return VerifyDigest(k.pkey.get(), signing_input, sig);
    case Alg::kES256: {
      std::string der;
      if (!RawToDer(sig, &der)) return false;
      return VerifyDigest(k.pkey.get(), signing_input, der);
    }
  }
  return false;
}

bool IsP256(EVP_PKEY* key) {
  char name[64] = {0};
  size_t len = 0;
  if (EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, name, sizeof(name), &len) !=
      1) {
    return false;
  }
  std::string_view n(name, len);
  return n == "prime256v1" || n == "P-256" || n == "secp256r1";
}

// NumericDate: a JSON number (integer or not). Fractions are floored.
bool ReadTime(const Json& claims, const char* name, int64_t* out, bool* present) {
  auto it = claims.find(name);
  *present = it != claims.end();
  if (!*present) return true;
  if (it->is_number_integer()) {
    *out = it->get<int64_t>();
    return true;
  }
  if (it->is_number_unsigned()) {
    uint64_t v = it->get<uint64_t>();
    *out = v > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v);
    return true;
  }
  if (it->is_number_float()) {
    double d = it->get<double>();
    if (!std::isfinite(d) || d > 9e18 || d < -9e18) return false;
    *out = static_cast<int64_t>(std::floor(d));
    return true;
  }
  return false;
}

int64_t SatAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN;
  return r;
}

}  // namespace

struct JwtKeySet::Impl {
  std::vector<ParsedKey> keys;
};

JwtKeySet::JwtKeySet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JwtKeySet::~JwtKeySet() = default;
size_t JwtKeySet::size() const { return impl_->keys.size(); }
bool JwtKeySet::HasKid(std::string_view kid) const {
  for (const ParsedKey& k : impl_->keys) {
    if (!k.kid.empty() && k.kid == kid) return true;
  }
  return false;
}

namespace {

Result<ParsedKey> ParseKey(const JwtKey& k, size_t index) {
  std::string where = "JWT key " + std::to_string(index + 1) + " (alg " + k.alg + ", kid '" +
                      (k.kid.empty() ? std::string("*") : k.kid) + "')";
  ParsedKey pk;
  if (!ParseAlg(k.alg, &pk.alg)) {
    return InvalidArgument(where + ": unsupported alg; use HS256, RS256 or ES256");
  }
  pk.kid = k.kid;
  if (pk.alg == Alg::kHS256) {
    if (k.secret.size() < 32) {
      return InvalidArgument(where + ": HS256 secret is " + std::to_string(k.secret.size()) +
                             " bytes; use at least 32 random bytes (RFC 7518 3.2)");
    }
    pk.secret = k.secret;
    return pk;
  }
  auto key = internal::ReadPublicKeyPem(k.public_pem);
  if (!key.ok()) return key.status().WithContext(where);
  pk.pkey = std::move(key).value();
  int id = EVP_PKEY_get_id(pk.pkey.get());
  if (pk.alg == Alg::kRS256) {
    if (id != EVP_PKEY_RSA) {
      return InvalidArgument(where + ": public key is " + internal::KeyTypeName(pk.pkey.get()) +
                             ", RS256 needs RSA");
    }
    if (EVP_PKEY_get_bits(pk.pkey.get()) < 2048) {
      return InvalidArgument(where + ": RSA key has " +
                             std::to_string(EVP_PKEY_get_bits(pk.pkey.get())) +
                             " bits; use at least 2048");
    }
  } else if (id != EVP_PKEY_EC || !IsP256(pk.pkey.get())) {
    return InvalidArgument(where + ": public key is not an EC P-256 key, ES256 needs one");
  }
  return pk;
}

// `pattern` with "{tenantid}" (if any) replaced by `tid`.
std::string ExpandIssuer(std::string_view pattern, std::string_view tid, bool* templated) {
  constexpr std::string_view kTenant = "{tenantid}";
  size_t at = pattern.find(kTenant);
  *templated = at != std::string_view::npos;
  if (!*templated) return std::string(pattern);
  std::string out(pattern.substr(0, at));
  out += tid;
  out += pattern.substr(at + kTenant.size());
  return out;
}

void AddClaimValues(const Json& v, bool split_spaces, std::vector<std::string>* out) {
  auto add = [&](const std::string& s) {
    if (!split_spaces) {
      if (!s.empty()) out->push_back(s);
      return;
    }
    size_t i = 0;
    while (i < s.size()) {
      size_t j = s.find(' ', i);
      if (j == std::string::npos) j = s.size();
      if (j > i) out->push_back(s.substr(i, j - i));
      i = j + 1;
    }
  };
  if (v.is_string()) {
    add(v.get_ref<const std::string&>());
  } else if (v.is_array()) {
    for (const Json& r : v) {
      if (r.is_string()) add(r.get_ref<const std::string&>());
    }
  }
}

}  // namespace

Result<std::shared_ptr<const JwtKeySet>> JwtKeySet::Create(const std::vector<JwtKey>& keys) {
  auto impl = std::make_unique<Impl>();
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSIGN_OR_RETURN(ParsedKey pk, ParseKey(keys[i], i));
    impl->keys.push_back(std::move(pk));
  }
  return std::shared_ptr<const JwtKeySet>(new JwtKeySet(std::move(impl)));
}

struct JwtVerifier::Impl {
  JwtOptions options;
  std::shared_ptr<const JwtKeySnapshot> static_keys;  // null with a key_provider

  struct Cached {
    JwtClaims claims;
    bool has_exp, has_nbf;
    uint64_t generation;  // of the key snapshot that verified it
  };
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  mutable std::mutex cache_mu;
  mutable std::unordered_map<std::string, Cached, Hash, std::equal_to<>> cache;  // by SHA-256
  mutable std::deque<std::string> cache_order;                                   // FIFO eviction

  // Time checks are the only ones whose answer changes for a given key
  // snapshot, so cached tokens repeat exactly these.
  Status CheckTimes(const JwtClaims& c, bool has_exp, bool has_nbf, int64_t now) const {
    if (!has_exp && options.require_exp) return Denied("missing_exp");
    if (has_exp && now >= SatAdd(c.exp, options.leeway_s)) return Denied("expired");
    if (has_nbf && SatAdd(now, options.leeway_s) < c.nbf) return Denied("not_yet_valid");
    return Status::Ok();
  }

  Result<std::shared_ptr<const JwtKeySnapshot>> Keys() const {
    if (static_keys) return static_keys;
    Result<std::shared_ptr<const JwtKeySnapshot>> k = options.key_provider->Current();
    if (!k.ok() || *k == nullptr || (*k)->keys == nullptr) return Denied("keys_unavailable");
    return k;
  }

  Status CheckIssuerAndTenant(const Json& claims, const JwtKeySnapshot& keys,
                              const std::string& issuer) const;
  std::vector<std::string> Roles(const Json& claims) const;
  Result<Cached> VerifyUncached(std::string_view token, int64_t now,
                                std::shared_ptr<const JwtKeySnapshot> keys) const;
  // `key` is the SHA-256 of the token.
  void Remember(std::string_view key, const Cached& c, int64_t now) const;
};

Status JwtVerifier::Impl::CheckIssuerAndTenant(const Json& claims, const JwtKeySnapshot& keys,
                                               const std::string& issuer) const {
  std::string tid;
  bool has_tid = false;
  if (auto it = claims.find("tid"); it != claims.end()) {
    if (!it->is_string()) return Denied("malformed");
    tid = it->get<std::string>();
    has_tid = !tid.empty();
  }
  auto tenant_allowed = [&] {
    if (!has_tid) return false;
    for (const std::string& t : options.tenants) {
      if (t == tid) return true;
    }
    return false;
  };
  if (!options.tenants.empty() && !tenant_allowed()) return Denied("tenant_not_allowed");

  std::vector<const std::string*> patterns;
  if (!options.issuer.empty()) patterns.push_back(&options.issuer);
  for (const std::string& i : options.issuers) patterns.push_back(&i);
  for (const std::string& i : keys.issuers) patterns.push_back(&i);
  if (patterns.empty()) return Status::Ok();
  bool templated_match_without_tenants = false;
  for (const std::string* p : patterns) {
    bool templated = false;
    std::string want = ExpandIssuer(*p, tid, &templated);
    if (templated && !has_tid) continue;
    if (want != issuer) continue;
    // Any tenant can sign in to a multi-tenant app: a templated issuer needs
    // the allow-list (checked above), or it accepts nobody.
    if (templated && options.tenants.empty()) {
      templated_match_without_tenants = true;
      continue;
    }
    return Status::Ok();
  }
  return Denied(templated_match_without_tenants ? "tenant_not_allowed" : "issuer_mismatch");
}

std::vector<std::string> JwtVerifier::Impl::Roles(const Json& claims) const {
  std::vector<std::string> values;
  if (auto it = claims.find(options.role_claim); it != claims.end()) {
    AddClaimValues(*it, false, &values);
  }
  if (options.role_map.empty()) return values;
  if (options.role_claim != "roles") {
    if (auto it = claims.find("roles"); it != claims.end()) AddClaimValues(*it, false, &values);
  }
  if (auto it = claims.find("scp"); it != claims.end()) AddClaimValues(*it, true, &values);
  std::vector<std::string> roles;
  for (const auto& [role, grants] : options.role_map) {
    bool granted = false;
    for (const std::string& g : grants) {
      for (const std::string& v : values) granted = granted || v == g;
    }
    if (granted) roles.push_back(role);
  }
  return roles;
}

Result<JwtVerifier::Impl::Cached> JwtVerifier::Impl::VerifyUncached(
    std::string_view token, int64_t now, std::shared_ptr<const JwtKeySnapshot> snapshot) const {
  if (token.size() > kMaxTokenBytes) return Denied("malformed");
  size_t d1 = token.find('.');
  if (d1 == std::string_view::npos) return Denied("malformed");
  size_t d2 = token.find('.', d1 + 1);
  if (d2 == std::string_view::npos || token.find('.', d2 + 1) != std::string_view::npos) {
    return Denied("malformed");
  }
  auto header_text = Base64UrlDecode(token.substr(0, d1));
  auto sig = Base64UrlDecode(token.substr(d2 + 1));
  if (!header_text.ok() || !sig.ok()) return Denied("malformed");
  Json header = Json::parse(*header_text, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) return Denied("malformed");
  auto alg_it = header.find("alg");
  if (alg_it == header.end() || !alg_it->is_string()) return Denied("malformed");
  // Critical extensions we do not understand must make the token invalid (RFC 7515 4.1.11).
  if (header.contains("crit")) return Denied("malformed");
  Alg alg;
  if (!ParseAlg(alg_it->get_ref<const std::string&>(), &alg)) return Denied("alg_not_allowed");
  std::string kid;
  if (auto k = header.find("kid"); k != header.end()) {
    if (!k->is_string()) return Denied("malformed");
    kid = k->get<std::string>();
  }

  // Candidate keys by kid; the algorithm comes from the key, and a token whose
  // alg differs from every candidate's is refused (no algorithm confusion).
  std::string_view signing_input = token.substr(0, d2);
  auto any_kid_match = [&](const JwtKeySet& set) {
    for (const ParsedKey& k : set.impl().keys) {
      if (kid.empty() || k.kid.empty() || k.kid == kid) return true;
    }
    return false;
  };
  if (!any_kid_match(*snapshot->keys)) {
    // Keys rotate: a kid we have not seen may have been published since the
    // last fetch. The provider rate-limits these refreshes.
    if (!options.key_provider || kid.empty()) return Denied("unknown_kid");
    auto fresh = options.key_provider->RefreshForKid(kid);
    if (!fresh.ok() || *fresh == nullptr || (*fresh)->keys == nullptr ||
        !any_kid_match(*(*fresh)->keys)) {
      return Denied("unknown_kid");
    }
    snapshot = *std::move(fresh);
  }
  const std::vector<ParsedKey>& keys = snapshot->keys->impl().keys;
  bool verified = false;
  for (const ParsedKey& k : keys) {
    if (!kid.empty() && !k.kid.empty() && k.kid != kid) continue;
    if (k.alg != alg) continue;
    if (VerifyWith(k, signing_input, *sig)) {
      verified = true;
      break;
    }
  }
  if (!verified) {
    bool alg_matched = false;
    for (const ParsedKey& k : keys) {
      if ((kid.empty() || k.kid.empty() || k.kid == kid) && k.alg == alg) alg_matched = true;
    }
    return Denied(alg_matched ? "bad_signature" : "alg_not_allowed");
  }

  auto payload_text = Base64UrlDecode(token.substr(d1 + 1, d2 - d1 - 1));
  if (!payload_text.ok()) return Denied("malformed");
  Json claims = Json::parse(*payload_text, nullptr, false);
  if (claims.is_discarded() || !claims.is_object()) return Denied("malformed");

  Cached out;
  out.generation = snapshot->generation;
  bool has_iat;
  if (!ReadTime(claims, "exp", &out.claims.exp, &out.has_exp) ||
      !ReadTime(claims, "nbf", &out.claims.nbf, &out.has_nbf) ||
      !ReadTime(claims, "iat", &out.claims.iat, &has_iat)) {
    return Denied("malformed");
  }
  RETURN_IF_ERROR(CheckTimes(out.claims, out.has_exp, out.has_nbf, now));

  if (auto it = claims.find("iss"); it != claims.end()) {
    if (!it->is_string()) return Denied("malformed");
    out.claims.issuer = it->get<std::string>();
  }
  RETURN_IF_ERROR(CheckIssuerAndTenant(claims, *snapshot, out.claims.issuer));
  if (!options.audiences.empty()) {
    std::vector<std::string> aud;
    if (auto it = claims.find("aud"); it != claims.end()) {
      if (it->is_string()) {
        aud.push_back(it->get<std::string>());
      } else if (it->is_array()) {
        for (const Json& a : *it) {
          if (a.is_string()) aud.push_back(a.get<std::string>());
        }
      } else {
        return Denied("malformed");
      }
    }
    bool match = false;
    for (const std::string& a : aud) {
      for (const std::string& want : options.audiences) match = match || a == want;
    }
    if (!match) return Denied("audience_mismatch");
  }
  if (auto it = claims.find("sub"); it != claims.end()) {
    if (!it->is_string()) return Denied("malformed");
    out.claims.subject = it->get<std::string>();
  }
  out.claims.roles = Roles(claims);
  if (out.claims.roles.empty()) return Denied("no_role");
  return out;
}

void JwtVerifier::Impl::Remember(std::string_view key, const Cached& c, int64_t now) const {
  if (options.cache_size == 0) return;
  std::lock_guard<std::mutex> lock(cache_mu);
  if (auto it = cache.find(key); it != cache.end()) {
    it->second = c;  // re-verified under a newer key snapshot
    return;
  }
  while (cache.size() >= options.cache_size && !cache_order.empty()) {
    cache.erase(cache_order.front());
    cache_order.pop_front();
  }
  // Drop a few entries that have expired for good, so that the FIFO mostly
  // holds live tokens.
  for (int i = 0; i < 2 && !cache_order.empty(); ++i) {
    auto it = cache.find(cache_order.front());
    if (it == cache.end() || !it->second.has_exp ||
        now < SatAdd(it->second.claims.exp, options.leeway_s)) {
      break;
    }
    cache.erase(it);
    cache_order.pop_front();
  }
  cache_order.emplace_back(key);
  cache.emplace(std::string(key), c);
}

JwtVerifier::JwtVerifier(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JwtVerifier::~JwtVerifier() = default;

Result<std::unique_ptr<JwtVerifier>> JwtVerifier::Create(JwtOptions options) {
  auto impl = std::make_unique<Impl>();
  if (options.key_provider && !options.keys.empty()) {
    return InvalidArgument(
        "JWT verification takes either static keys (auth.jwt.keys) or a key provider (OpenID "
        "Connect), not both");
  }
  if (!options.key_provider && options.keys.empty()) {
    return InvalidArgument("JWT verification needs at least one key under auth.jwt.keys");
  }
  if (options.leeway_s < 0) return InvalidArgument("JWT leeway is negative");
  if (options.role_claim.empty()) return InvalidArgument("JWT role_claim is empty");
  for (const auto& [role, grants] : options.role_map) {
    if (role.empty() || grants.empty()) {
      return InvalidArgument("JWT role_map: role '" + role +
                             "' needs a non-empty name and at least one claim value");
    }
  }
  if (!options.key_provider) {
    auto snap = std::make_shared<JwtKeySnapshot>();
    ASSIGN_OR_RETURN(snap->keys, JwtKeySet::Create(options.keys));
    impl->static_keys = std::move(snap);
  }
  impl->options = std::move(options);
  return std::unique_ptr<JwtVerifier>(new JwtVerifier(std::move(impl)));
}

Result<JwtClaims> JwtVerifier::Verify(std::string_view token, int64_t now_unix) const {
  ASSIGN_OR_RETURN(std::shared_ptr<const JwtKeySnapshot> keys, impl_->Keys());
  // The cache is keyed by the SHA-256 of the exact token bytes: bounded memory
  // per entry however long tokens are, and a hit means the same signed bytes.
  std::string cache_key;
  if (impl_->options.cache_size > 0 && token.size() <= kMaxTokenBytes) {
    auto digest = Sha256(token);
    cache_key.assign(reinterpret_cast<const char*>(digest.data()), digest.size());
    std::unique_lock<std::mutex> lock(impl_->cache_mu);
    auto it = impl_->cache.find(cache_key);
    // A hit from an older key snapshot is verified again: the key that signed
    // it may have been withdrawn.
    if (it != impl_->cache.end() && it->second.generation == keys->generation) {
      Impl::Cached c = it->second;
      lock.unlock();
      RETURN_IF_ERROR(impl_->CheckTimes(c.claims, c.has_exp, c.has_nbf, now_unix));
      return std::move(c.claims);
    }
  }
  ASSIGN_OR_RETURN(Impl::Cached c, impl_->VerifyUncached(token, now_unix, std::move(keys)));
  if (!cache_key.empty()) impl_->Remember(cache_key, c, now_unix);
  return std::move(c.claims);
}

size_t JwtVerifier::cached_tokens() const {
  std::lock_guard<std::mutex> lock(impl_->cache_mu);
  return impl_->cache.size();
}

Result<std::string> SignJwt(std::string_view alg_name, std::string_view key_material,
                            std::string_view kid, const nlohmann::json& claims) {
  Alg alg;
  if (!ParseAlg(alg_name, &alg)) {
    return InvalidArgument("cannot sign with alg '" + std::string(alg_name) +
                           "'; use HS256, RS256 or ES256");
  }
  if (!claims.is_object()) return InvalidArgument("JWT claims must be a JSON object");
  Json header = {{"alg", std::string(alg_name)}, {"typ", "JWT"}};
  if (!kid.empty()) header["kid"] = std::string(kid);
  std::string input = Base64UrlEncode(header.dump()) + "." + Base64UrlEncode(claims.dump());
  std::string sig;
  if (alg == Alg::kHS256) {
    sig = HmacSha256(key_material, input);
  } else {
    ASSIGN_OR_RETURN(PkeyPtr key, internal::ReadPrivateKeyPem(key_material));
    internal::MdCtxPtr ctx(EVP_MD_CTX_new());
    if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1) {
      return InvalidArgument("cannot sign " + std::string(alg_name) +
                             " with this key: " + internal::OpenSslError());
    }
    size_t len = 0;
    if (EVP_DigestSign(ctx.get(), nullptr, &len,
                       reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1) {
      return Internal("JWT signing failed: " + internal::OpenSslError());
    }
    std::string der(len, '\0');
    if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(der.data()), &len,
                       reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1) {
      return Internal("JWT signing failed: " + internal::OpenSslError());
    }
    der.resize(len);
    if (alg == Alg::kES256) {
      if (EVP_PKEY_get_id(key.get()) != EVP_PKEY_EC) {
        return InvalidArgument("ES256 needs an EC P-256 private key");
      }
      if (!DerToRaw(der, &sig)) return Internal("converting the ECDSA signature failed");
    } else {
      if (EVP_PKEY_get_id(key.get()) != EVP_PKEY_RSA) {
        return InvalidArgument("RS256 needs an RSA private key");
      }
      sig = std::move(der);
    }
  }
  return input + "." + Base64UrlEncode(sig);
}

}  // namespace gantry::security
