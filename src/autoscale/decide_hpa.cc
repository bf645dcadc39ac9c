// Mode hpa: the Kubernetes HPA's replica calculation and behavior
// (pkg/controller/podautoscaler/horizontal.go, replica_calculator.go) with
// KEDA's activation from zero and cooldown to zero in front of it.
//
// One evaluation:
//   1. per metric a recommendation (the ratio rule with tolerance), the
//      largest wins; note whether any metric is above its activation threshold;
//   2. KEDA: at 0 an active metric (or a wake) gives max(1, recommendation) at
//      once; inactive for `cooldown` gives 0;
//   3. missing metrics: all missing holds (or the fallback after N); some
//      missing while the rest say "down" holds;
//   4. stabilization: clamp current between min(up-window recommendations)
//      and max(down-window recommendations), the raw recommendation included;
//   5. rate policies from the count at the start of each period, rebuilt from
//      the scale events Applied() reported.
#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <string>
#include <vector>

#include "decide_internal.h"
#include "gantry/core/text.h"

namespace gantry::autoscale::internal {
namespace {

using std::chrono::nanoseconds;

std::string PolicyName(const ScalingPolicy& p) {
  return std::string(p.type == ScalingPolicy::Type::kPods ? "Pods " : "Percent ") +
         std::to_string(p.value) + "/" + std::to_string(p.period.count()) + "s";
}

class HpaDecider final : public DeciderBase {
 public:
  HpaDecider(const DecisionSpec& spec, nanoseconds created)
      : DeciderBase(spec), created_(created), last_active_(created) {
    for (const DirectionBehavior* b : {&spec_.hpa.up, &spec_.hpa.down}) {
      for (const ScalingPolicy& p : b->policies)
        max_period_ = std::max<nanoseconds>(max_period_, p.period);
    }
    window_ = std::max<nanoseconds>(spec_.hpa.up.stabilization, spec_.hpa.down.stabilization);
  }

  void Applied(nanoseconds now, int64_t from, int64_t to) override {
    if (to > from) up_events_.push_back({now, to - from});
    if (to < from) down_events_.push_back({now, from - to});
    Prune(now);
  }

  Json State() const override {
    Json j;
    j["mode"] = "hpa";
    j["created_s"] = Secs(created_);
    j["last_active_s"] = ever_active_ ? Json(Secs(last_active_)) : Json(nullptr);
    j["consecutive_failures"] = failures_;
    Json recs = Json::array();
    for (const Rec& r : recs_) recs.push_back({{"t_s", Secs(r.t)}, {"replicas", r.replicas}});
    j["recommendations"] = std::move(recs);
    Json ev = Json::array();
    for (const Event& e : up_events_) ev.push_back({{"t_s", Secs(e.t)}, {"change", e.change}});
    for (const Event& e : down_events_) ev.push_back({{"t_s", Secs(e.t)}, {"change", -e.change}});
    j["scale_events"] = std::move(ev);
    return j;
  }

 protected:
  Core DecideCore(const Observation& obs) override;

 private:
  struct Rec {
    nanoseconds t;
    int64_t replicas;
  };
  struct Event {
    nanoseconds t;
    int64_t change;  // > 0
  };
  struct Recommendation {
    int64_t replicas = 0;
    bool within_tolerance = false;
    std::string text;
  };

  Recommendation Recommend(const MetricTarget& m, double v, int64_t current) const;
  int64_t Stabilize(nanoseconds now, int64_t current, int64_t raw, std::string* text);
  int64_t RateLimit(nanoseconds now, int64_t current, int64_t desired, std::string* text) const;
  int64_t ChangeInPeriod(const std::deque<Event>& events, nanoseconds now, Seconds period) const;
  void Prune(nanoseconds now);

