// Shared pieces of the `gantry` command line. Each module's commands live in
// their own <module>_cmd.cc and only parse flags, call the library and print.
//
// Exit codes (documented in README.md), the same for every command:
//   0 ok, 1 a check failed or the work failed, 2 usage or configuration error,
//   7 wrong results from a collective (as nccl-tests).
// A command never picks an exit code for a Status itself: it returns Fail(), so
// a NotFound exits 2 whichever command reports it.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitWrongResults = 7;

// The one Status -> exit code map:
//   kExitUsage (2): InvalidArgument, NotFound, AlreadyExists, FailedPrecondition,
//     PermissionDenied, ResourceExhausted, Unimplemented: the invocation, a file or
//     key it names, the credentials, a size asked for or the machine's state must
//     change before a rerun can succeed; the message says what.
//   kExitCheckFailed (1): everything else: the command ran and what it checked or
//     did failed: DataLoss (corruption found), Unavailable, DeadlineExceeded (a peer
//     that did not answer: a rerun may succeed), IoError, Internal.
// kExitWrongResults is never derived from a Status; only collectives return it.
// Precondition: !s.ok() (an OK status maps to kExitOk).
int ExitCode(const Status& s);

// Prints "gantry <command>: <message>" on stderr and returns ExitCode(s).
// `command` is the words the user typed, e.g. "registry show".
int Fail(std::string_view command, const Status& s);

struct CommonFlags {
  bool json = false;
  std::string log_level = "warn";
};

// Adds --json and --log-level to a subcommand.
void AddCommonFlags(CLI::App* cmd, CommonFlags* flags);
// Applies --log-level (and initialises logging). Prints the error and returns
// false when the level is unknown.
bool ApplyCommonFlags(const CommonFlags& flags);

// Makes every list-valued flag take one value per occurrence (`--tag a=1
// --tag b=2 DIR`), as the help texts promise ("repeatable"). CLI11's default
// lets such a flag swallow the words after it, positionals included, so
// `backup create --tag run=1 /data` lost /data to the tag. Walks `app` and all
// its subcommands; call it once after every command is registered.
void OneValuePerFlag(CLI::App* app);

using Action = std::function<int()>;

// doctor_cmd.cc: `gantry doctor`. Sets *action when the subcommand was chosen.
void RegisterDoctor(CLI::App& app, Action* action);

// ckpt_cmd.cc: `gantry ckpt ls|show|verify|prune|plan|bench|export`.
void RegisterCkpt(CLI::App& app, Action* action);

// audit_cmd.cc: `gantry audit verify|keygen` (hash-chained audit logs).
void RegisterAudit(CLI::App& app, Action* action);

// gateway_cmd.cc: `gantry gateway [run] --config F`, `gantry gateway keys ...`,
// `gantry gateway check`.
void RegisterGateway(CLI::App& app, Action* action);

// advise_cmd.cc: `gantry advise [--workload F] | commit | catalog`.
void RegisterAdvise(CLI::App& app, Action* action);

// health_cmd.cc: `gantry health [--profile P] [--slurm] ...`.
void RegisterHealth(CLI::App& app, Action* action);

// tune_cmd.cc: `gantry tune [--apply|--reset] [--lock] [--dry-run]`.
void RegisterTune(CLI::App& app, Action* action);

// drift_cmd.cc: `gantry drift profile|compare|validate`.
void RegisterDrift(CLI::App& app, Action* action);

// assess_cmd.cc: `gantry assess run|rules|explain`.
void RegisterAssess(CLI::App& app, Action* action);

// jobs_cmd.cc: `gantry jobs run|resume|status|logs|cancel|check|replay`.
void RegisterJobs(CLI::App& app, Action* action);

// autoscale_cmd.cc: `gantry autoscale run|check|status|slurm-resume|slurm-suspend|
// slurm-resume-fail`.
void RegisterAutoscale(CLI::App& app, Action* action);

// registry_cmd.cc: `gantry registry
// register|list|show|versions|alias|download|sign|verify|search|...`.
void RegisterRegistry(CLI::App& app, Action* action);

// storage_cmd.cc: `gantry storage put|get|ls|stat|rm` over storage::ObjectStore.
void RegisterStorage(CLI::App& app, Action* action);

// agent_cmd.cc: `gantry agent [--config FILE] [--listen HOST:PORT]`, `gantry agent rules ...`.
void RegisterAgent(CLI::App& app, Action* action);

// report_cmd.cc: `gantry report utilization --since 7d`.
void RegisterReport(CLI::App& app, Action* action);

// backup_cmd.cc: `gantry backup create|list|restore|verify|prune`.
void RegisterBackup(CLI::App& app, Action* action);

// bench_cmd.cc: `gantry bench <collective> [nccl-tests flags]`. Bench parses its
// own argv (getopt_long, exactly like nccl-tests) so that every nccl-tests
// spelling (-b8, --minbytes 8, -e 1G) works unchanged. argv[0] is "bench".
int BenchMain(int argc, char** argv);
// bench_cmd.cc: entry when invoked through an nccl-tests name such as
// `all_reduce_perf` (a symlink to gantry). `collective` is "all_reduce" etc.
int PerfMain(std::string_view collective, int argc, char** argv);
// The collective names that have a `<name>_perf` entry point.
bool IsPerfCollective(std::string_view collective);

}  // namespace gantry::cli
