// `gantry jobs` end to end through the built binary: exit codes, --json, a
// runner killed with SIGKILL mid-workflow and resumed, cancel from another
// process, logs, check and replay.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "testing/gantry_cli.h"
#include "testing/temp_dir.h"

namespace gantry {
namespace {

namespace fs = std::filesystem;
using testing::CliRun;
using testing::GantryProcess;
using ::testing::HasSubstr;
using testing::RunGantry;
using testing::TempDir;

void WaitForFile(const std::string& path) {
  for (int i = 0; i < 3000 && !fs::exists(path); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(fs::exists(path)) << path;
}

TEST(JobsCli, RunStatusLogsAndExitCodes) {
  TempDir dir("gantry-jobs-cli");
  std::string wf = dir.Write("workflow.yaml", R"(
name: demo
steps:
  hello: {shell: "echo hello from $GANTRY_STEP"}
  fail: {needs: [hello], shell: "echo broken >&2; exit 5"}
)");
  CliRun r = RunGantry({"jobs", "run", wf, "--cpus", "2"});
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("hello  succeeded"));
  EXPECT_THAT(r.out, HasSubstr("fail  failed: exit code 5"));

  CliRun s = RunGantry({"jobs", "status", wf, "--json"});
  ASSERT_EQ(s.rc, 0) << s.err;
  Json j = s.json();
  EXPECT_EQ(j["workflow"], "demo");
  EXPECT_EQ(j["state"], "failed");
  EXPECT_EQ(j["steps"]["hello"]["state"], "succeeded");
  EXPECT_EQ(j["steps"]["fail"]["exit_code"], 5);
  EXPECT_EQ(j["runner_alive"], false);

  CliRun table = RunGantry({"jobs", "status", wf});
  EXPECT_EQ(table.rc, 0);
  EXPECT_THAT(table.out, HasSubstr("workflow demo"));
  EXPECT_THAT(table.out, ::testing::ContainsRegex("fail +failed +1 +5"));

  CliRun logs = RunGantry({"jobs", "logs", "hello", "-w", wf});
  EXPECT_EQ(logs.rc, 0) << logs.err;
  EXPECT_THAT(logs.out, HasSubstr("out| hello from hello"));
  CliRun err = RunGantry({"jobs", "logs", "fail", "-w", wf, "-f"});
  EXPECT_EQ(err.rc, 0);
  EXPECT_THAT(err.out, HasSubstr("err| broken"));
  CliRun unknown = RunGantry({"jobs", "logs", "helo", "-w", wf});
  EXPECT_EQ(unknown.rc, 2);
  EXPECT_THAT(unknown.err, HasSubstr("did you mean 'hello'"));

  CliRun json = RunGantry({"jobs", "run", wf, "--json", "--quiet", "--target", "hello"});
  EXPECT_EQ(json.rc, 0) << json.err;
  EXPECT_EQ(json.json()["state"], "succeeded");
}

TEST(JobsCli, BadWorkflowsExit2WithThePlace) {
  TempDir dir("gantry-jobs-cli");
  std::string wf = dir.Write("bad.yaml", "steps:\n  a: {run: [true], needz: [b]}\n");
  CliRun r = RunGantry({"jobs", "run", wf});
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.err, HasSubstr("bad.yaml:2"));
  EXPECT_THAT(r.err, HasSubstr("did you mean 'steps.a.needs'"));
  CliRun c = RunGantry({"jobs", "check", wf});
  EXPECT_EQ(c.rc, 2);
  CliRun missing = RunGantry({"jobs", "run", dir.Path("nope.yaml")});
  EXPECT_EQ(missing.rc, 2);
  EXPECT_THAT(missing.err, HasSubstr("nope.yaml"));
  CliRun none = RunGantry({"jobs", "status", "--state-dir", dir.Path("empty")});
  EXPECT_EQ(none.rc, 2);
  EXPECT_THAT(none.err, HasSubstr("start one with gantry jobs run"));
  std::string good =
      dir.Write("good.yaml", "steps:\n  a: {run: [echo, a]}\n  b: {run: [echo, b], needs: [a]}\n");
  CliRun ok = RunGantry({"jobs", "check", good});
  EXPECT_EQ(ok.rc, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("2 steps, valid"));
}

// The runner is killed with SIGKILL while step two runs: resume neither
// reruns step one nor loses step two (it restarts, its pipe died with the
// runner), and finishes the rest.
TEST(JobsCli, ARunnerKilledMidWorkflowResumes) {
  TempDir dir("gantry-jobs-cli");
  std::string wf = dir.Write("workflow.yaml", R"(
steps:
  one: {shell: "echo one >> runs.txt"}
  two: {needs: [one], shell: "echo two >> runs.txt; touch two.started; [ -e go ] || sleep 300"}
  three: {needs: [two], shell: "echo three >> runs.txt"}
)");
  GantryProcess p;
  ASSERT_TRUE(p.Start({"jobs", "run", wf, "--cpus", "2"}).ok());
  WaitForFile(dir.Path("two.started"));
  p.Signal(SIGKILL);
  p.Wait();
  CliRun s = RunGantry({"jobs", "status", wf, "--json"});
  ASSERT_EQ(s.rc, 0);
  EXPECT_EQ(s.json()["state"], "running");
  EXPECT_EQ(s.json()["runner_alive"], false);
  std::ofstream(dir.Path("go")) << "";
  CliRun r = RunGantry({"jobs", "resume", wf, "--cpus", "2"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("two  its runner stopped while it ran"));
  EXPECT_EQ(dir.Read("runs.txt"), "one\ntwo\ntwo\nthree\n");
  CliRun again = RunGantry({"jobs", "resume", wf});
  EXPECT_EQ(again.rc, 0);
  EXPECT_EQ(dir.Read("runs.txt"), "one\ntwo\ntwo\nthree\n");  // nothing rerun
}

TEST(JobsCli, CancelFromAnotherProcess) {
  TempDir dir("gantry-jobs-cli");
  std::string wf = dir.Write("workflow.yaml", R"(
steps:
  long: {shell: "touch started; sleep 300", kill_grace: 2s}
)");
  GantryProcess p;
  ASSERT_TRUE(p.Start({"jobs", "run", wf}).ok());
  WaitForFile(dir.Path("started"));
  CliRun c = RunGantry({"jobs", "cancel", wf});
  EXPECT_EQ(c.rc, 0) << c.err;
  EXPECT_THAT(c.out, HasSubstr("asked the runner"));
  EXPECT_EQ(p.Wait(), 1);
  CliRun s = RunGantry({"jobs", "status", wf, "--json"});
  EXPECT_EQ(s.json()["state"], "cancelled");
  EXPECT_EQ(s.json()["steps"]["long"]["state"], "cancelled");
  // A second runner on a held state directory is refused while one runs.
  fs::remove(dir.Path("started"));
  GantryProcess q;
  ASSERT_TRUE(q.Start({"jobs", "run", wf}).ok());
  WaitForFile(dir.Path("started"));
  CliRun second = RunGantry({"jobs", "run", wf});
  EXPECT_EQ(second.rc, 2);
  EXPECT_THAT(second.err, HasSubstr("another gantry jobs runner"));
  q.Signal(SIGTERM);
  EXPECT_EQ(q.Wait(), 1);
}

TEST(JobsCli, ReplayPrintsWhichTrialsAPolicyStops) {
  TempDir dir("gantry-jobs-cli");
  std::string wf = dir.Write("workflow.yaml", R"(
steps:
  train:
    run: [true]
    sweep:
      search_space: {lr: {type: choice, values: [1, 2]}}
      objective: {primary_metric: acc, goal: maximize}
      early_termination: {type: bandit, slack_amount: 0.1, evaluation_interval: 1, delay_evaluation: 0}
)");
  std::string events = dir.Write("events.jsonl",
                                 "{\"trial\":0,\"step\":1,\"value\":0.9}\n"
                                 "{\"trial\":1,\"step\":1,\"value\":0.5}\n");
  CliRun r = RunGantry({"jobs", "replay", wf, "--step", "train", "--events", events, "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  Json j = r.json();
  ASSERT_EQ(j["stops"].size(), 1u);
  EXPECT_EQ(j["stops"][0]["trial"], 1);
  EXPECT_EQ(j["stops"][0]["step"], 1);
  std::string bad = dir.Write("bad.jsonl", "{\"trial\":\"x\"}\n");
  CliRun b = RunGantry({"jobs", "replay", wf, "--step", "train", "--events", bad});
  EXPECT_EQ(b.rc, 2);
  EXPECT_THAT(b.err, HasSubstr("bad.jsonl:1"));
}

}  // namespace
}  // namespace gantry
