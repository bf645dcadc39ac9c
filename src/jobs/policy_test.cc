// Known-answer tests of the early-termination policies: recorded metric
// streams replayed, and exactly which trials stop (or pause, or are
// promoted) at which step. Every expected answer is worked out by hand in
// the comments from the rules in sweep.h / policy_*.cc; values are chosen
// to be exact in binary where a tie is the point.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gantry/jobs/sweep.h"

namespace gantry::jobs {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// rows[t][i] is trial t's value at step first_step + i; the events go round
// robin by step (every trial's first step, then every trial's second, ...),
// trials in index order within a step.
std::vector<MetricEvent> RoundRobin(const std::vector<std::vector<double>>& rows,
                                    int64_t first_step = 1) {
  std::vector<MetricEvent> out;
  size_t longest = 0;
  for (const auto& r : rows) longest = std::max(longest, r.size());
  for (size_t i = 0; i < longest; ++i) {
    for (size_t t = 0; t < rows.size(); ++t) {
      if (i < rows[t].size()) {
        out.push_back({static_cast<int>(t), first_step + static_cast<int64_t>(i), rows[t][i]});
      }
    }
  }
  return out;
}

// One trial after the other, each followed by its completion when `complete`.
std::vector<MetricEvent> Sequential(const std::vector<std::vector<double>>& rows, bool complete,
                                    int64_t first_step = 1) {
  std::vector<MetricEvent> out;
  for (size_t t = 0; t < rows.size(); ++t) {
    for (size_t i = 0; i < rows[t].size(); ++i) {
      out.push_back({static_cast<int>(t), first_step + static_cast<int64_t>(i), rows[t][i]});
    }
    if (complete) out.push_back({static_cast<int>(t), 0, 0, true});
  }
  return out;
}

MetricEvent Done(int trial) { return {trial, 0, 0, true}; }

// "t2@4 stop", "t1@1 pause", "t1@1 promote".
std::vector<std::string> Stops(const PolicySpec& spec, Goal goal,
                               const std::vector<MetricEvent>& events, bool pause = false) {
  Result<std::vector<StopEvent>> r = Replay(spec, goal, pause, events);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  std::vector<std::string> out;
  if (!r.ok()) return out;
  for (const StopEvent& e : *r) {
    const char* what = e.decision == Decision::kStop    ? "stop"
                       : e.decision == Decision::kPause ? "pause"
                                                        : "promote";
    out.push_back(fmt::format("t{}@{} {}", e.trial, e.step, what));
  }
  return out;
}

PolicySpec Bandit(std::optional<double> factor, std::optional<double> amount, int interval,
                  int delay) {
  PolicySpec s;
  s.kind = PolicyKind::kBandit;
  s.slack_factor = factor;
  s.slack_amount = amount;
  s.evaluation_interval = interval;
  s.delay_evaluation = delay;
  return s;
}

// ---- Bandit

TEST(BanditTest, SlackFactorWithDelayAndInterval) {
  // interval 2, delay 3: evaluated at steps 4, 6, 8 only. f = 0.25, so the
  // cutoff is best - |best| * 0.25 / 1.25 = 0.8 * best.
  std::vector<std::vector<double>> rows = {
      {1, 2, 3, 4, 5, 6, 7, 8},    // t0
      {1, 2, 3, 3.5, 4, 4, 4, 4},  // t1
      {1, 1, 1, 1, 1, 1, 1, 1},    // t2: would stop at step 1 or 2 if evaluated there
      {5, 1, 1, 1, 1, 1, 1, 1},    // t3: best stays 5
  };
  // Step 4: the best so far at steps <= 4 is t3's 5 (from step 1), cutoff
  // exactly 4: t0 (best 4) ties and goes on, t1 (3.5) and t2 (1) stop.
  // Step 6: best 6 (t0), cutoff 4.8: t3 (5) goes on. Step 8: best 8, cutoff
  // 6.4: t3 stops.
  EXPECT_THAT(Stops(Bandit(0.25, {}, 2, 3), Goal::kMaximize, RoundRobin(rows)),
              ElementsAre("t1@4 stop", "t2@4 stop", "t3@8 stop"));
}

TEST(BanditTest, ComparesOnlyWithReportsUpToTheStep) {
  // t0 runs to the end before t1 starts; at t1's step 4 only t0's values at
  // steps <= 4 count (best 4, cutoff 3.2: 3.5 goes on), not its final 8
  // (cutoff 6.4). Step 6: best 6, cutoff 4.8 > 4: t1 stops.
  std::vector<std::vector<double>> rows = {
      {1, 2, 3, 4, 5, 6, 7, 8},
      {1, 2, 3, 3.5, 4, 4, 4, 4},
  };
  EXPECT_THAT(Stops(Bandit(0.25, {}, 1, 4), Goal::kMaximize, Sequential(rows, true)),
              ElementsAre("t1@6 stop"));
}

TEST(BanditTest, MinimizeWithSlackAmountAndNaN) {
  // Minimize, slack_amount 0.5: cutoff = lowest loss so far + 0.5; every step
  // is evaluated.
  std::vector<std::vector<double>> rows = {
      {2.0, 1.5, 1.0},     // t0: the best
      {2.5, 2.0, 1.75},    // t1: ties the cutoff at steps 1 (2.5) and 2 (2.0), out at 3
      {1.75, kNaN, 1.25},  // t2: the NaN is skipped, its best stays 1.75 <= 2.0
      {kNaN, kNaN, kNaN},  // t3: no number at all when judged
  };
  // Step 1: best 2.0 (t0 reports first), cutoff 2.5; t3's best is NaN: out.
  // Step 3: best 1.0, cutoff 1.5; t1's best 1.75 > 1.5: out.
  EXPECT_THAT(Stops(Bandit({}, 0.5, 1, 0), Goal::kMinimize, RoundRobin(rows)),
              ElementsAre("t3@1 stop", "t1@3 stop"));
}

TEST(BanditTest, NothingButNaNStopsNobody) {
  // With no number reported yet there is no best to be within the slack of.
  std::vector<MetricEvent> events = {{0, 1, kNaN}, {1, 1, kNaN}, {0, 2, 1.0}, {1, 2, kNaN}};
  // At step 2, t0's 1.0 is the best; t1's best is still NaN.
  EXPECT_THAT(Stops(Bandit(0.1, {}, 1, 0), Goal::kMaximize, events), ElementsAre("t1@2 stop"));
}

TEST(BanditTest, NegativeMetricsKeepTheBestTrial) {
  // Maximize a negative metric with f = 1: the cutoff is best - |best| / 2,
  // below the best (best / (1 + f) would be above it and stop t0 itself).
  std::vector<std::vector<double>> rows = {{-2, -2}, {-2.5, -3.5}};
  // Step 1: best -2, cutoff -3: t1 (-2.5) goes on. Step 2: t1's best -2.5
  // still above -3: nobody stops.
  EXPECT_THAT(Stops(Bandit(1.0, {}, 1, 0), Goal::kMaximize, RoundRobin(rows)), IsEmpty());
  // Minimize with f = 1: cutoff = best + |best| = 2 * best for positive.
  rows = {{1, 1}, {2, 2.5}};
  EXPECT_THAT(Stops(Bandit(1.0, {}, 1, 0), Goal::kMinimize, RoundRobin(rows)), IsEmpty());
  rows = {{1, 1}, {2, 2.5}, {2.25}};
  EXPECT_THAT(Stops(Bandit(1.0, {}, 1, 0), Goal::kMinimize, RoundRobin(rows)),
              ElementsAre("t2@1 stop"));
}

// ---- Median stopping

PolicySpec Median(int interval, int delay) {
  PolicySpec s;
  s.kind = PolicyKind::kMedian;
  s.evaluation_interval = interval;
  s.delay_evaluation = delay;
  return s;
}

const std::vector<std::vector<double>> kMedianRows = {
    {2, 4, 6, 8},  // t0
    {3, 3, 3, 3},  // t1
    {1, 2, 3, 4},  // t2
    {5, 1, 1, 1},  // t3: best stays 5
    {2, 2, 2, 2},  // t4
};

TEST(MedianTest, DelayedEvaluation) {
  // delay 2: first judged at step 2. Running averages as of step 2 when t2
  // reports: t0 3, t1 3, t2 1.5, t3 5 (its step 1), t4 2 (its step 1) ->
  // median 3 > t2's best 2: out. t3 then: 3,3,1.5,3,2 -> 3 <= 5. t4: best 2 <
  // median 3: out. Later medians (3, then 7/3 at step 3 after t3's 1, 7/3 and
  // 2 at step 4) stay at or below t0's, t1's and t3's bests.
  EXPECT_THAT(Stops(Median(1, 2), Goal::kMaximize, RoundRobin(kMedianRows)),
              ElementsAre("t2@2 stop", "t4@2 stop"));
}

TEST(MedianTest, EveryStep) {
  // delay 0: at step 1 t2 (1) meets t0 2, t1 3 (t3, t4 have not reported):
  // median 2 > 1, out. t4 at step 1: 1,2,2,3,5 -> median 2, a tie: goes on.
  // Step 2, t4: averages 3,3,1 (t2 stopped at 1),3,2 -> median 3 > 2: out.
  EXPECT_THAT(Stops(Median(1, 0), Goal::kMaximize, RoundRobin(kMedianRows)),
              ElementsAre("t2@1 stop", "t4@2 stop"));
}

TEST(MedianTest, AveragesAsOfTheStepAndEvenCounts) {
  // Minimize; t0 runs first, then t1, then t2.
  //   t0 loss 4,3,2,1: running averages 4, 3.5, 3, 2.5.
  //   t1 loss 3.5 every step: at step 1 the averages are {4, 3.5} -> median
  //   3.75, best 3.5 is not worse; step 2 {3.5, 3.5}: a tie; step 3
  //   {3, 3.5} -> 3.25 < 3.5: out. Had t0's final average 2.5 been used at
  //   step 1, the median 3 would have stopped t1 there.
  //   t2 loss 3, then 9s: its best 3 stays below the medians 3.5.
  std::vector<std::vector<double>> rows = {{4, 3, 2, 1}, {3.5, 3.5, 3.5, 3.5}, {3, 9, 9, 9}};
  EXPECT_THAT(Stops(Median(1, 1), Goal::kMinimize, Sequential(rows, true)),
              ElementsAre("t1@3 stop"));
}

TEST(MedianTest, NaNOnlyTrialStops) {
  // t1 has no number: no average of its own, and a NaN best is worse than
  // any median. t0 judged alone never stops.
  std::vector<std::vector<double>> rows = {{1, 1, 1}, {kNaN, kNaN, kNaN}, {kNaN, 5, 5}};
  // t2 at step 1: the averages are {1} (t1, t2 have none): NaN best -> out.
  EXPECT_THAT(Stops(Median(1, 0), Goal::kMaximize, RoundRobin(rows)),
              ElementsAre("t1@1 stop", "t2@1 stop"));
  // With delay 2, t2 has a number when first judged (average 5 over its one
  // number); at step 3 t0's best 1 is below the median of {1, 5}: out.
  EXPECT_THAT(Stops(Median(1, 2), Goal::kMaximize, RoundRobin(rows)),
              ElementsAre("t1@2 stop", "t0@3 stop"));
}

// ---- Truncation selection

PolicySpec Truncation(int pct, int interval, int delay) {
  PolicySpec s;
  s.kind = PolicyKind::kTruncation;
  s.truncation_percentage = pct;
  s.evaluation_interval = interval;
  s.delay_evaluation = delay;
  return s;
}

TEST(TruncationTest, LowestQuarterWithTiesAndNaN) {
  // 25 % of 4 trials: k = 1; a trial stops when fewer than 1 other trial is
  // as bad or worse.
  std::vector<std::vector<double>> rows = {
      {1, 2, 3, 4},     // t0
      {4, 3, 2, 1},     // t1
      {2, 2, 2, 2},     // t2
      {3, 3, kNaN, 5},  // t3
  };
  // Step 2 (delay 2): t0 2 ties t2 2: both go on. Step 3: t1 2 ties t2 2;
  // t3's NaN is below all: out. Step 4: t1's 1 is above t3's NaN: goes on.
  EXPECT_THAT(Stops(Truncation(25, 1, 2), Goal::kMaximize, RoundRobin(rows)),
              ElementsAre("t3@3 stop"));
  // Evaluated from step 1 as well: at step 1 the n trials reported so far
  // give k = floor(n / 4) = 0 until t3, the fourth, whose 3 is above t0's 1
  // and t2's 2. The rest as before.
  EXPECT_THAT(Stops(Truncation(25, 1, 0), Goal::kMaximize, RoundRobin(rows)),
              ElementsAre("t3@3 stop"));
}

TEST(TruncationTest, MinimizeEveryOtherStep) {
  // 50 % of 3 trials: k = 1; evaluated at steps 2 and 4 only (t2's 9 would
  // be the worst at step 1 too). At step 2 t2's 9 is the worst loss: out.
  std::vector<std::vector<double>> rows = {{5, 4, 3, 2}, {1, 1, 1, 1}, {9, 9, 9, 9}};
  EXPECT_THAT(Stops(Truncation(50, 2, 0), Goal::kMinimize, RoundRobin(rows)),
              ElementsAre("t2@2 stop"));
}

TEST(TruncationTest, StoppedTrialsStillCount) {
  // 20 % of 5 trials: k = 1. At step 1, t4 (0) is the worst: out. At step 2
  // t3 (0.5) is above t4's last value 0, so it goes on although it is the
  // worst running trial.
  std::vector<std::vector<double>> rows = {{5, 5}, {4, 4}, {3, 3}, {2, 0.5}, {0, 9}};
  EXPECT_THAT(Stops(Truncation(20, 1, 0), Goal::kMaximize, RoundRobin(rows)),
              ElementsAre("t4@1 stop"));
}

// ---- ASHA

PolicySpec Asha(int64_t grace, int64_t rf, int64_t max_t) {
  PolicySpec s;
  s.kind = PolicyKind::kAsha;
  s.grace_period = grace;
  s.reduction_factor = rf;
  s.max_t = max_t;
  return s;
}

TEST(AshaTest, RungsAndMaxT) {
  // grace 1, rf 2, max_t 8: rungs at 1, 2, 4 (8 is not below max_t); the
  // cutoff is the 50th percentile of the values recorded there before.
  std::vector<MetricEvent> events = Sequential(
      {
          {1, 2, 3, 4, 5, 6, 7, 8},  // t0: first everywhere, stopped at max_t 8
          {2, 1},                    // t1: rung 1 cutoff 1 ok; rung 2 cutoff 2 > 1: out
          {3, 3, 5, 5, 5, 5, 5, 5},  // t2: cutoffs 1.5, 1.5, 4: stopped at 8
          {0.5},                     // t3: rung 1 cutoff median(1,2,3) = 2: out
      },
      true);
  // t4 jumps from step 1 to step 5: judged at rung 4 (rung 2 skipped), where
  // {4, 5} gives 4.5, a tie; its step 6 is past a rung it already has.
  for (auto [step, v] :
       std::vector<std::pair<int64_t, double>>{{1, 10}, {5, 4.5}, {6, 0}, {8, 0}}) {
    events.push_back({4, step, v});
  }
  EXPECT_THAT(Stops(Asha(1, 2, 8), Goal::kMaximize, events),
              ElementsAre("t0@8 stop", "t1@2 stop", "t2@8 stop", "t3@1 stop", "t4@8 stop"));
}

TEST(AshaTest, PercentileInterpolatesLikeNumpy) {
  // Minimize, rf 4: the cutoff is the 75th percentile of the negated losses.
  // Losses 4, 3, 2, 1 all pass (each better than the cutoff of those before).
  // Then 2.6: percentile 75 of {-4,-3,-2,-1} is -1.75 > -2.6: out.
  // 1.7: of {-4,-3,-2.6,-2,-1} it is -2 < -1.7: on.
  // 1.9: of {-4,-3,-2.6,-2,-1.7,-1}, index 3.75 -> -1.775 > -1.9: out.
  std::vector<MetricEvent> events;
  int t = 0;
  for (double loss : {4.0, 3.0, 2.0, 1.0, 2.6, 1.7, 1.9}) events.push_back({t++, 1, loss});
  EXPECT_THAT(Stops(Asha(1, 4, 100), Goal::kMinimize, events),
              ElementsAre("t4@1 stop", "t6@1 stop"));
}

TEST(AshaTest, NaNIsWorseButNotInThePercentile) {
  // t0 NaN first: no cutoff yet. t1 1.0: the rung holds no number, no
  // cutoff. t2 NaN: out. t3 0.5 under the cutoff 1 (t0's NaN left out of
  // the percentile; as -inf it would pull the cutoff below 0.5): out.
  std::vector<MetricEvent> events = {{0, 1, kNaN}, {1, 1, 1.0}, {2, 1, kNaN}, {3, 1, 0.5}};
  EXPECT_THAT(Stops(Asha(1, 2, 10), Goal::kMaximize, events),
              ElementsAre("t2@1 stop", "t3@1 stop"));
}

TEST(AshaTest, PauseAndPromotion) {
  // grace 1, rf 2, max_t 4: rungs at 1 and 2; trials pause instead of stopping
  // and are promoted when in the top floor(n/2) of their rung.
  std::vector<MetricEvent> events = {
      {0, 1, 5},    // rung 1 {5}
      {1, 1, 3},    // cutoff 5: pause; n 2, top 1 = {5}
      {2, 1, 1},    // cutoff 4: pause
      {3, 1, 2},    // cutoff 3: pause; n 4, top 2 = {5, 3}: t1 promoted
      {0, 2, 6},    // rung 2 {6}
      {1, 2, 7},    // cutoff 6: on
      {2, 2, 9},    // t2 is paused: ignored
      {4, 1, 0},    // cutoff 2.5: pause; n 5, top 2 = {5, 3}
      {5, 1, 2.5},  // cutoff 2: on; n 6, top 3 = {5, 3, 2.5}
      {6, 1, 0.5},  // cutoff 2.25: pause; n 7, top 3
      {7, 1, -1},   // cutoff 2: pause; n 8, top 4 = {5,3,2.5,2}: t3 promoted
      {0, 4, 1},    // max_t: stop
      {3, 2, 8},    // t3 resumed: rung 2 cutoff 6.5: on
      {1, 3, 1},    // past rung 2, recorded already: on
  };
  EXPECT_THAT(Stops(Asha(1, 2, 4), Goal::kMaximize, events, /*pause=*/true),
              ElementsAre("t1@1 pause", "t2@1 pause", "t3@1 pause", "t1@1 promote", "t4@1 pause",
                          "t6@1 pause", "t7@1 pause", "t3@1 promote", "t0@4 stop"));
}

TEST(AshaTest, PromotionsAreTakenOnce) {
  Result<std::unique_ptr<EarlyTermination>> p =
      EarlyTermination::Create(Asha(1, 2, 4), Goal::kMaximize, true);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EarlyTermination& et = **p;
  EXPECT_EQ(et.Report(0, 1, 5), Decision::kContinue);
  EXPECT_EQ(et.Report(1, 1, 3), Decision::kPause);
  EXPECT_EQ(et.Report(1, 2, 9), Decision::kPause);  // paused trials' reports are ignored
  EXPECT_THAT(et.TakePromotions(), IsEmpty());
  EXPECT_EQ(et.Report(2, 1, 1), Decision::kPause);
  EXPECT_EQ(et.Report(3, 1, 0), Decision::kPause);  // n 4, top 2 = {5, 3}
  EXPECT_THAT(et.TakePromotions(), ElementsAre(1));
  EXPECT_THAT(et.TakePromotions(), IsEmpty());
  EXPECT_EQ(et.Report(1, 2, 9), Decision::kContinue);
}

// ---- Optuna

PolicySpec Percentile(double p, int startup, int64_t warmup, int64_t interval, int min_trials) {
  PolicySpec s;
  s.kind = PolicyKind::kOptunaPercentile;
  s.percentile = p;
  s.n_startup_trials = startup;
  s.n_warmup_steps = warmup;
  s.interval_steps = interval;
  s.n_min_trials = min_trials;
  return s;
}

TEST(OptunaTest, PercentilePrunerWindowsAndCompletedTrials) {
  // Maximize, percentile 25 (so the 75th percentile of completed trials'
  // values at the step), 2 startup trials, warmup 1, interval 2 (windows
  // start at steps 1, 3, 5, ...), n_min_trials 2. Steps start at 0.
  std::vector<MetricEvent> e;
  auto add = [&e](int t, std::vector<std::pair<int64_t, double>> rs) {
    for (auto [s, v] : rs) e.push_back({t, s, v});
  };
  // t0: completed. t1: 0s while only one trial has completed: never judged.
  add(0, {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}});
  e.push_back(Done(0));
  add(1, {{0, 0}, {1, 0}, {2, 0}});
  add(2, {{0, 2}, {1, 3}, {2, 4}, {3, 5}, {4, 6}, {5, 7}});
  e.push_back(Done(2));
  // t3: step 0 is warm-up; step 1: best 2.9 vs 75th pct of {2, 3} = 2.75: on;
  // step 2 is not the first report in window [1, 3): not judged (0 < 2.75 is
  // moot); step 3: best 2.9 vs {4, 5} -> 4.75: pruned.
  add(3, {{0, 0}, {1, 2.9}, {2, 0}, {3, 0}});
  // t4: NaN in warm-up is not judged; NaN best at step 1: pruned.
  add(4, {{0, kNaN}, {1, kNaN}});
  // t5: step 1 3 >= 2.75; step 7: no completed trial has step 7: on. Completes.
  add(5, {{1, 3}, {7, 0}});
  e.push_back(Done(5));
  // t6: step 1 2.8 vs 75th pct of {2, 3, 3} (t5 counts now) = 3: pruned.
  add(6, {{1, 2.8}});
  // t1 again at step 3 (first in window 3): best 0 vs {4, 5}: pruned.
  add(1, {{3, 0}});
  // t7: step 7 has one completed value (t5), fewer than n_min_trials 2: on.
  add(7, {{7, -5}});
  EXPECT_THAT(Stops(Percentile(25, 2, 1, 2, 2), Goal::kMaximize, e),
              ElementsAre("t3@3 stop", "t4@1 stop", "t6@1 stop", "t1@3 stop"));
}

