// Running a workflow: the DAG, resources, retries, failure handling,
// prerequisites, sweeps with early termination, the state file, metrics and
// audit records. One runner per state directory at a time (a lock file).
//
//   ASSIGN_OR_RETURN(Workflow wf, LoadWorkflow("workflow.yaml"));
//   RunOptions o;
//   o.on_event = [](const RunEvent& e) { std::cout << e.key << " " << e.message << "\n"; };
//   ASSIGN_OR_RETURN(RunRecord r, RunWorkflow(wf, o));   // r.state: succeeded | failed | ...
//
// Steps get these variables (besides the step's env): GANTRY_JOBS_RUN_ID,
// GANTRY_STEP, GANTRY_ATTEMPT, CUDA_VISIBLE_DEVICES (local backend, on a node
// with GPUs: the GPUs given to the step, "" for a step that asked for none).
// Sweep trials also get GANTRY_TRIAL_INDEX, GANTRY_TRIAL_DIR,
// GANTRY_METRICS_FILE, GANTRY_CKPT_DIR, GANTRY_PARAM_<NAME> and, when resumed
// (promoted, retried, requeued), GANTRY_TRIAL_RESUME=1.
//
// Substitutions in run/shell/env values: ${{search_space.NAME}},
// ${{trial.index}}, ${{trial.dir}}, ${{run.id}}, ${{workflow.dir}},
// ${{steps.STEP.best.dir}}, ${{steps.STEP.best.metric}},
// ${{steps.STEP.best.params.NAME}}.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/jobs/backend.h"
#include "gantry/jobs/state.h"
#include "gantry/jobs/workflow.h"

namespace gantry::jobs {

struct RunEvent {
  std::string key;  // step or "step/trial-0003"
  StepState state = StepState::kPending;
  std::string message;  // "started (attempt 1)", "failed: exit code 3, retry 1 of 2 in 2 s"
};

struct RunOptions {
  std::string backend = "local";  // local | slurm
  SlurmOptions slurm;
  std::string state_dir;             // "" = DefaultStateDir(wf.dir, wf.name)
  bool resume = false;               // continue the recorded run (RecordedRun must exist)
  bool force = false;                // run steps even when they are up to date
  std::vector<std::string> targets;  // only these steps and what they need ("" = all)
  int gpus = -1;                     // this node's GPUs for local steps (-1: /dev/nvidiaN count)
  double cpus = 0;                   // 0: the CPUs this process may use
  uint64_t memory_bytes = 0;         // 0: MemTotal
  std::string metrics_textfile;      // Prometheus text file (node_exporter textfile collector)
  std::string audit_log;             // hash-chained audit records (security/audit.h)
  std::string nvml_library;          // for gpu_memory_free prerequisites
  // Coalesces state writes (the journal covers what happens in between; a
  // Slurm submission is written at once).
  std::chrono::milliseconds state_write_interval{1000};
  std::function<void(const RunEvent&)> on_event;
  const std::atomic<bool>* cancel = nullptr;  // set (by a signal handler) to cancel the run
};

// Runs (or with options.resume, resumes) the workflow until every step is
// done, failed or cancelled. Returns the final record; its `state` says how
// the run ended. Errors (nothing run): InvalidArgument for an unknown target
// or backend; FailedPrecondition when another runner holds the state
// directory, when the state directory belongs to another workflow, or for a
// resume without a recorded run; IoError naming the directory when it cannot
// be created or written.
Result<RunRecord> RunWorkflow(const Workflow& wf, const RunOptions& options);

// Cancels the run recorded in `state_dir`: signals its runner (SIGTERM: the
// runner cancels its jobs and records it), or, when no runner is alive,
// cancels the recorded jobs itself and records the run as cancelled.
// Returns what was done, for the user. NotFound when no run is recorded.
Result<std::string> CancelRun(const std::string& state_dir, const SlurmOptions& slurm,
                              std::chrono::milliseconds grace);

// The runner's pid when one holds `state_dir`, else 0.
int64_t ActiveRunner(const std::string& state_dir);

// The log file of a step or trial key in `state_dir`.
std::string LogPath(const std::string& state_dir, const std::string& key);

}  // namespace gantry::jobs
