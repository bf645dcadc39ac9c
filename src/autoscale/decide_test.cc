// Known-answer tests of the scaling decisions: metric traces replayed through
// a decider, every decision checked against numbers worked out by hand from
// the documented rules (../shared/reference/jobs-autoscale.md B5, B6). The
// arithmetic is in the comments next to each row.
#include "gantry/autoscale/decide.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace gantry::autoscale {
namespace {

using std::chrono::seconds;
using std::chrono::system_clock;

// Monday 2026-12-07 00:00:00 UTC.
const system_clock::time_point kMonday{seconds(1796601600)};
constexpr int64_t kMinute = 60, kHour = 3600, kDay = 86400;

// One row of a trace: at `t` seconds, with `current` instances and these
// metric values (nullopt: missing), the decider must answer `want` / `reason`.
struct Step {
  double t;
  int64_t current;
  std::vector<std::optional<double>> values;
  int64_t want;
  Reason reason;
  bool wake = false;
};

class Trace {
 public:
  Trace(DecisionSpec spec, std::vector<std::string> names, system_clock::time_point wall0 = kMonday)
      : names_(std::move(names)), wall0_(wall0) {
    auto d = NewDecider(spec, std::chrono::nanoseconds(0));
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    if (d.ok()) decider_ = std::move(*d);
  }

  // Feeds each row; the applied count is what the decider asked for (an
  // actuator that always succeeds), reported through Applied().
  void Run(const std::vector<Step>& steps) {
    ASSERT_NE(decider_, nullptr);
    for (const Step& s : steps) {
      const Decision d = Decide(s.t, s.current, s.values, s.wake);
      EXPECT_EQ(d.desired, s.want) << "t=" << s.t << ": " << d.explanation;
      EXPECT_EQ(ReasonName(d.reason), ReasonName(s.reason)) << "t=" << s.t << ": " << d.explanation;
      if (d.desired != s.current) decider_->Applied(Now(s.t), s.current, d.desired);
    }
  }

  Decision Decide(double t, int64_t current, const std::vector<std::optional<double>>& values,
                  bool wake = false) {
    Observation obs;
    obs.now = Now(t);
    obs.wall = wall0_ +
               std::chrono::duration_cast<system_clock::duration>(std::chrono::duration<double>(t));
    obs.current = current;
    obs.ready = current;
    obs.wake = wake;
    for (size_t i = 0; i < names_.size(); ++i) {
      MetricSample m;
      m.name = names_[i];
      if (i < values.size() && values[i]) {
        m.value = values[i];
      } else {
        m.error = "connection refused";
      }
      obs.metrics.push_back(m);
    }
    return decider_->Decide(obs);
  }

  Decider& decider() { return *decider_; }

 private:
  static std::chrono::nanoseconds Now(double t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(t));
  }
  std::vector<std::string> names_;
  system_clock::time_point wall0_;
  std::unique_ptr<Decider> decider_;
};

DecisionSpec Hpa(std::vector<MetricTarget> metrics, int64_t min, int64_t max) {
  DecisionSpec s;
  s.target = "llm";
  s.min = min;
  s.max = max;
  s.mode = Mode::kHpa;
  s.hpa.metrics = std::move(metrics);
  return s;
}

MetricTarget Queue(double target, double activation = 0) {
  return {.name = "queue",
          .type = TargetType::kAverageValue,
          .target = target,
          .activation = activation};
}

constexpr auto kOut = Reason::kScaleOut;
constexpr auto kIn = Reason::kScaleIn;
constexpr auto kHold = Reason::kNoChange;
constexpr auto kTol = Reason::kWithinTolerance;
constexpr auto kStab = Reason::kStabilized;
constexpr auto kRate = Reason::kRateLimited;
constexpr auto kMissing = Reason::kMetricsMissing;

// --- HPA ratio rule and tolerance ---------------------------------------------------

TEST(HpaDecide, ToleranceBandEdges) {
  DecisionSpec spec = Hpa({Queue(1)}, 1, 100);
  spec.hpa.down.stabilization = seconds(0);
  // Each on a fresh decider at 10 instances, target 1 per instance.
  struct Case {
    double queue;
    int64_t want;
    Reason reason;
  } cases[] = {
      {11, 10, kTol},    // 11 / (1 x 10) = 1.1 = 1 + 0.1: inside the band, hold
      {11.1, 12, kOut},  // 1.11 > 1.1: ceil(11.1 / 1) = 12 (up limit max(10+4, 20) = 20)
      {9, 10, kTol},     // 0.9 = 1 - 0.1: inside, hold
      {8.9, 9, kIn},     // 0.89 < 0.9: ceil(8.9) = 9 (down limit 10 x (1 - 1) = 0)
      {10, 10, kTol},    // ratio 1
  };
  for (const Case& c : cases) {
    Trace tr(spec, {"queue"});
    tr.Run({{0, 10, {c.queue}, c.want, c.reason}});
  }
}

