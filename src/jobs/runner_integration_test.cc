// The runner with the local backend and real processes (sh scripts): the DAG,
// up-to-date skips, retries, timeouts of whole process groups, failure modes,
// resources, prerequisites, cancel, the state file, logs, metrics and sweeps.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <utime.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "gantry/jobs/runner.h"
#include "gantry/jobs/workflow.h"
#include "runner_report.h"
#include "testing/promtool.h"
#include "testing/temp_dir.h"

namespace gantry::jobs {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::TempDir;

class RunnerTest : public ::testing::Test {
 protected:
  Result<RunRecord> Run(std::string_view yaml, RunOptions o = {}) {
    std::string path = dir_.Write("workflow.yaml", yaml);
    Result<Workflow> wf = LoadWorkflow(path);
    if (!wf.ok()) return wf.status();
    wf_ = *wf;
    if (o.state_dir.empty()) o.state_dir = dir_.Path("state");
    if (o.cpus == 0) o.cpus = 4;
    if (o.gpus < 0) o.gpus = 0;
    o.on_event = [this](const RunEvent& e) {
      events_ += e.key + " " + std::string(StepStateName(e.state)) + " " + e.message + "\n";
    };
    return RunWorkflow(wf_, o);
  }
  const StepRecord& Step(const RunRecord& r, const std::string& name) { return r.steps.at(name); }

  TempDir dir_{"gantry-jobs-runner"};
  Workflow wf_;
  std::string events_;
};

TEST_F(RunnerTest, RunsTheDagInOrderAndSkipsWhatIsUpToDate) {
  std::string yaml = R"(
steps:
  prepare:
    shell: "echo prepare >> runs.txt && echo data > data.txt"
    outputs: [data.txt]
  train:
    needs: [prepare]
    shell: "echo train >> runs.txt && cat data.txt > model.txt"
    inputs: [data.txt]
    outputs: [model.txt]
  report:
    needs: [train]
    shell: "echo report >> runs.txt"
)";
  Result<RunRecord> r = Run(yaml);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->state, "succeeded") << events_;
  EXPECT_EQ(dir_.Read("runs.txt"), "prepare\ntrain\nreport\n");
  EXPECT_EQ(dir_.Read("model.txt"), "data\n");
  EXPECT_EQ(Step(*r, "train").exit_code, 0);
  EXPECT_EQ(Step(*r, "train").attempts, 1);

  // Again: the steps with outputs are up to date; report declares none, so it runs.
  events_.clear();
  r = Run(yaml);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->state, "succeeded");
  EXPECT_EQ(Step(*r, "prepare").state, StepState::kSkipped);
  EXPECT_EQ(Step(*r, "train").state, StepState::kSkipped);
  EXPECT_EQ(Step(*r, "report").state, StepState::kSucceeded);
  EXPECT_EQ(dir_.Read("runs.txt"), "prepare\ntrain\nreport\nreport\n");

  // An input newer than the outputs reruns that step (and so what needs its output).
  struct stat st {};
  ASSERT_EQ(::stat(dir_.Path("model.txt").c_str(), &st), 0);
  utimbuf later{st.st_mtime + 10, st.st_mtime + 10};
  ASSERT_EQ(::utime(dir_.Path("data.txt").c_str(), &later), 0);
  r = Run(yaml);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Step(*r, "prepare").state, StepState::kSkipped);
  EXPECT_EQ(Step(*r, "train").state, StepState::kSucceeded);

  // A changed command reruns the step even when its files are up to date.
  std::string changed = yaml;
  changed.replace(changed.find("echo data"), 9, "echo DATA");
  r = Run(changed);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Step(*r, "prepare").state, StepState::kSucceeded);

  RunOptions force;
  force.force = true;
  r = Run(changed, force);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Step(*r, "prepare").state, StepState::kSucceeded);
}

