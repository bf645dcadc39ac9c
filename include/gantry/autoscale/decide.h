// The scaling decisions of `gantry autoscale`: pure functions of a target's
// spec, its observations and the decider's own history, so that a metric trace
// replayed with a fake clock gives the same decisions every time (the
// known-answer tests and bench/autoscale.sh do exactly that).
//
// Two modes, each following its anchor's documented rules
// (../shared/reference/jobs-autoscale.md, B5 and B6):
//
//  * kHpa: the Kubernetes HPA ratio rule with KEDA's activation from zero.
//      ratio = value / target (per metric; kAverageValue divides the total by
//      target * current); no change while 1 - down_tolerance <= ratio <=
//      1 + up_tolerance; otherwise desired = ceil(current * ratio)
//      (kAverageValue: ceil(total / target)). Several metrics: the largest
//      recommendation wins; when some metrics are missing and the rest say
//      "down", hold. Stabilization: the recommendation is clamped between the
//      minimum of the recommendations within the up window and the maximum of
//      those within the down window (defaults up 0 s, down 300 s). Rate
//      policies (Pods / Percent per period, measured from the count at the start
//      of the period; select Max / Min / Disabled; defaults up max(4 pods,
//      100 %) per 15 s, down 100 % per 15 s). From zero: any metric strictly
//      above its activation threshold gives max(1, recommendation) at once;
//      to zero: only when no metric has been above its activation threshold
//      for `cooldown` (default 300 s) and min is 0 (before any metric was
//      active the cooldown counts from `created`; never on partial data);
//      until then the floor is 1 ("cooldown"). With min >= 1 activation is
//      ignored. `fallback`: after failure_threshold consecutive evaluations
//      with every metric missing, desired = fallback.replicas.
//  * kRules: Azure autoscale settings. The first profile that matches the
//      wall time applies (fixed date, then recurrence, then the default
//      profile). Scale out when ANY out-rule fires (the largest result), scale
//      in only when ALL in-rules fire (the smallest cut). A rule compares the
//      time-aggregation of its metric over `window` (Average, Minimum, Maximum,
//      Total, Count, Last), divided by the instance count when
//      divide_per_instance, with its threshold. After any scale action no
//      action until the acting rule's cooldown has passed. Flapping
//      protection on scale-in: the metric projected onto the new count
//      (value * current / new) must not make an out-rule fire; otherwise
//      cut fewer, or none ("flapping"). With any rule's metric missing from
//      this observation: never scale in; scale out to the profile's default
//      when below it. PercentChangeCount rounds the change up, at least 1.
//
// Both modes then apply, in this order: schedules (a floor that raises `min`
// during matching windows), the floor metric (never below the nodes a
// running job needs), and the [min, max] clamp.
//
// Thread-safety: a Decider is used by one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry::autoscale {

using Seconds = std::chrono::seconds;

enum class Mode { kHpa, kRules };

// How a metric's value relates to the instance count (HPA metric target types).
enum class TargetType {
  kAverageValue,  // value is a total (queue length, requests in flight); target per instance
  kValue,         // value compared with target as is (an Object metric): ratio scales current
  kUtilization,   // value is an average over instances in percent (GPU util): ratio scales current
};

struct MetricTarget {
  std::string name;  // matches a MetricSample::name
  TargetType type = TargetType::kAverageValue;
  double target = 1;      // > 0
  double activation = 0;  // KEDA activationThreshold: active when value > activation
};

struct ScalingPolicy {
  enum class Type { kPods, kPercent };
  Type type = Type::kPods;
  int64_t value = 1;   // >= 1
  Seconds period{15};  // 1 s .. 1800 s
};

enum class SelectPolicy { kMax, kMin, kDisabled };

struct DirectionBehavior {
  Seconds stabilization{0};
  double tolerance = 0.1;  // 0 .. 1
  SelectPolicy select = SelectPolicy::kMax;
  std::vector<ScalingPolicy> policies;
};
// The HPA's defaults: up {0 s, 0.1, Max, [Pods 4 / 15 s, Percent 100 / 15 s]},
// down {300 s, 0.1, Max, [Percent 100 / 15 s]}.
DirectionBehavior DefaultScaleUp();
DirectionBehavior DefaultScaleDown();

struct Fallback {
  int failure_threshold = 0;  // 0: off
  int64_t replicas = 0;
};

struct HpaSpec {
  std::vector<MetricTarget> metrics;
  DirectionBehavior up = DefaultScaleUp();
  DirectionBehavior down = DefaultScaleDown();
  Seconds cooldown{300};        // KEDA cooldownPeriod: last active -> 0
  Seconds initial_cooldown{0};  // KEDA initialCooldownPeriod: after the decider is created
  Fallback fallback;
};

// --- Azure autoscale rules --------------------------------------------------

enum class Op {
  kEquals,
  kNotEquals,
  kGreaterThan,
  kGreaterThanOrEqual,
  kLessThan,
  kLessThanOrEqual
};
enum class TimeAggregation { kAverage, kMinimum, kMaximum, kTotal, kCount, kLast };
enum class Direction { kIncrease, kDecrease };
enum class ActionType { kChangeCount, kPercentChangeCount, kExactCount };

