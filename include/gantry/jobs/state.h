// The state file of a workflow run (<state dir>/state.json): what ran, with
// which job ids, how it ended, and the fingerprint of every finished step.
// `gantry jobs resume`, `status`, `logs` and `cancel` read it; the runner
// rewrites it atomically (temporary file, fsync, rename) after every change,
// so a crash or a full disk leaves the previous complete version.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gantry/core/json.h"
#include "gantry/core/status.h"
#include "gantry/jobs/sweep.h"

namespace gantry::jobs {

enum class StepState {
  kPending,
  kWaiting,  // prerequisites met, waiting for resources or a retry's backoff
  kRunning,
  kSucceeded,
  kSkipped,  // up to date: outputs newer than inputs, same command and environment
  kFailed,
  kCancelled,
  kUpstreamFailed,  // not run: a step it needs failed
};
std::string_view StepStateName(StepState s);
Result<StepState> ParseStepState(std::string_view name);
// Succeeded or skipped: what downstream steps wait for.
inline bool IsDone(StepState s) { return s == StepState::kSucceeded || s == StepState::kSkipped; }
bool IsTerminal(StepState s);

struct TrialRecord {
  int index = 0;
  ParamValues params;
  StepState state = StepState::kPending;
  bool paused = false;    // stopped by ASHA with pause_on_prune, may be promoted
  bool pruned = false;    // stopped by the early-termination policy
  int64_t pruned_at = 0;  // the step whose report stopped it
  int attempts = 0;
  int exit_code = -1;
  std::string job_id;
  std::string dir;        // the trial's directory
  int64_t last_step = 0;  // of the primary metric
  std::optional<double> last_value;
  std::optional<double> best_value;
  uint64_t metrics_offset = 0;       // bytes of the metrics file already read
  int64_t reports = 0;               // primary-metric reports read
  double started = 0, finished = 0;  // unix seconds; 0 when not
};

struct StepRecord {
  StepState state = StepState::kPending;
  int attempts = 0;
  int exit_code = -1;
  std::string job_id;                // of the current or last attempt
  std::string reason;                // why it failed, was skipped or cancelled
  std::string fingerprint;           // of the command, environment and inputs list
  double started = 0, finished = 0;  // unix seconds
  double next_attempt_at = 0;        // a retry waits until then
  Json prereq = Json::array();       // the last prerequisite results
  std::vector<TrialRecord> trials;   // sweeps
  std::optional<int> best_trial;
};

struct RunRecord {
  std::string format = "gantry.jobs.state/1";
  std::string workflow;  // name
  std::string workflow_path;
  std::string workflow_digest;
  std::string run_id;
  std::string backend;            // local | slurm
  std::string state = "running";  // running | succeeded | failed | cancelled
  int64_t runner_pid = 0;
  double started = 0, finished = 0;
  std::map<std::string, StepRecord> steps;
};

Json ToJson(const RunRecord& r);
// InvalidArgument naming `origin` and the field for a file that is not a
// state file of this format.
Result<RunRecord> RunRecordFromJson(const Json& j, const std::string& origin);

// Reads <dir>/state.json. NotFound when there is none ("no run of this
// workflow in DIR: start one with gantry jobs run").
Result<RunRecord> ReadState(const std::string& dir);
// Writes <dir>/state.json atomically (WriteFileAtomic). On an error naming the
// file (a full disk: "No space left on device") the previous file is as it was.
Status WriteState(const std::string& dir, const RunRecord& r);

// The state directory of a workflow when none is given:
// <workflow dir>/.gantry/jobs/<workflow name>.
std::string DefaultStateDir(const std::string& workflow_dir, const std::string& workflow_name);

}  // namespace gantry::jobs
