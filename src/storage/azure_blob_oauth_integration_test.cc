// The Blob client with Entra ID bearer tokens and no account key: Azurite with
// --oauth basic over HTTPS (a test certificate made at test time), tokens from
// a fake IMDS on 127.0.0.1 (the managed identity flow), the ObjectStore
// conformance suite, and tokens that Azurite refuses (wrong audience, expired).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>

#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gantry/core/http_server.h"
#include "gantry/security/azure_credential.h"
#include "gantry/security/jwt.h"
#include "gantry/storage/object_store.h"
#include "object_store_conformance.h"
#include "testing/azurite_fixture.h"

namespace gantry::storage::testing {
namespace {

// What the fake IMDS puts in the JWTs it hands out.
enum class TokenKind { kGood, kWrongAudience, kExpired };

// IMDS's token endpoint (GET /metadata/identity/oauth2/token) on 127.0.0.1,
// one path per kind of token so that stores opened against different paths
// get different tokens. Records each request's Metadata header and resource.
class FakeImds {
 public:
  struct Seen {
    std::string metadata, resource, api_version;
  };

  FakeImds() {
    server_.Handle("/", [this](const http::ServerRequest& req, http::ServerResponse* resp) {
      std::string prefix = req.path.substr(0, req.path.find("/metadata/"));
      TokenKind kind = prefix == "/wrong-audience" ? TokenKind::kWrongAudience
                       : prefix == "/expired"      ? TokenKind::kExpired
                                                   : TokenKind::kGood;
      const std::string* md = req.Header("Metadata");
      {
        std::lock_guard<std::mutex> lock(mu_);
        seen_.push_back({md ? *md : "", req.QueryParam("resource"), req.QueryParam("api-version")});
      }
      const bool known_prefix =
          prefix.empty() || prefix == "/wrong-audience" || prefix == "/expired";
      if (md == nullptr || *md != "true" || !known_prefix ||
          !req.path.ends_with("/metadata/identity/oauth2/token")) {
        resp->status = 400;
        resp->content_type = "application/json";
        resp->body =
            R"({"error":"invalid_request","error_description":"Required metadata header not specified"})";
        return;
      }
      resp->content_type = "application/json";
      resp->body = nlohmann::json{{"access_token", Jwt(kind, req.QueryParam("resource"))},
                                  {"expires_in", "3599"},
                                  {"token_type", "Bearer"},
                                  {"resource", req.QueryParam("resource")}}
                       .dump();
    });
    Status s = server_.Start({.listen = "127.0.0.1:0"});
    EXPECT_TRUE(s.ok()) << s.ToString();
  }

  // The imds_endpoint for tokens of `kind`.
  std::string Endpoint(TokenKind kind) const {
    std::string base = "http://127.0.0.1:" + std::to_string(server_.port());
    switch (kind) {
      case TokenKind::kWrongAudience:
        return base + "/wrong-audience";
      case TokenKind::kExpired:
        return base + "/expired";
      case TokenKind::kGood:
        break;
    }
    return base;
  }
  std::vector<Seen> seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  // The last token handed out, so that tests can check that messages never carry it.
  std::string last_token() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_token_;
  }

 private:
  std::string Jwt(TokenKind kind, const std::string& resource) {
    const int64_t now = static_cast<int64_t>(::time(nullptr));
    nlohmann::json claims = {
        {"aud", kind == TokenKind::kWrongAudience ? "https://management.azure.com" : resource},
        {"iss", "https://sts.windows.net/72f988bf-86f1-41af-91ab-2d7cd011db47/"},
        {"iat", now - 60},
        {"nbf", now - 60},
        {"exp", kind == TokenKind::kExpired ? now - 600 : now + 3600},
        {"oid", "11111111-2222-3333-4444-555555555555"},
        {"tid", "72f988bf-86f1-41af-91ab-2d7cd011db47"}};
    // Azurite's basic OAuth does not check the signature; sign anyway so the
    // token is a well-formed JWS.
    Result<std::string> t =
        security::SignJwt("HS256", "fake-imds-signing-secret-32-bytes!", "", claims);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    std::lock_guard<std::mutex> lock(mu_);
    last_token_ = t.ok() ? *t : "";
    return last_token_;
  }

