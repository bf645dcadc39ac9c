// Shared pieces of the early-termination policies (policy_*.cc): an
// order-statistic set of (value, trial) and numpy-compatible percentiles.
#pragma once

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "gantry/jobs/sweep.h"

namespace gantry::jobs::internal {

// (value, trial): the trial makes equal values distinct keys.
using Key = std::pair<double, int>;

// A sorted set with rank queries: sorted blocks of at most 2 * kBlock keys
// with their maxima kept apart, so a lookup is a binary search over the
// maxima and one inside a block, and a rank adds the sizes of the blocks
// before it. Inserts and erases move at most a block's keys and allocate
// only on a split: two to five times faster than the node-based
// __gnu_pbds order-statistic tree on 10,000 trials x 100 steps (replays of
// the Median and Optuna policies).
class RankedSet {
 public:
  void Insert(double v, int trial) {
    Key k{v, trial};
    if (blocks_.empty()) {
      blocks_.push_back({k});
      max_.push_back(k);
      ++size_;
      return;
    }
    size_t b = BlockFor(k);
    std::vector<Key>& blk = blocks_[b];
    auto it = std::lower_bound(blk.begin(), blk.end(), k);
    if (it != blk.end() && *it == k) return;
    blk.insert(it, k);
    max_[b] = blk.back();
    ++size_;
    if (blk.size() > 2 * kBlock) Split(b);
  }
  void Erase(double v, int trial) {
    Key k{v, trial};
    if (blocks_.empty()) return;
    size_t b = BlockFor(k);
    std::vector<Key>& blk = blocks_[b];
    auto it = std::lower_bound(blk.begin(), blk.end(), k);
    if (it == blk.end() || *it != k) return;
    blk.erase(it);
    --size_;
    if (blk.empty()) {
      blocks_.erase(blocks_.begin() + static_cast<ptrdiff_t>(b));
      max_.erase(max_.begin() + static_cast<ptrdiff_t>(b));
    } else {
      max_[b] = blk.back();
    }
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Number of values < v.
  size_t CountLess(double v) const { return Rank({v, INT_MIN}); }
  // Number of values <= v.
  size_t CountLessEqual(double v) const { return Rank({v, INT_MAX}); }
  // The i-th smallest value, 0-based; i < size().
  double At(size_t i) const {
    for (const std::vector<Key>& blk : blocks_) {
      if (i < blk.size()) return blk[i].first;
      i -= blk.size();
    }
    return std::numeric_limits<double>::quiet_NaN();
  }
  // The largest value <= v, or -inf when none.
  double MaxAtMost(double v) const {
    size_t r = CountLessEqual(v);
    return r == 0 ? -std::numeric_limits<double>::infinity() : At(r - 1);
  }
  // The smallest value > v, or +inf when none.
  double MinAbove(double v) const {
    size_t r = CountLessEqual(v);
    return r == size_ ? std::numeric_limits<double>::infinity() : At(r);
  }

 private:
  static constexpr size_t kBlock = 64;

  // The first block whose maximum is >= k, else the last.
  size_t BlockFor(const Key& k) const {
    size_t b = std::lower_bound(max_.begin(), max_.end(), k) - max_.begin();
    return b == max_.size() ? b - 1 : b;
  }
  size_t Rank(const Key& k) const {
    size_t b = std::lower_bound(max_.begin(), max_.end(), k) - max_.begin();
    size_t n = 0;
    for (size_t i = 0; i < b; ++i) n += blocks_[i].size();
    if (b == blocks_.size()) return n;
    const std::vector<Key>& blk = blocks_[b];
    return n + static_cast<size_t>(std::lower_bound(blk.begin(), blk.end(), k) - blk.begin());
  }
  void Split(size_t b) {
    std::vector<Key>& blk = blocks_[b];
    std::vector<Key> upper(blk.begin() + static_cast<ptrdiff_t>(kBlock), blk.end());
    blk.resize(kBlock);
    max_[b] = blk.back();
    Key upper_max = upper.back();
    blocks_.insert(blocks_.begin() + static_cast<ptrdiff_t>(b) + 1, std::move(upper));
    max_.insert(max_.begin() + static_cast<ptrdiff_t>(b) + 1, upper_max);
  }

  std::vector<std::vector<Key>> blocks_;  // sorted, none empty, in order
  std::vector<Key> max_;                  // max_[i] == blocks_[i].back()
  size_t size_ = 0;
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
