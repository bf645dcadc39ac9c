// The gateway in-process against a real (threaded, blocking) HTTP backend on
// loopback: proxying, credentials, pooling, smuggling, streaming, usage,
// limits, audit, admin API, timeouts and reload. The Python suite in
// tests/gateway drives the CLI end to end; this one checks the library.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "../monitor/monitor_test_support.h"
#include "gantry/core/http_client.h"
#include "gantry/core/http_parser.h"
#include "gantry/gateway/config.h"
#include "gantry/gateway/server.h"
#include "gantry/security/audit.h"
#include "gantry/security/crypto.h"
#include "gantry/security/key_store.h"

namespace gantry::gateway {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

int Listen(uint16_t* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd, 128) != 0) {
    ::close(fd);
    return -1;
  }
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

bool SendAll(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    s.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// A keep-alive HTTP/1.1 backend, one thread per connection.
class Backend {
 public:
  Backend() {
    fd_ = Listen(&port_);
    thread_ = std::thread([this] { AcceptLoop(); });
  }
  ~Backend() {
    stop_ = true;
    Release();
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (int c : conns_) ::shutdown(c, SHUT_RDWR);
    for (auto& t : workers_) t.join();
  }
  uint16_t port() const { return port_; }
  int accepted() const { return accepted_.load(); }
  int requests() const { return requests_.load(); }
  json last_headers() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_headers_;
  }
  std::string last_body() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_body_;
  }
  // /gated sends its first chunk, then waits for Release().
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  void AcceptLoop() {
    for (;;) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) {
        if (stop_) return;
        continue;
      }
      accepted_++;
      std::lock_guard<std::mutex> lock(mu_);
      conns_.push_back(c);
      workers_.emplace_back([this, c] { Serve(c); });
    }
  }

  void Serve(int c) {
    std::string buf;
    char tmp[16384];
    for (;;) {
      size_t scanned = 0, end = 0;
      http::HeadScan scan;
      while ((scan = http::ScanHead(buf, &scanned, 65536, &end)) == http::HeadScan::kIncomplete) {
        ssize_t n = ::recv(c, tmp, sizeof(tmp), 0);
        if (n <= 0) {
          ::close(c);
          return;
        }
        buf.append(tmp, static_cast<size_t>(n));
      }
      if (scan != http::HeadScan::kComplete) break;
      std::string head = buf.substr(0, end);
      buf.erase(0, end);
      auto req = http::ParseRequestHead(head);
      if (!req.ok()) break;
      while (buf.size() < req->content_length) {
        ssize_t n = ::recv(c, tmp, sizeof(tmp), 0);
        if (n <= 0) break;
        buf.append(tmp, static_cast<size_t>(n));
      }
      std::string body = buf.substr(0, req->content_length);
      buf.erase(0, req->content_length);
      requests_++;
      json hdrs = json::object();
      for (const auto& h : req->headers) {
        std::string name(h.name);
        for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        hdrs[name] = std::string(h.value);
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_headers_ = hdrs;
        last_body_ = body;
      }
      if (!Respond(c, *req, body)) break;
    }
    ::close(c);
  }

  bool Respond(int c, const http::RequestHead& req, const std::string& body) {
    std::string path(req.path);
    if (path == "/gated") {
      if (!SendAll(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")) {
        return false;
      }
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return released_; });
      lock.unlock();
      return SendAll(c, "4\r\nlast\r\n0\r\n\r\n");
    }
    if (path == "/v1/chat/completions") {
      json j = json::parse(body, nullptr, false);
      bool stream = j.is_object() && j.value("stream", false);
      bool usage = stream && j.contains("stream_options") &&
                   j["stream_options"].value("include_usage", false);
      if (!stream) {
        std::string out =
            R"({"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}})";
        return SendAll(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                              std::to_string(out.size()) + "\r\n\r\n" + out);
      }
      std::string events;
      events +=
          "data: "
          "{\"object\":\"chat.completion.chunk\",\"choices\":[{\"delta\":{\"content\":\"a\"}}],"
          "\"usage\":null}\n\n";
      events +=
          "data: "
          "{\"object\":\"chat.completion.chunk\",\"choices\":[{\"delta\":{\"content\":\"b\"}}],"
          "\"usage\":null}\n\n";
      if (usage) {
        events +=
            "data: "
            "{\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":11,"
            "\"completion_tokens\":2,\"total_tokens\":13}}\n\n";
      }
      events += "data: [DONE]\n\n";
      std::string wire =
          "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: "
          "chunked\r\n\r\n";
      http::AppendChunk(events, &wire);
      wire += http::kLastChunk;
      return SendAll(c, wire);
    }
    std::string out = json{{"path", path}, {"method", std::string(req.method)}}.dump();
    return SendAll(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(out.size()) + "\r\n\r\n" + out);
  }

  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::atomic<int> requests_{0};
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  std::vector<int> conns_;
  std::vector<std::thread> workers_;
  json last_headers_;
  std::string last_body_;
};

