// Mode rules: Azure Monitor autoscale settings (azure-docs
// autoscale-understanding-settings.md, autoscale-flapping.md).
//
// One evaluation:
//   1. keep this observation's samples (per metric, as long as the longest
//      window of a rule on it);
//   2. the profile: the first fixed-date one containing the wall time, else
//      the first recurrence that matches, else the default profile;
//   3. a rule's metric missing now: never scale in; below `default` go there;
//   4. any out-rule fires: the largest result; all in-rules fire: the
//      smallest cut, reduced while the projected metric (value * current /
//      new) would make an out-rule fire ("flapping");
//   5. a change waits for the cooldown of the rule that acted last.
// PercentChangeCount rounds the change up and moves at least one instance
// (Azure does not document its rounding; a percent rule must be able to act
// on small counts).
#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "decide_internal.h"
#include "gantry/core/text.h"

namespace gantry::autoscale::internal {
namespace {

using std::chrono::nanoseconds;

std::string_view OpName(Op op) {
  switch (op) {
    case Op::kEquals:
      return "==";
    case Op::kNotEquals:
      return "!=";
    case Op::kGreaterThan:
      return ">";
    case Op::kGreaterThanOrEqual:
      return ">=";
    case Op::kLessThan:
      return "<";
    case Op::kLessThanOrEqual:
      return "<=";
  }
  return "?";
}

std::string_view AggregationName(TimeAggregation a) {
  switch (a) {
    case TimeAggregation::kAverage:
      return "average";
    case TimeAggregation::kMinimum:
      return "minimum";
    case TimeAggregation::kMaximum:
      return "maximum";
    case TimeAggregation::kTotal:
      return "total";
    case TimeAggregation::kCount:
      return "count";
    case TimeAggregation::kLast:
      return "last";
  }
  return "?";
}

bool Compare(Op op, double v, double threshold) {
  switch (op) {
    case Op::kEquals:
      return v == threshold;
    case Op::kNotEquals:
      return v != threshold;
    case Op::kGreaterThan:
      return v > threshold;
    case Op::kGreaterThanOrEqual:
      return v >= threshold;
    case Op::kLessThan:
      return v < threshold;
    case Op::kLessThanOrEqual:
      return v <= threshold;
  }
  return false;
}

// The count a rule's action gives from `current`.
int64_t Act(const Rule& r, int64_t current) {
  const bool up = r.direction == Direction::kIncrease;
  switch (r.type) {
    case ActionType::kExactCount:
      return r.value;
    case ActionType::kChangeCount:
      return up ? current + r.value : current - r.value;
    case ActionType::kPercentChangeCount: {
      const auto change =
          std::max<int64_t>(1, static_cast<int64_t>(std::ceil(static_cast<double>(current) *
                                                              static_cast<double>(r.value) / 100)));
      return up ? current + change : current - change;
    }
  }
  return current;
}

std::string ActionText(const Rule& r) {
  const char* sign = r.direction == Direction::kIncrease ? "+" : "-";
  switch (r.type) {
    case ActionType::kExactCount:
      return "exactly " + std::to_string(r.value);
    case ActionType::kChangeCount:
      return sign + std::to_string(r.value);
    case ActionType::kPercentChangeCount:
      return sign + std::to_string(r.value) + "%";
  }
  return "?";
}

class RulesDecider final : public DeciderBase {
 public:
  explicit RulesDecider(const DecisionSpec& spec) : DeciderBase(spec) {
    for (const Profile& p : spec_.profiles) {
      for (const Rule& r : p.rules) {
        nanoseconds& keep = keep_[r.metric];
        keep = std::max<nanoseconds>(keep, r.window);
      }
    }
  }

  void Applied(nanoseconds now, int64_t from, int64_t to) override {
    last_applied_ = {{"t_s", Secs(now)}, {"from", from}, {"to", to}};
  }

  Json State() const override {
    Json j;
    j["mode"] = "rules";
    j["profile"] = profile_;
    j["cooldown_until_s"] = cooldown_until_ ? Json(Secs(*cooldown_until_)) : Json(nullptr);
    j["cooldown_rule"] = cooldown_rule_;
    Json samples = Json::object();
    for (const auto& [name, q] : samples_) {
      Json arr = Json::array();
      for (const auto& [t, v] : q) arr.push_back({{"t_s", Secs(t)}, {"value", v}});
      samples[name] = std::move(arr);
    }
    j["samples"] = std::move(samples);
    j["last_applied"] = last_applied_;
    return j;
  }

 protected:
  Core DecideCore(const Observation& obs) override;
  void Decided(const Observation& obs, const Decision& d) override {
    if (pending_ && d.desired != d.current) {
      cooldown_until_ = obs.now + pending_->cooldown;
      cooldown_rule_ = pending_name_;
    }
    pending_ = nullptr;
  }

