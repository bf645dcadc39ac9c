#include "slurm_parse.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gantry/core/subprocess.h"
#include "testing/temp_dir.h"

namespace gantry::jobs::slurm {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> SplitNul(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\0') {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

// ---------------------------------------------------------------- sacct/squeue

TEST(SlurmParse, SacctLines) {
  // As sacct -X --parsable2 --noheader --format=JobID,JobIDRaw,State,ExitCode,Reason prints them.
  auto r = ParseSacct(
      "41|41|COMPLETED|0:0|None\n"
      "42|42|FAILED|3:0|NonZeroExitCode\n"
      "43|43|CANCELLED by 0|0:15|None\n"
      "123_4|127|RUNNING|0:0|None\n"
      "123_[5-7]|123|PENDING|0:0|Priority\n");
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(r[0].job_id, "41");
  EXPECT_EQ(r[0].state, "COMPLETED");
  EXPECT_EQ(r[0].exit_code, 0);
  EXPECT_EQ(r[1].state, "FAILED");
  EXPECT_EQ(r[1].exit_code, 3);
  EXPECT_EQ(r[1].reason, "NonZeroExitCode");
  EXPECT_EQ(r[2].state, "CANCELLED");
  EXPECT_EQ(r[2].state_text, "CANCELLED by 0");
  EXPECT_EQ(r[2].exit_code, 143);
  EXPECT_EQ(r[3].job_id, "123_4");
  EXPECT_EQ(r[3].raw_id, "127");
  EXPECT_EQ(r[4].job_id, "123_[5-7]");
  EXPECT_EQ(r[4].reason, "Priority");
}

TEST(SlurmParse, SacctEmptyAndGarbage) {
  EXPECT_TRUE(ParseSacct("").empty());
  EXPECT_TRUE(ParseSacct("\n\n  \n").empty());
  auto r = ParseSacct(
      "Slurm accounting storage is disabled\n"
      "JobID|JobIDRaw|State|ExitCode|Reason\n"
      "44|44|RUNNING\n"  // too few fields
      "|45|RUNNING|0:0|None\n"
      "46|46||0:0|None\n"
      "47|47|TIMEOUT|0:15|TimeLimit\n");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].job_id, "47");
  EXPECT_EQ(r[0].state, "TIMEOUT");
}

TEST(SlurmParse, SqueueLines) {
  // squeue --noheader -t all -O JobID:|,State:|,exit_code:|,Reason:| as 22.05 prints them.
  auto r = ParseSqueue(
      "1|FAILED|768|NonZeroExitCode|\n"
      "2|FAILED|36608|NonZeroExitCode|\n"
      "3|CANCELLED|0|JobHeldUser|\n"
      "4|RUNNING|0|None|\n"
      "5|CANCELLED|9|None|\n"
      "123_4|PENDING|0|Resources|\n"
      "slurm_load_jobs error: Invalid job id specified\n"
      "garbage\n");
  ASSERT_EQ(r.size(), 6u);
  EXPECT_EQ(r[0].exit_code, 3);
  EXPECT_EQ(r[1].exit_code, 143);
  EXPECT_EQ(r[2].state, "CANCELLED");
  EXPECT_EQ(r[2].reason, "JobHeldUser");
  EXPECT_EQ(r[3].state, "RUNNING");
  EXPECT_EQ(r[4].exit_code, 137);  // killed by SIGKILL
  EXPECT_EQ(r[5].job_id, "123_4");
  EXPECT_TRUE(ParseSqueue("").empty());
}

TEST(SlurmParse, ExitCodeField) {
  EXPECT_EQ(ParseExitCodeField("0:0"), 0);
  EXPECT_EQ(ParseExitCodeField("3:0"), 3);
  EXPECT_EQ(ParseExitCodeField("0:9"), 137);
  EXPECT_EQ(ParseExitCodeField("0:15"), 143);
  EXPECT_EQ(ParseExitCodeField("255:0"), 255);
  EXPECT_EQ(ParseExitCodeField(""), -1);
  EXPECT_EQ(ParseExitCodeField("3"), -1);
  EXPECT_EQ(ParseExitCodeField("a:b"), -1);
  EXPECT_EQ(DecodeWaitStatus(0), 0);
  EXPECT_EQ(DecodeWaitStatus(768), 3);
  EXPECT_EQ(DecodeWaitStatus(15), 143);
}

