// Active health checks against tiny HTTP servers on 127.0.0.1.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pool.h"

namespace gantry::gateway {
namespace {

using std::chrono::milliseconds;

// Waits (generously) for an eventual state.
bool WaitFor(const std::function<bool()>& pred, milliseconds limit = milliseconds(15'000)) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return pred();
}

// A listening socket on 127.0.0.1 answering each connection per `mode`.
class TestServer {
 public:
  enum Mode { kOk, k503, kStall };

  TestServer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd_, 64) != 0) {
      ADD_FAILURE() << "cannot listen on 127.0.0.1";
      return;
    }
    socklen_t len = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~TestServer() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (int fd : stalled_) close(fd);
    if (fd_ >= 0) close(fd_);
  }

  uint16_t port() const { return port_; }
  // One request of the test's own, answered like the probes (and counted in
  // `hits`). The server accepts in order, so once it is answered every
  // connection made before it has been counted. False when unanswered in 15 s.
  bool RoundTrip() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port_);
    bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    const std::string req = "GET /test HTTP/1.1\r\nHost: t\r\n\r\n";
    ok = ok && write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size());
    std::string resp;
    char buf[256];
    while (ok) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 15'000) <= 0) {
        ok = false;
        break;
      }
      ssize_t n = read(fd, buf, sizeof(buf));
      if (n <= 0) break;  // closed after the answer
      resp.append(buf, static_cast<size_t>(n));
    }
    close(fd);
    return ok && resp.rfind("HTTP/1.1 ", 0) == 0;
  }
  std::atomic<int> mode{kOk};
  std::atomic<int> hits{0};
  std::string last_request() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_request_;
  }

 private:
  void Run() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::string req;
      char buf[1024];
      while (req.find("\r\n\r\n") == std::string::npos) {
        pollfd q{c, POLLIN, 0};
        if (poll(&q, 1, 2000) <= 0) break;
        ssize_t n = read(c, buf, sizeof(buf));
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_request_ = req;
      }
      ++hits;
      int m = mode.load();
      if (m == kStall) {
        stalled_.push_back(c);  // accepted, never answered
        continue;
      }
      std::string resp = m == kOk
                             ? "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                             : "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                               "Connection: close\r\n\r\n";
      ssize_t ignored = write(c, resp.data(), resp.size());
      (void)ignored;
      close(c);
    }
  }

  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::string last_request_;
  std::vector<int> stalled_;  // server thread only, then the destructor
};

// A port on 127.0.0.1 with nothing listening.
uint16_t ClosedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

BackendConfig Backend(const std::string& name, const std::string& host, uint16_t port) {
  BackendConfig b;
  b.name = name;
  b.host = host;
  b.port = port;
  b.host_header = "backend.test:" + std::to_string(port);
  return b;
}

GatewayConfig OnePool(std::vector<BackendConfig> backends, milliseconds interval,
                      milliseconds timeout, uint32_t healthy, uint32_t unhealthy) {
  GatewayConfig cfg;
  cfg.backends = std::move(backends);
  PoolConfig p;
  p.name = "main";
  TierConfig t;
  for (size_t i = 0; i < cfg.backends.size(); ++i) t.backends.push_back(i);
  p.tiers = {t};
  p.health.enabled = true;
  p.health.path = "/healthz";
  p.health.interval = interval;
  p.health.timeout = timeout;
  p.health.healthy_threshold = healthy;
  p.health.unhealthy_threshold = unhealthy;
  p.outlier.max_ejection_percent = 100;
  cfg.pools = {p};
  return cfg;
}

TEST(HealthCheck, UnhealthyAfterThresholdThenHealthyAgain) {
  TestServer srv;
  Balancer bal;
  GatewayConfig cfg = OnePool({Backend("llm", "localhost", srv.port())}, milliseconds(50),
                              milliseconds(1000), 2, 3);
  bal.Configure(cfg);
  ASSERT_TRUE(WaitFor([&] { return srv.hits >= 2; }));
  std::string req = srv.last_request();
  EXPECT_EQ(req.rfind("GET /healthz HTTP/1.1\r\n", 0), 0u) << req;
  EXPECT_NE(req.find("Host: backend.test:" + std::to_string(srv.port()) + "\r\n"),
            std::string::npos)
      << req;
  EXPECT_NE(req.find("Connection: close\r\n"), std::string::npos) << req;
  EXPECT_TRUE(bal.Backend("llm")->healthy);

  srv.mode = TestServer::k503;
  ASSERT_TRUE(WaitFor([&] { return !bal.Backend("llm")->healthy; }));
  EXPECT_EQ(bal.Backend("llm")->last_health_error, "status 503");
  Pick p = bal.Choose(Target{}, {});
  EXPECT_EQ(p.backend, kNoBackend);
  EXPECT_EQ(p.shed_reason, "no_backend_available");

  srv.mode = TestServer::kOk;
  ASSERT_TRUE(WaitFor([&] { return bal.Backend("llm")->healthy; }));
  EXPECT_EQ(bal.Choose(Target{}, {}).backend, 0u);
}