TEST_F(RunnerTest, RetriesWithBackoffOnlyForTheListedExitCodes) {
  Result<RunRecord> r = Run(R"(
steps:
  flaky:
    # fails twice with 75, then succeeds
    shell: "n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; [ $n -ge 3 ] || exit 75"
    retries: {limit: 3, backoff: 10ms, exit_codes: [75]}
  hard:
    shell: "exit 3"
    retries: {limit: 3, backoff: 10ms, exit_codes: [75]}
    on_failure: continue
)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Step(*r, "flaky").state, StepState::kSucceeded) << events_;
  EXPECT_EQ(Step(*r, "flaky").attempts, 3);
  EXPECT_EQ(Step(*r, "hard").state, StepState::kFailed);
  EXPECT_EQ(Step(*r, "hard").attempts, 1);  // 3 is not a code that retries
  EXPECT_EQ(Step(*r, "hard").exit_code, 3);
  EXPECT_EQ(r->state, "failed");
  EXPECT_THAT(events_, HasSubstr("retry 1 of 3"));
}

TEST_F(RunnerTest, ATimeoutKillsTheWholeProcessGroupEvenWhenSigtermIsIgnored) {
  Result<RunRecord> r = Run(R"(
steps:
  hang:
    shell: "trap '' TERM; sleep 300 & echo $! > bg.pid; wait; sleep 300"
    timeout: 300ms
    kill_grace: 200ms
)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Step(*r, "hang").state, StepState::kFailed);
  EXPECT_EQ(Step(*r, "hang").exit_code, 124);
  EXPECT_THAT(Step(*r, "hang").reason, HasSubstr("timed out"));
  pid_t bg = std::stoi(dir_.Read("bg.pid"));
  // The background sleep was in the step's process group: it is gone (or a
  // zombie about to be reaped by init). SIGKILL is delivered asynchronously,
  // so a loaded machine may still show it on its way out for a moment.
  auto dead = [&](std::string* stat) {
    *stat = dir_.Read("/proc/" + std::to_string(bg) + "/stat");
    return stat->empty() || stat->find(") Z") != std::string::npos;
  };
  std::string stat;
  for (int i = 0; i < 1000 && !dead(&stat); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(dead(&stat)) << stat;
}

TEST_F(RunnerTest, OnFailureStopContinueAndHandler) {
  Result<RunRecord> r = Run(R"(
steps:
  bad: {shell: "exit 4"}
  after_bad: {needs: [bad], shell: "touch after_bad"}
)");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, "failed");
  EXPECT_EQ(Step(*r, "after_bad").state, StepState::kUpstreamFailed);
  EXPECT_FALSE(fs::exists(dir_.Path("after_bad")));

  r = Run(R"(
on_failure: continue
steps:
  bad: {shell: "exit 4"}
  dependent: {needs: [bad], shell: "touch dependent"}
  other: {shell: "sleep 0.2; touch other"}
  later: {needs: [other], shell: "touch later"}
)");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, "failed");
  EXPECT_EQ(Step(*r, "dependent").state, StepState::kUpstreamFailed);
  EXPECT_EQ(Step(*r, "later").state, StepState::kSucceeded);
  EXPECT_TRUE(fs::exists(dir_.Path("later")));

  r = Run(R"(
steps:
  bad: {shell: "echo oops >&2; exit 4", on_failure: cleanup}
  cleanup:
    handler: true
    shell: "echo \"$GANTRY_FAILED_STEP $GANTRY_FAILED_EXIT_CODE\" > handled"
)");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, "failed");
  EXPECT_EQ(dir_.Read("handled"), "bad 4\n");
  EXPECT_EQ(Step(*r, "cleanup").state, StepState::kSucceeded);
}

TEST_F(RunnerTest, StopLetsRunningStepsFinishAndStartsNothingNew) {
  Result<RunRecord> r = Run(R"(
steps:
  slow: {shell: "sleep 0.5; touch slow"}
  bad: {shell: "exit 1"}
  next: {needs: [slow], shell: "touch next"}
)");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, "failed");
  EXPECT_EQ(Step(*r, "slow").state, StepState::kSucceeded);
  EXPECT_EQ(Step(*r, "next").state, StepState::kPending);
  EXPECT_THAT(Step(*r, "next").reason, HasSubstr("on_failure: stop"));
  EXPECT_FALSE(fs::exists(dir_.Path("next")));
}

