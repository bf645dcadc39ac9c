#include "gantry/security/azure_credential.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gantry/core/config.h"
#include "gantry/core/http_server.h"
#include "gantry/security/crypto.h"
#include "gantry/security/jwt.h"
#include "testing/http_test_server.h"
#include "testing/temp_dir.h"

namespace gantry::security {
namespace {

using namespace std::chrono_literals;

// A token endpoint on 127.0.0.1 (IMDS, Entra ID, IDENTITY_ENDPOINT) that
// answers from a list of scripted replies (the last one repeats) and records
// what it was sent. As IMDS does, it can refuse requests without
// "Metadata: true" with a 400 (the chain's probe); those are counted apart.
class TokenServer {
 public:
  struct Reply {
    int status = 200;
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
  };
  struct Seen {
    std::string method, path, query, body, metadata, content_type, identity_header;
  };

  explicit TokenServer(std::vector<Reply> replies, bool imds_probe = false)
      : replies_(std::move(replies)), imds_probe_(imds_probe) {
    server_.Handle("/", [this](const http::ServerRequest& req, http::ServerResponse* resp) {
      std::lock_guard<std::mutex> lock(mu_);
      const std::string* md = req.Header("Metadata");
      const std::string* ct = req.Header("Content-Type");
      const std::string* ih = req.Header("X-IDENTITY-HEADER");
      resp->content_type = "application/json";
      if (imds_probe_ && md == nullptr) {
        ++probes_;
        resp->status = 400;
        resp->body =
            R"({"error":"invalid_request","error_description":"Required metadata header not specified"})";
        return;
      }
      seen_.push_back(
          {req.method, req.path, req.query, req.body, md ? *md : "", ct ? *ct : "", ih ? *ih : ""});
      const Reply& r = replies_[std::min(seen_.size() - 1, replies_.size() - 1)];
      resp->status = r.status;
      resp->body = r.body;
      resp->headers = r.headers;
    });
    Status s = server_.Start({.listen = "127.0.0.1:0"});
    EXPECT_TRUE(s.ok()) << s.message();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }
  std::vector<Seen> seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  int probes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return probes_;
  }

 private:
  std::vector<Reply> replies_;
  const bool imds_probe_;
  http::Server server_;
  mutable std::mutex mu_;
  std::vector<Seen> seen_;
  int probes_ = 0;
};

// A port where the kernel completes the TCP handshake (listen, never accept)
// but nothing ever answers: IMDS behind a firewall that drops replies.
class BlackHole {
 public:
  BlackHole() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~BlackHole() { ::close(fd_); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

std::string ClosedUrl() {
  return "http://127.0.0.1:" + std::to_string(gantry::testing::ClosedLoopbackPort());
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else if (s[i] == '+') {
      out += ' ';
    } else {
      out += s[i];
    }
  }
  return out;
}

std::map<std::string, std::string> Form(std::string_view body) {
  std::map<std::string, std::string> out;
  while (!body.empty()) {
    size_t amp = body.find('&');
    std::string_view pair = body.substr(0, amp);
    size_t eq = pair.find('=');
    out[std::string(pair.substr(0, eq))] =
        eq == std::string_view::npos ? "" : PercentDecode(pair.substr(eq + 1));
    body = amp == std::string_view::npos ? "" : body.substr(amp + 1);
  }
  return out;
}

int64_t Wall(const Clock& clock) {
  return std::chrono::duration_cast<std::chrono::seconds>(clock.WallNow().time_since_epoch())
      .count();
}

std::string TokenJson(const std::string& token, int expires_in = 3600) {
  return R"({"token_type":"Bearer","expires_in":)" + std::to_string(expires_in) +
         R"(,"access_token":")" + token + R"("})";
}

// Writes an executable `az` into `dir` that records its arguments in
// dir/az.args and prints `out` (exit 0) or `err` (exit 1).
void WriteFakeAz(const gantry::testing::TempDir& dir, const std::string& out,
                 const std::string& err = "") {
  // Shell builtins only: PATH holds nothing but this directory.
  std::string script = "#!/bin/sh\necho \"$@\" >> '" + dir.Path("az.args") + "'\n";
  if (err.empty()) {
    script += "printf '%s\\n' '" + out + "'\nexit 0\n";
  } else {
    script += "echo \"" + err + "\" >&2\nexit 1\n";
  }
  std::string path = dir.Write("az", script);
  ASSERT_EQ(::chmod(path.c_str(), 0755), 0);
}

// Every test starts with the variables the chain reads unset and PATH an
// empty directory (no real az), and gets them back afterwards.
class AzureCredentialTest : public ::testing::Test {
 protected:
  static constexpr const char* kVars[] = {"AZURE_TENANT_ID",
                                          "AZURE_CLIENT_ID",
                                          "AZURE_CLIENT_SECRET",
                                          "AZURE_CLIENT_CERTIFICATE_PATH",
                                          "AZURE_FEDERATED_TOKEN_FILE",
                                          "AZURE_AUTHORITY_HOST",
                                          "IDENTITY_ENDPOINT",
                                          "IDENTITY_HEADER",
                                          "PATH"};

