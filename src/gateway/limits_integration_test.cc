// Integration tests of the limiter in Redis mode: two Limiter instances (two
// "gateways", each with its own event loop thread) share one redis-server started by
// the test. Exactness under concurrency, shared quotas, TPM settle, script reload,
// fail-open / fail-closed when Redis dies, and recovery.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <functional>
#include <thread>

#include "gantry/core/log.h"
#include "gantry/gateway/limits.h"
#include "redis.h"
#include "redis_test_server.h"

namespace gantry::gateway {
namespace {

namespace asio = boost::asio;

using testing::TestRedisServer;

// One gateway event loop: an io_context plus its LimiterLoop.
class Gateway {
 public:
  explicit Gateway(Limiter& l) : limiter_(l), loop_(l.Attach(io_)) {}

  Admission Admit(std::string_view key, double est = 0, std::string_view model = "") {
    std::optional<Admission> out;
    Subject s{key, "", model};
    asio::co_spawn(
        io_, [&]() -> asio::awaitable<void> { out = co_await loop_->Admit(s, est); },
        asio::detached);
    io_.restart();
    while (!out) io_.run_one();  // a Redis read is always pending: run() would not return
    return *out;
  }
  // Starts n Admits at once (they pipeline on the connection) and waits for all.
  std::vector<Admission> AdmitMany(int n, std::string_view key, double est = 0) {
    std::vector<Admission> out(n);
    int done = 0;
    for (int i = 0; i < n; ++i) {
      asio::co_spawn(
          io_,
          [&, i]() -> asio::awaitable<void> {
            out[i] = co_await loop_->Admit(Subject{key, "", ""}, est);
            ++done;
          },
          asio::detached);
    }
    io_.restart();
    while (done < n) io_.run_one();
    return out;
  }
  void Settle(const Admission& a, double actual) {
    loop_->Settle(a, actual);
    RunFor(std::chrono::milliseconds(50));  // the settle script is fire-and-forget
  }
  void RunFor(std::chrono::milliseconds d) {
    io_.restart();
    io_.run_for(d);
  }
  bool RunUntil(const std::function<bool()>& pred,
                std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
      if (std::chrono::steady_clock::now() > end) return false;
      RunFor(std::chrono::milliseconds(10));
    }
    return true;
  }
  bool WaitUp() {
    return RunUntil([&] { return limiter_.redis_up(); });
  }

