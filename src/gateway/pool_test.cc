#include "pool.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gantry/core/metrics.h"

namespace gantry::gateway {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr uint64_t kSeed = 42;

BackendConfig B(std::string name, std::string zone = "", uint32_t weight = 1,
                uint32_t max_concurrent = 0) {
  static uint16_t port = 9000;
  BackendConfig b;
  b.name = std::move(name);
  b.host = "127.0.0.1";
  b.port = port++;
  b.host_header = "127.0.0.1:" + std::to_string(b.port);
  b.zone = std::move(zone);
  b.weight = weight;
  b.max_concurrent = max_concurrent;
  return b;
}

PoolConfig P(std::string name, std::vector<std::vector<size_t>> tiers,
             Balance balance = Balance::kRoundRobin) {
  PoolConfig p;
  p.name = std::move(name);
  p.balance = balance;
  for (auto& t : tiers) p.tiers.push_back(TierConfig{std::move(t), ""});
  p.outlier.max_ejection_percent = 100;
  return p;
}

Target PoolTarget(size_t i) { return Target{Target::Kind::kPool, i}; }
Target RolloutTarget_(size_t i) { return Target{Target::Kind::kRollout, i}; }

std::string Name(const GatewayConfig& cfg, const Pick& p) {
  return p.backend == kNoBackend ? std::string("<none>") : cfg.backends[p.backend].name;
}

// Counts picks by backend name over `n` choices (no guards held).
std::map<std::string, int> Spread(Balancer& bal, const GatewayConfig& cfg, const Target& t, int n,
                                  const PickContext& ctx = {}) {
  std::map<std::string, int> out;
  for (int i = 0; i < n; ++i) ++out[Name(cfg, bal.Choose(t, ctx))];
  return out;
}

TEST(Balancer, TierFallbackWithReasonsThenShed) {
  FakeClock clock;
  GatewayConfig cfg;
  cfg.backends = {B("a", "", 1, 1), B("b", "", 1, 1)};
  cfg.pools = {P("main", {{0}, {1}})};
  cfg.pools[0].tiers[1].model = "small-model";
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);

  Pick p = bal.Choose(PoolTarget(0), {});
  EXPECT_EQ(Name(cfg, p), "a");
  EXPECT_FALSE(p.degraded);
  EXPECT_EQ(p.tier, 0u);
  EXPECT_TRUE(p.model_rewrite.empty());

  // a at max_concurrent: the fallback tier serves, degraded because saturated.
  Balancer::InFlight ga = bal.Begin(p);
  p = bal.Choose(PoolTarget(0), {});
  EXPECT_EQ(Name(cfg, p), "b");
  EXPECT_TRUE(p.degraded);
  EXPECT_EQ(p.tier, 1u);
  EXPECT_EQ(p.reason, "primary_saturated");
  EXPECT_EQ(p.model_rewrite, "small-model");

  // Both saturated: shed.
  Balancer::InFlight gb = bal.Begin(p);
  p = bal.Choose(PoolTarget(0), {});
  EXPECT_EQ(p.backend, kNoBackend);
  EXPECT_EQ(p.shed_reason, "all_saturated");
  EXPECT_EQ(p.retry_after_s, 5u);

  ga.Release();
  gb.Release();
  // a draining: unavailable, not saturated.
  ASSERT_TRUE(bal.SetDraining("a", true).ok());
  p = bal.Choose(PoolTarget(0), {});
  EXPECT_EQ(Name(cfg, p), "b");
  EXPECT_EQ(p.reason, "primary_unavailable");

  // a unhealthy and b draining: nothing is up.
  ASSERT_TRUE(bal.SetDraining("a", false).ok());
  bal.SetHealthForTest("a", false);
  ASSERT_TRUE(bal.SetDraining("b", true).ok());
  p = bal.Choose(PoolTarget(0), {});
  EXPECT_EQ(p.backend, kNoBackend);
  EXPECT_EQ(p.shed_reason, "no_backend_available");
  bal.SetHealthForTest("a", true);
  EXPECT_EQ(Name(cfg, bal.Choose(PoolTarget(0), {})), "a");
}

TEST(Balancer, PrefersOwnZoneAndSpillsOver) {
  FakeClock clock;
  GatewayConfig cfg;
  cfg.zone = "z1";
  cfg.backends = {B("a", "z1"), B("b", "z2"), B("c", "z1")};
  cfg.pools = {P("main", {{0, 1, 2}})};
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);
  auto spread = Spread(bal, cfg, PoolTarget(0), 100);
  EXPECT_EQ(spread["a"], 50);
  EXPECT_EQ(spread["c"], 50);
  EXPECT_EQ(spread["b"], 0);

  // Own zone gone: spill over to the other zone (same tier, not degraded).
  ASSERT_TRUE(bal.SetDraining("a", true).ok());
  ASSERT_TRUE(bal.SetDraining("c", true).ok());
  Pick p = bal.Choose(PoolTarget(0), {});
  EXPECT_EQ(Name(cfg, p), "b");
  EXPECT_FALSE(p.degraded);

  // zone_aware off: every zone shares.
  ASSERT_TRUE(bal.SetDraining("a", false).ok());
  ASSERT_TRUE(bal.SetDraining("c", false).ok());
  cfg.pools[0].zone_aware = false;
  bal.Configure(cfg);
  spread = Spread(bal, cfg, PoolTarget(0), 99);
  EXPECT_EQ(spread["a"], 33);
  EXPECT_EQ(spread["b"], 33);
  EXPECT_EQ(spread["c"], 33);
}

