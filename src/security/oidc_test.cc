#include "gantry/security/oidc.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "gantry/core/http_server.h"
#include "gantry/security/crypto.h"
#include "testing/test_keys.h"

namespace gantry::security {
namespace {

using Json = nlohmann::json;

constexpr int64_t kNow = 1'800'000'000;
constexpr const char* kTenant = "11111111-2222-3333-4444-555555555555";
constexpr const char* kOtherTenant = "99999999-8888-7777-6666-555555555555";
constexpr const char* kAudience = "api://gantry";

using Pair = gantry::testing::PemKeyPair;

const Pair& RsaA() {
  static Pair p = gantry::testing::GenerateKeyPair("RSA");
  return p;
}
const Pair& RsaB() {
  static Pair p = gantry::testing::GenerateKeyPair("RSA");
  return p;
}
const Pair& EcC() {
  static Pair p = gantry::testing::GenerateKeyPair("EC");
  return p;
}

Json Jwk(const Pair& p, const std::string& kid) {
  auto j = PublicKeyToJwk(p.pub, kid);
  EXPECT_TRUE(j.ok()) << j.status().ToString();
  return j.ok() ? *j : Json::object();
}

// A local OpenID Connect issuer: discovery document and JWKS, both
// replaceable while it serves, with fetch counters.
class Issuer {
 public:
  explicit Issuer(std::string issuer_template = "") {
    server_.Handle("/", [this](const http::ServerRequest& req, http::ServerResponse* resp) {
      std::unique_lock<std::mutex> l(mu_);
      resp->content_type = "application/json";
      if (req.path.ends_with("/.well-known/openid-configuration")) {
        ++discovery_fetches_;
        resp->status = status_;
        resp->body = discovery_.empty()
                         ? Json{{"issuer", issuer_}, {"jwks_uri", base_ + "/keys"}}.dump()
                         : discovery_;
      } else if (req.path == "/keys") {
        ++jwks_fetches_;
        cv_.notify_all();
        cv_.wait(l, [this] { return !hold_; });
        resp->status = status_;
        resp->body = jwks_.dump();
      } else {
        resp->status = 404;
      }
    });
    EXPECT_TRUE(server_.Start({.listen = "127.0.0.1:0", .handler_threads = 8}).ok());
    base_ = "http://127.0.0.1:" + std::to_string(server_.port());
    issuer_ = issuer_template.empty() ? base_ + "/" + kTenant + "/v2.0" : issuer_template;
  }
  ~Issuer() {
    Hold(false);
    server_.Stop();
  }
  std::string base() const { return base_; }
  std::string issuer() const { return issuer_; }
  std::string discovery_url() const {
    return base_ + "/" + kTenant + "/v2.0/.well-known/openid-configuration";
  }
  void SetKeys(Json keys) {
    std::lock_guard<std::mutex> l(mu_);
    jwks_ = {{"keys", std::move(keys)}};
  }
  void SetStatus(int s) {
    std::lock_guard<std::mutex> l(mu_);
    status_ = s;
  }
  void SetDiscovery(std::string d) {
    std::lock_guard<std::mutex> l(mu_);
    discovery_ = std::move(d);
  }
  // While held, JWKS requests wait (a fetch stays in flight).
  void Hold(bool h) {
    std::lock_guard<std::mutex> l(mu_);
    hold_ = h;
    cv_.notify_all();
  }
  void WaitForJwksFetches(int n) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return jwks_fetches_ >= n; });
  }
  int jwks_fetches() {
    std::lock_guard<std::mutex> l(mu_);
    return jwks_fetches_;
  }

 private:
  http::Server server_;
  std::string base_, issuer_;
  std::mutex mu_;
  std::condition_variable cv_;
  Json jwks_ = {{"keys", Json::array()}};
  std::string discovery_;
  int status_ = 200;
  bool hold_ = false;
  int discovery_fetches_ = 0, jwks_fetches_ = 0;
};

