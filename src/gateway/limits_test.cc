// Unit tests of the local limiter (no Redis): token buckets, TPM estimate/settle,
// quotas at UTC window rollover, persistence, hot reload, validation.
#include "gantry/gateway/limits.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <chrono>
#include <filesystem>
#include <thread>

namespace gantry::gateway {
namespace {

namespace asio = boost::asio;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::system_clock;

constexpr double kForever = 1e9;  // per_s that makes refill negligible

system_clock::time_point Wall(int64_t unix_s) { return system_clock::time_point(seconds(unix_s)); }

// Drives one LimiterLoop on a private io_context, synchronously.
class Driver {
 public:
  explicit Driver(Limiter& l) : loop_(l.Attach(io_)) {}
  Admission Admit(std::string_view key, double est = 0, std::string_view model = "",
                  std::string_view role = "") {
    std::optional<Admission> out;
    Subject s{key, role, model};
    asio::co_spawn(
        io_, [&]() -> asio::awaitable<void> { out = co_await loop_->Admit(s, est); },
        asio::detached);
    io_.restart();
    io_.run();
    return *out;
  }
  void Settle(const Admission& a, double actual) {
    loop_->Settle(a, actual);
    io_.restart();
    io_.run();
  }

 private:
  asio::io_context io_;
  std::unique_ptr<LimiterLoop> loop_;
};

std::unique_ptr<Limiter> Make(LimiterConfig c, Clock* clock) {
  auto r = Limiter::Create(std::move(c), clock);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

RateLimitRule Req(std::string scope, std::string match, double n, double per, double burst = 0) {
  RateLimitRule r;
  r.scope = std::move(scope);
  r.match = std::move(match);
  r.requests = n;
  r.per_s = per;
  r.burst = burst;
  return r;
}

RateLimitRule Tpm(std::string scope, std::string match, double tpm) {
  RateLimitRule r;
  r.scope = std::move(scope);
  r.match = std::move(match);
  r.tokens_per_minute = tpm;
  return r;
}

TEST(LimiterTest, BurstAdmitsExactlyCapacity) {
  FakeClock clock;
  LimiterConfig c;
  c.rate_limits = {Req("key", "*", 10, kForever)};
  auto l = Make(c, &clock);
  Driver d(*l);
  int allowed = 0;
  for (int i = 0; i < 15; ++i) {
    Admission a = d.Admit("k1");
    ASSERT_TRUE(a.has_rate_headers);
    EXPECT_EQ(a.limit, 10);
    if (a.allowed) {
      ++allowed;
      EXPECT_EQ(a.remaining, 10 - allowed);
    } else {
      EXPECT_EQ(a.status, 429);
      EXPECT_EQ(a.reason, "rate_limit_requests");
      EXPECT_EQ(a.rule, "key=* requests 10/1000000000s");
      EXPECT_GE(a.retry_after_s, 1);
      EXPECT_EQ(a.remaining, 0);
    }
  }
  EXPECT_EQ(allowed, 10);
  // Another key has its own bucket.
  EXPECT_TRUE(d.Admit("k2").allowed);
  // No key: key rules do not apply.
  EXPECT_TRUE(d.Admit("").allowed);
  EXPECT_FALSE(l->redis_configured());
}

TEST(LimiterTest, RefillAndRetryAfter) {
  FakeClock clock;
  LimiterConfig c;
  c.rate_limits = {Req("key", "*", 2, 1)};  // 2 per second, burst 2
  auto l = Make(c, &clock);
  Driver d(*l);
  EXPECT_TRUE(d.Admit("k").allowed);
  EXPECT_TRUE(d.Admit("k").allowed);
  Admission a = d.Admit("k");
  EXPECT_FALSE(a.allowed);
  EXPECT_EQ(a.retry_after_s, 1);  // 0.5 s rounded up
  EXPECT_EQ(a.reset_s, 1);
  clock.Advance(milliseconds(500));
  EXPECT_TRUE(d.Admit("k").allowed);
  EXPECT_FALSE(d.Admit("k").allowed);
  clock.Advance(seconds(10));  // refill is capped at the capacity
  EXPECT_TRUE(d.Admit("k").allowed);
  EXPECT_TRUE(d.Admit("k").allowed);
  EXPECT_FALSE(d.Admit("k").allowed);

  // Slow refill: Retry-After is the time to one token.
  LimiterConfig c2;
  c2.rate_limits = {Req("global", "*", 1, 60)};
  auto l2 = Make(c2, &clock);
  Driver d2(*l2);
  EXPECT_TRUE(d2.Admit("").allowed);
  clock.Advance(seconds(20));
  a = d2.Admit("");
  EXPECT_FALSE(a.allowed);
  EXPECT_EQ(a.retry_after_s, 40);
  EXPECT_EQ(a.rule, "global requests 1/60s");
}

TEST(LimiterTest, AdmissionIsAllOrNothing) {
  FakeClock clock;
  LimiterConfig c;
  c.rate_limits = {Req("key", "*", 3, kForever), Req("model", "m1", 1, kForever)};
  auto l = Make(c, &clock);
  Driver d(*l);
  EXPECT_TRUE(d.Admit("k", 0, "m1").allowed);
  Admission a = d.Admit("k", 0, "m1");
  EXPECT_FALSE(a.allowed);
  EXPECT_EQ(a.rule, "model=m1 requests 1/1000000000s");
  // The denied request did not take from the key bucket: two more fit.
  EXPECT_TRUE(d.Admit("k", 0, "m2").allowed);
  EXPECT_TRUE(d.Admit("k", 0, "m2").allowed);
  EXPECT_FALSE(d.Admit("k", 0, "m2").allowed);

  // A quota denial does not take from rate buckets either.
  LimiterConfig c2;
  c2.rate_limits = {Req("key", "*", 2, kForever)};
  QuotaRule q;
  q.scope = "model";
  q.match = "big";
  q.calls_per_day = 1;
  c2.quotas = {q};
  auto l2 = Make(c2, &clock);
  Driver d2(*l2);
  EXPECT_TRUE(d2.Admit("k", 0, "big").allowed);
  a = d2.Admit("k", 0, "big");
  EXPECT_FALSE(a.allowed);
  EXPECT_EQ(a.status, 403);
  EXPECT_EQ(a.reason, "quota_calls");
  EXPECT_TRUE(d2.Admit("k", 0, "small").allowed);
  EXPECT_FALSE(d2.Admit("k", 0, "small").allowed);
}

TEST(LimiterTest, TokensPerMinuteEstimateAndSettle) {
  FakeClock clock;
  LimiterConfig c;
  c.rate_limits = {Tpm("key", "*", 1000)};
  auto l = Make(c, &clock);
  Driver d(*l);
  Admission a1 = d.Admit("k", 600);
  ASSERT_TRUE(a1.allowed);
  EXPECT_FALSE(a1.has_rate_headers);  // only request rules feed RateLimit-* headers
  Admission a2 = d.Admit("k", 600);   // 400 left
  EXPECT_FALSE(a2.allowed);
  EXPECT_EQ(a2.status, 429);
  EXPECT_EQ(a2.reason, "rate_limit_tokens");
  EXPECT_EQ(a2.retry_after_s, 12);   // 200 tokens at 1000/60 per second
  d.Settle(a2, 5000);                // a denied admission is ignored
  d.Settle(a1, 100);                 // refund 500 -> 900 left
  Admission a3 = d.Admit("k", 600);  // 300 left
  ASSERT_TRUE(a3.allowed);
  d.Settle(a3, 2000);  // overshoot by 1400 -> -1100
  Admission a4 = d.Admit("k", 0);
  EXPECT_FALSE(a4.allowed);
  EXPECT_GE(a4.retry_after_s, 66);
  EXPECT_LE(a4.retry_after_s, 67);
  clock.Advance(seconds(65));  // still ~-17
  EXPECT_FALSE(d.Admit("k", 0).allowed);
  clock.Advance(seconds(3));  // ~33 tokens
  EXPECT_TRUE(d.Admit("k", 10).allowed);
  EXPECT_FALSE(d.Admit("k", 100).allowed);
  // An estimate above the capacity is admitted when the bucket is full (else it would
  // never pass) and drives it negative.
  clock.Advance(seconds(120));
  ASSERT_TRUE(d.Admit("k", 5000).allowed);
  EXPECT_FALSE(d.Admit("k", 1).allowed);
}

TEST(LimiterTest, QuotaDayAndMonthRolloverUtc) {
  // 2026-11-30T23:59:50Z: the day and the month end in 10 s.
  FakeClock clock(seconds(1000), Wall(1796083190));
  LimiterConfig c;
  QuotaRule q;
  q.scope = "key";
  q.calls_per_day = 2;
  q.calls_per_month = 3;
  c.quotas = {q};
  auto l = Make(c, &clock);
  Driver d(*l);
  EXPECT_TRUE(d.Admit("k").allowed);
  EXPECT_TRUE(d.Admit("k").allowed);
  Admission a = d.Admit("k");
  EXPECT_FALSE(a.allowed);
  EXPECT_EQ(a.status, 403);
  EXPECT_EQ(a.reason, "quota_calls");
  EXPECT_EQ(a.rule, "key=* calls_per_day 2");
  EXPECT_EQ(a.retry_after_s, 10);
  clock.Advance(seconds(10));  // 2026-12-01T00:00:00Z
  EXPECT_TRUE(d.Admit("k").allowed);
  EXPECT_TRUE(d.Admit("k").allowed);
  EXPECT_FALSE(d.Admit("k").allowed);
  auto rows = l->Usage("key:k");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 4u);
  EXPECT_EQ((*rows)[0].period, "2026-11");
  EXPECT_EQ((*rows)[0].calls, 2);
  EXPECT_EQ((*rows)[1].period, "2026-11-30");
  EXPECT_EQ((*rows)[2].period, "2026-12");
  EXPECT_EQ((*rows)[3].period, "2026-12-01");
  EXPECT_EQ((*rows)[3].calls, 2);
}

TEST(LimiterTest, QuotaDayRolloverKeepsMonth) {
  // 2026-11-29T23:59:50Z.
  FakeClock clock(seconds(1000), Wall(1795996790));
  LimiterConfig c;
  QuotaRule q;
  q.scope = "key";
  q.calls_per_day = 2;
  q.calls_per_month = 3;
  c.quotas = {q};
  auto l = Make(c, &clock);
  Driver d(*l);
  EXPECT_TRUE(d.Admit("k").allowed);
  EXPECT_TRUE(d.Admit("k").allowed);
  EXPECT_FALSE(d.Admit("k").allowed);
  clock.Advance(seconds(10));  // 2026-11-30T00:00:00Z
  EXPECT_TRUE(d.Admit("k").allowed);
  Admission a = d.Admit("k");
  EXPECT_FALSE(a.allowed);
  EXPECT_EQ(a.rule, "key=* calls_per_month 3");
  EXPECT_EQ(a.retry_after_s, 86400);  // to 2026-12-01T00:00:00Z
}

TEST(LimiterTest, TokenQuotaWithSettle) {
  FakeClock clock(seconds(1000), Wall(1794744000));
  LimiterConfig c;
  QuotaRule q;
  q.scope = "role";
  q.match = "user";
  q.tokens_per_day = 1000;
  c.quotas = {q};
  auto l = Make(c, &clock);
  Driver d(*l);
  Admission a1 = d.Admit("k", 600, "m", "user");
  ASSERT_TRUE(a1.allowed);
  Admission a2 = d.Admit("k", 600, "m", "user");
  EXPECT_FALSE(a2.allowed);
  EXPECT_EQ(a2.reason, "quota_tokens");
  EXPECT_EQ(a2.retry_after_s, 12 * 3600);
  EXPECT_TRUE(d.Admit("k", 600, "m", "admin").allowed);  // other role: no quota
  d.Settle(a1, 100);
  EXPECT_TRUE(d.Admit("k", 600, "m", "user").allowed);  // 700 used
  auto rows = l->Usage("role:user");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[1].period, "2026-11-15");
  EXPECT_EQ((*rows)[1].tokens, 700);
  EXPECT_EQ((*rows)[1].calls, 2);
  // Key usage is recorded without a key quota (for /admin/usage).
  rows = l->Usage("key:k");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[1].calls, 3);
  EXPECT_EQ((*rows)[1].tokens, 1300);
}