TEST(HpaDecide, UtilizationScalesCurrent) {
  DecisionSpec spec = Hpa({{.name = "gpu", .type = TargetType::kUtilization, .target = 70}}, 1, 20);
  Trace tr(spec, {"gpu"});
  // 91 / 70 = 1.3 > 1.1: ceil(1.3 x 3) = ceil(3.9) = 4.
  tr.Run({{0, 3, {91}, 4, kOut}});
  // kValue: the ratio scales current too. 150 / 100 = 1.5: ceil(1.5 x 4) = 6.
  DecisionSpec v = Hpa({{.name = "lag", .type = TargetType::kValue, .target = 100}}, 1, 20);
  Trace tv(v, {"lag"});
  tv.Run({{0, 4, {150}, 6, kOut}});
}

TEST(HpaDecide, SeveralMetricsLargestWins) {
  DecisionSpec spec =
      Hpa({Queue(1), {.name = "busy", .type = TargetType::kUtilization, .target = 50}}, 1, 100);
  Trace tr(spec, {"queue", "busy"});
  // queue: ceil(5 / 1) = 5; busy: 60 / 50 = 1.2, ceil(1.2 x 10) = 12. max = 12.
  tr.Run({{0, 10, {5, 60}, 12, kOut}});
}

// --- Stabilization -------------------------------------------------------------------

TEST(HpaDecide, ScaleDownStabilizationHoldsTheWindowMax) {
  Trace tr(Hpa({Queue(1)}, 1, 100), {"queue"});
  tr.Run({
      {0, 10, {10}, 10, kTol},    // ratio 1: recommendation 10
      {15, 10, {4}, 10, kStab},   // recommendation 4; max of (t-300, t] = 10
      {150, 10, {6}, 10, kStab},  // recommendation 6; max still 10 (t=0)
      {285, 10, {4}, 10, kStab},  // 0 > 285 - 300: t=0 still in the window
      // t=0 leaves the window (0 > 300 - 300 is false): max{4, 6, 4, 4} = 6;
      // the down policy (100 % / 15 s from 10 -> 0) lets 6 through.
      {300, 10, {4}, 6, kStab},
      {315, 6, {4}, 6, kStab},  // 4 / (1 x 6) = 0.67 -> 4; window max 6 (t=150)
      {449, 6, {4}, 6, kStab},  // 150 > 449 - 300: still held
      {450, 6, {4}, 4, kIn},    // window (150, 450]: all 4 -> scale in to 4
  });
}

TEST(HpaDecide, ScaleUpStabilizationTakesTheWindowMin) {
  DecisionSpec spec = Hpa({Queue(1)}, 1, 100);
  spec.hpa.up.stabilization = seconds(60);
  Trace tr(spec, {"queue"});
  tr.Run({
      {0, 2, {2}, 2, kTol},    // recommendation 2
      {15, 2, {8}, 2, kStab},  // recommendation 8; min over (t-60, t] = 2: held
      {30, 2, {6}, 2, kStab},  // min{2, 8, 6} = 2
      {60, 2, {7}, 6, kStab},  // t=0 left: min{8, 6, 7} = 6; up limit max(2+4, 4) = 6
  });
}

// --- Rate policies -------------------------------------------------------------------

TEST(HpaDecide, DefaultScaleUpPolicyIsMaxOfFourPodsAndDouble) {
  Trace tr(Hpa({Queue(1)}, 1, 100), {"queue"});
  tr.Run({
      // Up limit = max(start + 4, ceil(start x 2)), start = the count 15 s ago.
      {0, 1, {100}, 5, kRate},     // max(1+4, 2) = 5
      {5, 5, {100}, 5, kRate},     // +4 at t=0 is inside (t-15, t]: start 1 -> limit 5
      {15, 5, {100}, 10, kRate},   // t=0 left the period: start 5 -> max(9, 10) = 10
      {30, 10, {100}, 20, kRate},  // max(14, 20)
      {45, 20, {100}, 40, kRate},  // max(24, 40)
      {60, 40, {100}, 80, kRate},  // max(44, 80)
      {75, 80, {100}, 100, kOut},  // max(84, 160) lets 100 through
  });
}

