#include "gantry/core/https_client.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "gantry/core/json.h"
#include "gantry/core/subprocess.h"
#include "testing/http_test_server.h"
#include "testing/temp_dir.h"

namespace gantry::http {
namespace {

using testing::ScriptedHttpServer;

std::string Reply(std::string_view status, std::string_view headers, std::string_view body) {
  return "HTTP/1.1 " + std::string(status) + "\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n" + std::string(headers) + "\r\n" + std::string(body);
}

TEST(HttpsClientTest, GetOverPlainHttpWithAHostName) {
  ScriptedHttpServer server({.pieces = {Reply("200 OK", "ETag: \"7\"\r\n", "{\"a\":1}")}});
  Request req{.url = "http://localhost:" + std::to_string(server.port()) + "/x?y=1",
              .headers = {{"Authorization", "Bearer t"}, {"If-Match", "*"}},
              .deadline = std::chrono::seconds(5)};
  Result<Response> resp = SendTls(req, {});
  ASSERT_TRUE(resp.ok()) << resp.status().message();
  EXPECT_EQ(resp->status, 200);
  EXPECT_EQ(resp->reason, "OK");
  EXPECT_EQ(resp->body, "{\"a\":1}");
  ASSERT_NE(resp->FindHeader("etag"), nullptr);
  EXPECT_EQ(*resp->FindHeader("etag"), "\"7\"");
  std::string head = server.request();
  EXPECT_TRUE(head.starts_with("GET /x?y=1 HTTP/1.1\r\n")) << head;
  EXPECT_NE(head.find("Authorization: Bearer t\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("If-Match: *\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("User-Agent: gantry/"), std::string::npos) << head;
}

TEST(HttpsClientTest, PatchSendsTheBodyWithItsLength) {
  ScriptedHttpServer server({.pieces = {Reply("202 Accepted", "", "")}});
  Request req{.method = "PATCH",
              .url = server.Url("/vmss"),
              .headers = {{"Content-Type", "application/json"}},
              .deadline = std::chrono::seconds(5),
              .body = R"({"sku":{"capacity":3}})"};
  Result<Response> resp = SendTls(req, {});
  ASSERT_TRUE(resp.ok()) << resp.status().message();
  EXPECT_EQ(resp->status, 202);
  std::string head = server.request();
  EXPECT_TRUE(head.starts_with("PATCH /vmss HTTP/1.1\r\n")) << head;
  EXPECT_NE(head.find("Content-Length: 22\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.find("Expect:"), std::string::npos) << head;
}

TEST(HttpsClientTest, ErrorsNameTheUrl) {
  uint16_t port = testing::ClosedLoopbackPort();
  std::string url = "http://127.0.0.1:" + std::to_string(port) + "/";
  Result<Response> refused = SendTls({.url = url, .deadline = std::chrono::seconds(5)}, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find(url), std::string::npos);

  Result<Response> ftp = SendTls({.url = "ftp://x/", .deadline = std::chrono::seconds(1)}, {});
  EXPECT_EQ(ftp.status().code(), StatusCode::kInvalidArgument);

  Result<Response> bad_header = SendTls(
      {.url = url, .headers = {{"X", "a\r\nB: c"}}, .deadline = std::chrono::seconds(1)}, {});
  EXPECT_EQ(bad_header.status().code(), StatusCode::kInvalidArgument);
}

TEST(HttpsClientTest, DeadlineCoversASilentServer) {
  ScriptedHttpServer server(
      {.pieces = {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab"}, .hold_open = true});
  Result<Response> resp =
      SendTls({.url = server.Url("/"), .deadline = std::chrono::milliseconds(300)}, {});
  ASSERT_FALSE(resp.ok());
  EXPECT_EQ(resp.status().code(), StatusCode::kDeadlineExceeded) << resp.status().message();
}

TEST(HttpsClientTest, BodyLimitAndSink) {
  ScriptedHttpServer big({.pieces = {Reply("200 OK", "", std::string(5000, 'x'))}});
  Result<Response> resp = SendTls(
      {.url = big.Url("/"), .deadline = std::chrono::seconds(5), .max_body_bytes = 1000}, {});
  EXPECT_EQ(resp.status().code(), StatusCode::kResourceExhausted);

  ScriptedHttpServer streamed({.pieces = {Reply("200 OK", "", std::string(5000, 'y'))}});
  size_t got = 0;
  Result<Response> sunk = SendTls({.url = streamed.Url("/"),
                                   .deadline = std::chrono::seconds(5),
                                   .max_body_bytes = 1000,
                                   .body_sink =
                                       [&](std::string_view piece) {
                                         got += piece.size();
                                         return Status();
                                       }},
                                  {});
  ASSERT_TRUE(sunk.ok()) << sunk.status().message();
  EXPECT_EQ(got, 5000u);
  EXPECT_TRUE(sunk->body.empty());
}

// A real TLS server: `openssl s_server -www` with a self-signed certificate
// for 127.0.0.1 and localhost.
class TlsServer {
 public:
  // With `client_ca`, clients must present a certificate it signed.
  explicit TlsServer(const testing::TempDir& dir, const std::string& client_ca = "") {
    cert_ = dir.Path("cert.pem");
    key_ = dir.Path("key.pem");
    if (!SelfSigned("localhost", cert_, key_)) return;
    port_ = testing::ClosedLoopbackPort();
    std::vector<std::string> argv = {
        "openssl", "s_server", "-accept", "127.0.0.1:" + std::to_string(port_),
        "-cert",   cert_,      "-key",    key_,
        "-www",    "-quiet"};
    if (!client_ca.empty()) {
      argv.insert(argv.end(), {"-Verify", "1", "-CAfile", client_ca, "-verify_return_error"});
    }
    Result<SpawnedChild> child = SpawnInGroup("openssl", argv);
    if (!child.ok()) return;
    child_ = *child;
    // Ready once it accepts TCP connections.
    for (int i = 0; i < 200 && !ready_; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(port_);
      ready_ = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
      ::close(fd);
      if (!ready_) std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
  }
  ~TlsServer() {
    if (child_.pid > 0) {
      ::kill(-child_.pid, SIGKILL);
      ::waitpid(child_.pid, nullptr, 0);
      ::close(child_.out);
      ::close(child_.err);
    }
  }
  static bool SelfSigned(const std::string& cn, const std::string& cert, const std::string& key) {
    Result<SubprocessResult> gen =
        RunSubprocess({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                       "-subj", "/CN=" + cn, "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                       "-keyout", key, "-out", cert},
                      std::chrono::seconds(60));
    return gen.ok() && gen->exit_code == 0;
  }
  bool ready() const { return ready_; }
  std::string Url(std::string host = "127.0.0.1") const {
    return "https://" + host + ":" + std::to_string(port_) + "/";
  }
  const std::string& cert() const { return cert_; }

 private:
  std::string cert_, key_;
  uint16_t port_ = 0;
  SpawnedChild child_;
  bool ready_ = false;
};

TEST(HttpsClientTest, VerifiesTheServerAgainstTheGivenCa) {
  ASSERT_FALSE(FindExecutable("openssl").empty())
      << "no openssl binary: install the Debian package openssl (scripts/install-deps.sh)";
  testing::TempDir dir("gantry-https-test");
  TlsServer server(dir);
  ASSERT_TRUE(server.ready()) << "openssl s_server did not start";
  Request req{.url = server.Url("localhost"), .deadline = std::chrono::seconds(5)};

  Result<Response> by_file = SendTls(req, {.ca_file = server.cert()});
  ASSERT_TRUE(by_file.ok()) << by_file.status().message();
  EXPECT_EQ(by_file->status, 200);

  Result<std::string> pem = ReadFile(server.cert());
  ASSERT_TRUE(pem.ok());
  Result<Response> by_pem = SendTls(req, {.ca_pem = *pem});
  ASSERT_TRUE(by_pem.ok()) << by_pem.status().message();

  // The system store does not know a self-signed certificate.
  Result<Response> untrusted = SendTls(req, {});
  ASSERT_FALSE(untrusted.ok());
  EXPECT_EQ(untrusted.status().code(), StatusCode::kFailedPrecondition)
      << untrusted.status().message();
  EXPECT_NE(untrusted.status().message().find("system CA store"), std::string::npos);

  Result<Response> insecure = SendTls(req, {.insecure_skip_verify = true});
  EXPECT_TRUE(insecure.ok()) << insecure.status().message();
}

TEST(HttpsClientTest, PresentsAClientCertificate) {
  ASSERT_FALSE(FindExecutable("openssl").empty())
      << "no openssl binary: install the Debian package openssl (scripts/install-deps.sh)";
  testing::TempDir dir("gantry-https-test");
  std::string client_cert = dir.Path("client.pem"), client_key = dir.Path("client-key.pem");
  ASSERT_TRUE(TlsServer::SelfSigned("gantry-client", client_cert, client_key));
  TlsServer server(dir, client_cert);
  ASSERT_TRUE(server.ready()) << "openssl s_server did not start";
  Request req{.url = server.Url(), .deadline = std::chrono::seconds(5)};

  Result<Response> by_file = SendTls(
      req,
      {.ca_file = server.cert(), .client_cert_file = client_cert, .client_key_file = client_key});
  ASSERT_TRUE(by_file.ok()) << by_file.status().message();
  EXPECT_EQ(by_file->status, 200);

  Result<std::string> cert_pem = ReadFile(client_cert), key_pem = ReadFile(client_key);
  ASSERT_TRUE(cert_pem.ok() && key_pem.ok());
  Result<Response> by_pem = SendTls(
      req, {.ca_file = server.cert(), .client_cert_pem = *cert_pem, .client_key_pem = *key_pem});
  ASSERT_TRUE(by_pem.ok()) << by_pem.status().message();

  Result<Response> without = SendTls(req, {.ca_file = server.cert()});
  EXPECT_FALSE(without.ok() && without->status == 200) << "no client certificate, yet answered";

  Result<Response> missing_file = SendTls(req, {.ca_file = server.cert(),
                                                .client_cert_file = dir.Path("nope.pem"),
                                                .client_key_file = client_key});
  ASSERT_FALSE(missing_file.ok());
  EXPECT_EQ(missing_file.status().code(), StatusCode::kFailedPrecondition)
      << missing_file.status().message();
}

}  // namespace
}  // namespace gantry::http