TEST(Balancer, RoundRobinVisitsInOrder) {
  FakeClock clock;
  GatewayConfig cfg;
  cfg.backends = {B("a"), B("b"), B("c")};
  cfg.pools = {P("main", {{0, 1, 2}})};
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);
  std::string seq;
  for (int i = 0; i < 6; ++i) seq += Name(cfg, bal.Choose(PoolTarget(0), {}));
  EXPECT_EQ(seq, "abcabc");
}

TEST(Balancer, WeightedFollowsWeights) {
  FakeClock clock;
  GatewayConfig cfg;
  cfg.backends = {B("a", "", 1), B("b", "", 3)};
  cfg.pools = {P("main", {{0, 1}}, Balance::kWeighted)};
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);
  auto spread = Spread(bal, cfg, PoolTarget(0), 20000);
  EXPECT_NEAR(spread["a"], 5000, 600);
  EXPECT_NEAR(spread["b"], 15000, 600);
}

TEST(Balancer, LeastRequestPrefersFewerInFlight) {
  FakeClock clock;
  GatewayConfig cfg;
  cfg.backends = {B("a"), B("b")};
  cfg.pools = {P("main", {{0, 1}}, Balance::kLeastRequest)};
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);
  Pick pa;
  pa.backend = 0;
  pa.pool = 0;
  Balancer::InFlight g1 = bal.Begin(pa), g2 = bal.Begin(pa);
  // Two candidates with equal weights: always the one with fewer in flight.
  auto spread = Spread(bal, cfg, PoolTarget(0), 200);
  EXPECT_EQ(spread["b"], 200);

  // Held requests stay balanced across four backends.
  cfg.backends = {B("w"), B("x"), B("y"), B("z")};
  cfg.pools = {P("four", {{0, 1, 2, 3}}, Balance::kLeastRequest)};
  bal.Configure(cfg);
  std::vector<Balancer::InFlight> held;
  for (int i = 0; i < 4000; ++i) held.push_back(bal.Begin(bal.Choose(PoolTarget(0), {})));
  for (const BackendStatus& s : bal.Backends()) EXPECT_NEAR(s.in_flight, 1000, 40) << s.name;
  held.clear();
  for (const BackendStatus& s : bal.Backends()) EXPECT_EQ(s.in_flight, 0) << s.name;
}

TEST(Balancer, CircuitBreakerSpillsToNextTierThenSheds) {
  FakeClock clock;
  GatewayConfig cfg;
  cfg.backends = {B("a", "", 1, 2), B("b", "", 1, 2), B("c", "", 1, 1)};
  cfg.pools = {P("main", {{0, 1}, {2}}, Balance::kLeastRequest)};
  cfg.pools[0].shed_retry_after_s = 7;
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);
  std::vector<Balancer::InFlight> held;
  std::map<std::string, int> by;
  for (int i = 0; i < 5; ++i) {
    Pick p = bal.Choose(PoolTarget(0), {});
    ++by[Name(cfg, p)];
    if (i < 4) {
      EXPECT_FALSE(p.degraded);
    } else {
      EXPECT_EQ(p.reason, "primary_saturated");
    }
    held.push_back(bal.Begin(p));
  }
  EXPECT_EQ(by["a"], 2);
  EXPECT_EQ(by["b"], 2);
  EXPECT_EQ(by["c"], 1);
  Pick p = bal.Choose(PoolTarget(0), {});
  EXPECT_EQ(p.backend, kNoBackend);
  EXPECT_EQ(p.shed_reason, "all_saturated");
  EXPECT_EQ(p.retry_after_s, 7u);
  held.pop_back();  // c's slot frees
  EXPECT_EQ(Name(cfg, bal.Choose(PoolTarget(0), {})), "c");
}

// Reports `n` outcomes for backend `b` of pool 0.
void ReportN(Balancer& bal, size_t b, Outcome o, int n) {
  Pick p;
  p.backend = b;
  p.pool = 0;
  for (int i = 0; i < n; ++i) bal.Report(p, o);
}