TEST(OptunaTest, MedianPrunerMinimize) {
  PolicySpec s;
  s.kind = PolicyKind::kOptunaMedian;
  s.percentile = 99;  // ignored: the median pruner is percentile 50
  s.n_startup_trials = 1;
  // t0 completes with losses 3, 2, 1 at steps 0..2. t1 2.5 at step 0 (median
  // 3): on; its best 2.5 at step 1 > 2: pruned. t2 3.5 > 3 at step 0: pruned.
  std::vector<MetricEvent> e = Sequential({{3, 2, 1}}, true, 0);
  for (MetricEvent m : Sequential({{2.5, 2.5, 2.5}, {3.5}}, false, 0)) {
    m.trial += 1;
    e.push_back(m);
  }
  EXPECT_THAT(Stops(s, Goal::kMinimize, e), ElementsAre("t1@1 stop", "t2@0 stop"));
}

TEST(OptunaTest, NoCompletedTrialNoPruning) {
  PolicySpec s;
  s.kind = PolicyKind::kOptunaMedian;
  s.n_startup_trials = 0;
  // Optuna returns early with no completed trial even when n_startup is 0;
  // NaN then prunes once one has completed.
  std::vector<MetricEvent> e = {{0, 1, kNaN}, {1, 1, 1}, Done(1), {0, 2, kNaN}};
  EXPECT_THAT(Stops(s, Goal::kMaximize, e), ElementsAre("t0@2 stop"));
}

