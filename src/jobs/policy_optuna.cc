// optuna.pruners.PercentilePruner and MedianPruner (percentile 50), after
// optuna/pruners/_percentile.py. A report at step s of a running trial is
// pruned when all of these hold:
//   - at least n_startup_trials (and at least one) trials have COMPLETED;
//   - s >= n_warmup_steps;
//   - s is the trial's first report in its window: its previous report came
//     before n_warmup_steps + k * interval_steps, the window start at or
//     below s (Optuna's _is_first_in_interval_step);
//   - the trial's best value over its reports is NaN (every one NaN), or at
//     least n_min_trials completed trials reported at exactly step s and the
//     trial's best is worse than numpy.nanpercentile of their values at s,
//     at percentile p when minimizing and 100 - p when maximizing (all of
//     them NaN: not pruned).
// Stopped and running trials never count: only completed ones.
#include <cmath>
#include <map>
#include <memory>
#include <vector>

#include "policy_internal.h"

namespace gantry::jobs::internal {
namespace {

using State = TrialStates::State;

class Optuna final : public EarlyTermination {
 public:
  Optuna(const PolicySpec& spec, Goal goal) : spec_(spec), goal_(goal) {}

  Decision Report(int trial, int64_t step, double value) override {
    int64_t previous = states_.Accept(trial, step) ? PreviousStep(trial) : kIgnored;
    if (previous == kIgnored) return states_.Current(trial);
    Trial& t = trials_[trial];
    t.reports.push_back({step, value});
    if (!std::isnan(value)) {
      bool better = goal_ == Goal::kMaximize ? value > t.best : value < t.best;
      if (std::isnan(t.best) || better) t.best = value;
    }
    if (!Prunes(t, step, previous)) return Decision::kContinue;
    states_.set_state(trial, State::kStopped);
    return Decision::kStop;
  }

  void Complete(int trial) override {
    states_.Touch(trial);
    if (states_.state(trial) != State::kRunning) return;
    states_.set_state(trial, State::kCompleted);
    ++completed_;
    if (trials_.size() <= static_cast<size_t>(trial)) return;
    for (const auto& [step, value] : trials_[trial].reports) {
      AtStep& at = completed_at_[step];
      ++at.count;
      if (!std::isnan(value)) at.numbers.Insert(value, trial);
    }
  }

  std::vector<int> TakePromotions() override { return {}; }

 private:
  static constexpr int64_t kIgnored = INT64_MIN;
  struct Trial {
    std::vector<std::pair<int64_t, double>> reports;
    double best = std::numeric_limits<double>::quiet_NaN();
  };
  struct AtStep {
    size_t count = 0;   // completed trials with a value at this step, NaN included
    RankedSet numbers;  // their values that are numbers
  };

  // The step the trial reported before this one, -1 if none (Optuna's
  // starting value for "second last step").
  int64_t PreviousStep(int trial) {
    if (trials_.size() <= static_cast<size_t>(trial)) trials_.resize(trial + 1);
    const Trial& t = trials_[trial];
    return t.reports.empty() ? -1 : t.reports.back().first;
  }

  bool Prunes(const Trial& t, int64_t step, int64_t previous) const {
    if (completed_ == 0 || completed_ < spec_.n_startup_trials) return false;
    if (step < spec_.n_warmup_steps) return false;
    int64_t window = (step - spec_.n_warmup_steps) / spec_.interval_steps * spec_.interval_steps +
                     spec_.n_warmup_steps;
    if (previous >= window) return false;
    if (std::isnan(t.best)) return true;
    auto it = completed_at_.find(step);
    if (it == completed_at_.end() || it->second.count < static_cast<size_t>(spec_.n_min_trials)) {
      return false;
    }
    if (it->second.numbers.empty()) return false;
    double q = goal_ == Goal::kMaximize ? 100 - spec_.percentile : spec_.percentile;
    double p = Percentile(it->second.numbers, q);
    return goal_ == Goal::kMaximize ? t.best < p : t.best > p;
  }

  PolicySpec spec_;
  Goal goal_;
  TrialStates states_;
  std::vector<Trial> trials_;
  int64_t completed_ = 0;
  std::map<int64_t, AtStep> completed_at_;
};

}  // namespace

std::unique_ptr<EarlyTermination> MakeOptuna(const PolicySpec& spec, Goal goal) {
  return std::make_unique<Optuna>(spec, goal);
}

}  // namespace gantry::jobs::internal