Json Claims(const std::string& iss, const std::string& tid = kTenant) {
  return {{"iss", iss},        {"aud", kAudience}, {"sub", "oid-1"},   {"tid", tid},
          {"exp", kNow + 600}, {"nbf", kNow - 10}, {"iat", kNow - 10}, {"roles", {"Gantry.Admin"}}};
}

std::string Sign(const Pair& p, const std::string& kid, const Json& claims,
                 const char* alg = "RS256") {
  auto t = SignJwt(alg, p.priv, kid, claims);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : "";
}

struct Fixture {
  FakeClock clock;
  std::shared_ptr<OidcKeySet> keys;
  std::unique_ptr<JwtVerifier> verifier;

  Fixture(const Issuer& issuer, std::vector<std::string> tenants = {},
          std::chrono::seconds unknown_kid_refresh = std::chrono::minutes(5),
          std::string configured_issuer = "") {
    OidcOptions o;
    o.issuer = configured_issuer.empty() ? issuer.issuer() : configured_issuer;
    o.discovery_url = issuer.discovery_url();
    o.unknown_kid_refresh = unknown_kid_refresh;
    o.background_refresh = false;
    o.fetch_deadline = std::chrono::seconds(5);
    o.clock = &clock;
    auto k = OidcKeySet::Create(o);
    EXPECT_TRUE(k.ok()) << k.status().ToString();
    keys = *k;
    JwtOptions jo;
    jo.key_provider = keys;
    jo.audiences = {kAudience, "client-id-guid"};
    jo.tenants = std::move(tenants);
    jo.role_map = {{"admin", {"Gantry.Admin"}}, {"user", {"user_impersonation", "Gantry.User"}}};
    auto v = JwtVerifier::Create(jo);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    verifier = std::move(*v);
  }
  std::string Reason(const std::string& token, int64_t now = kNow) {
    auto r = verifier->Verify(token, now);
    return r.ok() ? "ok" : r.status().message();
  }
};

TEST(OidcParseTest, JwksKeepsRsaAndP256AndSkipsTheRestSayingWhy) {
  Json p384 = {{"kty", "EC"}, {"crv", "P-384"}, {"kid", "p384"}, {"x", "AA"}, {"y", "AA"}};
  Json enc = Jwk(RsaA(), "enc");
  enc["use"] = "enc";
  Json wrong_alg = Jwk(RsaA(), "ps256");
  wrong_alg["alg"] = "PS256";
  Json no_n = Jwk(RsaA(), "no-n");
  no_n.erase("n");
  Json doc = {{"keys",
               {Jwk(RsaA(), "a"),
                Jwk(EcC(), "c"),
                p384,
                enc,
                wrong_alg,
                no_n,
                {{"kty", "oct"}, {"kid", "sym"}, {"k", "AAAA"}}}}};
  std::vector<std::string> skipped;
  auto keys = ParseJwks(doc.dump(), "https://idp/keys", &skipped);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[0].alg, "RS256");
  EXPECT_EQ((*keys)[0].kid, "a");
  EXPECT_EQ((*keys)[1].alg, "ES256");
  EXPECT_EQ((*keys)[1].kid, "c");
  ASSERT_EQ(skipped.size(), 5u);
  EXPECT_NE(skipped[0].find("curve 'P-384'"), std::string::npos) << skipped[0];
  EXPECT_NE(skipped[1].find("use 'enc'"), std::string::npos) << skipped[1];
  EXPECT_NE(skipped[2].find("alg 'PS256'"), std::string::npos) << skipped[2];
  EXPECT_NE(skipped[3].find("missing \"n\""), std::string::npos) << skipped[3];
  EXPECT_NE(skipped[4].find("kty 'oct'"), std::string::npos) << skipped[4];
  EXPECT_NE(skipped[4].find("https://idp/keys: key 6 (kid 'sym')"), std::string::npos);
  // The parsed PEMs verify what the private keys sign.
  auto set = JwtKeySet::Create(*keys);
  ASSERT_TRUE(set.ok());
  EXPECT_TRUE((*set)->HasKid("a") && (*set)->HasKid("c") && !(*set)->HasKid("p384"));
}