// ---- Create and Replay

TEST(PolicyTest, CreateChecksTheSpec) {
  PolicySpec both = Bandit(0.1, 0.2, 1, 0);
  Result<std::unique_ptr<EarlyTermination>> p =
      EarlyTermination::Create(both, Goal::kMaximize, false);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("exactly one of slack_factor and slack_amount"));
  p = EarlyTermination::Create(Bandit(0.1, {}, 0, 0), Goal::kMaximize, false);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("evaluation_interval"));
  p = EarlyTermination::Create(Median(1, 0), Goal::kMaximize, true);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("pause needs early_termination type asha"));
  p = EarlyTermination::Create(Truncation(100, 1, 0), Goal::kMaximize, false);
  EXPECT_FALSE(p.ok());
  p = EarlyTermination::Create(Asha(1, 1, 10), Goal::kMaximize, false);
  EXPECT_FALSE(p.ok());
  p = EarlyTermination::Create(Percentile(101, 1, 0, 1, 1), Goal::kMaximize, false);
  EXPECT_FALSE(p.ok());
}

TEST(PolicyTest, RepeatedAndOldStepsAreIgnored) {
  // A trial resumed from a checkpoint reports steps again; only increasing
  // steps count. Bandit, slack_amount 1: at step 2 the best is t0's 2, the
  // cutoff 1, and t1's best 0.5: out. Had t1's repeated step 1 (or its step
  // 0) with 5 counted, its best would be 5 and it would go on.
  std::vector<MetricEvent> e = {{0, 1, 1}, {1, 1, 0.5}, {1, 1, 5},
                                {1, 0, 5}, {0, 2, 2},   {1, 2, 0.5}};
  EXPECT_THAT(Stops(Bandit({}, 1.0, 1, 0), Goal::kMaximize, e), ElementsAre("t1@2 stop"));
}

TEST(PolicyTest, NoPolicyStopsNothing) {
  EXPECT_THAT(Stops(PolicySpec{}, Goal::kMaximize, RoundRobin({{1, 2}, {kNaN, -5}})), IsEmpty());
}

TEST(PolicyTest, ReplayRefusesBadEvents) {
  Result<std::vector<StopEvent>> r = Replay(PolicySpec{}, Goal::kMaximize, false, {{-1, 1, 0}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("event 0: trial -1"));
  r = Replay(PolicySpec{}, Goal::kMaximize, false, {{0, 1, 0}, {0, -3, 0}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("event 1"));
}

}  // namespace
}  // namespace gantry::jobs