TEST(Balancer, EjectsAfterConsecutive5xxWithGrowingCappedTimes) {
  FakeClock clock;
  GatewayConfig cfg;
  cfg.backends = {B("a"), B("b")};
  cfg.pools = {P("main", {{0, 1}})};
  cfg.pools[0].outlier.max_ejection = seconds(90);
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);

  ReportN(bal, 0, Outcome::k5xx, 4);
  ReportN(bal, 0, Outcome::kOk, 1);  // an OK breaks the streak
  ReportN(bal, 0, Outcome::k5xx, 4);
  EXPECT_FALSE(bal.Backend("a")->ejected);
  ReportN(bal, 0, Outcome::k5xx, 1);
  auto st = bal.Backend("a");
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->ejected);
  EXPECT_EQ(st->ejected_for_ms, 30'000);
  EXPECT_EQ(st->times_ejected, 1u);
  EXPECT_EQ(st->ejections, 1u);
  EXPECT_EQ(st->failures, 9u);
  auto spread = Spread(bal, cfg, PoolTarget(0), 10);
  EXPECT_EQ(spread["b"], 10);

  clock.Advance(seconds(30));
  EXPECT_FALSE(bal.Backend("a")->ejected);
  spread = Spread(bal, cfg, PoolTarget(0), 10);
  EXPECT_EQ(spread["a"], 5);

  // Ejected again right away: 60 s, then 90 s, then capped at 90 s.
  const int64_t expected[] = {60'000, 90'000, 90'000};
  for (int64_t want : expected) {
    ReportN(bal, 0, Outcome::k5xx, 5);
    st = bal.Backend("a");
    EXPECT_TRUE(st->ejected);
    EXPECT_EQ(st->ejected_for_ms, want);
    clock.Advance(milliseconds(want));
    EXPECT_FALSE(bal.Backend("a")->ejected);
  }
  EXPECT_EQ(bal.Backend("a")->ejections, 4u);
}

TEST(Balancer, GatewayErrorsCountInBothStreaks) {
  FakeClock clock;
  GatewayConfig cfg;
  cfg.backends = {B("a"), B("b")};
  cfg.pools = {P("main", {{0, 1}})};
  cfg.pools[0].outlier.consecutive_5xx = 4;
  cfg.pools[0].outlier.consecutive_gateway_errors = 3;
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);
  // Plain 5xx count only toward consecutive_5xx (4).
  ReportN(bal, 0, Outcome::k5xx, 3);
  EXPECT_FALSE(bal.Backend("a")->ejected);
  ReportN(bal, 0, Outcome::k5xx, 1);
  EXPECT_TRUE(bal.Backend("a")->ejected);

  // Local failures: the gateway streak (3) trips first.
  ReportN(bal, 1, Outcome::kConnectFailure, 1);
  ReportN(bal, 1, Outcome::kTimeout, 1);
  EXPECT_FALSE(bal.Backend("b")->ejected);
  ReportN(bal, 1, Outcome::kReset, 1);
  EXPECT_TRUE(bal.Backend("b")->ejected);

  // Mixed: 2 x 5xx + 2 gateway errors = 4 in the 5xx streak.
  cfg.backends.push_back(B("c"));
  cfg.pools[0].tiers[0].backends.push_back(2);
  bal.Configure(cfg);
  ReportN(bal, 2, Outcome::k5xx, 2);
  ReportN(bal, 2, Outcome::kGatewayError, 1);
  EXPECT_FALSE(bal.Backend("c")->ejected);
  ReportN(bal, 2, Outcome::kGatewayError, 1);
  EXPECT_TRUE(bal.Backend("c")->ejected);
}

TEST(Balancer, EjectionMultiplierDecays) {
  FakeClock clock;
  GatewayConfig cfg;
  cfg.backends = {B("a"), B("b")};
  cfg.pools = {P("main", {{0, 1}})};
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);
  ReportN(bal, 0, Outcome::k5xx, 5);  // 30 s
  clock.Advance(seconds(30));
  ReportN(bal, 0, Outcome::k5xx, 5);  // 60 s, multiplier 2
  EXPECT_EQ(bal.Backend("a")->times_ejected, 2u);
  clock.Advance(seconds(60));
  // One base interval un-ejected: multiplier 1, so the next ejection is 60 s.
  clock.Advance(seconds(30));
  EXPECT_EQ(bal.Backend("a")->times_ejected, 1u);
  ReportN(bal, 0, Outcome::k5xx, 5);
  EXPECT_EQ(bal.Backend("a")->ejected_for_ms, 60'000);
  // Long quiet: back to the base time.
  clock.Advance(seconds(60 + 600));
  EXPECT_EQ(bal.Backend("a")->times_ejected, 0u);
  ReportN(bal, 0, Outcome::k5xx, 5);
  EXPECT_EQ(bal.Backend("a")->ejected_for_ms, 30'000);
}

TEST(Balancer, MaxEjectionPercentKeepsBackends) {
  FakeClock clock;
  GatewayConfig cfg;
  cfg.backends = {B("a"), B("b"), B("c"), B("d")};
  cfg.pools = {P("main", {{0, 1, 2, 3}})};
  cfg.pools[0].outlier.max_ejection_percent = 10;  // of 4: below one, but one may always go
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);
  ReportN(bal, 0, Outcome::k5xx, 5);
  ReportN(bal, 1, Outcome::k5xx, 5);
  EXPECT_TRUE(bal.Backend("a")->ejected);
  EXPECT_FALSE(bal.Backend("b")->ejected);
  EXPECT_EQ(bal.Backend("b")->ejections, 0u);

  cfg.pools[0].outlier.max_ejection_percent = 50;
  bal.Configure(cfg);
  ReportN(bal, 1, Outcome::k5xx, 5);
  ReportN(bal, 2, Outcome::k5xx, 5);
  EXPECT_TRUE(bal.Backend("b")->ejected);
  EXPECT_FALSE(bal.Backend("c")->ejected);
}