TEST_F(RunnerTest, LocalResourcesBoundParallelismAndAssignGpus) {
  // Each step holds a directory while it runs: a second step at once fails mkdir.
  RunOptions o;
  o.cpus = 1;
  o.gpus = 2;
  Result<RunRecord> r = Run(R"(
steps:
  a: {shell: "mkdir cpu.lock && sleep 0.2 && rmdir cpu.lock"}
  b: {shell: "mkdir cpu.lock && sleep 0.2 && rmdir cpu.lock"}
  c: {shell: "mkdir cpu.lock && sleep 0.2 && rmdir cpu.lock"}
)",
                            o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, "succeeded") << events_;

  o.cpus = 4;
  r = Run(R"(
steps:
  g1: {resources: {gpus: 1}, shell: "mkdir gpu$CUDA_VISIBLE_DEVICES.lock && echo $CUDA_VISIBLE_DEVICES > g1 && sleep 0.3 && rmdir gpu$CUDA_VISIBLE_DEVICES.lock"}
  g2: {resources: {gpus: 1}, shell: "mkdir gpu$CUDA_VISIBLE_DEVICES.lock && echo $CUDA_VISIBLE_DEVICES > g2 && sleep 0.3 && rmdir gpu$CUDA_VISIBLE_DEVICES.lock"}
  g3: {resources: {gpus: 2}, shell: "echo $CUDA_VISIBLE_DEVICES > g3"}
  none: {shell: "echo \"[$CUDA_VISIBLE_DEVICES]\" > none"}
  toomany: {resources: {gpus: 3}, shell: "true", on_failure: continue}
)",
          o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Step(*r, "g1").state, StepState::kSucceeded) << events_;
  EXPECT_EQ(Step(*r, "g2").state, StepState::kSucceeded) << events_;
  EXPECT_EQ(dir_.Read("g3"), "0,1\n");
  EXPECT_EQ(dir_.Read("none"), "[]\n");
  EXPECT_EQ(Step(*r, "toomany").state, StepState::kFailed);
  EXPECT_THAT(Step(*r, "toomany").reason, HasSubstr("needs 3 GPUs, this node has 2"));
}

TEST_F(RunnerTest, AFailedPrerequisiteFailsTheStepWithoutRunningIt) {
  Result<RunRecord> r = Run(R"(
steps:
  a:
    shell: "touch ran"
    requires: {executables: [gantry-no-such-program]}
)");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Step(*r, "a").state, StepState::kFailed);
  EXPECT_THAT(Step(*r, "a").reason, HasSubstr("prerequisite failed"));
  EXPECT_THAT(Step(*r, "a").reason, HasSubstr("gantry-no-such-program"));
  EXPECT_FALSE(fs::exists(dir_.Path("ran")));
  EXPECT_EQ(Step(*r, "a").attempts, 0);
}

TEST_F(RunnerTest, AMissingProgramOrWorkdirFailsTheStepSayingWhich) {
  Result<RunRecord> r = Run(R"(
on_failure: continue
steps:
  noprog: {run: [gantry-no-such-program, --flag]}
  nodir: {run: [true], workdir: does/not/exist}
)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Step(*r, "noprog").state, StepState::kFailed);
  EXPECT_THAT(Step(*r, "noprog").reason, HasSubstr("'gantry-no-such-program' not found"));
  EXPECT_EQ(Step(*r, "nodir").state, StepState::kFailed);
  EXPECT_THAT(Step(*r, "nodir").reason, HasSubstr("does/not/exist"));
}