 private:
  Limiter& limiter_;
  asio::io_context io_;
  std::unique_ptr<LimiterLoop> loop_;
};

// The command timeout is only an upper bound here: a Redis that is up must
// answer within it however loaded the machine is (a late reply would show as
// degraded), so it is generous.
LimiterConfig RedisConfig(int port, bool fail_closed = false, double timeout_s = 2.0) {
  LimiterConfig c;
  RedisOptions r;
  r.port = port;
  r.timeout_s = timeout_s;
  r.fail_closed = fail_closed;
  r.prefix = "gantry-test:";
  c.redis = r;
  return c;
}

std::unique_ptr<Limiter> Make(LimiterConfig c) {
  auto r = Limiter::Create(std::move(c), nullptr);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

RateLimitRule Req(double n, double per, std::string scope = "key") {
  RateLimitRule r;
  r.scope = std::move(scope);
  r.requests = n;
  r.per_s = per;
  return r;
}

int CountAllowed(const std::vector<Admission>& v) {
  int n = 0;
  for (const auto& a : v) n += a.allowed;
  return n;
}

TEST(LimitsRedisTest, TwoGatewaysAdmitExactlyN) {
  log::Init();  // as the gateway does before starting its loops (spdlog's lazy setup races)
  TestRedisServer server;
  ASSERT_TRUE(server.Start());
  LimiterConfig c = RedisConfig(server.port());
  c.rate_limits = {Req(50, 1e9), Req(70, 1e9, "global")};
  auto l1 = Make(c);
  auto l2 = Make(c);
  ASSERT_TRUE(l1 && l2);
  EXPECT_TRUE(l1->redis_configured());
  std::atomic<int> allowed{0}, degraded{0}, denied429{0};
  auto run = [&](Limiter& l) {
    Gateway g(l);
    if (!g.WaitUp()) return;
    for (const auto& a : g.AdmitMany(40, "gk1")) {
      allowed += a.allowed;
      degraded += a.degraded;
      denied429 += !a.allowed && a.status == 429 && a.retry_after_s >= 1;
    }
  };
  std::thread t1(run, std::ref(*l1)), t2(run, std::ref(*l2));
  t1.join();
  t2.join();
  EXPECT_EQ(allowed.load(), 50);  // 80 tries against a key bucket of 50
  EXPECT_EQ(denied429.load(), 30);
  EXPECT_EQ(degraded.load(), 0);
  // The global bucket took 50 of 70: another key gets exactly 20 more.
  allowed = 0;
  std::thread t3([&] {
    Gateway g(*l1);
    ASSERT_TRUE(g.WaitUp());
    allowed += CountAllowed(g.AdmitMany(15, "gk2"));
  });
  std::thread t4([&] {
    Gateway g(*l2);
    ASSERT_TRUE(g.WaitUp());
    allowed += CountAllowed(g.AdmitMany(15, "gk3"));
  });
  t3.join();
  t4.join();
  EXPECT_EQ(allowed.load(), 20);
  EXPECT_EQ(l1->redis_errors(), 0u);
}

TEST(LimitsRedisTest, QuotasAndHeadersAreShared) {
  TestRedisServer server;
  ASSERT_TRUE(server.Start());
  LimiterConfig c = RedisConfig(server.port());
  QuotaRule q;
  q.scope = "key";
  q.calls_per_day = 30;
  c.quotas = {q};
  c.rate_limits = {Req(100, 60)};
  auto l1 = Make(c);
  auto l2 = Make(c);
  std::atomic<int> allowed{0}, denied403{0};
  auto run = [&](Limiter& l) {
    Gateway g(l);
    if (!g.WaitUp()) return;
    for (const auto& a : g.AdmitMany(25, "gk1")) {
      allowed += a.allowed;
      denied403 += !a.allowed && a.status == 403 && a.reason == "quota_calls" &&
                   a.retry_after_s >= 1 && a.retry_after_s <= 86400;
    }
  };
  std::thread t1(run, std::ref(*l1)), t2(run, std::ref(*l2));
  t1.join();
  t2.join();
  EXPECT_EQ(allowed.load(), 30);
  EXPECT_EQ(denied403.load(), 20);
  // Each gateway mirrors the shared counter into its usage table.
  Gateway g(*l1);
  ASSERT_TRUE(g.WaitUp());
  EXPECT_FALSE(g.Admit("gk1").allowed);
  auto rows = l1->Usage("key:gk1");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].calls, 30);
  EXPECT_EQ((*rows)[1].calls, 30);
  // RateLimit headers come from the shared bucket (100 minus the 30 admitted calls, the
  // denied ones took nothing; one more for this request).
  Admission a = g.Admit("gk9");
  ASSERT_TRUE(a.allowed);
  EXPECT_TRUE(a.has_rate_headers);
  EXPECT_EQ(a.limit, 100);
  EXPECT_EQ(a.remaining, 99);
}

TEST(LimitsRedisTest, TokensSettleAcrossGateways) {
  TestRedisServer server;
  ASSERT_TRUE(server.Start());
  LimiterConfig c = RedisConfig(server.port());
  RateLimitRule tpm;
  tpm.scope = "key";
  tpm.tokens_per_minute = 1000;
  c.rate_limits = {tpm};
  QuotaRule q;
  q.scope = "key";
  q.tokens_per_month = 100000;
  c.quotas = {q};
  auto l1 = Make(c);
  auto l2 = Make(c);
  Gateway g1(*l1), g2(*l2);
  ASSERT_TRUE(g1.WaitUp());
  ASSERT_TRUE(g2.WaitUp());
  Admission a1 = g1.Admit("gk", 600);
  ASSERT_TRUE(a1.allowed);
  EXPECT_FALSE(a1.degraded);
  Admission a2 = g2.Admit("gk", 600);
  EXPECT_FALSE(a2.allowed);
  EXPECT_EQ(a2.reason, "rate_limit_tokens");
  g1.Settle(a1, 100);  // refund 500
  Admission a3 = g2.Admit("gk", 600);
  ASSERT_TRUE(a3.allowed);
  g2.Settle(a3, 2500);  // overshoot: the shared bucket goes negative
  Admission a4 = g1.Admit("gk", 0);
  EXPECT_FALSE(a4.allowed);
  EXPECT_GE(a4.retry_after_s, 60);
  // Token quota counter: 100 + 2500.
  EXPECT_FALSE(g1.Admit("gk", 0).allowed);
  auto rows = l2->Usage("key:gk");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].tokens, 2600);
}

