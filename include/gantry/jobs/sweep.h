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
  double q = 1;              // kQUniform
  int64_t upper = 0;         // kRandInt: integers in [0, upper)
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
  int max_total_trials = 1000;
  int max_concurrent_trials = 0;           // 0: max_total_trials
  std::chrono::seconds timeout{5'184'000};  // the whole sweep (Azure ML default)
  std::chrono::seconds trial_timeout{0};    // 0: the step's timeout
  bool pause_on_prune = false;              // checkpoint: pause
  std::optional<RegisterSpec> register_best;
};

// `view` is the step's `sweep` sub-tree. InvalidArgument naming file:line and
// key for unknown keys (did-you-mean), a domain that does not fit its type,
// grid over a continuous domain, both or neither Bandit slack, out-of-range
// limits.
Result<SweepSpec> ParseSweep(const Config& view);

// The trials the sweep will run, in order, deterministic for a spec (seed):
// grid = every combination (capped at max_total_trials), random = max_total_trials
// draws. The runner stores them in its state file, so a resumed sweep runs
// the same trials.
Result<std::vector<ParamValues>> PlanTrials(const SweepSpec& spec);

// A value as it is substituted into a command line: integers without a
// decimal point, doubles in the shortest form that round-trips, strings bare.
std::string ParamText(const Json& value);

// One line of a trial's metrics file: "accuracy=0.91 loss=0.3 step=4" (pairs
// separated by spaces) or a JSON object {"accuracy": 0.91, "step": 4}. `step`
// is optional (the runner then counts the primary metric's reports).
struct MetricLine {
  std::optional<int64_t> step;
  std::vector<std::pair<std::string, double>> values;
};
Result<MetricLine> ParseMetricLine(std::string_view line);

enum class Decision { kContinue, kStop, kPause };

// An early-termination policy's state over one sweep. Trials are 0-based
// indices; steps (intervals) are what the trial reported, 1-based.
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
// order and the stops a policy decides on them.
struct MetricEvent {
  int trial = 0;
  int64_t step = 0;
  double value = 0;
  bool complete = false;  // the trial ended by itself (step/value unused)
};
struct StopEvent {
  int trial = 0;
  int64_t step = 0;  // the step whose report stopped it
  Decision decision = Decision::kStop;
};
Result<std::vector<StopEvent>> Replay(const PolicySpec& spec, Goal goal, bool pause_on_prune,
                                      const std::vector<MetricEvent>& events);

}  // namespace gantry::jobs