TEST(HpaDecide, PercentOnlyDoublesEachPeriod) {
  DecisionSpec spec = Hpa({Queue(1)}, 1, 100);
  spec.hpa.up.policies = {{ScalingPolicy::Type::kPercent, 100, seconds(15)}};
  Trace tr(spec, {"queue"});
  tr.Run({
      {0, 1, {100}, 2, kRate},  // ceil(1 x 2)
      {15, 2, {100}, 4, kRate},
      {30, 4, {100}, 8, kRate},
      {45, 8, {100}, 16, kRate},
  });
}

TEST(HpaDecide, MinSelectTakesTheSmallerChange) {
  DecisionSpec spec = Hpa({Queue(1)}, 1, 100);
  spec.hpa.up.select = SelectPolicy::kMin;  // Pods 4 and Percent 100 per 15 s
  Trace tr(spec, {"queue"});
  tr.Run({
      {0, 1, {100}, 2, kRate},     // min(1+4, 2) = 2
      {15, 2, {100}, 4, kRate},    // min(6, 4)
      {30, 4, {100}, 8, kRate},    // min(8, 8)
      {45, 8, {100}, 12, kRate},   // min(12, 16): the Pods policy now binds
      {60, 12, {100}, 16, kRate},  // min(16, 24)
  });
}

TEST(HpaDecide, ScaleDownPoliciesMinAndMax) {
  DecisionSpec spec = Hpa({Queue(1)}, 1, 100);
  spec.hpa.down = {.stabilization = seconds(0),
                   .tolerance = 0.1,
                   .select = SelectPolicy::kMin,
                   .policies = {{ScalingPolicy::Type::kPods, 2, seconds(15)},
                                {ScalingPolicy::Type::kPercent, 50, seconds(15)}}};
  {
    // Min (the smaller cut): max(start - 2, floor(start x 0.5)).
    Trace tr(spec, {"queue"});
    tr.Run({
        {0, 10, {1}, 8, kRate},  // max(8, 5)
        {15, 8, {1}, 6, kRate},  // max(6, 4)
        {30, 6, {1}, 4, kRate},  // max(4, 3)
        {45, 4, {1}, 2, kRate},  // max(2, 2)
        {60, 2, {1}, 1, kIn},    // max(0, 1) = 1 = the recommendation
    });
  }
  spec.hpa.down.select = SelectPolicy::kMax;
  {
    // Max (the larger cut): min(start - 2, floor(start x 0.5)).
    Trace tr(spec, {"queue"});
    tr.Run({
        {0, 10, {1}, 5, kRate},  // min(8, 5)
        {15, 5, {1}, 2, kRate},  // min(3, 2)
        {30, 2, {1}, 1, kIn},    // min(0, 1) = 0 <= 1: the recommendation 1
    });
  }
}

TEST(HpaDecide, DisabledHoldsThatDirection) {
  DecisionSpec spec = Hpa({Queue(1)}, 1, 100);
  spec.hpa.down.stabilization = seconds(0);
  spec.hpa.down.select = SelectPolicy::kDisabled;
  Trace tr(spec, {"queue"});
  tr.Run({
      {0, 10, {1}, 10, kRate},    // recommendation 1, scale-down disabled
      {15, 10, {30}, 20, kRate},  // scale-up still works: 30 capped at max(10+4, 20) = 20
  });
}

// --- KEDA: activation and cooldown to zero ------------------------------------------

TEST(KedaDecide, ActivationIsStrictlyAboveTheThreshold) {
  DecisionSpec spec = Hpa({Queue(4, /*activation=*/2)}, 0, 10);
  Trace tr(spec, {"queue"});
  tr.Run({
      {0, 0, {2}, 0, kHold},               // 2 > 2 is false: stay at 0
      {30, 0, {3}, 1, Reason::kActivate},  // 3 > 2: max(1, ceil(3 / 4) = 1) = 1
      // ceil(10 / 4) = 3; up limit from 1 (t=30 is outside (30, 45]): max(5, 2)
      {45, 1, {10}, 3, kOut},
      // not active (0 <= 2), 15 s since; recommendation 0, window max 3
      {60, 3, {0}, 3, kStab},
      {344, 3, {0}, 3, kStab},                // 299 s since t=45 < 300
      {345, 3, {0}, 0, Reason::kDeactivate},  // 300 s >= cooldown 300 s
      {360, 0, {0}, 0, kHold},
  });
}