// A raw client connection to the gateway.
class Client {
 public:
  explicit Client(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~Client() { ::close(fd_); }
  bool Send(std::string_view s) { return SendAll(fd_, s); }
  // Reads one response (Content-Length or chunked); "" on close.
  // *closed tells whether the server closed right after it.
  std::string ReadResponse(int* status, std::string* body, int timeout_ms = 10000) {
    size_t scanned = 0, end = 0;
    while (http::ScanHead(buf_, &scanned, 1 << 20, &end) != http::HeadScan::kComplete) {
      if (!Fill(timeout_ms)) return "";
    }
    std::string head = buf_.substr(0, end);
    buf_.erase(0, end);
    auto r = http::ParseResponseHead(head, "GET");
    if (!r.ok()) return "";
    *status = r->status;
    body->clear();
    if (r->framing == http::BodyFraming::kContentLength) {
      while (buf_.size() < r->content_length) {
        if (!Fill(timeout_ms)) return "";
      }
      *body = buf_.substr(0, r->content_length);
      buf_.erase(0, r->content_length);
    } else if (r->framing == http::BodyFraming::kChunked) {
      http::ChunkedDecoder d;
      for (;;) {
        size_t used = 0;
        if (!d.Feed(buf_, body, &used).ok()) return "";
        buf_.erase(0, used);
        if (d.done()) break;
        if (!Fill(timeout_ms)) return "";
      }
    }
    return head;
  }
  // Reads until `needle` appears in the raw stream.
  bool ReadUntil(std::string_view needle, int timeout_ms = 10000) {
    while (buf_.find(needle) == std::string::npos) {
      if (!Fill(timeout_ms)) return false;
    }
    return true;
  }
  // True when the server closed the connection (EOF) within the timeout.
  bool Closed(int timeout_ms = 5000) {
    while (Fill(timeout_ms)) {
    }
    return eof_;
  }
  bool connected() const { return connected_; }

 private:
  bool Fill(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return false;
    char tmp[16384];
    ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }
  int fd_;
  bool connected_ = false;
  bool eof_ = false;
  std::string buf_;
};

class GatewayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gantry-gw-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto ks = security::KeyStore::Open((dir_ / "state.db").string());
    ASSERT_TRUE(ks.ok()) << ks.status().ToString();
    auto user = (*ks)->Create("alice", "user", 0, std::time(nullptr));
    auto admin = (*ks)->Create("ops", "admin", 0, std::time(nullptr));
    ASSERT_TRUE(user.ok() && admin.ok());
    user_key_ = user->second;
    admin_key_ = admin->second;
    auto pair = security::GenerateEd25519();
    ASSERT_TRUE(pair.ok());
    std::ofstream((dir_ / "audit.key").string()) << pair->private_pem;
    audit_pub_ = pair->public_pem;
  }
  void TearDown() override {
    gw_.reset();
    fs::remove_all(dir_);
  }

  std::string Yaml(const std::string& extra = "") {
    return "listen: 127.0.0.1:0\nworkers: 2\n"
           "limits: {header_timeout: 300ms, idle_timeout: 5s, max_body_bytes: 1KiB}\n"
           "backends:\n  - {name: b, url: http://127.0.0.1:" +
           std::to_string(backend_.port()) +
           "}\n"
           "routes:\n"
           "  - {prefix: /v1/, protocol: openai, backend: b}\n"
           "  - {prefix: /v2/, protocol: kserve, backend: b}\n"
           "  - {path: /open, backend: b, auth: none}\n"
           "  - {prefix: /, name: rest, backend: b}\n"
           "state: state.db\n"
           "roles:\n"
           "  user:\n    - {action: model:invoke, resource: tiny-*}\n    - {action: route:invoke}\n"
           "  admin:\n    - {action: '*'}\n"
           "audit: {path: audit.jsonl, signing_key: audit.key, checkpoint_every: 10}\n" +
           extra;
  }

  void Start(const std::string& extra = "") {
    std::string path = (dir_ / "gateway.yaml").string();
    std::ofstream(path) << Yaml(extra);
    auto cfg = LoadGatewayConfig(path);
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    auto gw = Gateway::Create(std::move(*cfg));
    ASSERT_TRUE(gw.ok()) << gw.status().ToString();
    gw_ = std::move(*gw);
    ASSERT_TRUE(gw_->Start().ok());
  }

  http::Response Call(const std::string& method, const std::string& path, const std::string& key,
                      const std::string& body = "") {
    http::Request r;
    r.method = method;
    r.url = gw_->url() + path;
    if (!key.empty()) r.headers.push_back({"Authorization", "Bearer " + key});
    r.body = body;
    r.deadline = std::chrono::seconds(10);
    auto resp = http::Send(r);
    EXPECT_TRUE(resp.ok()) << resp.status().ToString();
    return resp.ok() ? *resp : http::Response{};
  }

  fs::path dir_;
  Backend backend_;
  std::unique_ptr<Gateway> gw_;
  std::string user_key_, admin_key_, audit_pub_;
};

