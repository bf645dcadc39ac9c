// Azure ML's Bandit, Median stopping and Truncation selection policies.
//
// Azure evaluates them in the service with no public code; these are the
// documented rules made exact for reports that arrive one at a time. A trial
// is judged when it reports a step N on the schedule (a multiple of
// evaluation_interval, at least delay_evaluation), against what every trial
// (running, stopped or completed) has reported so far at steps <= N. NaN
// values are skipped in bests and averages and rank below every number.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <vector>

#include "policy_internal.h"

namespace gantry::jobs::internal {
namespace {

using State = TrialStates::State;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// ---- Bandit

// The best value over all reports at steps <= N, for any N, as a staircase:
// (step, best) with both increasing, so a query is one map lookup and an
// insert removes the entries it dominates (amortised O(log n)).
class PrefixBest {
 public:
  void Add(int64_t step, double v) {
    if (v <= At(step)) return;
    auto it = steps_.insert_or_assign(step, v).first;
    auto next = std::next(it);
    while (next != steps_.end() && next->second <= v) next = steps_.erase(next);
  }
  // -inf when nothing was reported at steps <= `step`.
  double At(int64_t step) const {
    auto it = steps_.upper_bound(step);
    return it == steps_.begin() ? kNegInf : std::prev(it)->second;
  }

 private:
  std::map<int64_t, double> steps_;
};

class Bandit final : public EarlyTermination {
 public:
  Bandit(const PolicySpec& spec, Goal goal) : spec_(spec), goal_(goal) {}

  Decision Report(int trial, int64_t step, double value) override {
    if (!states_.Accept(trial, step)) return states_.Current(trial);
    if (best_.size() <= static_cast<size_t>(trial)) best_.resize(trial + 1, kNegInf);
    double o = Oriented(value, goal_);
    best_[trial] = std::max(best_[trial], o);
    if (!std::isnan(value)) all_.Add(step, o);
    if (!AzureEvaluates(spec_, step)) return Decision::kContinue;
    double top = all_.At(step);
    if (top == kNegInf) return Decision::kContinue;  // nothing but NaN so far
    if (best_[trial] == kNegInf || best_[trial] < Cutoff(top)) {
      states_.set_state(trial, State::kStopped);
      return Decision::kStop;
    }
    return Decision::kContinue;
  }
  void Complete(int trial) override {
    states_.Touch(trial);
    if (states_.state(trial) == State::kRunning) states_.set_state(trial, State::kCompleted);
  }
  std::vector<int> TakePromotions() override { return {}; }

 private:
  // The lowest oriented value still within the slack of `top` (oriented).
  // Azure documents maximize: best / (1 + f) or best - a; minimize is
  // undocumented and taken as best * (1 + f) or best + a. |best| makes the
  // ratio widen away from the best for negative metrics too (where
  // best / (1 + f) would lie above a negative best and stop the best trial).
  double Cutoff(double top) const {
    if (spec_.slack_amount) return top - *spec_.slack_amount;
    double f = *spec_.slack_factor;
    double gap = goal_ == Goal::kMaximize ? std::fabs(top) * f / (1 + f) : std::fabs(top) * f;
    return top - gap;
  }

  PolicySpec spec_;
  Goal goal_;
  TrialStates states_;
  std::vector<double> best_;  // oriented; -inf while only NaN
  PrefixBest all_;
};

// ---- The statistic of every trial as of a step

// Median and Truncation compare a trial at step N with one number per trial
// "as of N" (its running average, its latest value), i.e. the value computed
// at the trial's last report at a step <= N. Recomputing that set per query
// is O(trials); instead:
//   - fin_[N], made on the first query at N, holds the as-of-N values that
//     can no longer change: of trials that have reported at N or beyond, and
//     of trials that have ended;
//   - live_[s] holds the current value of each running trial whose last
//     report was at step s; the ones with s < N complete the set for N.
// A report moves its trial from live_[p] to live_[s] and finalises its value
// in the fin_ sets between p and s; an ending trial finalises into every
// later fin_ set. Steps shared by the trials (epochs, iterations) keep both
// maps small; the query then costs O(k log n) for k live steps below N.
class AsOfStep {
 public:
  struct View {
    std::vector<const RankedSet*> sets;
    size_t size = 0;
    size_t CountLess(double v) const {
      size_t n = 0;
      for (const RankedSet* s : sets) n += s->CountLess(v);
      return n;
    }
    size_t CountLessEqual(double v) const {
      size_t n = 0;
      for (const RankedSet* s : sets) n += s->CountLessEqual(v);
      return n;
    }
    double MaxAtMost(double v) const {
      double m = kNegInf;
      for (const RankedSet* s : sets) m = std::max(m, s->MaxAtMost(v));
      return m;
    }
    double MinAbove(double v) const {
      double m = std::numeric_limits<double>::infinity();
      for (const RankedSet* s : sets) m = std::min(m, s->MinAbove(v));
      return m;
    }
  };

