// Test support: runs the built `gantry` binary as a user would, for the
// end-to-end tests of each command family (exit codes, --json shapes, messages).
//
//   CliRun r = RunGantry({"storage", "stat", "file:///tmp/x/missing", "--json"});
//   EXPECT_EQ(r.rc, 2) << r.err;
//
//   GantryProcess agent;
//   ASSERT_TRUE(agent.Start({"agent", "--listen", "127.0.0.1:0"}).ok());
//   Result<std::vector<std::string>> m =
//       agent.WaitForLine(R"(listening on .* \(port (\d+)\))");   // m->at(1) is the port
//   agent.Signal(SIGTERM);
//   EXPECT_EQ(agent.Wait(), 0);
//
// No shell is involved: arguments are argv. stdout and stderr are captured
// separately (to files, so a chatty child never blocks on a full pipe).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry::testing {

using Env = std::vector<std::pair<std::string, std::string>>;

// <build>/bin/gantry.
std::string GantryBinary();

struct CliRun {
  int rc = -1;  // exit status; 128 + signal when killed (also after the timeout)
  std::string out;
  std::string err;
  // stdout parsed as JSON; a test failure (and null) when it is not.
  Json json() const;
};

// Runs `gantry args...` to completion with `env` added to (or replacing in)
// this process's environment. A child still running after `timeout` is killed.
CliRun RunGantry(const std::vector<std::string>& args, const Env& env = {},
                 std::chrono::seconds timeout = std::chrono::seconds(120));

// `gantry <args_line>` through /bin/sh, for tests whose arguments use the
// shell's quoting (an argument such as --encrypt-key-command 'exit 4').
CliRun RunGantryShell(const std::string& args_line, const Env& env = {},
                      std::chrono::seconds timeout = std::chrono::seconds(120));
// Any command line through /bin/sh -c.
CliRun RunShell(const std::string& command_line, const Env& env = {},
                std::chrono::seconds timeout = std::chrono::seconds(120));
// argv (argv[0] searched nowhere: give a path) with `input` on stdin.
CliRun RunWithInput(const std::vector<std::string>& argv, std::string_view input,
                    std::chrono::seconds timeout = std::chrono::seconds(120));

// A gantry command that runs until stopped (gateway run, agent, registry serve).
// The destructor kills it (SIGKILL) if it still runs.
class GantryProcess {
 public:
  GantryProcess();
  ~GantryProcess();
  GantryProcess(const GantryProcess&) = delete;
  GantryProcess& operator=(const GantryProcess&) = delete;

  Status Start(const std::vector<std::string>& args, const Env& env = {});
  // Waits until a line of stdout matches `regex` (ECMAScript, searched within
  // the line) and returns its match groups (0 is the whole match).
  // DeadlineExceeded with the output so far when `timeout` passes; Unavailable
  // with the output when the process exits first.
  Result<std::vector<std::string>> WaitForLine(
      const std::string& regex, std::chrono::seconds timeout = std::chrono::seconds(30));
  // Same, on stderr (logs).
  Result<std::vector<std::string>> WaitForErrLine(
      const std::string& regex, std::chrono::seconds timeout = std::chrono::seconds(30));
  void Signal(int sig);
  // Waits for the exit (bounded by `timeout`, then SIGKILL) and returns the
  // exit status as CliRun::rc does.
  int Wait(std::chrono::seconds timeout = std::chrono::seconds(60));
  bool Running();

  std::string Out() const;
  std::string Err() const;
  pid_t pid() const { return pid_; }

 private:
  Result<std::vector<std::string>> WaitFor(const std::string& file, const std::string& regex,
                                           std::chrono::seconds timeout);
  std::string dir_;
  pid_t pid_ = -1;
  int status_ = -1;
};

}  // namespace gantry::testing