TEST(KedaDecide, ActivationGoesStraightToTheRecommendation) {
  Trace tr(Hpa({Queue(4)}, 0, 10), {"queue"});
  // At 0 the activation bypasses the rate policies: ceil(37 / 4) = 10.
  tr.Run({{0, 0, {37}, 10, Reason::kActivate}});
}

TEST(KedaDecide, WakeActivatesWithoutAMetric) {
  Trace tr(Hpa({Queue(4)}, 0, 10), {"queue"});
  tr.Run({
      {0, 0, {0}, 0, kHold},
      {1, 0, {0}, 1, Reason::kActivate, /*wake=*/true},  // the gateway holds requests
  });
}

TEST(KedaDecide, WakeActivatesWhenTheMetricIsMissing) {
  // The gateway's wake is enough: every metric missing would otherwise hold at 0.
  Trace tr(Hpa({Queue(4)}, 0, 10), {"queue"});
  tr.Run({
      {0, 0, {std::nullopt}, 0, kMissing},
      {1, 0, {std::nullopt}, 1, Reason::kActivate, /*wake=*/true},
  });
}

TEST(KedaDecide, CooldownKeepsOneUntilItEnds) {
  DecisionSpec spec = Hpa({Queue(4)}, 0, 10);
  spec.hpa.down.stabilization = seconds(60);
  Trace tr(spec, {"queue"});
  tr.Run({
      {0, 2, {8}, 2, kTol},  // 8 / (4 x 2) = 1; active (8 > 0)
      // inactive 100 s; recommendation 0 (t=0 left the 60 s window), down limit 0:
      // the HPA would go to 0 but KEDA's floor is 1 until the cooldown ends.
      {100, 2, {0}, 1, Reason::kCooldown},
      {299, 1, {0}, 1, Reason::kCooldown},    // 299 s < 300 s
      {300, 1, {0}, 0, Reason::kDeactivate},  // 300 s since t=0
  });
}

TEST(KedaDecide, MinOneIgnoresActivation) {
  DecisionSpec spec = Hpa({Queue(4, /*activation=*/2)}, 1, 10);
  Trace tr(spec, {"queue"});
  tr.Run({
      // 0 / (4 x 1) = 0 < 0.9 -> ceil(0) = 0 -> the clamp to min 1
      {0, 1, {0}, 1, Reason::kStabilized},    // the history is seeded with the current 1
      {600, 1, {0}, 1, Reason::kClampedMin},  // never deactivated
      {615, 0, {0}, 1, Reason::kClampedMin},  // at 0 with min 1: the clamp, no activation needed
  });
}

TEST(KedaDecide, InitialCooldownDelaysTheFirstDeactivation) {
  DecisionSpec spec = Hpa({Queue(4)}, 0, 10);
  spec.hpa.initial_cooldown = seconds(600);
  spec.hpa.down.stabilization = seconds(0);
  Trace tr(spec, {"queue"});
  tr.Run({
      {300, 1, {0}, 1, Reason::kCooldown},  // 300 s idle but 300 s < initial 600 s
      {600, 1, {0}, 0, Reason::kDeactivate},
  });
}

// --- Missing metrics and the fallback -------------------------------------------------

TEST(HpaDecide, MissingMetrics) {
  DecisionSpec spec = Hpa({{.name = "a", .target = 1}, {.name = "b", .target = 1}}, 1, 100);
  spec.hpa.down.stabilization = seconds(0);
  spec.hpa.fallback = {.failure_threshold = 3, .replicas = 2};
  Trace tr(spec, {"a", "b"});
  tr.Run({
      {0, 10, {std::nullopt, 5}, 10, kMissing},              // b says 5 (down), a missing: hold
      {15, 10, {std::nullopt, 20}, 20, kOut},                // b says 20 (up): act on it
      {30, 20, {std::nullopt, std::nullopt}, 20, kMissing},  // failure 1
      {45, 20, {std::nullopt, std::nullopt}, 20, kMissing},  // failure 2
      {60, 20, {std::nullopt, std::nullopt}, 2, Reason::kFallback},  // 3: fallback 2
      {75, 2, {2, 2}, 2, kTol},                                      // back: 2 / (1 x 2) = 1
      {90, 2, {std::nullopt, std::nullopt}, 2, kMissing},            // counting starts over
  });
}