  // `trial` reported `step` (greater than its previous one); its value is now `v`.
  void Update(int trial, int64_t step, double v) {
    if (trials_.size() <= static_cast<size_t>(trial)) trials_.resize(trial + 1);
    Trial& t = trials_[trial];
    if (!t.steps.empty()) {
      int64_t p = t.steps.back();
      double old = t.values.back();
      EraseLive(p, old, trial);
      for (auto it = fin_.upper_bound(p); it != fin_.end() && it->first < step; ++it) {
        it->second.Insert(old, trial);
      }
    }
    if (auto it = fin_.find(step); it != fin_.end()) it->second.Insert(v, trial);
    t.steps.push_back(step);
    t.values.push_back(v);
    live_[step].Insert(v, trial);
  }

  // `trial` reports no more; its last value holds for every later step.
  void Finish(int trial) {
    if (trials_.size() <= static_cast<size_t>(trial)) return;
    Trial& t = trials_[trial];
    if (t.finished || t.steps.empty()) return;
    t.finished = true;
    int64_t p = t.steps.back();
    EraseLive(p, t.values.back(), trial);
    for (auto it = fin_.upper_bound(p); it != fin_.end(); ++it) {
      it->second.Insert(t.values.back(), trial);
    }
  }

  View At(int64_t step) {
    View view;
    auto [fin, made] = fin_.try_emplace(step);
    if (made) Materialize(step, &fin->second);
    view.sets.push_back(&fin->second);
    view.size = fin->second.size();
    for (auto it = live_.begin(); it != live_.end() && it->first < step; ++it) {
      view.sets.push_back(&it->second);
      view.size += it->second.size();
    }
    return view;
  }

 private:
  struct Trial {
    std::vector<int64_t> steps;
    std::vector<double> values;  // the value as of each step in `steps`
    bool finished = false;
  };

  void EraseLive(int64_t step, double v, int trial) {
    auto it = live_.find(step);
    it->second.Erase(v, trial);
    if (it->second.empty()) live_.erase(it);
  }

  void Materialize(int64_t step, RankedSet* set) {
    for (size_t i = 0; i < trials_.size(); ++i) {
      const Trial& t = trials_[i];
      if (t.steps.empty() || t.steps.front() > step) continue;
      if (!t.finished && t.steps.back() < step) continue;  // live
      size_t k = std::upper_bound(t.steps.begin(), t.steps.end(), step) - t.steps.begin() - 1;
      set->Insert(t.values[k], static_cast<int>(i));
    }
  }

  std::vector<Trial> trials_;
  std::map<int64_t, RankedSet> fin_;
  std::map<int64_t, RankedSet> live_;
};

// ---- Median stopping

// Vizier's rule as Azure words it: at N, stop a trial whose best value up to
// N is worse than the median of all trials' running averages over 1..N (the
// trial's own included; numpy's median, the mean of the middle two for an
// even count). A trial without a number yet has no average and is left out.
class Median final : public EarlyTermination {
 public:
  Median(const PolicySpec& spec, Goal goal) : spec_(spec), goal_(goal) {}

