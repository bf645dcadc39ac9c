#include "gantry/security/jwt.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include <algorithm>
#include <thread>

#include "gantry/security/crypto.h"
#include "testing/test_keys.h"

namespace gantry::security {
namespace {

using Json = nlohmann::json;

constexpr int64_t kNow = 1'800'000'000;
const std::string kSecret = "0123456789abcdef0123456789abcdef-hs256-test-secret";

using PemPair = gantry::testing::PemKeyPair;

// Generated once per process: RSA key generation takes a moment.
const PemPair& Rsa() {
  static PemPair p = gantry::testing::GenerateKeyPair("RSA");
  return p;
}
const PemPair& Ec() {
  static PemPair p = gantry::testing::GenerateKeyPair("EC");
  return p;
}

JwtOptions Options() {
  JwtOptions o;
  o.keys.push_back({"HS256", "k1", kSecret, ""});
  o.keys.push_back({"RS256", "k2", "", Rsa().pub});
  o.keys.push_back({"ES256", "k3", "", Ec().pub});
  o.issuer = "https://issuer.example";
  o.audiences = {"gantry"};
  o.leeway_s = 30;
  return o;
}

Json Claims() {
  return {{"sub", "alice"},  {"iss", "https://issuer.example"},
          {"aud", "gantry"}, {"exp", kNow + 600},
          {"iat", kNow},     {"role", "user"}};
}

std::unique_ptr<JwtVerifier> Verifier(JwtOptions o = Options()) {
  auto v = JwtVerifier::Create(std::move(o));
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? std::move(v).value() : nullptr;
}

std::string Sign(std::string_view alg, std::string_view kid, const Json& claims) {
  std::string material = alg == "HS256" ? kSecret : alg == "RS256" ? Rsa().priv : Ec().priv;
  auto t = SignJwt(alg, material, kid, claims);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : "";
}

// The reason of a rejection ("ok" when accepted).
std::string Reason(const JwtVerifier& v, std::string_view token, int64_t now = kNow) {
  auto r = v.Verify(token, now);
  if (r.ok()) return "ok";
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  return r.status().message();
}

std::string Craft(const Json& header, const Json& claims, std::string_view sig_bytes) {
  return Base64UrlEncode(header.dump()) + "." + Base64UrlEncode(claims.dump()) + "." +
         Base64UrlEncode(sig_bytes);
}

std::string Hmac(std::string_view key, std::string_view data) {
  unsigned char out[32];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

TEST(JwtTest, ValidTokensForEachAlg) {
  auto v = Verifier();
  for (const char* alg : {"HS256", "RS256", "ES256"}) {
    std::string kid = alg == std::string("HS256")   ? "k1"
                      : alg == std::string("RS256") ? "k2"
                                                    : "k3";
    auto r = v->Verify(Sign(alg, kid, Claims()), kNow);
    ASSERT_TRUE(r.ok()) << alg << ": " << r.status().ToString();
    EXPECT_EQ(r->subject, "alice");
    EXPECT_EQ(r->issuer, "https://issuer.example");
    EXPECT_EQ(r->roles, std::vector<std::string>{"user"});
    EXPECT_EQ(r->exp, kNow + 600);
    EXPECT_EQ(r->iat, kNow);
    EXPECT_EQ(r->nbf, 0);
    // Without a kid the token is tried against every key of its alg.
    EXPECT_EQ(Reason(*v, Sign(alg, "", Claims())), "ok") << alg;
  }
}

TEST(JwtTest, Es256SignatureIsRawRAndS) {
  std::string token = Sign("ES256", "k3", Claims());
  auto sig = Base64UrlDecode(token.substr(token.rfind('.') + 1));
  ASSERT_TRUE(sig.ok());
  EXPECT_EQ(sig->size(), 64u);
  // The DER form OpenSSL produces natively must not be accepted.
  EVP_PKEY* key = nullptr;
  {
    BIO* b = BIO_new_mem_buf(Ec().priv.data(), static_cast<int>(Ec().priv.size()));
    key = PEM_read_bio_PrivateKey(b, nullptr, nullptr, nullptr);
    BIO_free(b);
  }
  ASSERT_NE(key, nullptr);
  std::string input = token.substr(0, token.rfind('.'));
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ASSERT_EQ(EVP_DigestSignInit(ctx, nullptr, EVP_sha256(), nullptr, key), 1);
  size_t len = 0;
  EVP_DigestSign(ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(input.data()),
                 input.size());
  std::string der(len, '\0');
  ASSERT_EQ(EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(der.data()), &len,
                           reinterpret_cast<const unsigned char*>(input.data()), input.size()),
            1);
  der.resize(len);
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(key);
  auto v = Verifier();
  EXPECT_EQ(Reason(*v, input + "." + Base64UrlEncode(der)), "bad_signature");
  EXPECT_EQ(Reason(*v, token), "ok");
}

TEST(JwtTest, AlgNoneIsRejected) {
  auto v = Verifier();
  for (const char* alg : {"none", "None", "NONE", "HS512", "PS256", "EdDSA"}) {
    std::string t = Craft({{"alg", alg}, {"kid", "k1"}}, Claims(), "");
    EXPECT_EQ(Reason(*v, t), "alg_not_allowed") << alg;
    t = Craft({{"alg", alg}}, Claims(), "sig");
    EXPECT_EQ(Reason(*v, t), "alg_not_allowed") << alg;
  }
}

TEST(JwtTest, AlgorithmConfusionIsRejected) {
  // The classic attack: HS256 with the RSA *public* key as the HMAC secret,
  // naming the RS256 key's kid.
  auto v = Verifier();
  auto t = SignJwt("HS256", Rsa().pub, "k2", Claims());
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(Reason(*v, *t), "alg_not_allowed");
  // Without a kid against a verifier that only has the RSA key.
  JwtOptions o = Options();
  o.keys = {{"RS256", "", "", Rsa().pub}};
  auto rsa_only = Verifier(o);
  t = SignJwt("HS256", Rsa().pub, "", Claims());
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(Reason(*rsa_only, *t), "alg_not_allowed");
  // ES256 token claiming the RS256 key.
  EXPECT_EQ(Reason(*v, Sign("ES256", "k2", Claims())), "alg_not_allowed");
}

TEST(JwtTest, UnknownKid) {
  auto v = Verifier();
  EXPECT_EQ(Reason(*v, Sign("HS256", "nope", Claims())), "unknown_kid");
  // A key without kid matches any kid.
  JwtOptions o = Options();
  o.keys = {{"HS256", "", kSecret, ""}};
  EXPECT_EQ(Reason(*Verifier(o), Sign("HS256", "whatever", Claims())), "ok");
}

TEST(JwtTest, BadSignatureAndTamperedPayload) {
  auto v = Verifier();
  auto wrong = SignJwt("HS256", std::string(40, 'x'), "k1", Claims());
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ(Reason(*v, *wrong), "bad_signature");

  for (const char* alg : {"HS256", "RS256", "ES256"}) {
    std::string kid = alg == std::string("HS256")   ? "k1"
                      : alg == std::string("RS256") ? "k2"
                                                    : "k3";
    std::string token = Sign(alg, kid, Claims());
    Json evil = Claims();
    evil["role"] = "admin";
    size_t d1 = token.find('.'), d2 = token.rfind('.');
    std::string tampered =
        token.substr(0, d1 + 1) + Base64UrlEncode(evil.dump()) + token.substr(d2);
    EXPECT_EQ(Reason(*v, tampered), "bad_signature") << alg;
    // Flipping one signature bit.
    auto sig = *Base64UrlDecode(token.substr(d2 + 1));
    sig[sig.size() / 2] ^= 0x01;
    EXPECT_EQ(Reason(*v, token.substr(0, d2 + 1) + Base64UrlEncode(sig)), "bad_signature") << alg;
    // An empty signature.
    EXPECT_EQ(Reason(*v, token.substr(0, d2 + 1)), "bad_signature") << alg;
  }
}

TEST(JwtTest, Malformed) {
  auto v = Verifier();
  std::string good = Sign("HS256", "k1", Claims());
  for (std::string t : {std::string(""), std::string("abc"), std::string("a.b"), good + ".x",
                        std::string("!!.!!.!!"), good + "="}) {
    EXPECT_EQ(Reason(*v, t), "malformed") << t;
  }
  // Header that is not JSON / not an object / alg not a string / crit.
  EXPECT_EQ(Reason(*v, Base64UrlEncode("nope") + ".e30.c2ln"), "malformed");
  EXPECT_EQ(Reason(*v, Craft(Json::array({1}), Claims(), "s")), "malformed");
  EXPECT_EQ(Reason(*v, Craft({{"alg", 5}}, Claims(), "s")), "malformed");
  EXPECT_EQ(Reason(*v, Craft({{"alg", "HS256"}, {"crit", {"exp"}}}, Claims(), "s")), "malformed");
  // A validly signed payload that is not an object.
  std::string input =
      Base64UrlEncode(R"({"alg":"HS256","kid":"k1"})") + "." + Base64UrlEncode("[1,2]");
  EXPECT_EQ(Reason(*v, input + "." + Base64UrlEncode(Hmac(kSecret, input))), "malformed");
  // Oversized.
  Json big = Claims();
  big["pad"] = std::string(20000, 'x');
  EXPECT_EQ(Reason(*v, Sign("HS256", "k1", big)), "malformed");
  // exp of the wrong type.
  Json bad_exp = Claims();
  bad_exp["exp"] = "tomorrow";
  EXPECT_EQ(Reason(*v, Sign("HS256", "k1", bad_exp)), "malformed");
}

TEST(JwtTest, ExpiryAndNotBeforeWithLeeway) {
  auto v = Verifier();
  Json c = Claims();
  c["exp"] = kNow - 29;
  EXPECT_EQ(Reason(*v, Sign("HS256", "k1", c)), "ok");
  c["exp"] = kNow - 30;
  EXPECT_EQ(Reason(*v, Sign("HS256", "k1", c)), "expired");
  c["exp"] = kNow - 3600;
  EXPECT_EQ(Reason(*v, Sign("HS256", "k1", c)), "expired");
  c["exp"] = static_cast<double>(kNow) + 0.5;  // NumericDate may have a fraction
  EXPECT_EQ(Reason(*v, Sign("HS256", "k1", c)), "ok");

  c = Claims();
  c["nbf"] = kNow + 29;
  EXPECT_EQ(Reason(*v, Sign("HS256", "k1", c)), "ok");
  c["nbf"] = kNow + 31;
  EXPECT_EQ(Reason(*v, Sign("HS256", "k1", c)), "not_yet_valid");

  JwtOptions strict = Options();
  strict.leeway_s = 0;
  auto s = Verifier(strict);
  c = Claims();
  c["exp"] = kNow;
  EXPECT_EQ(Reason(*s, Sign("HS256", "k1", c)), "expired");
  c["exp"] = kNow + 1;
  EXPECT_EQ(Reason(*s, Sign("HS256", "k1", c)), "ok");
}

TEST(JwtTest, MissingExp) {
  Json c = Claims();
  c.erase("exp");
  EXPECT_EQ(Reason(*Verifier(), Sign("HS256", "k1", c)), "missing_exp");
  JwtOptions o = Options();
  o.require_exp = false;
  EXPECT_EQ(Reason(*Verifier(o), Sign("HS256", "k1", c)), "ok");
}

TEST(JwtTest, IssuerAndAudience) {
  auto v = Verifier();
  Json c = Claims();
  c["iss"] = "https://evil.example";
  EXPECT_EQ(Reason(*v, Sign("HS256", "k1", c)), "issuer_mismatch");
  c.erase("iss");
  EXPECT_EQ(Reason(*v, Sign("HS256", "k1", c)), "issuer_mismatch");

  c = Claims();
  c["aud"] = {"other", "gantry"};
  EXPECT_EQ(Reason(*v, Sign("HS256", "k1", c)), "ok");
  c["aud"] = {"other"};
  EXPECT_EQ(Reason(*v, Sign("HS256", "k1", c)), "audience_mismatch");
  c["aud"] = "other";
  EXPECT_EQ(Reason(*v, Sign("HS256", "k1", c)), "audience_mismatch");
  c.erase("aud");
  EXPECT_EQ(Reason(*v, Sign("HS256", "k1", c)), "audience_mismatch");

  // Unchecked when not configured.
  JwtOptions o = Options();
  o.issuer.clear();
  o.audiences.clear();
  c["iss"] = "anyone";
  EXPECT_EQ(Reason(*Verifier(o), Sign("HS256", "k1", c)), "ok");
}

TEST(JwtTest, RoleClaimStringOrArray) {
  auto v = Verifier();
  Json c = Claims();
  c["role"] = {"user", "reader"};
  auto r = v->Verify(Sign("HS256", "k1", c), kNow);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->roles, (std::vector<std::string>{"user", "reader"}));
  c["role"] = Json::array();
  EXPECT_EQ(Reason(*v, Sign("HS256", "k1", c)), "no_role");
  c["role"] = "";
  EXPECT_EQ(Reason(*v, Sign("HS256", "k1", c)), "no_role");
  c["role"] = 7;
  EXPECT_EQ(Reason(*v, Sign("HS256", "k1", c)), "no_role");
  c.erase("role");
  EXPECT_EQ(Reason(*v, Sign("HS256", "k1", c)), "no_role");

