#include "gantry/security/azure_credential.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <mutex>
#include <string>
#include <vector>

#include "gantry/core/http_server.h"

namespace gantry::security {
namespace {

using namespace std::chrono_literals;

// A token endpoint on 127.0.0.1 that answers from a list of scripted replies
// (the last one repeats) and records what it was sent.
class TokenServer {
 public:
  struct Reply {
    int status = 200;
    std::string body;
  };
  struct Seen {
    std::string method, path, query, body, metadata, content_type;
  };

  explicit TokenServer(std::vector<Reply> replies) : replies_(std::move(replies)) {
    server_.Handle("/", [this](const http::ServerRequest& req, http::ServerResponse* resp) {
      std::lock_guard<std::mutex> lock(mu_);
      const std::string* md = req.Header("Metadata");
      const std::string* ct = req.Header("Content-Type");
      seen_.push_back({req.method, req.path, req.query, req.body, md ? *md : "", ct ? *ct : ""});
      const Reply& r = replies_[std::min(seen_.size() - 1, replies_.size() - 1)];
      resp->status = r.status;
      resp->content_type = "application/json";
      resp->body = r.body;
    });
    Status s = server_.Start({.listen = "127.0.0.1:0"});
    EXPECT_TRUE(s.ok()) << s.message();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }
  std::vector<Seen> seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 private:
  std::vector<Reply> replies_;
  http::Server server_;
  mutable std::mutex mu_;
  std::vector<Seen> seen_;
};

TEST(AzureCredentialTest, ManagedIdentityAsksImdsAndCachesUntilFiveMinutesBeforeExpiry) {
  TokenServer imds({{200, R"({"access_token":"tok-1","expires_in":"3600","token_type":"Bearer"})"},
                    {200, R"({"access_token":"tok-2","expires_in":"3600"})"}});
  FakeClock clock;
  auto source = NewAzureTokenSource({.kind = AzureIdentity::kManagedIdentity,
                                     .client_id = "11111111-aaaa",
                                     .resource = "https://management.azure.com",
                                     .imds_endpoint = imds.url()},
                                    clock);
  ASSERT_TRUE(source.ok()) << source.status().message();
  Result<std::string> t = (*source)->Token();
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(*t, "tok-1");
  ASSERT_EQ(imds.seen().size(), 1u);
  TokenServer::Seen s = imds.seen()[0];
  EXPECT_EQ(s.method, "GET");
  EXPECT_EQ(s.path, "/metadata/identity/oauth2/token");
  EXPECT_EQ(s.query,
            "api-version=2018-02-01&resource=https%3A%2F%2Fmanagement.azure.com"
            "&client_id=11111111-aaaa");
  EXPECT_EQ(s.metadata, "true");

  clock.Advance(54min);  // 6 minutes left: still cached
  EXPECT_EQ(*(*source)->Token(), "tok-1");
  EXPECT_EQ(imds.seen().size(), 1u);
  clock.Advance(2min);  // 4 minutes left: refreshed
  EXPECT_EQ(*(*source)->Token(), "tok-2");
  EXPECT_EQ(imds.seen().size(), 2u);
}

TEST(AzureCredentialTest, ExpiresOnIsUsedWhenExpiresInIsMissing) {
  FakeClock clock;
  int64_t wall =
      std::chrono::duration_cast<std::chrono::seconds>(clock.WallNow().time_since_epoch()).count();
  TokenServer imds(
      {{200, R"({"access_token":"a","expires_on":")" + std::to_string(wall + 600) + R"("})"},
       {200, R"({"access_token":"b","expires_on":")" + std::to_string(wall + 6000) + R"("})"}});
  auto source = NewAzureTokenSource({.imds_endpoint = imds.url()}, clock);
  ASSERT_TRUE(source.ok());
  EXPECT_EQ(*(*source)->Token(), "a");
  clock.Advance(4min);
  EXPECT_EQ(*(*source)->Token(), "a");
  clock.Advance(2min);  // within 5 minutes of expiry
  EXPECT_EQ(*(*source)->Token(), "b");
  EXPECT_EQ(imds.seen()[0].query.find("client_id"), std::string::npos)
      << "system-assigned identity: no client_id";
}

TEST(AzureCredentialTest, ServicePrincipalPostsClientCredentials) {
  TokenServer entra(
      {{200, R"({"token_type":"Bearer","expires_in":3599,"access_token":"sp-tok"})"}});
  ::setenv("GANTRY_TEST_SP_SECRET", "s3cr&t=x", 1);
  FakeClock clock;
  auto source = NewAzureTokenSource({.kind = AzureIdentity::kServicePrincipal,
                                     .client_id = "app-1",
                                     .tenant_id = "tenant-9",
                                     .client_secret_env = "GANTRY_TEST_SP_SECRET",
                                     .authority = entra.url()},
                                    clock);
  ASSERT_TRUE(source.ok()) << source.status().message();
  Result<std::string> t = (*source)->Token();
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(*t, "sp-tok");
  TokenServer::Seen s = entra.seen().at(0);
  EXPECT_EQ(s.method, "POST");
  EXPECT_EQ(s.path, "/tenant-9/oauth2/v2.0/token");
  EXPECT_EQ(s.content_type, "application/x-www-form-urlencoded");
  EXPECT_EQ(s.body,
            "grant_type=client_credentials&client_id=app-1&client_secret=s3cr%26t%3Dx"
            "&scope=https%3A%2F%2Fmanagement.azure.com%2F.default");
  EXPECT_EQ(*(*source)->Token(), "sp-tok");
  EXPECT_EQ(entra.seen().size(), 1u) << "cached";
}

TEST(AzureCredentialTest, RefusalNamesEndpointAndIdentityButNotTheSecret) {
  TokenServer entra(
      {{401,
        R"({"error":"invalid_client","error_description":"AADSTS7000215: Invalid client secret provided.\r\nTrace ID: 1"})"}});
  ::setenv("GANTRY_TEST_SP_SECRET2", "hunter2-secret", 1);
  FakeClock clock;
  auto source = NewAzureTokenSource({.kind = AzureIdentity::kServicePrincipal,
                                     .client_id = "app-2",
                                     .tenant_id = "t-2",
                                     .client_secret_env = "GANTRY_TEST_SP_SECRET2",
                                     .authority = entra.url()},
                                    clock);
  ASSERT_TRUE(source.ok());
  Result<std::string> t = (*source)->Token();
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kPermissionDenied);
  std::string m = t.status().message();
  EXPECT_NE(m.find("app-2"), std::string::npos) << m;
  EXPECT_NE(m.find("t-2"), std::string::npos) << m;
  EXPECT_NE(m.find(entra.url() + "/t-2/oauth2/v2.0/token"), std::string::npos) << m;
  EXPECT_NE(m.find("AADSTS7000215"), std::string::npos) << m;
  EXPECT_EQ(m.find("Trace ID"), std::string::npos) << m;
  EXPECT_EQ(m.find("hunter2"), std::string::npos) << m;
}

TEST(AzureCredentialTest, ThrottlingIsTransientAndMissingSecretIsNamed) {
  TokenServer imds({{429, R"({"error":"too_many_requests"})"}});
  FakeClock clock;
  auto mi = NewAzureTokenSource({.imds_endpoint = imds.url()}, clock);
  ASSERT_TRUE(mi.ok());
  EXPECT_EQ((*mi)->Token().status().code(), StatusCode::kUnavailable);

  ::unsetenv("GANTRY_TEST_SP_UNSET");
  auto sp = NewAzureTokenSource({.kind = AzureIdentity::kServicePrincipal,
                                 .client_id = "a",
                                 .tenant_id = "t",
                                 .client_secret_env = "GANTRY_TEST_SP_UNSET"},
                                clock);
  ASSERT_TRUE(sp.ok());
  Result<std::string> t = (*sp)->Token();
  EXPECT_EQ(t.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(t.status().message().find("GANTRY_TEST_SP_UNSET"), std::string::npos);

  auto bad =
      NewAzureTokenSource({.kind = AzureIdentity::kServicePrincipal, .client_id = "a"}, clock);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(AzureCredentialTest, EnvironmentTokenIsReadEachTime) {
  FakeClock clock;
  auto source = NewAzureTokenSource(
      {.kind = AzureIdentity::kEnvironmentToken, .token_env = "GANTRY_TEST_AZ_TOKEN"}, clock);
  ASSERT_TRUE(source.ok());
  ::unsetenv("GANTRY_TEST_AZ_TOKEN");
  EXPECT_EQ((*source)->Token().status().code(), StatusCode::kFailedPrecondition);
  ::setenv("GANTRY_TEST_AZ_TOKEN", "one", 1);
  EXPECT_EQ(*(*source)->Token(), "one");
  ::setenv("GANTRY_TEST_AZ_TOKEN", "two", 1);
  EXPECT_EQ(*(*source)->Token(), "two");
  EXPECT_EQ((*source)->Describe(), "token from $GANTRY_TEST_AZ_TOKEN");
}

}  // namespace
}  // namespace gantry::security
