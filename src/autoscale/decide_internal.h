// Pieces the two deciders (decide_hpa.cc, decide_rules.cc) share with
// decide.cc. Not installed.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "gantry/autoscale/decide.h"

namespace gantry::autoscale::internal {

// A number for an explanation: integers without a fraction ("37"), others
// with two decimals, trailing zeros dropped ("3.08", "1.1").
std::string Num(double v);
// Monotonic nanoseconds as seconds, for State() and explanations.
double Secs(std::chrono::nanoseconds t);
// The sample named `name` in `obs`, or nullptr.
const MetricSample* FindSample(const Observation& obs, std::string_view name);
// "name (error)" or "name" for a missing sample.
std::string MissingName(std::string_view name, const MetricSample* s);

// Decide() is the mode's own decision followed by the bounds every mode
// shares (schedules, the floor metric, [min, max]), in that order.
class DeciderBase : public Decider {
 public:
  explicit DeciderBase(DecisionSpec spec) : spec_(std::move(spec)) {}
  Decision Decide(const Observation& obs) final;

 protected:
  struct Core {
    Decision d;
    int64_t min = 0, max = 0;  // the bounds that apply (rules: the profile's)
  };
  virtual Core DecideCore(const Observation& obs) = 0;
  // The final decision, after the bounds (the rules' cooldown starts here).
  virtual void Decided(const Observation& obs, const Decision& d) {}

  const DecisionSpec spec_;
};

std::unique_ptr<Decider> NewHpaDecider(const DecisionSpec& spec, std::chrono::nanoseconds created);
std::unique_ptr<Decider> NewRulesDecider(const DecisionSpec& spec,
                                         std::chrono::nanoseconds created);

}  // namespace gantry::autoscale::internal
