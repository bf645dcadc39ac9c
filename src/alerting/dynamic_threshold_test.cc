#include "gantry/alerting/dynamic_threshold.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

namespace gantry::alerting {
namespace {

constexpr int64_t kMin = 60'000;
constexpr int64_t kHour = 60 * kMin;
constexpr int64_t kDay = 24 * kHour;
// 2026-11-30 00:00:00 UTC, a Monday.
constexpr int64_t kMonday = 1'795'996'800'000;

// Deterministic pseudo-random noise in [-5, 5] (splitmix64 of i), without the
// short period a modulo pattern would have (which a seasonal model could fit).
double Noise(int64_t i) {
  uint64_t z = static_cast<uint64_t>(i) + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<double>(z % 10001) / 1000.0 - 5.0;
}

std::vector<TimedValue> Flat(int64_t start, int64_t span, int64_t step, double base) {
  std::vector<TimedValue> v;
  int64_t i = 0;
  for (int64_t t = start; t <= start + span; t += step, ++i) v.push_back({t, base + Noise(i)});
  return v;
}

// Low (10) from 00:00 to 11:59 UTC, high (90) from 12:00 to 23:59, plus noise.
std::vector<TimedValue> DailyPattern(int64_t start, int64_t days, int64_t step) {
  std::vector<TimedValue> v;
  int64_t i = 0;
  for (int64_t t = start; t < start + days * kDay; t += step, ++i) {
    int hour = static_cast<int>((t % kDay) / kHour);
    v.push_back({t, (hour < 12 ? 10.0 : 90.0) + Noise(i)});
  }
  return v;
}

DynamicThresholdOptions Opts(Seasonality s = Seasonality::kNone) {
  DynamicThresholdOptions o;
  o.seasonality = s;
  o.min_history = std::chrono::hours(1);
  o.min_samples = 30;
  return o;
}

TEST(DynamicThreshold, MedianAndMadBand) {
  auto m = DynamicThresholdModel::Fit(Flat(0, 2 * kHour, kMin, 50), Opts());
  ASSERT_TRUE(m.ready()) << m.not_ready_reason();
  Band b = m.BandAt(0);
  EXPECT_NEAR(b.center, 50, 1.0);
  EXPECT_GT(b.spread, 0);
  EXPECT_NEAR(b.upper - b.center, 3 * b.spread, 1e-9);
  EXPECT_EQ(m.Check(0, 52), Verdict::kNormal);
  EXPECT_EQ(m.Check(0, 100), Verdict::kAbove);
  EXPECT_EQ(m.Check(0, 0), Verdict::kBelow);
}

TEST(DynamicThreshold, OutliersDoNotWidenTheBand) {
  auto samples = Flat(0, 2 * kHour, kMin, 50);
  auto clean = DynamicThresholdModel::Fit(samples, Opts());
  for (int i = 0; i < 10; ++i) samples[i * 7].value = 1e6;  // ~8% wild outliers
  auto dirty = DynamicThresholdModel::Fit(samples, Opts());
  EXPECT_NEAR(dirty.BandAt(0).upper, clean.BandAt(0).upper, 5.0);
  EXPECT_EQ(dirty.Check(0, 1000), Verdict::kAbove);
}

TEST(DynamicThreshold, NotReadyBeforeMinimumHistoryAndSamples) {
  DynamicThresholdOptions o = Opts();
  o.min_history = std::chrono::hours(72);
  auto young = DynamicThresholdModel::Fit(Flat(0, 2 * kDay, 10 * kMin, 50), o);
  EXPECT_FALSE(young.ready());
  EXPECT_EQ(young.Check(0, 1e9), Verdict::kNotReady);
  EXPECT_NE(young.not_ready_reason().find("need 30 over 3d"), std::string::npos)
      << young.not_ready_reason();

  auto old_enough = DynamicThresholdModel::Fit(Flat(0, 3 * kDay, 10 * kMin, 50), o);
  EXPECT_TRUE(old_enough.ready()) << old_enough.not_ready_reason();

  // Long enough but too few samples.
  auto sparse = DynamicThresholdModel::Fit(Flat(0, 4 * kDay, kDay / 4, 50), o);
  EXPECT_FALSE(sparse.ready());
  EXPECT_EQ(sparse.sample_count(), 17u);
}

TEST(DynamicThreshold, SensitivityChangesBandWidth) {
  auto samples = Flat(0, 2 * kHour, kMin, 50);
  DynamicThresholdOptions o = Opts();
  o.sensitivity = Sensitivity::kHigh;
  double high = DynamicThresholdModel::Fit(samples, o).BandAt(0).upper;
  o.sensitivity = Sensitivity::kMedium;
  double medium = DynamicThresholdModel::Fit(samples, o).BandAt(0).upper;
  o.sensitivity = Sensitivity::kLow;
  double low = DynamicThresholdModel::Fit(samples, o).BandAt(0).upper;
  EXPECT_LT(high, medium);
  EXPECT_LT(medium, low);
}

TEST(DynamicThreshold, DirectionLimitsWhatViolates) {
  DynamicThresholdOptions o = Opts();
  o.direction = Direction::kAbove;
  auto above = DynamicThresholdModel::Fit(Flat(0, 2 * kHour, kMin, 50), o);
  EXPECT_EQ(above.Check(0, -100), Verdict::kNormal);
  EXPECT_EQ(above.Check(0, 200), Verdict::kAbove);
  o.direction = Direction::kBelow;
  auto below = DynamicThresholdModel::Fit(Flat(0, 2 * kHour, kMin, 50), o);
  EXPECT_EQ(below.Check(0, -100), Verdict::kBelow);
  EXPECT_EQ(below.Check(0, 200), Verdict::kNormal);
}

TEST(DynamicThreshold, FlatSeriesGetsASpreadFloor) {
  std::vector<TimedValue> flat;
  for (int i = 0; i < 100; ++i) flat.push_back({i * kMin, 200});
  auto m = DynamicThresholdModel::Fit(flat, Opts());
  Band b = m.BandAt(0);
  EXPECT_DOUBLE_EQ(b.spread, 2.0);  // 1% of the centre
  EXPECT_EQ(m.Check(0, 201), Verdict::kNormal);
  EXPECT_EQ(m.Check(0, 210), Verdict::kAbove);
  DynamicThresholdOptions o = Opts();
  o.min_spread = 10;
  EXPECT_EQ(DynamicThresholdModel::Fit(flat, o).Check(0, 210), Verdict::kNormal);
}

TEST(DynamicThreshold, SlotsAreUtcAndWeekStartsMonday) {
  EXPECT_EQ(SeasonalSlot(Seasonality::kWeekly, kMonday), 0);
  EXPECT_EQ(SeasonalSlot(Seasonality::kWeekly, 0), 3 * 24);  // 1970-01-01 was a Thursday
  EXPECT_EQ(SeasonalSlot(Seasonality::kWeekly, kMonday - 1), 167);
  EXPECT_EQ(SeasonalSlot(Seasonality::kDaily, kMonday + 13 * kHour + 59 * kMin), 13);
  EXPECT_EQ(SeasonalSlot(Seasonality::kHourly, kMonday + 3 * kHour + 17 * kMin), 3);
  EXPECT_EQ(SeasonalSlot(Seasonality::kNone, kMonday + 5), 0);
  EXPECT_EQ(SeasonalSlotCount(Seasonality::kWeekly), 168);
}

TEST(DynamicThreshold, DailySeasonalityUsesTheHourOfDay) {
  auto samples = DailyPattern(kMonday, 4, 10 * kMin);
  auto flat = DynamicThresholdModel::Fit(samples, Opts(Seasonality::kNone));
  auto daily = DynamicThresholdModel::Fit(samples, Opts(Seasonality::kDaily));
  ASSERT_TRUE(daily.ready());
  EXPECT_EQ(daily.seasonality(), Seasonality::kDaily);
  const int64_t night = kMonday + 5 * kDay + 3 * kHour;
  const int64_t afternoon = kMonday + 5 * kDay + 15 * kHour;
  // 90 at 03:00 is normal for the whole history but not for that hour.
  EXPECT_EQ(flat.Check(night, 90), Verdict::kNormal);
  EXPECT_EQ(daily.Check(night, 90), Verdict::kAbove);
  EXPECT_EQ(daily.Check(afternoon, 90), Verdict::kNormal);
  EXPECT_EQ(daily.Check(afternoon, 10), Verdict::kBelow);
  EXPECT_NEAR(daily.BandAt(night).center, 10, 2.5);
  EXPECT_NEAR(daily.BandAt(afternoon).center, 90, 2.5);
}

TEST(DynamicThreshold, AutoPicksDailyOnlyWithThreeDays) {
  auto two_days =
      DynamicThresholdModel::Fit(DailyPattern(kMonday, 2, 10 * kMin), Opts(Seasonality::kAuto));
  EXPECT_EQ(two_days.seasonality(), Seasonality::kNone);
  auto four_days =
      DynamicThresholdModel::Fit(DailyPattern(kMonday, 4, 10 * kMin), Opts(Seasonality::kAuto));
  EXPECT_EQ(four_days.seasonality(), Seasonality::kDaily);
  // No pattern: no seasonality even with enough history.
  auto noise =
      DynamicThresholdModel::Fit(Flat(kMonday, 4 * kDay, 10 * kMin, 50), Opts(Seasonality::kAuto));
  EXPECT_EQ(noise.seasonality(), Seasonality::kNone);
}

TEST(DynamicThreshold, AutoPicksWeeklyForAWeekendPattern) {
  // Busy on weekdays, idle at weekends: a daily model cannot explain it.
  std::vector<TimedValue> v;
  int64_t i = 0;
  for (int64_t t = kMonday; t < kMonday + 22 * kDay; t += 15 * kMin, ++i) {
    int slot = SeasonalSlot(Seasonality::kWeekly, t);
    v.push_back({t, (slot < 5 * 24 ? 80.0 : 5.0) + Noise(i)});
  }
  auto m = DynamicThresholdModel::Fit(v, Opts(Seasonality::kAuto));
  EXPECT_EQ(m.seasonality(), Seasonality::kWeekly);
  const int64_t saturday = kMonday + 26 * kDay + 10 * kHour;
  EXPECT_EQ(m.Check(saturday, 80), Verdict::kAbove);
}

TEST(DynamicThreshold, DeterministicRegardlessOfSampleOrder) {
  auto samples = DailyPattern(kMonday, 4, 10 * kMin);
  auto a = DynamicThresholdModel::Fit(samples, Opts(Seasonality::kAuto));
  std::reverse(samples.begin(), samples.end());
  std::rotate(samples.begin(), samples.begin() + 17, samples.end());
  auto b = DynamicThresholdModel::Fit(samples, Opts(Seasonality::kAuto));
  for (int64_t t = kMonday; t < kMonday + kDay; t += kHour) {
    EXPECT_DOUBLE_EQ(a.BandAt(t).upper, b.BandAt(t).upper);
    EXPECT_DOUBLE_EQ(a.BandAt(t).lower, b.BandAt(t).lower);
  }
}

TEST(DynamicThreshold, NonFiniteSamplesAreIgnored) {
  auto samples = Flat(0, 2 * kHour, kMin, 50);
  samples.push_back({3 * kHour, std::numeric_limits<double>::quiet_NaN()});
  auto m = DynamicThresholdModel::Fit(samples, Opts());
  EXPECT_EQ(m.sample_count(), samples.size() - 1);
  EXPECT_NEAR(m.BandAt(0).center, 50, 1.0);
}

TEST(ViolationWindow, NOfM) {
  ViolationWindow w(3, 5);
  EXPECT_FALSE(w.Push(true));
  EXPECT_FALSE(w.Push(false));
  EXPECT_FALSE(w.Push(true));
  EXPECT_TRUE(w.Push(true));    // 3 of the last 4
  EXPECT_TRUE(w.Push(false));   // T F T T F: 3 of 5
  EXPECT_FALSE(w.Push(false));  // F T T F F: 2 of 5
  EXPECT_EQ(w.count(), 2);
  w.Reset();
  EXPECT_EQ(w.count(), 0);
  ViolationWindow clamped(9, 2);
  EXPECT_EQ(clamped.violations(), 2);
}

TEST(DynamicThreshold, ParseNames) {
  EXPECT_EQ(*ParseSensitivity("high"), Sensitivity::kHigh);
  EXPECT_EQ(*ParseDirection("below"), Direction::kBelow);
  EXPECT_EQ(*ParseSeasonality("weekly"), Seasonality::kWeekly);
  auto bad = ParseSeasonality("monthly");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("auto, none, hourly, daily or weekly"), std::string::npos);
  EXPECT_EQ(SeasonalityName(Seasonality::kDaily), "daily");
}

}  // namespace
}  // namespace gantry::alerting