  JwtOptions o = Options();
  o.role_claim = "https://gantry.example/roles";
  c["https://gantry.example/roles"] = "admin";
  r = Verifier(o)->Verify(Sign("HS256", "k1", c), kNow);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->roles, std::vector<std::string>{"admin"});
}

TEST(JwtTest, CachedTokensAreStillCheckedForTime) {
  auto v = Verifier();
  Json c = Claims();
  c["exp"] = kNow + 100;
  std::string t = Sign("RS256", "k2", c);
  EXPECT_EQ(Reason(*v, t, kNow), "ok");
  EXPECT_EQ(Reason(*v, t, kNow + 50), "ok");        // cache hit
  EXPECT_EQ(Reason(*v, t, kNow + 130), "expired");  // cache hit, now expired
  // A tampered variant of a cached token is not a cache hit.
  std::string tampered = t;
  tampered[tampered.size() - 5] = tampered[tampered.size() - 5] == 'A' ? 'B' : 'A';
  EXPECT_NE(Reason(*v, tampered, kNow), "ok");
}

TEST(JwtTest, CacheIsBounded) {
  JwtOptions o = Options();
  o.cache_size = 8;
  auto v = Verifier(o);
  std::vector<std::string> tokens;
  for (int i = 0; i < 100; ++i) {
    Json c = Claims();
    c["jti"] = i;
    tokens.push_back(Sign("HS256", "k1", c));
    EXPECT_EQ(Reason(*v, tokens.back()), "ok");
    EXPECT_EQ(v->cached_tokens(), std::min<size_t>(i + 1, 8)) << "after token " << i;
  }
  // A hit adds nothing; a token evicted long ago comes back in place of another.
  EXPECT_EQ(Reason(*v, tokens.back()), "ok");
  EXPECT_EQ(Reason(*v, tokens.front()), "ok");
  EXPECT_EQ(v->cached_tokens(), 8u);
  // Refused tokens are never cached.
  std::string forged = tokens[5];
  forged[forged.size() - 3] = forged[forged.size() - 3] == 'A' ? 'B' : 'A';
  auto fresh = Verifier(o);
  EXPECT_EQ(Reason(*fresh, forged), "bad_signature");
  EXPECT_EQ(fresh->cached_tokens(), 0u);

  o.cache_size = 0;  // disabled
  auto off = Verifier(o);
  EXPECT_EQ(Reason(*off, tokens[0]), "ok");
  EXPECT_EQ(off->cached_tokens(), 0u);
}