TEST(LimitsRedisTest, FirstAdmitWaitsForTheConnection) {
  TestRedisServer server;
  ASSERT_TRUE(server.Start());
  LimiterConfig c = RedisConfig(server.port());
  c.rate_limits = {Req(1, 1e15)};  // ~no refill: the idle expiry must be capped
  auto l = Make(c);
  Gateway g(*l);  // connecting starts here
  Admission a = g.Admit("k");
  EXPECT_TRUE(a.allowed);
  EXPECT_FALSE(a.degraded);  // queued behind the connection attempt, not decided locally
  a = g.Admit("k");
  EXPECT_FALSE(a.allowed);
  EXPECT_FALSE(a.degraded);
  EXPECT_EQ(l->redis_errors(), 0u);
}

TEST(LimitsRedisTest, ReconfigureKeepsSharedState) {
  TestRedisServer server;
  ASSERT_TRUE(server.Start());
  LimiterConfig c = RedisConfig(server.port());
  c.rate_limits = {Req(2, 1e9)};
  auto l = Make(c);
  Gateway g(*l);
  ASSERT_TRUE(g.WaitUp());
  EXPECT_EQ(CountAllowed(g.AdmitMany(3, "k")), 2);
  LimiterConfig c2 = c;
  c2.rate_limits.push_back(Req(100, 1, "global"));
  ASSERT_TRUE(l->Reconfigure(c2).ok());
  EXPECT_FALSE(g.Admit("k").allowed);  // same rule, same Redis bucket
  LimiterConfig c3 = c;
  c3.rate_limits = {Req(3, 1e9)};
  ASSERT_TRUE(l->Reconfigure(c3).ok());
  EXPECT_EQ(CountAllowed(g.AdmitMany(4, "k")), 3);  // new numbers, new bucket
}

TEST(LimitsRedisTest, ScriptFlushIsHandled) {
  TestRedisServer server;
  ASSERT_TRUE(server.Start());
  LimiterConfig c = RedisConfig(server.port());
  c.rate_limits = {Req(5, 1e9)};
  auto l = Make(c);
  Gateway g(*l);
  ASSERT_TRUE(g.WaitUp());
  EXPECT_TRUE(g.Admit("k").allowed);
  {
    asio::io_context io;
    RedisOptions o;
    o.port = server.port();
    o.timeout_s = 1;
    RedisConnection raw(io, o);
    std::optional<Result<RedisReply>> r;
    const std::vector<std::string> flush = {"SCRIPT", "FLUSH"};
    asio::co_spawn(
        io, [&]() -> asio::awaitable<void> { r.emplace(co_await raw.Command(flush)); },
        asio::detached);
    while (!r) io.run_one();
    ASSERT_TRUE(r->ok());
  }
  int allowed = 0;
  for (int i = 0; i < 6; ++i) {
    Admission a = g.Admit("k");
    EXPECT_FALSE(a.degraded);
    allowed += a.allowed;
  }
  EXPECT_EQ(allowed, 4);
  EXPECT_EQ(l->redis_errors(), 0u);
}

TEST(LimitsRedisTest, FailOpenFailClosedAndRecovery) {
  TestRedisServer server;
  ASSERT_TRUE(server.Start());
  // (The default 2 s timeout: only the stopped server below waits for it.)
  LimiterConfig open_cfg = RedisConfig(server.port(), false);
  open_cfg.rate_limits = {Req(3, 1e9)};
  LimiterConfig closed_cfg = RedisConfig(server.port(), true);
  closed_cfg.rate_limits = {Req(3, 1e9)};
  auto lo = Make(open_cfg);
  auto lc = Make(closed_cfg);
  Gateway go(*lo), gc(*lc);
  ASSERT_TRUE(go.WaitUp());
  ASSERT_TRUE(gc.WaitUp());
  Admission a = go.Admit("k");
  EXPECT_TRUE(a.allowed);
  EXPECT_FALSE(a.degraded);
  EXPECT_TRUE(gc.Admit("k").allowed);

  server.Kill(SIGKILL);
  // Fail-open: served with local limits (a fresh local bucket of 3), marked degraded.
  int allowed = 0;
  for (int i = 0; i < 5; ++i) {
    a = go.Admit("k");
    EXPECT_TRUE(a.degraded);
    allowed += a.allowed;
  }
  EXPECT_EQ(allowed, 3);
  EXPECT_GT(lo->redis_errors(), 0u);
  EXPECT_TRUE(go.RunUntil([&] { return !lo->redis_up(); }));
  // Fail-closed: 503.
  a = gc.Admit("k");
  EXPECT_FALSE(a.allowed);
  EXPECT_EQ(a.status, 503);
  EXPECT_EQ(a.reason, "limiter_unavailable");
  EXPECT_GE(a.retry_after_s, 1);

  // Restart on the same port (empty): both recover in the background.
  ASSERT_TRUE(server.Start());
  EXPECT_TRUE(go.WaitUp());
  EXPECT_TRUE(gc.WaitUp());
  a = go.Admit("k");
  EXPECT_TRUE(a.allowed);
  EXPECT_FALSE(a.degraded);
  a = gc.Admit("k");
  EXPECT_TRUE(a.allowed);
  EXPECT_EQ(a.status, 200);

  // A silent (stopped) server is a timeout: degraded / 503 as well.
  server.Kill(SIGSTOP);
  a = go.Admit("k2");
  EXPECT_TRUE(a.allowed);
  EXPECT_TRUE(a.degraded);
  a = gc.Admit("k2");
  EXPECT_EQ(a.status, 503);
  server.Kill(SIGCONT);
  EXPECT_TRUE(go.WaitUp());
  EXPECT_TRUE(gc.WaitUp());
}