TEST(Balancer, OutlierDetectionCanBeOff) {
  FakeClock clock;
  GatewayConfig cfg;
  cfg.backends = {B("a")};
  cfg.pools = {P("main", {{0}})};
  cfg.pools[0].outlier.enabled = false;
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);
  ReportN(bal, 0, Outcome::kConnectFailure, 50);
  EXPECT_FALSE(bal.Backend("a")->ejected);
  EXPECT_EQ(bal.Backend("a")->failures, 50u);
}

TEST(Balancer, ShedRetryAfterIsTheEarliestReturn) {
  FakeClock clock;
  GatewayConfig cfg;
  cfg.backends = {B("a")};
  cfg.pools = {P("main", {{0}})};
  cfg.pools[0].shed_retry_after_s = 60;
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);
  ReportN(bal, 0, Outcome::kGatewayError, 5);
  Pick p = bal.Choose(PoolTarget(0), {});
  EXPECT_EQ(p.backend, kNoBackend);
  EXPECT_EQ(p.shed_reason, "no_backend_available");
  EXPECT_EQ(p.retry_after_s, 30u);
  clock.Advance(milliseconds(29'500));
  EXPECT_EQ(bal.Choose(PoolTarget(0), {}).retry_after_s, 1u);
  clock.Advance(milliseconds(500));
  EXPECT_EQ(Name(cfg, bal.Choose(PoolTarget(0), {})), "a");
}

TEST(Balancer, DrainStopsNewRequestsAndInFlightDrops) {
  FakeClock clock;
  GatewayConfig cfg;
  cfg.backends = {B("a"), B("b")};
  cfg.pools = {P("main", {{0, 1}})};
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);
  Pick p = bal.Choose(PoolTarget(0), {});
  ASSERT_EQ(Name(cfg, p), "a");
  std::optional<Balancer::InFlight> g1(bal.Begin(p));
  Balancer::InFlight g2 = bal.Begin(p);
  ASSERT_TRUE(bal.SetDraining("a", true).ok());
  auto spread = Spread(bal, cfg, PoolTarget(0), 10);
  EXPECT_EQ(spread["b"], 10);
  EXPECT_TRUE(bal.Backend("a")->draining);
  EXPECT_EQ(bal.Backend("a")->in_flight, 2);
  g1.reset();
  Balancer::InFlight moved = std::move(g2);
  EXPECT_EQ(bal.Backend("a")->in_flight, 1);
  moved = Balancer::InFlight();
  EXPECT_EQ(bal.Backend("a")->in_flight, 0);
  EXPECT_EQ(bal.Backend("a")->requests, 2u);

  Status s = bal.SetDraining("zz", true);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("'zz'"), std::string::npos);
  EXPECT_NE(s.message().find("a, b"), std::string::npos);
  EXPECT_EQ(bal.Backend("zz").status().code(), StatusCode::kNotFound);
}

TEST(Balancer, RetriesAvoidExcludedBackends) {
  FakeClock clock;
  GatewayConfig cfg;
  cfg.backends = {B("a"), B("b"), B("c", "", 1)};
  cfg.pools = {P("main", {{0, 1}, {2}}, Balance::kLeastRequest)};
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);
  std::vector<size_t> tried = {0};
  PickContext ctx;
  ctx.exclude = &tried;
  auto spread = Spread(bal, cfg, PoolTarget(0), 50, ctx);
  EXPECT_EQ(spread["b"], 50);
  // Everything in the tier tried: the next tier serves the retry (as Envoy's
  // previous_priorities retry plugin does), degraded as primary_unavailable,
  // rather than the backends that failed this request.
  tried = {0, 1};
  spread = Spread(bal, cfg, PoolTarget(0), 50, ctx);
  EXPECT_EQ(spread["c"], 50);
  Pick p = bal.Choose(PoolTarget(0), ctx);
  EXPECT_TRUE(p.degraded);
  EXPECT_EQ(p.reason, "primary_unavailable");
  // No later tier can serve: a tried backend again, rather than nothing.
  tried = {0, 1, 2};
  spread = Spread(bal, cfg, PoolTarget(0), 50, ctx);
  EXPECT_EQ(spread["c"], 50);
  GatewayConfig one;
  one.backends = {B("a")};
  one.pools = {P("main", {{0}})};
  bal.Configure(one);
  tried = {0};
  EXPECT_EQ(bal.Choose(PoolTarget(0), ctx).backend, 0u);
}

TEST(Balancer, RetryBudget) {
  FakeClock clock;
  GatewayConfig cfg;
  cfg.backends = {B("a")};
  cfg.pools = {P("main", {{0}})};
  cfg.pools[0].retry.min_retry_concurrency = 3;
  cfg.pools[0].retry.budget_percent = 20;
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);
  Pick p = bal.Choose(PoolTarget(0), {});
  std::vector<Balancer::InFlight> retries;
  for (int i = 0; i < 3; ++i) {
    auto r = bal.TryBeginRetry(p);
    ASSERT_TRUE(r.has_value()) << i;
    retries.push_back(std::move(*r));
  }
  EXPECT_FALSE(bal.TryBeginRetry(p).has_value());
  retries.pop_back();
  EXPECT_TRUE(bal.TryBeginRetry(p).has_value());

  // 100 requests in flight: 20% = 20 retries.
  retries.clear();
  std::vector<Balancer::InFlight> active;
  for (int i = 0; i < 100; ++i) active.push_back(bal.Begin(p));
  for (int i = 0; i < 20; ++i) {
    auto r = bal.TryBeginRetry(p);
    ASSERT_TRUE(r.has_value()) << i;
    retries.push_back(std::move(*r));
  }
  EXPECT_FALSE(bal.TryBeginRetry(p).has_value());
}

