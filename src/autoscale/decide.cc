// What both modes share: validation, weekly windows, and the bounds applied
// after either mode's decision (schedules, the floor metric, [min, max]).
#include "gantry/autoscale/decide.h"

#include <cmath>
#include <cstdio>
#include <set>
#include <string>

#include "decide_internal.h"

namespace gantry::autoscale {
namespace internal {

std::string Num(double v) {
  if (!std::isfinite(v)) return v > 0 ? "inf" : (v < 0 ? "-inf" : "nan");
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  std::string s = buf;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

double Secs(std::chrono::nanoseconds t) { return std::chrono::duration<double>(t).count(); }

const MetricSample* FindSample(const Observation& obs, std::string_view name) {
  for (const MetricSample& s : obs.metrics) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string MissingName(std::string_view name, const MetricSample* s) {
  std::string out(name);
  if (s == nullptr) return out + " (no sample)";
  if (!s->error.empty()) out += " (" + s->error + ")";
  return out;
}

Decision DeciderBase::Decide(const Observation& obs) {
  Core c = DecideCore(obs);
  Decision& d = c.d;
  d.current = obs.current;
  // Schedules: the highest floor among the windows that match.
  const Schedule* floor_schedule = nullptr;
  for (const Schedule& s : spec_.schedules) {
    if (InWindow(s.window, obs.wall) &&
        (floor_schedule == nullptr || s.min > floor_schedule->min)) {
      floor_schedule = &s;
    }
  }
  if (floor_schedule != nullptr && d.desired < floor_schedule->min) {
    d.desired = floor_schedule->min;
    d.reason = Reason::kSchedule;
    d.explanation += "; schedule '" + floor_schedule->name + "' floor " +
                     std::to_string(floor_schedule->min) + " -> " + std::to_string(d.desired);
  }
  // The floor metric: the nodes a running job holds. A missing value sets no
  // floor (the mode's own rules already refused to scale in on missing data
  // only for its metrics; the job floor is advisory when unknown).
  if (!spec_.floor_metric.empty()) {
    const MetricSample* s = FindSample(obs, spec_.floor_metric);
    if (s != nullptr && s->value) {
      // 3.0000001 nodes is 3 nodes: the value is a count read as a double.
      const auto need = static_cast<int64_t>(std::ceil(*s->value - 1e-9));
      if (d.desired < need) {
        d.desired = need;
        d.reason = Reason::kFloor;
        d.explanation += "; floor metric " + spec_.floor_metric + " " + Num(*s->value) + " -> " +
                         std::to_string(d.desired);
      }
    }
  }
  if (d.desired < c.min) {
    d.desired = c.min;
    d.reason = Reason::kClampedMin;
    d.explanation += "; min " + std::to_string(c.min) + " -> " + std::to_string(d.desired);
  } else if (d.desired > c.max) {
    d.desired = c.max;
    d.reason = Reason::kClampedMax;
    d.explanation += "; max " + std::to_string(c.max) + " -> " + std::to_string(d.desired);
  }
  Decided(obs, d);
  return d;
}

}  // namespace internal

bool InWindow(const WeeklyWindow& w, std::chrono::system_clock::time_point wall) {
  using std::chrono::duration_cast;
  const int64_t secs = duration_cast<std::chrono::seconds>(wall.time_since_epoch()).count() +
                       int64_t{w.utc_offset_minutes} * 60;
  // Floor division: wall times before 1970 still land on the right day.
  int64_t day = secs / 86400;
  if (secs % 86400 < 0) --day;
  const auto minute = static_cast<int>((secs - day * 86400) / 60);
  // 1970-01-01 was a Thursday (bit 4 with bit 0 = Sunday).
  const int dow = static_cast<int>(((day % 7) + 7 + 4) % 7);
  auto has = [&](int d) { return (w.days >> d & 1) != 0; };
  if (w.from_minute < w.to_minute) {
    return has(dow) && minute >= w.from_minute && minute < w.to_minute;
  }
  // Spans midnight: the part after midnight belongs to the day it started on.
  return (has(dow) && minute >= w.from_minute) || (has((dow + 6) % 7) && minute < w.to_minute);
}

namespace {

Status Bad(const DecisionSpec& spec, const std::string& field, const std::string& what) {
  std::string who = spec.target.empty() ? "" : "target '" + spec.target + "': ";
  return InvalidArgument(who + field + ": " + what);
}

Status ValidateWindow(const DecisionSpec& spec, const std::string& field, const WeeklyWindow& w) {
  if (w.days == 0 || w.days > 0x7f) {
    return Bad(spec, field + ".days", "must name at least one day (bits 0-6, Sunday = bit 0)");
  }
  if (w.from_minute < 0 || w.from_minute >= 24 * 60) {
    return Bad(spec, field + ".from",
               std::to_string(w.from_minute) + " minutes is outside 0..1439 (00:00..23:59)");
  }
  if (w.to_minute < 0 || w.to_minute > 24 * 60) {
    return Bad(spec, field + ".to",
               std::to_string(w.to_minute) + " minutes is outside 0..1440 (00:00..24:00)");
  }
  if (w.utc_offset_minutes < -14 * 60 || w.utc_offset_minutes > 14 * 60) {
    return Bad(spec, field + ".utc_offset",
               std::to_string(w.utc_offset_minutes) + " minutes is outside -14:00..+14:00");
  }
  return Status::Ok();
}

Status ValidateBehavior(const DecisionSpec& spec, const std::string& field,
                        const DirectionBehavior& b) {
  if (b.stabilization < Seconds(0) || b.stabilization > Seconds(3600)) {
    return Bad(spec, field + ".stabilization",
               std::to_string(b.stabilization.count()) + " s is outside 0..3600 s");
  }
  if (!(b.tolerance >= 0 && b.tolerance <= 1)) {
    return Bad(spec, field + ".tolerance", internal::Num(b.tolerance) + " is outside 0..1");
  }
  if (b.policies.empty() && b.select != SelectPolicy::kDisabled) {
    return Bad(spec, field + ".policies", "is empty; give one or set select: disabled");
  }
  for (size_t i = 0; i < b.policies.size(); ++i) {
    const ScalingPolicy& p = b.policies[i];
    const std::string f = field + ".policies[" + std::to_string(i) + "]";
    if (p.value < 1) return Bad(spec, f + ".value", std::to_string(p.value) + " must be >= 1");
    if (p.period < Seconds(1) || p.period > Seconds(1800)) {
      return Bad(spec, f + ".period", std::to_string(p.period.count()) + " s is outside 1..1800 s");
    }
  }
  return Status::Ok();
}

Status ValidateHpa(const DecisionSpec& spec) {
  const HpaSpec& h = spec.hpa;
  if (h.metrics.empty()) return Bad(spec, "metrics", "mode hpa needs at least one metric");
  std::set<std::string> names;
  for (size_t i = 0; i < h.metrics.size(); ++i) {
    const MetricTarget& m = h.metrics[i];
    const std::string f = "metrics[" + std::to_string(i) + "]";
    if (m.name.empty()) return Bad(spec, f + ".name", "is empty");
    if (!names.insert(m.name).second) return Bad(spec, f + ".name", "'" + m.name + "' is repeated");
    if (!(m.target > 0) || !std::isfinite(m.target)) {
      return Bad(spec, f + ".target", internal::Num(m.target) + " must be > 0");
    }
    if (!(m.activation >= 0) || !std::isfinite(m.activation)) {
      return Bad(spec, f + ".activation", internal::Num(m.activation) + " must be >= 0");
    }
  }
  RETURN_IF_ERROR(ValidateBehavior(spec, "behavior.scale_up", h.up));
  RETURN_IF_ERROR(ValidateBehavior(spec, "behavior.scale_down", h.down));
  if (h.cooldown < Seconds(0)) return Bad(spec, "cooldown", "must be >= 0 s");
  if (h.initial_cooldown < Seconds(0)) return Bad(spec, "initial_cooldown", "must be >= 0 s");
  if (h.fallback.failure_threshold < 0) {
    return Bad(spec, "fallback.failure_threshold",
               std::to_string(h.fallback.failure_threshold) + " must be >= 0 (0: off)");
  }
  if (h.fallback.failure_threshold > 0 && h.fallback.replicas < 0) {
    return Bad(spec, "fallback.replicas", std::to_string(h.fallback.replicas) + " must be >= 0");
  }
  return Status::Ok();
}

Status ValidateRules(const DecisionSpec& spec) {
  if (spec.profiles.empty()) return Bad(spec, "profiles", "mode rules needs at least one profile");
  // Azure's limits: 20 profiles per setting, 10 rules per profile.
  if (spec.profiles.size() > 20) {
    return Bad(spec, "profiles", std::to_string(spec.profiles.size()) + " profiles; at most 20");
  }
  for (size_t i = 0; i < spec.profiles.size(); ++i) {
    const Profile& p = spec.profiles[i];
    const std::string f = "profiles[" + std::to_string(i) + "]";
    if (p.minimum < 0) return Bad(spec, f + ".minimum", std::to_string(p.minimum) + " is < 0");
    if (p.maximum < p.minimum) {
      return Bad(spec, f + ".maximum",
                 std::to_string(p.maximum) + " is below minimum " + std::to_string(p.minimum));
    }
    if (p.default_count < p.minimum || p.default_count > p.maximum) {
      return Bad(spec, f + ".default",
                 std::to_string(p.default_count) + " is outside [" + std::to_string(p.minimum) +
                     ", " + std::to_string(p.maximum) + "]");
    }
    if (p.recurrence && p.fixed_date) {
      return Bad(spec, f, "has both recurrence and fixed_date; give at most one");
    }
    if (p.recurrence) RETURN_IF_ERROR(ValidateWindow(spec, f + ".recurrence", *p.recurrence));
    if (p.fixed_date && !(p.fixed_date->first < p.fixed_date->second)) {
      return Bad(spec, f + ".fixed_date", "start is not before end");
    }
    if (p.rules.size() > 10) {
      return Bad(spec, f + ".rules", std::to_string(p.rules.size()) + " rules; at most 10");
    }
    for (size_t j = 0; j < p.rules.size(); ++j) {
      const Rule& r = p.rules[j];
      const std::string g = f + ".rules[" + std::to_string(j) + "]";
      if (r.metric.empty()) return Bad(spec, g + ".metric", "names no metric");
      if (r.window < Seconds(60) || r.window > Seconds(12 * 3600)) {
        return Bad(spec, g + ".window",
                   std::to_string(r.window.count()) + " s is outside 60 s..12 h");
      }
      if (r.cooldown < Seconds(60) || r.cooldown > Seconds(7 * 86400)) {
        return Bad(spec, g + ".cooldown",
                   std::to_string(r.cooldown.count()) + " s is outside 60 s..1 week");
      }
      const int64_t lowest = r.type == ActionType::kExactCount ? 0 : 1;
      if (r.value < lowest) {
        return Bad(spec, g + ".value",
                   std::to_string(r.value) + " must be >= " + std::to_string(lowest));
      }
      if (!std::isfinite(r.threshold)) return Bad(spec, g + ".threshold", "is not finite");
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateSpec(const DecisionSpec& spec) {
  if (spec.min < 0) return Bad(spec, "min", std::to_string(spec.min) + " is below 0");
  if (spec.max < spec.min) {
    return Bad(spec, "max", std::to_string(spec.max) + " is below min " + std::to_string(spec.min));
  }
  for (size_t i = 0; i < spec.schedules.size(); ++i) {
    const Schedule& s = spec.schedules[i];
    const std::string f = "schedules[" + std::to_string(i) + "]";
    if (s.min < 0) return Bad(spec, f + ".min", std::to_string(s.min) + " is below 0");
    RETURN_IF_ERROR(ValidateWindow(spec, f, s.window));
  }
  return spec.mode == Mode::kHpa ? ValidateHpa(spec) : ValidateRules(spec);
}

Result<std::unique_ptr<Decider>> NewDecider(const DecisionSpec& spec,
                                            std::chrono::nanoseconds created) {
  RETURN_IF_ERROR(ValidateSpec(spec));
  if (spec.mode == Mode::kHpa) return internal::NewHpaDecider(spec, created);
  return internal::NewRulesDecider(spec, created);
}

}  // namespace gantry::autoscale