  Decision Report(int trial, int64_t step, double value) override {
    if (!states_.Accept(trial, step)) return states_.Current(trial);
    if (t_.size() <= static_cast<size_t>(trial)) t_.resize(trial + 1);
    Trial& t = t_[trial];
    if (!std::isnan(value)) {
      double o = Oriented(value, goal_);
      t.best = std::max(t.best, o);
      t.sum += o;
      ++t.count;
    }
    if (t.count > 0) avg_.Update(trial, step, t.sum / static_cast<double>(t.count));
    if (!AzureEvaluates(spec_, step)) return Decision::kContinue;
    AsOfStep::View view = avg_.At(step);
    if (view.size == 0 || !WorseThanMedian(view, t.best)) return Decision::kContinue;
    states_.set_state(trial, State::kStopped);
    avg_.Finish(trial);
    return Decision::kStop;
  }
  void Complete(int trial) override {
    states_.Touch(trial);
    if (states_.state(trial) != State::kRunning) return;
    states_.set_state(trial, State::kCompleted);
    avg_.Finish(trial);
  }
  std::vector<int> TakePromotions() override { return {}; }

 private:
  struct Trial {
    double best = kNegInf;
    double sum = 0;
    int64_t count = 0;
  };

  // best < median without sorting: by how many values are <= best, and only
  // for an even count with best between the middle two, their mean.
  static bool WorseThanMedian(const AsOfStep::View& view, double best) {
    size_t n = view.size;
    size_t at_most = view.CountLessEqual(best);
    if (n % 2 == 1) return at_most <= (n - 1) / 2;
    size_t k = n / 2;
    if (at_most < k) return true;
    if (at_most > k) return false;
    return best < (view.MaxAtMost(best) + view.MinAbove(best)) / 2;
  }

  PolicySpec spec_;
  Goal goal_;
  TrialStates states_;
  std::vector<Trial> t_;
  AsOfStep avg_;
};

// ---- Truncation selection

// At N, the n trials' latest values as of N are ranked and
// k = floor(n * truncation_percentage / 100) is the number truncated; the
// reporting trial stops when fewer than k other trials are as bad as or
// worse than it, i.e. it is strictly among the k worst (trials tied at the
// boundary go on). A NaN value is below every number and stops whenever
// k >= 1. Finished trials count (Azure v1 always sends
// exclude_finished_jobs=False).
class Truncation final : public EarlyTermination {
 public:
  Truncation(const PolicySpec& spec, Goal goal) : spec_(spec), goal_(goal) {}

  Decision Report(int trial, int64_t step, double value) override {
    if (!states_.Accept(trial, step)) return states_.Current(trial);
    double o = Oriented(value, goal_);
    latest_.Update(trial, step, o);
    if (!AzureEvaluates(spec_, step)) return Decision::kContinue;
    AsOfStep::View view = latest_.At(step);
    size_t k = view.size * static_cast<size_t>(spec_.truncation_percentage) / 100;
    if (k == 0) return Decision::kContinue;
    bool stop = std::isnan(value) || view.CountLessEqual(o) - 1 < k;
    if (!stop) return Decision::kContinue;
    states_.set_state(trial, State::kStopped);
    latest_.Finish(trial);
    return Decision::kStop;
  }
  void Complete(int trial) override {
    states_.Touch(trial);
    if (states_.state(trial) != State::kRunning) return;
    states_.set_state(trial, State::kCompleted);
    latest_.Finish(trial);
  }
  std::vector<int> TakePromotions() override { return {}; }

 private:
  PolicySpec spec_;
  Goal goal_;
  TrialStates states_;
  AsOfStep latest_;
};

}  // namespace

std::unique_ptr<EarlyTermination> MakeBandit(const PolicySpec& spec, Goal goal) {
  return std::make_unique<Bandit>(spec, goal);
}
std::unique_ptr<EarlyTermination> MakeMedian(const PolicySpec& spec, Goal goal) {
  return std::make_unique<Median>(spec, goal);
}
std::unique_ptr<EarlyTermination> MakeTruncation(const PolicySpec& spec, Goal goal) {
  return std::make_unique<Truncation>(spec, goal);
}

}  // namespace gantry::jobs::internal