TEST(Balancer, PendingSlots) {
  FakeClock clock;
  GatewayConfig cfg;
  cfg.backends = {B("a")};
  cfg.pools = {P("main", {{0}})};
  cfg.pools[0].max_pending = 2;
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);
  auto a = bal.TryBeginPending(0);
  auto b = bal.TryBeginPending(0);
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(bal.TryBeginPending(0).has_value());
  a.reset();
  EXPECT_TRUE(bal.TryBeginPending(0).has_value());
  EXPECT_FALSE(bal.TryBeginPending(5).has_value());
}

TEST(Balancer, BackoffIsJitteredExponentialWithCap) {
  FakeClock clock;
  GatewayConfig cfg;
  cfg.backends = {B("a")};
  cfg.pools = {P("main", {{0}})};
  cfg.pools[0].retry.backoff_base = milliseconds(25);
  cfg.pools[0].retry.backoff_max = milliseconds(250);
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);
  const std::pair<uint32_t, int64_t> bounds[] = {{1, 25},  {2, 50},  {3, 100}, {4, 200},
                                                 {5, 250}, {9, 250}, {64, 250}};
  for (auto [n, bound] : bounds) {
    int64_t lo = bound, hi = -1;
    for (int i = 0; i < 2000; ++i) {
      int64_t ms = bal.Backoff(0, n).count();
      lo = std::min(lo, ms);
      hi = std::max(hi, ms);
    }
    EXPECT_GE(lo, 0) << n;
    EXPECT_LT(hi, bound) << n;
    EXPECT_GE(hi, bound * 8 / 10) << n;  // the range is really used
  }
}

GatewayConfig RolloutConfigOf(RolloutConfig::Sticky sticky, uint32_t w1, uint32_t w2) {
  GatewayConfig cfg;
  cfg.backends = {B("stable-0"), B("canary-0")};
  cfg.pools = {P("stable", {{0}}), P("canary", {{1}})};
  RolloutConfig r;
  r.name = "llama";
  r.targets = {{0, w1}, {1, w2}};
  r.sticky = sticky;
  r.sticky_header = "x-session";
  cfg.rollouts = {r};
  return cfg;
}

TEST(Balancer, StickyRolloutByKey) {
  FakeClock clock;
  GatewayConfig cfg = RolloutConfigOf(RolloutConfig::Sticky::kKey, 90, 10);
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);
  std::map<std::string, int> by;
  for (int c = 0; c < 10000; ++c) {
    std::string caller = "key-" + std::to_string(c);
    PickContext ctx;
    ctx.caller = caller;
    Pick first = bal.Choose(RolloutTarget_(0), ctx);
    EXPECT_EQ(first.rollout, 0u);
    for (int i = 0; i < 3; ++i) {
      Pick again = bal.Choose(RolloutTarget_(0), ctx);
      ASSERT_EQ(again.rollout_target, first.rollout_target) << caller;
      ASSERT_EQ(again.backend, first.backend) << caller;
    }
    ++by[Name(cfg, first)];
  }
  EXPECT_NEAR(by["canary-0"], 1000, 200);
  EXPECT_NEAR(by["stable-0"], 9000, 200);
}

TEST(Balancer, StickyRolloutByHeaderAndRandomWithoutValue) {
  FakeClock clock;
  GatewayConfig cfg = RolloutConfigOf(RolloutConfig::Sticky::kHeader, 50, 50);
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);
  PickContext ctx;
  ctx.caller = "ignored";
  ctx.sticky_value = "session-7";
  Pick first = bal.Choose(RolloutTarget_(0), ctx);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(bal.Choose(RolloutTarget_(0), ctx).pool, first.pool);
  // No header value: random split by weight.
  auto spread = Spread(bal, cfg, RolloutTarget_(0), 4000);
  EXPECT_NEAR(spread["canary-0"], 2000, 250);
  EXPECT_EQ(bal.Rollout("llama")->sticky, "header:x-session");
}

