// Running a helper program (scontrol, systemctl, nvidia-smi) with a deadline,
// for the health checks, `gantry health --slurm` and host detection.
//
//   ASSIGN_OR_RETURN(SubprocessResult r,
//                    RunSubprocess({"systemctl", "is-active", "sshd"}, std::chrono::seconds(5)));
//
// The child is started with posix_spawn (no shell: arguments are argv; safe
// while other threads run), stdin from /dev/null, stdout and stderr captured
// separately, in a process group of its own so that a timeout kills whatever
// it started too.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "gantry/core/status.h"

namespace gantry {

struct SubprocessResult {
  int exit_code = 0;  // 128 + signal for a child killed by a signal
  std::string out;    // stdout, at most 1 MiB
  std::string err;    // stderr, at most 64 KiB
};

// Runs argv[0] (searched in $PATH when it has no '/') with argv, stdin from
// /dev/null, capturing stdout and stderr; a child still running after
// `timeout` is killed. Errors: InvalidArgument for an empty argv; Unavailable
// naming the program when it cannot be started, or naming the command line
// ("did not finish within N ms and was killed") when it timed out.
Result<SubprocessResult> RunSubprocess(const std::vector<std::string>& argv,
                                       std::chrono::milliseconds timeout);

// A child started in a process group of its own (pgid = pid), stdin from
// /dev/null, stdout and stderr into two pipes whose read ends (close-on-exec)
// the caller reads and closes. RunSubprocess and `gantry jobs`' local backend
// start their children this way.
struct SpawnedChild {
  pid_t pid = -1;
  int out = -1;
  int err = -1;
};
struct SpawnOptions {
  std::string workdir;  // "" = the caller's
  // The whole environment as NAME=VALUE entries; nullptr = the caller's.
  const std::vector<std::string>* env = nullptr;
  // Signals reset to their defaults in the child (as a shell would give a
  // job), besides the empty signal mask it always gets.
  bool default_signals = false;
};
// `program` is searched in $PATH when it has no '/'. Unavailable naming the
// program (and the workdir) when it cannot be started: not found, not
// executable, a workdir that does not exist.
Result<SpawnedChild> SpawnInGroup(const std::string& program, const std::vector<std::string>& argv,
                                  const SpawnOptions& options = {});

// The executable `name` resolves to: `name` itself when it contains '/' and is
// executable, else the first executable <dir>/<name> for the directories of
// $PATH ("/usr/bin:/bin" when unset). "" when there is none; never fails.
std::string FindExecutable(const std::string& name);

// argv as one line for messages: arguments joined by spaces, an argument that
// contains a space in double quotes.
std::string JoinArgv(const std::vector<std::string>& argv);

}  // namespace gantry
