// UpstreamPool on real loopback sockets: LIFO reuse and max_idle, the idle
// peek rule, which requests are sent again after a stale pooled connection
// fails, and the outcomes that feed the Balancer's outlier detection.
// clang-format off
#include <utility>  // before asio: awaitable.hpp in Boost 1.74 uses std::exchange
// clang-format on

#include "upstream.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gantry/core/clock.h"

namespace gantry::gateway::internal {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using std::chrono::milliseconds;

int ListenLoopback(uint16_t* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd, 64) != 0) {
    ::close(fd);
    return -1;
  }
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

// A port nothing listens on (bound once, then closed).
uint16_t ClosedPort() {
  uint16_t port = 0;
  ::close(ListenLoopback(&port));
  return port;
}

// Waits (up to 10 s, far beyond loopback delivery) until `s` is readable:
// the peer's close or bytes have arrived, so a peek will see them.
bool WaitReadable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 10'000) == 1;
}
bool WaitReadable(tcp::socket& s) { return WaitReadable(s.native_handle()); }

uint16_t LocalPort(const tcp::socket& s) { return s.local_endpoint().port(); }

// Pairs of connected sockets: the client side as an Asio socket (what the
// pool holds), the server side as a plain descriptor the test controls.
class Peers {
 public:
  explicit Peers(asio::io_context& io) : io_(io) { fd_ = ListenLoopback(&port_); }
  ~Peers() {
    for (int fd : accepted_) ::close(fd);
    ::close(fd_);
  }
  // A connected client socket; *server is its peer.
  tcp::socket Connect(int* server) {
    tcp::socket s(io_);
    s.connect(tcp::endpoint(asio::ip::address_v4::loopback(), port_));
    *server = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    accepted_.push_back(*server);
    return s;
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  asio::io_context& io_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::vector<int> accepted_;
};

// What the backend does with one request.
enum class Action {
  kAnswer,  // 200, keep-alive, empty body
  kAnswer503,
  kInterim,  // 100 Continue, then 200
  kDrop,     // close the connection without answering (a stale pooled connection)
  kSilent,   // never answer (held until the backend stops)
  kBareLf,   // a head with a bare LF
};

// A backend on loopback that applies `script(connection, request)` to each
// request (both counted from 0), one thread per connection.
class ScriptedBackend {
 public:
  explicit ScriptedBackend(std::function<Action(int conn, int req)> script)
      : script_(std::move(script)) {
    fd_ = ListenLoopback(&port_);
    thread_ = std::thread([this] { AcceptLoop(); });
  }
  ~ScriptedBackend() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (int c : conns_) ::shutdown(c, SHUT_RDWR);
    for (auto& t : workers_) t.join();
    for (int c : conns_) ::close(c);
    ::close(fd_);
  }
  uint16_t port() const { return port_; }
  int connections() const { return connections_.load(); }
  int requests() const { return requests_.load(); }
  BackendConfig config(std::string name = "b") const {
    BackendConfig b;
    b.name = std::move(name);
    b.host = "127.0.0.1";
    b.port = port_;
    b.host_header = "127.0.0.1:" + std::to_string(port_);
    return b;
  }