TEST(Balancer, RolloutWeightsChangeRollBackAndReject) {
  FakeClock clock;
  GatewayConfig cfg = RolloutConfigOf(RolloutConfig::Sticky::kNone, 100, 0);
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);
  EXPECT_EQ(Spread(bal, cfg, RolloutTarget_(0), 50)["stable-0"], 50);

  EXPECT_EQ(bal.RollbackRollout("llama").code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(bal.SetRolloutWeights("llama", {{"canary", 100}}).ok());  // stable gets 0
  EXPECT_EQ(Spread(bal, cfg, RolloutTarget_(0), 50)["canary-0"], 50);
  auto st = bal.Rollout("llama");
  ASSERT_TRUE(st.ok());
  using W = std::vector<std::pair<std::string, uint32_t>>;
  EXPECT_EQ(st->weights, (W{{"stable", 0}, {"canary", 100}}));
  EXPECT_EQ(st->previous, (W{{"stable", 100}, {"canary", 0}}));
  EXPECT_EQ(st->configured, (W{{"stable", 100}, {"canary", 0}}));
  EXPECT_EQ(st->changes, 1u);
  Json j = RolloutStatusJson(*st);
  EXPECT_EQ(j["weights"]["canary"], 100);
  EXPECT_EQ(j["sticky"], "none");

  ASSERT_TRUE(bal.RollbackRollout("llama").ok());
  EXPECT_EQ(Spread(bal, cfg, RolloutTarget_(0), 50)["stable-0"], 50);

  Status s = bal.SetRolloutWeights("llama", {{"canary", 10}, {"blue", 90}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'blue'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("stable, canary"), std::string::npos) << s.message();
  EXPECT_EQ(bal.SetRolloutWeights("llama", {{"canary", 0}, {"stable", 0}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(bal.SetRolloutWeights("llama", {{"canary", 1'000'001}}).code(),
            StatusCode::kInvalidArgument);
  s = bal.SetRolloutWeights("nope", {{"canary", 1}});
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("llama"), std::string::npos);
  EXPECT_EQ(bal.Rollout("nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(bal.Rollouts().size(), 1u);
}

TEST(Balancer, StateSurvivesConfigure) {
  FakeClock clock;
  GatewayConfig cfg = RolloutConfigOf(RolloutConfig::Sticky::kNone, 90, 10);
  cfg.backends.push_back(B("other"));
  cfg.pools[0].tiers[0].backends.push_back(2);
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);
  Pick p;
  p.backend = 0;
  p.pool = 0;
  Balancer::InFlight g = bal.Begin(p);
  ReportN(bal, 0, Outcome::k5xx, 5);
  ASSERT_TRUE(bal.SetDraining("canary-0", true).ok());
  ASSERT_TRUE(bal.SetRolloutWeights("llama", {{"stable", 50}, {"canary", 50}}).ok());

  // Reload with the backends reordered and one added.
  GatewayConfig next = cfg;
  next.backends = {cfg.backends[2], B("new"), cfg.backends[1], cfg.backends[0]};
  next.pools[0].tiers[0].backends = {3, 0, 1};
  next.pools[1].tiers[0].backends = {2};
  bal.Configure(next);
  auto st = bal.Backend("stable-0");
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->ejected);
  EXPECT_EQ(st->in_flight, 1);
  EXPECT_TRUE(bal.Backend("canary-0")->draining);
  EXPECT_EQ(bal.Rollout("llama")->weights[0].second, 50u);
  g.Release();
  EXPECT_EQ(bal.Backend("stable-0")->in_flight, 0);

  // A new address is a new backend: fresh counters (the drain mark stays).
  next.backends[2].port = 1;
  bal.Configure(next);
  EXPECT_EQ(bal.Backend("canary-0")->requests, 0u);
  EXPECT_TRUE(bal.Backend("canary-0")->draining);

  // Another set of pools in the rollout: configured weights again.
  next.pools.push_back(P("third", {{1}}));
  next.rollouts[0].targets.push_back({2, 0});
  bal.Configure(next);
  EXPECT_EQ(bal.Rollout("llama")->weights[0].second, 90u);
  EXPECT_EQ(bal.Rollout("llama")->changes, 0u);
}

TEST(Balancer, StatusJsonAndMetrics) {
  FakeClock clock;
  GatewayConfig cfg;
  cfg.zone = "z1";
  cfg.backends = {B("a", "z1"), B("b", "z2")};
  cfg.pools = {P("main", {{0}, {1}})};
  metrics::Registry reg;
  {
    Balancer bal(clock, kSeed);
    bal.Configure(cfg);
    bal.AttachMetrics(&reg);
    ReportN(bal, 0, Outcome::k5xx, 5);
    Pick p = bal.Choose(PoolTarget(0), {});  // degraded: a is ejected
    EXPECT_EQ(p.reason, "primary_unavailable");
    Balancer::InFlight g = bal.Begin(p);
    ASSERT_TRUE(bal.SetDraining("b", true).ok());
    EXPECT_EQ(bal.Choose(PoolTarget(0), {}).backend, kNoBackend);
    EXPECT_TRUE(bal.TryBeginRetry(p).has_value());

    std::string text = reg.Render();
    auto has = [&](const std::string& line) {
      EXPECT_NE(text.find(line + "\n"), std::string::npos) << line << "\n" << text;
    };
    has("gantry_gateway_backend_up{backend=\"a\",zone=\"z1\"} 0");
    has("gantry_gateway_backend_up{backend=\"b\",zone=\"z2\"} 0");
    has("gantry_gateway_backend_ejected{backend=\"a\"} 1");
    has("gantry_gateway_backend_in_flight{backend=\"b\"} 1");
    has("gantry_gateway_backend_draining{backend=\"b\"} 1");
    has("gantry_gateway_backend_ejections_total{backend=\"a\"} 1");
    has("gantry_gateway_degraded_total{pool=\"main\",reason=\"primary_unavailable\"} 1");
    has("gantry_gateway_shed_total{pool=\"main\",reason=\"no_backend_available\"} 1");
    has("gantry_gateway_retries_total{pool=\"main\"} 1");

    Json j = BackendStatusJson(*bal.Backend("a"));
    EXPECT_EQ(j["ejected"], true);
    EXPECT_EQ(j["ejected_for_ms"], 30000);
    EXPECT_EQ(j["zone"], "z1");
    EXPECT_EQ(j["address"], cfg.backends[0].host + ":" + std::to_string(cfg.backends[0].port));
    EXPECT_EQ(OutcomeName(Outcome::kGatewayError), "gateway_error");
  }
  // The collect hook outlives the Balancer harmlessly.
  EXPECT_FALSE(reg.Render().empty());
}

TEST(Balancer, UnknownTargetsShed) {
  FakeClock clock;
  Balancer bal(clock, kSeed);
  EXPECT_EQ(bal.Choose(PoolTarget(0), {}).backend, kNoBackend);
  EXPECT_EQ(bal.Choose(RolloutTarget_(3), {}).shed_reason, "no_backend_available");
  GatewayConfig cfg;
  cfg.backends = {B("a")};
  cfg.pools = {P("main", {{0}})};
  bal.Configure(cfg);
  EXPECT_EQ(bal.Choose(PoolTarget(1), {}).backend, kNoBackend);
  EXPECT_EQ(bal.Choose(PoolTarget(0), {}).backend, 0u);
}

TEST(Balancer, ConcurrentUseWithReloads) {
  FakeClock clock;
  GatewayConfig cfg = RolloutConfigOf(RolloutConfig::Sticky::kNone, 50, 50);
  cfg.backends.push_back(B("stable-1", "", 1, 3));
  cfg.pools[0].tiers[0].backends.push_back(2);
  cfg.pools[0].tiers.push_back(TierConfig{{1}, "fallback"});
  cfg.pools[0].balance = Balance::kLeastRequest;
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      std::vector<size_t> tried;
      PickContext ctx;
      ctx.exclude = &tried;
      for (int i = 0; i < 20000 && !stop; ++i) {
        Pick p = bal.Choose(RolloutTarget_(0), ctx);
        if (p.backend == kNoBackend) continue;
        Balancer::InFlight g = bal.Begin(p);
        bal.Report(p, (i + w) % 7 == 0 ? Outcome::k5xx : Outcome::kOk);
        if (i % 5 == 0) auto r = bal.TryBeginRetry(p);
      }
    });
  }
  for (int i = 0; i < 50; ++i) {
    cfg.pools[0].outlier.consecutive_5xx = 1 + i % 3;
    bal.Configure(cfg);
    (void)bal.SetRolloutWeights("llama", {{"stable", 1 + i % 10}, {"canary", 1}});
    (void)bal.SetDraining("stable-1", i % 2 == 0);
    clock.Advance(seconds(10));
    (void)bal.Backends();
  }
  for (auto& t : workers) t.join();
  for (const BackendStatus& s : bal.Backends()) EXPECT_EQ(s.in_flight, 0) << s.name;
}