TEST(SlurmParse, StateMapping) {
  EXPECT_EQ(MapSlurmState("PENDING"), JobState::kQueued);
  EXPECT_EQ(MapSlurmState("CONFIGURING"), JobState::kQueued);
  EXPECT_EQ(MapSlurmState("REQUEUED"), JobState::kQueued);
  EXPECT_EQ(MapSlurmState("RUNNING"), JobState::kRunning);
  EXPECT_EQ(MapSlurmState("COMPLETING"), JobState::kRunning);
  EXPECT_EQ(MapSlurmState("SUSPENDED"), JobState::kRunning);
  EXPECT_EQ(MapSlurmState("COMPLETED"), JobState::kSucceeded);
  for (const char* f : {"FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}) {
    EXPECT_EQ(MapSlurmState(f), JobState::kFailed) << f;
  }
  EXPECT_EQ(MapSlurmState("TIMEOUT"), JobState::kTimedOut);
  EXPECT_EQ(MapSlurmState("CANCELLED by 1000"), JobState::kCancelled);
  EXPECT_EQ(MapSlurmState("cancelled"), JobState::kCancelled);
  EXPECT_EQ(MapSlurmState("PREEMPTED"), JobState::kPreempted);
  EXPECT_EQ(MapSlurmState("WHATEVER"), std::nullopt);
  EXPECT_EQ(MapSlurmState(""), std::nullopt);
}

SlurmRecord Rec(std::string state, int exit_code, std::string reason = "None") {
  SlurmRecord r;
  r.job_id = "7";
  r.state_text = state;
  r.state = state.substr(0, state.find(' '));
  r.exit_code = exit_code;
  r.reason = std::move(reason);
  return r;
}

TEST(SlurmParse, CombineSlurmAndExitFile) {
  SlurmRecord cancelled = Rec("CANCELLED by 0", 143);
  auto o = Combine(&cancelled, std::nullopt, false);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->state, JobState::kCancelled);
  EXPECT_EQ(o->exit_code, 143);
  EXPECT_EQ(o->reason, "CANCELLED by 0");

  SlurmRecord failed = Rec("FAILED", 1, "NonZeroExitCode");
  o = Combine(&failed, 3, false);  // the exit file wins
  EXPECT_EQ(o->state, JobState::kFailed);
  EXPECT_EQ(o->exit_code, 3);
  EXPECT_EQ(o->reason, "NonZeroExitCode");

  SlurmRecord timeout = Rec("TIMEOUT", 143, "TimeLimit");
  o = Combine(&timeout, 143, false);
  EXPECT_EQ(o->state, JobState::kTimedOut);
  EXPECT_EQ(o->exit_code, 124);

  SlurmRecord done = Rec("COMPLETED", -1);
  o = Combine(&done, std::nullopt, false);
  EXPECT_EQ(o->state, JobState::kSucceeded);
  EXPECT_EQ(o->exit_code, 0);

  SlurmRecord running = Rec("RUNNING", 0);
  o = Combine(&running, 0, false);  // the script is between mv and exit
  EXPECT_EQ(o->state, JobState::kRunning);
  EXPECT_EQ(o->exit_code, -1);

  SlurmRecord pending = Rec("PENDING", 0, "Priority");
  o = Combine(&pending, std::nullopt, false);
  EXPECT_EQ(o->state, JobState::kQueued);
  EXPECT_EQ(o->reason, "Priority");

  SlurmRecord odd = Rec("SOMETHING_NEW", 0);
  o = Combine(&odd, std::nullopt, false);
  EXPECT_EQ(o->state, JobState::kRunning);
}

TEST(SlurmParse, CombineWithoutSlurmRecord) {
  EXPECT_EQ(Combine(nullptr, std::nullopt, false), std::nullopt);
  auto o = Combine(nullptr, 0, false);
  EXPECT_EQ(o->state, JobState::kSucceeded);
  EXPECT_EQ(o->exit_code, 0);
  o = Combine(nullptr, 2, false);
  EXPECT_EQ(o->state, JobState::kFailed);
  EXPECT_EQ(o->exit_code, 2);
  o = Combine(nullptr, 143, true);
  EXPECT_EQ(o->state, JobState::kCancelled);
  EXPECT_EQ(o->exit_code, 143);
}

TEST(SlurmParse, CombineAfterOurCancel) {
  // A step that handles SIGTERM and exits 143 is FAILED to Slurm.
  SlurmRecord failed = Rec("FAILED", 143, "NonZeroExitCode");
  auto o = Combine(&failed, 143, true);
  EXPECT_EQ(o->state, JobState::kCancelled);
  EXPECT_EQ(o->exit_code, 143);
  // One that finished before the signal keeps its success.
  SlurmRecord done = Rec("COMPLETED", 0);
  EXPECT_EQ(Combine(&done, 0, true)->state, JobState::kSucceeded);
  // Still running after the TERM: running until it is gone.
  SlurmRecord running = Rec("RUNNING", 0);
  EXPECT_EQ(Combine(&running, std::nullopt, true)->state, JobState::kRunning);
}