TEST_F(GatewayTest, ProxiesWithCredentialsStrippedAndIdsAdded) {
  Start();
  http::Response r = Call("GET", "/hello?x=1", user_key_);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["path"], "/hello");
  json h = backend_.last_headers();
  EXPECT_FALSE(h.contains("authorization"));
  EXPECT_TRUE(h.contains("x-request-id"));
  EXPECT_EQ(h.value("x-forwarded-for", ""), "127.0.0.1");
  EXPECT_NE(r.FindHeader("x-request-id"), nullptr);
}

TEST_F(GatewayTest, RefusesMissingWrongAndForgedKeys) {
  Start();
  EXPECT_EQ(Call("GET", "/hello", "").status, 401);
  EXPECT_EQ(Call("GET", "/hello", "gk_0123456789abcdef_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
                .status,
            401);
  std::string tampered = user_key_;
  tampered.back() = tampered.back() == 'A' ? 'B' : 'A';
  EXPECT_EQ(Call("GET", "/hello", tampered).status, 401);
  EXPECT_EQ(Call("GET", "/hello", "not-a-key").status, 401);
  EXPECT_EQ(Call("GET", "/open", "").status, 200);
  EXPECT_EQ(Call("GET", "/nothing-here", user_key_).status, 200);  // "/" prefix route
  EXPECT_EQ(backend_.requests(), 2);
}

TEST_F(GatewayTest, RbacDeniesOtherModelsAndAdmin) {
  Start();
  std::string body = R"({"model":"big-1","messages":[{"role":"user","content":"hi"}]})";
  EXPECT_EQ(Call("POST", "/v1/chat/completions", user_key_, body).status, 403);
  // No model, or two of them, cannot be authorized: refused before RBAC.
  EXPECT_EQ(Call("POST", "/v1/chat/completions", user_key_, R"({"messages":[]})").status, 400);
  EXPECT_EQ(Call("POST", "/v1/chat/completions", user_key_,
                 R"({"model":"tiny-1","messages":[],"model":"big-1"})")
                .status,
            400);
  EXPECT_EQ(Call("GET", "/admin/keys", user_key_).status, 403);
  EXPECT_EQ(Call("POST", "/admin/keys", user_key_, R"({"name":"x","role":"admin"})").status, 403);
  EXPECT_EQ(backend_.requests(), 0);
}

TEST_F(GatewayTest, KeepAliveReusesOneUpstreamConnection) {
  Start();
  Client c(gw_->port());
  ASSERT_TRUE(c.connected());
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(
        c.Send("GET /k HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + user_key_ + "\r\n\r\n"));
    int status = 0;
    std::string body;
    ASSERT_FALSE(c.ReadResponse(&status, &body).empty()) << i;
    EXPECT_EQ(status, 200);
  }
  EXPECT_EQ(backend_.requests(), 30);
  EXPECT_EQ(backend_.accepted(), 1);
}

TEST_F(GatewayTest, SmugglingAttemptsAreRefusedAndNeverReachTheBackend) {
  Start();
  const std::string auth = "Authorization: Bearer " + user_key_ + "\r\n";
  const std::string attacks[] = {
      "POST /a HTTP/1.1\r\nHost: x\r\n" + auth +
          "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled "
          "HTTP/1.1\r\nHost: x\r\n\r\n",
      "POST /a HTTP/1.1\r\nHost: x\r\n" + auth +
          "Content-Length: 3\r\nContent-Length: 40\r\n\r\nabcGET /smuggled HTTP/1.1\r\nHost: "
          "x\r\n\r\n",
      "POST /a HTTP/1.1\r\nHost: x\r\n" + auth +
          "Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
      "POST /a HTTP/1.1\r\nHost: x\r\n" + auth + "X: y\r\n z\r\nContent-Length: 0\r\n\r\n",
      "POST /a HTTP/1.1\nHost: x\n" + auth + "Content-Length: 0\n\n",
      "POST /a HTTP/1.1\r\nHost: x\r\n" + auth +
          "Transfer-Encoding: chunked\r\n\r\nzz\r\nGET /smuggled HTTP/1.1\r\n\r\n",
  };
  for (const std::string& a : attacks) {
    Client c(gw_->port());
    ASSERT_TRUE(c.Send(a));
    int status = 0;
    std::string body;
    c.ReadResponse(&status, &body);
    EXPECT_EQ(status, 400) << a;
    EXPECT_TRUE(c.Closed()) << a;
  }
  EXPECT_EQ(backend_.requests(), 0);
}

TEST_F(GatewayTest, ChunkedRequestBodyIsForwardedWithContentLength) {
  Start();
  Client c(gw_->port());
  ASSERT_TRUE(c.Send("POST /up HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + user_key_ +
                     "\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"));
  int status = 0;
  std::string body;
  c.ReadResponse(&status, &body);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(backend_.last_body(), "abcde");
  EXPECT_EQ(backend_.last_headers().value("content-length", ""), "5");
  EXPECT_FALSE(backend_.last_headers().contains("transfer-encoding"));
}

TEST_F(GatewayTest, LimitsOnHeadAndBody) {
  Start();
  Client big(gw_->port());
  ASSERT_TRUE(
      big.Send("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n"));
  int status = 0;
  std::string body;
  big.ReadResponse(&status, &body);
  EXPECT_EQ(status, 431);
  http::Response r = Call("POST", "/x", user_key_, std::string(2048, 'b'));
  EXPECT_EQ(r.status, 413);
}

TEST_F(GatewayTest, SlowHeadGets408WhileOthersAreServed) {
  Start();
  Client slow(gw_->port());
  ASSERT_TRUE(slow.Send("GET / HTTP/1.1\r\nHost: x\r\n"));
  EXPECT_EQ(Call("GET", "/fast", user_key_).status, 200);
  int status = 0;
  std::string body;
  slow.ReadResponse(&status, &body);
  EXPECT_EQ(status, 408);
  EXPECT_TRUE(slow.Closed());
}

TEST_F(GatewayTest, StreamsChunkedResponsesWithoutBuffering) {
  Start();
  Client c(gw_->port());
  ASSERT_TRUE(
      c.Send("GET /gated HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + user_key_ + "\r\n\r\n"));
  // The first chunk must reach the client while the backend still holds the rest.
  EXPECT_TRUE(c.ReadUntil("first"));
  backend_.Release();
  EXPECT_TRUE(c.ReadUntil("last"));
  EXPECT_TRUE(c.ReadUntil("0\r\n\r\n"));
}

TEST_F(GatewayTest, CountsUsageAndHidesTheInjectedUsageChunk) {
  Start();
  std::string body =
      R"({"model":"tiny-1","stream":true,"messages":[{"role":"user","content":"hello there"}]})";
  http::Response r = Call("POST", "/v1/chat/completions", user_key_, body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("[DONE]"), std::string::npos);
  EXPECT_EQ(r.body.find("\"usage\":{"), std::string::npos) << r.body;
  EXPECT_NE(backend_.last_body().find("include_usage"), std::string::npos);
  // A client that asks for usage gets it.
  std::string asked =
      R"({"model":"tiny-1","stream":true,"stream_options":{"include_usage":true},"messages":[]})";
  r = Call("POST", "/v1/chat/completions", user_key_, asked);
  EXPECT_NE(r.body.find("\"total_tokens\":13"), std::string::npos);
  r = Call("POST", "/v1/chat/completions", user_key_, R"({"model":"tiny-1","messages":[]})");
  EXPECT_EQ(r.status, 200);
  // The worker counts usage after the last byte went to the client, so the third response can
  // arrive before its tokens are added: poll (bounded) instead of reading /metrics once.
  const std::string want = "gantry_gateway_tokens_total{kind=\"prompt\",model=\"tiny-1\"} 29";
  http::Response m;
  for (int i = 0; i < 200; ++i) {
    m = Call("GET", "/metrics", "");
    if (m.body.find(want) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(m.body.find(want), std::string::npos) << m.body;
  EXPECT_EQ(Call("POST", "/v1/chat/completions", user_key_, "{not json").status, 400);
}

TEST_F(GatewayTest, RateLimitAdmitsExactlyTheBurst) {
  Start("rate_limits:\n  - {scope: key, requests: 3, per: 1h}\n");
  int ok = 0, limited = 0;
  for (int i = 0; i < 6; ++i) {
    http::Response r = Call("GET", "/r", user_key_);
    if (r.status == 200) ok++;
    if (r.status == 429) {
      limited++;
      EXPECT_NE(r.FindHeader("Retry-After"), nullptr);
    }
  }
  EXPECT_EQ(ok, 3);
  EXPECT_EQ(limited, 3);
  // Another key has its own bucket.
  EXPECT_EQ(Call("GET", "/r", admin_key_).status, 200);
}

TEST_F(GatewayTest, AdminApiCreatesAndRevokesKeysLive) {
  Start();
  http::Response r = Call("POST", "/admin/keys", admin_key_, R"({"name":"bob","role":"user"})");
  ASSERT_EQ(r.status, 201) << r.body;
  json k = json::parse(r.body);
  std::string key = k["key"];
  EXPECT_EQ(Call("GET", "/x", key).status, 200);
  EXPECT_EQ(Call("POST", "/admin/keys", admin_key_, R"({"name":"eve","role":"root"})").status, 400);
  EXPECT_EQ(Call("DELETE", "/admin/keys/" + k["id"].get<std::string>(), admin_key_).status, 200);
  EXPECT_EQ(Call("GET", "/x", key).status, 401);
  http::Response list = Call("GET", "/admin/keys", admin_key_);
  EXPECT_EQ(json::parse(list.body)["keys"].size(), 3u);
  EXPECT_EQ(list.body.find(key), std::string::npos);
}

TEST_F(GatewayTest, AuditLogVerifiesAndRecordsDenials) {
  Start();
  EXPECT_EQ(Call("GET", "/a", user_key_).status, 200);
  EXPECT_EQ(Call("GET", "/a", "").status, 401);
  gw_->Stop(1000);
  gw_->Wait();
  auto report = security::VerifyAuditLog((dir_ / "audit.jsonl").string(), audit_pub_);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->ok) << report->reason;
  EXPECT_GE(report->records, 2u);
  std::ifstream in((dir_ / "audit.jsonl").string());
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(all.find("\"reason\":\"no_credentials\""), std::string::npos);
  EXPECT_EQ(all.find(user_key_), std::string::npos);  // never the key itself
}

TEST_F(GatewayTest, AuditLinesAreShippedToAzureMonitorByteForByte) {
  namespace mt = ::gantry::monitor::testing;
  std::string missing = mt::NodeMissing("@azure/monitor-ingestion");
  ASSERT_TRUE(missing.empty()) << missing;  // install-deps.sh runs npm ci: never skip
  auto logs = mt::ServeLogs((dir_ / "logs.jsonl").string());
  ASSERT_TRUE(logs->ok()) << logs->error();
  mt::EnvCredential();  // sets the token variable
  Start("azure_monitor:\n  logs:\n    endpoint: " + logs->url() +
        "\n    rule_id: dcr-1\n    stream: Custom-GantryAudit_CL\n    spool_dir: spool\n"
        "    flush_interval: 10ms\n    credential: {type: environment_token, token_env: " +
        std::string(mt::kTokenEnv) + "}\n");
  EXPECT_EQ(Call("GET", "/a", user_key_).status, 200);
  EXPECT_EQ(Call("GET", "/a", "").status, 401);
  gw_->Stop(1000);
  gw_->Wait();  // closes the audit log, then flushes the shipper
  std::ifstream in((dir_ / "audit.jsonl").string());
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string shipped;
  for (const Json& r : mt::OfOp(mt::ReadRecords((dir_ / "logs.jsonl").string()), "upload")) {
    for (const auto& row : r["body"]) {
      EXPECT_EQ(row["Source"], "gateway");
      shipped += row["Line"].get<std::string>() + "\n";
    }
  }
  EXPECT_EQ(shipped, all) << "every line, records and signed checkpoints, as written";
  EXPECT_NE(shipped.find("\"sig\":\""), std::string::npos);
}

TEST_F(GatewayTest, ReloadAppliesNewRulesAndRefusesRestartOnlyChanges) {
  Start();
  EXPECT_EQ(Call("GET", "/r", user_key_).status, 200);
  std::string path = (dir_ / "gateway.yaml").string();
  std::ofstream(path) << Yaml("rate_limits:\n  - {scope: key, requests: 1, per: 1h}\n");
  auto cfg = LoadGatewayConfig(path);
  ASSERT_TRUE(cfg.ok());
  ASSERT_TRUE(gw_->Reload(std::move(*cfg)).ok());
  EXPECT_EQ(Call("GET", "/r", user_key_).status, 200);
  EXPECT_EQ(Call("GET", "/r", user_key_).status, 429);
  // A different worker count needs a restart.
  std::string y = Yaml();
  y.replace(y.find("workers: 2"), 10, "workers: 3");
  std::ofstream(path) << y;
  cfg = LoadGatewayConfig(path);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(gw_->Reload(std::move(*cfg)).code(), StatusCode::kFailedPrecondition);
}

TEST_F(GatewayTest, UpstreamDownIs502AndNotFoundRouteIs404) {
  uint16_t dead = 0;
  int fd = Listen(&dead);
  ::close(fd);  // nothing listens there now
  std::string path = (dir_ / "gateway.yaml").string();
  std::ofstream(path)
      << "listen: 127.0.0.1:0\nworkers: 1\nstate: state.db\n"
         "backends: [{name: d, url: 'http://127.0.0.1:" +
             std::to_string(dead) +
             "'}]\nroutes: [{prefix: /v2/, protocol: kserve, backend: d, auth: none}]\n";
  auto cfg = LoadGatewayConfig(path);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  auto gw = Gateway::Create(std::move(*cfg));
  ASSERT_TRUE(gw.ok());
  gw_ = std::move(*gw);
  ASSERT_TRUE(gw_->Start().ok());
  EXPECT_EQ(Call("POST", "/v2/models/m/infer", "", "{}").status, 502);
  http::Response nf = Call("GET", "/nope", "");
  EXPECT_EQ(nf.status, 404);
  EXPECT_NE(nf.body.find("\"code\":\"not_found\""), std::string::npos);
}

TEST_F(GatewayTest, TerminatesTls) {
  std::string cmd =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 "
      "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout " +
      (dir_ / "tls.key").string() + " -out " + (dir_ / "tls.crt").string() + " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "openssl (Debian package openssl) is needed";
  Start("tls: {cert: tls.crt, key: tls.key}\n");
  EXPECT_EQ(gw_->url().substr(0, 8), "https://");

  namespace asio = boost::asio;
  asio::io_context io;
  asio::ssl::context ctx(asio::ssl::context::tls_client);
  ctx.load_verify_file((dir_ / "tls.crt").string());
  ctx.set_verify_mode(asio::ssl::verify_peer);
  asio::ssl::stream<asio::ip::tcp::socket> s(io, ctx);
  s.lowest_layer().connect(
      asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), gw_->port()));
  s.handshake(asio::ssl::stream_base::client);
  std::string req = "GET /tls HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer " +
                    user_key_ + "\r\n\r\n";
  asio::write(s, asio::buffer(req));
  std::string resp;
  boost::system::error_code ec;
  char buf[4096];
  for (;;) {
    size_t n = s.read_some(asio::buffer(buf), ec);
    resp.append(buf, n);
    if (ec) break;
  }
  EXPECT_EQ(resp.substr(0, 15), "HTTP/1.1 200 OK") << resp;
  EXPECT_NE(resp.find("\"path\":\"/tls\""), std::string::npos);
  EXPECT_EQ(backend_.last_headers().value("x-forwarded-proto", ""), "https");

  // A plain-HTTP client on the TLS port fails the handshake and is closed.
  Client plain(gw_->port());
  ASSERT_TRUE(plain.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(plain.Closed());
}

TEST_F(GatewayTest, PathsThatCouldBeReadDifferentlyAreRefused) {
  Start();
  // Routing, access control and the backend must agree on the path.
  for (const char* path :
       {"/open/../admin/keys", "/v2/models/big-1//infer", "/open/%2e%2e/x", "//admin/keys"}) {
    Client c(gw_->port());
    ASSERT_TRUE(c.Send(std::string("GET ") + path + " HTTP/1.1\r\nHost: x\r\n\r\n"));
    int status = 0;
    std::string body;
    c.ReadResponse(&status, &body);
    EXPECT_EQ(status, 400) << path;
  }
  // KServe paths the gateway cannot read cannot be authorized: 404, not forwarded.
  for (const char* path : {"/v2/models/big%2D1/infer", "/v2/models/big-1/infer/",
                           "/v2/models/big-1/versions/1/infer/x", "/v2/other"}) {
    EXPECT_EQ(Call("POST", path, user_key_, "{}").status, 404) << path;
  }
  EXPECT_EQ(Call("POST", "/v2/models/big-1/infer", user_key_, "{}").status, 403);
  EXPECT_EQ(Call("POST", "/v2/models/tiny-1/infer", user_key_, "{}").status, 200);
  EXPECT_EQ(Call("GET", "/v2/health/ready", user_key_).status, 200);
  // OpenAI routes: listing needs a credential only; anything else names a model.
  EXPECT_EQ(Call("GET", "/v1/models", user_key_).status, 200);
  EXPECT_EQ(Call("GET", "/v1/models/big-1", user_key_).status, 403);
  EXPECT_EQ(Call("DELETE", "/v1/models/tiny-1", user_key_).status, 405);
  EXPECT_EQ(backend_.requests(), 3);
}

TEST_F(GatewayTest, UnauthenticatedBodiesAreNotRead) {
  Start();
  Client c(gw_->port());
  // Announces 1000 bytes but sends none: the 401 must come without waiting.
  ASSERT_TRUE(
      c.Send("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n"
             "Expect: 100-continue\r\n\r\n"));
  int status = 0;
  std::string body;
  std::string head = c.ReadResponse(&status, &body);
  EXPECT_EQ(status, 401);
  EXPECT_EQ(head.find("100 Continue"), std::string::npos);
  EXPECT_TRUE(c.Closed());
}

TEST_F(GatewayTest, AdminApiBadTypesAre400AndKeepTheConnection) {
  Start();
  Client c(gw_->port());
  std::string body = R"({"name":1,"role":"user"})";
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(c.Send("POST /admin/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                       admin_key_ + "\r\nContent-Length: " + std::to_string(body.size()) +
                       "\r\n\r\n" + body));
    int status = 0;
    std::string out;
    ASSERT_FALSE(c.ReadResponse(&status, &out).empty());
    EXPECT_EQ(status, 400) << out;
  }
}

TEST_F(GatewayTest, HeadKeepsTheBackendsContentLength) {
  Start();
  Client c(gw_->port());
  ASSERT_TRUE(
      c.Send("HEAD /h HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + user_key_ + "\r\n\r\n"));
  ASSERT_TRUE(c.ReadUntil("\r\n\r\n"));
  // The echo backend answers {"path":"/h","method":"HEAD"}: 33 bytes, not sent.
  ASSERT_TRUE(
      c.Send("GET /h HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + user_key_ + "\r\n\r\n"));
  EXPECT_TRUE(c.ReadUntil("\"method\":\"GET\""));
}

TEST_F(GatewayTest, IdleConnectionSurvivesReload) {
  Start();
  Client idle(gw_->port());
  ASSERT_TRUE(idle.connected());
  for (int i = 0; i < 3; ++i) {
    std::string path = (dir_ / "gateway.yaml").string();
    std::ofstream(path) << Yaml(
        "rate_limits:\n  - {scope: key, requests: " + std::to_string(100 + i) + ", per: 1h}\n");
    auto cfg = LoadGatewayConfig(path);
    ASSERT_TRUE(cfg.ok());
    ASSERT_TRUE(gw_->Reload(std::move(*cfg)).ok());
    // New connections make each worker drop its reference to the old config.
    EXPECT_EQ(Call("GET", "/x", user_key_).status, 200);
    EXPECT_EQ(Call("GET", "/y", user_key_).status, 200);
  }
  ASSERT_TRUE(idle.Send("GET /late HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + user_key_ +
                        "\r\n\r\n"));
  int status = 0;
  std::string body;
  idle.ReadResponse(&status, &body);
  EXPECT_EQ(status, 200);
}

}  // namespace
}  // namespace gantry::gateway