  http::Server server_;
  mutable std::mutex mu_;
  std::vector<Seen> seen_;
  std::string last_token_;
};

FakeImds& Imds() {
  static FakeImds* imds = new FakeImds();  // lives as long as the test binary
  return *imds;
}

std::string FreshContainer() {
  static std::atomic<int> n{0};
  return "oauth" + std::to_string(::getpid()) + "x" + std::to_string(++n);
}

// An az:// store on the HTTPS Azurite with a managed identity (the fake IMDS)
// and nothing else: no key, no SAS, no connection string.
Result<std::unique_ptr<ObjectStore>> OpenOAuth(const std::string& container,
                                               TokenKind kind = TokenKind::kGood,
                                               bool trust_azurite = true) {
  for (const char* v :
       {"AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN",
        "AZURE_STORAGE_BLOB_ENDPOINT", "GANTRY_STORAGE_AUTH", "GANTRY_CA_FILE", "SSL_CERT_FILE"}) {
    ::unsetenv(v);
  }
  AzuriteFixture& az = SharedOAuthAzurite();
  StoreOptions o;
  o.endpoint = az.endpoint();
  if (trust_azurite) o.ca_file = az.ca_file();
  o.credential.kind = security::AzureIdentity::kManagedIdentity;
  o.credential.resource = kStorageResource;
  o.credential.imds_endpoint = Imds().Endpoint(kind);
  o.block_bytes = 64 << 10;
  o.parallelism = 4;
  o.retry.initial_backoff = std::chrono::milliseconds(10);
  o.retry.max_backoff = std::chrono::milliseconds(200);
  return OpenObjectStore("az://" + az.account() + "/" + container, o);
}

std::unique_ptr<ObjectStore> MakeOAuthStore() {
  if (!SharedOAuthAzurite().running()) {
    ADD_FAILURE() << "the HTTPS/OAuth Azurite is not running (see the first failure)";
    return nullptr;
  }
  auto s = OpenOAuth(FreshContainer());
  if (!s.ok()) {
    ADD_FAILURE() << s.status().ToString();
    return nullptr;
  }
  return std::move(s).value();
}

INSTANTIATE_TEST_SUITE_P(AzuriteOAuth, ObjectStoreConformance,
                         ::testing::Values(ConformanceParam{"azurite_oauth", MakeOAuthStore}),
                         PrintConformanceParam);

class AzureBlobOAuth : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(SharedOAuthAzurite().running())
        << "the HTTPS/OAuth Azurite did not start (see the first failure)";
  }
};

TEST_F(AzureBlobOAuth, PutGetListDeleteAndBlocksWithManagedIdentityTokens) {
  const size_t before = Imds().seen().size();
  auto store = OpenOAuth(FreshContainer());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(Imds().seen().size(), before) << "opening a store must not fetch a token";
  ObjectStore& s = **store;

  GANTRY_ASSERT_STATUS_OK(s.Put("run1/small.json", AsBytes(std::string("{\"step\": 10}"))));
  const std::string big = RandomBytes((64 << 10) * 5 + 123, 7);  // six blocks
  GANTRY_ASSERT_STATUS_OK(s.Put("run1/big.bin", AsBytes(big)));
  GANTRY_ASSERT_STATUS_OK(s.PutStream(
      "run1/stream.bin", [&, off = size_t{0}](std::span<std::byte> buf) mutable -> Result<size_t> {
        size_t n = std::min(buf.size(), big.size() - off);
        std::memcpy(buf.data(), big.data() + off, n);
        off += n;
        return n;
      }));
  auto small = s.Get("run1/small.json");
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_EQ(*small, "{\"step\": 10}");
  auto got = s.Get("run1/big.bin");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, big);
  std::string range(1000, '\0');
  GANTRY_ASSERT_STATUS_OK(s.GetRange(
      "run1/stream.bin", 70000, std::as_writable_bytes(std::span(range.data(), range.size()))));
  EXPECT_EQ(range, big.substr(70000, 1000));
  auto all = ListAll(s, "run1/");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].key, "run1/big.bin");
  EXPECT_EQ((*all)[0].size, big.size());
  EXPECT_EQ(s.Put("run1/small.json", AsBytes(std::string("x")), {.if_none_match = true}).code(),
            StatusCode::kAlreadyExists);
  GANTRY_ASSERT_STATUS_OK(s.Delete("run1/small.json"));
  EXPECT_EQ(s.Get("run1/small.json").status().code(), StatusCode::kNotFound);

  // One token for all of it (the source caches until 5 minutes before expiry),
  // asked for the way IMDS wants.
  std::vector<FakeImds::Seen> seen = Imds().seen();
  ASSERT_EQ(seen.size(), before + 1);
  EXPECT_EQ(seen.back().metadata, "true");
  EXPECT_EQ(seen.back().resource, "https://storage.azure.com");
  EXPECT_EQ(seen.back().api_version, "2018-02-01");
}

