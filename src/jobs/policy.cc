// EarlyTermination::Create (the spec's checks) and Replay. The policies
// themselves are in policy_azure.cc, policy_asha.cc and policy_optuna.cc.
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <vector>

#include "gantry/jobs/sweep.h"
#include "policy_internal.h"

namespace gantry::jobs {
namespace {

// `early_termination` left out: every trial runs to its end.
class NoPolicy final : public EarlyTermination {
 public:
  Decision Report(int, int64_t, double) override { return Decision::kContinue; }
  void Complete(int) override {}
  std::vector<int> TakePromotions() override { return {}; }
};

Status CheckAzure(const PolicySpec& s) {
  if (s.evaluation_interval < 1) {
    return InvalidArgument(fmt::format("early_termination: evaluation_interval is {}; use >= 1",
                                       s.evaluation_interval));
  }
  if (s.delay_evaluation < 0) {
    return InvalidArgument(
        fmt::format("early_termination: delay_evaluation is {}; use >= 0", s.delay_evaluation));
  }
  return Status::Ok();
}

Status CheckSpec(const PolicySpec& s) {
  switch (s.kind) {
    case PolicyKind::kNone:
      return Status::Ok();
    case PolicyKind::kBandit: {
      RETURN_IF_ERROR(CheckAzure(s));
      if (s.slack_factor.has_value() == s.slack_amount.has_value()) {
        return InvalidArgument(
            "early_termination: bandit needs exactly one of slack_factor and "
            "slack_amount");
      }
      double slack = s.slack_factor ? *s.slack_factor : *s.slack_amount;
      if (!(slack >= 0) || std::isinf(slack)) {
        return InvalidArgument(fmt::format("early_termination: slack {} must be >= 0", slack));
      }
      return Status::Ok();
    }
    case PolicyKind::kMedian:
      return CheckAzure(s);
    case PolicyKind::kTruncation:
      RETURN_IF_ERROR(CheckAzure(s));
      if (s.truncation_percentage < 1 || s.truncation_percentage > 99) {
        return InvalidArgument(fmt::format(
            "early_termination: truncation_percentage is {}; use 1..99", s.truncation_percentage));
      }
      return Status::Ok();
    case PolicyKind::kAsha:
      if (s.grace_period < 1 || s.reduction_factor < 2 || s.max_t < 1) {
        return InvalidArgument(fmt::format(
            "early_termination: asha needs grace_period >= 1, reduction_factor >= 2 and max_t >= "
            "1 (got {}, {}, {})",
            s.grace_period, s.reduction_factor, s.max_t));
      }
      return Status::Ok();
    case PolicyKind::kOptunaMedian:
    case PolicyKind::kOptunaPercentile:
      if (!(s.percentile >= 0 && s.percentile <= 100) || s.n_startup_trials < 0 ||
          s.n_warmup_steps < 0 || s.interval_steps < 1 || s.n_min_trials < 1) {
        return InvalidArgument(fmt::format(
            "early_termination: optuna pruner needs percentile in 0..100, n_startup_trials >= 0, "
            "n_warmup_steps >= 0, interval_steps >= 1, n_min_trials >= 1 (got {}, {}, {}, {}, {})",
            s.percentile, s.n_startup_trials, s.n_warmup_steps, s.interval_steps, s.n_min_trials));
      }
      return Status::Ok();
  }
  return InvalidArgument("early_termination: unknown policy kind");
}

}  // namespace

Result<std::unique_ptr<EarlyTermination>> EarlyTermination::Create(const PolicySpec& spec,
                                                                   Goal goal, bool pause_on_prune) {
  RETURN_IF_ERROR(CheckSpec(spec));
  if (pause_on_prune && spec.kind != PolicyKind::kAsha) {
    return InvalidArgument(
        "checkpoint: pause needs early_termination type asha, the only policy that resumes "
        "(promotes) a pruned trial; use checkpoint: kill");
  }
  switch (spec.kind) {
    case PolicyKind::kNone:
      return std::unique_ptr<EarlyTermination>(std::make_unique<NoPolicy>());
    case PolicyKind::kBandit:
      return internal::MakeBandit(spec, goal);
    case PolicyKind::kMedian:
      return internal::MakeMedian(spec, goal);
    case PolicyKind::kTruncation:
      return internal::MakeTruncation(spec, goal);
    case PolicyKind::kAsha:
      return internal::MakeAsha(spec, goal, pause_on_prune);
    case PolicyKind::kOptunaMedian: {
      PolicySpec median = spec;
      median.percentile = 50;
      return internal::MakeOptuna(median, goal);
    }
    case PolicyKind::kOptunaPercentile:
      return internal::MakeOptuna(spec, goal);
  }
  return InvalidArgument("early_termination: unknown policy kind");
}

Result<std::vector<StopEvent>> Replay(const PolicySpec& spec, Goal goal, bool pause_on_prune,
                                      const std::vector<MetricEvent>& events) {
  ASSIGN_OR_RETURN(std::unique_ptr<EarlyTermination> policy,
                   EarlyTermination::Create(spec, goal, pause_on_prune));
  // A trial index sizes the policies' tables, so a corrupt one must not
  // allocate gigabytes.
  constexpr int kMaxTrial = 10'000'000;
  std::vector<StopEvent> out;
  std::vector<Decision> status;    // what each trial was last told
  std::vector<int64_t> paused_at;  // the step at which a trial paused
  for (size_t i = 0; i < events.size(); ++i) {
    const MetricEvent& e = events[i];
    if (e.trial < 0 || e.trial >= kMaxTrial || (!e.complete && e.step < 0)) {
      return InvalidArgument(
          fmt::format("replay: event {}: trial {} step {}: trials are 0..{} and steps >= 0", i,
                      e.trial, e.step, kMaxTrial - 1));
    }
    if (static_cast<size_t>(e.trial) >= status.size()) {
      status.resize(e.trial + 1, Decision::kContinue);
      paused_at.resize(e.trial + 1, 0);
    }
    if (e.complete) {
      policy->Complete(e.trial);
      continue;
    }
    Decision d = policy->Report(e.trial, e.step, e.value);
    if (d != status[e.trial]) {
      out.push_back({e.trial, e.step, d});
      status[e.trial] = d;
      if (d == Decision::kPause) paused_at[e.trial] = e.step;
    }
    for (int promoted : policy->TakePromotions()) {
      out.push_back({promoted, paused_at[promoted], Decision::kContinue});
      status[promoted] = Decision::kContinue;
    }
  }
  return out;
}

}  // namespace gantry::jobs