TEST(SlurmParse, SbatchJobId) {
  EXPECT_EQ(ParseSbatchJobId("123\n").value(), "123");
  EXPECT_EQ(ParseSbatchJobId("123;gantrytest\n").value(), "123");
  EXPECT_FALSE(ParseSbatchJobId("").ok());
  EXPECT_FALSE(ParseSbatchJobId("Submitted batch job 123\n").ok());
  EXPECT_FALSE(ParseSbatchJobId(";cluster").ok());
}

TEST(SlurmParse, ErrorClasses) {
  EXPECT_TRUE(IsTransientSlurmError(
      "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation"));
  EXPECT_TRUE(IsTransientSlurmError(
      "sbatch: error: Batch job submission failed: Unable to contact slurm controller "
      "(connect failure)"));
  EXPECT_FALSE(IsTransientSlurmError(
      "sbatch: error: Batch job submission failed: Invalid partition name specified"));
  EXPECT_TRUE(IsAccountingDisabled("Slurm accounting storage is disabled\n"));
  EXPECT_FALSE(IsAccountingDisabled("sacct: error: Problem talking to the database"));
  EXPECT_TRUE(IsInvalidJobId("slurm_load_jobs error: Invalid job id specified\n"));
}

// ---------------------------------------------------------------- sbatch argv

Launch BaseLaunch() {
  Launch l;
  l.key = "train/trial-0003";
  l.run_id = "r42";
  l.argv = {"python3", "train.py"};
  l.workdir = "/work/proj";
  l.log_path = "/work/run/logs/train.log";
  l.exit_path = "/work/run/exit/train";
  return l;
}

TEST(SlurmParse, SbatchArgsForResources) {
  Launch l = BaseLaunch();
  l.resources.gpus = 2;
  l.resources.cpus = 3.5;
  l.resources.memory_bytes = 1536ull * 1024 * 1024 + 1;  // a byte over 1.5 GiB
  l.resources.time = seconds(61);
  l.resources.partition = "gpu";
  l.resources.account = "proj1";
  l.resources.slurm_args = {"--qos=high", "--constraint=a100"};
  auto a = SbatchArgs(l, "sbatch", "/work/run/logs/train.log.sbatch.sh", true);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  std::vector<std::string> want = {"sbatch",
                                   "--parsable",
                                   "--job-name",
                                   "gantry-r42",
                                   "--comment",
                                   "train/trial-0003",
                                   "--output",
                                   "/work/run/logs/train.log",
                                   "--open-mode=append",
                                   "--export=ALL",
                                   "--chdir",
                                   "/work/proj",
                                   "--requeue",
                                   "--gres=gpu:2",
                                   "--cpus-per-task=4",
                                   "--mem=1537M",
                                   "--time=2",
                                   "-p",
                                   "gpu",
                                   "-A",
                                   "proj1",
                                   "--qos=high",
                                   "--constraint=a100",
                                   "/work/run/logs/train.log.sbatch.sh"};
  EXPECT_EQ(*a, want);
}