TEST(LimiterTest, QuotaUsageSurvivesRestart) {
  auto dir =
      std::filesystem::temp_directory_path() / ("gantry_limits_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "state.db").string();
  FakeClock clock(seconds(1000), Wall(1794744000));
  LimiterConfig c;
  QuotaRule q;
  q.scope = "key";
  q.calls_per_day = 4;
  c.quotas = {q};
  c.state_path = db;
  {
    auto l = Make(c, &clock);
    Driver d(*l);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(d.Admit("ab12", 10).allowed);
    ASSERT_TRUE(l->Flush().ok());
    EXPECT_TRUE(d.Admit("other").allowed);
  }  // destruction flushes the last one
  {
    auto l = Make(c, &clock);
    Driver d(*l);
    auto rows = l->Usage("key:ab12");
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    ASSERT_EQ(rows->size(), 2u);
    EXPECT_EQ((*rows)[1].calls, 3);
    EXPECT_EQ((*rows)[1].tokens, 30);
    EXPECT_TRUE(d.Admit("ab12").allowed);
    EXPECT_FALSE(d.Admit("ab12").allowed);
    auto all = l->Usage("");
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(all->size(), 4u);  // ab12 and other, day and month
  }
  // Next day: old rows stay on disk and are listed, the new day starts at 0.
  clock.Advance(seconds(86400));
  {
    auto l = Make(c, &clock);
    Driver d(*l);
    EXPECT_TRUE(d.Admit("ab12").allowed);
    auto rows = l->Usage("key:ab12");
    ASSERT_TRUE(rows.ok());
    ASSERT_EQ(rows->size(), 3u);  // 2026-11, 2026-11-15, 2026-11-16
    EXPECT_EQ((*rows)[0].calls, 5);
    EXPECT_EQ((*rows)[1].calls, 4);
    EXPECT_EQ((*rows)[2].calls, 1);
  }
  std::filesystem::remove_all(dir);
}

// Plans remember where their counters are; a flush that drops a past day's
// counters from memory must make them look again. Settling an admission of
// the previous day then finds nothing in memory and changes nothing (run
// under valgrind or ASan, a stale pointer would be a write to freed memory).
TEST(LimiterTest, SettleAfterTheDayWasFlushedAwayTouchesNothing) {
  auto dir = std::filesystem::temp_directory_path() /
             ("gantry_limits_settle_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  FakeClock clock(seconds(1000), Wall(1794744000 + 12 * 3600 - 2));  // 2026-11-15T23:59:58Z
  LimiterConfig c;
  QuotaRule q;
  q.scope = "key";
  q.tokens_per_day = 100000;
  c.quotas = {q};
  c.state_path = (dir / "state.db").string();
  {
    auto l = Make(c, &clock);
    Driver d(*l);
    Admission a1 = d.Admit("k", 600);
    Admission a2 = d.Admit("k", 600);  // the plan's counters are known by now
    ASSERT_TRUE(a1.allowed && a2.allowed);
    clock.Advance(seconds(3));     // 2026-11-16
    ASSERT_TRUE(l->Flush().ok());  // the 15th only on disk now
    d.Settle(a1, 100);
    d.Settle(a2, 100);
    Admission a3 = d.Admit("k", 600);
    ASSERT_TRUE(a3.allowed);
    d.Settle(a3, 100);  // the new day's counter is corrected
    auto rows = l->Usage("key:k");
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    ASSERT_EQ(rows->size(), 3u);  // 2026-11, 2026-11-15, 2026-11-16
    EXPECT_EQ((*rows)[1].period, "2026-11-15");
    EXPECT_EQ((*rows)[1].tokens, 1200);  // as flushed: its settlements came too late
    EXPECT_EQ((*rows)[2].period, "2026-11-16");
    EXPECT_EQ((*rows)[2].tokens, 100);
    EXPECT_EQ((*rows)[2].calls, 1);
  }
  std::filesystem::remove_all(dir);
}

TEST(LimiterTest, ReconfigureKeepsStateOfUnchangedRules) {
  FakeClock clock(seconds(1000), Wall(1794744000));
  LimiterConfig c;
  c.rate_limits = {Req("key", "*", 2, kForever)};
  QuotaRule q;
  q.scope = "key";
  q.calls_per_day = 3;
  c.quotas = {q};
  auto l = Make(c, &clock);
  Driver d(*l);
  EXPECT_TRUE(d.Admit("k").allowed);
  EXPECT_TRUE(d.Admit("k").allowed);
  EXPECT_FALSE(d.Admit("k").allowed);
  // Same rule plus a new one: the bucket keeps its (empty) state.
  LimiterConfig c2 = c;
  c2.rate_limits.push_back(Req("global", "*", 100, 1));
  ASSERT_TRUE(l->Reconfigure(c2).ok());
  EXPECT_FALSE(d.Admit("k").allowed);
  // Changed numbers: a new bucket; the call quota (2 used of 3) still counts.
  LimiterConfig c3 = c;
  c3.rate_limits = {Req("key", "*", 5, kForever)};
  ASSERT_TRUE(l->Reconfigure(c3).ok());
  EXPECT_TRUE(d.Admit("k").allowed);
  Admission a = d.Admit("k");
  EXPECT_FALSE(a.allowed);
  EXPECT_EQ(a.reason, "quota_calls");
  // An invalid config is refused and the old rules stay.
  LimiterConfig bad = c3;
  bad.rate_limits[0].per_s = 0;
  EXPECT_FALSE(l->Reconfigure(bad).ok());
  EXPECT_EQ(d.Admit("k").reason, "quota_calls");
}

TEST(LimiterTest, ValidationNamesRuleAndField) {
  FakeClock clock;
  auto err = [&](LimiterConfig c) {
    auto r = Limiter::Create(std::move(c), &clock);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.status().message();
  };
  LimiterConfig c;
  c.rate_limits = {Req("key", "*", 1, 1), Req("user", "*", 1, 1)};
  EXPECT_NE(err(c).find("rate_limits[1].scope"), std::string::npos) << err(c);
  c.rate_limits = {Req("key", "*", 1, 0)};
  EXPECT_NE(err(c).find("rate_limits[0].per"), std::string::npos);
  c.rate_limits = {Req("key", "*", -1, 1)};
  EXPECT_NE(err(c).find("rate_limits[0].requests"), std::string::npos);
  c.rate_limits = {Req("key", "*", 0, 1)};
  EXPECT_NE(err(c).find("rate_limits[0]: sets neither"), std::string::npos);
  c.rate_limits = {Req("key", "*", 0.5, 1)};
  EXPECT_NE(err(c).find("rate_limits[0].burst"), std::string::npos);
  c.rate_limits = {Req("key", "", 1, 1)};
  EXPECT_NE(err(c).find("rate_limits[0].match"), std::string::npos);
  c.rate_limits = {};
  QuotaRule q;
  q.scope = "key";
  c.quotas = {q};
  EXPECT_NE(err(c).find("quotas[0]: sets no limit"), std::string::npos);
  q.calls_per_day = -1;
  c.quotas = {q};
  EXPECT_NE(err(c).find("quotas[0].calls_per_day"), std::string::npos);
  c.quotas = {};
  c.redis = RedisOptions{};
  c.redis->port = 0;
  EXPECT_NE(err(c).find("redis.address"), std::string::npos);
  EXPECT_FALSE(Limiter::Validate(c).ok());
}

TEST(LimiterTest, GlobMatchAndScopes) {
  FakeClock clock;
  LimiterConfig c;
  c.rate_limits = {Req("model", "tiny-*", 1, kForever), Req("role", "us?r", 1, kForever)};
  auto l = Make(c, &clock);
  Driver d(*l);
  EXPECT_TRUE(d.Admit("", 0, "tiny-1").allowed);
  EXPECT_FALSE(d.Admit("", 0, "tiny-1").allowed);
  EXPECT_TRUE(d.Admit("", 0, "tiny-2").allowed);  // counters are per model
  EXPECT_TRUE(d.Admit("", 0, "large").allowed);
  EXPECT_TRUE(d.Admit("", 0, "large").allowed);
  EXPECT_TRUE(d.Admit("", 0, "", "user").allowed);
  EXPECT_FALSE(d.Admit("", 0, "", "user").allowed);
  EXPECT_TRUE(d.Admit("", 0, "", "admin").allowed);
}

TEST(LimiterTest, ConcurrentLoopsAdmitExactlyCapacity) {
  FakeClock clock;
  LimiterConfig c;
  c.rate_limits = {Req("global", "*", 1000, kForever), Req("key", "*", 600, kForever)};
  auto l = Make(c, &clock);
  std::atomic<int> allowed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Driver d(*l);
      const std::string key = t % 2 ? "a" : "b";
      for (int i = 0; i < 400; ++i) allowed += d.Admit(key).allowed;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(allowed.load(), 1000);  // 1600 tries, 600 per key, 1000 in all
}

TEST(LimiterTest, LocalAdmitCost) {
  // Reports ns per Admit (no assertion on time).
  LimiterConfig c;
  c.rate_limits = {Req("key", "*", 1e12, 1), Tpm("key", "*", 1e12), Req("model", "*", 1e12, 1)};
  QuotaRule q;
  q.scope = "key";
  q.calls_per_day = 1'000'000'000;
  c.quotas = {q};
  auto l = Make(c, nullptr);
  asio::io_context io;
  auto loop = l->Attach(io);
  constexpr int kN = 200000;
  int ok = 0;
  const auto t0 = std::chrono::steady_clock::now();
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < kN; ++i) {
          Admission a = co_await loop->Admit(Subject{"gk_1234", "user", "tiny-1"}, 100);
          ok += a.allowed;
        }
      },
      asio::detached);
  io.run();
  const double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / kN;
  EXPECT_EQ(ok, kN);
  std::printf("local Admit (3 buckets + quota): %.0f ns\n", ns);
}

}  // namespace
}  // namespace gantry::gateway

namespace gantry::gateway {
namespace {

// Local mode decides synchronously, exactly as Admit() would.
TEST(LimiterTryAdmitNow, MatchesAdmitInLocalMode) {
  FakeClock clock;
  LimiterConfig cfg;
  cfg.rate_limits.push_back(RateLimitRule{"key", "*", 3, 3600, 0, 0});
  auto limiter = Limiter::Create(cfg, &clock);
  ASSERT_TRUE(limiter.ok()) << limiter.status().ToString();
  boost::asio::io_context io;
  auto loop = (*limiter)->Attach(io);
  int allowed = 0;
  for (int i = 0; i < 5; ++i) {
    std::optional<Admission> a = loop->TryAdmitNow(Subject{"k1", "user", "m"}, 0);
    ASSERT_TRUE(a.has_value());
    if (a->allowed) ++allowed;
  }
  EXPECT_EQ(allowed, 3);
}

}  // namespace
}  // namespace gantry::gateway