// --- Azure rules ------------------------------------------------------------------------

Rule CpuRule(Direction dir, Op op, double threshold, int64_t value = 1,
             ActionType type = ActionType::kChangeCount) {
  return {.metric = "cpu",
          .aggregation = TimeAggregation::kLast,
          .window = seconds(300),
          .op = op,
          .threshold = threshold,
          .direction = dir,
          .type = type,
          .value = value,
          .cooldown = seconds(300)};
}

DecisionSpec Rules(std::vector<Rule> rules, int64_t min = 1, int64_t max = 10, int64_t def = 1) {
  DecisionSpec s;
  s.target = "vmss";
  s.mode = Mode::kRules;
  s.min = 0;
  s.max = 100;
  Profile p;
  p.name = "default";
  p.minimum = min;
  p.maximum = max;
  p.default_count = def;
  p.rules = std::move(rules);
  s.profiles.push_back(std::move(p));
  return s;
}

TEST(RulesDecide, AnyOutRuleTheLargestResult) {
  Rule queue_out{.metric = "queue",
                 .aggregation = TimeAggregation::kLast,
                 .divide_per_instance = true,
                 .op = Op::kGreaterThan,
                 .threshold = 10,
                 .type = ActionType::kChangeCount,
                 .value = 2};
  DecisionSpec spec = Rules({CpuRule(Direction::kIncrease, Op::kGreaterThan, 80), queue_out});
  {
    Trace tr(spec, {"cpu", "queue"});
    // cpu 85 > 80: 3 + 1 = 4; queue 12 / 3 = 4, not > 10.
    tr.Run({{0, 3, {85, 12}, 4, kOut}});
  }
  {
    Trace tr(spec, {"cpu", "queue"});
    // cpu: 4; queue 45 / 3 = 15 > 10: 3 + 2 = 5. Largest: 5.
    tr.Run({{0, 3, {85, 45}, 5, kOut}});
  }
}

TEST(RulesDecide, ScaleInOnlyWhenEveryInRuleFires) {
  Rule queue_in{.metric = "queue",
                .aggregation = TimeAggregation::kLast,
                .divide_per_instance = true,
                .op = Op::kLessThan,
                .threshold = 5,
                .direction = Direction::kDecrease};
  DecisionSpec spec = Rules({CpuRule(Direction::kIncrease, Op::kGreaterThan, 80),
                             CpuRule(Direction::kDecrease, Op::kLessThanOrEqual, 60), queue_in});
  {
    Trace tr(spec, {"cpu", "queue"});
    // cpu 50 <= 60 and 9 / 3 = 3 < 5: both fire, 3 - 1 = 2. Projection 50 x 3/2 = 75,
    // not > 80.
    tr.Run({{0, 3, {50, 9}, 2, kIn}});
  }
  {
    Trace tr(spec, {"cpu", "queue"});
    // 18 / 3 = 6 is not < 5: not every in-rule fires.
    tr.Run({{0, 3, {50, 18}, 3, Reason::kNoRule}});
  }
}

TEST(RulesDecide, FlappingProtection) {
  DecisionSpec spec = Rules({CpuRule(Direction::kIncrease, Op::kGreaterThan, 80),
                             CpuRule(Direction::kDecrease, Op::kLessThanOrEqual, 60)});
  {
    // The documented example: 3 instances at 60 %; on 2 that is 60 x 3 / 2 = 90 > 80.
    Trace tr(spec, {"cpu"});
    tr.Run({{0, 3, {60}, 3, Reason::kFlapping}});
  }
  spec.profiles[0].rules[1].value = 2;
  {
    // 4 at 50 %, in-rule -2: on 2, 50 x 4/2 = 100 > 80; on 3, 50 x 4/3 = 66.7: cut to 3.
    Trace tr(spec, {"cpu"});
    tr.Run({{0, 4, {50}, 3, kIn}});
  }
}

TEST(RulesDecide, CooldownAfterAnyAction) {
  DecisionSpec spec = Rules({CpuRule(Direction::kIncrease, Op::kGreaterThan, 80),
                             CpuRule(Direction::kDecrease, Op::kLessThan, 30)});
  Trace tr(spec, {"cpu"});
  tr.Run({
      {0, 3, {85}, 4, kOut},  // cooldown until 0 + 300 s
      {60, 4, {95}, 4, Reason::kCooldown},
      {299, 4, {95}, 4, Reason::kCooldown},
      {300, 4, {95}, 5, kOut},               // over: 5, cooldown until 600 s
      {360, 5, {10}, 5, Reason::kCooldown},  // the cooldown holds scale-in too
      {600, 5, {10}, 4, kIn},                // 10 x 5/4 = 12.5, not > 80
  });
}