TEST(OidcParseTest, MalformedDocumentsAreClearErrors) {
  auto e1 = ParseJwks("not json", "https://idp/keys", nullptr);
  ASSERT_FALSE(e1.ok());
  EXPECT_NE(e1.status().message().find("https://idp/keys: the JWKS is not a JSON object"),
            std::string::npos);
  auto e2 = ParseJwks(R"({"keys": {}})", "https://idp/keys", nullptr);
  ASSERT_FALSE(e2.ok());
  EXPECT_NE(e2.status().message().find("no \"keys\" array"), std::string::npos);
  auto e3 = ParseJwks(R"({"keys": [7]})", "https://idp/keys", nullptr);
  ASSERT_FALSE(e3.ok());
  EXPECT_NE(e3.status().message().find("key 0 is not an object"), std::string::npos);
  auto d1 = ParseDiscovery("[]", "https://idp/.well-known/openid-configuration");
  ASSERT_FALSE(d1.ok());
  EXPECT_NE(d1.status().message().find("not a JSON object"), std::string::npos);
  auto d2 = ParseDiscovery(R"({"issuer": "https://idp"})", "https://idp/x");
  ASSERT_FALSE(d2.ok());
  EXPECT_NE(d2.status().message().find("\"jwks_uri\""), std::string::npos);
  auto d3 = ParseDiscovery(R"({"issuer": "https://idp", "jwks_uri": "https://idp/k"})", "u");
  ASSERT_TRUE(d3.ok());
  EXPECT_EQ(d3->jwks_uri, "https://idp/k");
}

TEST(OidcParseTest, EntraIssuerAliasesCoverV1AndV2) {
  EXPECT_EQ(
      EntraIssuerAliases(std::string("https://login.microsoftonline.com/") + kTenant + "/v2.0"),
      (std::vector<std::string>{
          std::string("https://login.microsoftonline.com/") + kTenant + "/v2.0",
          std::string("https://sts.windows.net/") + kTenant + "/"}));
  EXPECT_EQ(EntraIssuerAliases(std::string("https://sts.windows.net/") + kTenant + "/"),
            (std::vector<std::string>{
                std::string("https://sts.windows.net/") + kTenant + "/",
                std::string("https://login.microsoftonline.com/") + kTenant + "/v2.0"}));
  EXPECT_EQ(EntraIssuerAliases("https://accounts.example.com"),
            (std::vector<std::string>{"https://accounts.example.com"}));
}

TEST(OidcParseTest, UrlsMustBeHttpsExceptLoopback) {
  EXPECT_TRUE(CheckOidcUrl("https://login.microsoftonline.com/x/v2.0", "oidc.issuer").ok());
  EXPECT_TRUE(CheckOidcUrl("http://127.0.0.1:8080/x", "oidc.issuer").ok());
  EXPECT_TRUE(CheckOidcUrl("http://127.3.4.5/x", "oidc.issuer").ok());
  for (const char* bad : {"http://example.com/x", "http://10.0.0.1/x", "http://localhost/x",
                          "ftp://127.0.0.1/", "https://", "http://128.0.0.1/"}) {
    Status s = CheckOidcUrl(bad, "oidc.issuer");
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("oidc.issuer"), std::string::npos);
  }
  EXPECT_FALSE(OidcKeySet::Create({.issuer = "http://idp.example/"}).ok());
  EXPECT_FALSE(OidcKeySet::Create({}).ok());
}

TEST(OidcKeySetTest, AcceptsV1AndV2IssuersOfTheTenantAndRefusesOthers) {
  Issuer idp(std::string("https://login.microsoftonline.com/") + kTenant + "/v2.0");
  idp.SetKeys({Jwk(RsaA(), "a")});
  Fixture f(idp);
  std::string v2 = std::string("https://login.microsoftonline.com/") + kTenant + "/v2.0";
  std::string v1 = std::string("https://sts.windows.net/") + kTenant + "/";
  EXPECT_EQ(f.Reason(Sign(RsaA(), "a", Claims(v2))), "ok");
  EXPECT_EQ(f.Reason(Sign(RsaA(), "a", Claims(v1))), "ok");
  EXPECT_EQ(f.Reason(Sign(RsaA(), "a",
                          Claims(std::string("https://sts.windows.net/") + kOtherTenant + "/"))),
            "issuer_mismatch");
  auto claims = f.verifier->Verify(Sign(RsaA(), "a", Claims(v2)), kNow);
  ASSERT_TRUE(claims.ok());
  EXPECT_EQ(claims->subject, "oid-1");
  EXPECT_EQ(claims->roles, std::vector<std::string>{"admin"});
}

TEST(OidcKeySetTest, MultiTenantTemplateChecksTidAgainstTheAllowList) {
  Issuer idp("https://login.microsoftonline.com/{tenantid}/v2.0");
  idp.SetKeys({Jwk(RsaA(), "a")});
  auto iss = [](const char* tid) {
    return std::string("https://login.microsoftonline.com/") + tid + "/v2.0";
  };
  {
    Fixture f(idp, {kTenant}, std::chrono::minutes(5),
              "https://login.microsoftonline.com/organizations/v2.0");
    EXPECT_EQ(f.Reason(Sign(RsaA(), "a", Claims(iss(kTenant)))), "ok");
    EXPECT_EQ(f.Reason(Sign(RsaA(), "a",
                            Claims(std::string("https://sts.windows.net/") + kTenant + "/"))),
              "ok");
    EXPECT_EQ(f.Reason(Sign(RsaA(), "a", Claims(iss(kOtherTenant), kOtherTenant))),
              "tenant_not_allowed");
    // The issuer's tenant must be the token's tid.
    EXPECT_EQ(f.Reason(Sign(RsaA(), "a", Claims(iss(kOtherTenant), kTenant))), "issuer_mismatch");
    Json no_tid = Claims(iss(kTenant));
    no_tid.erase("tid");
    EXPECT_EQ(f.Reason(Sign(RsaA(), "a", no_tid)), "tenant_not_allowed");
  }
  {
    // A multi-tenant issuer without an allow-list accepts nobody.
    Fixture f(idp, {}, std::chrono::minutes(5),
              "https://login.microsoftonline.com/organizations/v2.0");
    EXPECT_EQ(f.Reason(Sign(RsaA(), "a", Claims(iss(kTenant)))), "tenant_not_allowed");
  }
}

TEST(OidcKeySetTest, RolesAndScopesMapOntoGantryRoles) {
  Issuer idp;
  idp.SetKeys({Jwk(EcC(), "c")});
  Fixture f(idp);
  auto roles = [&](const Json& extra) -> std::vector<std::string> {
    Json c = Claims(idp.issuer());
    c.erase("roles");
    c.update(extra);
    auto r = f.verifier->Verify(Sign(EcC(), "c", c, "ES256"), kNow);
    if (!r.ok()) return {r.status().message()};
    return r->roles;
  };
  EXPECT_EQ(roles({{"scp", "openid user_impersonation profile"}}),
            std::vector<std::string>{"user"});
  EXPECT_EQ(roles({{"roles", {"Gantry.User", "Gantry.Admin"}}}),
            (std::vector<std::string>{"admin", "user"}));
  EXPECT_EQ(roles({{"roles", {"Other.Role"}}, {"scp", "openid"}}),
            std::vector<std::string>{"no_role"});
  EXPECT_EQ(roles(Json::object()), std::vector<std::string>{"no_role"});
}

TEST(OidcKeySetTest, RefusesExpiredEarlyWrongAudienceUnsignedAndBadSignatures) {
  Issuer idp;
  idp.SetKeys({Jwk(RsaA(), "a")});
  Fixture f(idp);
  Json c = Claims(idp.issuer());
  EXPECT_EQ(f.Reason(Sign(RsaA(), "a", c)), "ok");
  Json aud = c;
  aud["aud"] = "client-id-guid";
  EXPECT_EQ(f.Reason(Sign(RsaA(), "a", aud)), "ok");
  EXPECT_EQ(f.Reason(Sign(RsaA(), "a", c), kNow + 3600), "expired");
  EXPECT_EQ(f.Reason(Sign(RsaA(), "a", c), kNow - 3600), "not_yet_valid");
  aud["aud"] = "api://someone-else";
  EXPECT_EQ(f.Reason(Sign(RsaA(), "a", aud)), "audience_mismatch");
  // Signed by a key the issuer does not publish, under its kid.
  EXPECT_EQ(f.Reason(Sign(RsaB(), "a", c)), "bad_signature");
  std::string unsigned_token =
      Base64UrlEncode(R"({"alg":"none","kid":"a"})") + "." + Base64UrlEncode(c.dump()) + ".";
  EXPECT_EQ(f.Reason(unsigned_token), "alg_not_allowed");
  std::string hs = *SignJwt("HS256", RsaA().pub, "a", c);  // public key as HMAC secret
  EXPECT_EQ(f.Reason(hs), "alg_not_allowed");
}

TEST(OidcKeySetTest, UnknownKidRefetchesRateLimitedAndRotatedKeysVerify) {
  Issuer idp;
  idp.SetKeys({Jwk(RsaA(), "a")});
  Fixture f(idp);
  Json c = Claims(idp.issuer());
  EXPECT_EQ(f.Reason(Sign(RsaA(), "a", c)), "ok");
  EXPECT_EQ(idp.jwks_fetches(), 1);
  // The issuer rotates: b is published next to a.
  idp.SetKeys({Jwk(RsaA(), "a"), Jwk(RsaB(), "b")});
  EXPECT_EQ(f.Reason(Sign(RsaB(), "b", c)), "ok");
  EXPECT_EQ(idp.jwks_fetches(), 2);
  EXPECT_EQ(f.Reason(Sign(RsaA(), "a", c)), "ok");  // still published
  // Unknown kids refetch at most once per unknown_kid_refresh (5m), counted
  // from b's refetch just now.
  EXPECT_EQ(f.Reason(Sign(RsaB(), "junk-1", c)), "unknown_kid");
  EXPECT_EQ(f.Reason(Sign(RsaB(), "junk-2", c)), "unknown_kid");
  EXPECT_EQ(idp.jwks_fetches(), 2);
  f.clock.Advance(std::chrono::minutes(4));
  EXPECT_EQ(f.Reason(Sign(RsaB(), "junk-3", c)), "unknown_kid");
  EXPECT_EQ(idp.jwks_fetches(), 2);
  f.clock.Advance(std::chrono::minutes(2));
  EXPECT_EQ(f.Reason(Sign(RsaB(), "junk-4", c)), "unknown_kid");
  EXPECT_EQ(idp.jwks_fetches(), 3);
  EXPECT_EQ(f.Reason(Sign(RsaB(), "junk-5", c)), "unknown_kid");
  EXPECT_EQ(idp.jwks_fetches(), 3);
  // a is withdrawn: its tokens (cached or not) are refused once we refetch.
  idp.SetKeys({Jwk(RsaB(), "b")});
  ASSERT_TRUE(f.keys->Refresh().ok());
  EXPECT_EQ(f.Reason(Sign(RsaA(), "a", c)), "unknown_kid");
  EXPECT_EQ(f.Reason(Sign(RsaB(), "b", c)), "ok");
}

TEST(OidcKeySetTest, FailedRefreshKeepsTheKeys) {
  Issuer idp;
  idp.SetKeys({Jwk(RsaA(), "a")});
  Fixture f(idp);
  std::string token = Sign(RsaA(), "a", Claims(idp.issuer()));
  EXPECT_EQ(f.Reason(token), "ok");
  idp.SetStatus(500);
  Status s = f.keys->Refresh();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("HTTP 500"), std::string::npos) << s.ToString();
  EXPECT_EQ(f.Reason(token), "ok");
  idp.SetStatus(200);
  idp.SetKeys(Json::array());  // nothing usable: also a failure
  s = f.keys->Refresh();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no usable signing key"), std::string::npos) << s.ToString();
  idp.SetDiscovery("{\"issuer\": 5}");
  s = f.keys->Refresh();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("needs string \"issuer\""), std::string::npos) << s.ToString();
  EXPECT_EQ(f.Reason(Sign(RsaA(), "a", Claims(idp.issuer()))), "ok");
  EXPECT_EQ(f.keys->stats().failures, 3u);
  EXPECT_EQ(f.keys->stats().generation, 1u);
}

