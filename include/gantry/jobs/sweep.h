// Hyper-parameter sweeps: the search space, trial sampling and the
// early-termination policies, as pure functions of recorded metrics (the
// runner in runner.h starts and stops the trial processes).
//
// The `sweep:` block of a step, with Azure ML's names:
//
//   sweep:
//     search_space:
//       lr:    {type: loguniform, min_value: 1.0e-4, max_value: 1.0e-1}
//       batch: {type: choice, values: [16, 32, 64]}
//     sampling_algorithm: random          # grid | random | {type: random, seed: 7}
//     objective: {primary_metric: accuracy, goal: maximize}
//     early_termination: {type: bandit, slack_factor: 0.1, evaluation_interval: 1,
//                         delay_evaluation: 5}
//     limits: {max_total_trials: 20, max_concurrent_trials: 4, timeout: 2h,
//              trial_timeout: 30m}
//     checkpoint: pause                   # kill (default) | pause
//     register: {name: mnist, path: model, registry: /srv/registry}
//
// Domains: choice {values: [...]} (scalars; an integer stays an integer, a
// number a double, anything else text); uniform {min_value, max_value};
// loguniform {min_value, max_value}: the values themselves (0 < min < max),
// not exponents as in Azure ML, with the logarithm drawn uniformly;
// quniform {min_value, max_value, q}: round(uniform(min, max) / q) * q as in
// hyperopt (so it may pass max by up to q/2), an integer when q is one,
// else rounded to q's decimals (0.3, not 0.30000000000000004); randint
// {upper}: an integer in [0, upper). limits.max_total_trials is 1..100,000
// (Azure ML stops at 1000; local trials are cheap); timeouts are durations
// ("2h", "30m" or seconds). checkpoint: pause needs early_termination asha.
//
// A trial reports its metrics by appending lines to the file named by
// $GANTRY_METRICS_FILE (see ParseMetricLine).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gantry/core/config.h"
#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry::jobs {

enum class Goal { kMaximize, kMinimize };

// One hyper-parameter's domain.
struct ParamDomain {
  enum class Kind { kChoice, kUniform, kLogUniform, kQUniform, kRandInt };
  std::string name;
  Kind kind = Kind::kChoice;
  std::vector<Json> values;  // kChoice
  double min_value = 0;      // kUniform, kLogUniform, kQUniform
  double max_value = 0;
  double q = 1;       // kQUniform
  int64_t upper = 0;  // kRandInt: integers in [0, upper)
};

// Parameter values of one trial, in the search space's order.
using ParamValues = std::vector<std::pair<std::string, Json>>;

enum class PolicyKind {
  kNone,
  kBandit,            // Azure ML BanditPolicy
  kMedian,            // Azure ML MedianStoppingPolicy
  kTruncation,        // Azure ML TruncationSelectionPolicy
  kAsha,              // Ray Tune ASHAScheduler (one bracket)
  kOptunaMedian,      // optuna.pruners.MedianPruner
  kOptunaPercentile,  // optuna.pruners.PercentilePruner
};

struct PolicySpec {
  PolicyKind kind = PolicyKind::kNone;
  // Azure ML policies
  int evaluation_interval = 1;
  int delay_evaluation = 0;
  std::optional<double> slack_factor;  // Bandit: exactly one of the two
  std::optional<double> slack_amount;
  int truncation_percentage = 0;  // 1..99
  // ASHA
  int64_t grace_period = 1;
  int64_t reduction_factor = 4;
  int64_t max_t = 100;
  // Optuna
  double percentile = 50;
  int n_startup_trials = 5;
  int64_t n_warmup_steps = 0;
  int64_t interval_steps = 1;
  int n_min_trials = 1;
};

struct RegisterSpec {
  std::string name;      // the model name
  std::string path;      // relative to the best trial's directory
  std::string registry;  // a registry root directory
};

struct SweepSpec {
  std::vector<ParamDomain> space;
  enum class Sampling { kGrid, kRandom } sampling = Sampling::kRandom;
  uint64_t seed = 0;
  std::string primary_metric;
  Goal goal = Goal::kMaximize;
  PolicySpec policy;
  int max_total_trials = 1000;              // 1..100,000
  int max_concurrent_trials = 0;            // 0: max_total_trials
  std::chrono::seconds timeout{5'184'000};  // the whole sweep (Azure ML default)
  std::chrono::seconds trial_timeout{0};    // 0: the step's timeout
  bool pause_on_prune = false;              // checkpoint: pause
  std::optional<RegisterSpec> register_best;
};

// `view` is the step's `sweep` sub-tree. InvalidArgument naming file:line:col
// and key for unknown keys (did-you-mean, also for keys that belong to
// another policy type), a missing required key (at the enclosing map), a
// domain that does not fit its type, grid over a non-choice parameter, both
// or neither Bandit slack, out-of-range limits, checkpoint: pause with a
// policy other than asha, bayesian sampling (not supported).
Result<SweepSpec> ParseSweep(const Config& view);