TEST(HealthCheck, RefusedConnectionIsAFailure) {
  Balancer bal;
  bal.Configure(OnePool({Backend("gone", "127.0.0.1", ClosedPort())}, milliseconds(50),
                        milliseconds(1000), 1, 2));
  ASSERT_TRUE(WaitFor([&] { return !bal.Backend("gone")->healthy; }));
  EXPECT_EQ(bal.Backend("gone")->last_health_error, "connect: Connection refused");
}

TEST(HealthCheck, StalledServerTimesOut) {
  TestServer srv;
  srv.mode = TestServer::kStall;
  Balancer bal;
  bal.Configure(OnePool({Backend("slow", "127.0.0.1", srv.port())}, milliseconds(50),
                        milliseconds(200), 1, 1));
  ASSERT_TRUE(WaitFor([&] { return !bal.Backend("slow")->healthy; }));
  EXPECT_EQ(bal.Backend("slow")->last_health_error, "timed out after 200 ms");
  // Destroying the Balancer with a probe hanging must return promptly.
}

TEST(HealthCheck, PassingCheckEndsEjection) {
  TestServer srv;
  srv.mode = TestServer::k503;
  Balancer bal;
  // A high unhealthy threshold: failing checks keep it "healthy" but cannot
  // un-eject it.
  bal.Configure(OnePool({Backend("llm", "127.0.0.1", srv.port())}, milliseconds(50),
                        milliseconds(1000), 1, 1000));
  ASSERT_TRUE(WaitFor([&] { return srv.hits >= 1; }));
  Pick p;
  p.backend = 0;
  p.pool = 0;
  for (int i = 0; i < 5; ++i) bal.Report(p, Outcome::kGatewayError);
  auto st = bal.Backend("llm");
  ASSERT_TRUE(st->ejected);
  EXPECT_GT(st->ejected_for_ms, 20'000);
  int before = srv.hits;
  ASSERT_TRUE(WaitFor([&] { return srv.hits >= before + 2; }));
  EXPECT_TRUE(bal.Backend("llm")->ejected);  // failing checks leave it ejected

  srv.mode = TestServer::kOk;
  ASSERT_TRUE(WaitFor([&] { return !bal.Backend("llm")->ejected; }));
  EXPECT_EQ(bal.Choose(Target{}, {}).backend, 0u);
}

TEST(HealthCheck, ConfigureChangesPathsAndStopsChecks) {
  TestServer a, b;
  Balancer bal;
  GatewayConfig cfg =
      OnePool({Backend("a", "127.0.0.1", a.port())}, milliseconds(50), milliseconds(1000), 1, 1);
  bal.Configure(cfg);
  ASSERT_TRUE(WaitFor([&] { return a.hits >= 1; }));

  // New path, a new backend.
  cfg.backends.push_back(Backend("b", "127.0.0.1", b.port()));
  cfg.pools[0].tiers[0].backends.push_back(1);
  cfg.pools[0].health.path = "/ready";
  bal.Configure(cfg);
  ASSERT_TRUE(WaitFor([&] { return a.last_request().rfind("GET /ready ", 0) == 0; }))
      << a.last_request();
  ASSERT_TRUE(WaitFor([&] { return b.hits >= 1; }));
  EXPECT_EQ(b.last_request().rfind("GET /ready ", 0), 0u);

  // b fails; then health checks are switched off: b is trusted again and
  // nothing probes any more.
  b.mode = TestServer::k503;
  ASSERT_TRUE(WaitFor([&] { return !bal.Backend("b")->healthy; }));
  cfg.pools[0].health.enabled = false;
  bal.Configure(cfg);  // joins the checker's thread: no probe starts after it
  EXPECT_TRUE(bal.Backend("b")->healthy);
  // A probe connected before the stop may still wait in a server's accept
  // queue; a connection of ours behind it, once answered, shows that it has
  // been counted.
  ASSERT_TRUE(a.RoundTrip());
  ASSERT_TRUE(b.RoundTrip());
  int ha = a.hits, hb = b.hits;
  // A checker that kept running would probe a and b as often as this one
  // (same interval) probes c: several of its rounds go by, and then nothing
  // but our own second round trip may have reached a and b.
  TestServer c;
  Balancer ref;
  ref.Configure(
      OnePool({Backend("c", "127.0.0.1", c.port())}, milliseconds(50), milliseconds(1000), 1, 1));
  ASSERT_TRUE(WaitFor([&] { return c.hits >= 5; }));
  ASSERT_TRUE(a.RoundTrip());
  ASSERT_TRUE(b.RoundTrip());
  EXPECT_EQ(a.hits, ha + 1);
  EXPECT_EQ(b.hits, hb + 1);
  ha = a.hits;
  hb = b.hits;

  // And on again.
  cfg.pools[0].health.enabled = true;
  bal.Configure(cfg);
  ASSERT_TRUE(WaitFor([&] { return a.hits > ha && b.hits > hb; }));
}

}  // namespace
}  // namespace gantry::gateway