  void SetUp() override {
    for (const char* v : kVars) {
      const char* old = ::getenv(v);
      saved_[v] = old ? std::optional<std::string>(old) : std::nullopt;
      ::unsetenv(v);
    }
    ::setenv("PATH", bin_.path().c_str(), 1);
  }
  void TearDown() override {
    for (const auto& [k, v] : saved_) {
      if (v) {
        ::setenv(k.c_str(), v->c_str(), 1);
      } else {
        ::unsetenv(k.c_str());
      }
    }
  }

  gantry::testing::TempDir bin_{"gantry-azcred-bin"};
  gantry::testing::TempDir tmp_{"gantry-azcred"};
  std::map<std::string, std::optional<std::string>> saved_;
};

// ---------------------------------------------------------------------------
// Each identity on its own.

TEST_F(AzureCredentialTest, ManagedIdentityAsksImdsAndCachesUntilFiveMinutesBeforeExpiry) {
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

  clock.Advance(54min);  // 6 minutes left: still cached, whatever the jitter
  EXPECT_EQ(*(*source)->Token(), "tok-1");
  EXPECT_EQ(imds.seen().size(), 1u);
  clock.Advance(2min);  // 4 minutes left: refreshed
  EXPECT_EQ(*(*source)->Token(), "tok-2");
  EXPECT_EQ(imds.seen().size(), 2u);
}

TEST_F(AzureCredentialTest, ExpiresOnIsUsedWhenExpiresInIsMissing) {
  FakeClock clock;
  int64_t wall = Wall(clock);
  TokenServer imds(
      {{200, R"({"access_token":"a","expires_on":")" + std::to_string(wall + 600) + R"("})"},
       {200, R"({"access_token":"b","expires_on":")" + std::to_string(wall + 6000) + R"("})"}});
  auto source = NewAzureTokenSource(
      {.kind = AzureIdentity::kManagedIdentity, .imds_endpoint = imds.url()}, clock);
  ASSERT_TRUE(source.ok());
  EXPECT_EQ(*(*source)->Token(), "a");
  clock.Advance(4min);
  EXPECT_EQ(*(*source)->Token(), "a");
  clock.Advance(2min);  // within 5 minutes of expiry
  EXPECT_EQ(*(*source)->Token(), "b");
  EXPECT_EQ(imds.seen()[0].query.find("client_id"), std::string::npos)
      << "system-assigned identity: no client_id";
}

TEST_F(AzureCredentialTest, ManagedIdentityByObjectIdOrResourceIdAndOnlyOneOfThem) {
  TokenServer imds({{200, TokenJson("mi")}});
  FakeClock clock;
  auto by_object = NewAzureTokenSource(
      {.kind = AzureIdentity::kManagedIdentity, .object_id = "obj-7", .imds_endpoint = imds.url()},
      clock);
  ASSERT_TRUE(by_object.ok());
  EXPECT_EQ(*(*by_object)->Token(), "mi");
  EXPECT_NE(imds.seen().at(0).query.find("&object_id=obj-7"), std::string::npos);
  auto by_res = NewAzureTokenSource({.kind = AzureIdentity::kManagedIdentity,
                                     .msi_res_id = "/subscriptions/s/rg/x",
                                     .imds_endpoint = imds.url()},
                                    clock);
  ASSERT_TRUE(by_res.ok());
  EXPECT_EQ(*(*by_res)->Token(), "mi");
  EXPECT_NE(imds.seen().at(1).query.find("&msi_res_id=%2Fsubscriptions%2Fs%2Frg%2Fx"),
            std::string::npos);
  EXPECT_EQ((*by_res)->Describe(), "managed identity (msi_res_id /subscriptions/s/rg/x)");

  auto both = NewAzureTokenSource(
      {.kind = AzureIdentity::kManagedIdentity, .client_id = "c", .object_id = "o"}, clock);
  EXPECT_EQ(both.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(AzureCredentialTest, AppServiceEndpointSendsTheIdentityHeaderAndNeverShowsIt) {
  FakeClock clock;
  TokenServer app(
      {{200, R"({"access_token":"app-tok","expires_on":")" + std::to_string(Wall(clock) + 3600) +
                 R"(","resource":"https://storage.azure.com","token_type":"Bearer"})"},
       {403, R"({"error":"forbidden","error_description":"bad header hdr-secret-123"})"}});
  ::setenv("IDENTITY_ENDPOINT", (app.url() + "/msi/token").c_str(), 1);
  ::setenv("IDENTITY_HEADER", "hdr-secret-123", 1);
  auto source = NewAzureTokenSource({.kind = AzureIdentity::kManagedIdentity,
                                     .client_id = "uami-1",
                                     .resource = "https://storage.azure.com",
                                     .refresh_jitter = 0ms},
                                    clock);
  ASSERT_TRUE(source.ok());
  Result<std::string> t = (*source)->Token();
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(*t, "app-tok");
  TokenServer::Seen s = app.seen().at(0);
  EXPECT_EQ(s.path, "/msi/token");
  EXPECT_EQ(s.query,
            "api-version=2019-08-01&resource=https%3A%2F%2Fstorage.azure.com&client_id=uami-1");
  EXPECT_EQ(s.identity_header, "hdr-secret-123");
  EXPECT_EQ(s.metadata, "");

  clock.Advance(61min);  // expired: the refusal is the answer
  Result<std::string> refused = (*source)->Token();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("bad header ***"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(refused.status().message().find("hdr-secret-123"), std::string::npos);
}

TEST_F(AzureCredentialTest, ServicePrincipalPostsClientCredentials) {
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

TEST_F(AzureCredentialTest, RefusalNamesEndpointAndIdentityButNotTheSecretAndIsNotRetried) {
  TokenServer entra(
      {{400,
        R"({"error":"invalid_client","error_description":"AADSTS7000215: Invalid client secret provided (hunter2-secret).\r\nTrace ID: 1"})"}});
  ::setenv("GANTRY_TEST_SP_SECRET2", "hunter2-secret", 1);
  FakeClock clock;
  auto source = NewAzureTokenSource({.kind = AzureIdentity::kServicePrincipal,
                                     .client_id = "app-2",
                                     .tenant_id = "t-2",
                                     .client_secret_env = "GANTRY_TEST_SP_SECRET2",
                                     .authority = entra.url()},
                                    clock);
  ASSERT_TRUE(source.ok());
  std::chrono::nanoseconds before = clock.Now();
  Result<std::string> t = (*source)->Token();
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(entra.seen().size(), 1u) << "a refusal is not retried";
  EXPECT_EQ(clock.Now(), before) << "no backoff slept";
  std::string m = t.status().message();
  EXPECT_NE(m.find("app-2"), std::string::npos) << m;
  EXPECT_NE(m.find("t-2"), std::string::npos) << m;
  EXPECT_NE(m.find(entra.url() + "/t-2/oauth2/v2.0/token"), std::string::npos) << m;
  EXPECT_NE(m.find("invalid_client: AADSTS7000215"), std::string::npos) << m;
  EXPECT_EQ(m.find("Trace ID"), std::string::npos) << m;
  EXPECT_EQ(m.find("hunter2"), std::string::npos) << m;
}

TEST_F(AzureCredentialTest, ThrottlingIsRetriedHonouringRetryAfterThenSucceeds) {
  TokenServer entra({{429, R"({"error":"too_many_requests"})", {{"Retry-After", "7"}}},
                     {503, R"({"error":"temporarily_unavailable"})"},
                     {200, TokenJson("after-retry")}});
  ::setenv("GANTRY_TEST_SP_SECRET3", "pw", 1);
  FakeClock clock;
  auto source = NewAzureTokenSource({.kind = AzureIdentity::kServicePrincipal,
                                     .client_id = "a",
                                     .tenant_id = "t",
                                     .client_secret_env = "GANTRY_TEST_SP_SECRET3",
                                     .authority = entra.url()},
                                    clock);
  ASSERT_TRUE(source.ok());
  std::chrono::nanoseconds before = clock.Now();
  Result<std::string> t = (*source)->Token();
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(*t, "after-retry");
  EXPECT_EQ(entra.seen().size(), 3u);
  // Retry-After 7 s, then the second backoff step (1 s) for the 503.
  EXPECT_EQ(clock.Now() - before, 8000ms);
}

TEST_F(AzureCredentialTest, RetriesAreBoundedByCountAndBudget) {
  TokenServer imds({{429, R"({"error":"too_many_requests"})"}});
  FakeClock clock;
  auto mi = NewAzureTokenSource(
      {.kind = AzureIdentity::kManagedIdentity, .imds_endpoint = imds.url(), .max_retries = 3},
      clock);
  ASSERT_TRUE(mi.ok());
  Result<std::string> t = (*mi)->Token();
  EXPECT_EQ(t.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(t.status().message().find("4 attempts"), std::string::npos) << t.status().message();
  EXPECT_EQ(imds.seen().size(), 4u);

  // A Retry-After past the budget is not waited for.
  TokenServer slow({{503, "{}", {{"Retry-After", "3600"}}}});
  auto mi2 = NewAzureTokenSource(
      {.kind = AzureIdentity::kManagedIdentity, .imds_endpoint = slow.url()}, clock);
  ASSERT_TRUE(mi2.ok());
  std::chrono::nanoseconds before = clock.Now();
  EXPECT_EQ((*mi2)->Token().status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(slow.seen().size(), 1u);
  EXPECT_EQ(clock.Now(), before);
}

TEST_F(AzureCredentialTest, MissingSecretAndMissingFieldsAreNamed) {
  FakeClock clock;
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
  auto wi = NewAzureTokenSource({.kind = AzureIdentity::kWorkloadIdentity}, clock);
  EXPECT_EQ(wi.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wi.status().message().find("AZURE_FEDERATED_TOKEN_FILE"), std::string::npos)
      << wi.status().message();
}

TEST_F(AzureCredentialTest, EnvironmentTokenIsReadEachTime) {
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

// A self-signed RSA certificate and its key, as one PEM (what
// AZURE_CLIENT_CERTIFICATE_PATH points at), plus what a verifier needs.
struct TestCert {
  std::string pem;         // certificate + private key
  std::string public_pem;  // the certificate's public key
  std::string x5t;         // base64url SHA-1 of the DER certificate
};

TestCert MakeCert() {
  TestCert out;
  EVP_PKEY* key = EVP_RSA_gen(2048);
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 42);
  X509_gmtime_adj(X509_getm_notBefore(cert), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("gantry-test"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509_sign(cert, key, EVP_sha256());
  auto to_string = [](auto write) {
    BIO* bio = BIO_new(BIO_s_mem());
    write(bio);
    char* data = nullptr;
    long n = BIO_get_mem_data(bio, &data);
    std::string s(data, static_cast<size_t>(n));
    BIO_free(bio);
    return s;
  };
  out.pem = to_string([&](BIO* b) { PEM_write_bio_X509(b, cert); }) + to_string([&](BIO* b) {
              PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr);
            });
  out.public_pem = to_string([&](BIO* b) { PEM_write_bio_PUBKEY(b, key); });
  unsigned char* der = nullptr;
  int len = i2d_X509(cert, &der);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  EVP_Digest(der, static_cast<size_t>(len), md, &md_len, EVP_sha1(), nullptr);
  OPENSSL_free(der);
  out.x5t = Base64UrlEncode(std::string_view(reinterpret_cast<char*>(md), md_len));
  X509_free(cert);
  EVP_PKEY_free(key);
  return out;
}

TEST_F(AzureCredentialTest, CertificateAssertionIsSignedByTheCertificatesKey) {
  TestCert cert = MakeCert();
  std::string path = tmp_.Write("sp.pem", cert.pem);
  TokenServer entra({{200, TokenJson("cert-tok")}});
  FakeClock clock;
  auto source = NewAzureTokenSource({.kind = AzureIdentity::kServicePrincipal,
                                     .client_id = "app-cert",
                                     .tenant_id = "tenant-c",
                                     .certificate_path = path,
                                     .resource = "https://storage.azure.com",
                                     .authority = entra.url()},
                                    clock);
  ASSERT_TRUE(source.ok()) << source.status().message();
  Result<std::string> t = (*source)->Token();
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(*t, "cert-tok");
  std::map<std::string, std::string> form = Form(entra.seen().at(0).body);
  EXPECT_EQ(form["grant_type"], "client_credentials");
  EXPECT_EQ(form["client_id"], "app-cert");
  EXPECT_EQ(form["scope"], "https://storage.azure.com/.default");
  EXPECT_EQ(form["client_assertion_type"],
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer");
  EXPECT_EQ(form.count("client_secret"), 0u);
  const std::string& jwt = form["client_assertion"];

  std::string aud = entra.url() + "/tenant-c/oauth2/v2.0/token";
  auto verifier = JwtVerifier::Create({.keys = {{.alg = "RS256", .public_pem = cert.public_pem}},
                                       .issuer = "app-cert",
                                       .audiences = {aud},
                                       .leeway_s = 0,
                                       .role_claim = "sub",
                                       .cache_size = 0});
  ASSERT_TRUE(verifier.ok()) << verifier.status().message();
  Result<JwtClaims> claims = (*verifier)->Verify(jwt, Wall(clock));
  ASSERT_TRUE(claims.ok()) << claims.status().message();
  EXPECT_EQ(claims->subject, "app-cert");
  EXPECT_EQ(claims->nbf, Wall(clock));
  EXPECT_EQ(claims->exp, Wall(clock) + 600);

  Result<std::string> header = Base64UrlDecode(jwt.substr(0, jwt.find('.')));
  ASSERT_TRUE(header.ok());
  nlohmann::json h = nlohmann::json::parse(*header);
  EXPECT_EQ(h["alg"], "RS256");
  EXPECT_EQ(h["x5t"], cert.x5t);
  std::string mid = jwt.substr(jwt.find('.') + 1);
  Result<std::string> payload = Base64UrlDecode(mid.substr(0, mid.find('.')));
  ASSERT_TRUE(payload.ok());
  nlohmann::json p = nlohmann::json::parse(*payload);
  EXPECT_EQ(p["aud"], aud);
  EXPECT_EQ(p["iss"], "app-cert");
  EXPECT_EQ(p["jti"].get<std::string>().size(), 32u);

  // A file without a key is named, and the PEM text is not quoted.
  std::string certless = tmp_.Write("nokey.pem", cert.public_pem);
  auto broken = NewAzureTokenSource({.kind = AzureIdentity::kServicePrincipal,
                                     .client_id = "app-cert",
                                     .tenant_id = "tenant-c",
                                     .certificate_path = certless,
                                     .authority = entra.url()},
                                    clock);
  ASSERT_TRUE(broken.ok());
  Result<std::string> bt = (*broken)->Token();
  ASSERT_FALSE(bt.ok());
  EXPECT_NE(bt.status().message().find(certless), std::string::npos) << bt.status().message();
  EXPECT_EQ(bt.status().message().find("BEGIN PUBLIC KEY"), std::string::npos);
}

TEST_F(AzureCredentialTest, WorkloadIdentityRereadsTheTokenFileOnEveryRefresh) {
  TokenServer entra({{200, TokenJson("wi-1")}, {200, TokenJson("wi-2")}});
  std::string file = tmp_.Write("federated", "fed-token-one\n");
  ::setenv("AZURE_FEDERATED_TOKEN_FILE", file.c_str(), 1);
  ::setenv("AZURE_CLIENT_ID", "wi-app", 1);
  ::setenv("AZURE_TENANT_ID", "wi-tenant", 1);
  ::setenv("AZURE_AUTHORITY_HOST", entra.url().c_str(), 1);
  FakeClock clock;
  auto source =
      NewAzureTokenSource({.kind = AzureIdentity::kWorkloadIdentity, .refresh_jitter = 0ms}, clock);
  ASSERT_TRUE(source.ok()) << source.status().message();
  EXPECT_EQ(*(*source)->Token(), "wi-1");
  TokenServer::Seen s = entra.seen().at(0);
  EXPECT_EQ(s.path, "/wi-tenant/oauth2/v2.0/token");
  std::map<std::string, std::string> form = Form(s.body);
  EXPECT_EQ(form["client_assertion"], "fed-token-one");
  EXPECT_EQ(form["client_id"], "wi-app");
  EXPECT_EQ(form["client_assertion_type"],
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer");

  tmp_.Write("federated", "fed-token-two");  // the kubelet rotated it
  clock.Advance(55min);
  EXPECT_EQ(*(*source)->Token(), "wi-2");
  EXPECT_EQ(Form(entra.seen().at(1).body)["client_assertion"], "fed-token-two");
}

TEST_F(AzureCredentialTest, AzureCliRunsAzAndReadsExpiresOn) {
  FakeClock clock;
  WriteFakeAz(bin_, R"({"accessToken":"cli-tok","expires_on":)" +
                        std::to_string(Wall(clock) + 3600) +
                        R"(,"subscription":"s","tenant":"t","tokenType":"Bearer"})");
  auto source = NewAzureTokenSource({.kind = AzureIdentity::kAzureCli,
                                     .tenant_id = "t-cli",
                                     .resource = "https://monitor.azure.com"},
                                    clock);
  ASSERT_TRUE(source.ok());
  Result<std::string> t = (*source)->Token();
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(*t, "cli-tok");
  EXPECT_EQ(bin_.Read("az.args"),
            "account get-access-token --output json --resource https://monitor.azure.com "
            "--tenant t-cli\n");
  clock.Advance(50min);
  EXPECT_EQ(*(*source)->Token(), "cli-tok");
  EXPECT_EQ(bin_.Read("az.args").size(),
            std::string("account get-access-token --output json --resource "
                        "https://monitor.azure.com --tenant t-cli\n")
                .size())
      << "cached: az ran once";
}

TEST_F(AzureCredentialTest, AzureCliOldExpiresOnInLocalTimeAndNotLoggedIn) {
  FakeClock clock;
  std::time_t exp = static_cast<std::time_t>(Wall(clock) + 3600);
  std::tm local{};
  ::localtime_r(&exp, &local);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S.000000", &local);
  WriteFakeAz(bin_, std::string(R"({"accessToken":"old-cli","expiresOn":")") + buf + R"("})");
  auto source =
      NewAzureTokenSource({.kind = AzureIdentity::kAzureCli, .refresh_jitter = 0ms}, clock);
  ASSERT_TRUE(source.ok());
  EXPECT_EQ(*(*source)->Token(), "old-cli");
  clock.Advance(54min);
  EXPECT_EQ(*(*source)->Token(), "old-cli") << "cached for the hour expiresOn says";

  gantry::testing::TempDir other("gantry-azcred-bin2");
  WriteFakeAz(other, "", "ERROR: Please run 'az login' to setup account.");
  ::setenv("PATH", other.path().c_str(), 1);
  auto refused = NewAzureTokenSource({.kind = AzureIdentity::kAzureCli}, clock);
  ASSERT_TRUE(refused.ok());
  Result<std::string> t = (*refused)->Token();
  EXPECT_EQ(t.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(t.status().message().find("Please run 'az login' to setup account."), std::string::npos)
      << t.status().message();
}

// ---------------------------------------------------------------------------
// Caching.

TEST_F(AzureCredentialTest, RefreshJitterStaysWithinTheMinuteBeforeTheMargin) {
  TokenServer imds({{200, TokenJson("j", 3600)}});
  FakeClock clock;
  std::vector<std::unique_ptr<TokenSource>> sources;
  for (int i = 0; i < 20; ++i) {
    auto s = NewAzureTokenSource(
        {.kind = AzureIdentity::kManagedIdentity, .imds_endpoint = imds.url()}, clock);
    ASSERT_TRUE(s.ok());
    sources.push_back(std::move(*s));
    ASSERT_TRUE(sources.back()->Token().ok());
  }
  ASSERT_EQ(imds.seen().size(), 20u);
  clock.Advance(3600s - 6min);  // 6 minutes left: jitter is under a minute
  for (auto& s : sources) ASSERT_TRUE(s->Token().ok());
  EXPECT_EQ(imds.seen().size(), 20u);
  clock.Advance(1min);  // 5 minutes left: every one refreshed
  for (auto& s : sources) ASSERT_TRUE(s->Token().ok());
  EXPECT_EQ(imds.seen().size(), 40u);
}

TEST_F(AzureCredentialTest, AFailedRefreshHandsOutTheStillValidTokenAndTriesAgainLater) {
  TokenServer entra({{200, TokenJson("first")},
                     {400, R"({"error":"invalid_grant"})"},
                     {200, TokenJson("second")}});
  ::setenv("GANTRY_TEST_SP_SECRET4", "pw4", 1);
  FakeClock clock;
  auto source = NewAzureTokenSource({.kind = AzureIdentity::kServicePrincipal,
                                     .client_id = "a",
                                     .tenant_id = "t",
                                     .client_secret_env = "GANTRY_TEST_SP_SECRET4",
                                     .authority = entra.url(),
                                     .refresh_jitter = 0ms},
                                    clock);
  ASSERT_TRUE(source.ok());
  EXPECT_EQ(*(*source)->Token(), "first");
  clock.Advance(56min);  // refresh due; the refresh is refused
  EXPECT_EQ(*(*source)->Token(), "first");
  EXPECT_EQ(entra.seen().size(), 2u);
  clock.Advance(10s);
  EXPECT_EQ(*(*source)->Token(), "first");
  EXPECT_EQ(entra.seen().size(), 2u) << "not asked again at once";
  clock.Advance(30s);
  EXPECT_EQ(*(*source)->Token(), "second");
  EXPECT_EQ(entra.seen().size(), 3u);
}

// ---------------------------------------------------------------------------
// The chain.

TEST_F(AzureCredentialTest, ChainTakesTheFirstLinkThatIsSetUpAndRemembersIt) {
  FakeClock clock;
  TokenServer entra({{200, TokenJson("from-entra")}});
  TokenServer imds({{200, TokenJson("from-imds")}}, /*imds_probe=*/true);
  WriteFakeAz(bin_, R"({"accessToken":"from-cli","expires_on":)" +
                        std::to_string(Wall(clock) + 3600) + "}");
  std::string file = tmp_.Write("federated", "fed");
  ::setenv("AZURE_TENANT_ID", "tenant-x", 1);
  ::setenv("AZURE_CLIENT_ID", "client-x", 1);
  ::setenv("AZURE_CLIENT_SECRET", "chain-secret", 1);
  ::setenv("AZURE_FEDERATED_TOKEN_FILE", file.c_str(), 1);
  ::setenv("AZURE_AUTHORITY_HOST", entra.url().c_str(), 1);
  AzureCredentialOptions o{.imds_endpoint = imds.url()};
  EXPECT_EQ(o.kind, AzureIdentity::kDefaultChain) << "the chain is the default";

  // 1. environment: the secret wins over everything else.
  auto env = NewAzureTokenSource(o, clock);
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(*(*env)->Token(), "from-entra");
  EXPECT_EQ(Form(entra.seen().at(0).body)["client_secret"], "chain-secret");
  EXPECT_EQ(imds.seen().size() + imds.probes(), 0u);
  EXPECT_EQ(bin_.Read("az.args"), "");
  EXPECT_EQ((*env)->Describe(),
            "default Azure credential chain: service principal client-x in tenant tenant-x");
  // Remembered: with the secret gone, the refresh fails and the still-valid
  // token is handed out; the chain is not walked again (that would ask
  // workload identity).
  ::unsetenv("AZURE_CLIENT_SECRET");
  clock.Advance(56min);
  EXPECT_EQ(*(*env)->Token(), "from-entra");
  EXPECT_EQ(entra.seen().size(), 1u);

  // 2. workload identity once there is no secret.
  auto wi = NewAzureTokenSource(o, clock);
  ASSERT_TRUE(wi.ok());
  EXPECT_EQ(*(*wi)->Token(), "from-entra");
  EXPECT_EQ(Form(entra.seen().back().body)["client_assertion"], "fed");

  // 3. managed identity (IMDS probed first) once there is no token file;
  // AZURE_CLIENT_ID picks the user-assigned identity.
  ::unsetenv("AZURE_FEDERATED_TOKEN_FILE");
  auto mi = NewAzureTokenSource(o, clock);
  ASSERT_TRUE(mi.ok());
  EXPECT_EQ(*(*mi)->Token(), "from-imds");
  EXPECT_EQ(imds.probes(), 1);
  EXPECT_NE(imds.seen().at(0).query.find("&client_id=client-x"), std::string::npos);

  // 4. Azure CLI once IMDS is not there.
  o.imds_endpoint = ClosedUrl();
  auto cli = NewAzureTokenSource(o, clock);
  ASSERT_TRUE(cli.ok());
  EXPECT_EQ(*(*cli)->Token(), "from-cli");
  EXPECT_NE((*cli)->Describe().find("Azure CLI"), std::string::npos) << (*cli)->Describe();
}

TEST_F(AzureCredentialTest, ChainErrorListsEveryLinkAndNeverTheSecret) {
  FakeClock clock;
  TokenServer entra({{401, R"({"error":"invalid_client","error_description":"AADSTS7000215"})"}});
  ::setenv("AZURE_TENANT_ID", "tenant-e", 1);
  ::setenv("AZURE_CLIENT_ID", "client-e", 1);
  ::setenv("AZURE_CLIENT_SECRET", "super-secret-value", 1);
  ::setenv("AZURE_AUTHORITY_HOST", entra.url().c_str(), 1);
  WriteFakeAz(bin_, "", "ERROR: Please run 'az login' to setup account.");
  auto source = NewAzureTokenSource({.imds_endpoint = ClosedUrl()}, clock);
  ASSERT_TRUE(source.ok());
  Result<std::string> t = (*source)->Token();
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kPermissionDenied);
  std::string m = t.status().message();
  EXPECT_NE(m.find("environment: Azure token for service principal client-e in tenant tenant-e"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("AADSTS7000215"), std::string::npos) << m;
  EXPECT_NE(m.find("workload identity: skipped (AZURE_FEDERATED_TOKEN_FILE unset)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("managed identity: IMDS at "), std::string::npos) << m;
  EXPECT_NE(m.find("is not reachable"), std::string::npos) << m;
  EXPECT_NE(m.find("Azure CLI: Azure token from the Azure CLI"), std::string::npos) << m;
  EXPECT_NE(m.find("az login"), std::string::npos) << m;
  EXPECT_EQ(m.find("super-secret-value"), std::string::npos) << m;
}

TEST_F(AzureCredentialTest, ChainSkipsLinksThatAreNotSetUp) {
  FakeClock clock;
  auto source = NewAzureTokenSource({.imds_endpoint = ClosedUrl()}, clock);
  ASSERT_TRUE(source.ok());
  Result<std::string> t = (*source)->Token();
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kUnavailable);
  std::string m = t.status().message();
  EXPECT_NE(m.find("environment: skipped (AZURE_TENANT_ID, AZURE_CLIENT_ID, AZURE_CLIENT_SECRET "
                   "and AZURE_CLIENT_CERTIFICATE_PATH unset)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("workload identity: skipped"), std::string::npos) << m;
  EXPECT_NE(m.find("Azure CLI: skipped (az is not on PATH)"), std::string::npos) << m;
  EXPECT_NE((*source)->Describe().find("default Azure credential chain ("), std::string::npos);
}

TEST_F(AzureCredentialTest, ChainGivesUpOnAnImdsThatNeverAnswersAfterTheProbeTimeout) {
  BlackHole hole;
  FakeClock clock;
  auto source =
      NewAzureTokenSource({.imds_endpoint = hole.url(), .imds_probe_timeout = 300ms}, clock);
  ASSERT_TRUE(source.ok());
  Result<std::string> t = (*source)->Token();
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("did not answer within 300 ms"), std::string::npos)
      << t.status().message();
}

TEST_F(AzureCredentialTest, ChainUsesTheCertificateFromTheEnvironment) {
  TestCert cert = MakeCert();
  TokenServer entra({{200, TokenJson("env-cert")}});
  ::setenv("AZURE_TENANT_ID", "tc", 1);
  ::setenv("AZURE_CLIENT_ID", "cc", 1);
  ::setenv("AZURE_CLIENT_CERTIFICATE_PATH", tmp_.Write("c.pem", cert.pem).c_str(), 1);
  ::setenv("AZURE_AUTHORITY_HOST", entra.url().c_str(), 1);
  FakeClock clock;
  auto source = NewAzureTokenSource({.imds_endpoint = ClosedUrl()}, clock);
  ASSERT_TRUE(source.ok());
  EXPECT_EQ(*(*source)->Token(), "env-cert");
  EXPECT_FALSE(Form(entra.seen().at(0).body)["client_assertion"].empty());
}

// ---------------------------------------------------------------------------
// The config block.

TEST_F(AzureCredentialTest, ParsesTheCredentialBlock) {
  Result<Config> cfg = Config::LoadString(R"(storage:
  credential:
    type: service_principal
    client_id: app
    tenant_id: ten
    certificate_path: /etc/gantry/sp.pem
    timeout: 3s
monitor:
  credential: {type: managed_identity, object_id: o-1}
)",
                                          "gantry.yaml");
  ASSERT_TRUE(cfg.ok()) << cfg.status().message();
  Result<AzureCredentialOptions> sp = ParseAzureCredential(*cfg, "storage.credential");
  ASSERT_TRUE(sp.ok()) << sp.status().message();
  EXPECT_EQ(sp->kind, AzureIdentity::kServicePrincipal);
  EXPECT_EQ(sp->client_id, "app");
  EXPECT_EQ(sp->tenant_id, "ten");
  EXPECT_EQ(sp->certificate_path, "/etc/gantry/sp.pem");
  EXPECT_EQ(sp->timeout, 3000ms);
  Result<AzureCredentialOptions> mi = ParseAzureCredential(*cfg, "monitor.credential");
  ASSERT_TRUE(mi.ok()) << mi.status().message();
  EXPECT_EQ(mi->kind, AzureIdentity::kManagedIdentity);
  EXPECT_EQ(mi->object_id, "o-1");
  Result<AzureCredentialOptions> absent = ParseAzureCredential(*cfg, "autoscale.credential");
  ASSERT_TRUE(absent.ok());
  EXPECT_EQ(absent->kind, AzureIdentity::kDefaultChain);
}

TEST_F(AzureCredentialTest, CredentialBlockErrorsNameFileLineAndKey) {
  auto parse = [](const std::string& yaml) {
    Result<Config> cfg = Config::LoadString(yaml, "gantry.yaml");
    EXPECT_TRUE(cfg.ok()) << cfg.status().message();
    return ParseAzureCredential(*cfg, "credential");
  };
  Result<AzureCredentialOptions> bad_type = parse("credential:\n  type: magic\n");
  ASSERT_FALSE(bad_type.ok());
  EXPECT_NE(bad_type.status().message().find("gantry.yaml:2:"), std::string::npos)
      << bad_type.status().message();
  EXPECT_NE(bad_type.status().message().find("credential.type"), std::string::npos);
  EXPECT_NE(bad_type.status().message().find("workload_identity"), std::string::npos);

  Result<AzureCredentialOptions> no_tenant =
      parse("credential:\n  type: service_principal\n  client_id: a\n  client_secret_env: S\n");
  ASSERT_FALSE(no_tenant.ok());
  EXPECT_NE(no_tenant.status().message().find("tenant_id"), std::string::npos)
      << no_tenant.status().message();
  EXPECT_NE(no_tenant.status().message().find("gantry.yaml:2:"), std::string::npos);

  Result<AzureCredentialOptions> typo = parse("credential:\n  type: default\n  clinet_id: a\n");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("client_id"), std::string::npos)
      << typo.status().message();
  EXPECT_NE(typo.status().message().find("gantry.yaml:3:"), std::string::npos);

  Result<AzureCredentialOptions> no_env = parse("credential: {type: environment_token}\n");
  EXPECT_EQ(no_env.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gantry::security
