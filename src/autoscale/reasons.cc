// The stable names of decisions and the HPA's default behavior.
#include "gantry/autoscale/decide.h"

namespace gantry::autoscale {

std::string_view ReasonName(Reason r) {
  switch (r) {
    case Reason::kScaleOut:
      return "scale_out";
    case Reason::kScaleIn:
      return "scale_in";
    case Reason::kActivate:
      return "activate";
    case Reason::kDeactivate:
      return "deactivate";
    case Reason::kNoChange:
      return "no_change";
    case Reason::kWithinTolerance:
      return "within_tolerance";
    case Reason::kStabilized:
      return "stabilized";
    case Reason::kRateLimited:
      return "rate_limited";
    case Reason::kMetricsMissing:
      return "metrics_missing";
    case Reason::kFallback:
      return "fallback";
    case Reason::kCooldown:
      return "cooldown";
    case Reason::kFlapping:
      return "flapping";
    case Reason::kSchedule:
      return "schedule";
    case Reason::kFloor:
      return "floor";
    case Reason::kClampedMin:
      return "min";
    case Reason::kClampedMax:
      return "max";
    case Reason::kNoRule:
      return "no_rule";
  }
  return "unknown";
}

DirectionBehavior DefaultScaleUp() {
  return DirectionBehavior{.stabilization = Seconds(0),
                           .tolerance = 0.1,
                           .select = SelectPolicy::kMax,
                           .policies = {{ScalingPolicy::Type::kPods, 4, Seconds(15)},
                                        {ScalingPolicy::Type::kPercent, 100, Seconds(15)}}};
}

DirectionBehavior DefaultScaleDown() {
  return DirectionBehavior{.stabilization = Seconds(300),
                           .tolerance = 0.1,
                           .select = SelectPolicy::kMax,
                           .policies = {{ScalingPolicy::Type::kPercent, 100, Seconds(15)}}};
}

}  // namespace gantry::autoscale