// A pool at zero with a fallback tier serves degraded instead of holding; its
// fallback answers must still wake the primary tier, or it stays at zero.
TEST(Balancer, FallbackAnswersWakeAPrimaryTierAtZero) {
  FakeClock clock;
  GatewayConfig cfg;
  cfg.backends = {B("fallback")};
  cfg.pools = {P("churn", {{}, {0}}), P("plain", {{}, {0}})};
  cfg.pools[0].scale_from_zero.enabled = true;
  cfg.pools[0].scale_from_zero.wake = "http://127.0.0.1:1/wake/churn";
  Balancer bal(clock, kSeed);
  bal.Configure(cfg);

  EXPECT_TRUE(bal.DueWakes().empty());  // no request yet
  for (int i = 0; i < 3; ++i) {
    Pick p = bal.Choose(PoolTarget(0), {});
    ASSERT_EQ(p.backend, 0u);
    EXPECT_TRUE(p.degraded);
    EXPECT_EQ(p.reason, "primary_unavailable");
    EXPECT_FALSE(bal.Holding(p));
  }
  EXPECT_EQ(bal.Choose(PoolTarget(1), {}).backend, 0u);  // no scale_from_zero: never woken

  std::vector<Balancer::WakeCall> wakes = bal.DueWakes();
  ASSERT_EQ(wakes.size(), 1u);
  EXPECT_EQ(wakes[0].pool, "churn");
  EXPECT_EQ(wakes[0].held, 0);
  EXPECT_EQ(wakes[0].fallback_served, 3);
  (void)bal.Choose(PoolTarget(0), {});
  EXPECT_TRUE(bal.DueWakes().empty());  // at most one call per second
  clock.Advance(seconds(1));
  wakes = bal.DueWakes();
  ASSERT_EQ(wakes.size(), 1u);
  EXPECT_EQ(wakes[0].fallback_served, 1);  // counted since the previous call
  clock.Advance(seconds(1));
  EXPECT_TRUE(bal.DueWakes().empty());  // no new fallback answer: no call
}

