// The run's metrics as a Prometheus text file.
#include "runner_report.h"

#include "gantry/core/json.h"
#include "gantry/core/metrics.h"

namespace gantry::jobs {

std::string RenderMetrics(const Workflow& wf, const RunRecord& rec) {
  metrics::Registry reg;
  auto set = [&reg](std::string_view name, std::string_view help, const metrics::Labels& labels,
                    double v) {
    Result<metrics::Gauge*> g = reg.GetGauge(name, help, labels);
    if (g.ok()) (*g)->Set(v);
  };
  set("gantry_jobs_run_info", "The workflow run and its state (1).",
      {{"workflow", wf.name}, {"run_id", rec.run_id}, {"state", rec.state}}, 1);
  for (const auto& [name, r] : rec.steps) {
    metrics::Labels step = {{"workflow", wf.name}, {"step", name}};
    metrics::Labels with_state = step;
    with_state.emplace_back("state", std::string(StepStateName(r.state)));
    set("gantry_jobs_step_state", "The step's current state (1).", with_state, 1);
    set("gantry_jobs_step_attempts", "Attempts started for the step.", step, r.attempts);
    set("gantry_jobs_step_retries", "Retries of the step (attempts after the first).", step,
        r.attempts > 1 ? r.attempts - 1 : 0);
    set("gantry_jobs_step_exit_code", "Exit code of the step's last attempt (-1: none yet).", step,
        r.exit_code);
    double duration = r.finished > r.started && r.started > 0 ? r.finished - r.started : 0;
    set("gantry_jobs_step_duration_seconds", "Wall time of the step's last attempt.", step,
        duration);
    if (r.trials.empty()) continue;
    std::map<std::string, int> by_state;
    for (const TrialRecord& t : r.trials) {
      std::string st = t.paused   ? "paused"
                       : t.pruned ? "stopped_early"
                                  : std::string(StepStateName(t.state));
      ++by_state[st];
    }
    for (const auto& [st, n] : by_state) {
      metrics::Labels l = step;
      l.emplace_back("state", st);
      set("gantry_jobs_sweep_trials", "Trials of the sweep per state.", l, n);
    }
    auto spec = wf.steps.find(name);
    if (r.best_trial && *r.best_trial >= 0 && *r.best_trial < static_cast<int>(r.trials.size()) &&
        r.trials[*r.best_trial].last_value && spec != wf.steps.end() && spec->second.sweep) {
      metrics::Labels l = step;
      l.emplace_back("metric", spec->second.sweep->primary_metric);
      set("gantry_jobs_sweep_best_value", "The best trial's primary metric.", l,
          *r.trials[*r.best_trial].last_value);
    }
  }
  return reg.Render();
}

Status WriteMetricsTextfile(const std::string& path, const Workflow& wf, const RunRecord& rec) {
  return WriteFileAtomic(path, RenderMetrics(wf, rec));
}

}  // namespace gantry::jobs