  const nanoseconds created_;
  nanoseconds last_active_;
  bool ever_active_ = false;
  bool seeded_ = false;
  int failures_ = 0;
  nanoseconds max_period_{0}, window_{0};
  std::deque<Rec> recs_;
  std::deque<Event> up_events_, down_events_;
};

HpaDecider::Recommendation HpaDecider::Recommend(const MetricTarget& m, double v,
                                                 int64_t current) const {
  const DirectionBehavior& up = spec_.hpa.up;
  const DirectionBehavior& down = spec_.hpa.down;
  auto within = [&](double ratio) {
    return 1 - down.tolerance <= ratio && ratio <= 1 + up.tolerance;
  };
  Recommendation r;
  const std::string cur = std::to_string(current);
  if (m.type == TargetType::kAverageValue) {
    // The HPA divides by the current count for the ratio but recommends from
    // the total: ceil(total / target).
    const auto rec = static_cast<int64_t>(std::ceil(v / m.target));
    if (current == 0) {
      r.replicas = rec;
      r.text = m.name + " " + Num(v) + " / target " + Num(m.target) + " per instance -> " +
               std::to_string(rec);
      return r;
    }
    const double ratio = v / (m.target * static_cast<double>(current));
    r.text = m.name + " " + Num(v) + " / (target " + Num(m.target) + " x " + cur + ") = ratio " +
             Num(ratio);
    if (within(ratio)) {
      r.replicas = current;
      r.within_tolerance = true;
      r.text += ", within tolerance -> " + cur;
    } else {
      r.replicas = rec;
      r.text += " -> " + std::to_string(rec);
    }
    return r;
  }
  // kValue and kUtilization: the ratio scales the current count.
  const double ratio = v / m.target;
  r.text = m.name + " " + Num(v) + " / target " + Num(m.target) + " = ratio " + Num(ratio);
  if (within(ratio)) {
    r.replicas = current;
    r.within_tolerance = true;
    r.text += ", within tolerance -> " + cur;
  } else {
    r.replicas = static_cast<int64_t>(std::ceil(ratio * static_cast<double>(current)));
    r.text += " x " + cur + " -> " + std::to_string(r.replicas);
  }
  return r;
}

int64_t HpaDecider::ChangeInPeriod(const std::deque<Event>& events, nanoseconds now,
                                   Seconds period) const {
  // As getReplicasChangePerPeriod: events strictly after now - period.
  int64_t sum = 0;
  for (const Event& e : events) {
    if (e.t > now - period) sum += e.change;
  }
  return sum;
}

void HpaDecider::Prune(nanoseconds now) {
  while (!up_events_.empty() && up_events_.front().t <= now - max_period_) up_events_.pop_front();
  while (!down_events_.empty() && down_events_.front().t <= now - max_period_) {
    down_events_.pop_front();
  }
  // A recommendation at or before now - window counts in neither window again.
  while (!recs_.empty() && recs_.front().t <= now - window_) recs_.pop_front();
}

int64_t HpaDecider::Stabilize(nanoseconds now, int64_t current, int64_t raw, std::string* text) {
  const DirectionBehavior& up = spec_.hpa.up;
  const DirectionBehavior& down = spec_.hpa.down;
  int64_t up_rec = raw, down_rec = raw;
  for (const Rec& r : recs_) {
    if (r.t > now - up.stabilization) up_rec = std::min(up_rec, r.replicas);
    if (r.t > now - down.stabilization) down_rec = std::max(down_rec, r.replicas);
  }
  int64_t out = current;
  if (out < up_rec) out = up_rec;
  if (out > down_rec) out = down_rec;
  recs_.push_back({now, raw});
  Prune(now);
  if (out != raw) {
    if (out > raw) {
      *text += "; stabilized: max " + std::to_string(down_rec) + " over the " +
               std::to_string(down.stabilization.count()) + " s scale-down window -> " +
               std::to_string(out);
    } else {
      *text += "; stabilized: min " + std::to_string(up_rec) + " over the " +
               std::to_string(up.stabilization.count()) + " s scale-up window -> " +
               std::to_string(out);
    }
  }
  return out;
}

int64_t HpaDecider::RateLimit(nanoseconds now, int64_t current, int64_t desired,
                              std::string* text) const {
  if (desired == current) return desired;
  const bool up = desired > current;
  const DirectionBehavior& b = up ? spec_.hpa.up : spec_.hpa.down;
  if (b.select == SelectPolicy::kDisabled) {
    *text +=
        std::string("; scale-") + (up ? "up" : "down") + " disabled -> " + std::to_string(current);
    return current;
  }
  // Max picks the largest change (up: highest count, down: lowest), Min the smallest.
  const bool largest = b.select == SelectPolicy::kMax;
  int64_t limit =
      (up == largest) ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
  std::string parts;
  for (const ScalingPolicy& p : b.policies) {
    const int64_t start = current - ChangeInPeriod(up_events_, now, p.period) +
                          ChangeInPeriod(down_events_, now, p.period);
    int64_t proposed;
    const auto s = static_cast<double>(start);
    if (up) {
      proposed =
          p.type == ScalingPolicy::Type::kPods
              ? start + p.value
              // Rounded up so that a small count can still grow.
              : static_cast<int64_t>(std::ceil(s * (1 + static_cast<double>(p.value) / 100)));
    } else {
      proposed = p.type == ScalingPolicy::Type::kPods
                     ? start - p.value
                     : static_cast<int64_t>(s * (1 - static_cast<double>(p.value) / 100));
    }
    limit = (up == largest) ? std::max(limit, proposed) : std::min(limit, proposed);
    if (!parts.empty()) parts += ", ";
    parts += PolicyName(p) + " from " + std::to_string(start) + ": " + std::to_string(proposed);
  }
  // Never against the direction: a limit behind current waits for old events to age out.
  if (up) limit = std::max(limit, current);
  if (!up) limit = std::min(limit, current);
  const int64_t out = up ? std::min(desired, limit) : std::max(desired, limit);
  if (out != desired) {
    *text += "; rate limit (" + parts + "; select " + (largest ? "max" : "min") + ") -> " +
             std::to_string(out);
  }
  return out;
}

DeciderBase::Core HpaDecider::DecideCore(const Observation& obs) {
  const HpaSpec& h = spec_.hpa;
  const int64_t current = obs.current;
  Core c;
  c.min = spec_.min;
  c.max = spec_.max;
  Decision& d = c.d;
  d.current = current;
  d.desired = current;
  // The HPA seeds a new autoscaler's history with the current count at its
  // first sight, so a restarted (or reloaded) controller waits a whole
  // scale-down window before it removes anything.
  if (!seeded_) {
    seeded_ = true;
    recs_.push_back({obs.now, current});
  }

  // 1. Per-metric recommendations; the largest wins.
  std::vector<std::string> missing;
  std::string active_by = obs.wake ? "a wake (the gateway holds requests)" : "";
  std::string inactive_text;
  bool have = false;
  Recommendation best;
  for (const MetricTarget& m : h.metrics) {
    const MetricSample* s = FindSample(obs, m.name);
    if (s == nullptr || !s->value) {
      missing.push_back(MissingName(m.name, s));
      continue;
    }
    const double v = *s->value;
    if (v > m.activation) {
      if (active_by.empty())
        active_by = m.name + " " + Num(v) + " > activation " + Num(m.activation);
    } else {
      if (!inactive_text.empty()) inactive_text += ", ";
      inactive_text += m.name + " " + Num(v) + " <= " + Num(m.activation);
    }
    Recommendation r = Recommend(m, v, current);
    if (!have || r.replicas > best.replicas) best = std::move(r);
    have = true;
  }
  const bool active = !active_by.empty();
  if (active) {
    last_active_ = obs.now;
    ever_active_ = true;
  }
  const bool to_zero_allowed = spec_.min == 0;  // with min >= 1 activation is ignored

  // 2a. KEDA's activation from zero beats the scaling decision.
  if (to_zero_allowed && current == 0 && active) {
    d.desired = std::max<int64_t>(1, have ? best.replicas : 1);
    d.reason = Reason::kActivate;
    d.explanation = "activate on " + active_by + (have ? ": " + best.text : "") + " -> " +
                    std::to_string(d.desired);
    if (have) {
      recs_.push_back({obs.now, best.replicas});
      Prune(obs.now);
    }
    failures_ = 0;
    return c;
  }

  // 3a. Every metric missing: hold, or the fallback after N evaluations.
  if (!have) {
    ++failures_;
    const std::string all = Join(missing, ", ");
    if (h.fallback.failure_threshold > 0 && failures_ >= h.fallback.failure_threshold) {
      d.desired = h.fallback.replicas;
      d.reason = Reason::kFallback;
      d.explanation = "every metric missing for " + std::to_string(failures_) + " evaluations (" +
                      all + "): fallback -> " + std::to_string(d.desired);
      return c;
    }
    d.reason = Reason::kMetricsMissing;
    d.explanation = "every metric missing (" + all + "): hold at " + std::to_string(current);
    return c;
  }
  failures_ = 0;

  // 2b. At zero and inactive: KEDA keeps it at zero (the HPA is not running).
  if (to_zero_allowed && current == 0) {
    d.desired = 0;
    d.reason = Reason::kNoChange;
    d.explanation = "inactive (" + inactive_text + "): stay at 0";
    return c;
  }

  // 2c. KEDA's cooldown to zero: nothing above its activation threshold for
  // `cooldown` (and the initial cooldown over). Never on partial data.
  const nanoseconds idle = obs.now - last_active_;
  const bool initial_over = obs.now - created_ >= h.initial_cooldown;
  if (to_zero_allowed && !active && missing.empty() && idle >= h.cooldown && initial_over) {
    d.desired = 0;
    d.reason = Reason::kDeactivate;
    d.explanation = "inactive (" + inactive_text + ") for " + Num(Secs(idle)) + " s >= cooldown " +
                    std::to_string(h.cooldown.count()) + " s -> 0";
    return c;
  }

  // 3b. Some metrics missing and the rest say "down": hold.
  if (!missing.empty() && best.replicas < current) {
    d.reason = Reason::kMetricsMissing;
    d.explanation =
        best.text + ", but " + Join(missing, ", ") + " missing: hold at " + std::to_string(current);
    return c;
  }

  // 4. and 5.
  std::string text = best.text;
  if (!missing.empty()) text += " (" + Join(missing, ", ") + " missing)";
  const int64_t stabilized = Stabilize(obs.now, current, best.replicas, &text);
  const int64_t limited = RateLimit(obs.now, current, stabilized, &text);
  d.desired = limited;
  if (limited != stabilized) {
    d.reason = Reason::kRateLimited;
  } else if (stabilized != best.replicas) {
    d.reason = Reason::kStabilized;
  } else if (limited == current) {
    d.reason = best.within_tolerance ? Reason::kWithinTolerance : Reason::kNoChange;
  } else {
    d.reason = limited > current ? Reason::kScaleOut : Reason::kScaleIn;
  }
  // KEDA runs the HPA with minReplicas 1: below that only the cooldown goes.
  if (to_zero_allowed && d.desired < 1) {
    d.desired = 1;
    d.reason = Reason::kCooldown;
    text += "; waiting to go to zero: ";
    text += active ? "active now"
                   : (idle < h.cooldown
                          ? "inactive " + Num(Secs(idle)) + " s of cooldown " +
                                std::to_string(h.cooldown.count()) + " s"
                          : "initial cooldown " + std::to_string(h.initial_cooldown.count()) +
                                " s not over");
    text += " -> 1";
  }
  d.explanation = std::move(text);
  return c;
}

}  // namespace

std::unique_ptr<Decider> NewHpaDecider(const DecisionSpec& spec, std::chrono::nanoseconds created) {
  return std::make_unique<HpaDecider>(spec, created);
}

}  // namespace gantry::autoscale::internal