 private:
  void AcceptLoop() {
    for (;;) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      if (stop_) {
        ::close(c);
        return;
      }
      int index = connections_++;
      std::lock_guard<std::mutex> lock(mu_);
      conns_.push_back(c);
      workers_.emplace_back([this, c, index] { Serve(c, index); });
    }
  }

  static bool SendAll(int fd, std::string_view s) {
    while (!s.empty()) {
      ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      s.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  void Serve(int c, int conn) {
    std::string buf;
    char tmp[4096];
    for (int req = 0;; ++req) {
      size_t scanned = 0, end = 0;
      http::HeadScan scan;
      while ((scan = http::ScanHead(buf, &scanned, 65536, &end)) == http::HeadScan::kIncomplete) {
        ssize_t n = ::recv(c, tmp, sizeof(tmp), 0);
        if (n <= 0) return;
        buf.append(tmp, static_cast<size_t>(n));
      }
      if (scan != http::HeadScan::kComplete) return;
      std::string head = buf.substr(0, end);
      buf.erase(0, end);
      Result<http::RequestHead> parsed = http::ParseRequestHead(head);
      if (!parsed.ok()) return;
      while (buf.size() < parsed->content_length) {
        ssize_t n = ::recv(c, tmp, sizeof(tmp), 0);
        if (n <= 0) return;
        buf.append(tmp, static_cast<size_t>(n));
      }
      buf.erase(0, parsed->content_length);
      requests_++;
      switch (script_(conn, req)) {
        case Action::kAnswer:
          if (!SendAll(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")) return;
          break;
        case Action::kAnswer503:
          if (!SendAll(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")) {
            return;
          }
          break;
        case Action::kInterim:
          if (!SendAll(
                  c, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")) {
            return;
          }
          break;
        case Action::kDrop:
          ::shutdown(c, SHUT_RDWR);
          return;
        case Action::kSilent:
          while (::recv(c, tmp, sizeof(tmp), 0) > 0) {
          }
          return;
        case Action::kBareLf:
          SendAll(c, "HTTP/1.1 200 OK\nContent-Length: 0\n\n");
          return;
      }
    }
  }

  std::function<Action(int, int)> script_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> requests_{0};
  std::thread thread_;
  std::mutex mu_;
  std::vector<int> conns_;
  std::vector<std::thread> workers_;
};

asio::awaitable<void> SendThenClose(UpstreamPool& pool, UpstreamExchange& x, Deadline& dl) {
  co_await pool.Send(x, dl);
  dl.Close();
}

// One exchange against `backend` through `pool`, run on `io` to its end with
// a deadline watchdog of its own, as a client connection would have.
class Exchange {
 public:
  Exchange(asio::io_context& io, const BackendConfig& backend, std::string_view method,
           milliseconds timeout = milliseconds(10'000))
      : io_(io), x(io.get_executor()) {
    head_ = std::string(method) + " / HTTP/1.1\r\nHost: " + backend.host_header +
            "\r\nContent-Length: 2\r\n\r\n";
    x.backend = &backend;
    x.method = method_ = std::string(method);
    x.idempotent = IdempotentMethod(method_);
    x.head = head_;
    x.body = "{}";
    x.connect_timeout = milliseconds(2'000);
    x.timeout = timeout;
    x.in = &in_;
    x.head_text = &head_text_;
    x.response = &response_;
  }
  void Run(UpstreamPool& pool) {
    tcp::socket client(io_);  // the deadline's client side: none in these tests
    Deadline dl(client);
    asio::co_spawn(io_, dl.Run(), asio::detached);
    asio::co_spawn(io_, SendThenClose(pool, x, dl), asio::detached);
    io_.restart();
    io_.run();
  }
  int status() const { return response_.status; }

 private:
  asio::io_context& io_;
  std::string method_, head_, head_text_;
  Buffer in_{16 << 10};
  http::ResponseHead response_;

 public:
  UpstreamExchange x;
};

TEST(UpstreamRules, PeekAfterOneTickOrAfter200msForRepeatableRequests) {
  EXPECT_FALSE(NeedsPeek(milliseconds(0), false));
  EXPECT_TRUE(NeedsPeek(kPeekAfterOnce, false));
  EXPECT_TRUE(NeedsPeek(milliseconds(150), false));
  EXPECT_FALSE(NeedsPeek(milliseconds(0), true));
  EXPECT_FALSE(NeedsPeek(milliseconds(199), true));
  EXPECT_TRUE(NeedsPeek(kPeekAfter, true));
  EXPECT_EQ(kPeekAfter, milliseconds(200));
  EXPECT_EQ(kPeekAfterOnce, milliseconds(1));
}

TEST(UpstreamRules, OnlyIdempotentRequestsOnAReusedSilentConnectionAreSentAgain) {
  for (std::string_view m : {"GET", "HEAD", "OPTIONS", "PUT", "DELETE"}) {
    EXPECT_TRUE(IdempotentMethod(m)) << m;
  }
  for (std::string_view m : {"POST", "PATCH", "CONNECT", "get"}) {
    EXPECT_FALSE(IdempotentMethod(m)) << m;
  }
  EXPECT_TRUE(MayResend(/*reused=*/true, /*got_bytes=*/false, /*timed_out=*/false, true));
  EXPECT_FALSE(MayResend(true, false, false, /*idempotent=*/false));
  EXPECT_FALSE(MayResend(/*reused=*/false, false, false, true));
  EXPECT_FALSE(MayResend(true, /*got_bytes=*/true, false, true));
  EXPECT_FALSE(MayResend(true, false, /*timed_out=*/true, true));
}

TEST(UpstreamRules, StatusOutcomesForOutlierDetection) {
  EXPECT_EQ(OutcomeOfStatus(200), Outcome::kOk);
  EXPECT_EQ(OutcomeOfStatus(404), Outcome::kOk);
  EXPECT_EQ(OutcomeOfStatus(499), Outcome::kOk);
  EXPECT_EQ(OutcomeOfStatus(500), Outcome::k5xx);
  EXPECT_EQ(OutcomeOfStatus(501), Outcome::k5xx);
  EXPECT_EQ(OutcomeOfStatus(502), Outcome::kGatewayError);
  EXPECT_EQ(OutcomeOfStatus(503), Outcome::kGatewayError);
  EXPECT_EQ(OutcomeOfStatus(504), Outcome::kGatewayError);
  EXPECT_EQ(OutcomeOfStatus(505), Outcome::k5xx);
}

TEST(UpstreamPoolTest, TakesTheLastPooledFirstAndKeepsAtMostMaxIdle) {
  asio::io_context io;
  Peers peers(io);
  UpstreamPool pool;
  const std::string addr = peers.address();
  Clk::time_point t0 = CoarseNow();
  int sa, sb, sc;
  tcp::socket a = peers.Connect(&sa), b = peers.Connect(&sb), c = peers.Connect(&sc);
  uint16_t pa = LocalPort(a), pb = LocalPort(b);
  EXPECT_TRUE(pool.Put(addr, std::move(a), t0, 2));
  EXPECT_TRUE(pool.Put(addr, std::move(b), t0, 2));
  EXPECT_FALSE(pool.Put(addr, std::move(c), t0, 2));  // over max_idle: closed
  EXPECT_EQ(pool.idle(addr), 2u);
  // The refused one was closed: its peer sees EOF.
  char byte;
  ASSERT_TRUE(WaitReadable(sc));
  EXPECT_EQ(::recv(sc, &byte, 1, MSG_DONTWAIT), 0);

  std::optional<tcp::socket> first = pool.Take(addr, true, t0);
  ASSERT_TRUE(first);
  EXPECT_EQ(LocalPort(*first), pb);
  std::optional<tcp::socket> second = pool.Take(addr, true, t0);
  ASSERT_TRUE(second);
  EXPECT_EQ(LocalPort(*second), pa);
  EXPECT_FALSE(pool.Take(addr, true, t0));
  EXPECT_FALSE(pool.Take("127.0.0.1:1", true, t0));  // another backend has none
}

TEST(UpstreamPoolTest, APostPeeksAConnectionIdleForATickAndDropsItWhenClosed) {
  asio::io_context io;
  Peers peers(io);
  UpstreamPool pool;
  const std::string addr = peers.address();
  int server;
  tcp::socket s = peers.Connect(&server);
  uint16_t port = LocalPort(s);
  ::close(server);  // the backend closed it while it was idle
  ASSERT_TRUE(WaitReadable(s));
  Clk::time_point t0 = CoarseNow();
  pool.Put(addr, std::move(s), t0, 8);

  // Idle for less than a tick: taken as it is, without the syscall (under
  // load the top of the stack was idle for microseconds).
  std::optional<tcp::socket> fresh = pool.Take(addr, false, t0);
  ASSERT_TRUE(fresh);
  EXPECT_EQ(LocalPort(*fresh), port);

  // Idle for a tick: peeked, found closed, dropped.
  pool.Put(addr, std::move(*fresh), t0, 8);
  EXPECT_FALSE(pool.Take(addr, false, t0 + kPeekAfterOnce));
  EXPECT_EQ(pool.idle(addr), 0u);
}

TEST(UpstreamPoolTest, ARepeatableRequestTrustsAConnectionIdleUnder200ms) {
  asio::io_context io;
  Peers peers(io);
  UpstreamPool pool;
  const std::string addr = peers.address();
  int server;
  tcp::socket s = peers.Connect(&server);
  ::close(server);
  ASSERT_TRUE(WaitReadable(s));
  Clk::time_point t0 = CoarseNow();
  pool.Put(addr, std::move(s), t0, 8);

  std::optional<tcp::socket> got = pool.Take(addr, true, t0 + milliseconds(199));
  ASSERT_TRUE(got);  // not peeked: if it is stale, MayResend covers it
  pool.Put(addr, std::move(*got), t0, 8);
  EXPECT_FALSE(pool.Take(addr, true, t0 + kPeekAfter));
  EXPECT_EQ(pool.idle(addr), 0u);
}

TEST(UpstreamPoolTest, PeekKeepsLiveConnectionsAndDropsOnesWithUnaskedBytes) {
  asio::io_context io;
  Peers peers(io);
  UpstreamPool pool;
  const std::string addr = peers.address();
  int s1, s2;
  tcp::socket live = peers.Connect(&s1);
  tcp::socket chatty = peers.Connect(&s2);
  uint16_t live_port = LocalPort(live);
  ASSERT_EQ(::send(s2, "x", 1, 0), 1);  // bytes nobody asked for
  ASSERT_TRUE(WaitReadable(chatty));
  Clk::time_point t0 = CoarseNow();
  pool.Put(addr, std::move(live), t0, 8);
  pool.Put(addr, std::move(chatty), t0, 8);

  // Long idle: both peeked, the readable one (on top) dropped, the silent one kept.
  std::optional<tcp::socket> got = pool.Take(addr, false, t0 + std::chrono::seconds(10));
  ASSERT_TRUE(got);
  EXPECT_EQ(LocalPort(*got), live_port);
  EXPECT_EQ(pool.idle(addr), 0u);
}

TEST(UpstreamExchangeTest, ReusesThePooledConnectionAndSkipsInterimResponses) {
  ScriptedBackend backend(
      [](int, int req) { return req == 0 ? Action::kAnswer : Action::kInterim; });
  BackendConfig cfg = backend.config();
  asio::io_context io;
  UpstreamPool pool;

  Exchange one(io, cfg, "POST");
  one.Run(pool);
  ASSERT_EQ(one.x.error, UpstreamError::kNone);
  EXPECT_EQ(one.status(), 200);
  EXPECT_FALSE(one.x.reused);
  EXPECT_EQ(OutcomeOf(one.x), Outcome::kOk);
  EXPECT_TRUE(pool.Release(one.x, true, CoarseNow()));
  EXPECT_EQ(pool.idle(cfg.host_header), 1u);

  Exchange two(io, cfg, "POST");
  two.Run(pool);
  ASSERT_EQ(two.x.error, UpstreamError::kNone);
  EXPECT_EQ(two.status(), 200);  // the 100 before it was read past
  EXPECT_TRUE(two.x.reused);
  EXPECT_EQ(backend.connections(), 1);
  EXPECT_EQ(backend.requests(), 2);
  // Not reusable (e.g. a body cut short): closed, not pooled.
  EXPECT_FALSE(pool.Release(two.x, false, CoarseNow()));
  EXPECT_EQ(pool.idle(cfg.host_header), 0u);
}

TEST(UpstreamExchangeTest, AStaleReusedConnectionIsSentAgainOnAFreshOneOnlyWhenIdempotent) {
  // Every connection answers its first request and drops the second unanswered,
  // as a backend does that closed a keep-alive connection as the request came.
  ScriptedBackend backend([](int, int req) { return req == 0 ? Action::kAnswer : Action::kDrop; });
  BackendConfig cfg = backend.config();
  asio::io_context io;
  UpstreamPool pool;

  Exchange warm(io, cfg, "GET");
  warm.Run(pool);
  ASSERT_EQ(warm.x.error, UpstreamError::kNone);
  pool.Release(warm.x, true, CoarseNow());

  Exchange get(io, cfg, "GET");
  get.Run(pool);
  ASSERT_EQ(get.x.error, UpstreamError::kNone);
  EXPECT_EQ(get.status(), 200);
  EXPECT_FALSE(get.x.reused);  // answered on the fresh connection
  EXPECT_EQ(OutcomeOf(get.x), Outcome::kOk);
  EXPECT_EQ(backend.connections(), 2);
  EXPECT_EQ(backend.requests(), 3);  // warm, the dropped GET, the GET again
  pool.Release(get.x, true, CoarseNow());

  // A POST on the pooled connection is dropped the same way: not sent twice.
  Exchange post(io, cfg, "POST");
  post.Run(pool);
  EXPECT_EQ(post.x.error, UpstreamError::kReset);
  EXPECT_TRUE(post.x.reused);
  EXPECT_EQ(OutcomeOf(post.x), Outcome::kReset);
  EXPECT_EQ(backend.connections(), 2);
  EXPECT_EQ(backend.requests(), 4);
}

TEST(UpstreamExchangeTest, ATimeoutOnAReusedConnectionIsNotSentAgain) {
  ScriptedBackend backend(
      [](int, int req) { return req == 0 ? Action::kAnswer : Action::kSilent; });
  BackendConfig cfg = backend.config();
  asio::io_context io;
  UpstreamPool pool;

  Exchange warm(io, cfg, "GET");
  warm.Run(pool);
  ASSERT_EQ(warm.x.error, UpstreamError::kNone);
  pool.Release(warm.x, true, CoarseNow());

  Exchange get(io, cfg, "GET", milliseconds(300));
  get.Run(pool);
  EXPECT_EQ(get.x.error, UpstreamError::kTimeout);
  EXPECT_TRUE(get.x.reused);
  EXPECT_EQ(OutcomeOf(get.x), Outcome::kTimeout);
  EXPECT_EQ(backend.connections(), 1);
  EXPECT_EQ(backend.requests(), 2);
}

TEST(UpstreamExchangeTest, ConnectFailuresAndBadHeadsAreReported) {
  asio::io_context io;
  UpstreamPool pool;
  BackendConfig refused;
  refused.name = "refused";
  refused.host = "127.0.0.1";
  refused.port = ClosedPort();
  refused.host_header = "127.0.0.1:" + std::to_string(refused.port);
  Exchange a(io, refused, "GET");
  a.Run(pool);
  EXPECT_EQ(a.x.error, UpstreamError::kConnect);
  EXPECT_EQ(OutcomeOf(a.x), Outcome::kConnectFailure);

  BackendConfig bad = refused;
  bad.host = "not-an-address";
  Exchange b(io, bad, "GET");
  b.Run(pool);
  EXPECT_EQ(b.x.error, UpstreamError::kBadAddress);
  EXPECT_EQ(OutcomeOf(b.x), Outcome::kConnectFailure);

  ScriptedBackend lf([](int, int) { return Action::kBareLf; });
  BackendConfig lf_cfg = lf.config();
  Exchange c(io, lf_cfg, "GET");
  c.Run(pool);
  EXPECT_EQ(c.x.error, UpstreamError::kMalformedHead);
  EXPECT_EQ(OutcomeOf(c.x), Outcome::kReset);
}

// The exchange's outcome is what the Balancer sees: gateway errors and
// connect failures eject a backend, a stale pooled connection sent again
// successfully is not a failure at all.
TEST(UpstreamOutcomes, FeedOutlierEjectionButAResentStaleConnectionDoesNot) {
  ScriptedBackend flaky([](int, int) { return Action::kAnswer503; });
  ScriptedBackend stale([](int, int req) { return req == 0 ? Action::kAnswer : Action::kDrop; });
  GatewayConfig gc;
  gc.backends = {flaky.config("flaky"), stale.config("stale")};
  gc.backends.push_back(gc.backends[0]);
  gc.backends[2].name = "refused";
  gc.backends[2].port = ClosedPort();
  gc.backends[2].host_header = "127.0.0.1:" + std::to_string(gc.backends[2].port);
  PoolConfig p;
  p.name = "main";
  p.tiers.push_back(TierConfig{{0, 1, 2}, ""});
  p.outlier.max_ejection_percent = 100;
  gc.pools = {p};
  FakeClock clock;
  Balancer bal(clock, 42);
  bal.Configure(gc);
  asio::io_context io;
  UpstreamPool pool;
  auto report = [&](size_t backend, const UpstreamExchange& x) {
    Pick pick;
    pick.backend = backend;
    pick.pool = 0;
    bal.Report(pick, OutcomeOf(x));
  };

  for (int i = 0; i < 5; ++i) {
    Exchange e(io, gc.backends[0], "POST");
    e.Run(pool);
    ASSERT_EQ(e.x.error, UpstreamError::kNone);
    EXPECT_EQ(e.status(), 503);
    report(0, e.x);
    pool.Release(e.x, true, CoarseNow());
    Exchange r(io, gc.backends[2], "POST");
    r.Run(pool);
    report(2, r.x);
  }
  EXPECT_TRUE(bal.Backend("flaky")->ejected);
  EXPECT_TRUE(bal.Backend("refused")->ejected);

  for (int i = 0; i < 6; ++i) {
    Exchange e(io, gc.backends[1], "GET");
    e.Run(pool);
    ASSERT_EQ(e.x.error, UpstreamError::kNone);
    report(1, e.x);
    pool.Release(e.x, true, CoarseNow());
  }
  EXPECT_EQ(stale.requests(), 11);  // every reuse after the first was dropped and sent again
  Result<BackendStatus> st = bal.Backend("stale");
  ASSERT_TRUE(st.ok());
  EXPECT_FALSE(st->ejected);
  EXPECT_EQ(st->failures, 0u);
}

}  // namespace
}  // namespace gantry::gateway::internal
