// Dynamic thresholds (see gantry/alerting/dynamic_threshold.h for the model).
#include "gantry/alerting/dynamic_threshold.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "gantry/core/units.h"

namespace gantry::alerting {
namespace {

// MAD * 1.4826 estimates the standard deviation of normal data.
constexpr double kMadToSigma = 1.4826;
// A seasonal model must cut the spread to this fraction of the flat one to be
// chosen automatically: a small gain is noise, not a pattern.
constexpr double kSeasonalGain = 0.8;
// Share of a seasonal model's slots that must have enough samples for kAuto.
constexpr double kSlotCoverage = 0.9;

constexpr int64_t kHourMs = 3'600'000;
constexpr int64_t kDayMs = 24 * kHourMs;

// Median of `v` (reordered); mean of the two middle values for an even count.
double Median(std::vector<double>& v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  double hi = v[mid];
  if (v.size() % 2 == 1) return hi;
  double lo = *std::max_element(v.begin(), v.begin() + mid);
  return lo + (hi - lo) / 2;
}

// Robust sigma of `v` around `center` (reorders a copy).
double MadSigma(const std::vector<double>& v, double center) {
  std::vector<double> dev;
  dev.reserve(v.size());
  for (double x : v) dev.push_back(std::fabs(x - center));
  return kMadToSigma * Median(dev);
}

int64_t PeriodMs(Seasonality s) {
  switch (s) {
    case Seasonality::kHourly:
      return kHourMs;
    case Seasonality::kDaily:
      return kDayMs;
    case Seasonality::kWeekly:
      return 7 * kDayMs;
    default:
      return 0;
  }
}

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

std::string DurationText(int64_t ms) {
  return FormatDuration(std::chrono::milliseconds(std::max<int64_t>(ms, 0)));
}

struct SlotFit {
  std::vector<double> center;
  std::vector<double> spread;
  std::vector<bool> valid;
  size_t valid_count = 0;
  double residual_spread = 0;
};

SlotFit FitSlots(const std::vector<TimedValue>& samples, Seasonality s, double global_center,
                 size_t min_slot_samples) {
  const int n = SeasonalSlotCount(s);
  std::vector<std::vector<double>> by_slot(n);
  for (const TimedValue& tv : samples) by_slot[SeasonalSlot(s, tv.time_ms)].push_back(tv.value);
  SlotFit fit;
  fit.center.assign(n, 0);
  fit.spread.assign(n, 0);
  fit.valid.assign(n, false);
  for (int i = 0; i < n; ++i) {
    if (by_slot[i].size() < std::max<size_t>(min_slot_samples, 1)) continue;
    std::vector<double> copy = by_slot[i];
    fit.center[i] = Median(copy);
    fit.spread[i] = MadSigma(by_slot[i], fit.center[i]);
    fit.valid[i] = true;
    ++fit.valid_count;
  }
  std::vector<double> residuals;
  residuals.reserve(samples.size());
  for (const TimedValue& tv : samples) {
    int slot = SeasonalSlot(s, tv.time_ms);
    residuals.push_back(tv.value - (fit.valid[slot] ? fit.center[slot] : global_center));
  }
  std::vector<double> copy = residuals;
  double rc = Median(copy);
  fit.residual_spread = MadSigma(residuals, rc);
  return fit;
}

}  // namespace

Result<Sensitivity> ParseSensitivity(std::string_view s) {
  if (s == "low") return Sensitivity::kLow;
  if (s == "medium") return Sensitivity::kMedium;
  if (s == "high") return Sensitivity::kHigh;
  return InvalidArgument("unknown sensitivity '" + std::string(s) + "'; use low, medium or high");
}

Result<Direction> ParseDirection(std::string_view s) {
  if (s == "above") return Direction::kAbove;
  if (s == "below") return Direction::kBelow;
  if (s == "both") return Direction::kBoth;
  return InvalidArgument("unknown direction '" + std::string(s) + "'; use above, below or both");
}

Result<Seasonality> ParseSeasonality(std::string_view s) {
  if (s == "auto") return Seasonality::kAuto;
  if (s == "none") return Seasonality::kNone;
  if (s == "hourly") return Seasonality::kHourly;
  if (s == "daily") return Seasonality::kDaily;
  if (s == "weekly") return Seasonality::kWeekly;
  return InvalidArgument("unknown seasonality '" + std::string(s) +
                         "'; use auto, none, hourly, daily or weekly");
}

std::string_view SensitivityName(Sensitivity s) {
  switch (s) {
    case Sensitivity::kLow:
      return "low";
    case Sensitivity::kMedium:
      return "medium";
    case Sensitivity::kHigh:
      return "high";
  }
  return "medium";
}

std::string_view DirectionName(Direction d) {
  switch (d) {
    case Direction::kAbove:
      return "above";
    case Direction::kBelow:
      return "below";
    case Direction::kBoth:
      return "both";
  }
  return "both";
}

std::string_view SeasonalityName(Seasonality s) {
  switch (s) {
    case Seasonality::kAuto:
      return "auto";
    case Seasonality::kNone:
      return "none";
    case Seasonality::kHourly:
      return "hourly";
    case Seasonality::kDaily:
      return "daily";
    case Seasonality::kWeekly:
      return "weekly";
  }
  return "none";
}

double SensitivityMultiplier(Sensitivity s) {
  switch (s) {
    case Sensitivity::kHigh:
      return 2.0;
    case Sensitivity::kMedium:
      return 3.0;
    case Sensitivity::kLow:
      return 4.5;
  }
  return 3.0;
}

int SeasonalSlotCount(Seasonality s) {
  switch (s) {
    case Seasonality::kHourly:
      return 12;
    case Seasonality::kDaily:
      return 24;
    case Seasonality::kWeekly:
      return 168;
    default:
      return 1;
  }
}

int SeasonalSlot(Seasonality s, int64_t time_ms) {
  switch (s) {
    case Seasonality::kHourly: {
      int64_t in_hour = time_ms - FloorDiv(time_ms, kHourMs) * kHourMs;
      return static_cast<int>(in_hour / (5 * 60'000));
    }
    case Seasonality::kDaily: {
      int64_t in_day = time_ms - FloorDiv(time_ms, kDayMs) * kDayMs;
      return static_cast<int>(in_day / kHourMs);
    }
    case Seasonality::kWeekly: {
      int64_t day = FloorDiv(time_ms, kDayMs);
      // 1970-01-01 was a Thursday: +3 makes Monday day 0 of the week.
      int64_t weekday = ((day + 3) % 7 + 7) % 7;
      int64_t hour = (time_ms - day * kDayMs) / kHourMs;
      return static_cast<int>(weekday * 24 + hour);
    }
    default:
      return 0;
  }
}

double DynamicThresholdModel::Floor(double spread, double center) const {
  return std::max({spread, options_.min_spread, 0.01 * std::fabs(center)});
}

DynamicThresholdModel DynamicThresholdModel::Fit(const std::vector<TimedValue>& samples_in,
                                                 const DynamicThresholdOptions& options) {
  DynamicThresholdModel m;
  m.options_ = options;
  std::vector<TimedValue> samples;
  samples.reserve(samples_in.size());
  for (const TimedValue& tv : samples_in) {
    if (std::isfinite(tv.value)) samples.push_back(tv);
  }
  m.count_ = samples.size();
  m.seasonality_ =
      options.seasonality == Seasonality::kAuto ? Seasonality::kNone : options.seasonality;
  if (samples.empty()) return m;

  int64_t first = samples.front().time_ms, last = first;
  std::vector<double> values;
  values.reserve(samples.size());
  for (const TimedValue& tv : samples) {
    first = std::min(first, tv.time_ms);
    last = std::max(last, tv.time_ms);
    values.push_back(tv.value);
  }
  m.first_ms_ = first;
  m.last_ms_ = last;
  const int64_t span = last - first;

  std::vector<double> copy = values;
  m.center_ = Median(copy);
  m.spread_ = MadSigma(values, m.center_);

  Seasonality chosen = options.seasonality;
  SlotFit fit;
  if (chosen == Seasonality::kAuto) {
    chosen = Seasonality::kNone;
    double best = m.spread_ * kSeasonalGain;
    for (Seasonality s : {Seasonality::kHourly, Seasonality::kDaily, Seasonality::kWeekly}) {
      if (span < 3 * PeriodMs(s)) continue;
      SlotFit f = FitSlots(samples, s, m.center_, options.min_slot_samples);
      if (f.valid_count < kSlotCoverage * SeasonalSlotCount(s)) continue;
      // Strictly smaller: on a tie the shorter period, found first, stays.
      if (f.residual_spread < best) {
        best = f.residual_spread;
        chosen = s;
        fit = std::move(f);
      }
    }
  } else if (chosen != Seasonality::kNone) {
    fit = FitSlots(samples, chosen, m.center_, options.min_slot_samples);
  }
  m.seasonality_ = chosen;
  if (chosen != Seasonality::kNone) {
    m.slots_.resize(fit.center.size());
    for (size_t i = 0; i < fit.center.size(); ++i) {
      m.slots_[i] = Slot{fit.center[i], fit.spread[i], fit.valid[i]};
    }
  }

  const int64_t need_ms = options.min_history.count();
  if (m.count_ < options.min_samples || span < need_ms) {
    m.ready_ = false;
    m.not_ready_reason_ = std::to_string(m.count_) + " samples over " + DurationText(span) +
                          ", need " + std::to_string(options.min_samples) + " over " +
                          DurationText(need_ms);
  } else {
    m.ready_ = true;
    m.not_ready_reason_.clear();
  }
  return m;
}

Band DynamicThresholdModel::BandAt(int64_t time_ms) const {
  double center = center_, spread = spread_;
  if (!slots_.empty()) {
    const Slot& s = slots_[SeasonalSlot(seasonality_, time_ms)];
    if (s.valid) {
      center = s.center;
      spread = s.spread;
    }
  }
  spread = Floor(spread, center);
  const double k = SensitivityMultiplier(options_.sensitivity);
  return Band{center - k * spread, center + k * spread, center, spread};
}

Verdict DynamicThresholdModel::Check(int64_t time_ms, double value) const {
  if (!ready_) return Verdict::kNotReady;
  const Band b = BandAt(time_ms);
  const bool up = options_.direction != Direction::kBelow;
  const bool down = options_.direction != Direction::kAbove;
  if (up && value > b.upper) return Verdict::kAbove;
  if (down && value < b.lower) return Verdict::kBelow;
  return Verdict::kNormal;
}

ViolationWindow::ViolationWindow(int violations, int of)
    : violations_(std::clamp(violations, 1, std::max(of, 1))), of_(std::max(of, 1)) {}

bool ViolationWindow::Push(bool violated) {
  last_.push_back(violated);
  if (violated) ++count_;
  if (static_cast<int>(last_.size()) > of_) {
    if (last_.front()) --count_;
    last_.pop_front();
  }
  return triggered();
}

void ViolationWindow::Reset() {
  last_.clear();
  count_ = 0;
}

}  // namespace gantry::alerting