TEST(Balancer, HoldQueueKeepsArrivalOrderAndItsBound) {
  FakeClock clock;
  GatewayConfig cfg;
  cfg.pools = {P("llm", {{}})};
  cfg.pools[0].scale_from_zero.enabled = true;
  cfg.pools[0].scale_from_zero.hold = 2;
  cfg.pools[0].scale_from_zero.wake = "http://127.0.0.1:1/wake";
  Balancer bal(clock, kSeed);
  metrics::Registry reg;
  bal.AttachMetrics(&reg);
  bal.Configure(cfg);

  Pick p = bal.Choose(PoolTarget(0), {});
  EXPECT_EQ(p.backend, kNoBackend);
  EXPECT_EQ(p.shed_reason, "no_backend_available");
  EXPECT_FALSE(bal.Holding(p));
  std::optional<Balancer::Held> first = bal.TryHold(p);
  std::optional<Balancer::Held> second = bal.TryHold(p);
  ASSERT_TRUE(first && second);
  EXPECT_FALSE(bal.TryHold(p));  // over `hold`
  EXPECT_TRUE(bal.Holding(p));
  EXPECT_TRUE(bal.FirstInLine(*first));
  EXPECT_FALSE(bal.FirstInLine(*second));

  // One wake call per second while anything is held.
  auto wakes = bal.DueWakes();
  ASSERT_EQ(wakes.size(), 1u);
  EXPECT_EQ(wakes[0].pool, "llm");
  EXPECT_EQ(wakes[0].held, 2);
  EXPECT_TRUE(bal.DueWakes().empty());
  clock.Advance(seconds(1));
  EXPECT_EQ(bal.DueWakes().size(), 1u);

  std::vector<PoolStatus> pools = bal.Pools();
  ASSERT_EQ(pools.size(), 1u);
  EXPECT_EQ(pools[0].held, 2);
  EXPECT_EQ(pools[0].up, 0);

  first->End(HoldOutcome::kReleased);
  EXPECT_TRUE(bal.FirstInLine(*second));
  second->End(HoldOutcome::kTimeout);
  EXPECT_FALSE(bal.Holding(p));
  clock.Advance(seconds(1));
  EXPECT_TRUE(bal.DueWakes().empty());  // nothing held: no wake

  std::string text = reg.Render();
  EXPECT_NE(text.find("gantry_gateway_held_total{outcome=\"released\",pool=\"llm\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("gantry_gateway_held_total{outcome=\"timeout\",pool=\"llm\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("gantry_gateway_held_total{outcome=\"overflow\",pool=\"llm\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("gantry_gateway_pool_held{pool=\"llm\"} 0"), std::string::npos);
  EXPECT_NE(text.find("gantry_gateway_pool_backends_up{pool=\"llm\"} 0"), std::string::npos);

  // A destroyed Held leaves the queue without counting.
  {
    std::optional<Balancer::Held> gone = bal.TryHold(p);
    ASSERT_TRUE(gone);
    EXPECT_TRUE(bal.Holding(p));
  }
  EXPECT_FALSE(bal.Holding(p));
}

TEST(Balancer, BackendAddedAtRunTimeWaitsForItsFirstHealthCheck) {
  FakeClock clock;
  GatewayConfig cfg;
  cfg.backends = {B("a")};
  cfg.pools = {P("llm", {{0}})};
  cfg.pools[0].health.enabled = true;
  cfg.pools[0].health.interval = seconds(60);
  Balancer bal(clock, kSeed);
  metrics::Registry reg;
  bal.AttachMetrics(&reg);
  bal.Configure(cfg);
  bal.SetHealthForTest("a", true);
  EXPECT_TRUE(bal.Backend("a")->healthy);

  BackendConfig added = B("b");
  added.added_at_runtime = true;
  cfg.backends.push_back(added);
  cfg.pools[0].tiers[0].backends.push_back(1);
  bal.Configure(cfg);
  EXPECT_FALSE(bal.Backend("b")->healthy);  // no traffic before a check passes
  EXPECT_TRUE(bal.Backend("a")->healthy);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(Name(cfg, bal.Choose(PoolTarget(0), {})), "a");
  std::vector<PoolStatus> pools = bal.Pools();
  ASSERT_EQ(pools.size(), 1u);
  EXPECT_EQ(pools[0].backends, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(pools[0].added, (std::vector<std::string>{"b"}));
  EXPECT_EQ(pools[0].up, 1);
  bal.RefreshMetrics();
  EXPECT_NE(reg.Render().find("gantry_gateway_pool_backends_up{pool=\"llm\"} 1"),
            std::string::npos);

  // Removed again (the same as a reload without it): its state stays valid for
  // requests in flight, and it takes nothing new.
  Pick pb;
  pb.backend = 1;
  pb.pool = 0;
  bal.SetHealthForTest("b", true);
  Balancer::InFlight g = bal.Begin(pb);
  cfg.backends.pop_back();
  cfg.pools[0].tiers[0].backends.pop_back();
  bal.Configure(cfg);
  EXPECT_FALSE(bal.Backend("b").ok());
  g.Release();  // touches the kept state, not freed memory
  EXPECT_EQ(bal.Pools()[0].in_flight, 0);
}

}  // namespace
}  // namespace gantry::gateway
