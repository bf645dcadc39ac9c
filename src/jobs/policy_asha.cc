// Ray Tune's ASHAScheduler with one bracket (ray/tune/schedulers/
// async_hyperband.py), plus the original ASHA paper's promotion for trials
// that pause instead of stopping.
//
// Rungs sit at grace_period * reduction_factor^k below max_t. On the first
// report at or past a rung's milestone (the highest one passed; lower rungs
// skipped by a jump in steps are not filled in, as in Ray), the value is
// compared with the (1 - 1/rf) * 100th percentile of the values recorded
// there before (numpy's nanpercentile: NaN left out) and then recorded. A
// value below the cutoff stops the trial, or pauses it with pause_on_prune.
// Ray would keep a NaN trial running (NaN < cutoff is false); here a NaN is
// worse than any cutoff. A report at step >= max_t stops the trial (its
// budget is spent), paused or not.
//
// A paused trial is promoted, once, when later values at its rung put it in
// the top floor(n / rf) of the n recorded there (itself included; ties with
// the floor(n/rf)-th best count as in), and then runs on to the next rung.
#include <cmath>
#include <memory>
#include <set>
#include <vector>

#include "policy_internal.h"

namespace gantry::jobs::internal {
namespace {

using State = TrialStates::State;

class Asha final : public EarlyTermination {
 public:
  Asha(const PolicySpec& spec, Goal goal, bool pause)
      : goal_(goal),
        pause_(pause),
        rf_(spec.reduction_factor),
        max_t_(spec.max_t),
        // Computed as Ray does, (1 - 1/rf) * 100, so the percentile matches.
        cutoff_q_((1.0 - 1.0 / static_cast<double>(spec.reduction_factor)) * 100.0) {
    for (int64_t m = spec.grace_period; m < spec.max_t; m *= spec.reduction_factor) {
      rungs_.push_back(Rung{m, {}, {}, {}});
      if (m > INT64_MAX / spec.reduction_factor) break;
    }
  }

  Decision Report(int trial, int64_t step, double value) override {
    if (!states_.Accept(trial, step)) return states_.Current(trial);
    if (recorded_.size() <= static_cast<size_t>(trial)) recorded_.resize(trial + 1, -1);
    if (step >= max_t_) {
      states_.set_state(trial, State::kStopped);
      return Decision::kStop;
    }
    int r = HighestRungAtMost(step);
    if (r < 0 || recorded_[trial] >= r) return Decision::kContinue;
    Rung& rung = rungs_[r];
    double o = Oriented(value, goal_);
    bool worse =
        !rung.numbers.empty() && (std::isnan(value) || o < Percentile(rung.numbers, cutoff_q_));
    rung.all.Insert(o, trial);
    if (!std::isnan(value)) rung.numbers.Insert(o, trial);
    recorded_[trial] = r;
    if (worse) {
      if (!pause_) {
        states_.set_state(trial, State::kStopped);
        return Decision::kStop;
      }
      states_.set_state(trial, State::kPaused);
      rung.paused.insert({o, trial});
    }
    Promote(rung, trial);
    return states_.Current(trial);
  }

  void Complete(int trial) override {
    states_.Touch(trial);
    if (states_.state(trial) == State::kRunning) states_.set_state(trial, State::kCompleted);
  }

  std::vector<int> TakePromotions() override {
    std::vector<int> out;
    out.swap(promoted_);
    return out;
  }

 private:
  struct ByBest {
    bool operator()(const Key& a, const Key& b) const {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    }
  };
  struct Rung {
    int64_t milestone;
    RankedSet all;      // every recorded value, oriented, NaN as -inf
    RankedSet numbers;  // the recorded values that are numbers (for the percentile)
    std::set<Key, ByBest> paused;
  };

  int HighestRungAtMost(int64_t step) const {
    int r = -1;
    for (size_t i = 0; i < rungs_.size() && rungs_[i].milestone <= step; ++i)
      r = static_cast<int>(i);
    return r;
  }

  // Resumes the paused trials of `rung` that are now in its top floor(n/rf);
  // `reporter` (just recorded) is told through Report's answer instead.
  void Promote(Rung& rung, int reporter) {
    size_t top = rung.all.size() / static_cast<size_t>(rf_);
    while (!rung.paused.empty()) {
      auto [o, trial] = *rung.paused.begin();
      size_t better = rung.all.size() - rung.all.CountLessEqual(o);
      if (o == -std::numeric_limits<double>::infinity() || better >= top) return;  // NaN: never
      rung.paused.erase(rung.paused.begin());
      states_.set_state(trial, State::kRunning);
      if (trial != reporter) promoted_.push_back(trial);
    }
  }

  Goal goal_;
  bool pause_;
  int64_t rf_;
  int64_t max_t_;
  double cutoff_q_;
  std::vector<Rung> rungs_;  // ascending milestones
  TrialStates states_;
  std::vector<int> recorded_;  // the highest rung each trial recorded at, -1 none
  std::vector<int> promoted_;
};

}  // namespace

std::unique_ptr<EarlyTermination> MakeAsha(const PolicySpec& spec, Goal goal, bool pause_on_prune) {
  return std::make_unique<Asha>(spec, goal, pause_on_prune);
}

}  // namespace gantry::jobs::internal