struct Rule {
  std::string metric;  // a MetricSample::name
  TimeAggregation aggregation = TimeAggregation::kAverage;
  Seconds window{300};  // time window of the aggregation, 60 s .. 12 h
  bool divide_per_instance = false;
  Op op = Op::kGreaterThan;
  double threshold = 0;
  Direction direction = Direction::kIncrease;
  ActionType type = ActionType::kChangeCount;
  int64_t value = 1;      // >= 1 (>= 0 for kExactCount)
  Seconds cooldown{300};  // 60 s .. 1 week
};

// A weekly window in a fixed UTC offset: days (bit 0 = Sunday .. bit 6 =
// Saturday) and [from, to) minutes of the day; to <= from spans midnight.
struct WeeklyWindow {
  uint8_t days = 0x7f;
  int from_minute = 0;
  int to_minute = 24 * 60;
  int utc_offset_minutes = 0;
};
// Whether `wall` falls in `w`.
bool InWindow(const WeeklyWindow& w, std::chrono::system_clock::time_point wall);

struct Profile {
  std::string name;
  int64_t minimum = 0, maximum = 1, default_count = 1;
  // At most one of these; neither: the default profile.
  std::optional<WeeklyWindow> recurrence;
  std::optional<std::pair<std::chrono::system_clock::time_point,
                          std::chrono::system_clock::time_point>>
      fixed_date;  // [start, end)
  std::vector<Rule> rules;
};

// A floor that applies during a weekly window ("weekdays 08-20: at least 2").
struct Schedule {
  std::string name;
  WeeklyWindow window;
  int64_t min = 0;
};

struct DecisionSpec {
  std::string target;  // for explanations
  int64_t min = 0, max = 1;
  Mode mode = Mode::kHpa;
  HpaSpec hpa;                    // kHpa
  std::vector<Profile> profiles;  // kRules (min/max/default come from the profile)
  std::vector<Schedule> schedules;
  std::string floor_metric;  // "" or a MetricSample::name: never below its value
};

// --- Observations and decisions -------------------------------------------------

struct MetricSample {
  std::string name;
  std::optional<double> value;  // nullopt: missing (the source failed or had no data)
  std::string error;            // why it is missing, for explanations
};

struct Observation {
  std::chrono::nanoseconds now{0};  // monotonic (Clock::Now)
  std::chrono::system_clock::time_point wall;
  int64_t current = 0;  // the actuator's target capacity (VMSS sku.capacity, spec.replicas)
  int64_t ready = 0;    // instances up and ready (for explanations; kUtilization uses current)
  std::vector<MetricSample> metrics;
  bool wake = false;  // the gateway holds requests for this target: activate now
};

// Labels of gantry_autoscale_decisions_total{reason} and `status` (stable strings).
enum class Reason {
  kScaleOut,         // "scale_out"
  kScaleIn,          // "scale_in"
  kActivate,         // "activate": 0 -> n on a metric above its activation threshold, or a wake
  kDeactivate,       // "deactivate": -> 0 after the cooldown
  kNoChange,         // "no_change": the recommendation equals current
  kWithinTolerance,  // "within_tolerance"
  kStabilized,       // "stabilized": the window held a change back
  kRateLimited,      // "rate_limited": a policy cut the change
  kMetricsMissing,   // "metrics_missing": hold (never scale in on missing data)
  kFallback,         // "fallback"
  kCooldown,         // "cooldown": (rules) a rule's cooldown, (hpa) waiting to go to zero
  kFlapping,         // "flapping": a scale-in would trigger a scale-out
  kSchedule,         // "schedule": a schedule's floor raised it
  kFloor,            // "floor": the floor metric raised it
  kClampedMin,       // "min"
  kClampedMax,       // "max"
  kNoRule,           // "no_rule": (rules) no rule fired
};
std::string_view ReasonName(Reason r);

struct Decision {
  int64_t current = 0;
  int64_t desired = 0;
  Reason reason = Reason::kNoChange;
  // One sentence naming the numbers, e.g. "queue 37 / target 4 per instance
  // = ratio 3.08 -> 10; rate limit Pods 4/15s -> 6".
  std::string explanation;
};

class Decider {
 public:
  virtual ~Decider() = default;
  // One evaluation. `obs.now` never goes backwards between calls (the caller
  // passes a monotonic clock).
  virtual Decision Decide(const Observation& obs) = 0;
  // Tells the decider what was actually applied (the actuator may have refused
  // or been told by someone else); feeds the rate policies' history.
  virtual void Applied(std::chrono::nanoseconds now, int64_t from, int64_t to) = 0;
  // Its history (recommendations, last active time, cooldowns) for `status`.
  virtual Json State() const = 0;
};

// InvalidArgument naming the field when the spec is inconsistent (min > max,
// a target <= 0, a rule naming no metric, a policy period outside 1..1800 s).
Status ValidateSpec(const DecisionSpec& spec);

// A decider for `spec` (validated). `created` is the monotonic time the
// initial cooldown counts from.
Result<std::unique_ptr<Decider>> NewDecider(const DecisionSpec& spec,
                                            std::chrono::nanoseconds created);

}  // namespace gantry::autoscale
