// A workflow file: steps with commands, a DAG of `needs`, resources, retries,
// failure handling, prerequisites and sweeps. Parsing and validation only;
// running is runner.h's.
//
//   ASSIGN_OR_RETURN(Workflow wf, LoadWorkflow("workflow.yaml"));
//   for (const std::string& name : wf.order) { const Step& s = wf.steps.at(name); ... }
//
// The format (docs/jobs.md has the full reference):
//
//   name: mnist                      # defaults to the file's base name
//   defaults: {timeout: 1h, retries: 1, resources: {cpus: 1}, env: {A: "1"}}
//   requires: {executables: [python3], python: ["numpy>=1.20"]}   # every step
//   on_failure: stop                 # stop | continue | <handler step>
//   steps:
//     prepare:
//       run: [python3, prep.py, --out, data]   # argv; or `shell: "cmd | cmd"`
//       inputs: [raw/*.csv]
//       outputs: [data/train.npy]
//     train:
//       needs: [prepare]
//       run: [python3, train.py, --lr, "${{search_space.lr}}"]
//       resources: {gpus: 1, cpus: 4, memory: 16G, time: 2h}
//       retries: {limit: 2, backoff: 10s, factor: 2, max_backoff: 5m, exit_codes: [1, 137]}
//       sweep: {...}                 # see sweep.h
//
// Errors are InvalidArgument naming file:line:col and the key: unknown keys
// with a did-you-mean, a cycle (naming the steps on it), an unknown name in
// `needs`, a step with neither or both of run/shell, a bad duration or size.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/config.h"
#include "gantry/core/status.h"
#include "gantry/jobs/prereq.h"
#include "gantry/jobs/sweep.h"

namespace gantry::jobs {

struct Resources {
  int gpus = 0;
  double cpus = 1;
  uint64_t memory_bytes = 0;          // 0: not declared (not counted locally)
  std::chrono::seconds time{0};       // Slurm --time; 0: the step's timeout, else none
  std::string partition;              // Slurm -p
  std::string account;                // Slurm -A
  std::vector<std::string> slurm_args;  // extra sbatch arguments, verbatim
};

struct RetryPolicy {
  int limit = 0;                                   // extra attempts after the first
  std::chrono::milliseconds backoff{1000};         // before the first retry
  double factor = 2;                               // backoff multiplier per retry
  std::chrono::milliseconds max_backoff{300'000};  // cap
  std::vector<int> exit_codes;  // retry only these codes; empty: any failure
                                // (a timeout counts as exit code 124)

  // The wait before retry number `retry` (1-based).
  std::chrono::milliseconds Delay(int retry) const;
  bool Retries(int exit_code) const;
};

enum class FailureMode { kStop, kContinue, kHandler };

struct Step {
  std::string name;
  std::vector<std::string> argv;  // `run:`; empty when `shell` is set
  std::string shell;              // `shell:`, run by /bin/sh -c
  std::string workdir;            // absolute (relative ones resolved against the file)
  std::map<std::string, std::string> env;
  std::vector<std::string> inputs;   // paths or globs, relative to workdir
  std::vector<std::string> outputs;  // paths or globs, relative to workdir
  std::vector<std::string> needs;
  Resources resources;
  RetryPolicy retries;
  std::chrono::milliseconds timeout{0};  // 0: none; kills the process group
  std::chrono::milliseconds kill_grace{10'000};  // SIGTERM -> SIGKILL
  std::string image;   // run inside this container image (checked against
                       // requires.registries); empty: on the host
  Prerequisites prereqs;  // the workflow's merged with the step's own
  std::optional<SweepSpec> sweep;
  bool handler = false;  // runs only as another step's on_failure handler
  FailureMode on_failure = FailureMode::kStop;
  std::string on_failure_handler;  // kHandler: the handler step's name
  std::string position;            // "file:line:col" of the step, for messages
};

struct Workflow {
  std::string name;
  std::string path;  // absolute path of the file
  std::string dir;   // its directory
  std::string digest;  // SHA-256 hex of the file's bytes
  std::map<std::string, Step> steps;
  std::vector<std::string> order;  // a topological order, file order among peers;
                                   // handler steps are not in it
  std::string container_runtime = "docker";  // `container_runtime:`
};

// Reads and validates a workflow file.
Result<Workflow> LoadWorkflow(const std::string& path);
// As LoadWorkflow from text; `path` names it in messages and anchors relative
// workdirs.
Result<Workflow> ParseWorkflow(std::string_view yaml, const std::string& path);

// The steps that transitively need `name` (for on_failure: continue).
std::vector<std::string> Dependents(const Workflow& wf, const std::string& name);

}  // namespace gantry::jobs