TEST(JwtTest, ConcurrentVerify) {
  auto v = Verifier();
  std::vector<std::string> tokens;
  for (int i = 0; i < 8; ++i) {
    Json c = Claims();
    c["jti"] = i;
    tokens.push_back(Sign(i % 2 ? "ES256" : "HS256", i % 2 ? "k3" : "k1", c));
  }
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) ok += v->Verify(tokens[i % tokens.size()], kNow).ok();
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 800);
}

TEST(JwtTest, CreateRejectsBadKeysNamingThem) {
  auto err = [](std::vector<JwtKey> keys) {
    JwtOptions o;
    o.keys = std::move(keys);
    auto v = JwtVerifier::Create(o);
    EXPECT_FALSE(v.ok());
    return v.ok() ? std::string() : v.status().message();
  };
  EXPECT_NE(err({{"HS512", "kx", kSecret, ""}}).find("HS512"), std::string::npos);
  EXPECT_NE(err({{"none", "kx", "", ""}}).find("kx"), std::string::npos);
  EXPECT_NE(err({{"HS256", "short", "tooshort", ""}}).find("short"), std::string::npos);
  EXPECT_NE(err({{"RS256", "k2", "", Ec().pub}}).find("k2"), std::string::npos);
  EXPECT_NE(err({{"ES256", "k3", "", Rsa().pub}}).find("k3"), std::string::npos);
  EXPECT_NE(err({{"RS256", "k4", "", "garbage"}}).find("k4"), std::string::npos);
  EXPECT_NE(err({{"RS256", "k5", "", Rsa().priv}}).find("k5"), std::string::npos);
  EXPECT_FALSE(err({}).empty());
  auto small = gantry::testing::GenerateKeyPair("RSA", 1024);
  EXPECT_NE(err({{"RS256", "weak", "", small.pub}}).find("2048"), std::string::npos);
}

TEST(JwtTest, SignJwtRejects) {
  EXPECT_FALSE(SignJwt("none", "", "", Claims()).ok());
  EXPECT_FALSE(SignJwt("RS256", "not a key", "", Claims()).ok());
  EXPECT_FALSE(SignJwt("ES256", Rsa().priv, "", Claims()).ok());
  EXPECT_FALSE(SignJwt("RS256", Ec().priv, "", Claims()).ok());
  EXPECT_FALSE(SignJwt("HS256", kSecret, "", Json::array()).ok());
}

}  // namespace
}  // namespace gantry::security
