// Dynamic thresholds: a band learned from a metric's own history, in the
// spirit of Azure Monitor's dynamic thresholds, built from robust statistics
// so that it is deterministic and explainable.
//
// Model. The centre is the median of the learning samples and the spread is
// the MAD (median absolute deviation) scaled by 1.4826, which estimates the
// standard deviation for normal data but is not dragged by outliers. The band
// is centre +/- k * spread with k from the sensitivity (high 2, medium 3,
// low 4.5). A spread below `min_spread` or 1% of |centre| is raised to it, so a
// perfectly flat metric does not alert on the smallest wiggle.
//
// Seasonality. With a seasonal model, samples are grouped into slots of a
// period and each slot gets its own centre and spread:
//   hourly  period 1 h, 12 slots of 5 minutes (minute of the hour)
//   daily   period 1 day, 24 slots (hour of the day, UTC)
//   weekly  period 7 days, 168 slots (hour of the week, UTC; Monday 00:00 first)
// A slot with fewer than `min_slot_samples` samples uses the whole-history
// centre and spread. `kAuto` picks, among the seasonalities for which the
// history spans at least 3 periods (weekly needs 3 weeks), the one whose
// residual spread (pooled MAD of value - slot median) is smallest, provided it
// is at most 80% of the non-seasonal spread; otherwise no seasonality. Ties go
// to the shorter period.
//
// Minimum history. A model is `ready()` only when the samples span at least
// `min_history` and number at least `min_samples`; before that Check() says
// kNotReady and callers must not alert (Azure: 3 days and 30 samples).
//
// N of M. ViolationWindow counts how many of the last M evaluations violated
// the band; a caller alerts when at least N did.
//
// Everything here is a pure function of its inputs (no clock, no randomness,
// no I/O), so the gateway can reuse it for output-anomaly detection.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::alerting {

enum class Sensitivity { kLow, kMedium, kHigh };
enum class Direction { kAbove, kBelow, kBoth };
enum class Seasonality { kAuto, kNone, kHourly, kDaily, kWeekly };

// "low" | "medium" | "high"; "above" | "below" | "both";
// "auto" | "none" | "hourly" | "daily" | "weekly". InvalidArgument listing the
// valid words otherwise.
Result<Sensitivity> ParseSensitivity(std::string_view s);
Result<Direction> ParseDirection(std::string_view s);
Result<Seasonality> ParseSeasonality(std::string_view s);
std::string_view SensitivityName(Sensitivity s);
std::string_view DirectionName(Direction d);
std::string_view SeasonalityName(Seasonality s);

// The band half-width in spreads for a sensitivity (high 2, medium 3, low 4.5).
double SensitivityMultiplier(Sensitivity s);

struct TimedValue {
  int64_t time_ms = 0;  // Unix ms (slots are computed in UTC)
  double value = 0;
};

struct DynamicThresholdOptions {
  Sensitivity sensitivity = Sensitivity::kMedium;
  Direction direction = Direction::kBoth;
  Seasonality seasonality = Seasonality::kAuto;
  std::chrono::milliseconds min_history = std::chrono::hours(72);
  size_t min_samples = 30;
  size_t min_slot_samples = 10;
  double min_spread = 0;  // absolute floor of the spread, in the metric's unit
};

// The band at one moment.
struct Band {
  double lower = 0;
  double upper = 0;
  double center = 0;
  double spread = 0;  // robust standard deviation used (after the floors)
};

enum class Verdict { kNotReady, kNormal, kAbove, kBelow };

class DynamicThresholdModel {
 public:
  // Learns from `samples` (any order; non-finite values are ignored). Never
  // fails: with too little history the model is simply not ready.
  static DynamicThresholdModel Fit(const std::vector<TimedValue>& samples,
                                   const DynamicThresholdOptions& options);

  DynamicThresholdModel() = default;

  bool ready() const { return ready_; }
  // Why the model is not ready ("12 samples over 2h, need 30 over 3d"); empty when ready.
  const std::string& not_ready_reason() const { return not_ready_reason_; }
  // The seasonality in use (never kAuto once fitted).
  Seasonality seasonality() const { return seasonality_; }
  size_t sample_count() const { return count_; }
  int64_t first_ms() const { return first_ms_; }
  int64_t last_ms() const { return last_ms_; }

  // The band for a value observed at `time_ms` (its slot's band, or the global
  // one). Meaningless (zeros) when the model has no samples.
  Band BandAt(int64_t time_ms) const;

  // Whether `value` at `time_ms` lies outside the band in the configured
  // direction; kNotReady before the minimum history.
  Verdict Check(int64_t time_ms, double value) const;

  const DynamicThresholdOptions& options() const { return options_; }

 private:
  struct Slot {
    double center = 0;
    double spread = 0;
    bool valid = false;
  };
  double Floor(double spread, double center) const;

  DynamicThresholdOptions options_;
  bool ready_ = false;
  std::string not_ready_reason_ = "no samples";
  Seasonality seasonality_ = Seasonality::kNone;
  size_t count_ = 0;
  int64_t first_ms_ = 0;
  int64_t last_ms_ = 0;
  double center_ = 0;
  double spread_ = 0;
  std::vector<Slot> slots_;  // empty without seasonality
};

// The slot of `time_ms` for a seasonality (0 for kNone/kAuto) and the number of
// slots (1 for kNone/kAuto). Exposed for tests and for explaining a band.
int SeasonalSlot(Seasonality s, int64_t time_ms);
int SeasonalSlotCount(Seasonality s);

// Counts violations in the last `of` evaluations ("N of M").
class ViolationWindow {
 public:
  // `violations` is clamped to [1, of]; `of` to at least 1.
  explicit ViolationWindow(int violations = 1, int of = 1);
  // Records one evaluation; returns true when at least N of the last M
  // evaluations violated.
  bool Push(bool violated);
  int count() const { return count_; }
  bool triggered() const { return count_ >= violations_; }
  void Reset();
  int violations() const { return violations_; }
  int of() const { return of_; }

 private:
  int violations_;
  int of_;
  int count_ = 0;
  std::deque<bool> last_;
};

}  // namespace gantry::alerting