TEST(RulesDecide, TimeAggregationOverTheWindow) {
  Rule avg = CpuRule(Direction::kIncrease, Op::kGreaterThan, 80);
  avg.aggregation = TimeAggregation::kAverage;
  {
    Trace tr(Rules({avg}), {"cpu"});
    tr.Run({
        {0, 2, {70}, 2, Reason::kNoRule},   // average {70} = 70
        {60, 2, {90}, 2, Reason::kNoRule},  // (70 + 90) / 2 = 80, not > 80
        {120, 2, {100}, 3, kOut},           // (70 + 90 + 100) / 3 = 86.7
    });
  }
  Rule max = avg;
  max.aggregation = TimeAggregation::kMaximum;
  max.window = seconds(60);
  {
    Trace tr(Rules({max}), {"cpu"});
    tr.Run({
        {0, 2, {100}, 3, kOut},              // max {100}
        {400, 3, {50}, 3, Reason::kNoRule},  // window (340, 400]: {50}
    });
  }
  Rule total = avg;
  total.aggregation = TimeAggregation::kTotal;
  total.threshold = 100;
  Rule count = avg;
  count.aggregation = TimeAggregation::kCount;
  count.threshold = 2;
  count.value = 3;
  {
    Trace tr(Rules({total, count}), {"cpu"});
    tr.Run({
        {0, 1, {40}, 1, Reason::kNoRule},   // total 40, count 1
        {60, 1, {40}, 1, Reason::kNoRule},  // total 80, count 2 (not > 2)
        {120, 1, {40}, 4, kOut},            // total 120 > 100: +1; count 3 > 2: +3 -> 4
    });
  }
}

TEST(RulesDecide, PercentAndExactActions) {
  auto one = [](Rule r, int64_t current, double cpu, int64_t want, Reason reason) {
    Trace tr(Rules({r}, 1, 100), {"cpu"});
    tr.Run({{0, current, {cpu}, want, reason}});
  };
  using AT = ActionType;
  // +50 % of 10 = 5 -> 15.
  one(CpuRule(Direction::kIncrease, Op::kGreaterThan, 80, 50, AT::kPercentChangeCount), 10, 90, 15,
      kOut);
  // -25 % of 10 = 2.5, rounded up to 3 -> 7.
  one(CpuRule(Direction::kDecrease, Op::kLessThan, 30, 25, AT::kPercentChangeCount), 10, 10, 7,
      kIn);
  // -10 % of 3 = 0.3 -> at least 1 -> 2.
  one(CpuRule(Direction::kDecrease, Op::kLessThan, 30, 10, AT::kPercentChangeCount), 3, 10, 2, kIn);
  // Exactly 6.
  one(CpuRule(Direction::kIncrease, Op::kGreaterThan, 80, 6, AT::kExactCount), 3, 90, 6, kOut);
  // An in-rule never goes below the profile minimum (1): 2 - 5 -> 1.
  one(CpuRule(Direction::kDecrease, Op::kLessThan, 30, 5), 2, 10, 1, kIn);
}

TEST(RulesDecide, MissingMetricsNeverScaleInAndGoToTheDefault) {
  DecisionSpec spec = Rules({CpuRule(Direction::kIncrease, Op::kGreaterThan, 80),
                             CpuRule(Direction::kDecrease, Op::kLessThan, 30)},
                            1, 10, /*default=*/3);
  {
    Trace tr(spec, {"cpu"});
    tr.Run({{0, 1, {std::nullopt}, 3, kMissing}});  // below the default 3: out to 3
  }
  {
    Trace tr(spec, {"cpu"});
    tr.Run({{0, 5, {std::nullopt}, 5, kMissing}});  // above it: hold, never in
  }
}