TEST(SlurmParse, SbatchArgsMinimalAndTimeoutAsTime) {
  Launch l = BaseLaunch();
  l.workdir = "";
  l.resources.cpus = 0;
  l.timeout = milliseconds(90'001);  // 90.001 s -> 2 minutes
  l.log_path = "/logs/100%/a.log";
  auto a = SbatchArgs(l, "/opt/slurm/bin/sbatch", "s.sh", false);
  ASSERT_TRUE(a.ok());
  std::vector<std::string> want = {"/opt/slurm/bin/sbatch",
                                   "--parsable",
                                   "--job-name",
                                   "gantry-r42",
                                   "--comment",
                                   "train/trial-0003",
                                   "--output",
                                   "/logs/100%%/a.log",
                                   "--open-mode=append",
                                   "--export=ALL",
                                   "--no-requeue",
                                   "--time=2",
                                   "s.sh"};
  EXPECT_EQ(*a, want);
  // resources.time wins over the timeout.
  l.resources.time = seconds(600);
  EXPECT_EQ((*SbatchArgs(l, "sbatch", "s.sh", false))[11], "--time=10");
  l.log_path = "C:\\logs\\a.log";
  EXPECT_EQ(SbatchArgs(l, "sbatch", "s.sh", false).status().code(), StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------- batch script

TEST(SlurmParse, ShellQuote) {
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
}

// Runs the script with the real /bin/sh; returns its exit status.
int RunScript(const std::string& script_path) {
  auto r = RunSubprocess({"/bin/sh", script_path}, std::chrono::seconds(30));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->exit_code : -1;
}

TEST(SlurmParse, BatchScriptPassesArgvAndEnvExactly) {
  gantry::testing::TempDir dir("gantry-slurm-script");
  Launch l = BaseLaunch();
  l.workdir = dir.Path("work dir");
  ASSERT_EQ(::mkdir(l.workdir.c_str(), 0755), 0);
  l.exit_path = dir.Path("exit code");
  l.log_path = dir.Path("log");
  const std::vector<std::string> args = {
      "with space", "it's", "\"double\"", "$HOME and `id` and $(id)", "line1\nline2", "",
      "\\n",        "*",    "-e"};
  // The program writes each argument, NUL-terminated, and the env value to
  // files in its working directory (relative paths: the cd must have worked).
  l.argv = {"/bin/sh", "-c",
            "for a in \"$@\"; do printf '%s\\0' \"$a\"; done > args.bin; "
            "printf '%s' \"$GANTRY_X\" > env.txt; exit 3",
            "sh"};
  l.argv.insert(l.argv.end(), args.begin(), args.end());
  l.env = {{"GANTRY_X", "v 'q' \"d\" $HOME\nnext"}};
  auto script = BatchScript(l);
  ASSERT_TRUE(script.ok()) << script.status().ToString();
  const std::string path = dir.Write("job.sh", *script);

  EXPECT_EQ(RunScript(path), 3);
  EXPECT_EQ(SplitNul(ReadAll(l.workdir + "/args.bin")), args);
  EXPECT_EQ(ReadAll(l.workdir + "/env.txt"), "v 'q' \"d\" $HOME\nnext");
  EXPECT_EQ(ReadAll(l.exit_path), "3\n");
  // Only the exit file is left next to it: the temporary was renamed.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 3);  // "work dir", "exit code", job.sh
}

TEST(SlurmParse, BatchScriptRunsProgramsNotBuiltins) {
  gantry::testing::TempDir dir("gantry-slurm-script");
  Launch l = BaseLaunch();
  l.workdir = dir.path();
  l.exit_path = dir.Path("exit");
  // sh's builtin echo turns "\n" into a newline; /bin/echo (coreutils) prints
  // it as it is, as the local backend's posix_spawnp would run it.
  l.argv = {"echo", "a\\nb"};
  const std::string path = dir.Write("job.sh", *BatchScript(l));
  auto r = RunSubprocess({"/bin/sh", path}, std::chrono::seconds(30));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, "a\\nb\n");
  EXPECT_EQ(ReadAll(l.exit_path), "0\n");
}

TEST(SlurmParse, BatchScriptRecordsMissingProgramAndWorkdir) {
  gantry::testing::TempDir dir("gantry-slurm-script");
  Launch l = BaseLaunch();
  l.workdir = dir.path();
  l.exit_path = dir.Path("exit");
  l.argv = {"gantry-no-such-program-xyz"};
  std::string path = dir.Write("job.sh", *BatchScript(l));
  EXPECT_EQ(RunScript(path), 127);
  EXPECT_EQ(ReadAll(l.exit_path), "127\n");

  l.workdir = dir.Path("missing");
  path = dir.Write("job2.sh", *BatchScript(l));
  EXPECT_EQ(RunScript(path), 126);
  EXPECT_EQ(ReadAll(l.exit_path), "126\n");
}

TEST(SlurmParse, BatchScriptOutlivesSigtermAndRecordsTheStep) {
  // What scancel --signal=TERM --full does: TERM to the shell and the step.
  gantry::testing::TempDir dir("gantry-slurm-script");
  Launch l = BaseLaunch();
  l.workdir = dir.path();
  l.exit_path = dir.Path("exit");
  // The step is the subshell that exec'd it, so its $PPID is the batch shell.
  l.argv = {"/bin/sh", "-c", "trap 'exit 7' TERM; kill -TERM $PPID $$; sleep 5"};
  const std::string path = dir.Write("job.sh", *BatchScript(l));
  EXPECT_EQ(RunScript(path), 7);
  EXPECT_EQ(ReadAll(l.exit_path), "7\n");
}

TEST(SlurmParse, BatchScriptRejectsBadInput) {
  Launch l = BaseLaunch();
  l.env = {{"BAD-NAME", "x"}};
  EXPECT_EQ(BatchScript(l).status().code(), StatusCode::kInvalidArgument);
  l.env.clear();
  l.argv.clear();
  EXPECT_EQ(BatchScript(l).status().code(), StatusCode::kInvalidArgument);
  // A newline in the key cannot start an #SBATCH line of its own.
  l = BaseLaunch();
  l.key = "x\n#SBATCH --mem=1T";
  std::string s = *BatchScript(l);
  EXPECT_EQ(s.find("\n#SBATCH"), std::string::npos);
}

TEST(SlurmParse, SacctTimeFormat) {
  std::string t = SacctTime(std::chrono::system_clock::now());
  ASSERT_EQ(t.size(), 19u) << t;
  EXPECT_EQ(t[4], '-');
  EXPECT_EQ(t[10], 'T');
  EXPECT_EQ(t[16], ':');
}

}  // namespace
}  // namespace gantry::jobs::slurm
