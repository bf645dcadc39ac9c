// Where a step's process runs: on this node (LocalBackend) or as a Slurm batch
// job (SlurmBackend). The runner keeps the DAG, the retries and the state
// file; a backend only starts, observes and stops one attempt at a time, the
// way Snakemake's and Nextflow's executors do (no `--dependency` chains that
// would outlive Slurm's MinJobAge).
//
// Ids returned by Submit are stored in the state file before anything else
// happens, so a runner restarted after a crash can Poll (Slurm) or clean up
// (local) what it started.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/jobs/workflow.h"

namespace gantry::jobs {

// One attempt of a step or of a sweep trial.
struct Launch {
  std::string key;                // unique in the run: "prepare", "train/trial-0003"
  std::string run_id;             // the run's id (Slurm job names are "gantry-<run_id>")
  std::vector<std::string> argv;  // final argv (a `shell:` step is /bin/sh -c ...)
  std::string workdir;
  std::map<std::string, std::string> env;  // set on top of the runner's environment
  Resources resources;
  std::string log_path;                  // stdout and stderr, appended
  std::string exit_path;                 // where the attempt's exit code is written ("<code>\n")
  std::chrono::milliseconds timeout{0};  // 0: none (Slurm: resources.time)
  std::chrono::milliseconds kill_grace{10'000};
  int attempt = 1;
};

enum class JobState {
  kQueued,     // submitted, not started (Slurm PD/CF, or not yet in sacct)
  kRunning,    // R/CG/S
  kSucceeded,  // exit 0
  kFailed,     // non-zero exit, OOM, node failure, ...
  kTimedOut,   // killed at its timeout (exit code 124)
  kCancelled,  // by Cancel or by someone else (scancel)
  kPreempted,  // Slurm PR/RQ: requeued; the runner waits for it to run again
  kLost,       // the backend no longer knows it (local job of a dead runner)
};
std::string_view JobStateName(JobState s);
bool IsFinal(JobState s);

struct Observed {
  JobState state = JobState::kQueued;
  int exit_code = -1;  // when final; 128+signal for a signal
  std::string reason;  // "NonZeroExitCode", "CANCELLED by 0", "timed out after 10 s"
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // Starts `launch`; returns its id ("local:<pgid>:<start>" / "slurm:<jobid>").
  // Unavailable naming the program and its stderr when it cannot be started
  // (sbatch refused, posix_spawn failed).
  virtual Result<std::string> Submit(const Launch& launch) = 0;
  // The state of each id. A transient error (sacct timed out) is an error for
  // the whole call; the runner retries on its next cycle and never reads it as
  // a failed job.
  virtual Result<std::map<std::string, Observed>> Poll(const std::vector<std::string>& ids) = 0;
  // Stops the job: SIGTERM to its process group, SIGKILL after `grace`
  // (local); scancel --signal=TERM, then scancel after `grace` (Slurm).
  // Returns once the signal is sent; Poll reports kCancelled when it is gone.
  virtual Status Cancel(const std::string& id, std::chrono::milliseconds grace) = 0;
  // Whether a job started by an earlier runner process can still be followed
  // (Slurm: yes; local: no, its output pipe died with that runner).
  virtual bool Adopts() const = 0;
  // Blocks until a job may have changed state or `max` passed: local wakes on
  // a child's exit, Slurm sleeps its poll interval (with backoff).
  virtual void Wait(std::chrono::milliseconds max) = 0;
  // Tells the backend what a job started by an earlier runner process was
  // launched with, before that process's id is first Polled here, so that it
  // can read the job's exit_path (Slurm: the exit code once Slurm has
  // forgotten the job). Backends that do not adopt ignore it.
  virtual void Reattach(const std::string& id, const Launch& launch) {
    (void)id;
    (void)launch;
  }
};

// An attempt's exit file ("<code>\n"), written atomically by the local
// backend and the Slurm batch script, read by the backends and by a resumed
// runner. ReadExitCode: nullopt when the file is absent or holds no code.
// WriteExitCode: nothing for an empty path.
std::optional<int> ReadExitCode(const std::string& path);
Status WriteExitCode(const std::string& path, int code);

// Runs attempts as children of this process, each in a process group of its
// own, output timestamped line by line ("2026-12-02T10:00:00.123Z out|err ...")
// into log_path, the exit code written to exit_path. A timeout SIGTERMs the
// group, then SIGKILLs it after kill_grace. Destroying the backend kills what
// is still running.
std::unique_ptr<Backend> MakeLocalBackend();

// Kills what is left of a local job of a runner that died ("local:<pgid>:<start>"),
// if that process group still exists with the same start time. Never fails.
void KillStrayLocalJob(const std::string& id, std::chrono::milliseconds grace);

struct SlurmOptions {
  std::string sbatch = "sbatch";
  std::string sacct = "sacct";
  std::string squeue = "squeue";
  std::string scancel = "scancel";
  std::chrono::milliseconds poll_min{1000};   // first poll interval
  std::chrono::milliseconds poll_max{30000};  // backoff cap while nothing changes
  std::chrono::milliseconds command_timeout{30000};
  // sacct --starttime: jobs submitted since then (the run's start minus a day)
  std::chrono::system_clock::time_point since;
  bool requeue = true;  // --requeue: preempted/failed nodes restart the job
  // A job that neither sacct nor squeue lists and that left no exit file is
  // kQueued (accounting can lag behind sbatch) until it has been missing this
  // long, then kLost.
  std::chrono::milliseconds lost_after{300'000};
};
std::unique_ptr<Backend> MakeSlurmBackend(const SlurmOptions& options);

}  // namespace gantry::jobs
