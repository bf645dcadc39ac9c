// Shared pieces of the early-termination policies (policy_*.cc): an
// order-statistic set of (value, trial) and numpy-compatible percentiles.
#pragma once

#include <climits>
#include <cmath>
#include <ext/pb_ds/assoc_container.hpp>
#include <ext/pb_ds/tree_policy.hpp>
#include <functional>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "gantry/jobs/sweep.h"

namespace gantry::jobs::internal {

// (value, trial): the trial makes equal values distinct keys.
using Key = std::pair<double, int>;

// A sorted set with rank queries in O(log n) (a red-black tree whose nodes
// know their subtree sizes).
class RankedSet {
 public:
  void Insert(double v, int trial) { tree_.insert({v, trial}); }
  void Erase(double v, int trial) { tree_.erase({v, trial}); }
  size_t size() const { return tree_.size(); }
  bool empty() const { return tree_.empty(); }
  // Number of values < v.
  size_t CountLess(double v) const { return tree_.order_of_key({v, INT_MIN}); }
  // Number of values <= v.
  size_t CountLessEqual(double v) const { return tree_.order_of_key({v, INT_MAX}); }
  // The i-th smallest value, 0-based; i < size().
  double At(size_t i) const { return tree_.find_by_order(i)->first; }
  // The largest value <= v, or -inf when none.
  double MaxAtMost(double v) const {
    auto it = tree_.lower_bound({v, INT_MAX});
    if (it == tree_.begin()) return -std::numeric_limits<double>::infinity();
    return std::prev(it)->first;
  }
  // The smallest value > v, or +inf when none.
  double MinAbove(double v) const {
    auto it = tree_.lower_bound({v, INT_MAX});
    if (it == tree_.end()) return std::numeric_limits<double>::infinity();
    return it->first;
  }

 private:
  __gnu_pbds::tree<Key, __gnu_pbds::null_type, std::less<Key>, __gnu_pbds::rb_tree_tag,
                   __gnu_pbds::tree_order_statistics_node_update>
      tree_;
};

// numpy.percentile(values, q) with the default linear method over the n
// values of `set` (n >= 1), q in [0, 100]: the value at virtual index
// q/100 * (n - 1), interpolated as numpy's _lerp does (from the upper
// neighbour when the fraction is >= 0.5) so that results match to the bit.
inline double Percentile(const RankedSet& set, double q) {
  size_t n = set.size();
  double index = q / 100.0 * static_cast<double>(n - 1);
  double lo_index = std::floor(index);
  size_t lo = static_cast<size_t>(lo_index);
  if (lo >= n - 1) return set.At(n - 1);
  double t = index - lo_index;
  double a = set.At(lo), b = set.At(lo + 1);
  if (t == 0) return a;
  double diff = b - a;
  return t >= 0.5 ? b - diff * (1 - t) : a + diff * t;
}

// The Azure ML schedule: a policy runs at steps that are multiples of
// `interval` and at least `delay`.
inline bool AzureEvaluates(const PolicySpec& spec, int64_t step) {
  return step >= spec.delay_evaluation && step % spec.evaluation_interval == 0;
}

// Orients a value so that larger is better; NaN becomes -inf, worse than any
// number (a diverged trial ranks last).
inline double Oriented(double v, Goal goal) {
  if (std::isnan(v)) return -std::numeric_limits<double>::infinity();
  return goal == Goal::kMaximize ? v : -v;
}

// Where each trial stands, and its last accepted step: the bookkeeping every
// policy shares. Reports for a trial that has stopped, paused or completed
// are ignored, as are steps that do not increase (a trial resumed from a
// checkpoint reports some steps again).
class TrialStates {
 public:
  enum class State : char { kRunning, kStopped, kPaused, kCompleted };
  static constexpr int64_t kNoStep = std::numeric_limits<int64_t>::min();

  // Grows the table to hold `trial`.
  void Touch(int trial) {
    if (static_cast<size_t>(trial) >= state_.size()) {
      state_.resize(static_cast<size_t>(trial) + 1, State::kRunning);
      last_.resize(static_cast<size_t>(trial) + 1, kNoStep);
    }
  }
  State state(int trial) const { return state_[trial]; }
  void set_state(int trial, State s) { state_[trial] = s; }
  int64_t last(int trial) const { return last_[trial]; }
  // True (and the step recorded) when the report is one the policy decides on.
  bool Accept(int trial, int64_t step) {
    Touch(trial);
    if (state_[trial] != State::kRunning || step <= last_[trial]) return false;
    last_[trial] = step;
    return true;
  }
  // What Report answers for a report it ignores.
  Decision Current(int trial) const {
    switch (state_[trial]) {
      case State::kStopped:
        return Decision::kStop;
      case State::kPaused:
        return Decision::kPause;
      default:
        return Decision::kContinue;
    }
  }

 private:
  std::vector<State> state_;
  std::vector<int64_t> last_;
};

std::unique_ptr<EarlyTermination> MakeBandit(const PolicySpec& spec, Goal goal);
std::unique_ptr<EarlyTermination> MakeMedian(const PolicySpec& spec, Goal goal);
std::unique_ptr<EarlyTermination> MakeTruncation(const PolicySpec& spec, Goal goal);
std::unique_ptr<EarlyTermination> MakeAsha(const PolicySpec& spec, Goal goal, bool pause_on_prune);
std::unique_ptr<EarlyTermination> MakeOptuna(const PolicySpec& spec, Goal goal);

}  // namespace gantry::jobs::internal