 private:
  struct Evaluated {
    const Rule* rule;
    std::string name;  // "out-rule 1"
    double value;      // aggregated, divided per instance when asked
    bool fires;
    std::string text;  // "cpu average 85 > 80"
  };

  const Profile* SelectProfile(std::chrono::system_clock::time_point wall) const;
  double Aggregate(const Rule& r, nanoseconds now) const;

  std::map<std::string, nanoseconds> keep_;
  std::map<std::string, std::deque<std::pair<nanoseconds, double>>> samples_;
  std::optional<nanoseconds> cooldown_until_;
  std::string cooldown_rule_, profile_;
  const Rule* pending_ = nullptr;  // the rule acting in this evaluation
  std::string pending_name_;
  Json last_applied_ = nullptr;
};

const Profile* RulesDecider::SelectProfile(std::chrono::system_clock::time_point wall) const {
  for (const Profile& p : spec_.profiles) {
    if (p.fixed_date && p.fixed_date->first <= wall && wall < p.fixed_date->second) return &p;
  }
  for (const Profile& p : spec_.profiles) {
    if (p.recurrence && InWindow(*p.recurrence, wall)) return &p;
  }
  for (const Profile& p : spec_.profiles) {
    if (!p.recurrence && !p.fixed_date) return &p;
  }
  return nullptr;
}

double RulesDecider::Aggregate(const Rule& r, nanoseconds now) const {
  const auto it = samples_.find(r.metric);
  // The caller checked that this observation had a sample, so the window
  // holds at least that one.
  double sum = 0, lo = 0, hi = 0, last = 0;
  int64_t n = 0;
  for (const auto& [t, v] : it->second) {
    if (t <= now - r.window) continue;
    lo = n == 0 ? v : std::min(lo, v);
    hi = n == 0 ? v : std::max(hi, v);
    sum += v;
    last = v;
    ++n;
  }
  switch (r.aggregation) {
    case TimeAggregation::kAverage:
      return n == 0 ? 0 : sum / static_cast<double>(n);
    case TimeAggregation::kMinimum:
      return lo;
    case TimeAggregation::kMaximum:
      return hi;
    case TimeAggregation::kTotal:
      return sum;
    case TimeAggregation::kCount:
      return static_cast<double>(n);
    case TimeAggregation::kLast:
      return last;
  }
  return 0;
}

DeciderBase::Core RulesDecider::DecideCore(const Observation& obs) {
  const int64_t current = obs.current;
  Core c;
  Decision& d = c.d;
  d.current = current;
  d.desired = current;
  pending_ = nullptr;

  // 1. Keep the samples.
  for (const auto& [name, keep] : keep_) {
    auto& q = samples_[name];
    const MetricSample* s = FindSample(obs, name);
    if (s != nullptr && s->value) q.emplace_back(obs.now, *s->value);
    while (!q.empty() && q.front().first <= obs.now - keep) q.pop_front();
  }

  // 2. The profile.
  const Profile* p = SelectProfile(obs.wall);
  if (p == nullptr) {
    c.min = spec_.min;
    c.max = spec_.max;
    profile_.clear();
    d.reason = Reason::kNoRule;
    d.explanation = "no profile matches " + FormatUtc(obs.wall, "%Y-%m-%dT%H:%M:%SZ") +
                    " and there is no default profile: hold at " + std::to_string(current);
    return c;
  }
  profile_ = p->name;
  c.min = p->minimum;
  c.max = p->maximum;
  const std::string where = "profile '" + p->name + "': ";

  // 3. Missing metrics: never scale in; below the default, go there.
  std::vector<std::string> missing;
  for (const Rule& r : p->rules) {
    const MetricSample* s = FindSample(obs, r.metric);
    if (s != nullptr && s->value) continue;
    std::string m = MissingName(r.metric, s);
    if (std::find(missing.begin(), missing.end(), m) == missing.end()) missing.push_back(m);
  }
  if (!missing.empty()) {
    d.reason = Reason::kMetricsMissing;
    d.explanation = where + Join(missing, ", ") + " missing: never scale in";
    if (current < p->default_count) {
      d.desired = p->default_count;
      d.explanation += "; below default " + std::to_string(p->default_count) + " -> " +
                       std::to_string(d.desired);
    } else {
      d.explanation += ", hold at " + std::to_string(current);
    }
    return c;
  }

  // 4. Evaluate every rule.
  std::vector<Evaluated> out, in;
  const double per = static_cast<double>(std::max<int64_t>(1, current));
  for (size_t i = 0; i < p->rules.size(); ++i) {
    const Rule& r = p->rules[i];
    double v = Aggregate(r, obs.now);
    std::string text = r.metric + " " + std::string(AggregationName(r.aggregation)) + " " + Num(v);
    if (r.divide_per_instance) {
      v /= per;
      text += " / " + std::to_string(std::max<int64_t>(1, current)) + " = " + Num(v);
    }
    const bool fires = Compare(r.op, v, r.threshold);
    text += std::string(" ") + (fires ? "" : "not ") + std::string(OpName(r.op)) + " " +
            Num(r.threshold);
    const bool up = r.direction == Direction::kIncrease;
    (up ? out : in).push_back({&r, "rule " + std::to_string(i + 1), v, fires, std::move(text)});
  }
  auto fires_out = [&](double factor, std::string* why) {
    for (const Evaluated& e : out) {
      const double projected = e.value * factor;
      if (Compare(e.rule->op, projected, e.rule->threshold)) {
        if (why) {
          *why = e.rule->metric + " projected " + Num(e.value) + " x " + Num(factor) + " = " +
                 Num(projected) + " " + std::string(OpName(e.rule->op)) + " " +
                 Num(e.rule->threshold);
        }
        return true;
      }
    }
    return false;
  };
  const bool cooling = cooldown_until_ && obs.now < *cooldown_until_;
  auto cooldown_text = [&] {
    return "; in the cooldown of " + cooldown_rule_ + " for " +
           Num(Secs(*cooldown_until_ - obs.now)) + " s more: hold at " + std::to_string(current);
  };

  // Scale out: any out-rule, the largest result.
  const Evaluated* acting = nullptr;
  int64_t target = current;
  for (const Evaluated& e : out) {
    if (!e.fires) continue;
    const int64_t n = Act(*e.rule, current);
    if (n > target) {
      target = n;
      acting = &e;
    }
  }
  if (acting != nullptr) {
    d.explanation = where + acting->name + " (" + acting->text + ") " + ActionText(*acting->rule) +
                    ": " + std::to_string(current) + " -> " + std::to_string(target);
    if (cooling) {
      d.reason = Reason::kCooldown;
      d.explanation += cooldown_text();
      return c;
    }
    d.desired = target;
    d.reason = Reason::kScaleOut;
    pending_ = acting->rule;
    pending_name_ = acting->name;
    return c;
  }

  // Scale in: every in-rule fires; the smallest cut (the largest count).
  const bool all_in =
      !in.empty() && std::all_of(in.begin(), in.end(), [](const Evaluated& e) { return e.fires; });
  if (!all_in) {
    std::vector<std::string> parts;
    for (const Evaluated& e : out) parts.push_back(e.name + " " + e.text);
    for (const Evaluated& e : in) parts.push_back(e.name + " " + e.text);
    d.reason = Reason::kNoRule;
    d.explanation =
        where + "no rule fired (" + Join(parts, "; ") + "): hold at " + std::to_string(current);
    return c;
  }
  const Evaluated* cut = nullptr;
  int64_t lowest = -1;
  for (const Evaluated& e : in) {
    const int64_t n = std::max<int64_t>(0, Act(*e.rule, current));
    if (n > lowest) {
      lowest = n;
      cut = &e;
    }
  }
  lowest = std::max(lowest, p->minimum);
  d.explanation =
      where + "all in-rules fire (" + cut->name + " " + cut->text + ") " + ActionText(*cut->rule);
  if (lowest >= current) {
    d.reason = Reason::kNoChange;
    d.explanation += ", but " + std::to_string(current) + " is at the minimum " +
                     std::to_string(p->minimum) + ": hold";
    return c;
  }
  // Flapping protection: cut fewer while the projection would scale out
  // again. Onto 0 instances the per-instance divisor is 1, as in evaluation.
  int64_t next = lowest;
  std::string why;
  while (next < current &&
         fires_out(static_cast<double>(current) / static_cast<double>(std::max<int64_t>(1, next)),
                   &why)) {
    ++next;
  }
  if (next >= current) {
    d.reason = Reason::kFlapping;
    d.explanation += ": " + std::to_string(current) + " -> " + std::to_string(lowest) +
                     " would flap (" + why + "): hold at " + std::to_string(current);
    return c;
  }
  d.explanation += ": " + std::to_string(current) + " -> " + std::to_string(lowest);
  if (next != lowest) {
    d.explanation += ", flapping (" + why + "), cut fewer -> " + std::to_string(next);
  }
  if (cooling) {
    d.reason = Reason::kCooldown;
    d.explanation += cooldown_text();
    return c;
  }
  d.desired = next;
  d.reason = Reason::kScaleIn;
  pending_ = cut->rule;
  pending_name_ = cut->name;
  return c;
}

}  // namespace

std::unique_ptr<Decider> NewRulesDecider(const DecisionSpec& spec, std::chrono::nanoseconds) {
  return std::make_unique<RulesDecider>(spec);
}

}  // namespace gantry::autoscale::internal