TEST_F(AzureBlobOAuth, TokenForAnotherAudienceIsRefusedWithTheRoleToGrant) {
  auto store = OpenOAuth(FreshContainer(), TokenKind::kWrongAudience);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Status s = (*store)->Put("k", AsBytes(std::string("v")));
  ASSERT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  EXPECT_NE(s.message().find("Invalid token audience"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("managed identity"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("https://storage.azure.com"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("Storage Blob Data Contributor"), std::string::npos) << s.message();
  ASSERT_FALSE(Imds().last_token().empty());
  EXPECT_EQ(s.message().find(Imds().last_token()), std::string::npos) << "the token leaked";
  EXPECT_EQ(s.message().find(Imds().last_token().substr(0, 20)), std::string::npos);
}

TEST_F(AzureBlobOAuth, ExpiredTokenIsRefused) {
  auto store = OpenOAuth(FreshContainer(), TokenKind::kExpired);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Result<std::string> got = (*store)->Get("k");
  ASSERT_EQ(got.status().code(), StatusCode::kPermissionDenied) << got.status().ToString();
  EXPECT_NE(got.status().message().find("expired"), std::string::npos) << got.status().message();
  Status put = (*store)->Put("k", AsBytes(std::string("v")));
  ASSERT_EQ(put.code(), StatusCode::kPermissionDenied) << put.ToString();
  EXPECT_NE(put.message().find("The token is expired"), std::string::npos) << put.message();
  EXPECT_NE(put.message().find("Storage Blob Data Reader"), std::string::npos) << put.message();
}

TEST_F(AzureBlobOAuth, IdentityRefusedByImdsNamesTheIdentity) {
  AzuriteFixture& az = SharedOAuthAzurite();
  StoreOptions o;
  o.endpoint = az.endpoint();
  o.ca_file = az.ca_file();
  o.credential.kind = security::AzureIdentity::kManagedIdentity;
  o.credential.client_id = "99999999-0000-0000-0000-000000000000";
  o.credential.resource = kStorageResource;
  // The fake answers 400 under a prefix it does not know, as IMDS does for a bad request.
  o.credential.imds_endpoint = Imds().Endpoint(TokenKind::kGood) + "/nowhere";
  auto store = OpenObjectStore("az://" + az.account() + "/" + FreshContainer(), o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Status s = (*store)->Put("k", AsBytes(std::string("v")));
  ASSERT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  EXPECT_NE(s.message().find("getting an Entra ID token"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("client_id 99999999-0000-0000-0000-000000000000"), std::string::npos)
      << s.message();
}

TEST_F(AzureBlobOAuth, UntrustedCertificateIsFailedPreconditionNamingTheCa) {
  auto store = OpenOAuth(FreshContainer(), TokenKind::kGood, /*trust_azurite=*/false);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Status s = (*store)->Put("k", AsBytes(std::string("v")));
  ASSERT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("not trusted"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("GANTRY_CA_FILE"), std::string::npos) << s.message();
}

TEST_F(AzureBlobOAuth, ConnectionStringWithoutKeyUsesEntraIdAndHttpIsRefused) {
  AzuriteFixture& az = SharedOAuthAzurite();
  StoreOptions o;
  o.container = FreshContainer();
  o.ca_file = az.ca_file();
  o.credential.kind = security::AzureIdentity::kManagedIdentity;
  o.credential.resource = "";  // means the storage audience
  o.credential.imds_endpoint = Imds().Endpoint(TokenKind::kGood);
  auto store =
      OpenObjectStore("AccountName=" + az.account() + ";BlobEndpoint=" + az.endpoint() + ";", o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  GANTRY_ASSERT_STATUS_OK((*store)->Put("a/b", AsBytes(std::string("v"))));
  EXPECT_EQ(Imds().seen().back().resource, "https://storage.azure.com");
  auto http = OpenObjectStore("AccountName=" + az.account() + ";BlobEndpoint=http://127.0.0.1:" +
                                  std::to_string(az.port()) + "/" + az.account() + ";",
                              o);
  EXPECT_EQ(http.status().code(), StatusCode::kFailedPrecondition) << http.status().ToString();
}

}  // namespace
}  // namespace gantry::storage::testing