TEST(OidcKeySetTest, DiscoveryForAnotherIssuerIsRefused) {
  Issuer idp;
  idp.SetKeys({Jwk(RsaA(), "a")});
  Fixture f(idp, {}, std::chrono::minutes(5), "https://login.microsoftonline.com/x/v2.0");
  Status s = f.keys->Refresh();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not the configured 'https://login.microsoftonline.com/x/v2.0'"),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ(f.Reason(Sign(RsaA(), "a", Claims(idp.issuer()))), "keys_unavailable");
}

TEST(OidcKeySetTest, ScheduledRefreshRunsWhenDue) {
  Issuer idp;
  idp.SetKeys({Jwk(RsaA(), "a")});
  Fixture f(idp);
  f.keys->RefreshIfDue();  // never fetched: due
  EXPECT_EQ(idp.jwks_fetches(), 1);
  f.keys->RefreshIfDue();
  f.clock.Advance(std::chrono::hours(11));
  f.keys->RefreshIfDue();
  EXPECT_EQ(idp.jwks_fetches(), 1);
  idp.SetKeys({Jwk(RsaB(), "b")});
  f.clock.Advance(std::chrono::hours(1));
  f.keys->RefreshIfDue();
  EXPECT_EQ(idp.jwks_fetches(), 2);
  EXPECT_EQ(f.Reason(Sign(RsaB(), "b", Claims(idp.issuer()))), "ok");
  EXPECT_EQ(f.keys->stats().generation, 2u);
}