TEST(LimitsRedisTest, QuotaSurvivesRedisRestart) {
  TestRedisServer server;
  ASSERT_TRUE(server.Start());
  LimiterConfig c = RedisConfig(server.port());
  QuotaRule q;
  q.scope = "key";
  q.calls_per_day = 5;
  c.quotas = {q};
  auto l = Make(c);
  Gateway g(*l);
  ASSERT_TRUE(g.WaitUp());
  EXPECT_EQ(CountAllowed(g.AdmitMany(3, "gk")), 3);
  server.Kill(SIGKILL);
  // Seen down while nothing listens (a restart first could be quicker than
  // the limiter's next read, and WaitUp would then see the old connection).
  ASSERT_TRUE(g.RunUntil([&] { return !l->redis_up(); }));
  ASSERT_TRUE(server.Start());  // empty
  ASSERT_TRUE(g.WaitUp());
  int allowed = 0, degraded = 0;
  for (int i = 0; i < 4; ++i) {
    Admission a = g.Admit("gk");
    allowed += a.allowed;
    degraded += a.degraded;
  }
  // The counter was re-seeded from this gateway's mirror (3), degraded or not.
  EXPECT_EQ(allowed, 2);
  EXPECT_LE(degraded, 1);
}

TEST(LimitsRedisTest, AdmitRoundTripCost) {
  TestRedisServer server;
  ASSERT_TRUE(server.Start());
  // A long deadline: 20000 pipelined scripts must not time out into local decisions.
  LimiterConfig c = RedisConfig(server.port(), false, 30);
  c.rate_limits = {Req(1e12, 1), Req(1e12, 1, "model")};
  QuotaRule q;
  q.scope = "key";
  q.calls_per_day = 1'000'000'000;
  c.quotas = {q};
  auto l = Make(c);
  Gateway g(*l);
  ASSERT_TRUE(g.WaitUp());
  constexpr int kN = 2000;
  auto t0 = std::chrono::steady_clock::now();
  int ok = 0;
  for (int i = 0; i < kN; ++i) ok += g.Admit("gk", 10, "tiny").allowed;
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kN;
  EXPECT_EQ(ok, kN);
  t0 = std::chrono::steady_clock::now();
  auto many = g.AdmitMany(20000, "gk", 10);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(CountAllowed(many), 20000);
  for (const auto& a : many) ASSERT_FALSE(a.degraded);
  std::printf("redis Admit: %.1f us sequential round trip, %.0f admits/s pipelined\n", us,
              20000 / s);
  // Server-side cost of the script, for comparison.
  asio::io_context io;
  RedisOptions o;
  o.port = server.port();
  o.timeout_s = 1;
  RedisConnection raw(io, o);
  std::optional<Result<RedisReply>> r;
  const std::vector<std::string> info = {"INFO", "commandstats"};
  asio::co_spawn(
      io, [&]() -> asio::awaitable<void> { r.emplace(co_await raw.Command(info)); },
      asio::detached);
  while (!r) io.run_one();
  if (r->ok()) {
    const std::string& text = (*r)->str;
    const auto pos = text.find("cmdstat_evalsha:");
    if (pos != std::string::npos) {
      std::printf("%s\n", text.substr(pos, text.find('\r', pos) - pos).c_str());
    }
  }
}

}  // namespace
}  // namespace gantry::gateway