TEST_F(RunnerTest, LogsAreTimestampedPerLineAndStream) {
  Result<RunRecord> r = Run("steps: {a: {shell: \"echo hello; echo oops >&2; printf tail\"}}");
  ASSERT_TRUE(r.ok());
  std::string log = dir_.Read(LogPath(dir_.Path("state"), "a"));
  EXPECT_THAT(log, HasSubstr(" out| hello\n"));
  EXPECT_THAT(log, HasSubstr(" err| oops\n"));
  EXPECT_THAT(log, HasSubstr(" out| tail\n"));  // a last line without a newline
  EXPECT_THAT(log, HasSubstr(" gantry| end: succeeded, exit code 0"));
  EXPECT_THAT(log, ::testing::ContainsRegex(
                       "20[0-9][0-9]-[01][0-9]-[0-3][0-9]T[0-9:]+\\.[0-9]{3}Z out\\| hello"));
}

TEST_F(RunnerTest, CancelStopsRunningStepsAndRecordsIt) {
  std::atomic<bool> cancel{false};
  RunOptions o;
  o.cancel = &cancel;
  std::thread t([&] {
    while (!fs::exists(dir_.Path("started")))
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    cancel.store(true);
  });
  Result<RunRecord> r = Run(R"(
steps:
  long: {shell: "touch started; sleep 300", kill_grace: 1s}
  after: {needs: [long], shell: "touch after"}
)",
                            o);
  t.join();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, "cancelled");
  EXPECT_EQ(Step(*r, "long").state, StepState::kCancelled);
  EXPECT_EQ(Step(*r, "after").state, StepState::kCancelled);
  Result<RunRecord> stored = ReadState(dir_.Path("state"));
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->state, "cancelled");
}

TEST_F(RunnerTest, StateDirectoriesAreGuarded) {
  ASSERT_TRUE(Run("name: one\nsteps: {a: {run: [true]}}").ok());
  Result<RunRecord> other = Run("name: two\nsteps: {a: {run: [true]}}");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(other.status().message(), HasSubstr("holds the state of workflow 'one'"));

  RunOptions bad;
  bad.state_dir = "/dev/null/state";
  Result<RunRecord> r = Run("name: one\nsteps: {a: {run: [true]}}", bad);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("/dev/null/state"));

  RunOptions fresh;
  fresh.state_dir = dir_.Path("fresh");
  fresh.resume = true;
  r = Run("name: one\nsteps: {a: {run: [true]}}", fresh);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("nothing to resume"));

  RunOptions target;
  target.targets = {"nope"};
  r = Run("name: one\nsteps: {a: {run: [true]}}", target);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("no step 'nope'"));
}

TEST_F(RunnerTest, ResumeKeepsFinishedStepsAndRetriesFailedOnes) {
  std::string yaml = R"(
steps:
  one: {shell: "echo one >> runs.txt"}
  two: {needs: [one], shell: "echo two >> runs.txt; [ -e fixed ]"}
  three: {needs: [two], shell: "echo three >> runs.txt"}
)";
  Result<RunRecord> r = Run(yaml);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, "failed");
  dir_.Write("fixed", "");
  RunOptions o;
  o.resume = true;
  r = Run(yaml, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->state, "succeeded") << events_;
  EXPECT_EQ(dir_.Read("runs.txt"), "one\ntwo\ntwo\nthree\n");
}

TEST_F(RunnerTest, TargetsRunOnlyWhatTheyNeed) {
  RunOptions o;
  o.targets = {"b"};
  Result<RunRecord> r = Run(R"(
steps:
  a: {shell: "touch a"}
  b: {needs: [a], shell: "touch b"}
  c: {needs: [b], shell: "touch c"}
)",
                            o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, "succeeded");
  EXPECT_TRUE(fs::exists(dir_.Path("b")));
  EXPECT_FALSE(fs::exists(dir_.Path("c")));
}

TEST_F(RunnerTest, SubstitutionErrorsFailTheStepNamingTheVariable) {
  Result<RunRecord> r = Run("steps: {a: {run: [echo, \"${{search_space.lr}}\"]}}");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Step(*r, "a").state, StepState::kFailed);
  EXPECT_THAT(Step(*r, "a").reason, HasSubstr("unknown variable ${{search_space.lr}}"));
}