TEST(OidcKeySetTest, ConcurrentUnknownKidsShareOneFetch) {
  Issuer idp;
  idp.SetKeys({Jwk(RsaA(), "a")});
  // No rate limit, so only sharing keeps the fetches down.
  Fixture f(idp, {}, std::chrono::seconds(0));
  Json c = Claims(idp.issuer());
  ASSERT_EQ(f.Reason(Sign(RsaA(), "a", c)), "ok");
  idp.SetKeys({Jwk(RsaA(), "a"), Jwk(RsaB(), "b")});
  std::string token = Sign(RsaB(), "b", c);
  idp.Hold(true);
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] { ok += f.Reason(token) == "ok"; });
  }
  idp.WaitForJwksFetches(2);  // one refetch is in flight (held)
  idp.Hold(false);
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 8);
  EXPECT_EQ(idp.jwks_fetches(), 2);
}

TEST(OidcKeySetTest, StaticKeysAndAProviderAreExclusive) {
  Issuer idp;
  Fixture f(idp);
  JwtOptions o;
  o.key_provider = f.keys;
  o.keys.push_back({"RS256", "a", "", RsaA().pub});
  auto v = JwtVerifier::Create(o);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("not both"), std::string::npos);
}

}  // namespace
}  // namespace gantry::security