TEST(RulesDecide, ProfileSelectionFixedDateThenRecurrenceThenDefault) {
  DecisionSpec spec = Rules({}, 1, 5, 1);
  Profile weekday = spec.profiles[0];
  weekday.name = "weekday";
  weekday.minimum = weekday.default_count = 3;
  weekday.maximum = 10;
  weekday.recurrence = WeeklyWindow{.days = 0x3e, .from_minute = 8 * 60, .to_minute = 20 * 60};
  Profile launch = weekday;
  launch.name = "launch";
  launch.minimum = launch.default_count = 6;
  launch.recurrence.reset();
  launch.fixed_date = std::make_pair(kMonday + std::chrono::hours(24),   // Tue 00:00
                                     kMonday + std::chrono::hours(48));  // Wed 00:00
  spec.profiles.push_back(weekday);
  spec.profiles.push_back(launch);
  Trace tr(spec, {"cpu"}, kMonday);
  tr.Run({
      {10 * kHour, 1, {}, 3, Reason::kClampedMin},         // Mon 10:00: weekday, min 3
      {21 * kHour, 1, {}, 1, Reason::kNoRule},             // Mon 21:00: default
      {kDay + 10 * kHour, 3, {}, 6, Reason::kClampedMin},  // Tue 10:00: the fixed date wins
      {-kDay + 10 * kHour, 1, {}, 1, Reason::kNoRule},     // Sun 10:00: default
  });
}

TEST(RulesDecide, NoProfileMatchesHolds) {
  DecisionSpec spec = Rules({}, 2, 5, 2);
  spec.profiles[0].recurrence = WeeklyWindow{.days = 1 << 6};  // Saturdays only, no default
  Trace tr(spec, {"cpu"}, kMonday);
  // Monday: nothing matches; hold, clamped by the spec's own [0, 100].
  tr.Run({{0, 1, {50}, 1, Reason::kNoRule}});
  // Saturday: the profile's min 2.
  tr.Run({{5 * kDay, 1, {50}, 2, Reason::kClampedMin}});
}

// --- Schedules, floor metric, clamp -----------------------------------------------------

TEST(Bounds, ScheduleFloorWeekdaysInUtcOffset) {
  DecisionSpec spec = Hpa({Queue(1)}, 1, 10);
  // Weekdays 08:00-20:00 at UTC+01:00, at least 2.
  spec.schedules.push_back({.name = "office",
                            .window = {.days = 0x3e,
                                       .from_minute = 8 * 60,
                                       .to_minute = 20 * 60,
                                       .utc_offset_minutes = 60},
                            .min = 2});
  auto at = [&](int64_t t) {
    Trace tr(spec, {"queue"});
    return tr.Decide(static_cast<double>(t), 1, {1});  // 1 / (1 x 1) = 1: hold at 1
  };
  EXPECT_EQ(at(6 * kHour + 59 * kMinute).desired, 1);  // 07:59 local
  Decision d = at(7 * kHour);                          // 08:00 local
  EXPECT_EQ(d.desired, 2);
  EXPECT_EQ(d.reason, Reason::kSchedule) << d.explanation;
  EXPECT_EQ(at(18 * kHour + 59 * kMinute).desired, 2);  // 19:59 local
  EXPECT_EQ(at(19 * kHour).desired, 1);                 // 20:00 local: `to` is exclusive
  EXPECT_EQ(at(5 * kDay + 10 * kHour).desired, 1);      // Saturday
}

TEST(Bounds, InWindowAcrossMidnightAndOffsets) {
  // Friday 22:00 to 06:00 (the early hours belong to Friday's window).
  WeeklyWindow w{.days = 1 << 5, .from_minute = 22 * 60, .to_minute = 6 * 60};
  const auto fri = kMonday + std::chrono::hours(4 * 24);
  EXPECT_TRUE(InWindow(w, fri + std::chrono::hours(23)));
  EXPECT_TRUE(InWindow(w, fri + std::chrono::hours(24 + 5)));    // Saturday 05:00
  EXPECT_FALSE(InWindow(w, fri + std::chrono::hours(24 + 6)));   // Saturday 06:00
  EXPECT_FALSE(InWindow(w, fri + std::chrono::hours(24 + 22)));  // Saturday 22:00
  EXPECT_FALSE(InWindow(w, fri + std::chrono::hours(5)));        // Friday 05:00 (Thursday's)
  // UTC-05:00: Monday 03:00 UTC is Sunday 22:00 local.
  WeeklyWindow sunday{.days = 1, .utc_offset_minutes = -300};
  EXPECT_TRUE(InWindow(sunday, kMonday + std::chrono::hours(3)));
  EXPECT_FALSE(InWindow(sunday, kMonday + std::chrono::hours(5)));
}