TEST_F(RunnerTest, MetricsTextfilePassesPromtool) {
  RunOptions o;
  o.metrics_textfile = dir_.Path("jobs.prom");
  Result<RunRecord> r =
      Run("steps: {a: {run: [true]}, b: {run: [false], on_failure: continue}}", o);
  ASSERT_TRUE(r.ok());
  std::string text = dir_.Read("jobs.prom");
  EXPECT_THAT(
      text,
      HasSubstr("gantry_jobs_step_state{state=\"succeeded\",step=\"a\",workflow=\"workflow\"} 1"));
  EXPECT_THAT(text, HasSubstr("gantry_jobs_step_exit_code{step=\"b\",workflow=\"workflow\"} 1"));
  EXPECT_THAT(text, HasSubstr("gantry_jobs_run_info{"));
  testing::CliRun check = testing::PromtoolCheckMetrics(text);
  EXPECT_EQ(check.rc, 0) << check.out << check.err;
}

// A sweep of a shell "trainer": its accuracy after step k is lr*k, so the
// trials with the smaller lr fall behind and Bandit stops them.
TEST_F(RunnerTest, SweepWithBanditStopsLaggingTrialsAndPassesTheBestOn) {
  Result<RunRecord> r = Run(R"(
steps:
  train:
    shell: >-
      for k in 1 2 3 4 5 6; do
        echo "accuracy=$(awk "BEGIN{print $GANTRY_PARAM_LR*$k}") step=$k" >> "$GANTRY_METRICS_FILE";
        sleep 0.15;
      done; echo done > "${{trial.dir}}/out"
    sweep:
      search_space:
        lr: {type: choice, values: [0.01, 0.1, 0.05, 0.02]}
      sampling_algorithm: grid
      objective: {primary_metric: accuracy, goal: maximize}
      early_termination: {type: bandit, slack_factor: 0.2, evaluation_interval: 1, delay_evaluation: 2}
      limits: {max_total_trials: 4, max_concurrent_trials: 4}
  use:
    needs: [train]
    run: [sh, -c, "echo ${{steps.train.best.params.lr}} > best_lr"]
)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->state, "succeeded") << events_;
  const StepRecord& train = Step(*r, "train");
  ASSERT_EQ(train.trials.size(), 4u);
  ASSERT_TRUE(train.best_trial.has_value());
  EXPECT_EQ(ParamText(train.trials[*train.best_trial].params[0].second), "0.1");
  EXPECT_EQ(dir_.Read("best_lr"), "0.1\n");
  int stopped = 0;
  for (const TrialRecord& t : train.trials) stopped += t.pruned;
  EXPECT_GE(stopped, 1) << events_;
  EXPECT_TRUE(fs::exists(dir_.Path("state/trials/train/best.json")));
}

// The loop that reads running trials' metrics also checks prerequisites; a
// `python:` check per trial (seconds for torch) delayed early termination past
// the end of the trials it stopped (found by the tour). A sweep's trials share
// one passing check; other steps are still checked per attempt.
TEST_F(RunnerTest, ASweepsTrialsShareOnePassingPrerequisiteCheck) {
  std::string py = dir_.Write("py.sh", "#!/bin/sh\necho check >> " + dir_.Path("checks") +
                                           "\nexec /usr/bin/python3 \"$@\"\n");
  fs::permissions(py, fs::perms::owner_all);
  Result<RunRecord> r = Run(R"(
requires: {python: [json], python_interpreter: )" +
                            py + R"(}
steps:
  train:
    shell: "echo accuracy=0.5 step=1 >> \"$GANTRY_METRICS_FILE\""
    sweep:
      search_space:
        lr: {type: choice, values: [1, 2, 3, 4]}
      sampling_algorithm: grid
      objective: {primary_metric: accuracy, goal: maximize}
      limits: {max_total_trials: 4, max_concurrent_trials: 1}
  after:
    needs: [train]
    shell: "true"
)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->state, "succeeded") << events_;
  EXPECT_EQ(Step(*r, "train").trials.size(), 4u);
  // One check for the four trials, one for `after`.
  EXPECT_EQ(dir_.Read("checks"), "check\ncheck\n");
}

}  // namespace
}  // namespace gantry::jobs
