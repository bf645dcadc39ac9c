// The pure half of the Slurm backend: the batch script and the sbatch command
// line it writes, and the readers of sbatch, sacct and squeue output. No
// process is started here, so every function is tested with literal text
// (src/jobs/slurm_parse_test.cc); slurm_backend.cc runs the programs.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/jobs/backend.h"

namespace gantry::jobs::slurm {

// What sacct or squeue said about one job.
struct SlurmRecord {
  std::string job_id;      // "123", "123_4" (array task); squeue and sacct JobID
  std::string raw_id;      // sacct JobIDRaw ("124" for the array task 123_4); "" from squeue
  std::string state;       // first word of State, upper case: "CANCELLED" of "CANCELLED by 0"
  std::string state_text;  // State as printed: "CANCELLED by 0"
  int exit_code = -1;      // ExitCode decoded (128+signal for a signal); -1 when not given
  std::string reason;      // "NonZeroExitCode", "None"; "" when not given
};

// The sacct fields Poll asks for, in this order (`--format=` value).
inline constexpr std::string_view kSacctFormat = "JobID,JobIDRaw,State,ExitCode,Reason";
// The squeue -O fields Poll asks for: '|' after each (a suffix, no padding);
// exit_code is the raw wait status (768 for exit 3).
inline constexpr std::string_view kSqueueFormat = "JobID:|,State:|,exit_code:|,Reason:|";

// Lines of `sacct -X --parsable2 --noheader --format=<kSacctFormat>`. Lines
// with too few fields or without a job id are skipped (sacct prints nothing
// else on stdout; a garbage line must not become a job).
std::vector<SlurmRecord> ParseSacct(std::string_view out);
// Lines of `squeue --noheader -O <kSqueueFormat>`, same rules.
std::vector<SlurmRecord> ParseSqueue(std::string_view out);

// sacct's ExitCode "code:signal": "3:0" -> 3, "0:9" -> 137 (128 + signal);
// -1 for anything else.
int ParseExitCodeField(std::string_view field);
// A wait(2) status as squeue's exit_code prints it: 768 -> 3, 9 -> 137.
int DecodeWaitStatus(int status);

// The JobState of a Slurm state name (first word, any case): PENDING ->
// kQueued, TIMEOUT -> kTimedOut, ...; nullopt for a name this version does not
// know.
std::optional<JobState> MapSlurmState(std::string_view state);

// What Poll reports for one job from everything it knows:
//   record: sacct's or squeue's line; nullptr when neither knows the job;
//   exit_file: the code in the job's exit file, when the file exists;
//   cancelled: this backend's Cancel was called for the job.
// The exit file wins over Slurm's ExitCode (it is written by the job itself,
// and Slurm's record may be gone); a TIMEOUT is exit code 124 whatever the
// file says. A job that ended after Cancel is kCancelled unless it succeeded.
// Returns nullopt for "no record and no exit file": the caller decides
// between kQueued (not in Slurm's lists yet) and kLost.
std::optional<Observed> Combine(const SlurmRecord* record, std::optional<int> exit_file,
                                bool cancelled);

// The job id in `sbatch --parsable` output ("123" or "123;cluster").
// InvalidArgument quoting the output otherwise.
Result<std::string> ParseSbatchJobId(std::string_view out);

// True for sbatch/sacct/squeue errors that are worth retrying at once: the
// controller did not answer ("Socket timed out", "Unable to contact slurm
// controller", "temporarily unable to accept job").
bool IsTransientSlurmError(std::string_view stderr_text);
// True for "Slurm accounting storage is disabled" (AccountingStorageType=
// accounting_storage/none): sacct will never work on this cluster.
bool IsAccountingDisabled(std::string_view stderr_text);
// True for squeue's "Invalid job id specified": none of the ids is known.
bool IsInvalidJobId(std::string_view stderr_text);

// `s` as one single-quoted sh word ('it'\''s'); exact for every byte string
// (newlines, $, `, \ and " are literal inside single quotes).
std::string ShellQuote(std::string_view s);

// The batch script for `launch`: cd to workdir, export env, run argv (every
// word quoted), then write the exit code to exit_path through a temporary
// file and mv (atomic: a reader sees no file or the whole code) and exit with
// it. SIGTERM (scancel --signal=TERM, Slurm's time limit) is trapped by the
// script so that it outlives the step and still writes the code.
// InvalidArgument for an empty argv or an env name that is not a shell
// identifier.
Result<std::string> BatchScript(const Launch& launch);

// Where Submit writes the batch script: "<log_path>.sbatch.sh".
std::string ScriptPath(const Launch& launch);

// The sbatch command line (argv[0] = `sbatch`) that submits `script` for
// `launch`: --parsable, job name gantry-<run_id>, comment <key>, output
// <log_path> appended, --export=ALL, --chdir, --requeue or --no-requeue, the
// resources (--gres=gpu:N, --cpus-per-task=ceil(cpus), --mem=<MiB>M,
// --time=<minutes rounded up> from resources.time or else launch.timeout, -p,
// -A), resources.slurm_args verbatim, then the script. InvalidArgument for a
// log path with a backslash (Slurm would drop its '%' escaping).
Result<std::vector<std::string>> SbatchArgs(const Launch& launch, const std::string& sbatch,
                                            const std::string& script, bool requeue);

// `path` as a Slurm filename pattern that names exactly `path` ('%' -> "%%").
std::string EscapeSlurmPattern(std::string_view path);

// `t` as sacct's --starttime wants it: local time "YYYY-MM-DDTHH:MM:SS".
std::string SacctTime(std::chrono::system_clock::time_point t);

}  // namespace gantry::jobs::slurm
