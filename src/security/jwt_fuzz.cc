// libFuzzer target for the parsers that see untrusted bytes on the request
// path: JWT verification (header/payload/base64url/ECDSA signature decoding),
// API key parsing, glob matching and the audit record checker (json_check.h,
// differentially against nlohmann). Build with -DGANTRY_FUZZ=ON (clang).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "gantry/security/api_key.h"
#include "gantry/security/crypto.h"
#include "gantry/security/jwt.h"
#include "gantry/security/rbac.h"
#include "json_check.h"

namespace {

using namespace gantry::security;

const JwtVerifier& Verifier() {
  static std::unique_ptr<JwtVerifier> v = [] {
    JwtOptions o;
    o.keys.push_back({"HS256", "k1", std::string(32, 's'), ""});
    // Fuzzed tokens with alg ES256 reach the raw R||S -> DER conversion.
    o.keys.push_back({"ES256", "k3", "",
                      "-----BEGIN PUBLIC KEY-----\n"
                      "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEyoV6i66/dp5qGdGfLs3tm4eb6Rds\n"
                      "fU4YsA9WAljZy4hlCXO5wmQmDqafKIhsAHiGNwPkE7VP5otol2vWaUY/3g==\n"
                      "-----END PUBLIC KEY-----\n"});
    o.issuer = "iss";
    o.audiences = {"aud"};
    o.cache_size = 16;
    auto r = JwtVerifier::Create(o);
    if (!r.ok()) __builtin_trap();
    return std::move(r).value();
  }();
  return *v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 5) {
    case 0: {
      (void)Verifier().Verify(in, 1'800'000'000);
      break;
    }
    case 1: {
      // Fuzzed claims behind a valid HS256 signature, so the claim checks
      // after the signature are reached too.
      auto claims = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
      if (claims.is_object()) {
        auto token = SignJwt("HS256", std::string(32, 's'), "k1", claims);
        if (token.ok()) (void)Verifier().Verify(*token, 1'800'000'000);
      }
      auto d = Base64UrlDecode(in);
      if (d.ok() && Base64UrlEncode(*d) != in) __builtin_trap();  // one encoding per byte string
      break;
    }
    case 2: {
      auto k = ParseApiKey(in);
      if (k.ok() && (k->id.size() != kApiKeyIdLen || k->secret.size() != kApiKeySecretLen)) {
        __builtin_trap();
      }
      break;
    }
    case 3: {
      size_t cut = in.empty() ? 0 : static_cast<uint8_t>(in[0]) % (in.size() + 1);
      (void)GlobMatch(in.substr(0, cut), in.substr(cut));
      break;
    }
    case 4: {
      // Differential: the audit record checker must agree with nlohmann
      // (which treats NUL as end of input, so NUL texts are skipped).
      std::string text(in);
      if (text.find('\0') != std::string::npos) break;
      auto fast = gantry::security::internal::CheckAuditObject(text);
      size_t b = text.find_first_not_of(" \t\r\n");
      auto j = nlohmann::json::parse(text, nullptr, false);
      bool ref = b != std::string::npos && text[b] == '{' && !j.is_discarded() && j.is_object();
      bool fast_ok = fast != gantry::security::internal::ObjectCheck::kInvalid;
      bool reserved = ref && (j.contains("seq") || j.contains("prev") || j.contains("hash"));
      if (fast == gantry::security::internal::ObjectCheck::kValid && (!ref || reserved)) {
        __builtin_trap();
      }
      if (!fast_ok && ref && !reserved) __builtin_trap();
      break;
    }
  }
  return 0;
}