TEST(Bounds, FloorMetricThenClamp) {
  DecisionSpec spec = Hpa({Queue(1)}, 1, 8);
  spec.hpa.down.stabilization = seconds(0);
  spec.floor_metric = "job_nodes";
  {
    Trace tr(spec, {"queue", "job_nodes"});
    // queue 0 -> 0, down limit 0; a job holds 2 nodes: 2.
    tr.Run({{0, 3, {0, 2}, 2, Reason::kFloor}});
  }
  {
    Trace tr(spec, {"queue", "job_nodes"});
    // queue 100 at 8: up limit max(12, 16) = 16, above max 8: 8.
    tr.Run({{0, 8, {100, 0}, 8, Reason::kClampedMax}});
  }
  {
    Trace tr(spec, {"queue", "job_nodes"});
    // The floor is not a reason to exceed max: 12 nodes -> 8.
    tr.Run({{0, 3, {3, 12}, 8, Reason::kClampedMax}});
  }
}

// --- Validation, state ------------------------------------------------------------------

TEST(DecideSpec, ValidationNamesTheField) {
  auto error = [](const DecisionSpec& s) { return ValidateSpec(s).ToString(); };
  DecisionSpec ok = Hpa({Queue(4)}, 0, 8);
  EXPECT_TRUE(ValidateSpec(ok).ok()) << error(ok);

  DecisionSpec s = ok;
  s.min = 9;
  EXPECT_NE(error(s).find("max: 8 is below min 9"), std::string::npos) << error(s);
  s = ok;
  s.hpa.metrics[0].target = 0;
  EXPECT_NE(error(s).find("metrics[0].target"), std::string::npos) << error(s);
  s = ok;
  s.hpa.up.policies[1].period = seconds(1801);
  EXPECT_NE(error(s).find("behavior.scale_up.policies[1].period"), std::string::npos) << error(s);
  s = ok;
  s.hpa.down.policies[0].period = seconds(0);
  EXPECT_NE(error(s).find("scale_down.policies[0].period"), std::string::npos) << error(s);
  s = ok;
  s.hpa.metrics.clear();
  EXPECT_NE(error(s).find("at least one metric"), std::string::npos) << error(s);

  DecisionSpec r = Rules({CpuRule(Direction::kIncrease, Op::kGreaterThan, 80)});
  EXPECT_TRUE(ValidateSpec(r).ok()) << error(r);
  r.profiles[0].rules[0].metric = "";
  EXPECT_NE(error(r).find("profiles[0].rules[0].metric: names no metric"), std::string::npos)
      << error(r);
  r = Rules({});
  r.profiles[0].default_count = 20;
  EXPECT_NE(error(r).find("profiles[0].default"), std::string::npos) << error(r);
  EXPECT_FALSE(NewDecider(r, std::chrono::nanoseconds(0)).ok());
}

TEST(DecideSpec, StateHoldsTheHistory) {
  Trace tr(Hpa({Queue(1)}, 0, 100), {"queue"});
  tr.Run({
      {0, 0, {3}, 3, Reason::kActivate},  // ceil(3 / 1) = 3; Applied(0 -> 3)
      {15, 3, {10}, 7, kRate},            // 10; t=0 is outside (0, 15]: max(3+4, 6) = 7
  });
  const Json j = tr.decider().State();
  EXPECT_EQ(j["mode"], "hpa");
  EXPECT_EQ(j["last_active_s"], 15.0);
  // The first entry is the seed: the count at first sight (0), as the HPA does.
  ASSERT_EQ(j["recommendations"].size(), 3u) << j.dump();
  EXPECT_EQ(j["recommendations"][0]["replicas"], 0);
  EXPECT_EQ(j["recommendations"][1]["replicas"], 3);
  EXPECT_EQ(j["recommendations"][2]["replicas"], 10);
  // 0 -> 3 at t=0 aged out of the longest period (15 s); 3 -> 7 at t=15 is kept.
  ASSERT_EQ(j["scale_events"].size(), 1u) << j.dump();
  EXPECT_EQ(j["scale_events"][0]["change"], 4);

  DecisionSpec rules = Rules({CpuRule(Direction::kIncrease, Op::kGreaterThan, 80)});
  Trace tr2(rules, {"cpu"});
  tr2.Run({{0, 1, {90}, 2, kOut}});
  const Json r = tr2.decider().State();
  EXPECT_EQ(r["profile"], "default");
  EXPECT_EQ(r["cooldown_until_s"], 300.0);
  EXPECT_EQ(r["samples"]["cpu"].size(), 1u);
}

}  // namespace
}  // namespace gantry::autoscale