// The trials the sweep will run, in order, deterministic for a spec (seed):
// grid = every combination in lexicographic order (the first parameter
// varies slowest, values in their listed order), the first max_total_trials
// of them when there are more; random = max_total_trials draws from
// std::mt19937_64(seed) (seed 0 when not given), one draw per parameter in
// space order: [0, 1) from the top 53 bits, integers by rejection, so plans
// are the same with any standard library. The runner stores them in its
// state file, so a resumed sweep runs the same trials.
Result<std::vector<ParamValues>> PlanTrials(const SweepSpec& spec);

// A value as it is substituted into a command line: integers without a
// decimal point, doubles in the shortest form that round-trips, strings bare.
std::string ParamText(const Json& value);

// One line of a trial's metrics file: "accuracy=0.91 loss=0.3 step=4" (pairs
// separated by spaces or tabs) or a JSON object {"accuracy": 0.91, "step": 4}.
// `step` is optional (the runner then counts the primary metric's reports)
// and a non-negative integer. Values are finite numbers or NaN (nan, NaN;
// in JSON also null, "nan" and Python's bare NaN); names start with a letter
// or '_' and go on with letters, digits, '_', '-', '.', '/'. InvalidArgument
// ("metric line: ...", naming the token) for anything else, a name given
// twice, an empty line or a line with no value besides the step.
struct MetricLine {
  std::optional<int64_t> step;
  std::vector<std::pair<std::string, double>> values;
};
Result<MetricLine> ParseMetricLine(std::string_view line);

enum class Decision { kContinue, kStop, kPause };

// An early-termination policy's state over one sweep. Trials are 0-based
// indices; steps (intervals) are what the trial reported (or the count of
// its reports), >= 0. A report whose step is not above the trial's previous
// one is ignored (a trial resumed from a checkpoint repeats steps), as are
// reports of a trial that has stopped, paused or completed (Report answers
// kStop / kPause / kContinue for them). Values are compared as the goal
// says; NaN is worse than any number.
//
// The rules (policy_*.cc has them in full):
//   Azure ML policies run when a trial reports a step N that is a multiple
//   of evaluation_interval and >= delay_evaluation, comparing with every
//   trial's reports (running, stopped or completed) at steps <= N:
//   - Bandit: stop if the trial's best so far is worse than the cutoff from
//     the best value of all trials: best - a (slack_amount), or with
//     slack_factor f best/(1+f) maximizing, best*(1+f) minimizing (inferred;
//     Azure documents only maximize), taken on |best| so a negative best
//     keeps its trial.
//   - Median stopping: stop if the trial's best so far is worse than the
//     median (numpy's) of all trials' running averages over steps 1..N, its
//     own included.
//   - Truncation selection: with n trials' latest values as of N and
//     k = floor(n * truncation_percentage / 100), stop if fewer than k other
//     trials are as bad or worse (strictly among the k worst; a tie at the
//     boundary goes on; NaN always counts as among them).
//   - ASHA (Ray, one bracket): rungs grace_period * rf^k < max_t; at the first
//     report at or past a rung, stop (kPause with pause_on_prune) if worse
//     than the (1 - 1/rf) * 100th percentile (numpy linear, NaN left out) of
//     the rung's earlier values; stop at step >= max_t. A paused trial is
//     promoted when it is in the top floor(n/rf) of the n values of its rung.
//   - Optuna Median/Percentile pruner: as optuna/pruners/_percentile.py,
//     comparing with COMPLETE trials only (see Complete).
// Costs: amortised O(log n) per report for Bandit, ASHA and Optuna; Median
// and Truncation O(k log n) for k distinct last steps of running trials
// below N, plus O(trials) once per distinct evaluated step.
class EarlyTermination {
 public:
  static Result<std::unique_ptr<EarlyTermination>> Create(const PolicySpec& spec, Goal goal,
                                                          bool pause_on_prune);
  virtual ~EarlyTermination() = default;
  // Trial `trial` reported `value` for the primary metric at `step`. Returns
  // whether it goes on; kPause only when pause_on_prune and the policy is
  // ASHA (the trial may be promoted later).
  virtual Decision Report(int trial, int64_t step, double value) = 0;
  // The trial ended by itself (exit 0): policies that compare with completed
  // trials (Optuna) count it from now on.
  virtual void Complete(int trial) = 0;
  // Paused trials that have become good enough to go on (ASHA promotion),
  // each returned once.
  virtual std::vector<int> TakePromotions() = 0;
};

// For known-answer tests and `gantry jobs replay`: metric events in arrival
// order and what a policy decides on them, one StopEvent per change: a stop,
// a pause, or (decision kContinue) the promotion of a paused trial, whose
// step is then the one it paused at. Events of a trial after it stopped or
// while it is paused are dropped, as they would not have happened.
// InvalidArgument for a negative trial or step, or a trial index >= 10^7.
struct MetricEvent {
  int trial = 0;
  int64_t step = 0;
  double value = 0;
  bool complete = false;  // the trial ended by itself (step/value unused)
};
struct StopEvent {
  int trial = 0;
  int64_t step = 0;  // the step whose report stopped or paused it; for a promotion, the pause's
  Decision decision = Decision::kStop;
};
Result<std::vector<StopEvent>> Replay(const PolicySpec& spec, Goal goal, bool pause_on_prune,
                                      const std::vector<MetricEvent>& events);

}  // namespace gantry::jobs
